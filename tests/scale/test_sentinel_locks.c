/*
 * test_sentinel_locks.c: the public API on a Sentinel URL, on
 * scripts/stack's sentinel group (a master, two replicas, three
 * sentinels).
 *
 *   - dlock_client_new takes redis+sentinel://.../dlock, and a lock with
 *     its watchdog is taken, renewed and released on the master;
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

static int master_port(void)
{
    char sentinel[64];
    const char *list = strstr(url, "://") + 3;
    redisReply *r;
    int port = -1;

    snprintf(sentinel, sizeof(sentinel), "redis://%.*s/0",
             (int)strcspn(list, ",/"), list);
    r = testkit_redis_cmd(sentinel, "SENTINEL GET-MASTER-ADDR-BY-NAME dlock");
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_lock_is_taken_renewed_and_released),
        cmocka_unit_test(grants_wait_for_replicas),
        cmocka_unit_test(threads_share_a_lock_without_overlap),
        cmocka_unit_test(an_async_handle_locks_on_the_master),
        cmocka_unit_test(locking_resumes_after_the_master_is_killed),
        cmocka_unit_test(unreachable_cluster_seeds_are_reported),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
