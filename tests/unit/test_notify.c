/*
 * test_notify.c: the release notifier (notify.h), on its own subscriber
 * connection to the shared stack's Redis.
 *
 * The test publishes with its own connection (testkit_redis_cmd) and asks
 * the server what the notifier is subscribed to (PUBSUB NUMSUB), so every
 * check is of what reached Redis, not of the notifier's own bookkeeping.
 * A join on a new channel is followed by a wait for its SUBSCRIBE
 * confirmation (which wakes every waiter of the channel, notify.h), so a
 * PUBLISH after it is known to reach the subscriber.  Waits are bounded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "base/alloc.h"
#include "client/client_internal.h"
#include "base/clock.h"
#include "dlock/dlock.h"
#include "client/notify.h"
#include "testkit.h"

/* Bound on anything that should happen at once (a loaded machine). */
#define SOON_MS 5000

typedef struct fixture {
    dlock_client *c;
    dlock__notifier *n;
} fixture;

static int setup(void **state)
{
    static fixture f;
    char err[DLOCK_ERRMSG_MAX];

    memset(&f, 0, sizeof(f));
    *state = &f; /* teardown frees what setup made, even if it failed */
    if (dlock_client_new(testkit_shared_redis(), NULL, &f.c, err, sizeof(err))
        != DLOCK_OK)
        fail_msg("dlock_client_new: %s", err);
    assert_int_equal(dlock__notifier_new(f.c, &f.n), DLOCK_OK);
    assert_non_null(f.n);
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;

    dlock__notifier_free(f->n);
    dlock_client_free(f->c);
    return 0;
}

static int64_t after_ms(int64_t ms)
{
    return dlock__now_us() + ms * 1000;
}

/* How many receivers the server delivered a PUBLISH on channel to. */
static long long publish(const char *channel)
{
    long long got = testkit_redis_int(testkit_shared_redis(),
                                      "PUBLISH %s released", channel);

    assert_true(got >= 0);
    return got;
}

/* PUBLISH with id as the payload, as a release does (lock.c). */
static long long publish_id(const char *channel, const char *id)
{
    long long got = testkit_redis_int(testkit_shared_redis(), "PUBLISH %s %s",
                                      channel, id);

    assert_true(got >= 0);
    return got;
}

/* Subscribers of channel on the server (PUBSUB NUMSUB), -1 if unknown. */
static long long numsub(const char *channel)
{
    redisReply *r = testkit_redis_cmd(testkit_shared_redis(),
                                      "PUBSUB NUMSUB %s", channel);
    long long got = -1;

    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2
        && r->element[1]->type == REDIS_REPLY_INTEGER)
        got = r->element[1]->integer;
    freeReplyObject(r);
    return got;
}

static int unsubscribed(void *arg)
{
    return numsub(arg) == 0;
}

/* Joins a channel nobody of this notifier has joined and waits for its
 * SUBSCRIBE confirmation, after which a PUBLISH reaches the waiter. */
static dlock__waiter *join_subscribed(dlock__notifier *n, const char *channel)
{
    dlock__waiter *w = NULL;
    int subscribed = -1;

    assert_int_equal(dlock__notify_join(n, channel, &w, &subscribed),
                     DLOCK_OK);
    assert_non_null(w);
    assert_int_equal(subscribed, 0);
    assert_int_equal(dlock__notify_wait(n, w, after_ms(SOON_MS)), 1);
    assert_int_equal(numsub(channel), 1);
    return w;
}

static void a_joined_waiter_is_woken_by_a_publish_on_its_channel(void **state)
{
    fixture *f = *state;
    char ch[TESTKIT_KEY_MAX];
    dlock__waiter *w = join_subscribed(f->n, testkit_key(ch, "notify_wake"));
    int64_t start;

    /* Nothing published yet: no wake-up is pending. */
    assert_int_equal(dlock__notify_wait(f->n, w, after_ms(50)), 0);
    assert_int_equal(publish(ch), 1);
    start = testkit_now_ms();
    assert_int_equal(dlock__notify_wait(f->n, w, after_ms(SOON_MS)), 1);
    assert_true(testkit_now_ms() - start < SOON_MS);
    dlock__notify_leave(f->n, w);
}

static void a_waiter_is_not_woken_by_another_channels_message(void **state)
{
    fixture *f = *state;
    char mine[TESTKIT_KEY_MAX], other[TESTKIT_KEY_MAX];
    dlock__waiter *w = join_subscribed(f->n, testkit_key(mine, "notify_mine"));
    dlock__waiter *x = join_subscribed(f->n,
                                       testkit_key(other, "notify_other"));

    assert_int_equal(publish(other), 1);
    /* The other channel's waiter is woken, so the message has arrived
     * before mine is asked. */
    assert_int_equal(dlock__notify_wait(f->n, x, after_ms(SOON_MS)), 1);
    assert_int_equal(dlock__notify_wait(f->n, w, after_ms(100)), 0);
    dlock__notify_leave(f->n, x);
    dlock__notify_leave(f->n, w);
}

