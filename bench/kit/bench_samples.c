/*
 * bench_samples.c: latency samples, sorted once for exact nearest-rank
 * percentiles (see bench_samples.h).
 */
#include "bench_samples.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int bench_samples_init(bench_samples *s, size_t cap)
{
    memset(s, 0, sizeof(*s));
    s->v = malloc((cap ? cap : 1) * sizeof(*s->v));
    if (s->v == NULL)
        return -1;
    s->cap = cap;
    return 0;
}

void bench_samples_add(bench_samples *s, int64_t ns)
{
    if (s->n == s->cap) {
        s->dropped++;
        return;
    }
    s->v[s->n++] = ns;
}

void bench_samples_merge(bench_samples *s, const bench_samples *from)
{
    for (size_t i = 0; i < from->n; i++)
        bench_samples_add(s, from->v[i]);
    s->dropped += from->dropped;
}

static int compare_int64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a;
    const int64_t y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

void bench_samples_sort(bench_samples *s)
{
    qsort(s->v, s->n, sizeof(*s->v), compare_int64);
}

double bench_samples_quantile_us(const bench_samples *s, double q)
{
    if (s->n == 0)
        return NAN;
    /* Nearest rank: the smallest sample with at least q of all at or
     * below it. */
    size_t rank = (size_t)ceil(q * (double)s->n);
    if (rank < 1)
        rank = 1;
    if (rank > s->n)
        rank = s->n;
    return (double)s->v[rank - 1] / 1000.0;
}

double bench_samples_mean_us(const bench_samples *s)
{
    if (s->n == 0)
        return NAN;
    double sum = 0;
    for (size_t i = 0; i < s->n; i++)
        sum += (double)s->v[i];
    return sum / (double)s->n / 1000.0;
}

void bench_samples_free(bench_samples *s)
{
    free(s->v);
    memset(s, 0, sizeof(*s));
}
