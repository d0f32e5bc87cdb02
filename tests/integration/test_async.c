/*
 * test_async.c: the non-blocking API (dlock/async.h) on real servers.
 *
 * Each test drives one dlock_async handle from a poll(2) loop on the
 * test's thread, as a service's event loop would:
 *
 *   - many_callers_share_one_handle: 64 callers in flight on one handle,
 *     each looping acquire then release, 48 keys so that 16 keys have two
 *     callers: no two holders of a key at once (a per-key flag), and each
 *     grant is checked against Redis through the blocking API
 *     (dlock_inspect): the key holds this lock's own token and its counter
 *     this lock's fence, so a reply handed to the wrong caller (another
 *     key's grant, a busy answer taken for a grant) fails the test;
 *   - async_and_blocking_locks_mix: a lock acquired here is extended
 *     (blocking and here), inspected and released through the blocking
 *     API, and a lock from dlock_acquire is released here;
 *   - silent_server_times_out_every_command: a paused proxy: every
 *     command in flight completes with DLOCK_TIMEOUT, none is claimed
 *     held, the handle closes and reconnects, and whatever ran unseen is
 *     released in the background (no key left held);
 *   - reset_connection_resolves_every_command: the proxy resets the
 *     connection with commands in flight: each completes once with an
 *     error, no lock is handed out, no key is left held;
 *   - validity_counts_from_the_write: a reply delayed by the proxy: the
 *     lock's validity ends no later than the TTL after the acquire was
 *     queued, never the TTL after the reply;
 *   - a_redis_clock_step_shrinks_what_async_locks_claim: the server's
 *     wall clock steps 15 s forward (the shim); the handle's next extend
 *     reads it and a lock acquired through the handle claims no more
 *     than its PTTL in Redis;
 *   - script_flush_is_served_again_with_the_body: after SCRIPT FLUSH,
 *     FLUSH_OPS acquires in flight are answered NOSCRIPT (they did not
 *     run) and each is sent again with the script's body and granted,
 *     holding its own token; after a second flush their releases are,
 *     likewise, and free the keys;
 *   - free_completes_every_pending_command: sent and unsent commands at
 *     dlock_async_free: each callback runs once, with DLOCK_STATE, before
 *     free returns, none after; no key left held;
 *   - completions_write_what_they_queue: three replies completed in one
 *     pass; the acquire the second one's callback queues reaches the
 *     server (its key becomes held) while the third one's callback runs,
 *     not only after the pass (async.c's EARLY_FLUSH_PARTS).
 *
 * What a case's callbacks touch lives in static storage (the_case), freed
 * by end_case, every case's teardown, whether the case passed or failed.
 */
#include "itkit.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dlock/async.h"

#define CALLERS 64
#define KEYS 48
#define PAIRS 3000
#define IN_FLIGHT 32
#define FLUSH_OPS 4

typedef struct caller {
    int key;          /* index into keys */
    dlock_lock *held; /* between acquire and release */
} caller;

typedef struct async_case {
    dlock_client *c;
    dlock_async *a;
    testkit_proxied *link;
    testkit_redis *stepped; /* the clock-step case's server */
    char keys[KEYS > IN_FLIGHT ? KEYS : IN_FLIGHT][TESTKIT_KEY_MAX];
    int holder[KEYS]; /* 1 while some caller holds the key */
    uint64_t last_fence[KEYS];
    caller callers[CALLERS];
    int pairs, busy, failures, crossed, overlaps;
    char first_failure[DLOCK_ERRMSG_MAX + 64];
    /* The fault cases: one completion each. */
    int done, ok, freed, after_free;
    dlock_err errs[IN_FLIGHT];
    dlock_lock *locks[IN_FLIGHT];
} async_case;

static async_case the_case;

static int end_case(void **state)
{
    async_case *ac = &the_case;

    (void)state;
    for (int i = 0; i < CALLERS; i++)
        dlock_lock_free(ac->callers[i].held);
    for (int i = 0; i < IN_FLIGHT; i++)
        dlock_lock_free(ac->locks[i]);
    dlock_async_free(ac->a);
    if (ac->c != NULL)
        dlock_client_free(ac->c);
    testkit_proxied_free(ac->link);
    testkit_redis_free(ac->stepped);
    memset(ac, 0, sizeof(*ac));
    return 0;
}

