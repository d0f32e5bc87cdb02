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
#
#   bench/lock/run_bench_lock.sh BUILD_DIR [OUTPUT] -- --only server [...]
#
# runs bench_server_instr instead (the other options go to it): what
# redis-server executes per lock pair, counted under valgrind's callgrind
# against the floor pair's count (see the top of bench_server_instr.c).
# Its servers listen on 127.0.0.1:(18500 + DLOCK_STACK_PORT_OFFSET), their
# files (callgrind's counts, logs) kept in var/bench/server-instr-<pid>/;
# each is stopped by its pid, and gets SIGTERM if bench_server_instr dies
# first. OUTPUT then defaults to var/bench/bench_server_instr-<date>.jsonl.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
readonly ROOT
# shellcheck source=bench/kit/bench_lib.sh
. "$ROOT/bench/kit/bench_lib.sh"

# `--only server` after the `--` picks the program (and the default
# OUTPUT's name); it is not passed on.
program=bench_lock
prev=
for arg in "$@"; do
    if [[ $prev == --only && $arg == server ]] || [[ $arg == --only=server ]]
    then
        program=bench_server_instr
    fi
    prev=$arg
done
bench_parse_args "$program" "$@"
bench=$BENCH_BUILD/bench/lock/$program
if [[ $program == bench_server_instr ]]; then
    bench_need run_bench_lock "$bench" -- redis-server valgrind
    args=()
    for ((i = 0; i < ${#BENCH_ARGS[@]}; i++)); do
        if [[ ${BENCH_ARGS[i]} == --only && ${BENCH_ARGS[i + 1]:-} == server ]]
        then
            i=$((i + 1))
        elif [[ ${BENCH_ARGS[i]} != --only=server ]]; then
            args+=("${BENCH_ARGS[i]}")
        fi
    done
    BENCH_ARGS=("${args[@]}")
else
    bench_need run_bench_lock "$bench" -- redis-server redis-benchmark
fi

output=$BENCH_OUTPUT
mkdir -p "$(dirname "$output")" "$ROOT/var/bench"
log=${output%.jsonl}.log
[[ $log != "$output" ]] || log=$output.log
printf 'run_bench_lock: %s, figures to %s, log to %s\n' "$program" \
    "$output" "$log" >&2
status=0
"$bench" --workdir "$ROOT/var/bench" "${BENCH_ARGS[@]}" \
    >"$output" 2> >(tee "$log" >&2) || status=$?
# Let tee finish writing the table before this script exits.
wait
exit "$status"
