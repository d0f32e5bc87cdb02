#!/usr/bin/env bash
# With --wait, a second `dlock run` waits for the holder and runs after it:
# the two commands' intervals, stamped by the commands themselves, do not
# overlap, and the second grant has the larger fence.  A third run whose
# wait is shorter than the holder's work gives up with 75.  The holder
# works 1 s (times TIME_SCALE: the third dlock must reach Redis within it).
source "$(dirname "$0")/cli_testlib.sh"

new_key key
# Each command stamps its start and end (ns) and its fence.
stamp='echo "$(date +%s%N) $DLOCK_FENCE" >"$0.start"; sleep "$1";
       date +%s%N >"$0.end"'
spawn_bg first "$DLOCK" run --ttl 5s "$key" -- sh -c "$stamp" "$WORK/a" \
    "$TIME_SCALE"
wait_for 10 file_exists "$WORK/a.start"

# Waits less than the first's remaining work: turned away.
t0=$(now_ms)
dl run --wait 200ms "$key" -- touch "$WORK/c.ran" 2>/dev/null
expect_status 75 $? "a run whose wait ends before the holder"
elapsed=$(($(now_ms) - t0))
[ "$elapsed" -ge 150 ] || fail "--wait 200ms gave up after ${elapsed} ms"
[ ! -e "$WORK/c.ran" ] || fail "the impatient run's command ran"

spawn_bg second "$DLOCK" run --ttl 5s --wait "$((10 * TIME_SCALE))s" "$key" \
    -- sh -c "$stamp" "$WORK/b" 0
wait_exit "$first" $((15 * TIME_SCALE))
expect_status 0 "$EXIT_STATUS" "the first run"
wait_exit "$second" $((15 * TIME_SCALE))
expect_status 0 "$EXIT_STATUS" "the waiting run"

read -r a_start a_fence <"$WORK/a.start"
read -r b_start b_fence <"$WORK/b.start"
a_end=$(cat "$WORK/a.end")
[ "$a_end" -le "$b_start" ] ||
    fail "the waiter started at $b_start, before the holder ended at $a_end"
[ "$a_start" -lt "$a_end" ] || fail "the first interval is sane"
[ "$b_fence" -gt "$a_fence" ] ||
    fail "the second fence $b_fence is larger than the first $a_fence"
note "ok: the waiter started $(((b_start - a_end) / 1000000)) ms after" \
    "the holder ended"
