/*
 * test_waiting.c: waiting for a held lock.
 *
 * A waiter must be woken by the holder's release (a notification on the
 * key's channel) and get the lock within a few milliseconds, not at its
 * next poll.  The holder's TTL is 10 s, so expiry cannot explain a quick
 * grant; the library's fallback timer (wait.c) follows that TTL, and a
 * client without a subscriber would poll every 100-200 ms, so a single
 * quick grant could be a lucky poll.  The test therefore hands the lock
 * over 7 times and requires the median hand-off under 25 ms (a poll alone
 * gives that less than 1% of the time) and every one under 200 ms
 * (generous, for a loaded 2-core machine).  test_wait_quiet.c counts what
 * waiting costs the server.
 *
 * A thread that releases and at once wants the key again must not barge
 * ahead of a waiter of its own client that the release woke (wait.h,
 * "Barging"): over 8 rounds on one client, the woken waiter's fence is
 * below the re-acquiring releaser's in at least half of them (without the
 * rule the releaser wins most rounds: its try leaves before the waiter
 * has even been woken; with it, only a stall past the 150-200 ms fallback
 * lets the releaser in first).
 *
 * A waiter is woken by a release of its own client even when the
 * client's subscriber connection hears nothing (it goes through a proxy
 * that is paused once the waiter is subscribed and asleep): the
 * releasing thread wakes it when its release's reply comes (notify.h,
 * dlock__notify_released).  The holder's TTL is 60 s, so the waiter's
 * fallback timer would wake it 7.5-10 s after its last try; the grant
 * must come within 3 s of the release (a wake-up and a round trip, on a
 * loaded machine).
 *
 * A wait with a deadline must end with DLOCK_BUSY at the deadline: not
 * much earlier, not much later ([wait, wait + 150 ms]).  After a BUSY,
 * dlock_client_busy_ttl_ms tells how long the holder's TTL still runs.
 */
#include "itkit.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define HANDOFFS 7
#define HOLDER_TTL_MS 10000

typedef struct waiter {
    dlock_client *client;
    const char *key;
    dlock_err result;
    dlock_lock *lock;
    int64_t granted_us;
    char message[DLOCK_ERRMSG_MAX];
    uint64_t fence; /* quick_waiter_main: the fence it was granted */
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    dlock_acquire_opts o = itkit_acquire_opts(5000, 5000);

    w->result = dlock_acquire(w->client, w->key, &o, &w->lock);
    w->granted_us = testkit_now_us();
    snprintf(w->message, sizeof(w->message), "%s",
             dlock_client_errmsg(w->client));
    return NULL;
}

/* A round's waiter thread and what it reads and writes, in static
 * storage: a failed TK_EXPECT leaves the round by longjmp while the waiter
 * still runs (up to its 5 s wait), so that state must not live on the
 * round's stack.  join_round, the teardown of the cases with rounds,
 * joins it whether the case passed or failed. */
static struct {
    waiter w;
    char key[TESTKIT_KEY_MAX];
    pthread_t thread;
    int live; /* started, not yet joined */
} round_;

/* Starts main on round_.w (client, round_.key); 0 or -1. */
static int round_start(dlock_client *client, void *(*main)(void *))
{
    memset(&round_.w, 0, sizeof(round_.w));
    round_.w.client = client;
    round_.w.key = round_.key;
    if (pthread_create(&round_.thread, NULL, main, &round_.w) != 0)
        return -1;
    round_.live = 1;
    return 0;
}

static void round_join(void)
{
    if (round_.live) {
        pthread_join(round_.thread, NULL);
        round_.live = 0;
    }
}

/* Teardown: joins a waiter a failed round left running and drops any lock
 * it was granted (its key expires in Redis). */
static int join_round(void **state)
{
    (void)state;
    if (round_.live) {
        round_join();
        dlock_lock_free(round_.w.lock);
        round_.w.lock = NULL;
    }
    return 0;
}

typedef struct channel_probe {
    const char *url;
    char channel[TESTKIT_KEY_MAX + 32];
} channel_probe;

/* 1 once someone is subscribed to the channel. */
static int has_subscriber(void *arg)
{
    channel_probe *p = arg;
    redisReply *r = testkit_redis_cmd(p->url, "PUBSUB NUMSUB %s", p->channel);
    int subscribed = r != NULL && r->type == REDIS_REPLY_ARRAY
                     && r->elements == 2
                     && r->element[1]->type == REDIS_REPLY_INTEGER
                     && r->element[1]->integer >= 1;

    if (r != NULL)
        freeReplyObject(r);
    return subscribed;
}

/* One hand-off: a waiter blocks on a held key, the holder releases; returns
 * the microseconds from the release call to the waiter's grant. */
