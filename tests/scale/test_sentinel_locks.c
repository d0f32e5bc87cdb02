/*
 * test_sentinel_locks.c: the public API on a Sentinel URL, on
 * scripts/stack's sentinel group (a master, two replicas, three
 * sentinels).
 *
 *   - dlock_client_new takes redis+sentinel://.../dlock, and a lock with
 *     its watchdog is taken, renewed and released on the master;
 *   - keys deleted on the master itself: an extend and releases answer
 *     DLOCK_LOST, and the watchdog believes the second "not held" (after
 *     looking the master up again, and with a ROLE behind it saying
 *     master), not renewing until its lease runs out;
 *   - with ?wait_replicas=1 grants and watchdog renewals wait for a
 *     replica; asking for 3 of 2 replicas gives DLOCK_UNREPLICATED and
 *     the grant is released;
 *   - 4 threads share one lock without overlap;
 *   - an async handle (dlock/async.h) takes and releases a lock on the
 *     master, and a client with wait_replicas is refused one;
 *   - the master is killed (SIGKILL by its pid file): locking resumes on
 *     the promoted replica by itself, and the time from the kill to the
 *     first new grant is printed, and every lock granted with a replica's
 *     acknowledgement before the kill is still held by its owner on the
 *     new master; scripts/stack up sentinel then brings
 *     the old master back as a replica;
 *   - an async handle across SENTINEL FAILOVER, its old master made a
 *     replica of the new one without closing its clients: what it sends
 *     there is answered READONLY, so nothing is granted, extended or
 *     released; the handle closes (fd -1, one failure in the breaker) and
 *     dlock_async_reconnect reaches the new master, where the locks taken
 *     before the failover (replicated) extend and release, and one whose
 *     key the new master lacks answers DLOCK_LOST, never DLOCK_OK;
 *     before that, the old master loses some keys the new one holds and
 *     is made a replica that cannot sync: a blocking release and
 *     extend and an async extend and release sent there (connections
 *     kept from before the failover) answer DLOCK_OK (done on the new
 *     master) or DLOCK_UNAVAILABLE, never DLOCK_LOST, and the released
 *     keys are gone from the new master; a watchdog lock renewed there
 *     is not marked lost, and its renewals reach the new master; a grant
 *     with WAIT there (READONLY, its WAIT refused too) follows to the new
 *     master (dm_check);
 *   - a cluster URL whose seeds do not answer fails DLOCK_UNAVAILABLE,
 *     saying the slot map could not be read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlock/async.h"
#include "dlock/dlock.h"
#include "scalekit.h"
#include "testkit.h"

static const char *url;
static dlock_client *client;
/* The same master, each grant and renewal acknowledged by a replica. */
static dlock_client *acked;

/* A client on url with extra URL parameters (NULL on failure). */
static dlock_client *client_with(const char *params, int wait_replicas)
{
    dlock_client_opts o;
    dlock_client *c = NULL;
    char u[1024], err[512];

    snprintf(u, sizeof(u), "%s%s", url, params);
    dlock_client_opts_init(&o);
    o.connect_timeout_ms = 1000;
    o.io_timeout_ms = 1000;
    o.wait_replicas = wait_replicas;
    if (dlock_client_new(u, &o, &c, err, sizeof(err)) != DLOCK_OK)
        fprintf(stderr, "dlock_client_new(%s): %s\n", u, err);
    return c;
}

static int setup(void **state)
{
    dlock_client_opts o;
    char err[512];

    (void)state;
    url = scalekit_group_url("sentinel");
    if (url == NULL)
        return -1;
    dlock_client_opts_init(&o);
    o.connect_timeout_ms = 1000;
    o.io_timeout_ms = 1000;
    if (dlock_client_new(url, &o, &client, err, sizeof(err)) != DLOCK_OK) {
        fprintf(stderr, "dlock_client_new(%s): %s\n", url, err);
        return -1;
    }
    acked = client_with("?wait_replicas=1&wait_timeout=1000", 0);
    return acked != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_free(client);
    dlock_client_free(acked);
    scalekit_group_done();
    return 0;
}

static void a_lock_is_taken_renewed_and_released(void **state)
{
    dlock_acquire_opts o;
    dlock_lock *l = NULL;

    (void)state;
    dlock_acquire_opts_init(&o);
    o.ttl_ms = 3000;
    o.watchdog = 1;
    TK_EXPECT(dlock_acquire(client, "t:sentinel:first", &o, &l) == DLOCK_OK,
              "acquired: %s", dlock_client_errmsg(client));
    TK_EXPECT(dlock_extend(l, 3000) == DLOCK_OK, "extended: %s",
              dlock_client_errmsg(client));
    TK_EXPECT(dlock_lock_valid_ms(l) > 0, "valid");
    TK_EXPECT(dlock_release(l) == DLOCK_OK, "released: %s",
              dlock_client_errmsg(client));
}

static int master_port(void);

/* 1 once the lock (arg) is marked lost. */
static int marked_lost(void *arg)
{
    return dlock_lock_lost(arg);
}

/* EVALs the server on port has run (INFO commandstats), or -1.  The
 * watchdog renews with EVAL; the blocking paths use EVALSHA. */
static long long evals_run(int port)
{
    char u[64];
    redisReply *r = testkit_redis_cmd(scalekit_node_url(port, u, sizeof(u)),
                                      "INFO commandstats");
    const char *at = r != NULL && r->type == REDIS_REPLY_STRING
                         ? strstr(r->str, "cmdstat_eval:calls=")
                         : NULL;
    long long n = at != NULL ? atoll(at + strlen("cmdstat_eval:calls=")) : -1;

    freeReplyObject(r);
    return n;
}

/*
 * A key deleted on the master itself: the "not held" answers come from a
 * master (ROLE says so), so the loss is true and each path must report it:
 * an extend and a release DLOCK_LOST, and the watchdog (which doubts a
 * first "not held", looks the master up again and believes the second
 * once a ROLE sent behind it on the same connection says master) marks
 * its lock lost after those two renewals, not by renewing until the lease
 * runs out.  The other side of the demoted-master cases below, where
 * the same answer from a replica's copy must not be believed.
 */
