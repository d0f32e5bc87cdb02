#!/usr/bin/env bash
# bench/events/run_bench_events.sh: run the event pipeline's benchmark
# from a build tree and keep what it printed.
#
#   bench/events/run_bench_events.sh BUILD_DIR [OUTPUT]
#                                    [-- bench_events options...]
#
# It builds nothing (point it at an optimised tree, e.g. the default
# RelWithDebInfo build/) and starts, for the run only, the servers
# bench_events needs (bench/kit/bench_lib.sh), so the figures neither disturb
# the tests on the stack's servers nor are disturbed by them:
#   - the stack's PostgreSQL (scripts/stack up postgres), with a database
#     of the run's own (evbench_<pid>, dropped at the end);
#   - a private RabbitMQ node (tests/indexer/rabbit_private.sh) on free
#     loopback ports, its data in var/bench/events-<pid>/rabbit: the
#     relay's exchange kh.documents is fixed, and on the stack's broker the
#     run's events would reach every queue bound there (scripts/run's
#     kh.indexer among them), and theirs ours; its boot takes 10-25 s;
#   - a private redis-server on a free loopback port, stopped by its pid.
# bench_events itself starts reviewd (twice: with and without its relay)
# and kh-indexer, logging into var/bench/events-<pid>/.  The JSON lines go
# to OUTPUT (default var/bench/bench_events-<date>.jsonl), the table to
# the terminal.  Every wait is bounded; everything started here is stopped
# by its pid (the RabbitMQ node through its pid file) on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
readonly ROOT
readonly RABBIT=$ROOT/tests/indexer/rabbit_private.sh
# shellcheck source=bench/kit/bench_lib.sh
. "$ROOT/bench/kit/bench_lib.sh"

bench_parse_args bench_events "$@"
reviewd=$BENCH_BUILD/services/reviewd/reviewd
indexer=$BENCH_BUILD/services/indexer/kh-indexer
bench=$BENCH_BUILD/bench/events/bench_events
bench_need run_bench_events "$reviewd" "$indexer" "$bench" "$RABBIT" -- \
    redis-server redis-cli psql python3

dir=$ROOT/var/bench/events-$$
mkdir -p "$dir" "$(dirname "$BENCH_OUTPUT")"
BENCH_REDIS_PID='' rabbit_started=''

cleanup() {
    bench_stop_pid "$BENCH_REDIS_PID"
    if [[ -n $rabbit_started ]]; then
        "$RABBIT" stop "$dir/rabbit" || true
    fi
    bench_database_drop
}
trap cleanup EXIT

bench_database_create "evbench_$$"
amqp_port=$(bench_free_port)
printf 'run_bench_events: starting a private RabbitMQ on %s (10-25 s) ...\n' \
    "$amqp_port" >&2
rabbit_started=yes
"$RABBIT" start "$dir/rabbit" "$amqp_port" "$(bench_free_port)" \
    "$(bench_free_port)"
bench_redis_start "$dir"

printf 'run_bench_events: rabbitmq on %s, redis on %s, db %s, logs in %s\n' \
    "$amqp_port" "$BENCH_REDIS_PORT" "$BENCH_DB" "${dir#"$ROOT"/}" >&2
"$bench" --reviewd "$reviewd" --indexer "$indexer" --pg "$BENCH_DB_URL" \
    --amqp "amqp://dlock:dlock@127.0.0.1:$amqp_port/%2f" \
    --redis "redis://127.0.0.1:$BENCH_REDIS_PORT/0" --workdir "$dir" \
    "${BENCH_ARGS[@]}" | tee "$BENCH_OUTPUT"
printf 'run_bench_events: figures in %s\n' "$BENCH_OUTPUT" >&2
