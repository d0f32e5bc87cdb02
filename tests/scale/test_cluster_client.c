/*
 * test_cluster_client.c: the public API on a redis+cluster:// URL, on
 * scripts/stack's cluster group (three masters, three replicas), shared
 * with the other scale tests through the suite's fixture.
 *
 *   - locks on keys over all slots (2,000; 10,000 with DLOCK_TEST_LONG=1)
 *     taken, extended and released by 4 threads of 2 clients (each key
 *     by one thread of each client, in step), with a checker counter per
 *     key: never two holders of a valid lock, none lost.  During the
 *     run the slot of a hot key migrates to another master with its keys
 *     (ASK, TRYAGAIN, then MOVED) and that master fails over (CLUSTER
 *     FAILOVER on its replica; the long form also kills a master by its
 *     pid file): the client follows, and the outcome is printed;
 *   - a waiter on one client is woken by the release on another through
 *     the notification, long before the holder's TTL;
 *   - the watchdog renews locks on every master;
 *   - a reentrant lock, and each pattern (semaphore, read-write lock,
 *     leader, single-flight, idempotency, rate limit) runs on the
 *     cluster: their keys share one slot each.
 *
 * The threaded cases keep their threads' state in static storage (the_run,
 * the_waiter), and their teardowns join whatever a failed expectation
 * left running: it leaves the case by longjmp, and the group's teardown
 * frees the clients the threads use.  The chaos thread does not call
 * TK_EXPECT (which may only run on the test's thread): it records its
 * failure, which the case then checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deploy/cluster.h"
#include "dlock/async.h"
#include "dlock/dlock.h"
#include "dlock/patterns.h"
#include "scalekit.h"
#include "testkit.h"

#define CLIENTS 2
#define THREADS_PER_CLIENT 2
#define HOT_KEY "cc:hot"

static dlock__deployment deployment;
static dlock_client *clients[CLIENTS];
static int any_port;
static int long_form;

static dlock_client *client_new(const char *url)
{
    dlock_client_opts o;
    dlock_client *c = NULL;
    char err[512];

    dlock_client_opts_init(&o);
    o.io_timeout_ms = 5000;
    o.pool_size = 4;
    if (dlock_client_new(url, &o, &c, err, sizeof(err)) != DLOCK_OK)
        fprintf(stderr, "dlock_client_new(%s): %s\n", url, err);
    return c;
}

static int setup(void **state)
{
    const char *url = scalekit_group_url("cluster");

    (void)state;
    long_form = getenv("DLOCK_TEST_LONG") != NULL
                && strcmp(getenv("DLOCK_TEST_LONG"), "1") == 0;
    if (url == NULL)
        return -1;
    scalekit_deployment(url, &deployment);
    any_port = deployment.nodes[0].port;
    for (int i = 0; i < CLIENTS; i++)
        if ((clients[i] = client_new(url)) == NULL)
            return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < CLIENTS; i++)
        dlock_client_free(clients[i]);
    dlock__deployment_clear(&deployment);
    scalekit_group_done();
    return 0;
}

static unsigned slot_of(const char *key)
{
    return dlock__cluster_keyslot(key, strlen(key));
}

/* ---- many locks through a migration and failovers ---------------------- */

typedef struct run {
    int nkeys;
    atomic_int *holders; /* nkeys + 1 (the hot key last) */
    atomic_long ops;
    atomic_int chaos_done;
    atomic_long granted, busy, unavailable, lost, overlaps, unexpected;
    char unexpected_msg[512];
    pthread_mutex_t mu;
    char chaos_failure[256]; /* what the chaos thread saw fail, or "" */
} run;

typedef struct worker {
    run *r;
    dlock_client *c;
    int index;
} worker;

static void key_name(const run *r, int i, char *buf, size_t size)
{
    if (i == r->nkeys)
        snprintf(buf, size, "%s", HOT_KEY);
    else
        snprintf(buf, size, "cc:%d", i);
}

static void note_unexpected(run *r, const char *what, dlock_err err,
                            dlock_client *c)
{
    atomic_fetch_add(&r->unexpected, 1);
    pthread_mutex_lock(&r->mu);
    snprintf(r->unexpected_msg, sizeof(r->unexpected_msg), "%s: %s: %s", what,
             dlock_strerror(err), dlock_client_errmsg(c));
    pthread_mutex_unlock(&r->mu);
}