static int64_t one_handoff(const char *url, dlock_client *holder,
                           dlock_client *other)
{
    dlock_acquire_opts ho = itkit_acquire_opts(HOLDER_TTL_MS, 0);
    char *const key = round_.key;
    channel_probe probe = {url, ""};
    waiter *const w = &round_.w;
    dlock_lock *held;
    int64_t released_at;

    testkit_key(key, "waiting_handoff");
    snprintf(probe.channel, sizeof(probe.channel), "dlock:released:%s", key);
    held = itkit_acquire(holder, key, &ho);
    TK_EXPECT(round_start(other, waiter_main) == 0,
              "the waiter thread starts");
    TK_EXPECT(testkit_wait_until(has_subscriber, &probe, 3000),
              "the waiter "
              "subscribes to %s within 3 s",
              probe.channel);
    released_at = testkit_now_us();
    TK_EXPECT_ERR(dlock_release(held), DLOCK_OK, holder,
                  "the holder's "
                  "release");
    round_join();
    TK_EXPECT(w->result == DLOCK_OK,
              "the waiter gets the released lock, got "
              "%s: %s",
              dlock_errname(w->result), w->message);
    TK_EXPECT_ERR(dlock_release(w->lock), DLOCK_OK, other,
                  "the waiter's "
                  "release");
    w->lock = NULL;
    testkit_forget_lock(url, key);
    return w->granted_us - released_at;
}

#define BARGE_ROUNDS 8

/* The waiter of one round: takes the key, releases it at once. */
static void *quick_waiter_main(void *arg)
{
    waiter *w = arg;

    waiter_main(w);
    if (w->result == DLOCK_OK) {
        w->fence = dlock_lock_fence(w->lock);
        if (dlock_release(w->lock) != DLOCK_OK)
            w->result = DLOCK_LOST;
        w->lock = NULL; /* released (or lost) either way */
    }
    return NULL;
}

/* One round: 1 if the waiter got the key before the releaser's second
 * acquire did. */
static int waiter_goes_first(const char *url, dlock_client *c)
{
    dlock_acquire_opts ho = itkit_acquire_opts(HOLDER_TTL_MS, 0);
    dlock_acquire_opts again = itkit_acquire_opts(HOLDER_TTL_MS, 5000);
    char *const key = round_.key;
    channel_probe probe = {url, ""};
    waiter *const w = &round_.w;
    dlock_lock *held, *second = NULL;
    uint64_t second_fence;

    testkit_key(key, "waiting_barge");
    snprintf(probe.channel, sizeof(probe.channel), "dlock:released:%s", key);
    held = itkit_acquire(c, key, &ho);
    TK_EXPECT(round_start(c, quick_waiter_main) == 0,
              "the waiter thread starts");
    TK_EXPECT(testkit_wait_until(has_subscriber, &probe, 3000),
              "the waiter subscribes to %s within 3 s", probe.channel);
    TK_EXPECT_ERR(dlock_release(held), DLOCK_OK, c, "the holder's release");
    TK_EXPECT_ERR(dlock_acquire(c, key, &again, &second), DLOCK_OK, c,
                  "the releaser's second acquire");
    second_fence = dlock_lock_fence(second);
    TK_EXPECT_ERR(dlock_release(second), DLOCK_OK, c,
                  "the releaser's second release");
    round_join();
    TK_EXPECT(w->result == DLOCK_OK, "the waiter got the lock: %s: %s",
              dlock_errname(w->result), w->message);
    w->lock = NULL; /* released by quick_waiter_main */
    testkit_forget_lock(url, key);
    return w->fence < second_fence;
}

static void releaser_does_not_barge(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client_opts o = itkit_client_opts();
    dlock_client *c;
    int first = 0;

    (void)state;
    o.pool_size = 2;
    c = itkit_client(url, &o);
    for (int i = 0; i < BARGE_ROUNDS; i++)
        first += waiter_goes_first(url, c);
    TK_EXPECT(first >= BARGE_ROUNDS / 2,
              "the woken waiter went before "
              "the re-acquiring releaser in %d of %d rounds",
              first, BARGE_ROUNDS);
    dlock_client_free(c);
}

static int compare_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

static void waiter_is_woken_by_the_release(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *holder = itkit_client(url, NULL);
    dlock_client *other = itkit_client(url, NULL);
    int64_t took[HANDOFFS];

    (void)state;
    for (int i = 0; i < HANDOFFS; i++)
        took[i] = one_handoff(url, holder, other);
    qsort(took, HANDOFFS, sizeof(*took), compare_i64);
    print_message("hand-off after release, us: min %lld median %lld max "
                  "%lld\n",
                  (long long)took[0], (long long)took[HANDOFFS / 2],
                  (long long)took[HANDOFFS - 1]);
    TK_EXPECT(took[HANDOFFS / 2] < 25000,
              "the median hand-off is under "
              "25 ms (a notification, not a 100-200 ms poll), got %lld us",
              (long long)took[HANDOFFS / 2]);
    TK_EXPECT(took[HANDOFFS - 1] < 200000,
              "every hand-off is under 200 ms "
              "with a 10 s holder TTL, the slowest took %lld us",
              (long long)took[HANDOFFS - 1]);
    dlock_client_free(other);
    dlock_client_free(holder);
}

