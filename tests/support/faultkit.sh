# tests/support/faultkit.sh: the fault kit for shell tests (issue 13):
# private redis-servers (optionally under the wall-clock shim) and the
# pausable proxy, started and stopped by pid.
#
# Source it after tests/cli/cli_testlib.sh (or anything that defines
# fail, spawn_bg, forget_bg, wait_for, not_running and WORK the same way):
# every process is started with spawn_bg, so the test's exit trap kills it
# by pid even when the test fails half-way.  Binaries come from
# $DLOCK_BUILD_DIR/tests/support/ (CTest sets DLOCK_BUILD_DIR).
#
#   fk_redis_start NAME [--wallclock]   a redis-server on a free port, in
#       $WORK/NAME/ (pid file redis.pid, log redis.log); sets NAME_PORT,
#       NAME_URL, NAME_PID and, with --wallclock, NAME_CLOCK (its offset
#       file, at 0).  NAME is a shell identifier.
#   fk_redis_stop NAME                  SIGTERM by pid, waits for the exit
#   fk_clock_step NAME MS               the server's wall clock runs MS ms
#                                       off the host's (absolute offset)
#   fk_proxy_start NAME HOST:PORT       a proxy on a free port; sets
#       NAME_PORT, NAME_URL, NAME_PID, NAME_CTL
#   fk_proxy NAME COMMAND [ARG]         pause | resume | reset | delay MS |
#                                       target HOST:PORT | stats; returns
#                                       once the command took effect
#   fk_proxy_stop NAME

FK_BIN=${DLOCK_BUILD_DIR:-}/tests/support

fk_need() {
    [ -x "$FK_BIN/$1" ] || [ -f "$FK_BIN/$1" ] ||
        fail "no $1 in $FK_BIN (is DLOCK_BUILD_DIR set and the kit built?)"
}

fk_redis_start() {
    local name=$1 wallclock=${2:-} dir=$WORK/$1 port pid tries
    fk_need dlock-test-kit
    mkdir -p "$dir" || fail "mkdir $dir"
    for tries in 1 2 3; do
        port=$("$FK_BIN/dlock-test-kit" free-port) || fail "no free port"
        rm -f "$dir/redis.pid"
        printf '%s\n' "bind 127.0.0.1" "port $port" "dir $dir" \
            "logfile $dir/redis.log" "pidfile $dir/redis.pid" \
            "daemonize no" 'save ""' "appendonly no" \
            "protected-mode no" >"$dir/redis.conf"
        if [ "$wallclock" = --wallclock ]; then
            fk_need libdlock_test_wallclock.so
            "$FK_BIN/dlock-test-kit" clock-set "$dir/wallclock" 0 ||
                fail "cannot make $dir/wallclock"
            printf -v "${name}_CLOCK" '%s' "$dir/wallclock"
            spawn_bg pid env LD_PRELOAD="$FK_BIN/libdlock_test_wallclock.so" \
                DLOCK_TEST_WALLCLOCK_FILE="$dir/wallclock" \
                redis-server "$dir/redis.conf"
        else
            spawn_bg pid redis-server "$dir/redis.conf"
        fi
        if fk_wait_redis "$port" "$pid"; then
            printf -v "${name}_PORT" '%s' "$port"
            printf -v "${name}_PID" '%s' "$pid"
            printf -v "${name}_URL" '%s' "redis://127.0.0.1:$port/0"
            return 0
        fi
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        forget_bg "$pid"
    done
    tail -n 20 "$dir/redis.log" >&2
    fail "redis-server $name would not start"
}

# fk_wait_redis PORT PID: up to 10 s for PONG; 1 if the server died.
fk_wait_redis() {
    local deadline=$(($(date +%s) + 10))
    while [ "$(date +%s)" -le "$deadline" ]; do
        redis-cli -p "$1" PING 2>/dev/null | grep -q PONG && return 0
        not_running "$2" && return 1
        sleep 0.02
    done
    return 1
}

# fk_stop_pid PID WHAT: SIGTERM, up to 10 s, then SIGKILL.
fk_stop_pid() {
    local pid=$1
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null
    local deadline=$(($(date +%s) + 10))
    until not_running "$pid"; do
        if [ "$(date +%s)" -gt "$deadline" ]; then
            kill -KILL "$pid" 2>/dev/null
            break
        fi
        sleep 0.02
    done
    wait "$pid" 2>/dev/null
    forget_bg "$pid"
}

fk_redis_stop() {
    local var=${1}_PID
    fk_stop_pid "${!var:-}"
    printf -v "$var" '%s' ""
}

fk_clock_step() {
    local var=${1}_CLOCK
    [ -n "${!var:-}" ] || fail "fk_clock_step: $1 was not started --wallclock"
    "$FK_BIN/dlock-test-kit" clock-set "${!var}" "$2" ||
        fail "cannot step $1's clock to $2 ms"
}

fk_proxy_start() {
    local name=$1 target=$2 dir=$WORK/$1 pid
    fk_need dlock-test-proxy
    mkdir -p "$dir" || fail "mkdir $dir"
    rm -f "$dir/proxy.port"
    spawn_bg pid "$FK_BIN/dlock-test-proxy" serve --listen 0 \
        --target "$target" --control "$dir/proxy.ctl" \
        --pid-file "$dir/proxy.pid" --port-file "$dir/proxy.port" \
        >"$dir/proxy.log" 2>&1
    wait_for 10 fk_proxy_ready "$dir/proxy.port" "$pid"
    not_running "$pid" && fail "proxy $name exited: $(cat "$dir/proxy.log")"
    printf -v "${name}_PID" '%s' "$pid"
    printf -v "${name}_CTL" '%s' "$dir/proxy.ctl"
    printf -v "${name}_PORT" '%s' "$(cat "$dir/proxy.port")"
    printf -v "${name}_URL" '%s' "redis://127.0.0.1:$(cat "$dir/proxy.port")/0"
}

fk_proxy_ready() {
    [ -s "$1" ] || not_running "$2"
}

fk_proxy() {
    local var=${1}_CTL
    shift
    "$FK_BIN/dlock-test-proxy" ctl "${!var}" "$@" >/dev/null ||
        fail "proxy command failed: $*"
}

fk_proxy_stop() {
    local var=${1}_PID
    fk_stop_pid "${!var:-}"
    printf -v "$var" '%s' ""
}
