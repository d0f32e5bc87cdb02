#!/usr/bin/env bash
# bench/lock/run_bench_lock.sh: run the core lock benchmark from a build
# tree and keep what it printed.
#
#   bench/lock/run_bench_lock.sh BUILD_DIR [OUTPUT] [-- bench_lock options...]
#
# It builds nothing (point it at a tree where bench_lock is built, a
# Release one for figures worth writing down: cmake -DCMAKE_BUILD_TYPE=
# Release -B build-bench) and starts nothing itself: bench_lock starts its
# own private redis-server under var/bench/ and stops it by pid, so the
# figures are not disturbed by tests running on the stack's Redis, nor do
# they disturb them. The JSON lines go to OUTPUT (default
# var/bench/bench_lock-<date>.jsonl); progress and the summary table go to
# the terminal and to OUTPUT with .log in place of .jsonl. The exit status
# is bench_lock's: 0 when every figure was measured, whether or not it met
# its target.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
readonly ROOT
# shellcheck source=bench/kit/bench_lib.sh
. "$ROOT/bench/kit/bench_lib.sh"

bench_parse_args bench_lock "$@"
bench=$BENCH_BUILD/bench/lock/bench_lock
bench_need run_bench_lock "$bench" -- redis-server redis-benchmark

output=$BENCH_OUTPUT
mkdir -p "$(dirname "$output")" "$ROOT/var/bench"
log=${output%.jsonl}.log
[[ $log != "$output" ]] || log=$output.log
printf 'run_bench_lock: figures to %s, log to %s\n' "$output" "$log" >&2
status=0
"$bench" --workdir "$ROOT/var/bench" "${BENCH_ARGS[@]}" >"$output" \
    2> >(tee "$log" >&2) || status=$?
# Let tee finish writing the table before this script exits.
wait
exit "$status"
