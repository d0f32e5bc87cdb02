/*
 * bench_lock.c: the core lock benchmark.  How fast libdlock's acquire and
 * release are, as ratios against what the same Redis server does for the
 * very same commands when redis-benchmark sends them.
 *
 * One run, against one fresh private redis-server (or --url):
 *   (a) seq.*: sequential acquire+release pairs on one thread, p50, p99
 *       and p99.9 of the pair, its mean, and p50 of acquire and release
 *       alone; then seq.busy_pollN.*, the same on a client with
 *       busy_poll_us N (--busy-poll-us, default 100; the client option that
 *       reads without sleeping before it sleeps), beside the default's;
 *       then seq.raw.*: the floor's commands and the library's scripts
 *       from a plain hiredis client, the library's own pairs and
 *       redis-benchmark's replays of the floor, in blocks taken in turn,
 *       which split the pair's excess over the floor into redis-server's
 *       share and the library client's, and say what the floor's own
 *       pairs measure against the replays (bench_raw);
 *   (b) tput.Nthreads: pairs/s with 1, 8 and 32 threads, each thread on
 *       its own key, for a fixed time; then tput.asyncN: as many callers
 *       (8, 32) on one thread through one dlock_async handle (dlock/async.h),
 *       each on its own key, against the same limits as the threads;
 *       and tput.Nthreads.ceiling.vs_best, the most any client whose
 *       threads block could reach here (report_ceiling);
 *   (c) handoff.Nwaiters.*: 4 and 16 threads on one key, each holding it
 *       ~1 ms then releasing, for a fixed time: acquisitions/s, and the
 *       gap from a release's return to the next successful acquire's
 *       return.  Run twice: as the issue asks (a releaser loops straight
 *       into its next acquire, so it races the waiter its release woke),
 *       and ".polite" (a releaser waits until another thread holds the lock
 *       before trying again, so every grant is a hand-off to a woken
 *       waiter).  regrant_share says how often the free-for-all gave the
 *       lock straight back to the thread that released it.  Run once
 *       more with ".fair" (opts.fair, the free-for-all loop: the hot loop
 *       of a releaser that re-contends at once), where the release hands
 *       the key to the first queued waiter inside Redis.  Each hand-off
 *       run also reports the waits (an acquire call's duration): mean and
 *       max, against the fair ideal (N - 1) x (hold + release + acquire),
 *       and beside the max how long the hand-off threads (together) and
 *       the private redis-server waited in run queues for a CPU during
 *       the run (schedstat): a hand-off is a chain of three parties
 *       (holder, redis-server, grantee), and one party kept off the CPUs
 *       for a few ms makes the max (docs/benchmarks.md, "Session 16: the
 *       fair hand-off's outliers").
 *
 * The limit.  libdlock's acquire and release are each one EVALSHA round
 * trip.  The run learns those exact commands from MONITOR while libdlock
 * makes one acquire and one release, then has redis-benchmark replay each
 * one, alone, with -c 1 (latency) and with -c 8 and -c 32 (throughput):
 *   - a sequential pair can be no faster than one acquire round trip plus
 *     one release round trip, so the pair's limit is p50(acquire) +
 *     p50(release) at -c 1 (p99 and p99.9 likewise: an approximation, as
 *     percentiles do not add exactly).  redis-benchmark's percentiles come
 *     from a histogram with 8 us buckets at this size, so the p50 limit is
 *     rounded up to a bucket's edge; the pair's mean is therefore also
 *     compared with 1/R_a + 1/R_r at -c 1 (R the replayed requests/s, one
 *     over the mean round trip), which has no such rounding;
 *   - the one-client target compares the pair's p50 with the floor, the
 *     cheapest correct lock replayed at -c 1 (SET NX PX, then a
 *     compare-and-delete script): measured before (a) and after each of
 *     its two runs, and each run is compared with the mean of the floors
 *     either side of it, as the thread limits are (next item);
 *   - a pair costs the server one acquire and one release, so with R_a and
 *     R_r the replayed rates (requests/s), the most pairs per second is
 *     1 / (1/R_a + 1/R_r): the time per pair is the sum of the times per
 *     command.  That is the limit of (b) at the same number of clients
 *     (-c 1 for one thread, -c 8 for 8, -c 32 for 32).  With 8 and 32
 *     callers the limits (-c N and -c 1 -P N) are measured before the
 *     threads, between the threads and the async handle, and after it,
 *     and each phase is compared with the mean of the two measured on
 *     either side of it: on this shared machine a limit moves by up to
 *     25 % from one measurement to the next, and a limit measured two
 *     phases earlier decided whether a figure met its target more than
 *     the figure itself did (docs/benchmarks.md, "Session 19");
 *   - a hand-off can be no faster than one acquire round trip after the
 *     release returns (the release notification leaves the server in the
 *     same event-loop turn as the release's reply), so the gap's limit is
 *     p50 (p99) of the acquire at -c 1; and a holder cycle is no shorter
 *     than hold + release + acquire round trips, so the rate's limit is
 *     1 / (mean measured hold + p50(release) + p50(acquire)).
 * redis-benchmark replays the acquire on one fixed key, so every call after
 * the first finds the key held and gets the script's "busy" answer, and the
 * release replay finds the token gone after the first call.  Those are
 * still one EVALSHA round trip of the same script with the same arguments,
 * which is what the limit needs; the busy path skips the writes, so if
 * anything the server does less per replayed call than per grant, which can
 * only make the limit stricter.  redis-benchmark is a client too, with its
 * own cost per request, so a ratio a little past the limit means libdlock's
 * client path is leaner than redis-benchmark's, not that it beat the server.
 *
 * Output: JSON lines on stdout (kind "run", "command", "limit", "figure",
 * "summary"); progress and the final table for people on stderr.  A figure
 * has name, value, unit, limit, ratio = value / limit, target saying which
 * way is better and the goal when there is one, and what the
 * figure cost: this process's and the server's CPU, and libdlock's round
 * trips, per operation.  Nothing here fails on a slow machine: the exit
 * status is 0 whenever the figures were measured, met or not.
 *
 * Keys are "bench:<pid>:...", so a run against a shared server (--url)
 * never touches anyone else's keys.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "dlock/async.h"
#include "dlock/dlock.h"

#include "bench_clock.h"
#include "bench_cost.h"
#include "bench_cpu.h"
#include "bench_figure.h"
#include "bench_json.h"
#include "bench_redis.h"
#include "bench_run.h"
#include "bench_samples.h"
#include "wake_ceiling.h"

#define MAX_THREADS 32
#define MAX_ERRORS_PER_THREAD 100

typedef struct bench_opts {
    bench_redis_opts redis;
    long pairs;
    long warmup;
    long rb_requests;
    int duration_ms;
    int hold_us;
    int ttl_ms;
    int wait_ms;
    int pool_size;    /* 0: the library's default */
    int busy_poll_us; /* (a) again with this busy_poll_us; 0: not run */
    const char *only; /* "client", "handoff" or "fair": those runs alone */
} bench_opts;

/* What redis-benchmark measured for both commands at one client count. */
typedef struct bench_limit {
    bench_rb_result acquire;
    bench_rb_result release;
} bench_limit;

typedef struct bench_run {
    bench_opts o;
    bench_server server; /* pid 0 with --url */
    bench_target target;
    dlock_client *client;
    bench_cmd acquire_cmd;
    bench_cmd release_cmd;
    bench_cmd floor_set; /* the floor's two commands (floor_commands) */
    bench_cmd floor_del;
    bench_limit c1;
    /* SET NX PX + compare-and-delete at -c 1: its latest measurement,
     * and the mean of the two either side of the sequential run being
     * reported (the one-client target's limit). */
    bench_limit floor_last;
    bench_limit floor;
    bench_table table;
    /* The issue 17 targets, printed apart at the end (rows of table). */
    int targets[16];
    int ntargets;
    char prefix[48]; /* "bench:<pid>" */
    char err[2048];
} bench_run;

/* ------------------------------------------------------------------------
 * Small helpers */

#define progress(...) bench_progress("bench_lock", __VA_ARGS__)

static void acquire_opts(const bench_run *run, int64_t wait_ms,
                         dlock_acquire_opts *ao)
{
    dlock_acquire_opts_init(ao);
    ao->ttl_ms = run->o.ttl_ms;
    ao->wait_ms = wait_ms;
}

/* The time per pair is the sum of the times per command. */
static double pair_rate(const bench_limit *l)
{
    return 1.0 / (1.0 / l->acquire.rps + 1.0 / l->release.rps);
}

/* libdlock's round trips so far: the commands its client has sent. */
static uint64_t client_round_trips(const bench_run *run)
{
    dlock_client_stats st;

    dlock_client_stats_get(run->client, &st);
    return st.commands;
}

static void cost_begin(const bench_run *run, bench_cost *c)
{
    bench_cost_begin(c, run->server.pid, client_round_trips(run));
}

static void cost_end(const bench_run *run, bench_cost *c)
{
    bench_cost_end(c, run->server.pid, client_round_trips(run));
}

/* ------------------------------------------------------------------------
 * Learning the commands, measuring the limit */

static void print_command(const char *op, const bench_cmd *cmd)
{
    printf("{\"kind\":\"command\",\"op\":\"%s\",\"argv\":[", op);
    for (int i = 0; i < cmd->argc; i++) {
        if (i)
            putchar(',');
        bench_json_string(stdout, cmd->argv[i]);
    }
    printf("]}\n");
}

/* Runs one acquire and one release through libdlock with a MONITOR tap
 * open, and keeps the EVALSHA each of them sent. */
static int capture_commands(bench_run *run)
{
    char key[96];
    bench_monitor *mon = NULL;
    dlock_acquire_opts ao;
    dlock_lock *lock = NULL;

    snprintf(key, sizeof(key), "%s:replay", run->prefix);
    if (bench_monitor_open(&run->target, &mon, run->err, sizeof(run->err))
        != 0)
        return -1;
    acquire_opts(run, 0, &ao);
    dlock_err rc = dlock_acquire(run->client, key, &ao, &lock);
    if (rc != DLOCK_OK) {
        snprintf(run->err, sizeof(run->err), "acquire %s for MONITOR: %s", key,
                 dlock_client_errmsg(run->client));
        bench_monitor_close(mon);
        return -1;
    }
    int ok = bench_monitor_find_evalsha(mon, key, 2000, &run->acquire_cmd,
                                        run->err, sizeof(run->err))
             == 0;
    rc = dlock_release(lock);
    if (ok && rc != DLOCK_OK) {
        snprintf(run->err, sizeof(run->err), "release %s for MONITOR: %s", key,
                 dlock_client_errmsg(run->client));
        ok = 0;
    }
    ok = ok
         && bench_monitor_find_evalsha(mon, key, 2000, &run->release_cmd,
                                       run->err, sizeof(run->err))
                == 0;
    bench_monitor_close(mon);
    if (!ok)
        return -1;
    print_command("acquire", &run->acquire_cmd);
    print_command("release", &run->release_cmd);
    return 0;
}

