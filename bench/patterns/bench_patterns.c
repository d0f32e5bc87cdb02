/*
 * bench_patterns.c: what one decision of each libdlock pattern costs, as a
 * ratio against the raw EVALSHA round trip of the same server.
 *
 * Every pattern decides each step in one Lua script, so its floor is one
 * EVALSHA round trip: the client formats the call, the server runs a
 * script, the reply comes back.  The run measures that floor first, with
 * redis-benchmark sending EVALSHA of a trivial loaded script ("return 1",
 * no keys) from one connection, then times each pattern's decisions from
 * one thread on one dlock_client, sequentially, against the same server:
 *
 *   idem.begin_first     a fresh key: claim it (FIRST)
 *   idem.begin_done      a completed key: replay its stored result
 *   idem.complete        store the result of a FIRST claim
 *   once.begin_done      a flight with a stored value: read it
 *   semaphore.acquire    take a permit (then released, untimed)
 *   semaphore.release    give it back (publishes a wake-up)
 *   ratelimit.take       a GCRA decision (a limiter that always allows)
 *   leader.renew         the leader renews its lease
 *   leader.campaign_busy a standby asks and is told another leads
 *   leader.tick          the leader asks to run this hour's tick and is
 *                        told it ran already (prepare claimed it)
 *   rwlock.read          take a read lock (released untimed)
 *   rwlock.write         take the write lock (released untimed)
 *   rwlock.release       release the write lock (wakes waiters)
 *
 * Before each step the floor is measured again (redis-benchmark, 2 x N
 * calls), so that a figure and its limit see about the same load on a
 * shared machine; the run line gives the kernel's CPU pressure at the start
 * and the end, and ratios from a run with high pressure are noisy.
 *
 * For each: p50 latency in microseconds (limit: redis-benchmark's p50, so
 * ratio >= 1, lower is better) and decisions per second on one connection
 * (1 / mean latency; limit: redis-benchmark's requests/s at -c 1, ratio
 * <= 1, higher is better), with this process's and the server's CPU and
 * libdlock's round trips per decision.  The gap over the floor is what the
 * script does (TIME, a few reads and writes, PUBLISH) plus libdlock's
 * client path (argument formatting, the pool, the breaker).
 *
 * By default a private redis-server is started (bench_redis.h) so that the
 * figures measure neither the tests running on the stack's Redis nor
 * disturb them; --url uses a running one instead.  Keys are
 * "bench:<pid>:...".  Output: JSON lines on stdout ("run", "limit",
 * "figure", "summary"), progress and a table on stderr.  A benchmark never
 * fails on a slow machine: the exit status is 0 whenever every figure was
 * measured.
 *
 *   bench_patterns [--url URL] [--ops N] [--redis-server BIN]
 *                  [--redis-benchmark BIN] [--workdir DIR]
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_clock.h"
#include "bench_cost.h"
#include "bench_figure.h"
#include "bench_json.h"
#include "bench_redis.h"
#include "bench_run.h"
#include "bench_samples.h"
#include "dlock/patterns.h"

/* leader.tick's period: long enough that the tick prepare claims is
 * still the current one while the step runs, so every call is refused. */
#define TICK_PERIOD_MS 3600000

typedef struct opts {
    bench_redis_opts redis;
    long ops;
} opts;

typedef struct bench_ctx {
    opts o;
    bench_server server;
    bench_target target;
    dlock_client *client;
    char prefix[64];
    char err[512];
    bench_cmd floor_cmd;
    bench_rb_result floor;
    bench_table table;
    /* What the steps act on. */
    char key[256];
    dlock_idem *idem;
    dlock_once *once;
    dlock_semaphore *sem;
    dlock_permit *permit;
    dlock_ratelimit *rl;
    dlock_leader *leader;
    dlock_leader *standby;
    dlock_rwlock *rw;
} bench_ctx;

#define progress(...) bench_progress("bench_patterns", __VA_ARGS__)

/* ---- the floor: redis-benchmark EVALSHA of a trivial script ----------- */

