/*
 * bench_figure.h: one figure of a benchmark, printed as a JSON line beside
 * the limit it is compared with, and the summary table of a run's figures.
 *
 * A benchmark here is a program that prints figures, never a test that
 * fails on a slow machine (docs/benchmarks.md).  Every figure carries a
 * limit measured in the same run against the same server, so that a
 * figure read on a loaded, shared 2-core machine still means something:
 * the ratio.
 *
 * Ownership: bench_figure and bench_table are the caller's; a figure
 * borrows its strings, a table copies the name of each figure it keeps.
 * Threads: neither is shared between threads.  Output functions write to
 * the FILE given.
 */
#ifndef DLOCK_BENCH_FIGURE_H
#define DLOCK_BENCH_FIGURE_H

#include <stddef.h>
#include <stdio.h>

/* Whether the figure is better low (latencies) or high (rates). */
typedef enum bench_better {
    BENCH_LOWER_IS_BETTER,
    BENCH_HIGHER_IS_BETTER
} bench_better;

/*
 * One figure of a run.  ratio is always value / limit; better says which
 * way is good, and goal, when not NAN, is the target for the ratio
 * (a ceiling when lower is better, a floor when higher is better).
 * abs_goal, when not NAN, is a target on the value itself instead (the
 * hand-off gap: "under 1 ms"), met when value < abs_goal.  Fields set to
 * NAN (or -1 for counts, NULL for strings) are printed as null or left out.
 */
typedef struct bench_figure {
    const char *name;
    double value;
    const char *unit;
    double limit;
    const char *limit_from; /* how the limit was obtained */
    bench_better better;
    double goal;                 /* target on the ratio, or NAN */
    double abs_goal;             /* target on the value, or NAN */
    long long n;                 /* operations measured, or -1 */
    long long errors;            /* failed operations, or -1 */
    double client_cpu_us_per_op; /* this process's CPU per operation */
    double server_cpu_us_per_op; /* redis-server's CPU per operation */
    double round_trips_per_op;   /* libdlock's round trips per operation */
    /* Up to two more named numbers for diagnosis (key NULL: none). */
    const char *extra_key[2];
    double extra_value[2];
} bench_figure;

/* Fills f with "nothing known": NAN numbers, -1 counts, NULL strings. */
void bench_figure_init(bench_figure *f, const char *name, const char *unit,
                       bench_better better);

/* value / limit, or NAN when either is missing or the limit is 0. */
double bench_figure_ratio(const bench_figure *f);

/* 1 if the figure meets its target, 0 if not, -1 if it has none. */
int bench_figure_met(const bench_figure *f);

/* The target as text ("ratio <= 1.20", "value < 1000 us"), or "" when the
 * figure has none.  Written into buf, which is returned. */
const char *bench_figure_target(const bench_figure *f, char *buf, size_t len);

/* Prints f as one JSON line:
 * {"kind":"figure","name":...,"value":...,"unit":...,"limit":...,
 *  "ratio":...,"target":"lower is better; ratio <= 1.20","met":true,...} */
void bench_figure_print(FILE *out, const bench_figure *f);

/* Keeps up to cap figures for the human summary at the end of a run. */
typedef struct bench_table {
    bench_figure rows[64];
    char names[64][64];
    int n;
} bench_table;

/* Prints f as JSON to out and keeps a copy (name included) in t. */
void bench_table_add(bench_table *t, FILE *out, const bench_figure *f);

/* Prints the kept figures as an aligned table for people. */
void bench_table_print(const bench_table *t, FILE *out);

#endif /* DLOCK_BENCH_FIGURE_H */