static void a_key_gone_from_the_master_is_lost(void **state)
{
    dlock_acquire_opts o;
    dlock_lock *ext = NULL, *rel = NULL, *wd = NULL;
    dlock_client *own = client_with("", 0);
    char keys[3][TESTKIT_KEY_MAX], u[64];
    int master = master_port();
    long long evals;

    (void)state;
    TK_EXPECT(master > 0 && own != NULL,
              "the sentinels name a master; a client of its own");
    for (int i = 0; i < 3; i++)
        testkit_key(keys[i], "sentinel:gone");
    dlock_acquire_opts_init(&o);
    o.ttl_ms = 30000;
    TK_EXPECT(dlock_acquire(client, keys[0], &o, &ext) == DLOCK_OK
                  && dlock_acquire(client, keys[1], &o, &rel) == DLOCK_OK,
              "two locks: %s", dlock_client_errmsg(client));
    TK_EXPECT(testkit_redis_int(scalekit_node_url(master, u, sizeof(u)),
                                "DEL %s %s", keys[0], keys[1])
                  == 2,
              "their keys deleted on the master %d", master);
    TK_EXPECT_ERR(dlock_extend(ext, 30000), DLOCK_LOST, client,
                  "an extend of a key gone from the master");
    TK_EXPECT_ERR(dlock_release(ext), DLOCK_LOST, client, "then its release");
    TK_EXPECT_ERR(dlock_release(rel), DLOCK_LOST, client,
                  "a release of a key gone from the master");

    /* The watchdog, on a client whose only traffic it is: renewed every
     * 3 s, retried every 900 ms after a failure until the lease ends. */
    o.ttl_ms = 9000;
    o.watchdog = 1;
    TK_EXPECT(dlock_acquire(own, keys[2], &o, &wd) == DLOCK_OK,
              "a lock with its watchdog: %s", dlock_client_errmsg(own));
    TK_EXPECT(testkit_redis_int(scalekit_node_url(master, u, sizeof(u)),
                                "DEL %s", keys[2])
                  == 1,
              "its key deleted on the master %d", master);
    evals = evals_run(master);
    TK_EXPECT(evals >= 0, "the master's EVAL count");
    TK_EXPECT(testkit_wait_until(marked_lost, wd, 30000),
              "the watchdog marks its lock lost");
    evals = evals_run(master) - evals;
    printf("# sentinel: renewals until a key gone from the master was "
           "believed gone: %lld\n",
           evals);
    TK_EXPECT(evals >= 1 && evals <= 3,
              "believed after the doubted answer and one more (a renewal "
              "may have been in flight at the DEL), not renewed until the "
              "lease ran out: %lld renewals",
              evals);
    TK_EXPECT_ERR(dlock_release(wd), DLOCK_LOST, own,
                  "and its release says so");
    dlock_client_free(own);
}

static uint64_t renewals(dlock_client *c)
{
    dlock_client_stats st;

    dlock_client_stats_get(c, &st);
    return st.renewals;
}

static int renewed_twice(void *arg)
{
    return renewals(acked) >= *(uint64_t *)arg + 2;
}

/* wait_replicas from the URL: grants and watchdog renewals acknowledged
 * by a replica; asking for more replicas than there are gives
 * DLOCK_UNREPLICATED, and the grant is released, never held. */
static void grants_wait_for_replicas(void **state)
{
    dlock_acquire_opts o;
    dlock_lock *l = NULL;
    dlock_lock_info info;
    dlock_client *three;
    uint64_t base;

    (void)state;
    dlock_acquire_opts_init(&o);
    o.ttl_ms = 600;
    o.watchdog = 1;
    TK_EXPECT(dlock_acquire(acked, "t:sentinel:acked", &o, &l) == DLOCK_OK,
              "acquired, acknowledged: %s", dlock_client_errmsg(acked));
    base = renewals(acked);
    TK_EXPECT(testkit_wait_until(renewed_twice, &base, 5000),
              "renewed twice, acknowledged");
    TK_EXPECT(!dlock_lock_lost(l) && dlock_release(l) == DLOCK_OK,
              "held until released: %s", dlock_client_errmsg(acked));
    three = client_with("?wait_timeout=100", 3);
    TK_EXPECT(three != NULL, "a client asking for 3 replicas");
    o.watchdog = 0;
    o.ttl_ms = 5000;
    TK_EXPECT(dlock_acquire(three, "t:sentinel:three", &o, &l)
                      == DLOCK_UNREPLICATED
                  && l == NULL,
              "2 replicas cannot acknowledge for 3: %s",
              dlock_client_errmsg(three));
    TK_EXPECT(strstr(dlock_client_errmsg(three), "released") != NULL,
              "the message says so: %s", dlock_client_errmsg(three));
    TK_EXPECT(dlock_inspect(client, "t:sentinel:three", &info) == DLOCK_OK
                  && !info.held,
              "and the grant was released");
    dlock_client_free(three);
}

typedef struct shared {
    atomic_int inside;
    atomic_int overlaps;
    atomic_int failures;
    long counter;
} shared;

/* What the async case's callbacks saw. */
static dlock_err async_err;
static dlock_lock *async_lock;
static int async_done;

static void async_acquired(dlock_async *a, dlock_err err, dlock_lock *l,
                           const char *msg, void *arg)
{
    (void)a;
    (void)arg;
    if (err != DLOCK_OK)
        fprintf(stderr, "async acquire: %s\n", msg);
    async_err = err;
    async_lock = l;
    async_done++;
}

static void async_released(dlock_async *a, dlock_err err, const char *msg,
                           void *arg)
{
    (void)a;
    (void)arg;
    if (err != DLOCK_OK)
        fprintf(stderr, "async release: %s\n", msg);
    async_err = err;
    async_done++;
}

/* Polls and processes a until want callbacks have run, for 10 s at most. */
static int async_drive(dlock_async *a, int want)
{
    int64_t until = testkit_now_ms() + 10000;

    while (async_done < want && testkit_now_ms() < until) {
        struct pollfd p = {.fd = dlock_async_fd(a), .events = POLLIN};

        if (dlock_async_events(a) & DLOCK_ASYNC_WRITE)
            p.events |= POLLOUT;
        poll(&p, 1, 50);
        dlock_async_process(a, DLOCK_ASYNC_READ);
    }
    return async_done >= want;
}

