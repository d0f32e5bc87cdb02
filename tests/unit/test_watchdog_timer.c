/*
 * test_watchdog_timer.c: the watchdog's timer, its registrations and its orphan
 * clean-up (watchdog.h), on a client of the shared stack's Redis.
 *
 * Each wait is a bounded condition.  The allocation-failure case uses the
 * per-thread hook of the DLOCK_TESTING build, so only the calling thread's
 * allocation fails, never one of the watchdog's own threads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <string.h>

#include "base/alloc.h"
#include "dlock/dlock.h"
#include "lock/lock_internal.h"
#include "testkit.h"
#include "lock/watchdog.h"

static dlock_client *new_client(void)
{
    dlock_client *c = NULL;
    char err[DLOCK_ERRMSG_MAX];

    if (dlock_client_new(testkit_shared_redis(), NULL, &c, err, sizeof(err))
        != DLOCK_OK)
        fail_msg("dlock_client_new: %s", err);
    return c;
}

static void count_call(dlock_lock *l, void *arg)
{
    (void)l;
    atomic_fetch_add((atomic_int *)arg, 1);
}

static int called(void *arg)
{
    return atomic_load((atomic_int *)arg) > 0;
}

/* A lock with a callback and no renewal: the timer alone marks it lost
 * at valid_until and calls back once. */
static void the_timer_marks_an_unrenewed_lock_lost_once(void **state)
{
    dlock_client *c = new_client();
    dlock_acquire_opts o;
    char key[TESTKIT_KEY_MAX];
    dlock_lock *l = NULL;
    atomic_int calls;
    int64_t start;

    (void)state;
    atomic_init(&calls, 0);
    dlock_acquire_opts_init(&o);
    o.ttl_ms = 200;
    o.on_lost = count_call;
    o.on_lost_arg = &calls;
    assert_int_equal(dlock_acquire(c, testkit_key(key, "wd_timer"), &o, &l),
                     DLOCK_OK);
    start = testkit_now_ms();
    assert_true(testkit_wait_until(called, &calls, 2000));
    assert_true(testkit_now_ms() - start < 400);
    assert_int_equal(dlock_lock_lost(l), 1);
    assert_int_equal(dlock_extend(l, 0), DLOCK_STATE);
    assert_int_equal(dlock_release(l), DLOCK_LOST);
    assert_int_equal(atomic_load(&calls), 1);
    testkit_forget_lock(testkit_shared_redis(), key);
    dlock_client_free(c);
}

static void a_registration_without_memory_is_nomem(void **state)
{
    dlock_client *c = new_client();
    dlock_lock *l = NULL;
    dlock__watch *x = (dlock__watch *)1;
    dlock__msg m;

    (void)state;
    assert_int_equal(dlock_lock_attach(c, "t:unit:wd",
                                       "0123456789abcdef"
                                       "0123456789abcdef",
                                       &l),
                     DLOCK_OK);
    dlock__alloc_fail_nth(1);
    assert_int_equal(dlock__watchdog_watch(dlock__client_watchdog(c), l, 1, &x,
                                           &m),
                     DLOCK_NOMEM);
    dlock__alloc_fail_nth(0);
    assert_null(x);
    dlock__watchdog_unwatch(dlock__client_watchdog(c), NULL);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* Locks released while their renewals are in flight: the watch is
 * detached, never waited for, never touched after (ASan checks). */
static void release_during_a_renewal_never_waits_or_touches_it(void **state)
{
    dlock_client *c = new_client();
    dlock_acquire_opts o;
    char key[TESTKIT_KEY_MAX];

    (void)state;
    dlock_acquire_opts_init(&o);
    o.ttl_ms = 30; /* renewed every 10 ms */
    o.watchdog = 1;
    testkit_key(key, "wd_churn");
    for (int i = 0; i < 100; i++) {
        dlock_lock *l = NULL;
        dlock_err err;

        assert_int_equal(dlock_acquire(c, key, &o, &l), DLOCK_OK);
        if (i % 2 == 0)
            testkit_wait_until(called, &(atomic_int){0}, 12);
        err = dlock_release(l);
        /* A 30 ms lease may run out on a loaded machine: LOST is then the
         * truth; anything else (or a hang, or a use after free) is not. */
        assert_true(err == DLOCK_OK || err == DLOCK_LOST);
    }
    testkit_forget_lock(testkit_shared_redis(), key);
    dlock_client_free(c);
}

static int key_gone(void *arg)
{
    return testkit_redis_int(testkit_shared_redis(), "EXISTS %s",
                             (const char *)arg)
           == 0;
}

/* An orphan handed to the clean-up is undone on the renewer's link. */
static void an_orphan_is_undone_in_the_background(void **state)
{
    static const dlock__script del = {
        "test.del",
        "return redis.call('DEL', KEYS[1])\n",
        1,
    };
    dlock_client *c = new_client();
    char key[TESTKIT_KEY_MAX];
    const char *argv[1];

    (void)state;
    testkit_key(key, "wd_orphan");
    argv[0] = key;
    assert_int_equal(testkit_redis_int(testkit_shared_redis(),
                                       "SET %s x PX 10000", key),
                     INT64_MIN); /* +OK is not an integer */
    assert_false(key_gone(key));
    dlock__watchdog_cleanup(dlock__client_watchdog(c), &del, 1, 1, argv,
                            10000);
    assert_true(testkit_wait_until(key_gone, key, 2000));
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_timer_marks_an_unrenewed_lock_lost_once),
        cmocka_unit_test(a_registration_without_memory_is_nomem),
        cmocka_unit_test(release_during_a_renewal_never_waits_or_touches_it),
        cmocka_unit_test(an_orphan_is_undone_in_the_background),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
