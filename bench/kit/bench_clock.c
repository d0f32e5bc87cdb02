/*
 * bench_clock.c: CLOCK_MONOTONIC readings and sleeps for the benchmarks
 * (see bench_clock.h).
 */
#include "bench_clock.h"

#include <errno.h>
#include <time.h>

int64_t bench_clock_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void bench_sleep_ns(int64_t ns)
{
    struct timespec ts = {
        .tv_sec = (time_t)(ns / 1000000000),
        .tv_nsec = (long)(ns % 1000000000),
    };

    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
        continue;
}