static void an_async_handle_locks_on_the_master(void **state)
{
    dlock_async *a = NULL, *refused = NULL;
    dlock_lock_info info;

    (void)state;
    TK_EXPECT(dlock_async_new(acked, &refused) == DLOCK_INVALID
                  && refused == NULL,
              "a client with wait_replicas is refused an async handle");
    TK_EXPECT(dlock_async_new(client, &a) == DLOCK_OK, "an async handle: %s",
              dlock_client_errmsg(client));
    async_done = 0;
    TK_EXPECT(dlock_async_acquire(a, "t:sentinel:async", NULL, async_acquired,
                                  NULL)
                  == DLOCK_OK,
              "queued: %s", dlock_async_errmsg(a));
    TK_EXPECT(async_drive(a, 1) && async_err == DLOCK_OK,
              "acquired on the master");
    TK_EXPECT(dlock_inspect(client, "t:sentinel:async", &info) == DLOCK_OK
                  && strcmp(info.token, dlock_lock_token(async_lock)) == 0,
              "the master holds the async lock's token");
    TK_EXPECT(dlock_async_release(a, async_lock, async_released, NULL)
                  == DLOCK_OK,
              "release queued: %s", dlock_async_errmsg(a));
    TK_EXPECT(async_drive(a, 2) && async_err == DLOCK_OK, "released");
    dlock_async_free(a);
}

static void *contender(void *arg)
{
    shared *s = arg;
    dlock_acquire_opts o;

    dlock_acquire_opts_init(&o);
    o.ttl_ms = 5000;
    o.wait_ms = 20000;
    for (int i = 0; i < 50; i++) {
        dlock_lock *l = NULL;

        if (dlock_acquire(client, "t:sentinel:exclusion", &o, &l)
            != DLOCK_OK) {
            atomic_fetch_add(&s->failures, 1);
            continue;
        }
        if (atomic_exchange(&s->inside, 1) != 0)
            atomic_fetch_add(&s->overlaps, 1);
        s->counter++;
        atomic_store(&s->inside, 0);
        (void)dlock_release(l);
    }
    return NULL;
}

static void threads_share_a_lock_without_overlap(void **state)
{
    shared s = {0};
    pthread_t t[4];

    (void)state;
    for (int i = 0; i < 4; i++)
        TK_EXPECT(pthread_create(&t[i], NULL, contender, &s) == 0, "thread %d",
                  i);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    TK_EXPECT(atomic_load(&s.failures) == 0 && atomic_load(&s.overlaps) == 0
                  && s.counter == 200,
              "200 grants, no overlap (failures %d, overlaps %d, %ld)",
              atomic_load(&s.failures), atomic_load(&s.overlaps), s.counter);
}

/* "redis://host:port/0" of the first sentinel of url, in buf. */
static const char *first_sentinel(char buf[64])
{
    const char *list = strstr(url, "://") + 3;

    snprintf(buf, 64, "redis://%.*s/0", (int)strcspn(list, ",/"), list);
    return buf;
}

static int master_port(void)
{
    char sentinel[64];
    redisReply *r;
    int port = -1;

    r = testkit_redis_cmd(first_sentinel(sentinel),
                          "SENTINEL GET-MASTER-ADDR-BY-NAME dlock");
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        port = atoi(r->element[1]->str);
    freeReplyObject(r);
    return port;
}

/* Succeeds once a new lock is granted (and released). */
static int granted(void *arg)
{
    dlock_acquire_opts o;
    dlock_lock *l = NULL;

    (void)arg;
    dlock_acquire_opts_init(&o);
    o.ttl_ms = 3000;
    if (dlock_acquire(client, "t:sentinel:after", &o, &l) != DLOCK_OK)
        return 0;
    (void)dlock_release(l);
    return 1;
}

/* Succeeds once the sentinel master_port asks names another master than
 * *arg. */
static int names_another_master(void *arg)
{
    const int now = master_port();

    return now > 0 && now != *(const int *)arg;
}

/* ---- an async handle across a failover ------------------------------- */

/* What one callback of the failover case saw (its arg). */
typedef struct outcome {
    int done;
    dlock_err err;
    dlock_lock *lock;
    char msg[512];
} outcome;

/* Callbacks that have run, over all outcomes. */
static int fo_done;

static void fo_note(outcome *o, dlock_err err, dlock_lock *l, const char *msg)
{
    o->done = 1;
    o->err = err;
    o->lock = l;
    snprintf(o->msg, sizeof(o->msg), "%s", msg);
    fo_done++;
}

static void fo_acquired(dlock_async *a, dlock_err err, dlock_lock *l,
                        const char *msg, void *arg)
{
    (void)a;
    fo_note(arg, err, l, msg);
}

static void fo_released(dlock_async *a, dlock_err err, const char *msg,
                        void *arg)
{
    (void)a;
    fo_note(arg, err, NULL, msg);
}

static void fo_extended(dlock_async *a, dlock_err err, dlock_lock *l,
                        const char *msg, void *arg)
{
    (void)a;
    fo_note(arg, err, l, msg);
}

/* Drives a until fo_done reaches want, for 10 s at most. */
static int fo_drive(dlock_async *a, int want)
{
    const int64_t until = testkit_now_ms() + 10000;

    while (fo_done < want && testkit_now_ms() < until)
        (void)dlock_async_poll(a, 50);
    return fo_done >= want;
}

/* Acquires key on a (TTL 60 s, no watchdog), failing the test if it is
 * not granted; returns the lock. */
static dlock_lock *fo_acquire(dlock_async *a, const char *key)
{
    static outcome o;
    dlock_acquire_opts opts;

    dlock_acquire_opts_init(&opts);
    opts.ttl_ms = 60000; /* outlives the failover */
    memset(&o, 0, sizeof(o));
    fo_done = 0;
    TK_EXPECT(dlock_async_acquire(a, key, &opts, fo_acquired, &o) == DLOCK_OK,
              "acquire of %s queued: %s", key, dlock_async_errmsg(a));
    TK_EXPECT(fo_drive(a, 1) && o.err == DLOCK_OK, "%s acquired: %s", key,
              o.msg);
    return o.lock;
}

/* 1 if the server on port holds key with token as its value (token NULL:
 * holds no key). */
static int holds(int port, const char *key, const char *token)
{
    char u[64];
    redisReply *r = testkit_redis_cmd(scalekit_node_url(port, u, sizeof(u)),
                                      "GET %s", key);
    int same = r != NULL
               && (token == NULL ? r->type == REDIS_REPLY_NIL
                                 : r->type == REDIS_REPLY_STRING
                                       && strcmp(r->str, token) == 0);

    freeReplyObject(r);
    return same;
}