static void a_wait_ends_at_its_deadline_when_nothing_is_published(void **state)
{
    fixture *f = *state;
    char ch[TESTKIT_KEY_MAX];
    dlock__waiter *w = join_subscribed(f->n,
                                       testkit_key(ch, "notify_deadline"));
    int64_t start = dlock__now_us();
    int64_t deadline = start + 150 * 1000;
    int64_t took;

    assert_int_equal(dlock__notify_wait(f->n, w, deadline), 0);
    assert_true(dlock__now_us() >= deadline);
    took = dlock__now_us() - start;
    /* Not woken early, and not held far past the deadline either. */
    assert_true(took >= 150 * 1000);
    assert_true(took < 150 * 1000 + SOON_MS * 1000);
    dlock__notify_leave(f->n, w);
}

static void joining_a_subscribed_channel_says_it_is_subscribed(void **state)
{
    fixture *f = *state;
    char ch[TESTKIT_KEY_MAX];
    dlock__waiter *first = join_subscribed(f->n,
                                           testkit_key(ch, "notify_again"));
    dlock__waiter *second = NULL;
    int subscribed = -1;

    assert_int_equal(dlock__notify_join(f->n, ch, &second, &subscribed),
                     DLOCK_OK);
    assert_non_null(second);
    assert_int_equal(subscribed, 1);
    /* Still one subscription on the server for both waiters. */
    assert_int_equal(numsub(ch), 1);
    dlock__notify_leave(f->n, second);
    dlock__notify_leave(f->n, first);
}

/* Two waiters on one channel, the first joined first; each release wakes
 * one.  The first, woken, does not leave (it lost the key) and waits
 * again: the next release wakes it again if it keeps its place
 * (dlock__notify_set_fifo), the second one if not. */
static void second_release_wakes(fixture *f, const char *name, int fifo)
{
    char ch[TESTKIT_KEY_MAX];
    dlock__waiter *first = join_subscribed(f->n, testkit_key(ch, name));
    dlock__waiter *second = NULL, *woken, *not_woken;
    int subscribed = -1;

    assert_int_equal(dlock__notify_join(f->n, ch, &second, &subscribed),
                     DLOCK_OK);
    if (fifo) {
        dlock__notify_set_fifo(f->n, first);
        dlock__notify_set_fifo(f->n, second);
    }
    assert_int_equal(publish(ch), 1);
    assert_int_equal(dlock__notify_wait(f->n, first, after_ms(SOON_MS)), 1);
    assert_int_equal(dlock__notify_wait(f->n, second, after_ms(50)), 0);
    assert_int_equal(publish(ch), 1);
    woken = fifo ? first : second;
    not_woken = fifo ? second : first;
    assert_int_equal(dlock__notify_wait(f->n, woken, after_ms(SOON_MS)), 1);
    assert_int_equal(dlock__notify_wait(f->n, not_woken, after_ms(50)), 0);
    dlock__notify_leave(f->n, second);
    dlock__notify_leave(f->n, first);
}

/* A release of this client's wakes one waiter itself
 * (dlock__notify_released), and its message, matched by the id, wakes
 * nobody; a message that comes first wakes one, and the releaser's call
 * then wakes nobody.  Two waiters keep their places (an exclusive lock's):
 * a second wake-up for one release would reach the second waiter. */
static void a_release_wakes_one_waiter_whichever_way_comes_first(void **state)
{
    fixture *f = *state;
    char ch[TESTKIT_KEY_MAX];
    dlock__waiter *first = join_subscribed(f->n,
                                           testkit_key(ch, "notify_own"));
    dlock__waiter *second = NULL;
    int subscribed = -1;

    assert_int_equal(dlock__notify_join(f->n, ch, &second, &subscribed),
                     DLOCK_OK);
    dlock__notify_set_fifo(f->n, first);
    dlock__notify_set_fifo(f->n, second);
    /* The releaser first, then its message, then another release's. */
    assert_int_equal(dlock__notify_released(f->n, ch, "41"), 1);
    assert_int_equal(dlock__notify_wait(f->n, first, after_ms(SOON_MS)), 1);
    assert_int_equal(publish_id(ch, "41"), 1);
    assert_int_equal(publish_id(ch, "42"), 1);
    assert_int_equal(dlock__notify_wait(f->n, first, after_ms(SOON_MS)), 1);
    assert_int_equal(dlock__notify_wait(f->n, second, after_ms(50)), 0);
    /* The message first, then the releaser's call. */
    assert_int_equal(publish_id(ch, "43"), 1);
    assert_int_equal(dlock__notify_wait(f->n, first, after_ms(SOON_MS)), 1);
    assert_int_equal(dlock__notify_released(f->n, ch, "43"), 0);
    assert_int_equal(dlock__notify_wait(f->n, second, after_ms(50)), 0);
    /* No id (a release without a fence): the message alone wakes. */
    assert_int_equal(dlock__notify_released(f->n, ch, ""), 0);
    dlock__notify_leave(f->n, second);
    dlock__notify_leave(f->n, first);
}

