/*
 * test_wait_quiet.c: waiting costs Redis a few round trips, not a poll,
 * and an unbounded wait outlives a Redis restart.
 *
 * Built twice from this file: test_wait_lock waits for a core lock,
 * test_wait_semaphore (WAIT_SEMAPHORE) for the single permit of a
 * semaphore, to show that both go through the library's one wait loop.
 * Each program starts its own redis-server (var/test/, stopped by pid), so
 * the server's INFO commandstats count only this test's scripts.
 *
 *   quiet_waiters   16 waiters (threads of one client) on a key held for
 *                   2.5 s with a 60 s TTL.  The scripts they run (EVALSHA
 *                   and EVAL, releases not counted) stay under 6 per
 *                   waiter: a poll every 100-200 ms, as the library did
 *                   before, costs 12-25 per waiter in 2.5 s.  After the
 *                   release every waiter gets its turn within 3 s: with a
 *                   60 s TTL the fallback timer sleeps at least 7.5 s, so
 *                   only release notifications explain that.
 *   dead_holder     the holder disappears without releasing (TTL 1.5 s):
 *                   the waiter gets the key soon after it expires (within
 *                   700 ms) with at most 4 tries, because its timer follows
 *                   the holder's remaining TTL instead of polling.
 *   forever_restart wait_ms < 0, then the server is stopped and started
 *                   again on the same port (without persistence, so the
 *                   holder's key is gone): the waiter must not return while
 *                   Redis is down (it did, with DLOCK_UNAVAILABLE, at the
 *                   first transport error) and must get the key once Redis
 *                   is back.
 *
 * The waiter threads and all they touch live in static storage
 * (crowd_case), and end_case, the teardown of both cases with waiters,
 * lets them in and joins them whether the case passed or failed: a failed
 * TK_EXPECT leaves by longjmp, and waiters holding the case's stack frame
 * corrupted the next case.
 */
#include "itkit.h"

#include "dlock/semaphore.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAITERS 16
#define HOLD_MS 2500
#define LONG_TTL_MS 60000
#define SHORT_TTL_MS 1500
#define MAX_TRIES_PER_WAITER 6
#define HANDOVER_BOUND_MS 3000
#define EXPIRY_SLACK_MS 700
#define MAX_TRIES_DEAD_HOLDER 4

static testkit_redis *server;

/* ---- the thing waited for: a lock, or a semaphore's one permit --------- */

typedef struct held {
    dlock_lock *lock;
    dlock_semaphore *sem;
    dlock_permit *permit;
} held;

#ifdef WAIT_SEMAPHORE
#define KIND "semaphore"

static void channel_of(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "dlock:sem:%s", name);
}

static dlock_err take(dlock_client *c, const char *name, int64_t ttl_ms,
                      int64_t wait_ms, held *h)
{
    dlock_err err;

    memset(h, 0, sizeof(*h));
    err = dlock_semaphore_new(c, name, 1, &h->sem);
    if (err == DLOCK_OK)
        err = dlock_semaphore_acquire(h->sem, ttl_ms, wait_ms, &h->permit);
    if (err != DLOCK_OK) {
        dlock_semaphore_free(h->sem);
        h->sem = NULL;
    }
    return err;
}

static dlock_err give_back(held *h)
{
    dlock_err err = dlock_semaphore_release(h->permit);

    dlock_semaphore_free(h->sem);
    memset(h, 0, sizeof(*h));
    return err;
}

/* Forgets the permit without telling Redis: its lease runs out there. */
static void abandon(held *h)
{
    dlock_permit_free(h->permit);
    dlock_semaphore_free(h->sem);
    memset(h, 0, sizeof(*h));
}
#else
#define KIND "lock"

static void channel_of(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "dlock:released:%s", name);
}

static dlock_err take(dlock_client *c, const char *name, int64_t ttl_ms,
                      int64_t wait_ms, held *h)
{
    dlock_acquire_opts o = itkit_acquire_opts(ttl_ms, wait_ms);

    memset(h, 0, sizeof(*h));
    return dlock_acquire(c, name, &o, &h->lock);
}

static dlock_err give_back(held *h)
{
    dlock_err err = dlock_release(h->lock);

    h->lock = NULL;
    return err;
}

/* Forgets the lock without telling Redis: its key expires there. */
static void abandon(held *h)
{
    dlock_lock_free(h->lock);
    h->lock = NULL;
}
#endif

/* ---- probes of the private server -------------------------------------- */

/* Calls of one command from INFO commandstats ("cmdstat_<cmd>:calls=N"). */
static long long calls_of(const char *info, const char *cmd)
{
    char field[64];
    const char *at;

    snprintf(field, sizeof(field), "cmdstat_%s:calls=", cmd);
    at = strstr(info, field);
    return at != NULL ? atoll(at + strlen(field)) : 0;
}

