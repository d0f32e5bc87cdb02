#!/usr/bin/env bash
# bench/reviewd/run_bench_reviewd.sh: run reviewd's benchmark from a build
# tree and keep what it printed.
#
#   bench/reviewd/run_bench_reviewd.sh BUILD_DIR [OUTPUT]
#                                      [-- bench_reviewd options...]
#
# It builds nothing (point it at an optimised tree, e.g. the default
# RelWithDebInfo build/ or -DCMAKE_BUILD_TYPE=Release) and starts, for the
# run only, everything bench_reviewd needs, so the figures neither disturb
# the tests on the stack's servers nor are disturbed by them:
#   - the stack's PostgreSQL (scripts/stack up postgres), with a database
#     of the run's own (rvbench_<pid>, dropped at the end);
#   - a private redis-server on a free loopback port in
#     var/bench/reviewd-<pid>/, stopped by its pid;
#   - reviewd on a free port with a random JWT secret, its log in the same
#     folder, stopped by its pid with SIGTERM.
# The JSON lines go to OUTPUT (default var/bench/bench_reviewd-<date>.jsonl),
# the table to the terminal.  BENCH_REVIEWD may name another bench_reviewd
# binary than BUILD_DIR/bench/reviewd/bench_reviewd.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
readonly ROOT
# shellcheck source=bench/kit/bench_lib.sh
. "$ROOT/bench/kit/bench_lib.sh"

bench_parse_args bench_reviewd "$@"
build=$BENCH_BUILD
output=$BENCH_OUTPUT
reviewd=$build/services/reviewd/reviewd
bench=${BENCH_REVIEWD:-$build/bench/reviewd/bench_reviewd}
bench_need run_bench_reviewd "$reviewd" "$bench" -- \
    redis-server redis-cli psql pgbench python3

dir=$ROOT/var/bench/reviewd-$$
mkdir -p "$dir" "$(dirname "$output")"
BENCH_REDIS_PID='' reviewd_pid=''

cleanup() {
    bench_stop_pid "$reviewd_pid"
    bench_stop_pid "$BENCH_REDIS_PID"
    bench_database_drop
}
trap cleanup EXIT

bench_database_create "rvbench_$$"
db=$BENCH_DB
db_url=$BENCH_DB_URL
bench_redis_start "$dir"
redis_port=$BENCH_REDIS_PORT

secret=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
# 1,000 idle keep-alive connections come from one address (the idle
# phase): the per-address cap must let them in.
REVIEWD_MAX_CONNECTIONS_PER_IP=${REVIEWD_MAX_CONNECTIONS_PER_IP:-2048} \
    LISTEN_ADDR=127.0.0.1:0 DATABASE_URL=$db_url JWT_SECRET=$secret \
    REDIS_URL=redis://127.0.0.1:$redis_port/0 \
    REVIEWD_LOG_FILE=$dir/reviewd.log "$reviewd" serve 2>"$dir/stderr" &
reviewd_pid=$!
listening() { grep -q '"msg":"listening"' "$dir/reviewd.log" 2>/dev/null; }
if ! bench_wait_for 30 listening; then
    cat "$dir/stderr" >&2
    echo "run_bench_reviewd: reviewd did not start" >&2
    exit 1
fi
port=$(grep -o '"msg":"listening".*"port":[0-9]*' "$dir/reviewd.log" |
    grep -o '"port":[0-9]*' | cut -d: -f2)

printf 'run_bench_reviewd: reviewd pid %s on port %s, redis on %s, db %s\n' \
    "$reviewd_pid" "$port" "$redis_port" "$db" >&2
"$bench" --port "$port" --pid "$reviewd_pid" --secret "$secret" \
    --pg "$db_url" --workdir "$dir" "${BENCH_ARGS[@]}" | tee "$output"
printf 'run_bench_reviewd: figures in %s\n' "$output" >&2