static void fail_note(const char *what, dlock_err err, const char *msg)
{
    async_case *ac = &the_case;

    if (ac->failures++ == 0)
        snprintf(ac->first_failure, sizeof(ac->first_failure), "%s: %s (%s)",
                 what, dlock_errname(err), msg);
}

/* Runs the loop until done(arg) or timeout_ms, as an event loop would. */
static int drive(dlock_async *a, int (*done)(void *), void *arg,
                 int64_t timeout_ms)
{
    int64_t until = testkit_now_ms() + timeout_ms;

    while (!done(arg)) {
        if (testkit_now_ms() >= until)
            return 0;
        dlock_async_poll(a, 50);
    }
    return 1;
}

static int nothing_pending(void *arg)
{
    return dlock_async_pending(arg) == 0;
}

/* ---- many callers ------------------------------------------------------ */

static void start_acquire(caller *k);

/* The key k's lock names must hold its token and its fence in Redis. */
static void check_grant(caller *k, dlock_lock *l)
{
    async_case *ac = &the_case;
    dlock_lock_info info;
    dlock_err err;

    if (strcmp(dlock_lock_key(l), ac->keys[k->key]) != 0)
        ac->crossed++;
    err = dlock_inspect(ac->c, ac->keys[k->key], &info);
    if (err != DLOCK_OK) {
        fail_note("inspect", err, dlock_client_errmsg(ac->c));
        return;
    }
    if (strcmp(info.token, dlock_lock_token(l)) != 0
        || info.last_fence != dlock_lock_fence(l)
        || dlock_lock_fence(l) <= ac->last_fence[k->key])
        ac->crossed++;
    ac->last_fence[k->key] = dlock_lock_fence(l);
}

static void released(dlock_async *a, dlock_err err, const char *msg, void *arg)
{
    caller *k = arg;

    (void)a;
    the_case.holder[k->key] = 0;
    if (err != DLOCK_OK)
        fail_note("release", err, msg);
    the_case.pairs++;
    start_acquire(k);
}

static void acquired(dlock_async *a, dlock_err err, dlock_lock *l,
                     const char *msg, void *arg)
{
    async_case *ac = &the_case;
    caller *k = arg;

    if (err == DLOCK_BUSY) {
        ac->busy++;
        start_acquire(k);
        return;
    }
    if (err != DLOCK_OK) {
        fail_note("acquire", err, msg);
        return;
    }
    if (ac->holder[k->key])
        ac->overlaps++;
    ac->holder[k->key] = 1;
    check_grant(k, l);
    err = dlock_async_release(a, l, released, k);
    if (err != DLOCK_OK) {
        fail_note("queue release", err, dlock_async_errmsg(a));
        dlock_lock_free(l);
    }
}

static void start_acquire(caller *k)
{
    async_case *ac = &the_case;
    dlock_acquire_opts o = itkit_acquire_opts(10000, 0);
    dlock_err err;

    if (ac->pairs >= PAIRS || ac->failures > 0)
        return;
    err = dlock_async_acquire(ac->a, ac->keys[k->key], &o, acquired, k);
    if (err != DLOCK_OK)
        fail_note("queue acquire", err, dlock_async_errmsg(ac->a));
}

static void many_callers_share_one_handle(void **state)
{
    async_case *ac = &the_case;

    (void)state;
    ac->c = itkit_client(itkit_shared_url(), NULL);
    TK_EXPECT_ERR(dlock_async_new(ac->c, &ac->a), DLOCK_OK, ac->c,
                  "making an async handle");
    for (int i = 0; i < KEYS; i++)
        testkit_key(ac->keys[i], "async-many");
    for (int i = 0; i < CALLERS; i++) {
        ac->callers[i].key = i % KEYS;
        start_acquire(&ac->callers[i]);
    }
    TK_EXPECT(drive(ac->a, nothing_pending, ac->a, 120000),
              "%d pairs done within 120 s (%d done)", PAIRS, ac->pairs);
    TK_EXPECT(ac->failures == 0, "no call fails (%d did; first: %s)",
              ac->failures, ac->first_failure);
    TK_EXPECT(ac->overlaps == 0, "no two holders of a key at once (%d)",
              ac->overlaps);
    TK_EXPECT(ac->crossed == 0,
              "each grant is its own key's, with its own token and fence "
              "(%d were not)",
              ac->crossed);
    TK_EXPECT(ac->pairs >= PAIRS, "%d pairs done, got %d", PAIRS, ac->pairs);
    TK_EXPECT(ac->busy > 0, "callers sharing a key found it busy at times");
}

