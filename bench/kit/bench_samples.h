/*
 * bench_samples.h: latency samples and their exact percentiles.
 *
 * Samples are kept whole (int64 nanoseconds) and sorted once, so the
 * percentiles are exact nearest-rank values rather than histogram buckets.
 * A sample set has a fixed capacity chosen by the caller; samples beyond it
 * are counted as dropped, never reallocated in the timed loop.
 *
 * Ownership: the caller owns the bench_samples (usually on its stack);
 * bench_samples_init allocates its array and bench_samples_free frees it.
 * Threads: a bench_samples belongs to one thread.
 */
#ifndef DLOCK_BENCH_SAMPLES_H
#define DLOCK_BENCH_SAMPLES_H

#include <stddef.h>
#include <stdint.h>

typedef struct bench_samples {
    int64_t *v; /* nanoseconds */
    size_t n;
    size_t cap;
    size_t dropped; /* samples that did not fit in cap */
} bench_samples;

/* Allocates room for cap samples.  Returns 0, or -1 when out of memory. */
int bench_samples_init(bench_samples *s, size_t cap);

/* Adds one sample; beyond the capacity it only counts it as dropped. */
void bench_samples_add(bench_samples *s, int64_t ns);

/* Appends every sample of from to s (same capacity rule). */
void bench_samples_merge(bench_samples *s, const bench_samples *from);

/* Sorts the samples; the quantile functions need it. */
void bench_samples_sort(bench_samples *s);

/* The nearest-rank q-quantile (q in [0, 1]) of sorted samples, in
 * microseconds; NAN when there are none. */
double bench_samples_quantile_us(const bench_samples *s, double q);

/* The mean in microseconds; NAN when there are none. */
double bench_samples_mean_us(const bench_samples *s);

/* Frees the samples; a zeroed or freed bench_samples is fine. */
void bench_samples_free(bench_samples *s);

#endif /* DLOCK_BENCH_SAMPLES_H */