/* Makes the command redis-benchmark replays: EVALSHA <sha> 0. */
static int prepare_floor(bench_ctx *x)
{
    char sha[41];

    memset(&x->floor_cmd, 0, sizeof(x->floor_cmd));
    if (bench_script_load(&x->target, "return 1", sha, x->err, sizeof(x->err))
        != 0)
        return -1;
    x->floor_cmd.argc = 3;
    x->floor_cmd.argv[0] = strdup("EVALSHA");
    x->floor_cmd.argv[1] = strdup(sha);
    x->floor_cmd.argv[2] = strdup("0");
    for (int i = 0; i < x->floor_cmd.argc; i++) {
        if (x->floor_cmd.argv[i] == NULL) {
            snprintf(x->err, sizeof(x->err), "out of memory");
            return -1;
        }
    }
    return 0;
}

/* Measures the floor right before the pattern step `before`, so that load
 * from other work on the shared machine hits both about equally. */
static int measure_floor(bench_ctx *x, const char *before)
{
    if (bench_rb_run(x->o.redis.rb_bin, &x->target, x->server.pid, 1,
                     x->o.ops * 2, &x->floor_cmd, 120000, &x->floor, x->err,
                     sizeof(x->err))
        != 0)
        return -1;
    printf("{\"kind\":\"limit\",\"op\":\"evalsha_return_1\",\"for\":");
    bench_json_string(stdout, before);
    printf(",\"tool\":\"redis-benchmark\",\"clients\":1,\"requests\":%ld,"
           "\"rps\":",
           x->floor.requests);
    bench_json_number(stdout, x->floor.rps);
    printf(",\"p50_us\":");
    bench_json_number(stdout, x->floor.p50_us);
    printf(",\"p99_us\":");
    bench_json_number(stdout, x->floor.p99_us);
    printf("}\n");
    progress("%-22s floor: EVALSHA \"return 1\" p50 %5.1f us %8.0f/s", before,
             x->floor.p50_us, x->floor.rps);
    return 0;
}

/* ---- timing one kind of decision -------------------------------------- */

typedef dlock_err (*step_fn)(bench_ctx *x, long i);

/*
 * A step's answer must be the one it is meant to time: expect is its
 * return (DLOCK_BUSY for the steps that time a refusal), and after checks
 * the outcome (FIRST, DONE, ...) where the return alone does not say it.
 * Anything else is counted as an error, because a decision that took
 * another path in the script (a permit that never came back, a record
 * that was not there) would be timed under the wrong name.
 */
typedef struct op {
    const char *name;
    step_fn before;   /* untimed, may be NULL */
    step_fn step;     /* the timed decision */
    dlock_err expect; /* what step must return */
    step_fn after;    /* untimed, may be NULL; checks the outcome */
} op;

static uint64_t commands_now(const bench_ctx *x)
{
    dlock_client_stats st;

    dlock_client_stats_get(x->client, &st);
    return st.commands;
}

/* CPU (in c) is read around the whole loop, so it includes the untimed
 * before and after steps (reported as untimed_steps_per_op); round trips
 * are counted around the timed step alone (step_commands). */
static void report(bench_ctx *x, const op *o, bench_samples *s,
                   const bench_cost *c, uint64_t step_commands, long errors)
{
    char name[96];
    bench_figure f;
    const double mean = bench_samples_mean_us(s);

    snprintf(name, sizeof(name), "%s.p50", o->name);
    bench_figure_init(&f, name, "us", BENCH_LOWER_IS_BETTER);
    f.value = bench_samples_quantile_us(s, 0.5);
    f.limit = x->floor.p50_us;
    f.limit_from = "redis-benchmark -c 1: p50 of EVALSHA \"return 1\"";
    f.n = (long long)s->n;
    f.errors = errors;
    bench_cost_apply(c, (long long)s->n, &f);
    f.round_trips_per_op = (double)step_commands / (double)s->n;
    f.extra_key[0] = "p99_us";
    f.extra_value[0] = bench_samples_quantile_us(s, 0.99);
    f.extra_key[1] = "untimed_steps_per_op";
    f.extra_value[1] = (o->before != NULL) + (o->after != NULL);
    bench_table_add(&x->table, stdout, &f);

    snprintf(name, sizeof(name), "%s.rate", o->name);
    bench_figure_init(&f, name, "decisions/s", BENCH_HIGHER_IS_BETTER);
    f.value = mean > 0 ? 1e6 / mean : NAN;
    f.limit = x->floor.rps;
    f.limit_from = "redis-benchmark -c 1: requests/s of EVALSHA "
                   "\"return 1\"";
    f.n = (long long)s->n;
    f.errors = errors;
    bench_table_add(&x->table, stdout, &f);
}

