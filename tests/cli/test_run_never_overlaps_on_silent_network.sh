#!/usr/bin/env bash
# Issue 13, item 1: with the holder's network silent (a proxy between it
# and Redis paused: bytes held, no reset), the holder's whole command
# group, down to a loop in a grandchild, is dead before a contender's
# command starts, and the holder exits 76.  Without a timer of its own,
# dlock would only learn of the loss from a renewal reply that never comes
# (or comes after the key expired and the contender started).
#
# --ttl 2s always; --ttl 30s with DLOCK_TEST_LONG=1 (about 35 s).
source "$(dirname "$0")/cli_testlib.sh"
source "$SOURCE_DIR/tests/support/faultkit.sh"

command -v redis-server >/dev/null || {
    note "skipped: redis-server is not installed"
    exit 77
}

fk_redis_start R
fk_proxy_start P "127.0.0.1:$R_PORT"

# alive PID: the process exists and is not a zombie.
alive() {
    [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status"
}

# overlap TTL [stubborn]: one round of the scenario with that --ttl; with
# "stubborn", the loop ignores SIGTERM and --grace is far longer than the
# TTL, so only a SIGKILL by the deadline can stop it in time.
overlap() {
    local ttl=$1 mode=${2:-} key holder contender
    local dir=$WORK/ttl-$ttl$mode
    new_key key
    mkdir -p "$dir"
    # The holder's command: a shell whose child shell loops, writing the
    # time (ns) every 10 ms; the loop's pid is its own ($$ of the inner sh).
    {
        [ "$mode" = stubborn ] && echo "trap '' TERM"
        echo "echo \$\$ >'$dir/loop.pid'"
        echo "while :; do date +%s%N >>'$dir/holder.log'; sleep 0.01; done"
    } >"$dir/loop.sh"
    spawn_bg holder "$DLOCK" run --url "$P_URL" --ttl "$ttl" --grace 60s \
        "$key" -- sh -c 'sh "$0" & wait' "$dir/loop.sh" \
        >/dev/null 2>"$dir/holder.err"
    wait_for 10 has_some_lines "$dir/holder.log"
    loop=$(cat "$dir/loop.pid")
    # Killed at exit if dlock failed to: a test must not leave it behind.
    BG_PIDS+=("$loop")
    fk_proxy P pause
    note "ttl $ttl${mode:+ $mode}: proxy paused, holder's loop is pid $loop"
    # The contender goes straight to Redis and waits for the key.  Its
    # command records when it started and whether the loop still ran.
    spawn_bg contender "$DLOCK" run --url "$R_URL" --ttl "$ttl" \
        --wait forever "$key" -- sh -c '
            t=$(date +%s%N)
            if [ -r /proc/$1/status ] &&
               ! grep -q "^State:[[:space:]]*Z" /proc/$1/status; then
                echo "$t alive" >"$0/contender.start"
            else
                echo "$t dead" >"$0/contender.start"
            fi' "$dir" "$loop" 2>"$dir/contender.err"
    local limit=$(( ${ttl%s} + 15 ))
    wait_for "$limit" file_exists "$dir/contender.start"
    read -r started state <"$dir/contender.start"
    last=$(tail -n 1 "$dir/holder.log")
    [ "$state" = dead ] ||
        fail "ttl $ttl${mode:+ $mode}: the holder's loop (pid $loop) still ran when the" \
            "contender's command started; holder said: $(cat "$dir/holder.err")"
    [ "$last" -lt "$started" ] ||
        fail "ttl $ttl${mode:+ $mode}: the holder's loop wrote at $last, after the" \
            "contender started at $started"
    alive "$loop" && fail "ttl $ttl${mode:+ $mode}: the loop (pid $loop) still runs"
    wait_exit "$holder" 20
    expect_status 76 "$EXIT_STATUS" "ttl $ttl${mode:+ $mode}: the holder behind the silent proxy"
    wait_exit "$contender" 10
    expect_status 0 "$EXIT_STATUS" "ttl $ttl${mode:+ $mode}: the contender"
    fk_proxy P resume
    note "ttl $ttl${mode:+ $mode}: the loop's last write was $(( (started - last) / 1000000 ))" \
        "ms before the contender's command started"
}

has_some_lines() {
    [ -s "$1" ]
}

overlap 2s
overlap 2s stubborn
if [ "${DLOCK_TEST_LONG:-0}" = 1 ]; then
    overlap 30s
else
    note "--ttl 30s skipped (DLOCK_TEST_LONG=1 runs it, ~35 s)"
fi
fk_proxy_stop P
fk_redis_stop R
note ok