static void print_limit(const char *op, const bench_rb_result *r)
{
    printf("{\"kind\":\"limit\",\"op\":\"%s\",\"tool\":\"redis-benchmark\","
           "\"clients\":%d,\"pipeline\":%d,\"requests\":%ld,\"rps\":",
           op, r->clients, r->pipeline, r->requests);
    bench_json_number(stdout, r->rps);
    printf(",\"p50_us\":");
    bench_json_number(stdout, r->p50_us);
    printf(",\"p99_us\":");
    bench_json_number(stdout, r->p99_us);
    printf(",\"p999_us\":");
    bench_json_number(stdout, r->p999_us);
    printf(",\"rb_cpu_us_per_op\":");
    bench_json_number(stdout, bench_per_op(r->rb_cpu_us, r->requests));
    printf(",\"server_cpu_us_per_op\":");
    bench_json_number(stdout, bench_per_op(r->server_cpu_us, r->requests));
    printf("}\n");
    fflush(stdout);
}

/* Replays the acquire then the release with redis-benchmark, clients
 * connections each.  The acquire runs first: its first call takes the
 * replay key with the captured token, and the release replay's first call
 * deletes it again, so each measurement leaves the key as it found it. */
static int measure_limit_pipelined(bench_run *run, int clients, int pipeline,
                                   bench_limit *out)
{
    const long n = clients == 1 && pipeline == 1 ? run->o.pairs
                                                 : run->o.rb_requests;
    const int timeout_ms = 120000;

    if (bench_rb_run_pipelined(run->o.redis.rb_bin, &run->target,
                               run->server.pid, clients, pipeline, n,
                               &run->acquire_cmd, timeout_ms, &out->acquire,
                               run->err, sizeof(run->err))
            != 0
        || bench_rb_run_pipelined(run->o.redis.rb_bin, &run->target,
                                  run->server.pid, clients, pipeline, n,
                                  &run->release_cmd, timeout_ms, &out->release,
                                  run->err, sizeof(run->err))
               != 0)
        return -1;
    print_limit("acquire", &out->acquire);
    print_limit("release", &out->release);
    progress("limit -c %d -P %d: acquire %.0f/s p50 %.1f us, release %.0f/s "
             "p50 %.1f us",
             clients, pipeline, out->acquire.rps, out->acquire.p50_us,
             out->release.rps, out->release.p50_us);
    return 0;
}

static int measure_limit(bench_run *run, int clients, bench_limit *out)
{
    return measure_limit_pipelined(run, clients, 1, out);
}

/* One command's limit between two measurements of it: the mean of
 * their rates and percentiles. */
static void rb_result_mean(const bench_rb_result *a, const bench_rb_result *b,
                           bench_rb_result *out)
{
    *out = *a;
    out->rps = (a->rps + b->rps) / 2;
    out->p50_us = (a->p50_us + b->p50_us) / 2;
    out->p99_us = (a->p99_us + b->p99_us) / 2;
    out->p999_us = (a->p999_us + b->p999_us) / 2;
    out->requests = a->requests + b->requests;
    out->rb_cpu_us = a->rb_cpu_us + b->rb_cpu_us;
    out->server_cpu_us = a->server_cpu_us < 0 || b->server_cpu_us < 0
                             ? -1
                             : a->server_cpu_us + b->server_cpu_us;
}

/* The limit over a phase: the mean of the limits measured right before
 * and right after it. */
static void limit_mean(const bench_limit *before, const bench_limit *after,
                       bench_limit *out)
{
    rb_result_mean(&before->acquire, &after->acquire, &out->acquire);
    rb_result_mean(&before->release, &after->release, &out->release);
}

/* The cheapest correct lock a client could send: SET key token NX PX ttl,
 * then a compare-and-delete script, built into run->floor_set and
 * floor_del (and the script loaded) once, for every measurement of the
 * floor.  0, or -1 with run->err. */
static int floor_commands(bench_run *run)
{
    char key[96], sha[41], ttl[24];
    const char *set[] = {"SET", key, "floor-token", "NX", "PX", ttl};
    const char *del[] = {"EVALSHA", sha, "1", key, "floor-token"};

    if (run->floor_set.argc > 0)
        return 0;
    snprintf(key, sizeof(key), "%s:floor", run->prefix);
    snprintf(ttl, sizeof(ttl), "%d", run->o.ttl_ms);
    if (bench_script_load(&run->target, bench_cad_script, sha, run->err,
                          sizeof(run->err))
        != 0)
        return -1;
    run->floor_set.argc = 6;
    run->floor_del.argc = 5;
    for (int i = 0; i < 6; i++)
        if ((run->floor_set.argv[i] = strdup(set[i])) == NULL
            || (i < 5 && (run->floor_del.argv[i] = strdup(del[i])) == NULL)) {
            snprintf(run->err, sizeof(run->err), "out of memory");
            return -1;
        }
    return 0;
}

/* The floor's two commands replayed at -c 1, requests of each, into
 * out.  Like the replays above, after the first call the SET finds the
 * key held and the delete finds it gone. */
static int replay_floor(bench_run *run, long requests, bench_limit *out)
{
    if (floor_commands(run) != 0)
        return -1;
    if (bench_rb_run_pipelined(run->o.redis.rb_bin, &run->target,
                               run->server.pid, 1, 1, requests,
                               &run->floor_set, 120000, &out->acquire,
                               run->err, sizeof(run->err))
            != 0
        || bench_rb_run_pipelined(run->o.redis.rb_bin, &run->target,
                                  run->server.pid, 1, 1, requests,
                                  &run->floor_del, 120000, &out->release,
                                  run->err, sizeof(run->err))
               != 0)
        return -1;
    return 0;
}

/* The floor replayed at -c 1, into out: the 1-client pair's limit. */
static int measure_floor(bench_run *run, bench_limit *out)
{
    if (replay_floor(run, run->o.pairs, out) != 0)
        return -1;
    print_limit("floor.set_nx", &out->acquire);
    print_limit("floor.compare_and_delete", &out->release);
    progress("floor -c 1: SET NX p50 %.1f us, compare-and-delete p50 %.1f us",
             out->acquire.p50_us, out->release.p50_us);
    return 0;
}

/* ------------------------------------------------------------------------
 * (a) Sequential pairs */

typedef struct seq_samples {
    bench_samples pair;
    bench_samples acquire;
    bench_samples release;
} seq_samples;

/* One timed acquire + release on key; adds the three durations to s when
 * s is not NULL.  Returns DLOCK_OK or the first failure. */
static dlock_err timed_pair(bench_run *run, const char *key,
                            const dlock_acquire_opts *ao, seq_samples *s)
{
    dlock_lock *lock = NULL;
    const int64_t t0 = bench_clock_ns();
    dlock_err rc = dlock_acquire(run->client, key, ao, &lock);
    const int64_t t1 = bench_clock_ns();

    if (rc != DLOCK_OK)
        return rc;
    rc = dlock_release(lock);
    const int64_t t2 = bench_clock_ns();
    if (rc == DLOCK_OK && s != NULL) {
        bench_samples_add(&s->pair, t2 - t0);
        bench_samples_add(&s->acquire, t1 - t0);
        bench_samples_add(&s->release, t2 - t1);
    }
    return rc;
}

/* Runs n pairs on key; returns the number that failed, or -1 (with the
 * message in run->err) when failures pile up. */
static long run_pairs(bench_run *run, const char *key, long n, seq_samples *s)
{
    dlock_acquire_opts ao;
    long errors = 0;

    acquire_opts(run, 0, &ao);
    for (long i = 0; i < n; i++) {
        const dlock_err rc = timed_pair(run, key, &ao, s);
        if (rc == DLOCK_OK)
            continue;
        if (++errors == 1) {
            snprintf(run->err, sizeof(run->err), "pair on %s: %s: %s", key,
                     dlock_errname(rc), dlock_client_errmsg(run->client));
        }
        if (errors >= MAX_ERRORS_PER_THREAD)
            return -1;
    }
    return errors;
}

/* Adds f to the table as one of the issue 17 targets. */
static void add_target(bench_run *run, const bench_figure *f)
{
    if (run->ntargets < (int)(sizeof(run->targets) / sizeof(*run->targets)))
        run->targets[run->ntargets++] = run->table.n;
    bench_table_add(&run->table, stdout, f);
}

/* One line per issue 17 target: figure, value, limit, ratio, target and
 * whether it was met, for a reader comparing runs. */
static void print_targets(const bench_run *run, FILE *out)
{
    if (run->ntargets == 0)
        return;
    fprintf(out, "\nissue 17 targets (ratios to limits measured in this "
                 "run):\n");
    for (int i = 0; i < run->ntargets; i++) {
        const bench_figure *f = &run->table.rows[run->targets[i]];
        char target[64];
        const int met = bench_figure_met(f);

        fprintf(out,
                "  %-28s %10.1f %-7s limit %10.1f  ratio %5.2f  target "
                "%-14s %s\n",
                run->table.names[run->targets[i]], f->value, f->unit, f->limit,
                bench_figure_ratio(f),
                bench_figure_target(f, target, sizeof(target)),
                met == 1 ? "met" : "NOT MET");
    }
}

static void add_latency_figure(bench_run *run, const char *name, double value,
                               double limit, const char *from, double goal,
                               long long n, const bench_cost *cost,
                               double mean_us)
{
    bench_figure f;

    bench_figure_init(&f, name, "us", BENCH_LOWER_IS_BETTER);
    f.value = value;
    f.limit = limit;
    f.limit_from = from;
    f.goal = goal;
    f.n = n;
    if (cost != NULL) {
        f.errors = 0;
        bench_cost_apply(cost, n, &f);
    }
    if (!isnan(mean_us)) {
        f.extra_key[0] = "mean_us";
        f.extra_value[0] = mean_us;
    }
    bench_table_add(&run->table, stdout, &f);
}

/* The one-client target: the sorted pairs' p50 against the floor,
 * redis-benchmark -c 1's SET NX PX + compare-and-delete measured right
 * before and after the pairs (the mean of the two, as for the thread
 * targets); with cost, what a pair cost too. */