/* Runs o->step ops times (after a tenth as warm-up), timing each call. */
static int measure(bench_ctx *x, const op *o)
{
    bench_samples s;
    bench_cost c;
    uint64_t step_commands = 0;
    long errors = 0, warmup = x->o.ops / 10;

    if (bench_samples_init(&s, (size_t)x->o.ops) != 0) {
        snprintf(x->err, sizeof(x->err), "out of memory");
        return -1;
    }
    for (long i = -warmup; i < x->o.ops; i++) {
        int64_t t0, t1;
        uint64_t k0, k1;
        dlock_err err;

        if (i == 0)
            bench_cost_begin(&c, x->server.pid, commands_now(x));
        if (o->before != NULL && o->before(x, i) != DLOCK_OK)
            errors++;
        k0 = commands_now(x);
        t0 = bench_clock_ns();
        err = o->step(x, i);
        t1 = bench_clock_ns();
        k1 = commands_now(x);
        if (err != o->expect && errors++ == 0)
            progress("%s: %s where %s was expected: %s", o->name,
                     dlock_errname(err), dlock_errname(o->expect),
                     dlock_client_errmsg(x->client));
        if (i >= 0) {
            bench_samples_add(&s, t1 - t0);
            step_commands += k1 - k0;
        }
        if (o->after != NULL && o->after(x, i) != DLOCK_OK && errors++ == 0)
            progress("%s: the untimed step after it failed: %s", o->name,
                     dlock_client_errmsg(x->client));
    }
    bench_cost_end(&c, x->server.pid, commands_now(x));
    bench_samples_sort(&s);
    report(x, o, &s, &c, step_commands, errors);
    progress("%-22s p50 %7.1f us  %8.0f/s", o->name,
             bench_samples_quantile_us(&s, 0.5),
             1e6 / bench_samples_mean_us(&s));
    bench_samples_free(&s);
    return errors > x->o.ops / 100 ? -1 : 0;
}

/* ---- the steps ---------------------------------------------------------- */

static const char *indexed_key(bench_ctx *x, const char *what, long i)
{
    snprintf(x->key, sizeof(x->key), "%s:%s:%ld", x->prefix, what, i);
    return x->key;
}

static dlock_err idem_first(bench_ctx *x, long i)
{
    return dlock_idem_begin(x->client, indexed_key(x, "idem", i), 10000,
                            &x->idem);
}

static dlock_err idem_abort_free(bench_ctx *x, long i)
{
    dlock_err err = x->idem != NULL ? dlock_idem_abort(x->idem) : DLOCK_STATE;

    (void)i;
    dlock_idem_free(x->idem);
    x->idem = NULL;
    return err;
}

static dlock_err idem_first_done_key(bench_ctx *x, long i)
{
    return dlock_idem_begin(x->client, indexed_key(x, "idem-x", i), 10000,
                            &x->idem);
}

static dlock_err idem_complete(bench_ctx *x, long i)
{
    (void)i;
    return dlock_idem_complete(x->idem, "receipt-0123456789", 18, 60000);
}

static dlock_err idem_free_step(bench_ctx *x, long i)
{
    (void)i;
    dlock_idem_free(x->idem);
    x->idem = NULL;
    return DLOCK_OK;
}

/* After idem.begin_done: the record must have been replayed (DONE). */
static dlock_err idem_done_free(bench_ctx *x, long i)
{
    const int done = x->idem != NULL
                     && dlock_idem_status(x->idem) == DLOCK_IDEM_DONE;

    idem_free_step(x, i);
    return done ? DLOCK_OK : DLOCK_STATE;
}

static dlock_err idem_replay(bench_ctx *x, long i)
{
    (void)i;
    return dlock_idem_begin(x->client, indexed_key(x, "idem-c", 0), 10000,
                            &x->idem);
}

static dlock_err once_read(bench_ctx *x, long i)
{
    (void)i;
    return dlock_once_begin(x->client, indexed_key(x, "once", 0), NULL,
                            &x->once);
}

/* After once.begin_done: the flight must have had its value (DONE). */
static dlock_err once_done_free(bench_ctx *x, long i)
{
    const int done = x->once != NULL
                     && dlock_once_status(x->once) == DLOCK_ONCE_DONE;

    (void)i;
    dlock_once_free(x->once);
    x->once = NULL;
    return done ? DLOCK_OK : DLOCK_STATE;
}