/* One acquire of key i; while granted, its checker counter must be 1. */
static void take_and_give(worker *w, int i)
{
    run *r = w->r;
    char key[32];
    dlock_acquire_opts o;
    dlock_lock *l = NULL;
    dlock_err err;

    key_name(r, i, key, sizeof(key));
    dlock_acquire_opts_init(&o);
    o.ttl_ms = 10000;
    err = dlock_acquire(w->c, key, &o, &l);
    atomic_fetch_add(&r->ops, 1);
    if (err == DLOCK_BUSY) {
        atomic_fetch_add(&r->busy, 1);
        return;
    }
    if (err == DLOCK_UNAVAILABLE || err == DLOCK_TIMEOUT) {
        atomic_fetch_add(&r->unavailable, 1);
        return;
    }
    if (err != DLOCK_OK) {
        note_unexpected(r, key, err, w->c);
        return;
    }
    atomic_fetch_add(&r->granted, 1);
    /* Every holder's lease (10 s) outlives its hold by far: anyone else
     * counted here holds a valid lock too.  The hold is one round trip,
     * an extend on the key's master. */
    if (atomic_fetch_add(&r->holders[i], 1) != 0)
        atomic_fetch_add(&r->overlaps, 1);
    err = dlock_extend(l, 10000);
    if (err == DLOCK_LOST)
        atomic_fetch_add(&r->lost, 1);
    else if (err == DLOCK_UNAVAILABLE || err == DLOCK_TIMEOUT)
        atomic_fetch_add(&r->unavailable, 1);
    else if (err != DLOCK_OK)
        note_unexpected(r, "extend", err, w->c);
    atomic_fetch_sub(&r->holders[i], 1);
    err = dlock_release(l);
    if (err == DLOCK_LOST)
        atomic_fetch_add(&r->lost, 1);
    else if (err == DLOCK_UNAVAILABLE || err == DLOCK_TIMEOUT)
        atomic_fetch_add(&r->unavailable, 1);
    else if (err != DLOCK_OK)
        note_unexpected(r, "release", err, w->c);
}

/* Passes over its half of the keys, in step with the thread of the other
 * client that has the same half (the hot key every 8th), until one full
 * pass is done and the chaos is over. */
static void *work(void *arg)
{
    worker *w = arg;
    run *r = w->r;
    int half = r->nkeys / 2;
    int first = (w->index / CLIENTS) % 2 * half;

    for (int pass = 0;; pass++) {
        if (pass > 0 && atomic_load(&r->chaos_done))
            break;
        for (int j = 0; j < half; j++) {
            take_and_give(w, first + j);
            if (j % 8 == 0)
                take_and_give(w, r->nkeys);
        }
    }
    return NULL;
}

typedef struct ops_probe {
    run *r;
    long target;
} ops_probe;

static int ops_reached(void *arg)
{
    ops_probe *p = arg;

    return atomic_load(&p->r->ops) >= p->target;
}

typedef struct master_probe {
    unsigned slot;
    int port;
} master_probe;

static int slot_served_by(void *arg)
{
    master_probe *p = arg;

    return scalekit_cluster_master_of(any_port, p->slot) == p->port;
}

/* Records the chaos thread's first failure; returns 0. */
static int chaos_fails(run *r, const char *what, int arg)
{
    if (r->chaos_failure[0] == '\0')
        snprintf(r->chaos_failure, sizeof(r->chaos_failure), what, arg);
    return 0;
}

/* Waits for the workers to have done n more operations; 1 if they did,
 * else 0 with the failure recorded. */
static int let_run(run *r, long n)
{
    ops_probe p = {.r = r, .target = atomic_load(&r->ops) + n};

    if (!testkit_wait_until(ops_reached, &p, 60000))
        return chaos_fails(r, "the workers made progress (%d operations)",
                           (int)p.target);
    return 1;
}

/* Fails over the master on port: CLUSTER FAILOVER on its replica, or a
 * SIGKILL; waits until the replica serves slot; returns the ms taken, or
 * -1 with the failure recorded. */