static void add_floor_target(bench_run *run, const char *name,
                             const seq_samples *s, const bench_cost *cost)
{
    const long long n = (long long)s->pair.n;
    bench_figure f;

    if (run->floor.acquire.rps <= 0)
        return;
    bench_figure_init(&f, name, "us", BENCH_LOWER_IS_BETTER);
    f.value = bench_samples_quantile_us(&s->pair, 0.50);
    f.limit = run->floor.acquire.p50_us + run->floor.release.p50_us;
    f.limit_from = "redis-benchmark -c 1, before and after the pairs "
                   "(mean): p50(SET NX PX) + p50(compare-and-delete "
                   "EVALSHA)";
    f.goal = 1.15;
    f.n = n;
    if (cost != NULL) {
        f.errors = 0;
        bench_cost_apply(cost, n, &f);
    }
    add_target(run, &f);
}

static void report_sequential(bench_run *run, seq_samples *s,
                              const bench_cost *cost)
{
    const bench_rb_result *a = &run->c1.acquire;
    const bench_rb_result *r = &run->c1.release;
    const long long n = (long long)s->pair.n;

    bench_samples_sort(&s->pair);
    bench_samples_sort(&s->acquire);
    bench_samples_sort(&s->release);
    add_latency_figure(run, "seq.pair.p50",
                       bench_samples_quantile_us(&s->pair, 0.50),
                       a->p50_us + r->p50_us,
                       "redis-benchmark -c 1: p50(acquire) + p50(release)",
                       1.2, n, cost, bench_samples_mean_us(&s->pair));
    add_floor_target(run, "seq.pair.p50.vs_floor", s, NULL);
    add_latency_figure(run, "seq.pair.p99",
                       bench_samples_quantile_us(&s->pair, 0.99),
                       a->p99_us + r->p99_us,
                       "redis-benchmark -c 1: p99(acquire) + p99(release)",
                       NAN, n, cost, NAN);
    add_latency_figure(run, "seq.pair.p99.9",
                       bench_samples_quantile_us(&s->pair, 0.999),
                       a->p999_us + r->p999_us,
                       "redis-benchmark -c 1: p99.9(acquire) + "
                       "p99.9(release)",
                       NAN, n, cost, NAN);
    /* redis-benchmark reports percentiles from a histogram whose buckets
     * are 8 us wide near one round trip, so a p50 limit is the upper edge
     * of its bucket.  Its requests/s at -c 1 is exact and is one over the
     * mean round trip, which gives a limit without that rounding. */
    add_latency_figure(run, "seq.pair.mean", bench_samples_mean_us(&s->pair),
                       1e6 / a->rps + 1e6 / r->rps,
                       "redis-benchmark -c 1: 1/rps(acquire) + "
                       "1/rps(release), the mean round trips",
                       NAN, n, NULL, NAN);
    add_latency_figure(run, "seq.acquire.p50",
                       bench_samples_quantile_us(&s->acquire, 0.50), a->p50_us,
                       "redis-benchmark -c 1: p50(acquire)", NAN, n, NULL,
                       NAN);
    add_latency_figure(run, "seq.release.p50",
                       bench_samples_quantile_us(&s->release, 0.50), r->p50_us,
                       "redis-benchmark -c 1: p50(release)", NAN, n, NULL,
                       NAN);
}

/* (a) again on a client with busy polling: the pair's p50 against the
 * same floor, and what it costs in client CPU.  A figure of its own, beside
 * the default client's, never in place of it. */
static void report_busy_poll(bench_run *run, seq_samples *s,
                             const bench_cost *cost)
{
    const long long n = (long long)s->pair.n;
    char name[64];

    bench_samples_sort(&s->pair);
    bench_samples_sort(&s->acquire);
    bench_samples_sort(&s->release);
    snprintf(name, sizeof(name), "seq.busy_poll%d.pair.p50.vs_floor",
             run->o.busy_poll_us);
    add_floor_target(run, name, s, cost);
    snprintf(name, sizeof(name), "seq.busy_poll%d.pair.p99",
             run->o.busy_poll_us);
    add_latency_figure(run, name, bench_samples_quantile_us(&s->pair, 0.99),
                       run->c1.acquire.p99_us + run->c1.release.p99_us,
                       "redis-benchmark -c 1: p99(acquire) + p99(release)",
                       NAN, n, cost, bench_samples_mean_us(&s->pair));
}

/* Runs (a) on run->client, measures the floor after it (the one before
 * is run->floor_last) and reports it with report. */
static int sequential_on(bench_run *run, const char *suffix,
                         void (*report)(bench_run *, seq_samples *,
                                        const bench_cost *))
{
    char key[96];
    seq_samples s;
    bench_cost cost;
    const size_t cap = (size_t)run->o.pairs;

    snprintf(key, sizeof(key), "%s:seq%s", run->prefix, suffix);
    memset(&s, 0, sizeof(s));
    if (bench_samples_init(&s.pair, cap) != 0
        || bench_samples_init(&s.acquire, cap) != 0
        || bench_samples_init(&s.release, cap) != 0) {
        snprintf(run->err, sizeof(run->err), "out of memory");
        bench_samples_free(&s.pair);
        bench_samples_free(&s.acquire);
        return -1;
    }
    /* Any failed pair makes the run stop: a sequential latency with holes
     * in it would not be the figure it claims to be. */
    long errors = run_pairs(run, key, run->o.warmup, NULL);
    if (errors == 0) {
        cost_begin(run, &cost);
        errors = run_pairs(run, key, run->o.pairs, &s);
        cost_end(run, &cost);
    }
    /* The floor again, so that the pairs are judged against the floor
     * either side of them: on this kind of machine one measurement moves
     * by up to a quarter from the next (docs/benchmarks.md, "Session 19";
     * the floor's, "Session 24"). */
    const bench_limit before = run->floor_last;
    const int measured = errors == 0
                         && measure_floor(run, &run->floor_last) == 0;

    if (measured) {
        limit_mean(&before, &run->floor_last, &run->floor);
        report(run, &s, &cost);
    }
    bench_samples_free(&s.pair);
    bench_samples_free(&s.acquire);
    bench_samples_free(&s.release);
    return measured ? 0 : -1;
}

static int connect_client_with(bench_run *run, int busy_poll_us,
                               dlock_client **out);

/* (a) on the default client, then on one with --busy-poll-us. */
static int bench_sequential(bench_run *run)
{
    dlock_client *plain = run->client;
    int rc;

    if (sequential_on(run, "", report_sequential) != 0)
        return -1;
    if (run->o.busy_poll_us == 0)
        return 0;
    progress("(a) again with busy_poll_us %d", run->o.busy_poll_us);
    if (connect_client_with(run, run->o.busy_poll_us, &run->client) != 0) {
        run->client = plain;
        return -1;
    }
    rc = sequential_on(run, ":busy_poll", report_busy_poll);
    dlock_client_free(run->client);
    run->client = plain;
    return rc;
}

/* ------------------------------------------------------------------------
 * (a) taken apart: the same scripts from a plain client */

/*
 * The one-client pair costs more than the floor for two reasons the floor
 * does not have: what redis-server does for the library's scripts beyond
 * SET NX PX and a compare-and-delete (the fence from its clock and
 * counter, the fair queue's check, the release's notification), and what
 * the library's client does between its round trips.  A plain blocking
 * hiredis client sends the floor's two commands, and the library's two
 * scripts as captured, in blocks taken in turn with the library's own
 * pairs on the default client and with redis-benchmark's replays of the
 * floor (replays, floor, scripts, library, then library, scripts, floor,
 * replays, ...), so that all four meet the same phases of the machine.
 * The scripts' p50 against the floor's is the server's share, and the
 * library's against the scripts' its client's.  Each script pair is a
 * real grant and release: the release before deleted the key, so the
 * captured acquire takes it again with its own token.
 *
 * The replays say what the target's limit is worth.  redis-benchmark
 * times a request from its write to the reply's readable event, before
 * it reads or parses it, and its replayed SET finds the key held and its
 * delete finds it gone, so it writes nothing; a client making the floor's
 * own lock pairs pays for the read, the parse, the grant's writes and its
 * time between the two commands.  The plain client's floor pairs against
 * the replays (seq.raw.floor.pair.p50.vs_floor) are what the one-client
 * target would say of the floor itself, and the library's pairs against
 * the replays of the same blocks (seq.raw.pair.p50.vs_floor) are the
 * target's ratio without the seconds between a limit and its pairs
 * (docs/benchmarks.md, "Session 25").  Figures beside the target, to
 * read it by, never in its place.
 */
#define RAW_BLOCKS 6
#define RAW_WARMUP 200
/* How the replays' limit is measured, for limit_from. */
#define RAW_REPLAYS                                              \
    "redis-benchmark -c 1 in the same blocks: p50(SET NX PX) + " \
    "p50(compare-and-delete EVALSHA), the blocks' mean "

enum raw_want { RAW_OK, RAW_ONE, RAW_GRANT };

/* One round trip of argv on c; 0 when the reply is the one want names,
 * else -1 with run->err. */