/* ---- mixing with the blocking API -------------------------------------- */

static void one_acquired(dlock_async *a, dlock_err err, dlock_lock *l,
                         const char *msg, void *arg)
{
    int i = (int)(intptr_t)arg;

    (void)a;
    (void)msg;
    the_case.errs[i] = err;
    the_case.locks[i] = l;
    the_case.done++;
}

static void one_released(dlock_async *a, dlock_err err, const char *msg,
                         void *arg)
{
    int i = (int)(intptr_t)arg;

    (void)a;
    (void)msg;
    the_case.errs[i] = err;
    the_case.done++;
}

static void one_extended(dlock_async *a, dlock_err err, dlock_lock *l,
                         const char *msg, void *arg)
{
    int i = (int)(intptr_t)arg;

    (void)a;
    (void)l;
    (void)msg;
    the_case.errs[i] = err;
    the_case.done++;
}

static int done_count(void *arg)
{
    return the_case.done >= *(int *)arg;
}

static void async_and_blocking_locks_mix(void **state)
{
    async_case *ac = &the_case;
    dlock_acquire_opts o = itkit_acquire_opts(10000, 0);
    dlock_lock_info info;
    dlock_lock *l;
    int want = 1;

    (void)state;
    ac->c = itkit_client(itkit_shared_url(), NULL);
    TK_EXPECT_ERR(dlock_async_new(ac->c, &ac->a), DLOCK_OK, ac->c,
                  "making an async handle");
    testkit_key(ac->keys[0], "async-mix");
    TK_EXPECT_ERR(dlock_async_acquire(ac->a, ac->keys[0], &o, one_acquired,
                                      (void *)0),
                  DLOCK_OK, ac->c, "queueing an acquire");
    TK_EXPECT(drive(ac->a, done_count, &want, 10000), "the acquire completes");
    TK_EXPECT(ac->errs[0] == DLOCK_OK && ac->locks[0] != NULL,
              "the async acquire is granted, got %s",
              dlock_errname(ac->errs[0]));
    l = ac->locks[0];
    TK_EXPECT(dlock_lock_fence(l) > 0 && dlock_lock_valid_ms(l) > 0
                  && dlock_lock_valid_ms(l) <= 10000,
              "it has a fence and validity within its TTL");
    TK_EXPECT_ERR(dlock_extend(l, 20000), DLOCK_OK, ac->c,
                  "extending it through the blocking API");
    TK_EXPECT(dlock_lock_valid_ms(l) > 10000, "the extend moved validity");
    TK_EXPECT_ERR(dlock_async_extend(ac->a, l, 40000, one_extended, (void *)2),
                  DLOCK_OK, ac->c, "queueing an async extend");
    want = 2;
    TK_EXPECT(drive(ac->a, done_count, &want, 10000), "the extend completes");
    TK_EXPECT(ac->errs[2] == DLOCK_OK, "the async extend succeeds, got %s",
              dlock_errname(ac->errs[2]));
    TK_EXPECT(dlock_lock_valid_ms(l) > 20000,
              "the async extend moved validity");
    TK_EXPECT_ERR(dlock_inspect(ac->c, ac->keys[0], &info), DLOCK_OK, ac->c,
                  "inspect");
    TK_EXPECT(strcmp(info.token, dlock_lock_token(l)) == 0
                  && info.ttl_ms > 20000,
              "Redis holds its token with the extended TTL");
    ac->locks[0] = NULL;
    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, ac->c,
                  "releasing it through the blocking API");

    l = itkit_acquire(ac->c, ac->keys[0], &o);
    TK_EXPECT_ERR(dlock_async_release(ac->a, l, one_released, (void *)1),
                  DLOCK_OK, ac->c, "queueing the release of a blocking lock");
    want = 3;
    TK_EXPECT(drive(ac->a, done_count, &want, 10000), "the release completes");
    TK_EXPECT(ac->errs[1] == DLOCK_OK, "the async release succeeds, got %s",
              dlock_errname(ac->errs[1]));
    TK_EXPECT_ERR(dlock_inspect(ac->c, ac->keys[0], &info), DLOCK_OK, ac->c,
                  "inspect");
    TK_EXPECT(!info.held, "the key is free");
    TK_EXPECT(dlock_async_acquire(ac->a, ac->keys[0],
                                  &(dlock_acquire_opts){.wait_ms = 100},
                                  one_acquired, NULL)
                  == DLOCK_INVALID,
              "a waiting async acquire is refused");

    /* A key taken from under the lock: the async extend finds it lost. */
    TK_EXPECT_ERR(dlock_async_acquire(ac->a, ac->keys[0], &o, one_acquired,
                                      (void *)3),
                  DLOCK_OK, ac->c, "queueing an acquire");
    want = 4;
    TK_EXPECT(drive(ac->a, done_count, &want, 10000), "the acquire completes");
    TK_EXPECT(ac->errs[3] == DLOCK_OK, "granted, got %s",
              dlock_errname(ac->errs[3]));
    TK_EXPECT(testkit_redis_int(itkit_shared_url(), "DEL %s", ac->keys[0])
                  == 1,
              "the key is deleted behind the lock's back");
    TK_EXPECT_ERR(dlock_async_extend(ac->a, ac->locks[3], 0, one_extended,
                                     (void *)4),
                  DLOCK_OK, ac->c, "queueing an async extend");
    want = 5;
    TK_EXPECT(drive(ac->a, done_count, &want, 10000), "the extend completes");
    TK_EXPECT(ac->errs[4] == DLOCK_LOST && dlock_lock_lost(ac->locks[3]),
              "the extend reports the lock lost, got %s",
              dlock_errname(ac->errs[4]));
}

