#!/usr/bin/env bash
# The command learns the lease's safe-until deadline: DLOCK_VALID_UNTIL
# (epoch ms, at start, never past the TTL from now) and
# DLOCK_VALID_UNTIL_FILE, which moves forward as the watchdog renews the
# lock and is removed with its folder when the run ends.  A degraded
# (--fail-open) run has no deadline to give.
source "$(dirname "$0")/cli_testlib.sh"

new_key key
before=$(now_ms)
dl run --ttl 3s "$key" -- sh -c '
    echo "$DLOCK_VALID_UNTIL" >"$0/env"
    echo "$DLOCK_VALID_UNTIL_FILE" >"$0/path"
    cat "$DLOCK_VALID_UNTIL_FILE" >"$0/first"
    sleep 1.8
    cat "$DLOCK_VALID_UNTIL_FILE" >"$0/later"' "$WORK" ||
    fail "the run succeeds"
env_until=$(cat "$WORK/env")
first=$(cat "$WORK/first")
later=$(cat "$WORK/later")
path=$(cat "$WORK/path")
[ "$env_until" -gt "$((before + 2000))" ] &&
    [ "$env_until" -le "$(($(now_ms) + 3000))" ] ||
    fail "DLOCK_VALID_UNTIL=$env_until is about 3 s after the start ($before)"
[ "$first" -ge "$((env_until - 50))" ] && [ "$first" -le "$((env_until + 50))" ] ||
    fail "the file starts at DLOCK_VALID_UNTIL ($first vs $env_until)"
[ "$later" -gt "$((first + 500))" ] ||
    fail "the file moved with the renewals (first $first, later $later)"
[ ! -e "$path" ] && [ ! -e "$(dirname "$path")" ] ||
    fail "the deadline file and its folder are removed: $path"

# No deadline when degraded: nothing to promise.
out=$(dl run --fail-open --url redis://127.0.0.1:1/0 --quiet "$key" -- \
    sh -c 'echo "until=${DLOCK_VALID_UNTIL-unset} file=${DLOCK_VALID_UNTIL_FILE-unset}"' 2>/dev/null)
[ "$out" = "until=unset file=unset" ] ||
    fail "a degraded run has no deadline variables: $out"
note ok
