/*
 * bench_cost.c: CPU and round trips per operation of a phase (see
 * bench_cost.h).
 */
#include "bench_cost.h"

#include <math.h>

#include "bench_cpu.h"

double bench_per_op(int64_t cpu_us, long long ops)
{
    if (cpu_us < 0 || ops <= 0)
        return NAN;
    return (double)cpu_us / (double)ops;
}

void bench_cost_begin(bench_cost *c, pid_t server_pid, uint64_t trips_now)
{
    c->cpu_us = bench_cpu_self_us();
    c->server_cpu_us = bench_cpu_pid_us(server_pid);
    c->trips = trips_now;
}

void bench_cost_end(bench_cost *c, pid_t server_pid, uint64_t trips_now)
{
    const int64_t server = bench_cpu_pid_us(server_pid);

    c->cpu_us = bench_cpu_self_us() - c->cpu_us;
    c->server_cpu_us = server < 0 || c->server_cpu_us < 0
                           ? -1
                           : server - c->server_cpu_us;
    c->trips = trips_now - c->trips;
}

void bench_cost_apply(const bench_cost *c, long long ops, bench_figure *f)
{
    f->client_cpu_us_per_op = bench_per_op(c->cpu_us, ops);
    f->server_cpu_us_per_op = bench_per_op(c->server_cpu_us, ops);
    f->round_trips_per_op = ops > 0 ? (double)c->trips / (double)ops : NAN;
}
