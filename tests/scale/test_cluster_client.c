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

/* Waits for the workers to have done n more operations. */
static void let_run(run *r, long n)
{
    ops_probe p = {.r = r, .target = atomic_load(&r->ops) + n};

    TK_EXPECT(testkit_wait_until(ops_reached, &p, 60000),
              "the workers made progress (%ld operations)", p.target);
}

/* Fails over the master on port: CLUSTER FAILOVER on its replica, or a
 * SIGKILL; waits until the replica serves slot; returns the ms taken. */
static int64_t fail_over(unsigned slot, int master, int kill_it)
{
    master_probe p = {.slot = slot};
    int64_t start;
    char url[64];

    p.port = scalekit_cluster_replica_of(any_port, master);
    start = testkit_now_ms();
    if (kill_it) {
        TK_EXPECT(scalekit_signal_node("cluster", master, SIGKILL) > 0,
                  "master %d is killed", master);
        if (master == any_port)
            any_port = p.port;
    } else {
        redisReply *rep = testkit_redis_cmd(scalekit_node_url(p.port, url,
                                                              sizeof(url)),
                                            "CLUSTER FAILOVER");

        TK_EXPECT(rep != NULL && rep->type == REDIS_REPLY_STATUS,
                  "CLUSTER FAILOVER on %d", p.port);
        freeReplyObject(rep);
    }
    TK_EXPECT(testkit_wait_until(slot_served_by, &p, 30000),
              "replica %d serves slot %u", p.port, slot);
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

    let_run(r, r->nkeys / 8);
    start = testkit_now_ms();
    moved = scalekit_cluster_migrate_slot(any_port, hot, to);
    migrated_ms = testkit_now_ms() - start;
    let_run(r, r->nkeys / 8);
    manual_ms = fail_over(hot, to, 0);
    if (long_form) {
        let_run(r, r->nkeys / 8);
        killed_ms = fail_over(hot, scalekit_cluster_master_of(any_port, hot),
                              1);
    }
    let_run(r, r->nkeys / 8);
    printf("# cluster: slot %u (%d keys) migrated %d -> %d in %" PRId64
           " ms; CLUSTER FAILOVER served again in %" PRId64 " ms",
           hot, moved, from, to, migrated_ms, manual_ms);
    if (killed_ms >= 0)
        printf("; a killed master's slots in %" PRId64 " ms", killed_ms);
    printf("\n");
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

static void locks_hold_through_migration_and_failover(void **state)
{
    run r = {.nkeys = long_form ? 10000 : 2000};
    pthread_t threads[CLIENTS * THREADS_PER_CLIENT], chaos_thread;
    worker workers[CLIENTS * THREADS_PER_CLIENT];
    int64_t start = testkit_now_ms();

    (void)state;
    r.holders = calloc((size_t)r.nkeys + 1, sizeof(*r.holders));
    TK_EXPECT(r.holders != NULL, "checker counters allocated");
    pthread_mutex_init(&r.mu, NULL);
    for (int i = 0; i < CLIENTS * THREADS_PER_CLIENT; i++) {
        workers[i] = (worker){&r, clients[i % CLIENTS], i};
        TK_EXPECT(pthread_create(&threads[i], NULL, work, &workers[i]) == 0,
                  "worker %d starts", i);
    }
    TK_EXPECT(pthread_create(&chaos_thread, NULL, chaos, &r) == 0,
              "the chaos thread starts");
    pthread_join(chaos_thread, NULL);
    for (int i = 0; i < CLIENTS * THREADS_PER_CLIENT; i++)
        pthread_join(threads[i], NULL);
    printf("# cluster: %d keys over %d slots, %ld acquires in %" PRId64
           " ms: %ld granted, %ld busy, %ld unavailable while failing over, "
           "%ld found lost, %ld overlaps of valid locks\n",
           r.nkeys, slots_covered(r.nkeys), atomic_load(&r.ops),
           testkit_now_ms() - start, atomic_load(&r.granted),
           atomic_load(&r.busy), atomic_load(&r.unavailable),
           atomic_load(&r.lost), atomic_load(&r.overlaps));
    TK_EXPECT(atomic_load(&r.overlaps) == 0, "no two holders of a valid lock");
    TK_EXPECT(atomic_load(&r.unexpected) == 0, "no unexpected error (%s)",
              r.unexpected_msg);
    /* A migration keeps TTLs and CLUSTER FAILOVER waits for the replica:
     * only a killed master (the long form) may lose a grant. */
    TK_EXPECT(long_form || atomic_load(&r.lost) == 0, "no lock lost (%ld)",
              atomic_load(&r.lost));
    TK_EXPECT(atomic_load(&r.granted) >= r.nkeys,
              "every key was granted at least once overall");
    pthread_mutex_destroy(&r.mu);
    free(r.holders);
    if (long_form)
        TK_EXPECT(scalekit_group_url("cluster") != NULL,
                  "the killed node comes back");
}

/* ---- the release notification ------------------------------------------ */

typedef struct waiter {
    const char *key;
    dlock_err err;
    int64_t got_ms; /* testkit_now_ms when the acquire returned */
} waiter;

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
    waiter w = {.key = "cc:wake"};
    dlock_acquire_opts o;
    dlock_lock *l = NULL;
    int64_t released_ms, after_ms;
    pthread_t t;

    (void)state;
    dlock_acquire_opts_init(&o);
    o.ttl_ms = 30000;
    TK_EXPECT_ERR(dlock_acquire(clients[0], w.key, &o, &l), DLOCK_OK,
                  clients[0], "the holder acquires");
    TK_EXPECT(pthread_create(&t, NULL, wait_for_key, &w) == 0,
              "the waiter starts");
    TK_EXPECT(testkit_wait_until(someone_listens, "dlock:released:cc:wake",
                                 10000),
              "the waiter subscribes to the release channel");
    released_ms = testkit_now_ms();
    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, clients[0],
                  "the holder releases");
    pthread_join(t, NULL);
    after_ms = w.got_ms - released_ms;
    printf("# cluster: the waiter had the lock %" PRId64
           " ms after the release\n",
           after_ms);
    TK_EXPECT(w.err == DLOCK_OK, "the waiter got the lock: %s",
              dlock_strerror(w.err));
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

    (void)state;
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

    TK_EXPECT_ERR(dlock_once_begin(c, "cc:once", NULL, &once), DLOCK_OK, c,
                  "single-flight");
    TK_EXPECT(dlock_once_status(once) == DLOCK_ONCE_LEADER, "it leads");
    TK_EXPECT_ERR(dlock_once_complete(once, "v", 1), DLOCK_OK, c, "complete");
    dlock_once_free(once);

    TK_EXPECT_ERR(dlock_idem_begin(c, "cc:idem", 5000, &idem), DLOCK_OK, c,
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
        cmocka_unit_test(a_waiter_is_woken_by_the_release),
        cmocka_unit_test(the_watchdog_renews_on_every_master),
        cmocka_unit_test(locks_hold_through_migration_and_failover),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