/* A key on the server on port. */
typedef struct key_on {
    int port;
    const char *key;
} key_on;

/* 1 once the server holds no such key (*arg: key_on). */
static int key_gone(void *arg)
{
    const key_on *k = arg;

    return holds(k->port, k->key, NULL);
}

#define FO_LOCKS 5
/* The locks of the demoted-copy checks (dm_check), taken with them. */
#define DM_LOCKS 5

/* The master and the locks the failover case took on it (n of them). */
typedef struct fo_before {
    int master;
    int n;
    dlock_lock *locks[FO_LOCKS + DM_LOCKS];
} fo_before;

/* 1 once every replica the master lists (at least two) holds every lock
 * of *arg (fo_before) for its owner. */
static int replicated(void *arg)
{
    const fo_before *b = arg;
    char u[64];
    redisReply *r = testkit_redis_cmd(scalekit_node_url(b->master, u,
                                                        sizeof(u)),
                                      "ROLE");
    int all = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 3
              && r->element[2]->type == REDIS_REPLY_ARRAY
              && r->element[2]->elements >= 2;

    for (size_t i = 0; all && i < r->element[2]->elements; i++) {
        const redisReply *rep = r->element[2]->element[i];
        const int port = rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2
                             ? atoi(rep->element[1]->str)
                             : -1;

        for (int k = 0; all && k < b->n; k++)
            all = port > 0
                  && holds(port, dlock_lock_key(b->locks[k]),
                           dlock_lock_token(b->locks[k]));
    }
    freeReplyObject(r);
    return all;
}

/* 1 once a sentinel has taken SENTINEL FAILOVER (a replica that was just
 * restarted may not count as a candidate for a moment: NOGOODSLAVE). */
static int failover_started(void *arg)
{
    char sentinel[64];
    redisReply *r;
    int ok;

    (void)arg;
    r = testkit_redis_cmd(first_sentinel(sentinel), "SENTINEL FAILOVER dlock");
    ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    if (!ok)
        fprintf(stderr, "SENTINEL FAILOVER: %s\n",
                r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : "?");
    freeReplyObject(r);
    if (!ok)
        usleep(200000);
    return ok;
}

/* 1 if the sentinel at sentinel_url names the master on port and has no
 * failover in progress (SENTINEL MASTER's flags are "master" alone). */
static int settled_on(const char *sentinel_url, int port)
{
    redisReply *r = testkit_redis_cmd(sentinel_url, "SENTINEL MASTER dlock");
    int flags = 0, same_port = 0;

    for (size_t i = 0;
         r != NULL && r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements;
         i += 2) {
        const char *field = r->element[i]->str,
                   *value = r->element[i + 1]->str;

        if (field == NULL || value == NULL)
            continue;
        if (strcmp(field, "flags") == 0)
            flags = strcmp(value, "master") == 0;
        else if (strcmp(field, "port") == 0)
            same_port = atoi(value) == port;
    }
    freeReplyObject(r);
    return flags && same_port;
}

/* 1 once every sentinel of url names the master on *arg (a port) with no
 * failover in progress: SENTINEL GET-MASTER-ADDR-BY-NAME names a promoted
 * replica at once, and +switch-master comes when its failover ends, which
 * a later test must not take for a switch of its own. */
static int failover_ended(void *arg)
{
    const char *p = strstr(url, "://") + 3;
    int all = 1;

    while (all && *p != '\0' && *p != '/') {
        const size_t n = strcspn(p, ",/");
        char sentinel[128];

        snprintf(sentinel, sizeof(sentinel), "redis://%.*s/0", (int)n, p);
        all = settled_on(sentinel, *(const int *)arg);
        p += n;
        if (*p == ',')
            p++;
    }
    if (!all)
        usleep(100000);
    return all;
}

/* ---- a demoted master that answers from its copy -------------------- */

/* What dm_check uses: two blocking clients of one pooled connection each
 * (so that it stays on the old master), an async handle of a third. */
typedef struct dm_state {
    dlock_client *bc[3]; /* bc[2] waits for a replica */
    dlock_client *own;
    dlock_async *a;
    dlock_lock **locks; /* DM_LOCKS, in fo_before */
    char keys[DM_LOCKS][TESTKIT_KEY_MAX];
} dm_state;

enum { DM_REL, DM_EXT, DM_AEXT, DM_AREL, DM_WD };

/* The old master's port while it has a wrong masterauth (dm_check), so
 * that a failed case leaves it able to sync (restore_masterauth); 0 when
 * none. */
static int wrong_auth_port;

/* A client of url with a pool of one connection (NULL on failure). */
static dlock_client *pool_of_one(int wait_replicas)
{
    dlock_client_opts o;
    dlock_client *c = NULL;
    char err[512];

    dlock_client_opts_init(&o);
    o.connect_timeout_ms = 1000;
    o.io_timeout_ms = 1000;
    o.pool_size = 1;
    o.wait_replicas = wait_replicas;
    o.wait_timeout_ms = 1000;
    if (dlock_client_new(url, &o, &c, err, sizeof(err)) != DLOCK_OK)
        fprintf(stderr, "dlock_client_new(%s): %s\n", url, err);
    return c;
}

/* Takes dm's locks on the master, before the failover: one for each
 * blocking client (TTL 30 s, no watchdog), two on the handle. */
