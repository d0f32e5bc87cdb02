#!/usr/bin/env bash
# Three `dlock run --every 1s` on one key, as on three nodes: each tick of
# the Redis server's clock, exactly one of them runs the command.  The
# command appends "tick term fence dlock-pid" to a log; after ~4.5 s the
# log must hold no tick twice, no gap between consecutive ticks beyond one
# missed tick, at least 3 ticks, and DLOCK_FENCE equal to DLOCK_TERM.
# SIGTERM then ends each dlock with status 0 and the lease is resigned.
source "$(dirname "$0")/cli_testlib.sh"

new_role key
log=$WORK/runs.log
for n in 1 2 3; do
    spawn_bg "pid$n" "$DLOCK" run --every 1s --ttl 2s "$key" -- \
        sh -c 'echo "$DLOCK_TICK $DLOCK_TERM $DLOCK_FENCE $PPID" >>"$0"' \
        "$log" 2>>"$WORK/err"
done
wait_for 10 file_exists "$log"
started=$(now_ms)
sleep 3.5
for n in 1 2 3; do
    pid_var=pid$n
    kill -TERM "${!pid_var}"
done
for n in 1 2 3; do
    pid_var=pid$n
    wait_exit "${!pid_var}" 5
    expect_status 0 "$EXIT_STATUS" "dlock run --every $n after SIGTERM"
done
note "ran for $(($(now_ms) - started)) ms after the first run"

[ "$(cut -d' ' -f1 "$log" | sort | uniq -d)" = "" ] ||
    fail "a tick ran twice: $(cut -d' ' -f1 "$log" | sort | uniq -d)" \
        "(log: $(tr '\n' ';' <"$log"))"
count=$(wc -l <"$log")
[ "$count" -ge 3 ] || fail "at least 3 ticks ran in ~4.5 s, got $count"
prev=
while read -r tick term fence runner; do
    [[ $tick =~ ^[0-9]+$ && $term =~ ^[0-9]+$ ]] ||
        fail "DLOCK_TICK and DLOCK_TERM are numbers: '$tick' '$term'"
    [ "$fence" = "$term" ] || fail "DLOCK_FENCE ($fence) is the term ($term)"
    if [ -n "$prev" ]; then
        [ "$tick" -gt "$prev" ] || fail "tick $tick ran after tick $prev"
        [ "$((tick - prev))" -le 2 ] ||
            fail "ticks $prev to $tick: more than one tick missed"
    fi
    prev=$tick
done <"$log"
[ "$(rcli EXISTS "{leader:$key}")" = 0 ] ||
    fail "the lease {leader:$key} is resigned when the leader stops"
grep -q "^dlock: tick [0-9]* of $key (term [0-9]*): 'sh' started" \
    "$WORK/err" || fail "each run's start is said: $(head -3 "$WORK/err")"
ended="^dlock: tick [0-9]* of $key (term [0-9]*): 'sh' (pid [0-9]*) exited 0"
grep -q "$ended" \
    "$WORK/err" || fail "each run's exit is said: $(head -3 "$WORK/err")"
note "ticks: $(cut -d" " -f1 "$log" | tr "\n" " ")"
note "ok: $count ticks, $(cut -d' ' -f4 "$log" | sort -u | wc -l) runner(s)," \
    "first $(head -1 "$log" | cut -d' ' -f1), last $prev"