static int raw_call(bench_run *run, redisContext *c, int argc,
                    const char *const *argv, enum raw_want want)
{
    redisReply *r = redisCommandArgv(c, argc, (const char **)argv, NULL);
    int ok = 0;

    if (r != NULL) {
        switch (want) {
        case RAW_OK:
            ok = r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
            break;
        case RAW_ONE:
            ok = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
            break;
        case RAW_GRANT:
            ok = r->type == REDIS_REPLY_STRING && r->len > 2
                 && strncmp(r->str, "1 ", 2) == 0;
            break;
        }
    }
    if (!ok)
        snprintf(run->err, sizeof(run->err),
                 "plain client: %s on %s answered %s%s", argv[0],
                 run->target.url,
                 r == NULL                       ? c->errstr
                 : r->type == REDIS_REPLY_STRING ? "the string "
                 : r->type == REDIS_REPLY_ERROR  ? "the error "
                                                 : "another reply",
                 r != NULL && r->str != NULL ? r->str : "");
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* The two commands of a pair, and what each must answer. */
typedef struct raw_pair {
    int argc[2];
    const char *const *argv[2];
    enum raw_want want[2];
} raw_pair;

/* n pairs of p on c, each pair's duration into s unless s is NULL. */
static int raw_pairs(bench_run *run, redisContext *c, const raw_pair *p,
                     long n, bench_samples *s)
{
    for (long i = 0; i < n; i++) {
        const int64_t t0 = bench_clock_ns();

        if (raw_call(run, c, p->argc[0], p->argv[0], p->want[0]) != 0
            || raw_call(run, c, p->argc[1], p->argv[1], p->want[1]) != 0)
            return -1;
        if (s != NULL)
            bench_samples_add(s, bench_clock_ns() - t0);
    }
    return 0;
}

/* One of the split's figures: value against limit, both p50s in us. */
static void add_raw_figure(bench_run *run, const char *name, double value,
                           double limit, const char *from, size_t n)
{
    bench_figure f;

    bench_figure_init(&f, name, "us", BENCH_LOWER_IS_BETTER);
    f.value = value;
    f.limit = limit;
    f.limit_from = from;
    f.n = (long long)n;
    bench_table_add(&run->table, stdout, &f);
}

/* What the split measured: the pairs of each kind, and redis-benchmark's
 * replays of the floor, the sum of the blocks' p50(SET) + p50(delete). */
typedef struct raw_split {
    bench_samples floor;
    bench_samples scripts;
    seq_samples lib;
    double replays_p50_us;
    int nreplays;
} raw_split;

static void report_raw(bench_run *run, raw_split *r)
{
    double floor_p50, scripts_p50, lib_p50, replay_p50;

    bench_samples_sort(&r->floor);
    bench_samples_sort(&r->scripts);
    bench_samples_sort(&r->lib.pair);
    floor_p50 = bench_samples_quantile_us(&r->floor, 0.50);
    scripts_p50 = bench_samples_quantile_us(&r->scripts, 0.50);
    lib_p50 = bench_samples_quantile_us(&r->lib.pair, 0.50);
    replay_p50 = r->replays_p50_us / r->nreplays;
    const struct {
        const char *name;
        double value, limit;
        const char *from;
        size_t n;
    } rows[] = {
        {"seq.raw.scripts.pair.p50", scripts_p50, floor_p50,
         "a plain blocking hiredis client, blocks in turn: p50 of SET NX "
         "PX + compare-and-delete EVALSHA (the library's two scripts "
         "against it: the server's share)",
         r->scripts.n},
        {"seq.pair.p50.vs_raw.scripts", lib_p50, scripts_p50,
         "the library's pairs in blocks taken in turn with its two scripts "
         "from a plain blocking hiredis client, p50 (the library client's "
         "share)",
         r->lib.pair.n},
        {"seq.raw.floor.pair.p50.vs_floor", floor_p50, replay_p50,
         RAW_REPLAYS "(the plain client's floor pairs against it: the "
                     "target said of the floor itself)",
         r->floor.n},
        {"seq.raw.pair.p50.vs_floor", lib_p50, replay_p50,
         RAW_REPLAYS "(the library's pairs of the blocks against it)",
         r->lib.pair.n},
    };

    for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++)
        add_raw_figure(run, rows[k].name, rows[k].value, rows[k].limit,
                       rows[k].from, rows[k].n);
    progress("in blocks: redis-benchmark's floor %.1f us; the plain "
             "client's floor pair p50 %.1f us (%.2f of it), the library's "
             "scripts %.1f us (%.2f of the plain floor); the library's "
             "pairs %.1f us (%.2f of the scripts, %.2f of redis-benchmark's "
             "floor)",
             replay_p50, floor_p50, floor_p50 / replay_p50, scripts_p50,
             scripts_p50 / floor_p50, lib_p50, lib_p50 / scripts_p50,
             lib_p50 / replay_p50);
}

/* redis-benchmark's replays of the floor, per_block of each command,
 * added to r->replays_p50_us. */
static int raw_replays(bench_run *run, long per_block, raw_split *r)
{
    bench_limit b;

    if (replay_floor(run, per_block, &b) != 0)
        return -1;
    r->replays_p50_us += b.acquire.p50_us + b.release.p50_us;
    r->nreplays++;
    return 0;
}

static int bench_raw(bench_run *run)
{
    enum { REPLAYS, FLOOR, SCRIPTS, LIB, KINDS };
    static const int order[2][KINDS] = {{REPLAYS, FLOOR, SCRIPTS, LIB},
                                        {LIB, SCRIPTS, FLOOR, REPLAYS}};
    char lib_key[96];
    const raw_pair floor_pair = {{run->floor_set.argc, run->floor_del.argc},
                                 {(const char *const *)run->floor_set.argv,
                                  (const char *const *)run->floor_del.argv},
                                 {RAW_OK, RAW_ONE}};
    const raw_pair scripts_pair = {
        {run->acquire_cmd.argc, run->release_cmd.argc},
        {(const char *const *)run->acquire_cmd.argv,
         (const char *const *)run->release_cmd.argv},
        {RAW_GRANT, RAW_ONE}};
    const long per_block = run->o.pairs / 2 / RAW_BLOCKS;
    const size_t cap = (size_t)(per_block * RAW_BLOCKS);
    raw_split r;
    redisContext *c = NULL;
    int rc = -1;

    memset(&r, 0, sizeof(r));
    snprintf(lib_key, sizeof(lib_key), "%s:rawlib", run->prefix);
    /* Built by the floor's first measurement, before (a). */
    if (floor_commands(run) != 0)
        return -1;
    c = bench_redis_connect(&run->target, 5000);
    if (c == NULL || c->err) {
        snprintf(run->err, sizeof(run->err), "plain client: connect to %s: %s",
                 run->target.url, c != NULL ? c->errstr : "out of memory");
        goto out;
    }
    if (bench_samples_init(&r.floor, cap) != 0
        || bench_samples_init(&r.scripts, cap) != 0
        || bench_samples_init(&r.lib.pair, cap) != 0
        || bench_samples_init(&r.lib.acquire, cap) != 0
        || bench_samples_init(&r.lib.release, cap) != 0) {
        snprintf(run->err, sizeof(run->err), "out of memory");
        goto out;
    }
    if (raw_pairs(run, c, &floor_pair, RAW_WARMUP, NULL) != 0
        || raw_pairs(run, c, &scripts_pair, RAW_WARMUP, NULL) != 0
        || run_pairs(run, lib_key, RAW_WARMUP, NULL) != 0)
        goto out;
    for (int b = 0; b < RAW_BLOCKS; b++) {
        for (int k = 0; k < KINDS; k++) {
            const int kind = order[b % 2][k];
            const long failed = kind == REPLAYS
                                    ? raw_replays(run, per_block, &r)
                                : kind == FLOOR
                                    ? raw_pairs(run, c, &floor_pair, per_block,
                                                &r.floor)
                                : kind == SCRIPTS
                                    ? raw_pairs(run, c, &scripts_pair,
                                                per_block, &r.scripts)
                                    : run_pairs(run, lib_key, per_block,
                                                &r.lib);

            if (failed != 0)
                goto out;
        }
    }
    report_raw(run, &r);
    rc = 0;
out:
    bench_samples_free(&r.floor);
    bench_samples_free(&r.scripts);
    bench_samples_free(&r.lib.pair);
    bench_samples_free(&r.lib.acquire);
    bench_samples_free(&r.lib.release);
    redisFree(c);
    return rc;
}

/* ------------------------------------------------------------------------
 * (b) Throughput: threads on distinct keys */

/* Holds the workers until every one exists, so that they start together
 * and the clock starts when they do. */
typedef struct tput_gate {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int open; /* 1: go; -1: give up (a thread failed) */
    int64_t deadline_ns;
} tput_gate;

typedef struct tput_worker {
    bench_run *run;
    tput_gate *gate;
    char key[96];
    long pairs;
    long errors;
    int64_t end_ns;
    bench_samples pair; /* each pair's duration */
    char errmsg[DLOCK_ERRMSG_MAX];
} tput_worker;

/* Waits for the gate; returns the deadline, or 0 when told to give up. */
static int64_t tput_gate_wait(tput_gate *g)
{
    pthread_mutex_lock(&g->mu);
    while (g->open == 0)
        pthread_cond_wait(&g->cond, &g->mu);
    const int64_t deadline = g->open > 0 ? g->deadline_ns : 0;
    pthread_mutex_unlock(&g->mu);
    return deadline;
}

static void tput_gate_open(tput_gate *g, int how, int64_t deadline_ns)
{
    pthread_mutex_lock(&g->mu);
    g->open = how;
    g->deadline_ns = deadline_ns;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->mu);
}

static void *tput_thread(void *arg)
{
    tput_worker *w = arg;
    dlock_acquire_opts ao;

    acquire_opts(w->run, 0, &ao);
    const int64_t deadline = tput_gate_wait(w->gate);
    while (bench_clock_ns() < deadline && w->errors < MAX_ERRORS_PER_THREAD) {
        dlock_lock *lock = NULL;
        const int64_t t0 = bench_clock_ns();
        dlock_err rc = dlock_acquire(w->run->client, w->key, &ao, &lock);
        if (rc == DLOCK_OK)
            rc = dlock_release(lock);
        if (rc == DLOCK_OK) {
            bench_samples_add(&w->pair, bench_clock_ns() - t0);
            w->pairs++;
        } else if (w->errors++ == 0) {
            snprintf(w->errmsg, sizeof(w->errmsg), "%s: %s", dlock_errname(rc),
                     dlock_client_errmsg(w->run->client));
        }
    }
    w->end_ns = bench_clock_ns();
    return NULL;
}

typedef struct tput_result {
    long pairs;
    long errors;
    double seconds;
    double p99_us; /* of one pair, over every thread */
    bench_cost cost;
} tput_result;

/* Samples kept per thread; more pairs than this are counted, not timed. */
#define TPUT_SAMPLES (1u << 17)

/* Starts nthreads workers, opens the gate at *start_ns and joins them;
 * returns the number started. */
static int run_tput_threads(bench_run *run, tput_worker *w, int nthreads,
                            int64_t *start_ns)
{
    pthread_t tid[MAX_THREADS];
    tput_gate gate = {.open = 0};
    int started = 0;

    pthread_mutex_init(&gate.mu, NULL);
    pthread_cond_init(&gate.cond, NULL);
    for (int i = 0; i < nthreads; i++) {
        w[i].run = run;
        w[i].gate = &gate;
        snprintf(w[i].key, sizeof(w[i].key), "%s:tput:%d:%d", run->prefix,
                 nthreads, i);
        if (pthread_create(&tid[i], NULL, tput_thread, &w[i]) != 0)
            break;
        started++;
    }
    *start_ns = bench_clock_ns();
    tput_gate_open(&gate, started == nthreads ? 1 : -1,
                   *start_ns + (int64_t)run->o.duration_ms * 1000000);
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    pthread_cond_destroy(&gate.cond);
    pthread_mutex_destroy(&gate.mu);
    return started;
}

