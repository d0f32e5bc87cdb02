#!/usr/bin/env bash
# Issue 13, item 2: everything `dlock run` started stops with it, not only
# its direct child: a shell's children, a process that left the group with
# setsid, and what the command left running when it ended.  Also when
# dlock itself is SIGKILLed (the guardian kills the group), and when dlock
# is SIGSTOPped (the guardian kills the group at the lease's deadline, and
# dlock reports it once continued).
source "$(dirname "$0")/cli_testlib.sh"

# start_run KEY TTL SCRIPT: `dlock run` of sh -c SCRIPT, whose grandchild
# writes its pid to $WORK/gc-N.pid; sets RUN, GC, GC_FILE.
start_run() {
    local key=$1 ttl=$2 script=$3
    GC_FILE=$WORK/gc-$KEY_SEQ.pid
    spawn_bg RUN "$DLOCK" run --ttl "$ttl" --grace 300ms "$key" -- \
        sh -c "$script" "$GC_FILE" >/dev/null 2>>"$WORK/err"
    wait_for 10 file_exists "$GC_FILE"
    GC=$(cat "$GC_FILE")
    BG_PIDS+=("$GC")        # killed at exit if dlock failed to
    wait_for 5 is_sleeping "$GC"
}

is_sleeping() {
    grep -q '^Name:[[:space:]]*sleep' "/proc/$1/status" 2>/dev/null
}

gone() {
    not_running "$1"
}

# A grandchild under a shell: sleep, started in the background.
GRANDCHILD='sh -c "echo \$\$ >$0; exec sleep 30" & wait'
# A grandchild that left the command's process group.
ESCAPED='setsid sh -c "echo \$\$ >$0; exec sleep 30" & wait'

# 1. The key is deleted behind dlock's back: the grandchild dies too.
new_key key
start_run "$key" 1500ms "$GRANDCHILD"
[ "$(rcli DEL "$key")" = 1 ] || fail "the key existed to be deleted"
wait_exit "$RUN" 5
expect_status 76 "$EXIT_STATUS" "a run whose key was deleted"
wait_for 2 gone "$GC"
note "lost lock: grandchild stopped"

# 2. The same for a grandchild that called setsid.
new_key key
start_run "$key" 1500ms "$ESCAPED"
[ "$(rcli DEL "$key")" = 1 ] || fail "the key existed to be deleted"
wait_exit "$RUN" 5
expect_status 76 "$EXIT_STATUS" "a run whose key was deleted (setsid)"
wait_for 2 gone "$GC"
note "lost lock: grandchild that left the group stopped"

# 3. The command ends and leaves a background grandchild: it is stopped
# before the lock is released, and the run keeps the command's status.
new_key key
dl run --ttl 5s --grace 300ms "$key" -- sh -c \
    'sh -c "echo \$\$ >$0; exec sleep 30" & sleep 0.3; exit 3' \
    "$WORK/left.pid" >/dev/null 2>>"$WORK/err"
expect_status 3 $? "a run whose command left a process behind"
left=$(cat "$WORK/left.pid")
BG_PIDS+=("$left")
gone "$left" || fail "the process left behind (pid $left) still runs"
is_free "$key" || fail "the key is released"
note "leftover: stopped before the release"

# 4. dlock is SIGKILLed: the guardian kills the whole group at once.
new_key key
start_run "$key" 30s "$GRANDCHILD"
disown "$RUN"
kill -KILL "$RUN"
wait_for 10 not_running "$RUN"
forget_bg "$RUN"
wait_for 3 gone "$GC"
note "dlock SIGKILLed: grandchild stopped"

# 5. dlock is SIGSTOPped: nothing renews the lock, and the guardian kills
# the group by the lease's deadline, before another node can take the key:
# a contender waiting for the key finds the grandchild gone when its own
# command starts.
new_key key
start_run "$key" 2s "$GRANDCHILD"
kill -STOP "$RUN"
stopped_at=$(now_ms)
spawn_bg contender "$DLOCK" run --ttl 2s --wait forever "$key" -- sh -c '
    if [ -r /proc/$1/status ] &&
       ! grep -q "^State:[[:space:]]*Z" /proc/$1/status; then
        echo alive >"$0"
    else
        echo dead >"$0"
    fi' "$WORK/contender" "$GC" 2>>"$WORK/err"
wait_for 10 file_exists "$WORK/contender"
took=$(($(now_ms) - stopped_at))
kill -CONT "$RUN"
[ "$(cat "$WORK/contender")" = dead ] ||
    fail "the grandchild of a stopped dlock still ran when the contender's" \
        "command started"
wait_exit "$contender" 10
expect_status 0 "$EXIT_STATUS" "the contender"
wait_exit "$RUN" 10
expect_status 76 "$EXIT_STATUS" "a stopped-then-continued run"
note "dlock SIGSTOPped: grandchild dead before the contender started" \
    "(${took} ms after the stop)"

# 6. dlock is SIGSTOPped while the server keeps its key (given a long TTL
# behind dlock's back): the guardian still kills the group at the lease's
# deadline, and dlock, continued, exits 76 (the lease ran out while the
# command ran), not the command's 137 as if it had died of a SIGKILL of
# its own, and says why: that the guardian stopped it or, if the library
# marked the lock lost first, that the lock was lost.
new_key key
start_run "$key" 2s "$GRANDCHILD"
kill -STOP "$RUN"
[ "$(rcli PEXPIRE "$key" 60000)" = 1 ] || fail "the key $key is still there"
wait_for 10 gone "$GC"
kill -CONT "$RUN"
wait_exit "$RUN" 10
expect_status 76 "$EXIT_STATUS" "a run whose guardian killed its command"
grep -Eq "^dlock: lock $key (ran out while 'sh' .* the guardian killed its|was lost: stopping)" \
    "$WORK/err" || fail "stderr says why it was stopped: $(cat "$WORK/err")"
note "dlock SIGSTOPped, key kept: the guardian's kill is reported"
note ok