static int64_t fail_over(run *r, unsigned slot, int master, int kill_it)
{
    master_probe p = {.slot = slot};
    int64_t start;
    char url[64];

    p.port = scalekit_cluster_replica_of(any_port, master);
    start = testkit_now_ms();
    if (kill_it) {
        if (scalekit_signal_node("cluster", master, SIGKILL) <= 0)
            return chaos_fails(r, "master %d is killed", master) - 1;
        if (master == any_port)
            any_port = p.port;
    } else {
        redisReply *rep = testkit_redis_cmd(scalekit_node_url(p.port, url,
                                                              sizeof(url)),
                                            "CLUSTER FAILOVER");
        const int ok = rep != NULL && rep->type == REDIS_REPLY_STATUS;

        freeReplyObject(rep);
        if (!ok)
            return chaos_fails(r, "CLUSTER FAILOVER on %d", p.port) - 1;
    }
    if (!testkit_wait_until(slot_served_by, &p, 30000))
        return chaos_fails(r, "replica %d serves the hot slot", p.port) - 1;
    return testkit_now_ms() - start;
}

static void *chaos(void *arg)
{
    run *r = arg;
    unsigned hot = slot_of(HOT_KEY);
    int from = scalekit_cluster_master_of(any_port, hot);
    int to = scalekit_cluster_other_master(any_port, from);
    int64_t start, migrated_ms, manual_ms, killed_ms = -1;
    int moved;

    if (!let_run(r, r->nkeys / 8))
        goto done;
    start = testkit_now_ms();
    moved = scalekit_cluster_migrate_slot(any_port, hot, to);
    migrated_ms = testkit_now_ms() - start;
    if (!let_run(r, r->nkeys / 8))
        goto done;
    manual_ms = fail_over(r, hot, to, 0);
    if (manual_ms < 0)
        goto done;
    if (long_form) {
        if (!let_run(r, r->nkeys / 8))
            goto done;
        killed_ms = fail_over(r, hot,
                              scalekit_cluster_master_of(any_port, hot), 1);
        if (killed_ms < 0)
            goto done;
    }
    if (!let_run(r, r->nkeys / 8))
        goto done;
    printf("# cluster: slot %u (%d keys) migrated %d -> %d in %" PRId64
           " ms; CLUSTER FAILOVER served again in %" PRId64 " ms",
           hot, moved, from, to, migrated_ms, manual_ms);
    if (killed_ms >= 0)
        printf("; a killed master's slots in %" PRId64 " ms", killed_ms);
    printf("\n");
done:
    atomic_store(&r->chaos_done, 1);
    return NULL;
}

static int slots_covered(int nkeys)
{
    static unsigned char seen[DLOCK__CLUSTER_SLOTS];
    int n = 0;

    memset(seen, 0, sizeof(seen));
    for (int i = 0; i < nkeys; i++) {
        char key[32];

        snprintf(key, sizeof(key), "cc:%d", i);
        n += seen[slot_of(key)]++ == 0;
    }
    return n;
}

#define WORKERS (CLIENTS * THREADS_PER_CLIENT)

/* The migration case's run and threads, in static storage: a failed
 * expectation leaves the case by longjmp while they may still run, and
 * end_run stops and joins them before the clients are freed. */
typedef struct run_case {
    run r;
    worker workers[WORKERS];
    pthread_t threads[WORKERS], chaos_thread;
    int started;       /* workers started, not yet joined */
    int chaos_running; /* the chaos thread started, not yet joined */
    int mu_made;       /* r.mu initialised */
} run_case;

static run_case the_run;

/* Joins the chaos thread, then the workers (each stops after its pass
 * once the chaos is done, or told to end). */
static void join_run(run_case *rc)
{
    if (rc->chaos_running)
        pthread_join(rc->chaos_thread, NULL);
    rc->chaos_running = 0;
    atomic_store(&rc->r.chaos_done, 1); /* no chaos thread: stop anyway */
    for (int i = 0; i < rc->started; i++)
        pthread_join(rc->threads[i], NULL);
    rc->started = 0;
}

/* Teardown of the migration case, passed or failed. */
static int end_run(void **state)
{
    run_case *rc = &the_run;

    (void)state;
    join_run(rc);
    if (rc->mu_made)
        pthread_mutex_destroy(&rc->r.mu);
    free(rc->r.holders);
    memset(rc, 0, sizeof(*rc));
    return 0;
}