static int measure_tput(bench_run *run, int nthreads, tput_result *out)
{
    tput_worker w[MAX_THREADS];
    int64_t start = 0;

    bench_samples all;

    memset(w, 0, sizeof(w));
    memset(out, 0, sizeof(*out));
    for (int i = 0; i < nthreads; i++) {
        if (bench_samples_init(&w[i].pair, TPUT_SAMPLES) != 0) {
            for (int j = 0; j < i; j++)
                bench_samples_free(&w[j].pair);
            snprintf(run->err, sizeof(run->err), "out of memory");
            return -1;
        }
    }
    cost_begin(run, &out->cost);
    const int started = run_tput_threads(run, w, nthreads, &start);
    cost_end(run, &out->cost);
    if (started != nthreads) {
        snprintf(run->err, sizeof(run->err), "pthread_create failed");
        return -1;
    }
    int64_t end = start;
    for (int i = 0; i < nthreads; i++) {
        out->pairs += w[i].pairs;
        out->errors += w[i].errors;
        end = w[i].end_ns > end ? w[i].end_ns : end;
        if (w[i].errors > 0 && run->err[0] == '\0')
            snprintf(run->err, sizeof(run->err), "%s", w[i].errmsg);
    }
    out->seconds = (double)(end - start) / 1e9;
    out->p99_us = NAN;
    if (bench_samples_init(&all, (size_t)nthreads * TPUT_SAMPLES) == 0) {
        for (int i = 0; i < nthreads; i++)
            bench_samples_merge(&all, &w[i].pair);
        bench_samples_sort(&all);
        out->p99_us = bench_samples_quantile_us(&all, 0.99);
        bench_samples_free(&all);
    }
    for (int i = 0; i < nthreads; i++)
        bench_samples_free(&w[i].pair);
    return 0;
}

/* The higher of the -c N and -c 1 -P N limits, in pairs/s. */
static const bench_limit *best_limit(const bench_limit *cn,
                                     const bench_limit *piped)
{
    return pair_rate(piped) > pair_rate(cn) ? piped : cn;
}

/* The issue 17 targets of n callers, threads ("tput.Nthreads.*") or an
 * async handle's ("tput.asyncN.*"), with the same limits and p99
 * definition: pairs/s against the higher of the -c N and -c 1 -P N
 * limits, and the pair's p99 against that limit's p99(acquire) +
 * p99(release). */
static void report_tput_targets(bench_run *run, int async, int nthreads,
                                const tput_result *r, const bench_limit *cn,
                                const bench_limit *piped)
{
    const bench_limit *best = best_limit(cn, piped);
    char who[32], name[64], from[192];
    bench_figure f;

    snprintf(who, sizeof(who), async ? "async%d" : "%dthreads", nthreads);
    snprintf(name, sizeof(name), "tput.%s.vs_best", who);
    snprintf(from, sizeof(from),
             "the higher of redis-benchmark -c %d and -c 1 -P %d (here %s), "
             "each the mean of its runs right before and right after",
             nthreads, nthreads, best == piped ? "-P" : "-c");
    bench_figure_init(&f, name, "pairs/s", BENCH_HIGHER_IS_BETTER);
    f.value = r->seconds > 0 ? (double)r->pairs / r->seconds : NAN;
    f.limit = pair_rate(best);
    f.limit_from = from;
    f.goal = 0.90;
    f.n = r->pairs;
    f.errors = r->errors;
    bench_cost_apply(&r->cost, r->pairs, &f);
    add_target(run, &f);
    snprintf(name, sizeof(name), "tput.%s.p99", who);
    bench_figure_init(&f, name, "us", BENCH_LOWER_IS_BETTER);
    f.value = r->p99_us;
    f.limit = best->acquire.p99_us + best->release.p99_us;
    f.limit_from = "p99(acquire) + p99(release) of that limit";
    f.goal = 2.0;
    f.n = r->pairs;
    add_target(run, &f);
}

/* pipeline > 1: the figure against the `-c 1 -P pipeline` limit. */
static void report_tput(bench_run *run, int nthreads, const tput_result *r,
                        const bench_limit *l, int pipeline)
{
    char name[64];
    char from[192];
    const char *when = nthreads > 1 ? ", rps the mean of the runs right "
                                      "before and right after"
                                    : "";
    bench_figure f;

    snprintf(name, sizeof(name), "tput.%dthreads%s", nthreads,
             pipeline > 1 ? ".vs_pipelined" : "");
    if (pipeline > 1)
        snprintf(from, sizeof(from),
                 "redis-benchmark -c 1 -P %d: "
                 "1 / (1/rps(acquire) + 1/rps(release))%s",
                 pipeline, when);
    else
        snprintf(from, sizeof(from),
                 "redis-benchmark -c %d: "
                 "1 / (1/rps(acquire) + 1/rps(release))%s",
                 l->acquire.clients, when);
    bench_figure_init(&f, name, "pairs/s", BENCH_HIGHER_IS_BETTER);
    f.value = r->seconds > 0 ? (double)r->pairs / r->seconds : NAN;
    f.limit = pair_rate(l);
    f.limit_from = from;
    f.goal = nthreads == 32 ? 0.70 : NAN;
    f.n = r->pairs;
    f.errors = r->errors;
    bench_cost_apply(&r->cost, r->pairs, &f);
    bench_table_add(&run->table, stdout, &f);
}

/* ------------------------------------------------------------------------
 * (b') Throughput: callers on one thread, through one dlock_async handle */

/*
 * ncallers callers, each looping a try-acquire then a release of its own
 * key, all driven by one thread's poll loop through one dlock_async (one
 * connection, every caller's commands pipelined on it): what a service
 * on an event loop gets.  A pair is timed from its acquire's submission
 * to its release's callback, as a thread's pair is from dlock_acquire's
 * call to dlock_release's return.
 */
typedef struct async_caller {
    struct async_bench *b;
    char key[96];
    int64_t t0;
} async_caller;

typedef struct async_bench {
    bench_run *run;
    dlock_async *a;
    dlock_acquire_opts ao;
    int64_t deadline_ns;
    long pairs;
    long errors;
    bench_samples pair;
    char errmsg[DLOCK_ERRMSG_MAX];
    async_caller callers[MAX_THREADS];
} async_bench;

static void async_start(async_caller *k);

static void async_error(async_bench *b, dlock_err rc, const char *msg)
{
    if (b->errors++ == 0)
        snprintf(b->errmsg, sizeof(b->errmsg), "%s: %s", dlock_errname(rc),
                 msg);
}

static void async_released(dlock_async *a, dlock_err rc, const char *msg,
                           void *arg)
{
    async_caller *k = arg;

    (void)a;
    if (rc == DLOCK_OK) {
        bench_samples_add(&k->b->pair, bench_clock_ns() - k->t0);
        k->b->pairs++;
    } else {
        async_error(k->b, rc, msg);
    }
    async_start(k);
}

static void async_acquired(dlock_async *a, dlock_err rc, dlock_lock *lock,
                           const char *msg, void *arg)
{
    async_caller *k = arg;

    if (rc == DLOCK_OK)
        rc = dlock_async_release(a, lock, async_released, k);
    if (rc == DLOCK_OK)
        return;
    async_error(k->b, rc, rc == DLOCK_INVALID ? dlock_async_errmsg(a) : msg);
    dlock_lock_free(lock);
    async_start(k);
}

/* The caller's next pair, unless time is up or errors pile up. */
static void async_start(async_caller *k)
{
    async_bench *b = k->b;
    dlock_err rc;

    if (bench_clock_ns() >= b->deadline_ns
        || b->errors >= MAX_ERRORS_PER_THREAD)
        return;
    k->t0 = bench_clock_ns();
    rc = dlock_async_acquire(b->a, k->key, &b->ao, async_acquired, k);
    if (rc != DLOCK_OK)
        async_error(b, rc, dlock_async_errmsg(b->a));
}

static int measure_async(bench_run *run, int ncallers, tput_result *out)
{
    static async_bench b; /* large; one phase at a time */
    int64_t start;
    dlock_err rc;

    memset(&b, 0, sizeof(b));
    memset(out, 0, sizeof(*out));
    b.run = run;
    acquire_opts(run, 0, &b.ao);
    rc = dlock_async_new(run->client, &b.a);
    if (rc != DLOCK_OK) {
        snprintf(run->err, sizeof(run->err), "dlock_async_new: %s",
                 dlock_client_errmsg(run->client));
        return -1;
    }
    if (bench_samples_init(&b.pair, TPUT_SAMPLES) != 0) {
        dlock_async_free(b.a);
        snprintf(run->err, sizeof(run->err), "out of memory");
        return -1;
    }
    cost_begin(run, &out->cost);
    start = bench_clock_ns();
    b.deadline_ns = start + (int64_t)run->o.duration_ms * 1000000;
    for (int i = 0; i < ncallers; i++) {
        b.callers[i].b = &b;
        snprintf(b.callers[i].key, sizeof(b.callers[i].key), "%s:async:%d:%d",
                 run->prefix, ncallers, i);
        async_start(&b.callers[i]);
    }
    while (dlock_async_pending(b.a) > 0)
        dlock_async_poll(b.a, 100);
    out->seconds = (double)(bench_clock_ns() - start) / 1e9;
    cost_end(run, &out->cost);
    out->pairs = b.pairs;
    out->errors = b.errors;
    if (b.errors > 0 && run->err[0] == '\0')
        snprintf(run->err, sizeof(run->err), "%s", b.errmsg);
    bench_samples_sort(&b.pair);
    out->p99_us = bench_samples_quantile_us(&b.pair, 0.99);
    bench_samples_free(&b.pair);
    dlock_async_free(b.a);
    return 0;
}

/* Both limits of n callers: -c n and -c 1 -P n. */
static int measure_limits(bench_run *run, int n, bench_limit *cn,
                          bench_limit *piped)
{
    return measure_limit(run, n, cn) != 0
                   || measure_limit_pipelined(run, 1, n, piped) != 0
               ? -1
               : 0;
}

/* One thread, against the -c 1 limit measured at the start (the
 * sequential pairs run between it and this). */
static int bench_tput1(bench_run *run)
{
    tput_result r;

    if (measure_tput(run, 1, &r) != 0)
        return -1;
    report_tput(run, 1, &r, &run->c1, 1);
    progress("1 thread: %.0f pairs/s (%ld errors)",
             (double)r.pairs / r.seconds, r.errors);
    return r.errors >= MAX_ERRORS_PER_THREAD ? -1 : 0;
}