/* Scripts the server has run so far (EVALSHA + EVAL), or -1. */
static long long scripts_run(void)
{
    redisReply *r = testkit_redis_cmd(server->admin_url, "INFO commandstats");
    long long n = -1;

    if (r != NULL && r->type == REDIS_REPLY_STRING)
        n = calls_of(r->str, "evalsha") + calls_of(r->str, "eval");
    if (r != NULL)
        freeReplyObject(r);
    return n;
}

typedef struct channel_probe {
    char channel[TESTKIT_KEY_MAX + 32];
} channel_probe;

static int has_subscriber(void *arg)
{
    channel_probe *p = arg;
    redisReply *r = testkit_redis_cmd(server->admin_url, "PUBSUB NUMSUB %s",
                                      p->channel);
    int yes = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2
              && r->element[1]->type == REDIS_REPLY_INTEGER
              && r->element[1]->integer >= 1;

    if (r != NULL)
        freeReplyObject(r);
    return yes;
}

static void expect_subscriber(const char *name)
{
    channel_probe p;

    channel_of(name, p.channel, sizeof(p.channel));
    TK_EXPECT(testkit_wait_until(has_subscriber, &p, 10000),
              "a waiter subscribes to %s within 10 s", p.channel);
}

/* ---- waiter threads ----------------------------------------------------- */

typedef struct crowd {
    dlock_client *client;
    const char *name;
    int64_t wait_ms;
    atomic_int started;
    atomic_int finished;
    atomic_int inside;      /* holders right now */
    atomic_int most_inside; /* the most seen at once */
    atomic_int failed;
    atomic_llong last_grant_ms;
    char error[DLOCK_ERRMSG_MAX + 64];
    pthread_mutex_t error_mu;
} crowd;

static void note_inside(crowd *cr)
{
    int now = atomic_fetch_add(&cr->inside, 1) + 1;
    int most = atomic_load(&cr->most_inside);

    while (now > most
           && !atomic_compare_exchange_weak(&cr->most_inside, &most, now))
        ;
}

static void note_failure(crowd *cr, const char *what, dlock_err err)
{
    pthread_mutex_lock(&cr->error_mu);
    snprintf(cr->error, sizeof(cr->error), "%s: %s: %s", what,
             dlock_errname(err), dlock_client_errmsg(cr->client));
    pthread_mutex_unlock(&cr->error_mu);
    atomic_fetch_add(&cr->failed, 1);
}

/* Waits for the key, holds it 10 ms, gives it back. */
static void *crowd_main(void *arg)
{
    crowd *cr = arg;
    held h;
    dlock_err err;

    atomic_fetch_add(&cr->started, 1);
    err = take(cr->client, cr->name, LONG_TTL_MS, cr->wait_ms, &h);
    if (err == DLOCK_OK) {
        note_inside(cr);
        atomic_store(&cr->last_grant_ms, testkit_now_ms());
        itkit_pace_ms(10);
        atomic_fetch_sub(&cr->inside, 1);
        err = give_back(&h);
        if (err != DLOCK_OK)
            note_failure(cr, "release", err);
    } else {
        note_failure(cr, "acquire", err);
    }
    atomic_fetch_add(&cr->finished, 1);
    return NULL;
}

static void crowd_init(crowd *cr, dlock_client *c, const char *name,
                       int64_t wait_ms)
{
    memset(cr, 0, sizeof(*cr));
    cr->client = c;
    cr->name = name;
    cr->wait_ms = wait_ms;
    pthread_mutex_init(&cr->error_mu, NULL);
}

static int all_started(void *arg)
{
    return atomic_load(&((crowd *)arg)->started) == WAITERS;
}

static int all_finished(void *arg)
{
    return atomic_load(&((crowd *)arg)->finished) == WAITERS;
}

static int one_finished(void *arg)
{
    return atomic_load(&((crowd *)arg)->finished) >= 1;
}

/* ---- one case's waiters ------------------------------------------------- */

/* Everything a case's waiter threads touch (the crowd, the key's name, the
 * clients) and the holder's grip, in static storage: a failed TK_EXPECT
 * leaves the case by longjmp while its waiters still run, so their state
 * must outlive the case's frame until end_case has ended them.  One case
 * at a time uses it. */
typedef struct crowd_case {
    crowd cr;
    char name[TESTKIT_KEY_MAX];
    dlock_client *holder_c;
    dlock_client *waiter_c;
    held h; /* the holder's */
    pthread_t threads[WAITERS];
    int nthreads; /* started, not yet joined */
} crowd_case;

