#!/usr/bin/env bash
# SIGTERM to the leading `dlock leader` stops its command, resigns and
# exits 0: the other contender's command starts at once, far sooner than
# the 5 s lease would run out.  A command that exits by itself ends its
# dlock leader with the command's status, and resigns too.
source "$(dirname "$0")/cli_testlib.sh"

new_role key
started=$WORK/started
for n in 1 2; do
    spawn_bg "pid$n" "$DLOCK" leader --ttl 5s --grace 2s "$key" -- \
        sh -c 'echo "$$ $PPID" >>"$0"; trap "echo stopped >>$0.$$; exit 0" TERM
               while :; do sleep 0.05; done' "$started" 2>>"$WORK/err"
done
wait_for 10 has_lines "$started" 1
read -r child1 leader1 <"$started"
if [ "$leader1" = "$pid1" ]; then other=$pid2; else other=$pid1; fi

kill -TERM "$leader1"
stopped_at=$(now_ms)
wait_exit "$leader1" 5
expect_status 0 "$EXIT_STATUS" "the leader stopped by SIGTERM"
[ -s "$started.$child1" ] ||
    fail "the command got SIGTERM before its dlock ended"
not_running "$child1" || fail "the command (pid $child1) ended with its dlock"
wait_for 3 has_lines "$started" 2
took=$(($(now_ms) - stopped_at))
read -r child2 leader2 < <(sed -n 2p "$started")
[ "$leader2" = "$other" ] ||
    fail "the other dlock ($other) took over, not $leader2"
[ "$took" -lt 1500 ] ||
    fail "takeover at once after a resignation (lease 5 s), took $took ms"
grep -q "^dlock: got signal 15: stopping 'sh' (pid $child1)" "$WORK/err" ||
    fail "stderr says why the command stopped: $(cat "$WORK/err")"
note "takeover ${took} ms after SIGTERM (lease 5000 ms)"

kill -TERM "$other"
wait_exit "$other" 5
expect_status 0 "$EXIT_STATUS" "the second leader stopped by SIGTERM"

# A command that ends by itself: dlock exits with its status and resigns.
new_role key
dl leader --ttl 5s "$key" -- sh -c 'exit 3' 2>"$WORK/err3"
expect_status 3 $? "a leader whose command exits 3"
[ "$(rcli EXISTS "{leader:$key}")" = 0 ] ||
    fail "the lease is resigned when the command ends by itself"
grep -q "^dlock: leader of $key (term [0-9]*): 'sh' (pid [0-9]*) exited 3" \
    "$WORK/err3" || fail "stderr says how it ended: $(cat "$WORK/err3")"
note "ok"