static void locks_hold_through_migration_and_failover(void **state)
{
    run_case *const rc = &the_run;
    run *const r = &rc->r;
    int64_t start = testkit_now_ms();

    (void)state;
    memset(rc, 0, sizeof(*rc));
    r->nkeys = long_form ? 10000 : 2000;
    r->holders = calloc((size_t)r->nkeys + 1, sizeof(*r->holders));
    TK_EXPECT(r->holders != NULL, "checker counters allocated");
    pthread_mutex_init(&r->mu, NULL);
    rc->mu_made = 1;
    for (int i = 0; i < WORKERS; i++) {
        rc->workers[i] = (worker){r, clients[i % CLIENTS], i};
        TK_EXPECT(pthread_create(&rc->threads[i], NULL, work, &rc->workers[i])
                      == 0,
                  "worker %d starts", i);
        rc->started = i + 1;
    }
    TK_EXPECT(pthread_create(&rc->chaos_thread, NULL, chaos, r) == 0,
              "the chaos thread starts");
    rc->chaos_running = 1;
    join_run(rc);
    TK_EXPECT(r->chaos_failure[0] == '\0', "%s", r->chaos_failure);
    printf("# cluster: %d keys over %d slots, %ld acquires in %" PRId64
           " ms: %ld granted, %ld busy, %ld unavailable while failing over, "
           "%ld found lost, %ld overlaps of valid locks\n",
           r->nkeys, slots_covered(r->nkeys), atomic_load(&r->ops),
           testkit_now_ms() - start, atomic_load(&r->granted),
           atomic_load(&r->busy), atomic_load(&r->unavailable),
           atomic_load(&r->lost), atomic_load(&r->overlaps));
    TK_EXPECT(atomic_load(&r->overlaps) == 0,
              "no two holders of a valid lock");
    TK_EXPECT(atomic_load(&r->unexpected) == 0, "no unexpected error (%s)",
              r->unexpected_msg);
    /* A migration keeps TTLs and CLUSTER FAILOVER waits for the replica:
     * only a killed master (the long form) may lose a grant. */
    TK_EXPECT(long_form || atomic_load(&r->lost) == 0, "no lock lost (%ld)",
              atomic_load(&r->lost));
    TK_EXPECT(atomic_load(&r->granted) >= r->nkeys,
              "every key was granted at least once overall");
    if (long_form)
        TK_EXPECT(scalekit_group_url("cluster") != NULL,
                  "the killed node comes back");
}

/* ---- the release notification ------------------------------------------ */

typedef struct waiter {
    const char *key;
    dlock_err err;
    int64_t got_ms; /* testkit_now_ms when the acquire returned */
    pthread_t thread;
    int running;      /* started, not yet joined */
    dlock_lock *held; /* the holder's lock, until released */
} waiter;

/* The waiter's case state, in static storage: a failed expectation leaves
 * the case while the waiter still waits, and end_waiter releases the
 * holder's lock (so the waiter gets it and returns) and joins it. */
static waiter the_waiter;

static int end_waiter(void **state)
{
    waiter *w = &the_waiter;

    (void)state;
    if (w->held != NULL)
        dlock_release(w->held);
    if (w->running)
        pthread_join(w->thread, NULL);
    memset(w, 0, sizeof(*w));
    return 0;
}

static void *wait_for_key(void *arg)
{
    waiter *w = arg;
    dlock_acquire_opts o;
    dlock_lock *l = NULL;

    dlock_acquire_opts_init(&o);
    o.ttl_ms = 5000;
    o.wait_ms = 15000;
    w->err = dlock_acquire(clients[1], w->key, &o, &l);
    w->got_ms = testkit_now_ms();
    if (w->err == DLOCK_OK)
        w->err = dlock_release(l);
    return NULL;
}

/* Succeeds once some node counts a subscriber of the key's release
 * channel (SUBSCRIBE or SSUBSCRIBE). */
static int someone_listens(void *arg)
{
    const char *channel = arg;
    int ports[16], n = scalekit_cluster_nodes(any_port, ports, 16);
    int listens = 0;

    for (int i = 0; i < n && !listens; i++) {
        char url[64];
        int port = ports[i];
        redisReply *r = testkit_redis_cmd(scalekit_node_url(port, url,
                                                            sizeof(url)),
                                          "PUBSUB NUMSUB %s", channel);

        listens = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2
                  && r->element[1]->integer > 0;
        freeReplyObject(r);
        r = testkit_redis_cmd(url, "PUBSUB SHARDNUMSUB %s", channel);
        listens |= r != NULL && r->type == REDIS_REPLY_ARRAY
                   && r->elements == 2 && r->element[1]->integer > 0;
        freeReplyObject(r);
    }
    return listens;
}

