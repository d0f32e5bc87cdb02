#!/usr/bin/env bash
# When the lock is lost while the command runs (here: its key deleted
# behind dlock's back), the watchdog's next renewal (every ttl/3) finds it,
# dlock sends the command SIGTERM, then SIGKILL after --grace if it is still
# alive, and exits 76.  A lock found gone only by the final release also
# exits 76.
source "$(dirname "$0")/cli_testlib.sh"

# run_and_lose KEY GRACE CHILD-SCRIPT: starts a run whose command writes
# its pid to a file and then runs CHILD-SCRIPT; deletes the key once the
# command runs; leaves the run's pid in RUN, the command's in CHILD and
# the time of the deletion in LOST_AT.
run_and_lose() {
    local key=$1 grace=$2 script=$3 pidfile=$WORK/child-$KEY_SEQ.pid
    spawn_bg RUN "$DLOCK" run --ttl 1s --grace "$grace" "$key" -- \
        sh -c "echo \$\$ >'$pidfile'; $script"
    wait_for 10 file_exists "$pidfile"
    CHILD=$(cat "$pidfile")
    [ "$(rcli DEL "$key")" = 1 ] || fail "the key $key existed to be deleted"
    LOST_AT=$(now_ms)
}

# A command that dies of SIGTERM.
new_key key
run_and_lose "$key" 5s 'exec sleep 30'
wait_exit "$RUN" 5
expect_status 76 "$EXIT_STATUS" "a run whose lock was deleted"
elapsed=$(($(now_ms) - LOST_AT))
not_running "$CHILD" || fail "the command (pid $CHILD) still runs"
[ "$elapsed" -lt 3000 ] || fail "stopping took ${elapsed} ms after the loss"
note "SIGTERM case: stopped ${elapsed} ms after the key was deleted"

# A command that ignores SIGTERM is killed after the grace period.
new_key key
run_and_lose "$key" 300ms 'trap "" TERM; exec sleep 30' 2>"$WORK/err"
wait_exit "$RUN" 5
expect_status 76 "$EXIT_STATUS" "a run whose command ignores SIGTERM"
not_running "$CHILD" || fail "the SIGTERM-proof command (pid $CHILD) still runs"
grep -q '^dlock: lock .* was lost: stopping' "$WORK/err" ||
    fail "stderr says the lock was lost: $(cat "$WORK/err")"
grep -q "^dlock: .* sending SIGKILL" "$WORK/err" ||
    fail "stderr says SIGKILL was sent: $(cat "$WORK/err")"
elapsed=$(($(now_ms) - LOST_AT))
note "SIGKILL case: killed ${elapsed} ms after the key was deleted"

# A lock found gone only at the release (between two renewals), after the
# command succeeded: still 76, since its work may have overlapped another
# holder's.
new_key key
dl run --ttl 30s "$key" -- sh -c 'redis-cli -u "$REDIS_URL" DEL "$DLOCK_KEY"
    >/dev/null' 2>"$WORK/err"
expect_status 76 $? "a run whose lock was gone at release"
grep -q "^dlock: lock .* was gone when 'sh' ended (exit 0)" "$WORK/err" ||
    fail "stderr says the lock was gone at release: $(cat "$WORK/err")"
note "release case: ok"
