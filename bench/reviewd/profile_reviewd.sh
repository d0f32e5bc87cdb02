#!/usr/bin/env bash
# bench/reviewd/profile_reviewd.sh: where reviewd's time goes under its
# benchmark, phase by phase (docs/benchmarks.md, "Where the time goes").
#
#   bench/reviewd/profile_reviewd.sh BUILD_DIR [OUTDIR]
#
# It runs bench/reviewd/run_bench_reviewd.sh on BUILD_DIR (build it with
# -DCMAKE_C_FLAGS=-fno-omit-frame-pointer for reviewd's own frames; the
# libraries are unwound with DWARF anyway) and, for 8 s inside each load
# phase (get, then cycle), on the reviewd process that script starts:
#   - perf record -g (DWARF call graphs), kept as OUTDIR/PHASE.perf.data;
#   - perf stat: CPU time, context switches, system calls;
#   - /proc/*/task/*/schedstat of reviewd's threads and of the PostgreSQL
#     backends of the run's database: CPU time against time spent runnable
#     but waiting for a CPU (on a shared machine that wait, not the CPU,
#     is often what sets the latency tail);
#   - the requests answered meanwhile (lines of reviewd's access log), to
#     give each figure per request.
# It prints per phase the per-request figures and the user-space functions
# with the largest inclusive share of samples.  The benchmark's own
# figures are in OUTDIR/bench.jsonl; perf makes them worse, so take the
# figures from a run without it.  Needs perf (linux-perf) and root or
# kernel.perf_event_paranoid <= 1.  OUTDIR defaults to
# var/bench/profile-<date>/.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
readonly ROOT

[[ $# -ge 1 && $# -le 2 ]] || {
    echo "usage: $0 BUILD_DIR [OUTDIR]" >&2
    exit 2
}
build=$1
out=${2:-$ROOT/var/bench/profile-$(date +%Y%m%d-%H%M%S)}
command -v perf >/dev/null 2>&1 ||
    { echo "profile_reviewd: perf not found (scripts/deps)" >&2; exit 1; }
mkdir -p "$out"
log=$out/bench.log

"$ROOT/bench/reviewd/run_bench_reviewd.sh" "$build" "$out/bench.jsonl" \
    >/dev/null 2>"$log" &
bench_pid=$!

# Bounded wait for a line matching $2 in the bench's log: every 0.1 s for
# up to $1 seconds.
wait_log() {
    local i
    for ((i = 0; i < $1 * 10; i++)); do
        grep -qE "$2" "$log" 2>/dev/null && return 0
        kill -0 "$bench_pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# "path cpu_ns wait_ns timeslices" for every thread of the given pids.
schedstat() {
    local p t
    for p in "$@"; do
        for t in /proc/"$p"/task/*/schedstat; do
            [[ -r $t ]] && echo "$t $(cat "$t" 2>/dev/null)"
        done
    done
}

# CPU and run-queue wait in ms between two schedstat snapshots.
sched_delta() {
    awk 'NR == FNR { c[$1] = $2; w[$1] = $3; next }
         ($1 in c) { cpu += $2 - c[$1]; wait += $3 - w[$1] }
         END { printf "cpu %.0f ms, runnable but waiting %.0f ms\n",
               cpu / 1e6, wait / 1e6 }' "$1" "$2"
}

wait_log 60 'reviewd pid [0-9]+' ||
    { cat "$log" >&2; echo "profile_reviewd: reviewd did not start" >&2
      exit 1; }
pid=$(grep -oE 'reviewd pid [0-9]+' "$log" | awk '{ print $3 }')
db=$(grep -oE 'db rvbench_[0-9]+' "$log" | awk '{ print $2 }')
access=$ROOT/var/bench/reviewd-$(grep -oE 'rvbench_[0-9]+' <<<"$db" |
    cut -d_ -f2)/reviewd.log

for phase in get cycle; do
    wait_log 300 "$phase for" ||
        { echo "profile_reviewd: no $phase phase" >&2; exit 1; }
    sleep 0.3
    backends=$(pgrep -f "postgres: .* $db " | tr '\n' ' ' || true)
    schedstat "$pid" >"$out/$phase.rv0"
    # shellcheck disable=SC2086 # one word per backend pid
    schedstat $backends >"$out/$phase.pg0"
    n0=$(wc -l <"$access")
    perf stat -e task-clock,context-switches,raw_syscalls:sys_enter \
        -x, -o "$out/$phase.stat" -p "$pid" -- sleep 8 &
    perf record -F 499 --call-graph dwarf,16384 -p "$pid" \
        -o "$out/$phase.perf.data" -- sleep 8 >"$out/$phase.record.log" 2>&1
    wait $!
    n1=$(wc -l <"$access")
    schedstat "$pid" >"$out/$phase.rv1"
    # shellcheck disable=SC2086
    schedstat $backends >"$out/$phase.pg1"
    {
        requests=$((n1 - n0))
        echo "== $phase: $requests requests in 8 s"
        awk -F, -v n="$requests" 'n > 0 && $3 != "" {
            printf "  %-26s %10.3f %s per request\n", $3, $1 / n, $2 }' \
            "$out/$phase.stat"
        echo "  reviewd:  $(sched_delta "$out/$phase.rv0" "$out/$phase.rv1")"
        echo "  postgres: $(sched_delta "$out/$phase.pg0" "$out/$phase.pg1")"
        echo "  user-space functions, inclusive share of reviewd's samples:"
        perf report -i "$out/$phase.perf.data" --children --sort sym \
            -g none --percent-limit 1 --stdio 2>/dev/null |
            grep -F '[.]' | grep -vE '\] (0x|clone3|start_thread)' |
            head -30 | sed 's/^/  /'
    } | tee "$out/$phase.summary"
done
wait "$bench_pid"
echo "profile_reviewd: perf data and summaries in $out" >&2