static void dm_take(dm_state *dm, dlock_lock **locks)
{
    dlock_acquire_opts o;

    dm->locks = locks;
    for (int i = 0; i < 3; i++)
        dm->bc[i] = pool_of_one(i == 2);
    dm->own = client_with("", 0);
    TK_EXPECT(dm->bc[0] != NULL && dm->bc[1] != NULL && dm->bc[2] != NULL
                  && dm->own != NULL,
              "four clients of their own");
    TK_EXPECT(dlock_async_new(dm->own, &dm->a) == DLOCK_OK,
              "an async handle: %s", dlock_client_errmsg(dm->own));
    for (int i = 0; i < DM_LOCKS; i++)
        testkit_key(dm->keys[i], "sentinel:demoted-copy");
    dlock_acquire_opts_init(&o);
    o.ttl_ms = 30000;
    for (int i = DM_REL; i <= DM_EXT; i++)
        TK_EXPECT(dlock_acquire(dm->bc[i], dm->keys[i], &o, &locks[i])
                      == DLOCK_OK,
                  "blocking lock %d: %s", i, dlock_client_errmsg(dm->bc[i]));
    for (int i = DM_AEXT; i <= DM_AREL; i++)
        locks[i] = fo_acquire(dm->a, dm->keys[i]);
    /* Renewed every 10 s, on the renewer's connection: a TTL long enough
     * that a slow machine cannot let it run out while the watchdog
     * follows the failover (it would then be lost, rightly). */
    o.ttl_ms = 30000;
    o.watchdog = 1;
    TK_EXPECT(dlock_acquire(dm->bc[0], dm->keys[DM_WD], &o, &locks[DM_WD])
                  == DLOCK_OK,
              "a lock with its watchdog: %s", dlock_client_errmsg(dm->bc[0]));
    o.watchdog = 0;
    {
        dlock_lock *lk = NULL;

        o.ttl_ms = 3000;
        TK_EXPECT(dlock_acquire(dm->bc[2], "t:sentinel:demoted-wait", &o, &lk)
                          == DLOCK_OK
                      && dlock_release(lk) == DLOCK_OK,
                  "a grant that waits for a replica, on the old master: %s",
                  dlock_client_errmsg(dm->bc[2]));
    }
}

/* 1 if the server on port gives key a PTTL above min_ms. */
static int pttl_above(int port, const char *key, long long min_ms)
{
    char u[64];

    return testkit_redis_int(scalekit_node_url(port, u, sizeof(u)), "PTTL %s",
                             key)
           > min_ms;
}

/*
 * The old master (port old), a new one promoted (port now), with dm's
 * locks held on both: their keys are deleted on the old master, which is
 * then made a replica of the new one that cannot sync (a wrong
 * masterauth), so it keeps answering from a copy that lacks them, as a
 * demoted master that has not caught up does.  The release and extend scripts
 * write nothing when the key lacks their token, so that replica answers
 * them 0, never READONLY.  Over connections still on it, a blocking
 * release and extend, and an async extend and release, must answer
 * DLOCK_OK (done on the new master) or DLOCK_UNAVAILABLE, never
 * DLOCK_LOST: the locks are held on the new master.  The released keys
 * are then gone from it (at once, or by the background release), and the
 * extended ones have their new TTL there.
 */