/* ---- faults ------------------------------------------------------------ */

/* A client and handle through a proxy to a private server, io 1 s. */
static void proxied_handle(const char *name)
{
    async_case *ac = &the_case;
    dlock_client_opts co = itkit_client_opts();

    co.io_timeout_ms = 1000;
    ac->link = itkit_proxied(name);
    ac->c = itkit_client(ac->link->url, &co);
    TK_EXPECT_ERR(dlock_async_new(ac->c, &ac->a), DLOCK_OK, ac->c,
                  "making an async handle");
}

static void queue_acquires(int n, const char *name, int64_t ttl_ms)
{
    async_case *ac = &the_case;
    dlock_acquire_opts o = itkit_acquire_opts(ttl_ms, 0);

    for (int i = 0; i < n; i++) {
        testkit_key(ac->keys[i], name);
        TK_EXPECT_ERR(dlock_async_acquire(ac->a, ac->keys[i], &o, one_acquired,
                                          (void *)(intptr_t)i),
                      DLOCK_OK, ac->c, "queueing an acquire");
    }
}

static int all_written(void *arg)
{
    return !(dlock_async_events(arg) & DLOCK_ASYNC_WRITE);
}

/* 1 when none of the first n keys is held on the private server. */
static int keys_free(void *arg)
{
    async_case *ac = &the_case;
    int n = *(int *)arg;

    for (int i = 0; i < n; i++)
        if (testkit_redis_int(ac->link->server->url, "EXISTS %s", ac->keys[i])
            != 0)
            return 0;
    return 1;
}

/* The handle closed after the fault; it reconnects and grants again. */
static void handle_recovers(const char *name)
{
    async_case *ac = &the_case;
    int want;

    TK_EXPECT(dlock_async_fd(ac->a) == -1, "the handle is closed");
    TK_EXPECT(dlock_async_acquire(ac->a, "x", NULL, one_acquired, NULL)
                  == DLOCK_UNAVAILABLE,
              "a closed handle refuses new commands");
    TK_EXPECT_ERR(dlock_async_reconnect(ac->a), DLOCK_OK, ac->c,
                  "reconnecting");
    ac->done = 0;
    queue_acquires(1, name, 10000);
    want = 1;
    TK_EXPECT(drive(ac->a, done_count, &want, 10000), "the acquire completes");
    TK_EXPECT(ac->errs[0] == DLOCK_OK, "granted after reconnecting, got %s",
              dlock_errname(ac->errs[0]));
}

