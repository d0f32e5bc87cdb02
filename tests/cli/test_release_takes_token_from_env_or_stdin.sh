#!/usr/bin/env bash
# Issue 13, item 14: release and extend need not take the token on the
# command line, where every user of the host sees it in ps: it may come
# from DLOCK_TOKEN (as `dlock run` sets it) or from stdin ('-' or
# --token -).  Without any, they exit 64 and say where a token may come
# from.
source "$(dirname "$0")/cli_testlib.sh"

# take KEY: acquires KEY for 30 s and stores its token in TOKEN.
take() {
    local out
    out=$(dl acquire --ttl 30s "$1") || fail "acquire $1"
    TOKEN=$(sed -n 's/^token=\([0-9a-f]*\) .*/\1/p' <<<"$out")
    [ -n "$TOKEN" ] || fail "acquire printed a token: $out"
}

new_key key
take "$key"
DLOCK_TOKEN=$TOKEN dl release "$key" || fail "release with DLOCK_TOKEN"
is_free "$key" || fail "DLOCK_TOKEN released the key"

take "$key"
printf '%s\n' "$TOKEN" | dl extend --ttl 60s "$key" - ||
    fail "extend with the token on stdin ('-')"
pttl=$(rcli PTTL "$key")
[ "$pttl" -gt 30000 ] || fail "extend from stdin set the TTL (PTTL $pttl)"
printf '%s\n' "$TOKEN" | DLOCK_TOKEN=0123456789abcdef0123456789abcdef \
    dl release --token - "$key" || fail "release --token - (stdin wins)"
is_free "$key" || fail "release --token - released the key"

take "$key"
env -u DLOCK_TOKEN "$DLOCK" release "$key" 2>"$WORK/err" </dev/null
expect_status 64 $? "release without any token"
grep -q "DLOCK_TOKEN" "$WORK/err" ||
    fail "the message says where a token may come from: $(cat "$WORK/err")"
DLOCK_TOKEN=0123456789abcdef0123456789abcdef dl release "$key" 2>/dev/null
expect_status 76 $? "release with another token from DLOCK_TOKEN"
is_held "$key" || fail "a wrong DLOCK_TOKEN released nothing"

# Inside `dlock run`, the command's DLOCK_TOKEN is enough to extend.
new_key key2
dl run --ttl 5s "$key2" -- sh -c '"$0" extend --ttl 40s "$DLOCK_KEY" &&
    redis-cli -u "$REDIS_URL" PTTL "$DLOCK_KEY" >"$1"' "$DLOCK" \
    "$WORK/inner.pttl" || fail "a run whose command extends by DLOCK_TOKEN"
[ "$(cat "$WORK/inner.pttl")" -gt 30000 ] ||
    fail "the command's extend by DLOCK_TOKEN took: $(cat "$WORK/inner.pttl")"
note ok
