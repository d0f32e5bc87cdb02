#!/usr/bin/env bash
# A second `dlock run` on a held key, without --wait, exits 75 at once
# (well before the holder ends) without running its command; -E changes
# the code, --quiet drops the message; the holder is unaffected.
source "$(dirname "$0")/cli_testlib.sh"

new_key key
release=$WORK/release
# The holder works until the test lets it go.
spawn_bg holder "$DLOCK" run --ttl 10s "$key" -- sh -c \
    "touch '$WORK/holding'; while [ ! -e '$release' ]; do sleep 0.05; done"
wait_for 10 test -e "$WORK/holding"

t0=$(now_ms)
dl run "$key" -- touch "$WORK/second-ran" 2>"$WORK/err"
status=$?
elapsed=$(($(now_ms) - t0))
expect_status 75 "$status" "a busy key without --wait"
[ "$elapsed" -lt 2000 ] || fail "the busy exit took ${elapsed} ms, not at once"
[ ! -e "$WORK/second-ran" ] || fail "the second command ran while busy"
grep -q '^dlock: .*held by another owner' "$WORK/err" ||
    fail "stderr says the lock is held: $(cat "$WORK/err")"
[ "$(wc -l <"$WORK/err")" -eq 1 ] ||
    fail "one line on stderr: $(cat "$WORK/err")"

dl run -E 9 "$key" -- true 2>/dev/null
expect_status 9 $? "--conflict-exit-code 9 on a busy key"
dl run --quiet --conflict-exit-code 0 "$key" -- touch "$WORK/second-ran" \
    2>"$WORK/err"
expect_status 0 $? "--conflict-exit-code 0 on a busy key"
[ ! -s "$WORK/err" ] ||
    fail "--quiet prints nothing when busy: $(cat "$WORK/err")"
[ ! -e "$WORK/second-ran" ] || fail "-E 0 must not run the command"
dl acquire "$key" >/dev/null 2>&1
expect_status 75 $? "dlock acquire on a busy key"

is_held "$key" || fail "the holder still holds the key"
touch "$release"
wait_exit "$holder" 15
expect_status 0 "$EXIT_STATUS" "the holder"
is_free "$key" || fail "the key is free after the holder ended"
note "ok"
