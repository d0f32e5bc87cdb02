#!/usr/bin/env bash
# The lock across several commands: acquire prints token, fence and TTL;
# status shows it held with that fence (text and JSON); extend changes the
# TTL only for the right token; release deletes it only for the right
# token (76 otherwise, and the lock stays); a new grant has a larger fence.
source "$(dirname "$0")/cli_testlib.sh"

new_key key
# TTLs are long enough that a loaded machine cannot expire the lock
# between steps; nothing here waits for them.
out=$(dl acquire --ttl 30s "$key")
expect_status 0 $? "acquire of a free key"
[[ $out =~ ^token=([0-9a-f]{32})\ fence=([0-9]+)\ ttl_ms=30000$ ]] ||
    fail "acquire prints 'token=<32 hex> fence=<n> ttl_ms=30000', got '$out'"
token=${BASH_REMATCH[1]}
fence=${BASH_REMATCH[2]}
[ "$fence" -gt 0 ] || fail "the fence is > 0"
[ "$(rcli GET "$key")" = "$token" ] || fail "Redis holds the printed token"

status=$(dl status "$key")
[ "$(printf '%s\n' "$status" | sed -n 1p)" = "key: $key" ] ||
    fail "status names the key: $status"
printf '%s\n' "$status" | grep -qx 'held: yes' ||
    fail "status says held: $status"
printf '%s\n' "$status" | grep -qx "last_fence: $fence" ||
    fail "status shows fence $fence: $status"
ttl=$(printf '%s\n' "$status" | sed -n 's/^ttl_ms: //p')
[ "$ttl" -gt 0 ] && [ "$ttl" -le 30000 ] ||
    fail "the TTL is 0..30000 ms, got $ttl"
json=$(dl status --json "$key")
printf '%s' "$json" | python3 -c '
import json, sys
o = json.load(sys.stdin)
key, fence = sys.argv[1], int(sys.argv[2])
assert o["key"] == key and o["held"] is True, o
assert o["last_fence"] == fence and 0 < o["ttl_ms"] <= 30000, o
' "$key" "$fence" || fail "status --json agrees: $json"

other=fedcba9876543210fedcba9876543210
dl extend --ttl 90s "$key" "$other" 2>/dev/null
expect_status 76 $? "extend with another token"
dl extend --ttl 90s "$key" "$token"
expect_status 0 $? "extend with the holder's token"
pttl=$(rcli PTTL "$key")
[ "$pttl" -gt 30000 ] || fail "extend set the TTL past 30 s, PTTL is $pttl"

dl release "$key" "$other" 2>"$WORK/err"
expect_status 76 $? "release with another token"
grep -q '^dlock: lock .* is not held by token' "$WORK/err" ||
    fail "stderr explains the refused release: $(cat "$WORK/err")"
is_held "$key" || fail "a refused release leaves the lock"
dl release "$key" "$token"
expect_status 0 $? "release with the holder's token"
is_free "$key" || fail "the key is free after release"
dl status "$key" | grep -qx "last_fence: $fence" ||
    fail "the last fence outlives the lock"
dl release "$key" "$token" 2>/dev/null
expect_status 76 $? "a second release"
dl extend "$key" "$token" 2>/dev/null
expect_status 76 $? "extend after release"

out=$(dl acquire --ttl 2s "$key")
[[ $out =~ fence=([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -gt "$fence" ] ||
    fail "the next grant's fence is larger than $fence: $out"
note "ok"