/*
 * The blocking ceiling: the most pairs/s that nthreads threads blocking
 * in dlock_acquire and dlock_release could reach on this machine, however
 * a client gathered their commands onto connections.  Each pair costs at
 * least:
 *   - redis-server's CPU for the pair at the best batching nthreads
 *     callers allow: the async handle's (one connection, every caller's
 *     commands pipelined on it), S us;
 *   - the client's CPU for the same work, the commands' formatting, the
 *     tokens, the reads and writes of those batches: the async handle's
 *     again, C us;
 *   - two sleeps and wake-ups of a thread, which the async handle does
 *     not pay and a blocking call cannot avoid: W us, measured with as
 *     many threads and no network (wake_ceiling.h).
 * redis-server runs the scripts on one thread, so pairs/s <= 1 / S, and
 * the machine has ncpu CPUs for all of it, so pairs/s <= ncpu / (S + C +
 * W).  The figure is the lower of the two, against the threads' own
 * limit: a ratio under the threads' goal says that no client whose threads
 * block can meet it on this machine, not that libdlock falls short of
 * what one could do (docs/benchmarks.md, "Session 21").  It assumes that
 * such a client's work besides its wake-ups costs no less than the async
 * handle's, and it is read on a quiet machine: other work on the CPUs
 * makes S, C and W dearer and the ceiling lower (the run line's CPU
 * pressure says when).
 */
static void report_ceiling(bench_run *run, int nthreads,
                           const tput_result *async, const bench_limit *best)
{
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    const double server = bench_per_op(async->cost.server_cpu_us,
                                       async->pairs);
    const double client = bench_per_op(async->cost.cpu_us, async->pairs);
    double wake, one_thread, all_cpus;
    char name[64];
    bench_figure f;
    wake_ceiling w;

    if (isnan(server) || isnan(client)) {
        progress("%d threads: no blocking ceiling: redis-server's CPU is "
                 "not known (a server of --url, or /proc unreadable)",
                 nthreads);
        return;
    }
    if (wake_ceiling_run(nthreads, 1000, &w) != 0) {
        progress("%d threads: no blocking ceiling: %s", nthreads,
                 strerror(errno));
        return;
    }
    wake = 2 * wake_ceiling_cpu_us_per_call(&w);
    one_thread = 1e6 / server;
    all_cpus = (double)ncpu * 1e6 / (server + client + wake);
    snprintf(name, sizeof(name), "tput.%dthreads.ceiling.vs_best", nthreads);
    bench_figure_init(&f, name, "pairs/s", BENCH_HIGHER_IS_BETTER);
    f.value = one_thread < all_cpus ? one_thread : all_cpus;
    f.limit = pair_rate(best);
    f.limit_from = "the threads' limit (tput.Nthreads.vs_best's)";
    f.client_cpu_us_per_op = client + wake;
    f.server_cpu_us_per_op = server;
    f.extra_key[0] = "wake_cpu_us_per_pair";
    f.extra_value[0] = wake;
    f.extra_key[1] = "cpus";
    f.extra_value[1] = (double)ncpu;
    bench_table_add(&run->table, stdout, &f);
    progress("%d threads: blocking ceiling %.0f pairs/s (server %.1f us, "
             "client %.1f us and wake-ups %.1f us a pair, %ld CPUs)",
             nthreads, f.value, server, client, wake, ncpu);
}

/* nthreads threads, then as many callers on one async handle, each phase
 * against the mean of the limits measured right before and right after
 * it: limits, threads, limits, async, limits. */
static int bench_tput(bench_run *run, int nthreads)
{
    bench_limit cn[3], piped[3], cn_mean, piped_mean, threads_best;
    tput_result r;

    if (measure_limits(run, nthreads, &cn[0], &piped[0]) != 0
        || measure_tput(run, nthreads, &r) != 0
        || measure_limits(run, nthreads, &cn[1], &piped[1]) != 0)
        return -1;
    limit_mean(&cn[0], &cn[1], &cn_mean);
    limit_mean(&piped[0], &piped[1], &piped_mean);
    threads_best = *best_limit(&cn_mean, &piped_mean);
    report_tput(run, nthreads, &r, &cn_mean, 1);
    report_tput(run, nthreads, &r, &piped_mean, nthreads);
    report_tput_targets(run, 0, nthreads, &r, &cn_mean, &piped_mean);
    progress("%d threads: %.0f pairs/s (%ld errors)", nthreads,
             (double)r.pairs / r.seconds, r.errors);
    if (r.errors >= (long)nthreads * MAX_ERRORS_PER_THREAD)
        return -1;
    if (measure_async(run, nthreads, &r) != 0
        || measure_limits(run, nthreads, &cn[2], &piped[2]) != 0)
        return -1;
    limit_mean(&cn[1], &cn[2], &cn_mean);
    limit_mean(&piped[1], &piped[2], &piped_mean);
    report_tput_targets(run, 1, nthreads, &r, &cn_mean, &piped_mean);
    progress("%d async callers: %.0f pairs/s (%ld errors)", nthreads,
             (double)r.pairs / r.seconds, r.errors);
    if (r.errors >= MAX_ERRORS_PER_THREAD)
        return -1;
    report_ceiling(run, nthreads, &r, &threads_best);
    return 0;
}

/* ------------------------------------------------------------------------
 * (c) Hand-off: waiters on one key */

/*
 * Grants are numbered in the order they happen: a thread takes its number
 * while it holds the lock, so grant g+1's number is taken after grant g's
 * release reached the server.  The gap of grant g+1 is then its acquire's
 * return minus grant g's release's return, both on CLOCK_MONOTONIC.  If
 * the releasing thread is descheduled between its release returning and
 * reading the clock, a gap comes out small or negative; it is kept as
 * measured.  holders counts threads inside the critical section, as a
 * check that the lock excluded; holder records which thread got each
 * grant, to tell a hand-off to a waiter from the releaser taking the key
 * straight back.
 *
 * Two modes.  In the free-for-all one (the issue's), a thread that
 * releases loops straight into its next acquire, so it races the waiter
 * that the release woke, and it usually wins: it is already running, the
 * waiter has two thread wake-ups to go.  In the polite one, a thread that
 * released waits (on grant_cv, bounded by the deadline) until another
 * thread holds the lock before it tries again, so every grant is a real
 * hand-off to a woken waiter, which is the path the design promises costs
 * about one round trip.
 */
typedef struct handoff_shared {
    bench_run *run;
    char key[96];
    int64_t deadline_ns;
    size_t cap;
    int64_t *acq_ns;  /* per grant: the acquire's return */
    int64_t *rel_ns;  /* per grant: the release's return, 0 if bad */
    int64_t *hold_ns; /* per grant: time held */
    int *holder;      /* per grant: the thread's index */
    int polite;
    int fair;                 /* opts.fair */
    atomic_llong wait_sum_ns; /* acquire calls that got the lock */
    atomic_llong wait_max_ns;
    atomic_long waits;
    pthread_mutex_t grant_mu; /* with grant_cv: "grants moved on" */
    pthread_cond_t grant_cv;
    atomic_long grants;
    atomic_int holders;
    atomic_long overlaps;
    atomic_long timeouts;
    atomic_long errors;
    /* The hand-off threads' run-queue waits (bench_cpu.h), summed over
     * them; runq_unread counts threads without schedstat. */
    atomic_llong runq_us;
    atomic_int runq_unread;
    pthread_mutex_t err_mu;
    char errmsg[DLOCK_ERRMSG_MAX];
} handoff_shared;

typedef struct handoff_worker {
    handoff_shared *h;
    int index;
} handoff_worker;

static void handoff_note_error(handoff_shared *h, dlock_err rc)
{
    if (atomic_fetch_add(&h->errors, 1) != 0)
        return;
    pthread_mutex_lock(&h->err_mu);
    snprintf(h->errmsg, sizeof(h->errmsg), "%s: %s", dlock_errname(rc),
             dlock_client_errmsg(h->run->client));
    pthread_mutex_unlock(&h->err_mu);
}

/* In polite mode: waits until a grant after g exists, or the deadline. */
static void handoff_wait_for_next(handoff_shared *h, long g)
{
    const struct timespec until = {
        .tv_sec = (time_t)(h->deadline_ns / 1000000000),
        .tv_nsec = (long)(h->deadline_ns % 1000000000),
    };

    pthread_mutex_lock(&h->grant_mu);
    while (atomic_load(&h->grants) <= g + 1
           && pthread_cond_timedwait(&h->grant_cv, &h->grant_mu, &until) == 0)
        continue;
    pthread_mutex_unlock(&h->grant_mu);
}

/* Tells polite releasers that grant g was taken. */
static void handoff_announce(handoff_shared *h)
{
    pthread_mutex_lock(&h->grant_mu);
    pthread_cond_broadcast(&h->grant_cv);
    pthread_mutex_unlock(&h->grant_mu);
}

/* Holds the lock for the configured time and releases it, recording the
 * grant's times. */
static void handoff_hold(handoff_shared *h, int index, dlock_lock *lock,
                         int64_t t_acq)
{
    const long g = atomic_fetch_add(&h->grants, 1);

    if (h->polite)
        handoff_announce(h);

    if (atomic_fetch_add(&h->holders, 1) != 0)
        atomic_fetch_add(&h->overlaps, 1);
    bench_sleep_ns((int64_t)h->run->o.hold_us * 1000);
    const int64_t t_held = bench_clock_ns();
    atomic_fetch_sub(&h->holders, 1);
    const dlock_err rc = dlock_release(lock);
    const int64_t t_rel = bench_clock_ns();
    if (rc != DLOCK_OK)
        handoff_note_error(h, rc);
    if ((size_t)g < h->cap) {
        h->acq_ns[g] = t_acq;
        h->hold_ns[g] = t_held - t_acq;
        h->rel_ns[g] = rc == DLOCK_OK ? t_rel : 0;
        h->holder[g] = index;
    }
    if (h->polite)
        handoff_wait_for_next(h, g);
}

/* Adds one successful acquire call's duration to the wait figures. */
static void handoff_note_wait(handoff_shared *h, int64_t ns)
{
    long long max = atomic_load(&h->wait_max_ns);

    atomic_fetch_add(&h->wait_sum_ns, ns);
    atomic_fetch_add(&h->waits, 1);
    while (ns > max
           && !atomic_compare_exchange_weak(&h->wait_max_ns, &max, ns))
        continue;
}