static void dm_check(dm_state *dm, int old, int now)
{
    static outcome out[2];
    dlock_lock **l = dm->locks;
    char u[64];
    key_on gone;
    redisReply *r;
    dlock_err err;
    int wd_kept;

    /* The watchdog renewed its lock on the old master after the new one
     * was promoted, and those renewals never reached the new master
     * (replication is asynchronous): the key's TTL there runs from the
     * last renewal before the promotion, so on a slow run it can expire
     * before the watchdog follows the failover, and the lock is then
     * truly lost.  The case is about the demoted master's "not held", so
     * the new master's copy gets the TTL those renewals would have given
     * it, if it is still there. */
    wd_kept = testkit_redis_int(scalekit_node_url(now, u, sizeof(u)),
                                "PEXPIRE %s 120000", dm->keys[DM_WD])
              == 1;

    TK_EXPECT(testkit_redis_int(scalekit_node_url(old, u, sizeof(u)),
                                "DEL %s %s %s %s %s", dm->keys[0], dm->keys[1],
                                dm->keys[2], dm->keys[3], dm->keys[4])
                  == DM_LOCKS,
              "the old master %d loses its copies of the %d keys", old,
              DM_LOCKS);
    /* A replica of the new master that cannot sync (a password the new
     * master does not take): the sentinels find it configured as they
     * want, so they leave its clients alone. */
    wrong_auth_port = old;
    r = testkit_redis_cmd(scalekit_node_url(old, u, sizeof(u)),
                          "CONFIG SET masterauth dlock-test-wrong");
    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS,
              "the old master %d is given a wrong masterauth", old);
    freeReplyObject(r);
    r = testkit_redis_cmd(scalekit_node_url(old, u, sizeof(u)),
                          "REPLICAOF 127.0.0.1 %d", now);
    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS,
              "the old master %d is made a replica that does not catch up",
              old);
    freeReplyObject(r);
    for (int i = 0; i < DM_LOCKS; i++)
        TK_EXPECT((i == DM_WD && !wd_kept)
                      || holds(now, dlock_lock_key(l[i]),
                               dlock_lock_token(l[i])),
                  "the new master %d holds lock %d", now, i);

    gone.port = now;
    gone.key = dm->keys[DM_REL];
    err = dlock_release(l[DM_REL]);
    TK_EXPECT(err == DLOCK_OK || err == DLOCK_UNAVAILABLE,
              "a blocking release on the demoted master is not claimed "
              "lost: %s (%s)",
              dlock_strerror(err), dlock_client_errmsg(dm->bc[DM_REL]));
    l[DM_REL] = NULL;
    printf("# sentinel: blocking release over the demoted master: %s\n",
           dlock_strerror(err));
    TK_EXPECT(testkit_wait_until(key_gone, &gone, 15000),
              "the released key is gone from the new master");

    err = dlock_extend(l[DM_EXT], 90000);
    TK_EXPECT(err == DLOCK_OK || err == DLOCK_UNAVAILABLE,
              "a blocking extend on the demoted master is not claimed "
              "lost: %s (%s)",
              dlock_strerror(err), dlock_client_errmsg(dm->bc[DM_EXT]));
    printf("# sentinel: blocking extend over the demoted master: %s\n",
           dlock_strerror(err));
    TK_EXPECT(err != DLOCK_OK
                  || pttl_above(now, dlock_lock_key(l[DM_EXT]), 60000),
              "the extend reached the new master");
    TK_EXPECT(dlock_release(l[DM_EXT]) == DLOCK_OK,
              "then released on the new master: %s",
              dlock_client_errmsg(dm->bc[DM_EXT]));
    TK_EXPECT(holds(now, dm->keys[DM_EXT], NULL),
              "its key is gone from the new master");
    l[DM_EXT] = NULL;

    memset(out, 0, sizeof(out));
    fo_done = 0;
    TK_EXPECT(
        dlock_async_extend(dm->a, l[DM_AEXT], 90000, fo_extended, &out[0])
                == DLOCK_OK
            && dlock_async_release(dm->a, l[DM_AREL], fo_released, &out[1])
                   == DLOCK_OK,
        "an async extend and release queued: %s", dlock_async_errmsg(dm->a));
    TK_EXPECT(fo_drive(dm->a, 2), "both completed");
    for (int i = 0; i < 2; i++)
        TK_EXPECT(out[i].err == DLOCK_OK || out[i].err == DLOCK_UNAVAILABLE,
                  "async %s on the demoted master is not claimed lost: %s "
                  "(%s)",
                  i == 0 ? "extend" : "release", dlock_strerror(out[i].err),
                  out[i].msg);
    printf("# sentinel: async extend / release over the demoted master: "
           "%s / %s\n",
           dlock_strerror(out[0].err), dlock_strerror(out[1].err));
    l[DM_AREL] = NULL;
    gone.key = dm->keys[DM_AREL];
    TK_EXPECT(testkit_wait_until(key_gone, &gone, 15000),
              "the async released key is gone from the new master");
    if (dlock_async_fd(dm->a) < 0)
        TK_EXPECT(dlock_async_reconnect(dm->a) == DLOCK_OK, "reconnected: %s",
                  dlock_async_errmsg(dm->a));
    memset(out, 0, sizeof(out));
    fo_done = 0;
    TK_EXPECT(dlock_async_extend(dm->a, l[DM_AEXT], 90000, fo_extended,
                                 &out[0])
                      == DLOCK_OK
                  && fo_drive(dm->a, 1) && out[0].err == DLOCK_OK,
              "the async lock extends on the new master: %s (%s)",
              dlock_strerror(out[0].err), out[0].msg);
    TK_EXPECT(pttl_above(now, dlock_lock_key(l[DM_AEXT]), 60000),
              "with its new TTL there");
    memset(out, 0, sizeof(out));
    fo_done = 0;
    TK_EXPECT(dlock_async_release(dm->a, l[DM_AEXT], fo_released, &out[0])
                      == DLOCK_OK
                  && fo_drive(dm->a, 1) && out[0].err == DLOCK_OK,
              "and releases there: %s (%s)", dlock_strerror(out[0].err),
              out[0].msg);
    l[DM_AEXT] = NULL;

    /* The watchdog's next renewal, on its connection still on the
     * demoted master, is answered "not held" there: the lock must not be
     * marked lost, and the renewal must follow to the new master (its
     * 30 s TTL replaces the 120 s given above), where the lock is
     * released.  Waited for, bounded: two renewal periods and then some.
     * If the key had expired there before the case could keep it, the
     * lock is truly lost, and the watchdog must say so. */
    {
        const char *node = scalekit_node_url(now, u, sizeof(u));
        int64_t until = testkit_now_ms() + 45000;

        while (testkit_now_ms() < until && !dlock_lock_lost(l[DM_WD])) {
            long long pttl = testkit_redis_int(node, "PTTL %s",
                                               dm->keys[DM_WD]);

            if (wd_kept && pttl > 0 && pttl <= 60000)
                break; /* renewed there */
            usleep(100000);
        }
    }
    printf("# sentinel: a watchdog lock renewed over the demoted master: "
           "%s%s\n",
           dlock_lock_lost(l[DM_WD]) ? "lost" : "held",
           wd_kept ? "" : " (its key had expired on the new master)");
    if (wd_kept) {
        TK_EXPECT(!dlock_lock_lost(l[DM_WD]),
                  "the watchdog's lock is not claimed lost");
        TK_EXPECT(!pttl_above(now, dm->keys[DM_WD], 60000),
                  "its renewal reached the new master");
        TK_EXPECT(holds(now, dm->keys[DM_WD], dlock_lock_token(l[DM_WD])),
                  "and is held on the new master %d", now);
        TK_EXPECT(dlock_release(l[DM_WD]) == DLOCK_OK, "released: %s",
                  dlock_client_errmsg(dm->bc[0]));
    } else {
        TK_EXPECT(dlock_lock_lost(l[DM_WD]),
                  "a lock whose key expired on the new master is lost");
        TK_EXPECT(dlock_release(l[DM_WD]) == DLOCK_LOST,
                  "its release says so: %s", dlock_client_errmsg(dm->bc[0]));
    }
    l[DM_WD] = NULL;

    /* The old master may sync now. */
    r = testkit_redis_cmd(scalekit_node_url(old, u, sizeof(u)),
                          "CONFIG SET masterauth %s", "");
    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS,
              "the old master's masterauth is cleared");
    freeReplyObject(r);
    wrong_auth_port = 0;

    /* A grant that waits for a replica, on the connection still on the
     * demoted master: the acquire is answered READONLY there and its WAIT
     * is refused too; followed to the new master, it is granted (or
     * DLOCK_UNREPLICATED while that master has no replica yet). */
    {
        dlock_acquire_opts o;
        dlock_lock *lk = NULL;

        dlock_acquire_opts_init(&o);
        err = dlock_acquire(dm->bc[2], "t:sentinel:demoted-wait", &o, &lk);
        printf("# sentinel: a grant with WAIT over the demoted master: %s\n",
               dlock_strerror(err));
        TK_EXPECT(err == DLOCK_OK || err == DLOCK_UNREPLICATED,
                  "a grant with WAIT follows the failover: %s (%s)",
                  dlock_strerror(err), dlock_client_errmsg(dm->bc[2]));
        if (lk != NULL)
            TK_EXPECT(dlock_release(lk) == DLOCK_OK, "released: %s",
                      dlock_client_errmsg(dm->bc[2]));
    }
    dlock_async_free(dm->a);
    dlock_client_free(dm->own);
    for (int i = 0; i < 3; i++)
        dlock_client_free(dm->bc[i]);
}

/*
 * The handle's master is demoted under it.  SENTINEL FAILOVER promotes a
 * replica; the sentinels make the old master a replica of the new one some
 * seconds later (their +convert-to-slave), and kill its clients as they do,
 * which the handle would see as a broken connection.  The test demotes it
 * itself at once (REPLICAOF, which keeps the clients), so that the handle's
 * next commands reach a replica and are answered READONLY: the case where
 * a demoted master still answers.  It runs after the kill case, whose
 * first grant must succeed at once: a blocking client with a pooled
 * connection to the demoted master is answered READONLY there too (its
 * retry after a broken connection does not follow READONLY).
 */