static void a_waiter_is_woken_by_the_release(void **state)
{
    waiter *const w = &the_waiter;
    dlock_acquire_opts o;
    dlock_lock *l;
    int64_t released_ms, after_ms;

    (void)state;
    memset(w, 0, sizeof(*w));
    w->key = "cc:wake";
    dlock_acquire_opts_init(&o);
    o.ttl_ms = 30000;
    TK_EXPECT_ERR(dlock_acquire(clients[0], w->key, &o, &w->held), DLOCK_OK,
                  clients[0], "the holder acquires");
    TK_EXPECT(pthread_create(&w->thread, NULL, wait_for_key, w) == 0,
              "the waiter starts");
    w->running = 1;
    TK_EXPECT(testkit_wait_until(someone_listens, "dlock:released:cc:wake",
                                 10000),
              "the waiter subscribes to the release channel");
    released_ms = testkit_now_ms();
    l = w->held;
    w->held = NULL; /* the release frees it, whatever it returns */
    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, clients[0],
                  "the holder releases");
    pthread_join(w->thread, NULL);
    w->running = 0;
    after_ms = w->got_ms - released_ms;
    printf("# cluster: the waiter had the lock %" PRId64
           " ms after the release\n",
           after_ms);
    TK_EXPECT(w->err == DLOCK_OK, "the waiter got the lock: %s",
              dlock_strerror(w->err));
    /* Without the notification its next try comes seconds later (the
     * fallback follows the holder's 30 s TTL, at most 10 s apart). */
    TK_EXPECT(after_ms < 2000, "woken by the release (%" PRId64 " ms)",
              after_ms);
}

/* ---- the watchdog, reentrancy and the patterns -------------------------- */

#define WATCHED 24

typedef struct renewals_probe {
    unsigned long long target;
} renewals_probe;

static int renewed_enough(void *arg)
{
    renewals_probe *p = arg;
    dlock_client_stats s;

    dlock_client_stats_get(clients[0], &s);
    return s.renewals >= p->target;
}

static void the_watchdog_renews_on_every_master(void **state)
{
    dlock_lock *locks[WATCHED];
    int masters[3] = {0}, nmasters = 0;
    dlock_client_stats s;
    renewals_probe p;
    dlock_acquire_opts o;

    (void)state;
    dlock_acquire_opts_init(&o);
    o.ttl_ms = 600;
    o.watchdog = 1;
    dlock_client_stats_get(clients[0], &s);
    p.target = s.renewals + 3 * WATCHED;
    for (int i = 0; i < WATCHED; i++) {
        char key[32];
        int master;

        snprintf(key, sizeof(key), "cc:watched:%d", i);
        TK_EXPECT_ERR(dlock_acquire(clients[0], key, &o, &locks[i]), DLOCK_OK,
                      clients[0], key);
        master = scalekit_cluster_master_of(any_port, slot_of(key));
        for (int j = 0; j < nmasters && master > 0; j++)
            if (masters[j] == master)
                master = 0;
        if (master > 0 && nmasters < 3)
            masters[nmasters++] = master;
    }
    TK_EXPECT(nmasters == 3, "the keys are on all three masters (%d)",
              nmasters);
    TK_EXPECT(testkit_wait_until(renewed_enough, &p, 10000),
              "each lock was renewed several times");
    for (int i = 0; i < WATCHED; i++) {
        TK_EXPECT(dlock_lock_valid_ms(locks[i]) > 0, "lock %d is valid", i);
        TK_EXPECT_ERR(dlock_release(locks[i]), DLOCK_OK, clients[0],
                      "a renewed lock is still ours at release");
    }
}

