/*
 * bench_server_instr.c: what redis-server spends per lock pair, counted:
 * the instructions it executes for one acquire + release of libdlock,
 * against the same count for the cheapest correct lock a client could
 * send (issue 17).
 *
 * Why counts and not time: on the project's shared 2-vCPU machine the
 * same library's throughput moves by 5-15 % between runs, so a change of
 * a few percent in what the server does per pair cannot be seen in
 * timings.  The instructions redis-server executes for the same commands
 * are the same from run to run to a fraction of a percent.  What they do
 * not show: time (an instruction that misses the cache costs more than
 * one that hits), the kernel's work (system calls, the loopback), and
 * anything on the client's side.  bench_lock measures those, in time.
 *
 * How: each count runs a fresh redis-server under callgrind on a private
 * loopback port (bench_callgrind.h), drives a fixed number of pairs at it,
 * stops it by pid and reads callgrind's total.  Starting the server,
 * connecting and loading the scripts cost the same whatever the number of
 * pairs, so each figure is counted twice, with a small and a large number
 * of pairs on two fresh servers, and
 *
 *     instructions per pair = (total(large) - total(small))
 *                             / (large - small).
 *
 * The server's timer (serverCron, whose work depends on how many seconds
 * a run lasted) is left out of every count, and the slow log is off
 * (bench_callgrind.h).  The seed of Redis's hash tables, which it draws at
 * random at each start, decides which command names and keys share a
 * bucket, and so the compares per lookup: counts from two starts differ
 * by up to 1.5 % per pair.  So the servers of round N get seed N (the
 * bench_seed_preload module; --random-seed to leave it out), which makes
 * a count the same from run to run within a few thousand instructions,
 * and each figure is counted in several rounds (--rounds, 5 by default),
 * each on two fresh servers: the median over those hash layouts is the
 * figure, with the rounds' lowest and highest beside it.  What still
 * moves the 32-caller figures a little is how many commands a read
 * happens to bring, which depends on timing.
 *
 * The figures, each with its limit counted the same way in the same run:
 *   instr.async32.pair  32 callers on one dlock_async handle, each on its
 *                       own key, try-acquire then release, in a loop;
 *                       limit: floor.pipelined32, 32 callers' floor pairs
 *                       over one hiredis connection in lockstep (32 SETs
 *                       written at once, their replies read, then the 32
 *                       deletes): the same 32-deep pipeline;
 *   instr.seq.pair      one blocking client, dlock_acquire + dlock_release
 *                       on one key in a loop; limit: floor.seq, the floor
 *                       pair one command at a time over hiredis;
 *   instr.fair.seq.pair the same with opts.fair, against floor.seq;
 *   instr.semaphore.pair   one blocking client taking and giving back a
 *                       permit (of 4), instr.rwlock.read.pair a read hold
 *                       of a read-write lock, and instr.ratelimit.take a
 *                       rate limiter's allowed decisions (one a call):
 *                       the patterns a service runs on every request,
 *                       against floor.seq too (one lock pair is the
 *                       yardstick here; a decision is one call, a pair
 *                       two).
 * The floor pair is bench_lock's: SET key token NX PX ttl, then the
 * compare-and-delete script by EVALSHA (if GET key == token then DEL).
 * Every lock carries a fence (the acquire script always advances the
 * key's counter), so no figure is "with fencing" apart: all of them are.
 * Every pair must succeed: a count with a failed command is no count, so
 * the run stops there and says which command failed with what.
 *
 * Output, as bench_lock's: JSON lines on stdout ("run", "count" for each
 * server's total, "limit", "figure", "summary"); progress and a table on
 * stderr.  A figure's unit is "instr", its limit the floor's instructions
 * per pair and its ratio value / limit; lower is better, and there is no
 * target.  Exit status 0 when every figure was counted.
 *
 * The server listens on 127.0.0.1:(18500 + DLOCK_STACK_PORT_OFFSET) unless
 * --port says otherwise (the stack's ports, moved by the same offset,
 * stay below 18500), with its files under --workdir.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "dlock/async.h"
#include "dlock/dlock.h"
#include "dlock/ratelimit.h"
#include "dlock/rwlock.h"
#include "dlock/semaphore.h"

#include "bench_callgrind.h"
#include "bench_clock.h"
#include "bench_figure.h"
#include "bench_json.h"
#include "bench_redis.h"
#include "bench_run.h"

#define CALLERS 32
#define MAX_ROUNDS 9
#define BASE_PORT 18500
#define IO_TIMEOUT_MS 60000 /* a reply under callgrind on a loaded box */
#define FLOOR_TOKEN "0123456789abcdef0123456789abcdef" /* a token's size */

