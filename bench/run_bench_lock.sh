#!/usr/bin/env bash
# bench/run_bench_lock.sh: run the core lock benchmark from a build tree and
# keep what it printed.
#
#   bench/run_bench_lock.sh BUILD_DIR [OUTPUT] [-- bench_lock options...]
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

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
readonly ROOT

usage() {
    printf 'usage: %s BUILD_DIR [OUTPUT] [-- bench_lock options...]\n' \
        "$0" >&2
    exit 2
}

[[ $# -ge 1 ]] || usage
build_dir=$1
shift
output=$ROOT/var/bench/bench_lock-$(date +%Y%m%d-%H%M%S).jsonl
if [[ $# -ge 1 && $1 != -- ]]; then
    output=$1
    shift
fi
if [[ $# -ge 1 ]]; then
    [[ $1 == -- ]] || usage
    shift
fi

bench=$build_dir/bench/bench_lock
if [[ ! -x $bench ]]; then
    printf 'run_bench_lock: %s is not built (cmake --build %s --target '\
'bench_lock)\n' "$bench" "$build_dir" >&2
    exit 1
fi
for tool in redis-server redis-benchmark; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        printf 'run_bench_lock: %s not found (scripts/deps installs it)\n' \
            "$tool" >&2
        exit 1
    fi
done

mkdir -p "$(dirname "$output")" "$ROOT/var/bench"
log=${output%.jsonl}.log
[[ $log != "$output" ]] || log=$output.log
printf 'run_bench_lock: figures to %s, log to %s\n' "$output" "$log" >&2
status=0
"$bench" --workdir "$ROOT/var/bench" "$@" >"$output" \
    2> >(tee "$log" >&2) || status=$?
# Let tee finish writing the table before this script exits.
wait
exit "$status"