static crowd_case the_case;

/* The case's clients and crowd, waiting wait_ms each; the key's name
 * starts with prefix. */
static crowd_case *begin_case(const char *prefix, int64_t wait_ms)
{
    crowd_case *cc = &the_case;

    memset(cc, 0, sizeof(*cc));
    cc->holder_c = itkit_client(server->url, NULL);
    cc->waiter_c = itkit_client(server->url, NULL);
    testkit_key(cc->name, prefix);
    crowd_init(&cc->cr, cc->waiter_c, cc->name, wait_ms);
    return cc;
}

static int waiters_done(void *arg)
{
    const crowd_case *cc = arg;

    return atomic_load(&cc->cr.finished) == cc->nthreads;
}

/* Teardown of every case, passed or failed: lets the waiters in (the
 * holder's release; a restart of Redis, which forgets every key, if they
 * still wait, say on a server that is down), joins them and frees the
 * case.  A waiter that does not return within the bound keeps the state
 * (static, clients not freed) and fails the teardown. */
static int end_case(void **state)
{
    crowd_case *cc = &the_case;

    (void)state;
    if (cc->h.lock != NULL || cc->h.permit != NULL) {
        if (give_back(&cc->h) != DLOCK_OK)
            abandon(&cc->h);
    }
    if (!testkit_wait_until(waiters_done, cc, 5000)
        && (testkit_redis_restart(server) != 0
            || !testkit_wait_until(waiters_done, cc, 20000))) {
        fprintf(stderr, "# %d of %d waiters did not return; leaking them\n",
                cc->nthreads - atomic_load(&cc->cr.finished), cc->nthreads);
        return -1;
    }
    for (int i = 0; i < cc->nthreads; i++)
        pthread_join(cc->threads[i], NULL);
    pthread_mutex_destroy(&cc->cr.error_mu);
    dlock_client_free(cc->waiter_c);
    dlock_client_free(cc->holder_c);
    memset(cc, 0, sizeof(*cc));
    return 0;
}

/* ---- tests -------------------------------------------------------------- */

static void quiet_waiters(void **state)
{
    crowd_case *cc = begin_case("waitq", 30000);
    crowd *const cr = &cc->cr;
    long long before, after, tries;
    int64_t released_ms;

    (void)state;
    TK_EXPECT_ERR(take(cc->holder_c, cc->name, LONG_TTL_MS, 0, &cc->h),
                  DLOCK_OK, cc->holder_c, "the holder's acquire");
    before = scripts_run();
    for (int i = 0; i < WAITERS; i++) {
        TK_EXPECT(pthread_create(&cc->threads[i], NULL, crowd_main, cr) == 0,
                  "a waiter thread starts");
        cc->nthreads++;
    }
    TK_EXPECT(testkit_wait_until(all_started, cr, 10000),
              "all %d waiters start", WAITERS);
    expect_subscriber(cc->name);
    itkit_pace_ms(HOLD_MS); /* the holder's work */
    TK_EXPECT(atomic_load(&cr->finished) == 0,
              "no waiter returns while "
              "the " KIND " is held (%d did)",
              atomic_load(&cr->finished));
    released_ms = testkit_now_ms();
    TK_EXPECT_ERR(give_back(&cc->h), DLOCK_OK, cc->holder_c,
                  "the holder's release");
    TK_EXPECT(testkit_wait_until(all_finished, cr, 20000),
              "all waiters finish within 20 s (%d did)",
              atomic_load(&cr->finished));
    after = scripts_run();
    TK_EXPECT(before >= 0 && after >= 0, "INFO commandstats answers");
    /* Every waiter's release and the holder's are scripts too. */
    tries = after - before - (WAITERS + 1);
    fprintf(stderr,
            "# %s: %d waiters, %d ms hold: %lld tries (%.1f per "
            "waiter); last grant %lld ms after the release\n",
            KIND, WAITERS, HOLD_MS, tries, (double)tries / WAITERS,
            (long long)(atomic_load(&cr->last_grant_ms) - released_ms));
    TK_EXPECT(atomic_load(&cr->failed) == 0,
              "every waiter gets the " KIND " (%d failed; last: %s)",
              atomic_load(&cr->failed), cr->error);
    TK_EXPECT(atomic_load(&cr->most_inside) == 1,
              "one holder at a time "
              "(saw %d)",
              atomic_load(&cr->most_inside));
    TK_EXPECT(tries <= (long long)WAITERS * MAX_TRIES_PER_WAITER,
              "%d waiters over %d ms cost at most %d tries each, not a poll; "
              "got %lld in all",
              WAITERS, HOLD_MS, MAX_TRIES_PER_WAITER, tries);
    TK_EXPECT(atomic_load(&cr->last_grant_ms) - released_ms
                  <= HANDOVER_BOUND_MS,
              "release notifications hand the " KIND
              " to all %d waiters within %d ms; took %lld ms",
              WAITERS, HANDOVER_BOUND_MS,
              (long long)(atomic_load(&cr->last_grant_ms) - released_ms));
}