static void an_async_handle_follows_a_failover(void **state)
{
    static outcome out[4];
    static dm_state dm;
    enum { KEPT, LOST_E, LOST_R, EXT_EARLY, REL_EARLY };
    char keys[FO_LOCKS + 2][TESTKIT_KEY_MAX], u[64];
    fo_before b = {0};
    key_on gone;
    dlock_client *own = client_with("", 0);
    dlock_client_stats st;
    dlock_async *a = NULL;
    uint64_t errors;
    int now;
    redisReply *r;

    (void)state;
    TK_EXPECT(own != NULL, "a client of its own");
    TK_EXPECT(dlock_async_new(own, &a) == DLOCK_OK, "an async handle: %s",
              dlock_client_errmsg(own));
    b.master = master_port();
    TK_EXPECT(b.master > 0, "the sentinels name a master");
    for (int i = 0; i < FO_LOCKS + 2; i++)
        testkit_key(keys[i], "sentinel:async-failover");
    for (int i = 0; i < FO_LOCKS; i++)
        b.locks[i] = fo_acquire(a, keys[i]);
    dm_take(&dm, b.locks + FO_LOCKS);
    b.n = FO_LOCKS + DM_LOCKS;
    TK_EXPECT(testkit_wait_until(replicated, &b, 30000),
              "both replicas hold the %d locks", b.n);

    TK_EXPECT(testkit_wait_until(failover_started, NULL, 30000),
              "SENTINEL FAILOVER is taken");
    TK_EXPECT(testkit_wait_until(names_another_master, &b.master, 30000),
              "a new master is named");
    now = master_port();
    dm_check(&dm, b.master, now);
    r = testkit_redis_cmd(scalekit_node_url(b.master, u, sizeof(u)),
                          "REPLICAOF 127.0.0.1 %d", now);
    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS,
              "the old master %d is made a replica of %d", b.master, now);
    freeReplyObject(r);
    TK_EXPECT(dlock_async_fd(a) >= 0, "the handle is still open");

    /* Three commands at once on the demoted master. */
    dlock_client_stats_get(own, &st);
    errors = st.transport_errors;
    memset(out, 0, sizeof(out));
    fo_done = 0;
    TK_EXPECT(dlock_async_acquire(a, keys[FO_LOCKS], NULL, fo_acquired,
                                  &out[0])
                      == DLOCK_OK
                  && dlock_async_extend(a, b.locks[EXT_EARLY], 60000,
                                        fo_extended, &out[1])
                         == DLOCK_OK
                  && dlock_async_release(a, b.locks[REL_EARLY], fo_released,
                                         &out[2])
                         == DLOCK_OK,
              "three commands queued: %s", dlock_async_errmsg(a));
    TK_EXPECT(fo_drive(a, 3), "all three completed");
    TK_EXPECT(out[0].err == DLOCK_UNAVAILABLE && out[0].lock == NULL,
              "no grant from a replica: %s (%s)", dlock_strerror(out[0].err),
              out[0].msg);
    TK_EXPECT(strstr(out[0].msg, "READONLY") != NULL,
              "the message says what came back: %s", out[0].msg);
    TK_EXPECT(out[1].err == DLOCK_UNAVAILABLE,
              "no extend claimed on a replica: %s (%s)",
              dlock_strerror(out[1].err), out[1].msg);
    TK_EXPECT(out[2].err == DLOCK_UNAVAILABLE,
              "no release claimed on a replica: %s (%s)",
              dlock_strerror(out[2].err), out[2].msg);
    TK_EXPECT(dlock_async_fd(a) == -1 && dlock_async_events(a) == 0,
              "the handle is closed");
    dlock_client_stats_get(own, &st);
    TK_EXPECT(st.transport_errors == errors + 1,
              "one failure in the breaker (%llu, was %llu)",
              (unsigned long long)st.transport_errors,
              (unsigned long long)errors);
    TK_EXPECT(holds(now, keys[FO_LOCKS], NULL),
              "the new master holds no such lock");
    /* What the sentinels do when they convert a master: its clients go
     * (the other clients' pooled connections, which the next case would
     * otherwise find on a replica). */
    freeReplyObject(
        testkit_redis_cmd(scalekit_node_url(b.master, u, sizeof(u)),
                          "CLIENT KILL TYPE normal"));

    /* The handle reaches the new master again. */
    TK_EXPECT(dlock_async_reconnect(a) == DLOCK_OK, "reconnected: %s",
              dlock_async_errmsg(a));
    TK_EXPECT(dlock_async_fd(a) >= 0, "the handle is open");
    {
        dlock_lock *l = fo_acquire(a, keys[FO_LOCKS + 1]);

        TK_EXPECT(holds(now, keys[FO_LOCKS + 1], dlock_lock_token(l)),
                  "a new grant is on the new master %d", now);
        memset(out, 0, sizeof(out));
        fo_done = 0;
        TK_EXPECT(dlock_async_release(a, l, fo_released, &out[0]) == DLOCK_OK
                      && fo_drive(a, 1) && out[0].err == DLOCK_OK,
                  "released: %s", out[0].msg);
    }
    /* The failed release's token is released in the background, there. */
    gone.port = now;
    gone.key = keys[REL_EARLY];
    TK_EXPECT(testkit_wait_until(key_gone, &gone, 15000),
              "the release that failed is done in the background");

    /* The locks taken before the failover, on the new master: two were
     * replicated; two lost their keys there (as if never replicated). */
    TK_EXPECT(testkit_redis_int(scalekit_node_url(now, u, sizeof(u)),
                                "DEL %s %s", keys[LOST_E], keys[LOST_R])
                  == 2,
              "two keys deleted on the new master");
    memset(out, 0, sizeof(out));
    fo_done = 0;
    TK_EXPECT(dlock_async_extend(a, b.locks[KEPT], 60000, fo_extended, &out[0])
                      == DLOCK_OK
                  && dlock_async_extend(a, b.locks[EXT_EARLY], 60000,
                                        fo_extended, &out[1])
                         == DLOCK_OK
                  && dlock_async_extend(a, b.locks[LOST_E], 60000, fo_extended,
                                        &out[2])
                         == DLOCK_OK
                  && dlock_async_release(a, b.locks[LOST_R], fo_released,
                                         &out[3])
                         == DLOCK_OK,
              "queued on the new master: %s", dlock_async_errmsg(a));
    TK_EXPECT(fo_drive(a, 4), "all four completed");
    TK_EXPECT(out[0].err == DLOCK_OK && out[1].err == DLOCK_OK,
              "the replicated locks extend there: %s / %s", out[0].msg,
              out[1].msg);
    TK_EXPECT(out[2].err == DLOCK_LOST,
              "an extend whose key is gone is DLOCK_LOST: %s (%s)",
              dlock_strerror(out[2].err), out[2].msg);
    TK_EXPECT(out[3].err == DLOCK_LOST,
              "a release whose key is gone is DLOCK_LOST: %s (%s)",
              dlock_strerror(out[3].err), out[3].msg);
    memset(out, 0, sizeof(out));
    fo_done = 0;
    TK_EXPECT(dlock_async_release(a, b.locks[KEPT], fo_released, &out[0])
                      == DLOCK_OK
                  && dlock_async_release(a, b.locks[EXT_EARLY], fo_released,
                                         &out[1])
                         == DLOCK_OK,
              "releases queued: %s", dlock_async_errmsg(a));
    TK_EXPECT(fo_drive(a, 2) && out[0].err == DLOCK_OK
                  && out[1].err == DLOCK_OK,
              "the replicated locks release there: %s / %s", out[0].msg,
              out[1].msg);
    TK_EXPECT(holds(now, keys[KEPT], NULL)
                  && holds(now, keys[EXT_EARLY], NULL),
              "their keys are gone from the new master");
    dlock_lock_free(b.locks[LOST_E]);
    dlock_async_free(a);
    dlock_client_free(own);
    TK_EXPECT(testkit_wait_until(failover_ended, &now, 60000),
              "the failover to %d ends on every sentinel", now);
}

