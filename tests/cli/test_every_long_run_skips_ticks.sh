#!/usr/bin/env bash
# A `dlock run --every 500ms` whose command takes 1.2 s, on two nodes: the
# runs never overlap (each starts after the previous one ended, whichever
# node runs it), the ticks that began during a run are skipped rather than
# run late, and the next run's start says how many were skipped.  A run
# that dlock stops (on SIGTERM here, or when its leadership's renewal is
# late, as on a loaded machine) writes "stopped": it ended there.  Times
# are bash's own (microseconds), since a date(1) started just as dlock
# stops the command's group would die with it.
source "$(dirname "$0")/cli_testlib.sh"

new_role key
log=$WORK/runs.log
for n in 1 2; do
    spawn_bg "pid$n" "$DLOCK" run --every 500ms --ttl 2s "$key" -- \
        bash -c 'trap "echo stopped $DLOCK_TICK \${EPOCHREALTIME/./} >>$0; exit" TERM
                 echo "start $DLOCK_TICK ${EPOCHREALTIME/./}" >>"$0"; sleep 1.2
                 echo "end $DLOCK_TICK ${EPOCHREALTIME/./}" >>"$0"' "$log" \
        2>>"$WORK/err"
done
ended_runs() {
    [ -s "$log" ] && [ "$(grep -c '^end' "$log")" -ge "$1" ]
}
wait_for 10 ended_runs 2
kill -TERM "$pid1" "$pid2"
for n in 1 2; do
    pid_var=pid$n
    wait_exit "${!pid_var}" 5
    expect_status 0 "$EXIT_STATUS" "dlock run --every $n after SIGTERM"
done

# Lines alternate start, then end or stopped: no run began before the
# previous one ended.  A run the test's SIGTERM ends may have no end line.
prev_what=end prev_tick= prev_end=0
while read -r what tick at; do
    [ "$what" = stopped ] && what=end stopped=1 || stopped=
    [ "$what" != "$prev_what" ] ||
        fail "runs overlap: two '$what' lines in a row (log:" \
            "$(tr '\n' ';' <"$log"))"
    if [ "$what" = start ]; then
        [ "$at" -ge "$prev_end" ] || fail "tick $tick started before the end"
        # Only a run that lasted its 1.2 s covers the next two ticks.
        if [ -n "$prev_tick" ] && [ -z "$prev_stopped" ]; then
            [ "$((tick - prev_tick))" -ge 3 ] ||
                fail "the ticks during a 1.2 s run are skipped:" \
                    "tick $tick came $((tick - prev_tick)) after $prev_tick"
        fi
        prev_tick=$tick
    else
        prev_end=$at prev_stopped=$stopped
    fi
    prev_what=$what
done <"$log"
grep -q "^dlock: tick [0-9]* of $key: [0-9]* tick(s) skipped before it" \
    "$WORK/err" || fail "the next run says how many ticks were skipped:" \
    "$(cat "$WORK/err")"
note "ok: runs at ticks $(awk '$1 == "start" {print $2}' "$log" | tr '\n' ' ')"