static void dead_holder(void **state)
{
    dlock_client *holder_c = itkit_client(server->url, NULL);
    dlock_client *waiter_c = itkit_client(server->url, NULL);
    char name[TESTKIT_KEY_MAX];
    int64_t asked_ms, granted_ms;
    long long before, tries;
    held h, mine;
    dlock_err err;

    (void)state;
    testkit_key(name, "waitd");
    asked_ms = testkit_now_ms();
    TK_EXPECT_ERR(take(holder_c, name, SHORT_TTL_MS, 0, &h), DLOCK_OK,
                  holder_c, "the holder's acquire");
    abandon(&h); /* the holder dies without releasing */
    before = scripts_run();
    err = take(waiter_c, name, 10000, 10000, &mine);
    granted_ms = testkit_now_ms();
    tries = scripts_run() - before;
    TK_EXPECT_ERR(err, DLOCK_OK, waiter_c, "waiting for an abandoned " KIND);
    fprintf(stderr,
            "# %s: granted %lld ms after the holder's acquire, "
            "%lld tries\n",
            KIND, (long long)(granted_ms - asked_ms), tries);
    TK_EXPECT(granted_ms - asked_ms >= SHORT_TTL_MS - 100,
              "not before the "
              "holder's TTL ran out (%lld ms)",
              (long long)(granted_ms - asked_ms));
    TK_EXPECT(granted_ms - asked_ms <= SHORT_TTL_MS + EXPIRY_SLACK_MS,
              "soon after the holder's %d ms TTL ran out: got it after "
              "%lld ms",
              SHORT_TTL_MS, (long long)(granted_ms - asked_ms));
    TK_EXPECT(tries >= 1 && tries <= MAX_TRIES_DEAD_HOLDER,
              "the timer "
              "follows the holder's TTL: at most %d tries, got %lld",
              MAX_TRIES_DEAD_HOLDER, tries);
    TK_EXPECT_ERR(give_back(&mine), DLOCK_OK, waiter_c, "the release");
    dlock_client_free(waiter_c);
    dlock_client_free(holder_c);
}

static int breaker_open(void *arg)
{
    return dlock_client_breaker(arg) == DLOCK_BREAKER_OPEN;
}

static int open_or_returned(void *arg)
{
    crowd *cr = arg;

    return atomic_load(&cr->finished) > 0 || breaker_open(cr->client);
}

static void forever_restart(void **state)
{
    crowd_case *cc = begin_case("waitr", -1);
    crowd *const cr = &cc->cr;

    (void)state;
    TK_EXPECT_ERR(take(cc->holder_c, cc->name, LONG_TTL_MS, 0, &cc->h),
                  DLOCK_OK, cc->holder_c, "the holder's acquire");
    TK_EXPECT(pthread_create(&cc->threads[0], NULL, crowd_main, cr) == 0,
              "the waiter thread starts");
    cc->nthreads = 1;
    expect_subscriber(cc->name);
    TK_EXPECT(testkit_redis_stop(server) == 0, "redis-server stops");
    /* The subscriber connection's loss wakes the waiter; its tries fail
     * until the breaker opens. */
    TK_EXPECT(testkit_wait_until(open_or_returned, cr, 10000),
              "the waiter's tries open the breaker within 10 s");
    TK_EXPECT(atomic_load(&cr->finished) == 0,
              "a wait without end goes on "
              "while Redis is down; it returned (%s)",
              cr->error);
    TK_EXPECT(testkit_redis_restart(server) == 0,
              "redis-server starts "
              "again on port %d",
              server->port);
    TK_EXPECT(testkit_wait_until(one_finished, cr, 15000),
              "the waiter "
              "gets the " KIND " within 15 s of the restart");
    TK_EXPECT(atomic_load(&cr->failed) == 0,
              "the waiter's acquire and "
              "release work after the restart (%s)",
              cr->error);
    /* The restarted server lost the holder's key: nothing to release. */
    abandon(&cc->h);
}

static int setup(void **state)
{
    const testkit_redis_opts o = {.name = "wait_" KIND};

    (void)state;
    server = testkit_redis_start(&o);
    return server != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    testkit_redis_free(server);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(quiet_waiters, end_case),
        cmocka_unit_test(dead_holder),
        cmocka_unit_test_teardown(forever_restart, end_case),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