static void silent_server_times_out_every_command(void **state)
{
    async_case *ac = &the_case;
    int n = IN_FLIGHT;

    (void)state;
    proxied_handle("async-silent");
    TK_EXPECT(testkit_proxy_ctl(ac->link->proxy, "pause") == 0, "paused");
    queue_acquires(n, "async-silent", 30000);
    TK_EXPECT(drive(ac->a, done_count, &n, 10000),
              "every command completes within 10 s (%d did)", ac->done);
    for (int i = 0; i < n; i++)
        TK_EXPECT(ac->errs[i] == DLOCK_TIMEOUT && ac->locks[i] == NULL,
                  "command %d times out and claims nothing, got %s", i,
                  dlock_errname(ac->errs[i]));
    TK_EXPECT(testkit_proxy_ctl(ac->link->proxy, "resume") == 0, "resumed");
    TK_EXPECT(testkit_wait_until(keys_free, &n, 15000),
              "what ran after the silence is released in the background");
    handle_recovers("async-silent-after");
}

static void reset_connection_resolves_every_command(void **state)
{
    async_case *ac = &the_case;
    int n = IN_FLIGHT;

    (void)state;
    proxied_handle("async-reset");
    TK_EXPECT(testkit_proxy_ctl(ac->link->proxy, "delay 400") == 0, "delayed");
    queue_acquires(n, "async-reset", 30000);
    TK_EXPECT(drive(ac->a, all_written, ac->a, 5000), "all written");
    TK_EXPECT(testkit_proxy_ctl(ac->link->proxy, "reset") == 0, "reset");
    TK_EXPECT(drive(ac->a, done_count, &n, 10000),
              "every command completes within 10 s (%d did)", ac->done);
    for (int i = 0; i < n; i++)
        TK_EXPECT(ac->errs[i] != DLOCK_OK && ac->errs[i] != DLOCK_BUSY
                      && ac->locks[i] == NULL,
                  "command %d fails and claims nothing, got %s", i,
                  dlock_errname(ac->errs[i]));
    TK_EXPECT(testkit_proxy_ctl(ac->link->proxy, "delay 0") == 0, "no delay");
    TK_EXPECT(testkit_wait_until(keys_free, &n, 15000), "no key is left held");
    handle_recovers("async-reset-after");
}

static void validity_counts_from_the_write(void **state)
{
    async_case *ac = &the_case;
    const int64_t ttl_ms = 3000;
    int64_t queued_ms, left_ms, elapsed_ms;
    int want = 1;

    (void)state;
    proxied_handle("async-valid");
    TK_EXPECT(testkit_proxy_ctl(ac->link->proxy, "delay 300") == 0, "delayed");
    queued_ms = testkit_now_ms();
    queue_acquires(1, "async-valid", ttl_ms);
    TK_EXPECT(drive(ac->a, done_count, &want, 10000), "the acquire completes");
    TK_EXPECT(ac->errs[0] == DLOCK_OK, "granted, got %s",
              dlock_errname(ac->errs[0]));
    left_ms = dlock_lock_valid_ms(ac->locks[0]);
    elapsed_ms = testkit_now_ms() - queued_ms;
    TK_EXPECT(elapsed_ms >= 500, "the reply came late (%lld ms)",
              (long long)elapsed_ms);
    TK_EXPECT(left_ms <= ttl_ms - elapsed_ms,
              "validity %lld ms counts from the write, not the reply "
              "(%lld ms since)",
              (long long)left_ms, (long long)elapsed_ms);
}

/* Queues an async acquire of key for ttl_ms, completing into slot i. */
static void queue_acquire_ttl(int i, const char *name, int64_t ttl_ms)
{
    async_case *ac = &the_case;
    dlock_acquire_opts o = itkit_acquire_opts(ttl_ms, 0);

    testkit_key(ac->keys[i], name);
    TK_EXPECT_ERR(dlock_async_acquire(ac->a, ac->keys[i], &o, one_acquired,
                                      (void *)(intptr_t)i),
                  DLOCK_OK, ac->c, "queueing an acquire");
}