static void a_woken_waiter_that_keeps_its_place_is_woken_again(void **state)
{
    second_release_wakes(*state, "notify_fifo", 1);
    second_release_wakes(*state, "notify_rotate", 0);
}

static void leaving_unsubscribes_only_when_the_last_waiter_leaves(void **state)
{
    fixture *f = *state;
    char ch[TESTKIT_KEY_MAX], barrier[TESTKIT_KEY_MAX];
    dlock__waiter *first = join_subscribed(f->n,
                                           testkit_key(ch, "notify_leave"));
    dlock__waiter *second = NULL, *b;
    int subscribed = -1;

    assert_int_equal(dlock__notify_join(f->n, ch, &second, &subscribed),
                     DLOCK_OK);
    assert_int_equal(subscribed, 1);
    dlock__notify_leave(f->n, first);
    /* A channel joined after the leave and confirmed: the subscriber has
     * sent whatever the leave made it send before this confirmation. */
    b = join_subscribed(f->n, testkit_key(barrier, "notify_barrier"));
    assert_int_equal(numsub(ch), 1);
    assert_int_equal(publish(ch), 1);
    assert_int_equal(dlock__notify_wait(f->n, second, after_ms(SOON_MS)), 1);
    dlock__notify_leave(f->n, second);
    assert_true(testkit_wait_until(unsubscribed, ch, SOON_MS));
    assert_int_equal(publish(ch), 0);
    dlock__notify_leave(f->n, b);
    assert_true(testkit_wait_until(unsubscribed, barrier, SOON_MS));
}

static void notifier_new_without_memory_is_nomem(void **state)
{
    fixture *f = *state;
    dlock__notifier *n = (dlock__notifier *)1;

    dlock__alloc_fail_nth(1);
    assert_int_equal(dlock__notifier_new(f->c, &n), DLOCK_NOMEM);
    dlock__alloc_fail_nth(0);
    assert_null(n);
}

/* Fails the join's 1st, 2nd, ... allocation until it succeeds: each
 * failure is DLOCK_NOMEM with no waiter and leaves no channel behind (the
 * join that succeeds is a new channel's, confirmed by the server). */
static void join_fails_cleanly_at_every_allocation(void **state)
{
    fixture *f = *state;
    char ch[TESTKIT_KEY_MAX];
    dlock__waiter *w = NULL;
    int subscribed = -1;
    int failed = 0;
    dlock_err err = DLOCK_NOMEM;

    testkit_key(ch, "notify_alloc");
    while (failed < 20) {
        w = (dlock__waiter *)1;
        dlock__alloc_fail_nth(failed + 1);
        err = dlock__notify_join(f->n, ch, &w, &subscribed);
        dlock__alloc_fail_nth(0);
        if (err == DLOCK_OK)
            break;
        assert_int_equal(err, DLOCK_NOMEM);
        assert_null(w);
        failed++;
    }
    assert_int_equal(err, DLOCK_OK);
    /* Waiter, channel and its name: at least three allocations failed. */
    assert_true(failed >= 3);
    assert_int_equal(subscribed, 0);
    assert_int_equal(dlock__notify_wait(f->n, w, after_ms(SOON_MS)), 1);
    assert_int_equal(numsub(ch), 1);
    dlock__notify_leave(f->n, w);
    assert_true(testkit_wait_until(unsubscribed, ch, SOON_MS));
}

/* Joins channel as a direct waiter and waits for its confirmation. */
static dlock__waiter *join_direct(dlock__notifier *n, const char *channel)
{
    dlock__waiter *w = NULL;

    assert_int_equal(dlock__notify_join_direct(n, channel, after_ms(SOON_MS),
                                               &w),
                     DLOCK_OK);
    assert_non_null(w);
    assert_int_equal(dlock__notify_wait(n, w, after_ms(SOON_MS)), 1);
    assert_int_equal(numsub(channel), 1);
    return w;
}

