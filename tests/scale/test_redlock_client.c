/*
 * test_redlock_client.c: the public API on a redlock:// URL over five
 * private redis-server processes (testkit), started, stopped and
 * restarted by pid.
 *
 *   - dlock_client_new takes the URL; a lock is acquired with a fence,
 *     refused to another owner while held, extended, released;
 *   - the watchdog and reentrant options are refused, not ignored;
 *   - 4 threads share one lock through dlock_acquire's waiting: no
 *     overlap, every fence above the last;
 *   - with 2 of 5 masters stopped locks are granted, with 3 of 5 acquire
 *     fails closed with DLOCK_UNAVAILABLE in bounded time, and restarted
 *     masters take part again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "dlock/dlock.h"
#include "testkit.h"

#define MASTERS 5

static testkit_redis *servers[MASTERS];
static dlock_client *client;

static int setup(void **state)
{
    char url[1024] = "redlock://", err[512];
    dlock_client_opts o;

    (void)state;
    for (int i = 0; i < MASTERS; i++) {
        char name[32];
        testkit_redis_opts opts = {.name = name};
        size_t at = strlen(url);

        snprintf(name, sizeof(name), "rlclient%d", i);
        servers[i] = testkit_redis_start(&opts);
        if (servers[i] == NULL)
            return -1;
        snprintf(url + at, sizeof(url) - at, "%s127.0.0.1:%d", i ? "," : "",
                 servers[i]->port);
    }
    dlock_client_opts_init(&o);
    o.io_timeout_ms = 1000;
    if (dlock_client_new(url, &o, &client, err, sizeof(err)) != DLOCK_OK) {
        fprintf(stderr, "dlock_client_new(%s): %s\n", url, err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_free(client);
    for (int i = 0; i < MASTERS; i++)
        testkit_redis_free(servers[i]);
    return 0;
}

static dlock_err take(const char *key, int64_t wait_ms, dlock_lock **l)
{
    dlock_acquire_opts o;

    dlock_acquire_opts_init(&o);
    o.ttl_ms = 5000;
    o.wait_ms = wait_ms;
    return dlock_acquire(client, key, &o, l);
}

static void a_lock_is_fenced_exclusive_extended_and_released(void **state)
{
    dlock_lock *a = NULL, *b = NULL;
    uint64_t first;

    (void)state;
    TK_EXPECT(take("t:rlc:basic", 0, &a) == DLOCK_OK, "acquired: %s",
              dlock_client_errmsg(client));
    first = dlock_lock_fence(a);
    TK_EXPECT(first > 0 && dlock_lock_valid_ms(a) > 0,
              "a fence (%" PRIu64 ") and validity", first);
    TK_EXPECT(take("t:rlc:basic", 0, &b) == DLOCK_BUSY && b == NULL,
              "another owner is refused while it is held");
    TK_EXPECT(dlock_extend(a, 5000) == DLOCK_OK, "extended: %s",
              dlock_client_errmsg(client));
    TK_EXPECT(dlock_release(a) == DLOCK_OK, "released: %s",
              dlock_client_errmsg(client));
    TK_EXPECT(take("t:rlc:basic", 0, &b) == DLOCK_OK
                  && dlock_lock_fence(b) > first,
              "taken again with a higher fence");
    TK_EXPECT(dlock_release(b) == DLOCK_OK, "released again");
}

static void watchdog_and_reentrant_are_refused(void **state)
{
    dlock_acquire_opts o;
    dlock_lock *l = NULL;

    (void)state;
    dlock_acquire_opts_init(&o);
    o.watchdog = 1;
    TK_EXPECT(dlock_acquire(client, "t:rlc:wd", &o, &l) == DLOCK_INVALID
                  && l == NULL,
              "the watchdog is refused");
    TK_EXPECT(strstr(dlock_client_errmsg(client), "dlock_extend") != NULL,
              "the message says what to do: %s", dlock_client_errmsg(client));
    o.watchdog = 0;
    o.reentrant = 1;
    TK_EXPECT(dlock_acquire(client, "t:rlc:wd", &o, &l) == DLOCK_INVALID,
              "reentrant is refused");
}

typedef struct shared {
    atomic_int inside, overlaps, failures, regressions;
    uint64_t fence;
    long counter;
} shared;

static void *contender(void *arg)
{
    shared *s = arg;

    for (int i = 0; i < 15; i++) {
        dlock_lock *l = NULL;

        if (take("t:rlc:exclusion", 30000, &l) != DLOCK_OK) {
            atomic_fetch_add(&s->failures, 1);
            continue;
        }
        if (atomic_exchange(&s->inside, 1) != 0)
            atomic_fetch_add(&s->overlaps, 1);
        if (dlock_lock_fence(l) <= s->fence)
            atomic_fetch_add(&s->regressions, 1);
        s->fence = dlock_lock_fence(l);
        s->counter++;
        atomic_store(&s->inside, 0);
        (void)dlock_release(l);
    }
    return NULL;
}

static void threads_wait_their_turn(void **state)
{
    shared s = {0};
    pthread_t t[4];
    int64_t start = testkit_now_ms();

    (void)state;
    for (int i = 0; i < 4; i++)
        TK_EXPECT(pthread_create(&t[i], NULL, contender, &s) == 0, "thread");
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    printf("# redlock client: %ld grants by 4 waiting threads in %" PRId64
           " ms (%d gave up)\n",
           s.counter, testkit_now_ms() - start, atomic_load(&s.failures));
    TK_EXPECT(atomic_load(&s.overlaps) == 0
                  && atomic_load(&s.regressions) == 0,
              "no overlap (%d), fences "
              "grow (%d regressions)",
              atomic_load(&s.overlaps), atomic_load(&s.regressions));
    TK_EXPECT(s.counter > 0 && s.counter + atomic_load(&s.failures) == 60,
              "every attempt granted or given up");
}

static void minority_loss_grants_majority_loss_fails_closed(void **state)
{
    dlock_lock *l = NULL;
    int64_t start, took;
    dlock_err err;

    (void)state;
    TK_EXPECT(testkit_redis_stop(servers[0]) == 0
                  && testkit_redis_stop(servers[3]) == 0,
              "2 masters stop");
    TK_EXPECT(take("t:rlc:minority", 0, &l) == DLOCK_OK,
              "2 of 5 down: "
              "granted: %s",
              dlock_client_errmsg(client));
    (void)dlock_release(l);
    TK_EXPECT(testkit_redis_stop(servers[4]) == 0, "a third stops");
    start = testkit_now_ms();
    err = take("t:rlc:majority", 0, &l);
    took = testkit_now_ms() - start;
    printf("# redlock client: 3 of 5 down: %s after %" PRId64 " ms: %s\n",
           dlock_errname(err), took, dlock_client_errmsg(client));
    TK_EXPECT(err == DLOCK_UNAVAILABLE && l == NULL, "fail-closed");
    TK_EXPECT(strstr(dlock_client_errmsg(client), "3 of 5 nodes") != NULL,
              "the three are named");
    TK_EXPECT(took < 3000, "in bounded time (%" PRId64 " ms)", took);
    TK_EXPECT(testkit_redis_restart(servers[0]) == 0
                  && testkit_redis_restart(servers[3]) == 0
                  && testkit_redis_restart(servers[4]) == 0,
              "they restart");
    TK_EXPECT(take("t:rlc:majority", 0, &l) == DLOCK_OK, "granted again: %s",
              dlock_client_errmsg(client));
    TK_EXPECT(dlock_release(l) == DLOCK_OK, "released on all five: %s",
              dlock_client_errmsg(client));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_lock_is_fenced_exclusive_extended_and_released),
        cmocka_unit_test(watchdog_and_reentrant_are_refused),
        cmocka_unit_test(threads_wait_their_turn),
        cmocka_unit_test(minority_loss_grants_majority_loss_fails_closed),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