/* The Redis host's clock steps 15 s forward (the wall-clock shim): lock A
 * (20 s), acquired through the handle, now expires in Redis in about 5 s.
 * The handle's next round trip that reads the server's clock, an async
 * extend of lock B, must shrink what A claims: valid_ms(A) never above
 * A's PTTL in Redis.  The same rule as the blocking path's
 * (integration.validity), through the async steps. */
static void a_redis_clock_step_shrinks_what_async_locks_claim(void **state)
{
    async_case *ac = &the_case;
    testkit_redis_opts so;
    int want = 2;
    long long pttl;

    (void)state;
    memset(&so, 0, sizeof(so));
    so.name = "async-clock";
    so.wallclock = 1;
    ac->stepped = testkit_redis_start(&so);
    TK_EXPECT(ac->stepped != NULL, "a private redis-server with the "
                                   "wall-clock shim starts");
    ac->c = itkit_client(ac->stepped->url, NULL);
    TK_EXPECT_ERR(dlock_async_new(ac->c, &ac->a), DLOCK_OK, ac->c,
                  "making an async handle");
    queue_acquire_ttl(0, "async-step-a", 20000);
    queue_acquire_ttl(1, "async-step-b", 30000);
    TK_EXPECT(drive(ac->a, done_count, &want, 10000),
              "both acquires complete");
    TK_EXPECT(ac->errs[0] == DLOCK_OK && ac->errs[1] == DLOCK_OK,
              "both granted, got %s and %s", dlock_errname(ac->errs[0]),
              dlock_errname(ac->errs[1]));
    TK_EXPECT(dlock_lock_valid_ms(ac->locks[0]) > 19000, "A valid ~20 s");
    TK_EXPECT(testkit_redis_clock_step(ac->stepped, 15000) == 0, "step +15 s");
    ac->done = 0;
    want = 1;
    TK_EXPECT_ERR(dlock_async_extend(ac->a, ac->locks[1], 0, one_extended,
                                     (void *)(intptr_t)1),
                  DLOCK_OK, ac->c, "queueing the extend of B");
    TK_EXPECT(drive(ac->a, done_count, &want, 10000), "the extend completes");
    TK_EXPECT(ac->errs[1] == DLOCK_OK, "B extended after the step, got %s",
              dlock_errname(ac->errs[1]));
    pttl = testkit_redis_int(ac->stepped->url, "PTTL %s", ac->keys[0]);
    TK_EXPECT(pttl > 0 && pttl < 6000, "Redis keeps A ~5 s, PTTL %lld", pttl);
    TK_EXPECT(dlock_lock_valid_ms(ac->locks[0]) <= pttl,
              "valid_ms(A) %lld <= its PTTL %lld",
              (long long)dlock_lock_valid_ms(ac->locks[0]), pttl);
}

/* SCRIPT FLUSH on the private server; the test fails if it is refused. */
static void flush_scripts(void)
{
    redisReply *r = testkit_redis_cmd(the_case.link->server->url,
                                      "SCRIPT FLUSH");

    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS, "SCRIPT FLUSH");
    freeReplyObject(r);
}