/* A direct waiter (notify.h) sleeps on its own connection: a PUBLISH on
 * its channel wakes it with the payload kept, nothing else does; leaving
 * keeps the connection with nothing sent (the channel still subscribed on
 * the server), and the next direct waiter takes it, unsubscribing the old
 * channel and skipping what was still in it for that channel. */
static void a_direct_waiter_is_woken_by_its_own_connection(void **state)
{
    fixture *f = *state;
    char ch[TESTKIT_KEY_MAX], next[TESTKIT_KEY_MAX];
    char msg[DLOCK__NOTIFY_MSG_MAX];
    dlock__waiter *w = join_direct(f->n, testkit_key(ch, "notify_direct"));

    assert_int_equal(dlock__notify_wait(f->n, w, after_ms(50)), 0);
    assert_int_equal(publish(ch), 1);
    assert_int_equal(dlock__notify_wait(f->n, w, after_ms(SOON_MS)), 1);
    assert_int_equal(dlock__notify_take_message(f->n, w, msg, sizeof(msg)),
                     strlen("released"));
    assert_memory_equal(msg, "released", strlen("released"));
    assert_int_equal(dlock__notify_kept(f->n), 0);
    /* Left unread in the connection that the next waiter takes. */
    assert_int_equal(publish(ch), 1);
    dlock__notify_leave(f->n, w);
    assert_int_equal(dlock__notify_kept(f->n), 1);
    assert_int_equal(numsub(ch), 1);

    w = join_direct(f->n, testkit_key(next, "notify_direct_next"));
    assert_int_equal(dlock__notify_kept(f->n), 0);
    assert_true(testkit_wait_until(unsubscribed, ch, SOON_MS));
    assert_int_equal(dlock__notify_take_message(f->n, w, msg, sizeof(msg)), 0);
    assert_int_equal(dlock__notify_wait(f->n, w, after_ms(50)), 0);
    dlock__notify_leave(f->n, w);
    assert_int_equal(dlock__notify_kept(f->n), 1);
}

/* At most DLOCK__NOTIFY_KEPT_MAX connections are kept; the rest close,
 * which unsubscribes their channels.  Taking the kept ones again
 * unsubscribes the rest. */
static void direct_connections_kept_are_bounded(void **state)
{
    enum { N = DLOCK__NOTIFY_KEPT_MAX + 4 };
    fixture *f = *state;
    dlock__waiter *w[N];
    char ch[N][TESTKIT_KEY_MAX];

    for (int i = 0; i < N; i++)
        w[i] = join_direct(f->n, testkit_key(ch[i], "notify_direct_many"));
    for (int i = 0; i < N; i++)
        dlock__notify_leave(f->n, w[i]);
    assert_int_equal(dlock__notify_kept(f->n), DLOCK__NOTIFY_KEPT_MAX);
    for (int i = DLOCK__NOTIFY_KEPT_MAX; i < N; i++)
        assert_true(testkit_wait_until(unsubscribed, ch[i], SOON_MS));
    for (int i = 0; i < DLOCK__NOTIFY_KEPT_MAX; i++)
        assert_int_equal(numsub(ch[i]), 1);
    for (int i = 0; i < DLOCK__NOTIFY_KEPT_MAX; i++) {
        char again[TESTKIT_KEY_MAX];

        w[i] = join_direct(f->n, testkit_key(again, "notify_direct_again"));
    }
    for (int i = 0; i < DLOCK__NOTIFY_KEPT_MAX; i++) {
        assert_true(testkit_wait_until(unsubscribed, ch[i], SOON_MS));
        dlock__notify_leave(f->n, w[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_joined_waiter_is_woken_by_a_publish_on_its_channel),
        cmocka_unit_test(a_waiter_is_not_woken_by_another_channels_message),
        cmocka_unit_test(
            a_wait_ends_at_its_deadline_when_nothing_is_published),
        cmocka_unit_test(joining_a_subscribed_channel_says_it_is_subscribed),
        cmocka_unit_test(
            leaving_unsubscribes_only_when_the_last_waiter_leaves),
        cmocka_unit_test(notifier_new_without_memory_is_nomem),
        cmocka_unit_test(join_fails_cleanly_at_every_allocation),
        cmocka_unit_test(a_woken_waiter_that_keeps_its_place_is_woken_again),
        cmocka_unit_test(a_release_wakes_one_waiter_whichever_way_comes_first),
        cmocka_unit_test(a_direct_waiter_is_woken_by_its_own_connection),
        cmocka_unit_test(direct_connections_kept_are_bounded),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
