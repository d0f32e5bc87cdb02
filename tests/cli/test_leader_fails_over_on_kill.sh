#!/usr/bin/env bash
# Two `dlock leader --ttl 1s` contenders for one key: exactly one runs its
# command.  SIGKILL of the leading dlock (it cannot resign) kills its
# command too (the kernel's parent-death signal), and the other node's
# command starts, normally within one TTL (+ the 200 ms poll and process
# start), in a larger term.
source "$(dirname "$0")/cli_testlib.sh"

new_role key
started=$WORK/started
# Each command notes "its pid, its dlock's pid, its term", then waits.
for n in 1 2; do
    spawn_bg "pid$n" "$DLOCK" leader --ttl 1s --grace 500ms "$key" -- \
        sh -c 'echo "$$ $PPID $DLOCK_TERM" >>"$0"; exec sleep 30' \
        "$started" 2>>"$WORK/err"
done
wait_for 10 has_lines "$started" 1
# Past one TTL with both campaigning: still only one command started.
sleep 1.3
has_lines "$started" 1 ||
    fail "exactly one command runs: $(tr "\n" ";" <"$started")"
read -r child1 leader1 term1 <"$started"
[ "$leader1" = "$pid1" ] || [ "$leader1" = "$pid2" ] ||
    fail "the command's parent $leader1 is one of the dlocks ($pid1 $pid2)"
[[ $(leader_of "$key") == *:"$leader1" ]] ||
    fail "Redis names dlock $leader1 as the leader, not '$(leader_of "$key")'"
if [ "$leader1" = "$pid1" ]; then other=$pid2; else other=$pid1; fi

kill -KILL "$leader1"
killed_at=$(now_ms)
wait_exit "$leader1" 5
wait_for 5 not_running "$child1"
# Takeover comes within one TTL plus the poll and the process start; the
# bound is 5 s, so that a loaded machine cannot fail the test, and how
# long it took is noted.
wait_for 5 has_lines "$started" 2
took=$(($(now_ms) - killed_at))
read -r child2 leader2 term2 < <(sed -n 2p "$started")
[ "$leader2" = "$other" ] ||
    fail "the other dlock ($other) took over, not $leader2"
[ "$term2" -gt "$term1" ] || fail "the new term $term2 is above $term1"
kill -0 "$child2" 2>/dev/null || fail "the new leader's command runs"
note "takeover ${took} ms after SIGKILL (TTL 1000 ms), term $term1 -> $term2"

kill -TERM "$other"
wait_exit "$other" 5
expect_status 0 "$EXIT_STATUS" "dlock leader stopped by SIGTERM"
wait_for 5 not_running "$child2"
note "ok"
