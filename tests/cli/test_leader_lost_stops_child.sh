#!/usr/bin/env bash
# When `dlock leader` loses its leadership while the command runs (here:
# the lease deleted behind its back, so the next renewal, within ttl/3,
# finds it gone), the command is stopped with SIGTERM and dlock campaigns
# again: it wins the free role back and starts the command anew, in a
# larger term.
source "$(dirname "$0")/cli_testlib.sh"

new_role key
started=$WORK/started
spawn_bg pid "$DLOCK" leader --ttl 1500ms --grace 1s "$key" -- \
    sh -c 'echo "$$ $DLOCK_TERM" >>"$0"; exec sleep 30' "$started" \
    2>"$WORK/err"
wait_for 10 has_lines "$started" 1
read -r child1 term1 <"$started"
[ "$(rcli DEL "{leader:$key}")" = 1 ] || fail "the lease existed to be deleted"
lost_at=$(now_ms)
# The next renewal (ttl/3, 500 ms) finds the lease gone; the bound is two
# leases, not one renewal, so that a loaded machine, whose timers and
# processes run late, cannot fail the test.  How long it took is noted.
wait_for 3 not_running "$child1"
stopped=$(($(now_ms) - lost_at))
wait_for 5 has_lines "$started" 2
read -r child2 term2 < <(sed -n 2p "$started")
[ "$term2" -gt "$term1" ] || fail "the new term $term2 is above $term1"
grep -q "^dlock: leadership of $key was lost: stopping 'sh' (pid $child1)" \
    "$WORK/err" ||
    fail "stderr says the leadership was lost: $(cat "$WORK/err")"
kill -TERM "$pid"
wait_exit "$pid" 5
expect_status 0 "$EXIT_STATUS" "dlock leader stopped by SIGTERM"
not_running "$child2" || fail "the second command ended with dlock"
note "ok: stopped ${stopped} ms after the lease was deleted;" \
    "term $term1 -> $term2"