static void script_flush_is_served_again_with_the_body(void **state)
{
    async_case *ac = &the_case;
    const char *url;
    int want = FLUSH_OPS;

    (void)state;
    proxied_handle("async-flush");
    url = ac->link->server->url;
    flush_scripts();
    queue_acquires(FLUSH_OPS, "async-flush", 10000);
    TK_EXPECT(drive(ac->a, done_count, &want, 10000),
              "the %d acquires complete", FLUSH_OPS);
    for (int i = 0; i < FLUSH_OPS; i++) {
        TK_EXPECT(ac->errs[i] == DLOCK_OK && ac->locks[i] != NULL,
                  "acquire %d, answered NOSCRIPT, is sent again with the "
                  "script and granted, got %s",
                  i, dlock_errname(ac->errs[i]));
        redisReply *r = testkit_redis_cmd(url, "GET %s", ac->keys[i]);
        const int ours = r != NULL && r->type == REDIS_REPLY_STRING
                         && strcmp(r->str, dlock_lock_token(ac->locks[i]))
                                == 0;
        freeReplyObject(r);
        TK_EXPECT(ours, "key %d holds its own lock's token", i);
        TK_EXPECT(dlock_lock_valid_ms(ac->locks[i]) > 0, "lock %d is valid",
                  i);
    }
    flush_scripts();
    ac->done = 0;
    for (int i = 0; i < FLUSH_OPS; i++) {
        TK_EXPECT_ERR(dlock_async_release(ac->a, ac->locks[i], one_released,
                                          (void *)(intptr_t)i),
                      DLOCK_OK, ac->c, "queueing a release");
        ac->locks[i] = NULL; /* the library's now */
    }
    TK_EXPECT(drive(ac->a, done_count, &want, 10000),
              "the %d releases complete", FLUSH_OPS);
    for (int i = 0; i < FLUSH_OPS; i++) {
        TK_EXPECT(ac->errs[i] == DLOCK_OK,
                  "release %d, answered NOSCRIPT, is sent again and "
                  "releases, got %s",
                  i, dlock_errname(ac->errs[i]));
        TK_EXPECT(testkit_redis_int(url, "EXISTS %s", ac->keys[i]) == 0,
                  "key %d is free", i);
    }
}

static void counted_acquire(dlock_async *a, dlock_err err, dlock_lock *l,
                            const char *msg, void *arg)
{
    async_case *ac = &the_case;

    (void)a;
    (void)msg;
    (void)arg;
    if (ac->freed)
        ac->after_free++;
    if (err != DLOCK_STATE)
        fail_note("acquire at free", err, msg);
    dlock_lock_free(l);
    ac->done++;
}

static void counted_release(dlock_async *a, dlock_err err, const char *msg,
                            void *arg)
{
    async_case *ac = &the_case;

    (void)a;
    (void)arg;
    if (ac->freed)
        ac->after_free++;
    if (err != DLOCK_STATE)
        fail_note("release at free", err, msg);
    ac->done++;
}

static void free_completes_every_pending_command(void **state)
{
    async_case *ac = &the_case;
    dlock_acquire_opts o = itkit_acquire_opts(10000, 0);
    int n = IN_FLIGHT;

    (void)state;
    proxied_handle("async-free");
    for (int i = 0; i < n; i++) {
        testkit_key(ac->keys[i], "async-free");
        if (i % 4 == 3)
            ac->locks[i] = itkit_acquire(ac->c, ac->keys[i], &o);
    }
    TK_EXPECT(testkit_proxy_ctl(ac->link->proxy, "pause") == 0, "paused");
    for (int i = 0; i < n; i++) {
        if (i == n / 2) /* the first half is written, the rest not */
            TK_EXPECT(drive(ac->a, all_written, ac->a, 5000), "written");
        if (i % 4 == 3) {
            dlock_lock *l = ac->locks[i];

            ac->locks[i] = NULL;
            TK_EXPECT_ERR(dlock_async_release(ac->a, l, counted_release, NULL),
                          DLOCK_OK, ac->c, "queueing a release");
        } else {
            TK_EXPECT_ERR(dlock_async_acquire(ac->a, ac->keys[i], &o,
                                              counted_acquire, NULL),
                          DLOCK_OK, ac->c, "queueing an acquire");
        }
    }
    dlock_async_free(ac->a);
    ac->a = NULL;
    ac->freed = 1;
    TK_EXPECT(ac->done == n, "every callback ran before free returned (%d)",
              ac->done);
    TK_EXPECT(ac->failures == 0, "each with DLOCK_STATE (first: %s)",
              ac->first_failure);
    TK_EXPECT(testkit_proxy_ctl(ac->link->proxy, "resume") == 0, "resumed");
    TK_EXPECT(testkit_wait_until(keys_free, &n, 15000), "no key is left held");
    TK_EXPECT(ac->after_free == 0, "no callback after free");
}

/* ---- writing while a batch is completed -------------------------------- */

#define BATCH 3

/* 1 when the i-th key is held on the shared server. */
static int key_held(void *arg)
{
    int i = *(int *)arg;

    return testkit_redis_int(itkit_shared_url(), "EXISTS %s", the_case.keys[i])
           == 1;
}