static void *handoff_thread(void *arg)
{
    const handoff_worker *w = arg;
    handoff_shared *h = w->h;
    dlock_acquire_opts ao;

    const int64_t runq_start = bench_cpu_thread_runq_us();

    acquire_opts(h->run, h->run->o.wait_ms, &ao);
    ao.fair = h->fair;
    while (bench_clock_ns() < h->deadline_ns
           && atomic_load(&h->errors) < MAX_ERRORS_PER_THREAD) {
        dlock_lock *lock = NULL;
        const int64_t t_call = bench_clock_ns();
        const dlock_err rc = dlock_acquire(h->run->client, h->key, &ao, &lock);
        const int64_t t_acq = bench_clock_ns();
        if (rc == DLOCK_OK) {
            handoff_note_wait(h, t_acq - t_call);
            handoff_hold(h, w->index, lock, t_acq);
        } else if (rc == DLOCK_BUSY) {
            atomic_fetch_add(&h->timeouts, 1);
        } else {
            handoff_note_error(h, rc);
        }
    }
    const int64_t runq_end = bench_cpu_thread_runq_us();
    if (runq_start >= 0 && runq_end >= runq_start)
        atomic_fetch_add(&h->runq_us, runq_end - runq_start);
    else
        atomic_fetch_add(&h->runq_unread, 1);
    return NULL;
}

typedef struct handoff_result {
    long grants;   /* acquired before the deadline */
    long regrants; /* of which by the previous holder */
    bench_samples gaps;
    double hold_mean_us;
    bench_cost cost;
    /* Run-queue waits during the run (bench_cpu.h), milliseconds, NAN if
     * unread: of the hand-off threads together, and of the private
     * redis-server.  Not figures: they say whether the waits' maximum
     * may hold a scheduling stall (docs/benchmarks.md, session 16). */
    double runq_threads_ms;
    double runq_server_ms;
} handoff_result;

/* Turns the per-grant times into gaps and counts, over the grants whose
 * acquire returned before the deadline. */
static int collect_handoff(const handoff_shared *h, handoff_result *out)
{
    const long total = atomic_load(&h->grants);
    const size_t n = (size_t)total < h->cap ? (size_t)total : h->cap;
    double hold_sum = 0;

    if (bench_samples_init(&out->gaps, n) != 0)
        return -1;
    for (size_t g = 0; g < n && h->acq_ns[g] < h->deadline_ns; g++) {
        out->grants++;
        hold_sum += (double)h->hold_ns[g];
        if (g == 0 || h->rel_ns[g - 1] == 0)
            continue;
        bench_samples_add(&out->gaps, h->acq_ns[g] - h->rel_ns[g - 1]);
        out->regrants += h->holder[g] == h->holder[g - 1];
    }
    out->hold_mean_us = out->grants ? hold_sum / (double)out->grants / 1000
                                    : NAN;
    bench_samples_sort(&out->gaps);
    return 0;
}

static int handoff_init(bench_run *run, int nthreads, int polite, int fair,
                        handoff_shared *h)
{
    pthread_condattr_t attr;

    memset(h, 0, sizeof(*h));
    h->run = run;
    h->polite = polite;
    h->fair = fair;
    snprintf(h->key, sizeof(h->key), "%s:handoff:%d:%s", run->prefix, nthreads,
             fair     ? "fair"
             : polite ? "polite"
                      : "ffa");
    /* At most one grant per hold time, with room to spare. */
    h->cap = (size_t)run->o.duration_ms * 1000 / (size_t)run->o.hold_us * 2
             + 1024;
    h->acq_ns = calloc(h->cap, sizeof(*h->acq_ns));
    h->rel_ns = calloc(h->cap, sizeof(*h->rel_ns));
    h->hold_ns = calloc(h->cap, sizeof(*h->hold_ns));
    h->holder = calloc(h->cap, sizeof(*h->holder));
    pthread_mutex_init(&h->err_mu, NULL);
    pthread_mutex_init(&h->grant_mu, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&h->grant_cv, &attr);
    pthread_condattr_destroy(&attr);
    if (h->acq_ns == NULL || h->rel_ns == NULL || h->hold_ns == NULL
        || h->holder == NULL) {
        snprintf(run->err, sizeof(run->err), "out of memory");
        return -1;
    }
    return 0;
}

static void handoff_free(handoff_shared *h)
{
    free(h->acq_ns);
    free(h->rel_ns);
    free(h->hold_ns);
    free(h->holder);
    pthread_mutex_destroy(&h->err_mu);
    pthread_mutex_destroy(&h->grant_mu);
    pthread_cond_destroy(&h->grant_cv);
}

