/*
 * bench_cost.h: what a phase of a run cost per operation: this process's
 * CPU, the server's CPU and the client's round trips, put on a figure.
 *
 * Ownership: a bench_cost is the caller's, usually on its stack.
 * Threads: a bench_cost belongs to one thread.
 */
#ifndef DLOCK_BENCH_COST_H
#define DLOCK_BENCH_COST_H

#include <stdint.h>
#include <sys/types.h>

#include "bench_figure.h"

/* CPU microseconds per operation, or NAN without operations or without a
 * reading (cpu_us < 0). */
double bench_per_op(int64_t cpu_us, long long ops);

/*
 * What a phase cost: this process's CPU, a server's CPU (-1 when its pid
 * is unknown) and the client's round trips.  bench_cost_begin takes a
 * snapshot, bench_cost_end turns it into what was spent since; trips_now
 * is the client's round-trip counter at that moment (libdlock's
 * dlock_client_stats commands, or 0 for a client without one).
 */
typedef struct bench_cost {
    int64_t cpu_us;
    int64_t server_cpu_us;
    uint64_t trips;
} bench_cost;

void bench_cost_begin(bench_cost *c, pid_t server_pid, uint64_t trips_now);
void bench_cost_end(bench_cost *c, pid_t server_pid, uint64_t trips_now);

/* Sets f's client and server CPU and round trips per operation from c,
 * for ops operations. */
void bench_cost_apply(const bench_cost *c, long long ops, bench_figure *f);

#endif /* DLOCK_BENCH_COST_H */
