#!/usr/bin/env bash
# SIGTERM, SIGINT and SIGHUP sent to `dlock run` reach the command; dlock
# then exits with the command's status and releases the lock.  And if dlock
# itself is killed outright (SIGKILL, which no handler sees), the kernel
# kills the command too, since nothing renews the lock any more.
source "$(dirname "$0")/cli_testlib.sh"

# forward SIGNAL: the command records the signal it got and exits 7.
forward() {
    local sig=$1 key ready=$WORK/$1.ready got=$WORK/$1.got
    new_key key
    # Job control on: without it bash starts background jobs with SIGINT
    # ignored, and dlock (rightly) keeps a signal ignored that it was
    # started with.
    set -m
    spawn_bg RUN "$DLOCK" run "$key" -- sh -c \
        "trap 'echo $sig >\"$got\"; exit 7' $sig; touch '$ready';
         while :; do sleep 0.05; done"
    set +m
    wait_for 10 test -e "$ready"
    kill -s "$sig" "$RUN"
    wait_exit "$RUN" 10
    expect_status 7 "$EXIT_STATUS" "a run sent SIG$sig"
    [ "$(cat "$got" 2>/dev/null)" = "$sig" ] ||
        fail "the command got SIG$sig"
    is_free "$key" || fail "the key is released after SIG$sig"
}
forward TERM
forward INT
forward HUP

# A command that does not trap SIGTERM dies of it: 128 + 15.
new_key key
spawn_bg RUN "$DLOCK" run "$key" -- sh -c "touch '$WORK/plain.ready';
    exec sleep 30"
wait_for 10 test -e "$WORK/plain.ready"
kill -TERM "$RUN"
wait_exit "$RUN" 10
expect_status 143 "$EXIT_STATUS" "a run whose command dies of SIGTERM"

# A signal ignored when dlock started (nohup's SIGHUP) stays ignored, for
# dlock and for the command, as it would be without dlock.
sig_ignored() { # PID SIGNAL-NUMBER: is the signal in the process's SigIgn?
    local mask
    mask=$(sed -n 's/^SigIgn:[[:space:]]*//p' "/proc/$1/status")
    (((0x$mask >> ($2 - 1)) & 1))
}
new_key key
(trap '' HUP; exec "$DLOCK" run "$key" -- sh -c "echo \$\$ >'$WORK/nohup.pid';
    exec sleep 30") &
RUN=$!
BG_PIDS+=("$RUN")
wait_for 10 file_exists "$WORK/nohup.pid"
child=$(cat "$WORK/nohup.pid")
wait_for 5 grep -q '^Name:[[:space:]]*sleep' "/proc/$child/status"
sig_ignored "$RUN" 1 || fail "dlock keeps SIGHUP ignored"
sig_ignored "$child" 1 || fail "the command inherits SIGHUP ignored"
sig_ignored "$child" 15 && fail "the command does not inherit SIGTERM ignored"
kill -TERM "$RUN"
wait_exit "$RUN" 10
expect_status 143 "$EXIT_STATUS" "a nohup'd run sent SIGTERM"

# dlock killed outright: the command goes with it.
new_key key
spawn_bg RUN "$DLOCK" run "$key" -- sh -c "echo \$\$ >'$WORK/orphan.pid';
    exec sleep 30"
wait_for 10 file_exists "$WORK/orphan.pid"
child=$(cat "$WORK/orphan.pid")
# Disowned, so bash does not report the kill on stderr.
disown "$RUN"
kill -KILL "$RUN"
wait_for 10 not_running "$RUN"
forget_bg "$RUN"
wait_for 5 not_running "$child"
note "ok"