static int run_handoff_threads(handoff_shared *h, int nthreads)
{
    pthread_t tid[MAX_THREADS];
    handoff_worker w[MAX_THREADS];
    int started = 0;

    h->deadline_ns = bench_clock_ns()
                     + (int64_t)h->run->o.duration_ms * 1000000;
    for (int i = 0; i < nthreads; i++) {
        w[i] = (handoff_worker){.h = h, .index = i};
        if (pthread_create(&tid[i], NULL, handoff_thread, &w[i]) != 0)
            break;
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    return started == nthreads ? 0 : -1;
}

static void report_handoff_rate(bench_run *run, const char *name,
                                const handoff_shared *h,
                                const handoff_result *r)
{
    const bench_rb_result *a = &run->c1.acquire;
    const bench_rb_result *rel = &run->c1.release;
    bench_figure f;

    bench_figure_init(&f, name, "acq/s", BENCH_HIGHER_IS_BETTER);
    f.value = (double)r->grants / (run->o.duration_ms / 1000.0);
    f.limit = 1e6 / (r->hold_mean_us + rel->p50_us + a->p50_us);
    f.limit_from = "1 / (measured mean hold + redis-benchmark -c 1 "
                   "p50(release) + p50(acquire))";
    f.n = r->grants;
    f.errors = atomic_load(&h->errors) + atomic_load(&h->overlaps);
    bench_cost_apply(&r->cost, r->grants, &f);
    f.extra_key[0] = "regrant_share";
    f.extra_value[0] = r->gaps.n ? (double)r->regrants / (double)r->gaps.n
                                 : NAN;
    f.extra_key[1] = "wait_timeouts";
    f.extra_value[1] = (double)atomic_load(&h->timeouts);
    bench_table_add(&run->table, stdout, &f);
}

static void report_handoff_gap(bench_run *run, const char *name, double q,
                               double limit, const char *from,
                               const handoff_result *r)
{
    bench_figure f;

    bench_figure_init(&f, name, "us", BENCH_LOWER_IS_BETTER);
    f.value = bench_samples_quantile_us(&r->gaps, q);
    f.limit = limit;
    f.limit_from = from;
    f.abs_goal = q == 0.50 ? 1000 : NAN;
    f.n = (long long)r->gaps.n;
    bench_table_add(&run->table, stdout, &f);
}

/* The waits of one hand-off run: mean and max of the acquire calls that
 * got the lock, against the fair ideal. */
static void report_handoff_waits(bench_run *run, int nthreads,
                                 const char *mode, const handoff_shared *h,
                                 const handoff_result *r)
{
    const double cycle_us = r->hold_mean_us + run->c1.release.p50_us
                            + run->c1.acquire.p50_us;
    const long waits = atomic_load(&h->waits);
    char name[2][64];
    bench_figure f;

    snprintf(name[0], sizeof(name[0]), "handoff.%dwaiters%s.wait.mean",
             nthreads, mode);
    snprintf(name[1], sizeof(name[1]), "handoff.%dwaiters%s.wait.max",
             nthreads, mode);
    for (int i = 0; i < 2; i++) {
        bench_figure_init(&f, name[i], "us", BENCH_LOWER_IS_BETTER);
        f.value = i == 0 ? (waits ? (double)atomic_load(&h->wait_sum_ns)
                                        / (double)waits / 1000
                                  : NAN)
                         : (double)atomic_load(&h->wait_max_ns) / 1000;
        f.limit = (nthreads - 1) * cycle_us;
        f.limit_from = "fair ideal: (N - 1) x (measured mean hold + "
                       "redis-benchmark -c 1 p50(release) + p50(acquire))";
        f.n = waits;
        if (i == 1) {
            f.extra_key[0] = "runq_wait_threads_ms";
            f.extra_value[0] = r->runq_threads_ms;
            f.extra_key[1] = "runq_wait_server_ms";
            f.extra_value[1] = r->runq_server_ms;
        }
        bench_table_add(&run->table, stdout, &f);
    }
}

static void report_handoff(bench_run *run, int nthreads,
                           const handoff_shared *h, const handoff_result *r)
{
    const char *mode = h->fair ? ".fair" : h->polite ? ".polite" : "";
    char name[3][64];

    snprintf(name[0], sizeof(name[0]), "handoff.%dwaiters%s.rate", nthreads,
             mode);
    snprintf(name[1], sizeof(name[1]), "handoff.%dwaiters%s.gap.p50", nthreads,
             mode);
    snprintf(name[2], sizeof(name[2]), "handoff.%dwaiters%s.gap.p99", nthreads,
             mode);
    report_handoff_rate(run, name[0], h, r);
    report_handoff_gap(run, name[1], 0.50, run->c1.acquire.p50_us,
                       "redis-benchmark -c 1: p50(acquire), one round trip",
                       r);
    report_handoff_gap(run, name[2], 0.99, run->c1.acquire.p99_us,
                       "redis-benchmark -c 1: p99(acquire), one round trip",
                       r);
    report_handoff_waits(run, nthreads, mode, h, r);
}

/* Says on stderr what the hand-off did, and keeps any failure in err. */
static void note_handoff(bench_run *run, int nthreads, const handoff_shared *h,
                         const handoff_result *r)
{
    progress("%d waiters%s: %ld grants (%ld to the previous holder), gap "
             "p50 %.1f us, max wait %.1f ms, %ld wait timeouts, %ld errors, "
             "%ld overlaps",
             nthreads,
             h->fair     ? " (fair)"
             : h->polite ? " (polite)"
                         : "",
             r->grants, r->regrants, bench_samples_quantile_us(&r->gaps, 0.5),
             (double)atomic_load(&h->wait_max_ns) / 1e6,
             atomic_load(&h->timeouts), atomic_load(&h->errors),
             atomic_load(&h->overlaps));
    progress("%d waiters%s: waited for a CPU (run queues): the threads "
             "%.1f ms together, redis-server %.1f ms",
             nthreads,
             h->fair     ? " (fair)"
             : h->polite ? " (polite)"
                         : "",
             r->runq_threads_ms, r->runq_server_ms);
    if (atomic_load(&h->overlaps) > 0) {
        snprintf(run->err, sizeof(run->err),
                 "hand-off on %s: %ld grants "
                 "overlapped another holder: the lock did not exclude",
                 h->key, atomic_load(&h->overlaps));
    } else if (atomic_load(&h->errors) > 0) {
        snprintf(run->err, sizeof(run->err), "%s", h->errmsg);
    }
}

static int bench_handoff(bench_run *run, int nthreads, int polite, int fair)
{
    handoff_shared h;
    handoff_result r;

    memset(&r, 0, sizeof(r));
    if (handoff_init(run, nthreads, polite, fair, &h) != 0) {
        handoff_free(&h);
        return -1;
    }
    const int64_t server_runq = bench_cpu_pid_runq_us(run->server.pid);
    cost_begin(run, &r.cost);
    int rc = run_handoff_threads(&h, nthreads);
    cost_end(run, &r.cost);
    const int64_t server_runq_end = bench_cpu_pid_runq_us(run->server.pid);
    r.runq_threads_ms = atomic_load(&h.runq_unread) == 0
                            ? (double)atomic_load(&h.runq_us) / 1000
                            : NAN;
    r.runq_server_ms = server_runq >= 0 && server_runq_end >= server_runq
                           ? (double)(server_runq_end - server_runq) / 1000
                           : NAN;
    if (rc == 0 && collect_handoff(&h, &r) != 0) {
        snprintf(run->err, sizeof(run->err), "out of memory");
        rc = -1;
    }
    if (rc == 0) {
        report_handoff(run, nthreads, &h, &r);
        note_handoff(run, nthreads, &h, &r);
    }
    bench_samples_free(&r.gaps);
    handoff_free(&h);
    return rc;
}

/* ------------------------------------------------------------------------
 * The run */

/* Prints the run line; returns the CPU pressure it reported. */
static double print_run_header(const bench_run *run, const char *phase)
{
    char version[64];
    char load[128];
    const double pressure = bench_cpu_pressure();

    bench_server_version(&run->target, version, sizeof(version));
    bench_loadavg(load, sizeof(load));
    printf("{\"kind\":\"run\",\"phase\":\"%s\",\"bench\":\"bench_lock\","
           "\"dlock_version\":",
           phase);
    bench_json_string(stdout, dlock_version());
    printf(",\"redis_version\":");
    bench_json_string(stdout, version);
    printf(",\"server\":");
    bench_json_string(stdout, run->server.pid ? "private" : run->target.url);
    printf(",\"online_cpus\":%ld,\"loadavg\":", sysconf(_SC_NPROCESSORS_ONLN));
    bench_json_string(stdout, load);
    printf(",\"cpu_pressure_some_avg10\":");
    bench_json_number(stdout, pressure);
    printf(",\"pairs\":%ld,\"warmup\":%ld,\"rb_requests\":%ld,"
           "\"duration_ms\":%d,\"hold_us\":%d,\"ttl_ms\":%d,\"wait_ms\":%d,"
           "\"time\":%lld}\n",
           run->o.pairs, run->o.warmup, run->o.rb_requests, run->o.duration_ms,
           run->o.hold_us, run->o.ttl_ms, run->o.wait_ms,
           (long long)time(NULL));
    fflush(stdout);
    return pressure;
}

static int connect_client_with(bench_run *run, int busy_poll_us,
                               dlock_client **out)
{
    dlock_client_opts co;
    char errbuf[DLOCK_ERRMSG_MAX];

    dlock_client_opts_init(&co);
    if (run->o.pool_size > 0)
        co.pool_size = run->o.pool_size;
    co.busy_poll_us = busy_poll_us;
    const dlock_err rc = dlock_client_new(run->target.url, &co, out, errbuf,
                                          sizeof(errbuf));
    if (rc != DLOCK_OK) {
        snprintf(run->err, sizeof(run->err), "dlock_client_new(%s): %s",
                 run->target.url, errbuf);
        return -1;
    }
    return 0;
}

static int connect_client(bench_run *run)
{
    return connect_client_with(run, 0, &run->client);
}

/* The measurements, in an order that keeps each figure next to its limit
 * in time, so that load from other work on the machine hits both alike. */
static int run_phases(bench_run *run)
{
    if (capture_commands(run) != 0)
        return -1;
    progress("limit at -c 1 (%ld requests per command)", run->o.pairs);
    if (measure_limit(run, 1, &run->c1) != 0
        || measure_floor(run, &run->floor_last) != 0)
        return -1;
    if (run->o.only == NULL || strcmp(run->o.only, "client") == 0) {
        progress("(a) %ld sequential pairs after %ld warm-up", run->o.pairs,
                 run->o.warmup);
        if (bench_sequential(run) != 0)
            return -1;
        progress("(a) taken apart: a plain client, %d blocks in turn",
                 RAW_BLOCKS);
        if (bench_raw(run) != 0)
            return -1;
        progress("(b) throughput, %d ms per thread count", run->o.duration_ms);
        if (bench_tput1(run) != 0 || bench_tput(run, 8) != 0
            || bench_tput(run, 32) != 0)
            return -1;
    }
    if (run->o.only != NULL && strcmp(run->o.only, "client") == 0)
        return 0;
    progress("(c) hand-off, %d us holds, %d ms each", run->o.hold_us,
             run->o.duration_ms);
    if (run->o.only == NULL || strcmp(run->o.only, "handoff") == 0) {
        if (bench_handoff(run, 4, 0, 0) != 0
            || bench_handoff(run, 16, 0, 0) != 0
            || bench_handoff(run, 4, 1, 0) != 0
            || bench_handoff(run, 16, 1, 0) != 0)
            return -1;
    }
    if (bench_handoff(run, 4, 0, 1) != 0 || bench_handoff(run, 16, 0, 1) != 0)
        return -1;
    return 0;
}

static int setup_target(bench_run *run)
{
    return bench_redis_setup(&run->o.redis, "bench_lock", &run->server,
                             &run->target, run->err, sizeof(run->err));
}

static void usage(FILE *out)
{
    fputs(
        "usage: bench_lock [options]\n" BENCH_REDIS_USAGE
        "  --pairs N              sequential pairs, and -c 1 requests (20000)"
        "\n"
        "  --warmup N             pairs before timing (2000)\n"
        "  --rb-requests N        requests per multi-client redis-benchmark"
        " run (50000)\n"
        "  --duration-ms MS       per thread count and hand-off run (3000)\n"
        "  --hold-us US           hand-off hold time (1000)\n"
        "  --ttl-ms MS            lock TTL (10000)\n"
        "  --wait-ms MS           hand-off acquire wait bound (2000)\n"
        "  --pool N               the client's pool_size (the library's "
        "default)\n"
        "  --busy-poll-us US      (a) again on a client with this "
        "busy_poll_us (100; 0: not)\n"
        "  --only client|handoff|fair\n"
        "                         only (a) and (b), the hand-off runs, or the "
        "fair ones (with the -c 1 limit they are compared with)\n",
        out);
}

/* Parses a positive number for option name; exits on a bad one. */
static long parse_positive(const char *name, const char *s)
{
    return bench_parse_long("bench_lock", name, s, 1, INT_MAX);
}

static void parse_args(int argc, char **argv, bench_opts *o)
{
    static const struct option longopts[] = {
        BENCH_REDIS_LONGOPTS,
        {"pairs", required_argument, NULL, 'n'},
        {"warmup", required_argument, NULL, 'W'},
        {"rb-requests", required_argument, NULL, 'r'},
        {"duration-ms", required_argument, NULL, 'd'},
        {"hold-us", required_argument, NULL, 'H'},
        {"ttl-ms", required_argument, NULL, 't'},
        {"wait-ms", required_argument, NULL, 'T'},
        {"pool", required_argument, NULL, 'P'},
        {"busy-poll-us", required_argument, NULL, 'Y'},
        {"only", required_argument, NULL, 'O'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (bench_opts){
        .redis = BENCH_REDIS_OPTS_DEFAULT,
        .pairs = 20000,
        .warmup = 2000,
        .rb_requests = 50000,
        .duration_ms = 3000,
        .hold_us = 1000,
        .ttl_ms = 10000,
        .wait_ms = 2000,
        .busy_poll_us = 100,
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (bench_redis_option(&o->redis, ch, optarg))
            continue;
        switch (ch) {
        case 'n': o->pairs = parse_positive("--pairs", optarg); break;
        case 'W': o->warmup = parse_positive("--warmup", optarg); break;
        case 'r':
            o->rb_requests = parse_positive("--rb-requests", optarg);
            break;
        case 'd':
            o->duration_ms = (int)parse_positive("--duration-ms", optarg);
            break;
        case 'H': o->hold_us = (int)parse_positive("--hold-us", optarg); break;
        case 't': o->ttl_ms = (int)parse_positive("--ttl-ms", optarg); break;
        case 'T': o->wait_ms = (int)parse_positive("--wait-ms", optarg); break;
        case 'P': o->pool_size = (int)parse_positive("--pool", optarg); break;
        case 'Y':
            o->busy_poll_us = (int)bench_parse_long("bench_lock",
                                                    "--busy-poll-us", optarg,
                                                    0, 1000);
            break;
        case 'O':
            if (strcmp(optarg, "client") != 0 && strcmp(optarg, "handoff") != 0
                && strcmp(optarg, "fair") != 0) {
                usage(stderr);
                exit(2);
            }
            o->only = optarg;
            break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind != argc) {
        usage(stderr);
        exit(2);
    }
}

/* Above this CPU pressure at the start, other work was competing for the
 * CPUs enough to move the ratios (see docs/benchmarks.md). */
#define CONTENDED_PRESSURE 25.0

int main(int argc, char **argv)
{
    static bench_run run;
    int rc = 1;
    double pressure = NAN;

    parse_args(argc, argv, &run.o);
    snprintf(run.prefix, sizeof(run.prefix), "bench:%d", (int)getpid());
    /* The private server is forked before any thread exists. */
    if (setup_target(&run) == 0 && connect_client(&run) == 0) {
        pressure = print_run_header(&run, "start");
        rc = run_phases(&run) == 0 ? 0 : 1;
        print_run_header(&run, "end");
    }
    if (rc != 0 || run.err[0] != '\0')
        fprintf(stderr, "bench_lock: %s\n", run.err);
    if (run.table.n > 0) {
        fputc('\n', stderr);
        bench_table_print(&run.table, stderr);
        print_targets(&run, stderr);
    }
    const int contended = pressure > CONTENDED_PRESSURE;
    if (contended) {
        fprintf(stderr,
                "bench_lock: WARNING: CPU pressure was %.0f%% when "
                "the run started: other work competed for the CPUs, so "
                "these ratios are not reliable\n",
                pressure);
    }
    printf("{\"kind\":\"summary\",\"figures\":%d,\"complete\":%s,"
           "\"contended\":%s}\n",
           run.table.n, rc == 0 ? "true" : "false",
           contended ? "true" : "false");
    dlock_client_free(run.client);
    bench_cmd_free(&run.acquire_cmd);
    bench_cmd_free(&run.floor_set);
    bench_cmd_free(&run.floor_del);
    bench_cmd_free(&run.release_cmd);
    bench_server_stop(&run.server);
    return rc;
}