#define progress(...) bench_progress("bench_server_instr", __VA_ARGS__)

typedef struct instr_opts {
    const char *workdir;
    const char *redis_bin;
    const char *valgrind_bin;
    int port;
    long pairs;     /* the large count of the 32-caller runs */
    long seq_pairs; /* the large count of the one-at-a-time runs */
    int ttl_ms;
    int rounds;      /* each count on this many pairs of fresh servers */
    int random_seed; /* the servers seed themselves (no preload) */
    const char *seed_preload; /* NULL: next to this program */
} instr_opts;

typedef struct instr_run {
    instr_opts o;
    char dir[PATH_MAX];     /* the run's folder, under workdir, absolute */
    char url[64];           /* redis://127.0.0.1:port */
    char preload[PATH_MAX]; /* bench_seed_preload.so, absolute */
    char redis_version[64];
    bench_cg_server server;
    bench_table table;
    char err[2048];
} instr_run;

/* Drives n pairs at the server on run->url; 0, or -1 with run->err. */
typedef int (*instr_driver)(instr_run *run, long n);

/* One quantity counted by the difference of two servers' totals, in each
 * of the run's rounds. */
typedef struct instr_count {
    const char *name;
    instr_driver drive;
    long small, large;
    double round[MAX_ROUNDS]; /* per pair, each round's */
    double per_pair;          /* their median */
    double min, max;
} instr_count;

/* ------------------------------------------------------------------------
 * The floor, over hiredis */

/* Connects to the run's server and loads the floor's compare-and-delete
 * (bench_cad_script). */
