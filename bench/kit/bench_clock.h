/*
 * bench_clock.h: the one clock of a benchmark run, and sleeps on it.
 * Both functions are thread-safe.
 */
#ifndef DLOCK_BENCH_CLOCK_H
#define DLOCK_BENCH_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds: the one clock every timestamp of a run
 * is taken on, so times taken on different threads can be subtracted. */
int64_t bench_clock_ns(void);

/* Sleeps ns nanoseconds on CLOCK_MONOTONIC (used to hold a lock for a
 * simulated amount of work, not to wait for a condition). */
void bench_sleep_ns(int64_t ns);

#endif /* DLOCK_BENCH_CLOCK_H */