static dlock_err sem_acquire(bench_ctx *x, long i)
{
    (void)i;
    return dlock_semaphore_acquire(x->sem, 10000, 0, &x->permit);
}

static dlock_err sem_release(bench_ctx *x, long i)
{
    dlock_err err = dlock_semaphore_release(x->permit);

    (void)i;
    x->permit = NULL;
    return err;
}

static dlock_err rl_take(bench_ctx *x, long i)
{
    (void)i;
    return dlock_ratelimit_take(x->rl, 1, NULL);
}

static dlock_err leader_renew(bench_ctx *x, long i)
{
    (void)i;
    return dlock_leader_renew(x->leader);
}

static dlock_err standby_campaign(bench_ctx *x, long i)
{
    (void)i;
    return dlock_leader_campaign(x->standby, 0);
}

static dlock_err leader_tick(bench_ctx *x, long i)
{
    (void)i;
    return dlock_leader_tick(x->leader, TICK_PERIOD_MS, NULL);
}

static dlock_err rw_read(bench_ctx *x, long i)
{
    (void)i;
    return dlock_rwlock_acquire(x->client, indexed_key(x, "rw", 0),
                                DLOCK_RWLOCK_READ, 10000, 0, &x->rw);
}

static dlock_err rw_write(bench_ctx *x, long i)
{
    (void)i;
    return dlock_rwlock_acquire(x->client, indexed_key(x, "rw", 0),
                                DLOCK_RWLOCK_WRITE, 10000, 0, &x->rw);
}

static dlock_err rw_release(bench_ctx *x, long i)
{
    dlock_err err = dlock_rwlock_release(x->rw);

    (void)i;
    x->rw = NULL;
    return err;
}

/* ---- the run ------------------------------------------------------------ */

/* Makes the objects the steps act on. */
static int prepare(bench_ctx *x)
{
    dlock_leader_opts lo;
    dlock_idem *done;
    dlock_once *flight;
    dlock_once_opts oo;
    int ok;

    dlock_leader_opts_init(&lo);
    lo.ttl_ms = 60000;
    dlock_once_opts_init(&oo);
    oo.keep_ms = 600000;
    ok = dlock_semaphore_new(x->client, indexed_key(x, "sem", 0), 4, &x->sem)
             == DLOCK_OK
         && dlock_ratelimit_new(x->client, indexed_key(x, "rl", 0), 1000000,
                                1000, 1000000, &x->rl)
                == DLOCK_OK
         && dlock_leader_new(x->client, indexed_key(x, "leader", 0), &lo,
                             &x->leader)
                == DLOCK_OK
         && dlock_leader_new(x->client, indexed_key(x, "leader", 0), &lo,
                             &x->standby)
                == DLOCK_OK
         && dlock_leader_campaign(x->leader, 0) == DLOCK_OK
         && dlock_leader_tick(x->leader, TICK_PERIOD_MS, NULL) == DLOCK_OK
         && dlock_idem_begin(x->client, indexed_key(x, "idem-c", 0), 10000,
                             &done)
                == DLOCK_OK;
    if (ok) {
        ok = dlock_idem_complete(done, "receipt-0123456789", 18, 600000)
             == DLOCK_OK;
        dlock_idem_free(done);
    }
    if (ok
        && dlock_once_begin(x->client, indexed_key(x, "once", 0), &oo, &flight)
               == DLOCK_OK) {
        ok = dlock_once_complete(flight, "config v2", 9) == DLOCK_OK;
        dlock_once_free(flight);
    }
    if (!ok)
        snprintf(x->err, sizeof(x->err), "preparing: %s",
                 dlock_client_errmsg(x->client));
    return ok ? 0 : -1;
}

static void release_objects(bench_ctx *x)
{
    if (x->leader != NULL)
        dlock_leader_resign(x->leader);
    dlock_leader_free(x->leader);
    dlock_leader_free(x->standby);
    dlock_semaphore_free(x->sem);
    dlock_ratelimit_free(x->rl);
}