/* The silent-subscriber case's servers, client and waiter, in static
 * storage for the same reason as round_ (end_silent joins and frees). */
static struct {
    testkit_proxied *pr;  /* the server, and P1 (the client's URL) */
    testkit_proxy *later; /* P2: the connections opened after the pool's */
    dlock_client *c;
    char channel[TESTKIT_KEY_MAX + 32];
    uint64_t commands; /* the client's round trips before the waiter */
} silent;

static void retarget(testkit_proxy *p, int port)
{
    char cmd[64];

    snprintf(cmd, sizeof(cmd), "target 127.0.0.1:%d", port);
    TK_EXPECT(testkit_proxy_ctl(p, cmd) == 0, "proxy: %s", cmd);
}

/* waiter_main with a 20 s wait: longer than the fallback timer's sleep. */
static void *patient_waiter_main(void *arg)
{
    waiter *w = arg;
    dlock_acquire_opts o = itkit_acquire_opts(5000, 20000);

    w->result = dlock_acquire(w->client, w->key, &o, &w->lock);
    w->granted_us = testkit_now_us();
    snprintf(w->message, sizeof(w->message), "%s",
             dlock_client_errmsg(w->client));
    return NULL;
}

/* 1 once the waiter has sent its try after its subscription's
 * confirmation: its first try, then the one the confirmation calls
 * for. */
static int waiter_tried_twice(void *arg)
{
    dlock_client_stats s;

    (void)arg;
    dlock_client_stats_get(silent.c, &s);
    return s.commands >= silent.commands + 2;
}

static int end_silent(void **state)
{
    (void)state;
    if (silent.later != NULL)
        testkit_proxy_ctl(silent.later, "resume");
    join_round(state);
    dlock_client_free(silent.c);
    testkit_proxy_free(silent.later);
    testkit_proxied_free(silent.pr);
    memset(&silent, 0, sizeof(silent));
    return 0;
}

static void own_release_wakes_a_waiter_whose_subscriber_is_silent(void **state)
{
    dlock_client_opts co = itkit_client_opts();
    dlock_acquire_opts ho = itkit_acquire_opts(60000, 0);
    channel_probe probe = {NULL, ""};
    dlock_client_stats s;
    dlock_lock *held;
    int64_t released_us, took_ms;

    (void)state;
    silent.pr = itkit_proxied("wait-silent-sub");
    silent.later = testkit_proxy_for("wait-silent-sub-later",
                                     silent.pr->server->port);
    TK_EXPECT(silent.later != NULL, "the second proxy started");
    /* One pooled connection, opened now through P1 to the server; the
     * subscriber's, opened when the waiter joins, goes through P2. */
    co.pool_size = 1;
    silent.c = itkit_client(silent.pr->url, &co);
    retarget(silent.pr->proxy, silent.later->port);
    testkit_key(round_.key, "wait-silent-sub");
    held = itkit_acquire(silent.c, round_.key, &ho);
    dlock_client_stats_get(silent.c, &s);
    silent.commands = s.commands;
    TK_EXPECT(round_start(silent.c, patient_waiter_main) == 0,
              "waiter started");
    probe.url = silent.pr->server->url;
    snprintf(probe.channel, sizeof(probe.channel), "dlock:released:%s",
             round_.key);
    TK_EXPECT(testkit_wait_until(has_subscriber, &probe, 5000)
                  && testkit_wait_until(waiter_tried_twice, NULL, 5000),
              "the waiter subscribed and tried again");
    TK_EXPECT(testkit_proxy_ctl(silent.later, "pause") == 0,
              "the subscriber's connection paused");
    released_us = testkit_now_us();
    TK_EXPECT(dlock_release(held) == DLOCK_OK, "the holder released");
    round_join();
    took_ms = (round_.w.granted_us - released_us) / 1000;
    print_message("own release, subscriber silent: %s %lld ms after the "
                  "release\n",
                  dlock_errname(round_.w.result), (long long)took_ms);
    TK_EXPECT(round_.w.result == DLOCK_OK,
              "the waiter got the lock its own client released, got %s: %s",
              dlock_errname(round_.w.result), round_.w.message);
    TK_EXPECT(took_ms < 3000,
              "the releasing thread woke it, with nothing coming through "
              "its subscriber (its fallback timer wakes it after 7.5 s "
              "or more): %lld ms",
              (long long)took_ms);
    TK_EXPECT(dlock_release(round_.w.lock) == DLOCK_OK, "waiter released");
    round_.w.lock = NULL;
}

