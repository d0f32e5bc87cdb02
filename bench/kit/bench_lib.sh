# bench/kit/bench_lib.sh: what the benchmarks' run_*.sh scripts share, sourced
# by them (bash; they set -euo pipefail first and ROOT to the checkout).
#
#   bench_parse_args NAME "$@"   BUILD_DIR [OUTPUT] [-- options...] into
#                                BENCH_BUILD, BENCH_OUTPUT (default
#                                var/bench/NAME-<date>.jsonl), BENCH_ARGS
#   bench_need WHO BIN... -- TOOL...
#                                exits 1 naming the first BIN that is not
#                                built or TOOL not on PATH
#   bench_free_port              prints a free loopback TCP port
#   bench_wait_for SECS CMD...   runs CMD every 0.1 s until it succeeds,
#                                at most SECS seconds
#   bench_stop_pid PID           SIGTERM, up to 10 s, SIGKILL; reaps it
#   bench_redis_start DIR        a private redis-server on a free port,
#                                BENCH_REDIS_PORT and BENCH_REDIS_PID set;
#                                in a session of its own, as a service
#                                runs (bench_spawn in bench_redis.h: with
#                                autogroup scheduling a server in the
#                                caller's session shares its CPU weight)
#   bench_database_create NAME   the stack's PostgreSQL up, a database NAME
#                                made on it, BENCH_DB_URL set
#   bench_database_drop          drops it again (quietly; for EXIT traps)
#
# Why shared: every benchmark starts its servers for the run only, so that
# its figures neither disturb the tests on the stack's servers nor are
# disturbed by them, and stops them by pid; one copy of that code keeps
# the scripts agreeing.  Processes are started in the calling shell (never
# in a $(...) subshell), so that it can wait for and reap them.

# The BENCH_* globals are this file's results, read by its callers.
# shellcheck disable=SC2034
bench_usage() {
    printf 'usage: %s BUILD_DIR [OUTPUT] [-- options...]\n' "$0" >&2
    exit 2
}

bench_need() {
    local who=$1 bin
    shift
    while [[ $# -gt 0 && $1 != -- ]]; do
        [[ -x $1 ]] || { printf '%s: %s is not built\n' "$who" "$1" >&2; exit 1; }
        shift
    done
    [[ $# -gt 0 ]] && shift
    for bin in "$@"; do
        command -v "$bin" >/dev/null 2>&1 || {
            printf '%s: %s not found (scripts/deps installs it)\n' "$who" \
                "$bin" >&2
            exit 1
        }
    done
}

bench_parse_args() {
    local name=$1
    shift
    [[ $# -ge 1 ]] || bench_usage
    BENCH_BUILD=$(cd "$1" && pwd -P)
    shift
    BENCH_OUTPUT=$ROOT/var/bench/$name-$(date +%Y%m%d-%H%M%S).jsonl
    if [[ $# -ge 1 && $1 != -- ]]; then
        BENCH_OUTPUT=$1
        shift
    fi
    if [[ $# -ge 1 ]]; then
        [[ $1 == -- ]] || bench_usage
        shift
    fi
    BENCH_ARGS=("$@")
}

bench_free_port() {
    python3 -c 'import socket; s = socket.socket()
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

bench_wait_for() {
    local secs=$1 i
    shift
    for ((i = 0; i < secs * 10; i++)); do
        "$@" && return 0
        sleep 0.1
    done
    return 1
}

bench_stop_pid() {
    local pid=$1 i
    [[ -n $pid ]] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

bench_redis_answers() {
    redis-cli -p "$BENCH_REDIS_PORT" ping >/dev/null 2>&1
}

bench_redis_start() {
    local dir=$1
    BENCH_REDIS_PORT=$(bench_free_port)
    # setsid execs in place: a script's background child leads no
    # process group, so $! stays the server's pid.
    setsid redis-server --port "$BENCH_REDIS_PORT" --bind 127.0.0.1 \
        --save '' --appendonly no --dir "$dir" --logfile "$dir/redis.log" &
    BENCH_REDIS_PID=$!
    bench_wait_for 10 bench_redis_answers || {
        printf '%s: redis did not start on port %s\n' "$0" \
            "$BENCH_REDIS_PORT" >&2
        return 1
    }
}

BENCH_DB=
bench_database_create() {
    "$ROOT/scripts/stack" up postgres >&2
    eval "$("$ROOT/scripts/stack" env postgres)"
    psql "$DATABASE_URL" -XAtqc "CREATE DATABASE $1" >/dev/null
    BENCH_DB=$1
    BENCH_DB_URL=${DATABASE_URL%/*}/$1
}

bench_database_drop() {
    [[ -n $BENCH_DB ]] || return 0
    psql "$DATABASE_URL" -XAtqc \
        "DROP DATABASE IF EXISTS $BENCH_DB WITH (FORCE)" >/dev/null 2>&1 ||
        true
    BENCH_DB=
}