static int run_ops(bench_ctx *x)
{
    static const op ops[] = {
        {"idem.begin_first", NULL, idem_first, DLOCK_OK, idem_abort_free},
        {"idem.begin_done", NULL, idem_replay, DLOCK_OK, idem_done_free},
        {"idem.complete", idem_first_done_key, idem_complete, DLOCK_OK,
         idem_free_step},
        {"once.begin_done", NULL, once_read, DLOCK_OK, once_done_free},
        {"semaphore.acquire", NULL, sem_acquire, DLOCK_OK, sem_release},
        {"semaphore.release", sem_acquire, sem_release, DLOCK_OK, NULL},
        {"ratelimit.take", NULL, rl_take, DLOCK_OK, NULL},
        {"leader.renew", NULL, leader_renew, DLOCK_OK, NULL},
        {"leader.campaign_busy", NULL, standby_campaign, DLOCK_BUSY, NULL},
        {"leader.tick", NULL, leader_tick, DLOCK_BUSY, NULL},
        {"rwlock.read", NULL, rw_read, DLOCK_OK, rw_release},
        {"rwlock.write", NULL, rw_write, DLOCK_OK, rw_release},
        {"rwlock.release", rw_write, rw_release, DLOCK_OK, NULL},
    };

    for (size_t i = 0; i < sizeof(ops) / sizeof(*ops); i++)
        if (measure_floor(x, ops[i].name) != 0 || measure(x, &ops[i]) != 0)
            return -1;
    return 0;
}

static int setup(bench_ctx *x)
{
    char errbuf[DLOCK_ERRMSG_MAX] = "";

    /* Forked before any thread exists (bench_redis.h). */
    if (bench_redis_setup(&x->o.redis, "bench_patterns", &x->server,
                          &x->target, x->err, sizeof(x->err))
        != 0)
        return -1;
    if (dlock_client_new(x->target.url, NULL, &x->client, errbuf,
                         sizeof(errbuf))
        != DLOCK_OK) {
        snprintf(x->err, sizeof(x->err), "client: %.480s", errbuf);
        return -1;
    }
    return 0;
}

static void print_run(const bench_ctx *x, const char *when)
{
    char version[64];

    bench_server_version(&x->target, version, sizeof(version));
    bench_print_run_start("patterns", when);
    printf(",\"server\":");
    bench_json_string(stdout, x->target.url);
    printf(",\"redis_version\":");
    bench_json_string(stdout, version);
    printf(",\"private_server\":%s,\"ops\":%ld,\"libdlock\":",
           x->server.pid > 0 ? "true" : "false", x->o.ops);
    bench_json_string(stdout, dlock_version());
    printf("}\n");
}

static void usage(FILE *out)
{
    fputs("usage: bench_patterns [options]\n"
          "  --ops N                decisions timed per pattern step "
          "(5000)\n" BENCH_REDIS_USAGE,
          out);
}

static void parse_args(int argc, char **argv, opts *o)
{
    static const struct option longopts[] = {
        BENCH_REDIS_LONGOPTS,
        {"ops", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;

    *o = (opts){BENCH_REDIS_OPTS_DEFAULT, 5000};
    for (;;) {
        ch = getopt_long(argc, argv, "h", longopts, NULL);
        if (ch == -1)
            break;
        if (bench_redis_option(&o->redis, ch, optarg))
            continue;
        switch (ch) {
        case 'n':
            o->ops = bench_parse_long("bench_patterns", "--ops", optarg, 100,
                                      10000000);
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

int main(int argc, char **argv)
{
    static bench_ctx x;
    int rc = 1;

    parse_args(argc, argv, &x.o);
    snprintf(x.prefix, sizeof(x.prefix), "bench:%d", (int)getpid());
    if (setup(&x) == 0) {
        print_run(&x, "start");
        if (prepare_floor(&x) == 0 && prepare(&x) == 0)
            rc = run_ops(&x);
        release_objects(&x);
        print_run(&x, "end");
    }
    if (rc != 0)
        fprintf(stderr, "bench_patterns: %s\n", x.err);
    if (x.table.n > 0) {
        fputc('\n', stderr);
        bench_table_print(&x.table, stderr);
    }
    printf("{\"kind\":\"summary\",\"figures\":%d,\"complete\":%s}\n",
           x.table.n, rc == 0 ? "true" : "false");
    dlock_client_free(x.client);
    bench_cmd_free(&x.floor_cmd);
    bench_server_stop(&x.server);
    return rc;
}