static void wait_ends_with_busy_at_the_deadline(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *holder = itkit_client(url, NULL);
    dlock_client *other = itkit_client(url, NULL);
    dlock_acquire_opts ho = itkit_acquire_opts(HOLDER_TTL_MS, 0);
    char key[TESTKIT_KEY_MAX];
    dlock_lock *held, *l = NULL;
    int64_t held_at, started, waited, busy_ttl;

    (void)state;
    testkit_key(key, "waiting_deadline");
    held = itkit_acquire(holder, key, &ho);
    held_at = testkit_now_ms();
    for (int64_t wait_ms = 100; wait_ms <= 400; wait_ms += 300) {
        dlock_acquire_opts o = itkit_acquire_opts(5000, wait_ms);

        started = testkit_now_ms();
        TK_EXPECT_ERR(dlock_acquire(other, key, &o, &l), DLOCK_BUSY, other,
                      "a wait on a key held for 10 s");
        waited = testkit_now_ms() - started;
        TK_EXPECT(waited >= wait_ms && waited <= wait_ms + 150,
                  "a %lld ms "
                  "wait ends between %lld and %lld ms, took %lld ms",
                  (long long)wait_ms, (long long)wait_ms,
                  (long long)wait_ms + 150, (long long)waited);
        TK_EXPECT(strstr(dlock_client_errmsg(other), "waited") != NULL,
                  "the message says how long it waited: %s",
                  dlock_client_errmsg(other));
    }
    busy_ttl = dlock_client_busy_ttl_ms(other);
    TK_EXPECT(busy_ttl <= HOLDER_TTL_MS
                  && busy_ttl
                         >= HOLDER_TTL_MS - (testkit_now_ms() - held_at) - 100,
              "busy_ttl_ms is the holder's remaining TTL, about %lld ms, got "
              "%lld",
              (long long)(HOLDER_TTL_MS - (testkit_now_ms() - held_at)),
              (long long)busy_ttl);
    TK_EXPECT_ERR(dlock_release(held), DLOCK_OK, holder,
                  "the holder's "
                  "release");
    testkit_forget_lock(url, key);
    dlock_client_free(other);
    dlock_client_free(holder);
}

static void busy_ttl_reports_the_holders_ttl(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *holder = itkit_client(url, NULL);
    dlock_client *other = itkit_client(url, NULL);
    dlock_acquire_opts ho = itkit_acquire_opts(3000, 0);
    char key[TESTKIT_KEY_MAX], forever[TESTKIT_KEY_MAX];
    dlock_lock *held, *l = NULL;
    redisReply *r;
    int64_t busy_ttl;

    (void)state;
    testkit_key(key, "waiting_busy_ttl");
    held = itkit_acquire(holder, key, &ho);
    TK_EXPECT_ERR(dlock_acquire(other, key, NULL, &l), DLOCK_BUSY, other,
                  "a try on a held key");
    busy_ttl = dlock_client_busy_ttl_ms(other);
    TK_EXPECT(busy_ttl > 2500 && busy_ttl <= 3000,
              "busy_ttl_ms is the "
              "holder's 3 s TTL less a little, got %lld",
              (long long)busy_ttl);
    TK_EXPECT(dlock_client_busy_ttl_ms(holder) == 0,
              "busy_ttl_ms is per "
              "thread and call: the holder's own last call was not BUSY");
    TK_EXPECT_ERR(dlock_release(held), DLOCK_OK, holder,
                  "the holder's "
                  "release");

    testkit_key(forever, "waiting_no_ttl");
    r = testkit_redis_cmd(url, "SET %s someone-else", forever);
    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS, "SET a key without "
                                                          "TTL");
    freeReplyObject(r);
    TK_EXPECT_ERR(dlock_acquire(other, forever, NULL, &l), DLOCK_BUSY, other,
                  "a try on a key held without TTL");
    TK_EXPECT(dlock_client_busy_ttl_ms(other) == -1,
              "busy_ttl_ms is -1 for "
              "a holder without TTL, got %lld",
              (long long)dlock_client_busy_ttl_ms(other));
    testkit_forget_lock(url, key);
    testkit_forget_lock(url, forever);
    dlock_client_free(other);
    dlock_client_free(holder);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(waiter_is_woken_by_the_release, join_round),
        cmocka_unit_test_teardown(releaser_does_not_barge, join_round),
        cmocka_unit_test_teardown(
            own_release_wakes_a_waiter_whose_subscriber_is_silent, end_silent),
        cmocka_unit_test(wait_ends_with_busy_at_the_deadline),
        cmocka_unit_test(busy_ttl_reports_the_holders_ttl),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