#define ACKED_LOCKS 20

/* Takes ACKED_LOCKS locks on the client that waits for a replica. */
static void take_acked(dlock_lock **locks)
{
    dlock_acquire_opts o;

    dlock_acquire_opts_init(&o);
    o.ttl_ms = 60000; /* outlives the failover */
    for (int i = 0; i < ACKED_LOCKS; i++) {
        char key[64];

        /* Named for this process: a release is not waited for by a
         * replica, so a later failover (the other build's run of this
         * test) may bring back a master that still holds the last run's
         * keys until their TTL. */
        snprintf(key, sizeof(key), "t:sentinel:kept:%ld:%d", (long)getpid(),
                 i);
        TK_EXPECT(dlock_acquire(acked, key, &o, &locks[i]) == DLOCK_OK,
                  "acknowledged grant %d: %s", i, dlock_client_errmsg(acked));
    }
}

/* How many of locks the new master still holds for their owner; each
 * is released. */
static int still_held(dlock_lock **locks)
{
    int held = 0;

    for (int i = 0; i < ACKED_LOCKS; i++) {
        dlock_lock_info info;

        if (dlock_inspect(client, dlock_lock_key(locks[i]), &info) == DLOCK_OK
            && info.held
            && strcmp(info.token, dlock_lock_token(locks[i])) == 0)
            held++;
        (void)dlock_release(locks[i]);
    }
    return held;
}

static void locking_resumes_after_the_master_is_killed(void **state)
{
    int old = master_port(), now, kept;
    dlock_lock *locks[ACKED_LOCKS] = {0};
    int64_t killed, resumed;

    (void)state;
    TK_EXPECT(old > 0, "the sentinels name a master");
    TK_EXPECT(granted(NULL), "a grant before the failover: %s",
              dlock_client_errmsg(client));
    take_acked(locks);
    TK_EXPECT(scalekit_signal_node("sentinel", old, SIGKILL) > 0,
              "master %d is killed", old);
    killed = testkit_now_ms();
    TK_EXPECT(testkit_wait_until(granted, NULL, 30000),
              "locking resumes: "
              "%s",
              dlock_client_errmsg(client));
    resumed = testkit_now_ms() - killed;
    /* The client follows the sentinel that led the failover; the one
     * master_port asks may learn of it a moment later (its peers' hello
     * messages), so its answer is awaited, not read once. */
    (void)testkit_wait_until(names_another_master, &old, 30000);
    now = master_port();
    printf("# sentinel: locking resumed %" PRId64 " ms after master %d was "
           "killed (new master %d)\n",
           resumed, old, now);
    TK_EXPECT(now > 0 && now != old, "a new master (%d)", now);
    kept = still_held(locks);
    printf("# sentinel: %d of %d locks acknowledged by a replica before the "
           "kill are held by their owners on the new master\n",
           kept, ACKED_LOCKS);
    TK_EXPECT(kept == ACKED_LOCKS, "no acknowledged lock is lost");
    TK_EXPECT(scalekit_group_url("sentinel") != NULL,
              "the old master "
              "comes back as a replica");
    TK_EXPECT(granted(NULL), "and locking goes on: %s",
              dlock_client_errmsg(client));
}

static void unreachable_cluster_seeds_are_reported(void **state)
{
    const char *url_c = "redis+cluster://127.0.0.1:1,127.0.0.1:2";
    dlock_client *c = NULL;
    char err[512] = "";

    (void)state;
    TK_EXPECT(dlock_client_new(url_c, NULL, &c, err, sizeof(err))
                      == DLOCK_UNAVAILABLE
                  && c == NULL,
              "%s is unavailable", url_c);
    TK_EXPECT(strstr(err, "slot map") != NULL, "the message says so: %s", err);
}

/* After the failover case: the old master it gave a wrong masterauth
 * may sync again, even if the case failed half-way (else the sentinel
 * tests after it find a replica that never catches up). */
static int restore_masterauth(void **state)
{
    char u[64];

    (void)state;
    if (wrong_auth_port != 0)
        freeReplyObject(
            testkit_redis_cmd(scalekit_node_url(wrong_auth_port, u, sizeof(u)),
                              "CONFIG SET masterauth %s", ""));
    wrong_auth_port = 0;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_lock_is_taken_renewed_and_released),
        cmocka_unit_test(a_key_gone_from_the_master_is_lost),
        cmocka_unit_test(grants_wait_for_replicas),
        cmocka_unit_test(threads_share_a_lock_without_overlap),
        cmocka_unit_test(an_async_handle_locks_on_the_master),
        cmocka_unit_test(locking_resumes_after_the_master_is_killed),
        cmocka_unit_test_teardown(an_async_handle_follows_a_failover,
                                  restore_masterauth),
        cmocka_unit_test(unreachable_cluster_seeds_are_reported),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