/* 1 when the batch's keys are all held (their acquires ran). */
static int batch_ran(void *arg)
{
    (void)arg;
    for (int i = 0; i < BATCH; i++)
        if (!key_held(&i))
            return 0;
    return 1;
}

/* The batch's completions: the second queues an acquire of the probe key
 * (keys[BATCH]); the third waits, bounded, for the server to run it. */
static void batch_acquired(dlock_async *a, dlock_err err, dlock_lock *l,
                           const char *msg, void *arg)
{
    async_case *ac = &the_case;
    dlock_acquire_opts o = itkit_acquire_opts(10000, 0);
    int probe = BATCH;

    one_acquired(a, err, l, msg, arg);
    if (ac->done == 2) {
        dlock_err e = dlock_async_acquire(a, ac->keys[BATCH], &o, one_acquired,
                                          (void *)BATCH);

        if (e != DLOCK_OK)
            fail_note("queueing the probe's acquire", e,
                      dlock_async_errmsg(a));
    } else if (ac->done == 3) {
        ac->ok = testkit_wait_until(key_held, &probe, 5000);
    }
}

static void completions_write_what_they_queue(void **state)
{
    async_case *ac = &the_case;
    dlock_acquire_opts o = itkit_acquire_opts(10000, 0);
    dlock_client_opts co = itkit_client_opts();
    struct pollfd p = {.events = POLLIN};
    int want = BATCH + 1;

    (void)state;
    co.io_timeout_ms = 30000; /* past the probe's wait, on any code */
    ac->c = itkit_client(itkit_shared_url(), &co);
    TK_EXPECT_ERR(dlock_async_new(ac->c, &ac->a), DLOCK_OK, ac->c,
                  "making an async handle");
    for (int i = 0; i <= BATCH; i++)
        testkit_key(ac->keys[i], "async-early");
    for (int i = 0; i < BATCH; i++)
        TK_EXPECT_ERR(dlock_async_acquire(ac->a, ac->keys[i], &o,
                                          batch_acquired, (void *)(intptr_t)i),
                      DLOCK_OK, ac->c, "queueing an acquire");
    TK_EXPECT(dlock_async_process(ac->a, 0) == DLOCK_OK && all_written(ac->a),
              "the batch is written in one send: %s",
              dlock_async_errmsg(ac->a));
    /* Let every reply of the batch come before any is read, so that one
     * pass completes them all (the server answers them in one write; the
     * pause only makes that sure). */
    TK_EXPECT(testkit_wait_until(batch_ran, NULL, 10000), "the batch ran");
    p.fd = dlock_async_fd(ac->a);
    TK_EXPECT(poll(&p, 1, 10000) == 1, "the replies came");
    usleep(100000);
    TK_EXPECT(drive(ac->a, done_count, &want, 20000),
              "the batch and the probe complete");
    TK_EXPECT(ac->failures == 0, "%s", ac->first_failure);
    TK_EXPECT(ac->ok,
              "the acquire queued by the batch's second completion reached "
              "the server before the third completion's callback returned");
    for (int i = 0; i <= BATCH; i++)
        TK_EXPECT(ac->errs[i] == DLOCK_OK && ac->locks[i] != NULL,
                  "acquire %d is granted, got %s", i,
                  dlock_errname(ac->errs[i]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(many_callers_share_one_handle, end_case),
        cmocka_unit_test_teardown(async_and_blocking_locks_mix, end_case),
        cmocka_unit_test_teardown(silent_server_times_out_every_command,
                                  end_case),
        cmocka_unit_test_teardown(reset_connection_resolves_every_command,
                                  end_case),
        cmocka_unit_test_teardown(validity_counts_from_the_write, end_case),
        cmocka_unit_test_teardown(
            a_redis_clock_step_shrinks_what_async_locks_claim, end_case),
        cmocka_unit_test_teardown(script_flush_is_served_again_with_the_body,
                                  end_case),
        cmocka_unit_test_teardown(free_completes_every_pending_command,
                                  end_case),
        cmocka_unit_test_teardown(completions_write_what_they_queue, end_case),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