static redisContext *floor_connect(instr_run *run, char sha[41])
{
    const struct timeval tv = {.tv_sec = IO_TIMEOUT_MS / 1000};
    bench_target t;
    redisContext *c;

    if (bench_target_parse(run->url, &t, run->err, sizeof(run->err)) != 0
        || bench_script_load(&t, bench_cad_script, sha, run->err,
                             sizeof(run->err))
               != 0)
        return NULL;
    c = bench_redis_connect(&t, IO_TIMEOUT_MS);
    if (c == NULL || c->err) {
        snprintf(run->err, sizeof(run->err), "connect to %s: %s", run->url,
                 c ? c->errstr : "out of memory");
        redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    return c;
}

/* Queues one floor command on key in c's output buffer (SET NX PX when
 * set, else the delete).  0, or -1 with run->err. */
static int floor_append(instr_run *run, redisContext *c, int set,
                        const char *key, const char *sha, const char *ttl)
{
    const int rc = set ? redisAppendCommand(c, "SET %s %s NX PX %s", key,
                                            FLOOR_TOKEN, ttl)
                       : redisAppendCommand(c, "EVALSHA %s 1 %s %s", sha, key,
                                            FLOOR_TOKEN);

    if (rc != REDIS_OK) {
        snprintf(run->err, sizeof(run->err), "queueing %s on %s: %s",
                 set ? "SET NX PX" : "the compare-and-delete EVALSHA", key,
                 c->errstr[0] ? c->errstr : "out of memory");
        return -1;
    }
    return 0;
}

/* Reads one reply of a floor command on key: SET must answer OK, the
 * delete 1.  0, or -1 with run->err. */
static int floor_reply(instr_run *run, redisContext *c, int set,
                       const char *key)
{
    void *v = NULL;
    const char *what = set ? "SET NX PX" : "compare-and-delete EVALSHA";

    if (redisGetReply(c, &v) != REDIS_OK || v == NULL) {
        snprintf(run->err, sizeof(run->err), "%s on %s at %s: %s", what, key,
                 run->url, c->errstr);
        return -1;
    }
    const redisReply *r = v;
    const int ok = set ? r->type == REDIS_REPLY_STATUS
                             && strcmp(r->str, "OK") == 0
                       : r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    if (!ok) {
        snprintf(run->err, sizeof(run->err),
                 "%s on %s at %s: expected %s, got reply type %d%s%s", what,
                 key, run->url, set ? "OK" : "1", r->type,
                 r->str != NULL ? ": " : "", r->str != NULL ? r->str : "");
    }
    freeReplyObject(v);
    return ok ? 0 : -1;
}

/* n floor pairs by up to `callers` keys at a time: every key's SET
 * written at once and the replies read, then every key's delete. */
static int drive_floor(instr_run *run, long n, int callers)
{
    char sha[41], ttl[24], keys[CALLERS][32];
    redisContext *c = floor_connect(run, sha);

    if (c == NULL)
        return -1;
    snprintf(ttl, sizeof(ttl), "%d", run->o.ttl_ms);
    for (int i = 0; i < callers; i++)
        snprintf(keys[i], sizeof(keys[i]), "instr:floor:%02d", i);
    int rc = 0;
    for (long done = 0; done < n && rc == 0;) {
        const int k = n - done < callers ? (int)(n - done) : callers;
        for (int set = 1; set >= 0 && rc == 0; set--) {
            for (int i = 0; i < k && rc == 0; i++)
                rc = floor_append(run, c, set, keys[i], sha, ttl);
            for (int i = 0; i < k && rc == 0; i++)
                rc = floor_reply(run, c, set, keys[i]);
        }
        done += k;
    }
    redisFree(c);
    return rc;
}

static int drive_floor_pipelined(instr_run *run, long n)
{
    return drive_floor(run, n, CALLERS);
}

static int drive_floor_seq(instr_run *run, long n)
{
    return drive_floor(run, n, 1);
}

/* ------------------------------------------------------------------------
 * libdlock */

static dlock_client *lock_connect(instr_run *run)
{
    dlock_client_opts co;
    dlock_client *c = NULL;
    char errbuf[DLOCK_ERRMSG_MAX];

    dlock_client_opts_init(&co);
    co.io_timeout_ms = IO_TIMEOUT_MS;
    co.connect_timeout_ms = IO_TIMEOUT_MS;
    if (dlock_client_new(run->url, &co, &c, errbuf, sizeof(errbuf))
        != DLOCK_OK) {
        snprintf(run->err, sizeof(run->err), "dlock_client_new(%s): %s",
                 run->url, errbuf);
        return NULL;
    }
    return c;
}

/* One blocking client: n acquire + release pairs on one key. */
static int drive_lock_seq_with(instr_run *run, long n, int fair)
{
    const char *key = fair ? "instr:fair" : "instr:seq";
    dlock_client *c = lock_connect(run);
    dlock_acquire_opts ao;

    if (c == NULL)
        return -1;
    dlock_acquire_opts_init(&ao);
    ao.ttl_ms = run->o.ttl_ms;
    ao.fair = fair;
    int rc = 0;
    for (long i = 0; i < n && rc == 0; i++) {
        dlock_lock *lock = NULL;
        dlock_err e = dlock_acquire(c, key, &ao, &lock);
        const char *op = "dlock_acquire";
        if (e == DLOCK_OK) {
            e = dlock_release(lock);
            op = "dlock_release";
        }
        if (e != DLOCK_OK) {
            snprintf(run->err, sizeof(run->err),
                     "%s of %s%s, pair %ld: %s: %s", op, key,
                     fair ? " (fair)" : "", i + 1, dlock_errname(e),
                     dlock_client_errmsg(c));
            rc = -1;
        }
    }
    dlock_client_free(c);
    return rc;
}

static int drive_lock_seq(instr_run *run, long n)
{
    return drive_lock_seq_with(run, n, 0);
}

static int drive_lock_fair(instr_run *run, long n)
{
    return drive_lock_seq_with(run, n, 1);
}

/* The 32 callers of one dlock_async handle.  Each starts its next pair
 * when its release completes, until n pairs were started. */
typedef struct async_drive {
    instr_run *run;
    dlock_async *a;
    dlock_acquire_opts ao;
    long target, started, done;
    int failed;
    char keys[CALLERS][32];
} async_drive;

typedef struct async_caller {
    async_drive *d;
    int i;
} async_caller;

static void async_fail(async_drive *d, const char *op, int i, dlock_err e,
                       const char *msg)
{
    if (d->failed++)
        return;
    snprintf(d->run->err, sizeof(d->run->err),
             "%s of %s on the async handle, after %ld pairs: %s: %s", op,
             d->keys[i], d->done, dlock_errname(e),
             msg != NULL ? msg : dlock_async_errmsg(d->a));
}

static void async_start(async_caller *k);

static void async_released(dlock_async *a, dlock_err e, const char *msg,
                           void *arg)
{
    async_caller *k = arg;

    (void)a;
    if (e != DLOCK_OK) {
        async_fail(k->d, "dlock_async_release", k->i, e, msg);
        return;
    }
    k->d->done++;
    async_start(k);
}

static void async_acquired(dlock_async *a, dlock_err e, dlock_lock *lock,
                           const char *msg, void *arg)
{
    async_caller *k = arg;

    if (e != DLOCK_OK) {
        async_fail(k->d, "dlock_async_acquire", k->i, e, msg);
        return;
    }
    e = dlock_async_release(a, lock, async_released, k);
    if (e != DLOCK_OK) {
        async_fail(k->d, "dlock_async_release", k->i, e, NULL);
        dlock_lock_free(lock);
    }
}

static void async_start(async_caller *k)
{
    async_drive *d = k->d;

    if (d->failed || d->started >= d->target)
        return;
    d->started++;
    const dlock_err e = dlock_async_acquire(d->a, d->keys[k->i], &d->ao,
                                            async_acquired, k);
    if (e != DLOCK_OK)
        async_fail(d, "dlock_async_acquire", k->i, e, NULL);
}

static int drive_lock_async(instr_run *run, long n)
{
    static async_drive d;
    static async_caller callers[CALLERS];
    dlock_client *c = lock_connect(run);

    if (c == NULL)
        return -1;
    memset(&d, 0, sizeof(d));
    d.run = run;
    d.target = n;
    dlock_acquire_opts_init(&d.ao);
    d.ao.ttl_ms = run->o.ttl_ms;
    dlock_err e = dlock_async_new(c, &d.a);
    if (e != DLOCK_OK) {
        snprintf(run->err, sizeof(run->err), "dlock_async_new(%s): %s: %s",
                 run->url, dlock_errname(e), dlock_client_errmsg(c));
        dlock_client_free(c);
        return -1;
    }
    for (int i = 0; i < CALLERS; i++) {
        snprintf(d.keys[i], sizeof(d.keys[i]), "instr:async:%02d", i);
        callers[i] = (async_caller){&d, i};
    }
    for (int i = 0; i < CALLERS; i++)
        async_start(&callers[i]);
    while (dlock_async_pending(d.a) > 0) {
        e = dlock_async_poll(d.a, 1000);
        if (e != DLOCK_OK) {
            async_fail(&d, "dlock_async_poll", 0, e, NULL);
            break;
        }
    }
    if (!d.failed && d.done != n) {
        snprintf(run->err, sizeof(run->err),
                 "the async handle went idle after %ld of %ld pairs", d.done,
                 n);
        d.failed = 1;
    }
    dlock_async_free(d.a);
    dlock_client_free(c);
    return d.failed ? -1 : 0;
}

/* ------------------------------------------------------------------------
 * The patterns a service calls on every request, one blocking client */

/* n semaphore permits (one of 4) taken and given back. */
static int drive_semaphore(instr_run *run, long n)
{
    dlock_client *c = lock_connect(run);
    dlock_semaphore *sem = NULL;
    const char *op = "dlock_semaphore_new";
    dlock_err e;
    long i = 0;

    if (c == NULL)
        return -1;
    e = dlock_semaphore_new(c, "instr:sem", 4, &sem);
    for (; i < n && e == DLOCK_OK; i++) {
        dlock_permit *p = NULL;
        op = "dlock_semaphore_acquire";
        e = dlock_semaphore_acquire(sem, run->o.ttl_ms, 0, &p);
        if (e == DLOCK_OK) {
            op = "dlock_semaphore_release";
            e = dlock_semaphore_release(p);
        }
    }
    if (e != DLOCK_OK)
        snprintf(run->err, sizeof(run->err),
                 "%s of instr:sem, pair %ld: %s: %s", op, i, dlock_errname(e),
                 dlock_client_errmsg(c));
    dlock_semaphore_free(sem);
    dlock_client_free(c);
    return e == DLOCK_OK ? 0 : -1;
}

/* n read holds of a read-write lock taken and given back. */
static int drive_rwlock_read(instr_run *run, long n)
{
    dlock_client *c = lock_connect(run);
    const char *op = "dlock_rwlock_acquire";
    dlock_err e = DLOCK_OK;
    long i = 0;

    if (c == NULL)
        return -1;
    for (; i < n && e == DLOCK_OK; i++) {
        dlock_rwlock *hold = NULL;
        op = "dlock_rwlock_acquire";
        e = dlock_rwlock_acquire(c, "instr:rw", DLOCK_RWLOCK_READ,
                                 run->o.ttl_ms, 0, &hold);
        if (e == DLOCK_OK) {
            op = "dlock_rwlock_release";
            e = dlock_rwlock_release(hold);
        }
    }
    if (e != DLOCK_OK)
        snprintf(run->err, sizeof(run->err),
                 "%s (read) of instr:rw, pair %ld: %s: %s", op, i,
                 dlock_errname(e), dlock_client_errmsg(c));
    dlock_client_free(c);
    return e == DLOCK_OK ? 0 : -1;
}

/* n decisions of a rate limiter that allows them all: a million a second
 * with a burst of a billion, so every take is the allowed path (the TAT
 * advanced and written). */
static int drive_ratelimit(instr_run *run, long n)
{
    dlock_client *c = lock_connect(run);
    dlock_ratelimit *rl = NULL;
    const char *op = "dlock_ratelimit_new";
    dlock_ratelimit_result res;
    dlock_err e;
    long i = 0;

    if (c == NULL)
        return -1;
    e = dlock_ratelimit_new(c, "instr:rl", 1000000, 1000, 1000000000, &rl);
    for (; i < n && e == DLOCK_OK; i++) {
        op = "dlock_ratelimit_take";
        e = dlock_ratelimit_take(rl, 1, &res);
        if (e == DLOCK_OK && !res.allowed) {
            snprintf(run->err, sizeof(run->err),
                     "dlock_ratelimit_take of instr:rl, take %ld: refused",
                     i + 1);
            e = DLOCK_STATE;
            op = NULL;
        }
    }
    if (e != DLOCK_OK && op != NULL)
        snprintf(run->err, sizeof(run->err),
                 "%s of instr:rl, take %ld: %s: %s", op, i, dlock_errname(e),
                 dlock_client_errmsg(c));
    dlock_ratelimit_free(rl);
    dlock_client_free(c);
    return e == DLOCK_OK ? 0 : -1;
}

/* ------------------------------------------------------------------------
 * Counting */

/* One fresh server under callgrind, n pairs of count c, its total. */
static int count_once(instr_run *run, const instr_count *c, int round, long n,
                      uint64_t *total)
{
    char name[96];
    const int64_t t0 = bench_clock_ns();

    snprintf(name, sizeof(name), "%s-r%d-%ld", c->name, round + 1, n);
    const bench_cg_opts so = {
        .valgrind_bin = run->o.valgrind_bin,
        .redis_bin = run->o.redis_bin,
        .dir = run->dir,
        .name = name,
        .port = run->o.port,
        .preload = run->o.random_seed ? NULL : run->preload,
        .seed = (unsigned long)round + 1,
    };
    if (bench_cg_start(&run->server, &so, run->err, sizeof(run->err)) != 0)
        return -1;
    if (c->drive(run, n) != 0) {
        char more[sizeof(run->err)];
        snprintf(more, sizeof(more), "%.40s, round %d, %ld pairs: %.1900s",
                 c->name, round + 1, n, run->err);
        snprintf(run->err, sizeof(run->err), "%s", more);
        bench_cg_kill(&run->server);
        return -1;
    }
    if (bench_cg_stop(&run->server, total, run->err, sizeof(run->err)) != 0)
        return -1;
    printf("{\"kind\":\"count\",\"name\":\"%s\",\"round\":%d,\"pairs\":%ld,"
           "\"instructions\":%" PRIu64 ",\"file\":",
           c->name, round + 1, n, *total);
    bench_json_string(stdout, run->server.out_path);
    printf("}\n");
    fflush(stdout);
    progress("%-18s round %d, %5ld pairs: %11" PRIu64 " instructions "
             "(%.0f s)",
             c->name, round + 1, n, *total,
             (double)(bench_clock_ns() - t0) / 1e9);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* The rounds of c, each a small and a large count on two fresh servers;
 * c->per_pair is the median of the rounds' differences. */
static int count_pairs(instr_run *run, instr_count *c)
{
    double sorted[MAX_ROUNDS];

    for (int r = 0; r < run->o.rounds; r++) {
        uint64_t small, large;
        if (count_once(run, c, r, c->small, &small) != 0
            || count_once(run, c, r, c->large, &large) != 0)
            return -1;
        if (large <= small) {
            snprintf(run->err, sizeof(run->err),
                     "%s, round %d: %" PRIu64 " instructions for %ld pairs, "
                     "not more than %" PRIu64 " for %ld",
                     c->name, r + 1, large, c->large, small, c->small);
            return -1;
        }
        c->round[r] = (double)(large - small) / (double)(c->large - c->small);
        sorted[r] = c->round[r];
    }
    qsort(sorted, (size_t)run->o.rounds, sizeof(*sorted), cmp_double);
    const int n = run->o.rounds;
    c->per_pair = n % 2 ? sorted[n / 2]
                        : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
    c->min = sorted[0];
    c->max = sorted[n - 1];
    return 0;
}

static void print_floor(const instr_run *run, const instr_count *c,
                        int callers)
{
    printf("{\"kind\":\"limit\",\"op\":\"%s\",\"tool\":\"callgrind\","
           "\"client\":\"hiredis\",\"callers\":%d,\"pipeline\":%d,"
           "\"commands\":[\"SET key token NX PX ttl\",\"EVALSHA "
           "compare-and-delete 1 key token\"],\"instructions_per_pair\":",
           c->name, callers, callers);
    bench_json_number(stdout, c->per_pair);
    printf(",\"rounds\":[");
    for (int r = 0; r < run->o.rounds; r++) {
        if (r)
            putchar(',');
        bench_json_number(stdout, c->round[r]);
    }
    printf("],\"pairs\":%ld}\n", c->large - c->small);
    fflush(stdout);
    progress("limit %s: %.0f instructions per pair (rounds %.0f-%.0f)",
             c->name, c->per_pair, c->min, c->max);
}

static void add_figure(instr_run *run, const char *name, const instr_count *c,
                       const instr_count *floor, const char *from)
{
    bench_figure f;

    bench_figure_init(&f, name, "instr", BENCH_LOWER_IS_BETTER);
    f.value = c->per_pair;
    f.limit = floor->per_pair;
    f.limit_from = from;
    f.n = c->large - c->small;
    f.errors = 0;
    f.extra_key[0] = "round_min";
    f.extra_value[0] = c->min;
    f.extra_key[1] = "round_max";
    f.extra_value[1] = c->max;
    bench_table_add(&run->table, stdout, &f);
    progress("%s: %.0f instructions per pair (rounds %.0f-%.0f), %.3f x "
             "the floor's",
             name, c->per_pair, c->min, c->max, c->per_pair / floor->per_pair);
}

/* The figures counted one call at a time, each beside floor.seq, in the
 * order they are counted. */
static const struct seq_figure {
    const char *figure; /* the figure's name */
    const char *count;  /* its counts' name */
    instr_driver drive;
} seq_figures[] = {
    {"instr.seq.pair", "lock.seq", drive_lock_seq},
    {"instr.fair.seq.pair", "lock.fair.seq", drive_lock_fair},
    {"instr.semaphore.pair", "semaphore.seq", drive_semaphore},
    {"instr.rwlock.read.pair", "rwlock.read.seq", drive_rwlock_read},
    {"instr.ratelimit.take", "ratelimit.seq", drive_ratelimit},
};

/* Each figure right after its limit, so that a failure half-way still
 * leaves whole figures. */
static int run_counts(instr_run *run)
{
    const long p = run->o.pairs, s = run->o.seq_pairs;
    instr_count floor32 = {.name = "floor.pipelined32",
                           .drive = drive_floor_pipelined,
                           .small = p / 6,
                           .large = p};
    instr_count async32 = {.name = "lock.async32",
                           .drive = drive_lock_async,
                           .small = p / 6,
                           .large = p};
    instr_count floor1 = {.name = "floor.seq",
                          .drive = drive_floor_seq,
                          .small = s / 5,
                          .large = s};

    if (count_pairs(run, &floor32) != 0)
        return -1;
    print_floor(run, &floor32, CALLERS);
    if (count_pairs(run, &async32) != 0)
        return -1;
    add_figure(run, "instr.async32.pair", &async32, &floor32,
               "callgrind: redis-server's instructions per floor pair (SET "
               "NX PX + compare-and-delete EVALSHA), 32 keys pipelined in "
               "lockstep over one hiredis connection; medians of the rounds");
    if (count_pairs(run, &floor1) != 0)
        return -1;
    print_floor(run, &floor1, 1);
    for (size_t i = 0; i < sizeof(seq_figures) / sizeof(seq_figures[0]); i++) {
        const struct seq_figure *f = &seq_figures[i];
        instr_count c = {.name = f->count,
                         .drive = f->drive,
                         .small = s / 5,
                         .large = s};

        if (count_pairs(run, &c) != 0)
            return -1;
        add_figure(run, f->figure, &c, &floor1,
                   "callgrind: redis-server's instructions per floor pair "
                   "(SET NX PX + compare-and-delete EVALSHA), one command "
                   "at a time over hiredis; medians of the rounds");
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Options and main */

static void usage(FILE *out)
{
    fputs("usage: bench_server_instr [options]\n"
          "  --workdir DIR          folder for the servers' files "
          "(var/bench)\n"
          "  --port N               the servers' loopback port (18500 + "
          "DLOCK_STACK_PORT_OFFSET)\n"
          "  --redis-server BIN     (redis-server)\n"
          "  --valgrind BIN         (valgrind)\n"
          "  --pairs N              pairs of the 32-caller counts; the "
          "small run has N/6 (3600)\n"
          "  --seq-pairs N          pairs of the one-at-a-time counts; the "
          "small run has N/5 (1500)\n"
          "  --rounds N             each figure's small and large counts "
          "on N pairs of fresh servers, the median taken (5; 1..9)\n"
          "  --ttl-ms MS            lock TTL (10000)\n"
          "  --seed-preload PATH    the module that gives round N's servers "
          "seed N (bench_seed_preload.so beside this program)\n"
          "  --random-seed          let each server seed itself at random "
          "instead\n",
          out);
}

/* 18500 + DLOCK_STACK_PORT_OFFSET (0..999, as scripts/stack takes it). */
static int default_port(void)
{
    const char *s = getenv("DLOCK_STACK_PORT_OFFSET");

    if (s == NULL || *s == '\0')
        return BASE_PORT;
    return BASE_PORT
           + (int)bench_parse_long("bench_server_instr",
                                   "DLOCK_STACK_PORT_OFFSET", s, 0, 999);
}

static void parse_args(int argc, char **argv, instr_opts *o)
{
    static const struct option longopts[] = {
        {"workdir", required_argument, NULL, 'w'},
        {"port", required_argument, NULL, 'p'},
        {"redis-server", required_argument, NULL, 'S'},
        {"valgrind", required_argument, NULL, 'V'},
        {"pairs", required_argument, NULL, 'n'},
        {"seq-pairs", required_argument, NULL, 's'},
        {"ttl-ms", required_argument, NULL, 't'},
        {"rounds", required_argument, NULL, 'r'},
        {"seed-preload", required_argument, NULL, 'L'},
        {"random-seed", no_argument, NULL, 'R'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *who = "bench_server_instr";

    *o = (instr_opts){
        .workdir = "var/bench",
        .redis_bin = "redis-server",
        .valgrind_bin = "valgrind",
        .port = default_port(),
        .pairs = 3600,
        .seq_pairs = 1500,
        .ttl_ms = 10000,
        .rounds = 5,
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'w': o->workdir = optarg; break;
        case 'p':
            o->port = (int)bench_parse_long(who, "--port", optarg, 1, 65535);
            break;
        case 'S': o->redis_bin = optarg; break;
        case 'V': o->valgrind_bin = optarg; break;
        case 'n':
            o->pairs = bench_parse_long(who, "--pairs", optarg, 60, LONG_MAX);
            break;
        case 's':
            o->seq_pairs = bench_parse_long(who, "--seq-pairs", optarg, 50,
                                            LONG_MAX);
            break;
        case 't':
            o->ttl_ms = (int)bench_parse_long(who, "--ttl-ms", optarg, 1000,
                                              INT_MAX);
            break;
        case 'r':
            o->rounds = (int)bench_parse_long(who, "--rounds", optarg, 1,
                                              MAX_ROUNDS);
            break;
        case 'L': o->seed_preload = optarg; break;
        case 'R': o->random_seed = 1; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind != argc) {
        usage(stderr);
        exit(2);
    }
}

/* The seed module's absolute path into run->preload: --seed-preload, or
 * bench_seed_preload.so in this program's folder (where CMake builds it).
 * 0, or -1 with run->err. */
static int find_preload(instr_run *run)
{
    char self[PATH_MAX], path[PATH_MAX + 32];
    const char *p = run->o.seed_preload;

    if (p == NULL) {
        const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0) {
            snprintf(run->err, sizeof(run->err), "readlink /proc/self/exe: %s",
                     strerror(errno));
            return -1;
        }
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash != NULL)
            *slash = '\0';
        snprintf(path, sizeof(path), "%s/bench_seed_preload.so", self);
        p = path;
    }
    if (realpath(p, run->preload) == NULL || access(run->preload, R_OK) != 0) {
        snprintf(run->err, sizeof(run->err),
                 "the seed module %.1500s: %s (build the target "
                 "bench_seed_preload, or pass --random-seed)",
                 p, strerror(errno));
        return -1;
    }
    return 0;
}

/* What `redis_bin --version` says after "v=", into buf ("?" if nothing):
 * the run line names the server whose instructions were counted. */
static void server_version(const char *redis_bin, char *buf, size_t len)
{
    char cmd[PATH_MAX + 32], line[256];

    snprintf(buf, len, "?");
    snprintf(cmd, sizeof(cmd), "'%s' --version 2>/dev/null", redis_bin);
    if (strchr(redis_bin, '\'') != NULL)
        return;
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return;
    if (fgets(line, sizeof(line), p) != NULL) {
        const char *v = strstr(line, "v=");
        if (v != NULL)
            snprintf(buf, len, "%.*s", (int)strcspn(v + 2, " \n"), v + 2);
    }
    pclose(p);
}

static void print_run_line(const instr_run *run, const char *when)
{
    bench_print_run_start("bench_server_instr", when);
    printf(",\"dlock_version\":");
    bench_json_string(stdout, dlock_version());
    printf(",\"redis_version\":");
    bench_json_string(stdout, run->redis_version);
    printf(",\"seeds\":\"%s\"", run->o.random_seed ? "random" : "round");
    printf(",\"port\":%d,\"pairs\":%ld,\"seq_pairs\":%ld,\"rounds\":%d,"
           "\"ttl_ms\":%d,\"callers\":%d,\"time\":%lld}\n",
           run->o.port, run->o.pairs, run->o.seq_pairs, run->o.rounds,
           run->o.ttl_ms, CALLERS, (long long)time(NULL));
    fflush(stdout);
}

int main(int argc, char **argv)
{
    static instr_run run;

    parse_args(argc, argv, &run.o);
    snprintf(run.url, sizeof(run.url), "redis://127.0.0.1:%d", run.o.port);
    snprintf(run.dir, sizeof(run.dir), "%s/server-instr-%d", run.o.workdir,
             (int)getpid());
    int rc = 1;
    char abs[PATH_MAX];
    if (!run.o.random_seed && find_preload(&run) != 0) {
        /* run.err says why */
    } else if (bench_make_dirs(run.dir) != 0
               || realpath(run.dir, abs) == NULL) {
        snprintf(run.err, sizeof(run.err), "cannot create %.1500s: %s",
                 run.dir, strerror(errno));
    } else {
        /* redis-server enters its --dir before it opens its log. */
        memcpy(run.dir, abs, strlen(abs) + 1);
        progress("redis-server under callgrind on %s, files in %s", run.url,
                 run.dir);
        server_version(run.o.redis_bin, run.redis_version,
                       sizeof(run.redis_version));
        print_run_line(&run, "start");
        rc = run_counts(&run) == 0 ? 0 : 1;
        print_run_line(&run, "end");
    }
    bench_cg_kill(&run.server);
    if (rc != 0)
        fprintf(stderr, "bench_server_instr: %s\n", run.err);
    if (run.table.n > 0) {
        fputc('\n', stderr);
        bench_table_print(&run.table, stderr);
    }
    printf("{\"kind\":\"summary\",\"figures\":%d,\"complete\":%s}\n",
           run.table.n, rc == 0 ? "true" : "false");
    return rc;
}