static void reentrant_locks_and_patterns_run_on_a_cluster(void **state)
{
    dlock_client *c = clients[0];
    dlock_acquire_opts o;
    dlock_lock *a, *b;
    dlock_semaphore *sem;
    dlock_permit *permit;
    dlock_rwlock *rw;
    dlock_leader *leader;
    dlock_once *once;
    dlock_idem *idem;
    dlock_ratelimit *rl;
    /* A single-flight's result and an idempotency record outlive the
     * case: fresh names, so that it runs again on a cluster kept up. */
    char once_key[TESTKIT_KEY_MAX], idem_key[TESTKIT_KEY_MAX];

    (void)state;
    testkit_key(once_key, "cc_once");
    testkit_key(idem_key, "cc_idem");
    {
        dlock_async *async = NULL;

        TK_EXPECT(dlock_async_new(c, &async) == DLOCK_INVALID && async == NULL,
                  "an async handle is refused on a cluster");
    }
    dlock_acquire_opts_init(&o);
    o.reentrant = 1;
    TK_EXPECT_ERR(dlock_acquire(c, "cc:re", &o, &a), DLOCK_OK, c, "re 1");
    TK_EXPECT_ERR(dlock_acquire(c, "cc:re", &o, &b), DLOCK_OK, c, "re 2");
    TK_EXPECT(a == b && dlock_lock_holds(a) == 2, "held twice");
    TK_EXPECT_ERR(dlock_release(b), DLOCK_OK, c, "inner release");
    TK_EXPECT_ERR(dlock_release(a), DLOCK_OK, c, "outer release");

    TK_EXPECT_ERR(dlock_semaphore_new(c, "cc:sem", 2, &sem), DLOCK_OK, c,
                  "semaphore");
    TK_EXPECT_ERR(dlock_semaphore_acquire(sem, 5000, 0, &permit), DLOCK_OK, c,
                  "permit");
    TK_EXPECT_ERR(dlock_semaphore_release(permit), DLOCK_OK, c, "permit back");
    dlock_semaphore_free(sem);

    TK_EXPECT_ERR(dlock_rwlock_acquire(c, "cc:rw", DLOCK_RWLOCK_WRITE, 5000, 0,
                                       &rw),
                  DLOCK_OK, c, "write lock");
    TK_EXPECT_ERR(dlock_rwlock_release(rw), DLOCK_OK, c, "write release");
    TK_EXPECT_ERR(dlock_rwlock_acquire(c, "cc:rw", DLOCK_RWLOCK_READ, 5000, 0,
                                       &rw),
                  DLOCK_OK, c, "read lock");
    TK_EXPECT_ERR(dlock_rwlock_release(rw), DLOCK_OK, c, "read release");

    TK_EXPECT_ERR(dlock_leader_new(c, "cc:leader", NULL, &leader), DLOCK_OK, c,
                  "candidate");
    TK_EXPECT_ERR(dlock_leader_campaign(leader, 0), DLOCK_OK, c, "campaign");
    TK_EXPECT(dlock_leader_is_leader(leader), "it leads");
    TK_EXPECT_ERR(dlock_leader_resign(leader), DLOCK_OK, c, "resign");
    dlock_leader_free(leader);

    TK_EXPECT_ERR(dlock_once_begin(c, once_key, NULL, &once), DLOCK_OK, c,
                  "single-flight");
    TK_EXPECT(dlock_once_status(once) == DLOCK_ONCE_LEADER, "it leads");
    TK_EXPECT_ERR(dlock_once_complete(once, "v", 1), DLOCK_OK, c, "complete");
    dlock_once_free(once);

    TK_EXPECT_ERR(dlock_idem_begin(c, idem_key, 5000, &idem), DLOCK_OK, c,
                  "idempotency record");
    TK_EXPECT_ERR(dlock_idem_complete(idem, "r", 1, 5000), DLOCK_OK, c,
                  "record complete");
    dlock_idem_free(idem);

    TK_EXPECT_ERR(dlock_ratelimit_new(c, "cc:rl", 10, 1000, 10, &rl), DLOCK_OK,
                  c, "rate limit");
    TK_EXPECT_ERR(dlock_ratelimit_take(rl, 1, NULL), DLOCK_OK, c, "take");
    dlock_ratelimit_free(rl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reentrant_locks_and_patterns_run_on_a_cluster),
        cmocka_unit_test_teardown(a_waiter_is_woken_by_the_release,
                                  end_waiter),
        cmocka_unit_test(the_watchdog_renews_on_every_master),
        cmocka_unit_test_teardown(locks_hold_through_migration_and_failover,
                                  end_run),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
