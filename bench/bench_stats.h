/*
 * bench_stats.h: clocks, latency samples, CPU accounting and JSON figure
 * lines for dlock's benchmark programs.
 *
 * A benchmark here is a program that prints figures, never a test that
 * fails on a slow machine (docs/design.md, "Measuring").  Every figure is
 * printed as one JSON line beside the limit it is compared with, a limit
 * measured in the same run against the same server, so that a figure read
 * on a loaded, shared 2-core machine still means something: the ratio.
 *
 * Samples are kept whole (int64 nanoseconds) and sorted once, so the
 * percentiles are exact nearest-rank values rather than histogram buckets.
 * A sample set has a fixed capacity chosen by the caller; samples beyond it
 * are counted as dropped, never reallocated in the timed loop.
 *
 * Threads: a bench_samples belongs to one thread.  The clock and CPU
 * functions are thread-safe.  Output functions write to the FILE given.
 */
#ifndef DLOCK_BENCH_STATS_H
#define DLOCK_BENCH_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* CLOCK_MONOTONIC in nanoseconds: the one clock every timestamp of a run
 * is taken on, so times taken on different threads can be subtracted. */
int64_t bench_clock_ns(void);

/* Sleeps ns nanoseconds on CLOCK_MONOTONIC (used to hold a lock for a
 * simulated amount of work, not to wait for a condition). */
void bench_sleep_ns(int64_t ns);

typedef struct bench_samples {
    int64_t *v;       /* nanoseconds */
    size_t n;
    size_t cap;
    size_t dropped;   /* samples that did not fit in cap */
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

/* User + system CPU time of this process (all threads), microseconds. */
int64_t bench_cpu_self_us(void);

/* User + system CPU time of process pid from /proc, microseconds; -1 when
 * it cannot be read (no pid, the process is gone). */
int64_t bench_cpu_pid_us(pid_t pid);

/* The kernel's CPU pressure, /proc/pressure/cpu "some avg10": the share
 * of the last 10 s in which some runnable task waited for a CPU, in
 * percent; NAN without PSI.  On a shared machine it says whether other
 * work competed with the run, which is why every run line carries it. */
double bench_cpu_pressure(void);

/* /proc/loadavg as one line into buf ("?" when unreadable); returns buf. */
const char *bench_loadavg(char *buf, size_t len);

/* Starts a "run" JSON line on stdout: kind, bench, when, online_cpus,
 * loadavg and cpu_pressure_some_avg10.  The caller adds its own fields,
 * each starting with ',', and ends the line with "}\n". */
void bench_print_run_start(const char *bench, const char *when);

/* Writes "who: <message>\n" to stderr: progress for people, kept off
 * stdout, which carries only JSON lines. */
void bench_progress(const char *who, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* CPU time all CPUs of the machine spent busy (everything but idle and
 * iowait in /proc/stat), microseconds since boot; -1 when unreadable.
 * Read before and after a phase, it says how much CPU the phase cost the
 * machine as a whole, servers and other work included. */
int64_t bench_cpu_machine_us(void);

/* Parses option name's value s as a whole number in [min, max]; on
 * anything else says so on stderr, as who, and exits with status 2 (a
 * usage error, before anything was started). */
long bench_parse_long(const char *who, const char *name, const char *s,
                      long min, long max);

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
    const char *limit_from;       /* how the limit was obtained */
    bench_better better;
    double goal;                  /* target on the ratio, or NAN */
    double abs_goal;              /* target on the value, or NAN */
    long long n;                  /* operations measured, or -1 */
    long long errors;             /* failed operations, or -1 */
    double client_cpu_us_per_op;  /* this process's CPU per operation */
    double server_cpu_us_per_op;  /* redis-server's CPU per operation */
    double round_trips_per_op;    /* libdlock's round trips per operation */
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
const char *bench_figure_target(const bench_figure *f, char *buf,
                                size_t len);

/* Prints f as one JSON line:
 * {"kind":"figure","name":...,"value":...,"unit":...,"limit":...,
 *  "ratio":...,"target":"lower is better; ratio <= 1.20","met":true,...} */
void bench_figure_print(FILE *out, const bench_figure *f);

/* Writes s as a JSON string literal, quotes included. */
void bench_json_string(FILE *out, const char *s);

/* Writes a double as a JSON number (3 decimals), or null for NAN. */
void bench_json_number(FILE *out, double v);

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

#endif /* DLOCK_BENCH_STATS_H */
