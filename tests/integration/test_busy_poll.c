/*
 * test_busy_poll.c: dlock_client_opts.busy_poll_us, the client that reads
 * without sleeping for a while before it sleeps for a reply.
 *
 * Busy polling changes how a thread waits, never what a reply means or
 * when a call gives up, so each case checks one of those against a real
 * redis-server, with the client's own counters (busy_polls: waits that
 * polled; busy_poll_hits: those whose reply came while polling) as the
 * witness that the option did, or did not, take effect:
 *
 *   - a budget out of 0..1000 us is refused by dlock_client_new;
 *   - a default client never polls;
 *   - a polling client catches replies while polling (on a machine with a
 *     CPU to spare: with one CPU it must never poll, as the option says)
 *     and every pair is still a grant with a rising fence and a release;
 *   - a silent server (a paused proxy: bytes held, no reset) still fails
 *     the call by its I/O deadline, with nothing claimed held, and the
 *     client works again once the link does;
 *   - replies slower than the budget (a proxy that delays each by 5 ms)
 *     make the connection back off: far fewer polls than waits.
 *
 * None of these depends on the machine's speed: a hit needs one reply in
 * 1 ms among up to thousands of round trips, given 20 s to come; the
 * deadline case bounds the failure from both sides with wide margins.
 */
#include "itkit.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define BUDGET_US 1000

static dlock_client_opts polling_opts(int busy_poll_us)
{
    dlock_client_opts co = itkit_client_opts();

    co.busy_poll_us = busy_poll_us;
    return co;
}

static dlock_client_stats stats_of(const dlock_client *c)
{
    dlock_client_stats s;

    dlock_client_stats_get(c, &s);
    return s;
}

/* One acquire + release on key that must succeed with a fence above
 * *last_fence, which it then raises. */
static void pair_must_work(dlock_client *c, const char *key,
                           uint64_t *last_fence)
{
    dlock_acquire_opts o = itkit_acquire_opts(10000, 0);
    dlock_lock *l = itkit_acquire(c, key, &o);
    const uint64_t fence = dlock_lock_fence(l);

    TK_EXPECT(fence > *last_fence, "fence %llu above the last %llu",
              (unsigned long long)fence, (unsigned long long)*last_fence);
    *last_fence = fence;
    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, c, "the release");
}

static void budgets_out_of_range_are_refused(void **state)
{
    const int bad[] = {-1, BUDGET_US + 1, 1000000};

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        dlock_client_opts co = polling_opts(bad[i]);
        dlock_client *c = NULL;
        char why[DLOCK_ERRMSG_MAX] = "";
        const dlock_err err = dlock_client_new(itkit_shared_url(), &co, &c,
                                               why, sizeof(why));

        TK_EXPECT(err == DLOCK_INVALID && c == NULL,
                  "busy_poll_us %d is refused with DLOCK_INVALID, got %s",
                  bad[i], dlock_errname(err));
        TK_EXPECT(strstr(why, "busy_poll_us") != NULL,
                  "the message names the option: \"%s\"", why);
    }
}

static void a_default_client_never_busy_polls(void **state)
{
    dlock_client *c = itkit_client(itkit_shared_url(), NULL);
    char key[TESTKIT_KEY_MAX];
    uint64_t fence = 0;

    (void)state;
    testkit_key(key, "busy-default");
    for (int i = 0; i < 200; i++)
        pair_must_work(c, key, &fence);
    TK_EXPECT(stats_of(c).busy_polls == 0, "no wait polled, got %llu",
              (unsigned long long)stats_of(c).busy_polls);
    dlock_client_free(c);
}

static void a_polling_client_catches_replies_and_keeps_every_guarantee(
    void **state)
{
    const dlock_client_opts co = polling_opts(BUDGET_US);
    dlock_client *c = itkit_client(itkit_shared_url(), &co);
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const int64_t until = testkit_now_ms() + 20000;
    char key[TESTKIT_KEY_MAX];
    uint64_t fence = 0;
    int pairs = 0;

    (void)state;
    testkit_key(key, "busy-hits");
    while (pairs < 1000
           || (cpus > 1 && stats_of(c).busy_poll_hits == 0
               && testkit_now_ms() < until)) {
        pair_must_work(c, key, &fence);
        pairs++;
    }
    const dlock_client_stats s = stats_of(c);
    if (cpus > 1) {
        TK_EXPECT(s.busy_poll_hits > 0,
                  "some reply of %d pairs came while polling (%llu polls)",
                  pairs, (unsigned long long)s.busy_polls);
        TK_EXPECT(s.busy_poll_hits <= s.busy_polls,
                  "hits %llu within polls %llu",
                  (unsigned long long)s.busy_poll_hits,
                  (unsigned long long)s.busy_polls);
    } else {
        TK_EXPECT(s.busy_polls == 0, "with one CPU no thread polls, got %llu",
                  (unsigned long long)s.busy_polls);
    }
    dlock_client_free(c);
}

static void a_silent_server_still_fails_by_the_deadline(void **state)
{
    testkit_proxied *link = itkit_proxied("busy-silent");
    dlock_client_opts co = polling_opts(BUDGET_US);
    dlock_client *c;
    char key[TESTKIT_KEY_MAX];
    dlock_acquire_opts o = itkit_acquire_opts(10000, 0);
    dlock_lock *l = NULL;
    uint64_t fence = 0;

    (void)state;
    co.io_timeout_ms = 300;
    c = itkit_client(link->url, &co);
    testkit_key(key, "busy-silent");
    pair_must_work(c, key, &fence);
    TK_EXPECT(testkit_proxy_ctl(link->proxy, "pause") == 0,
              "the proxy pauses");
    const int64_t t0 = testkit_now_ms();
    const dlock_err err = dlock_acquire(c, key, &o, &l);
    const int64_t took = testkit_now_ms() - t0;
    TK_EXPECT(err == DLOCK_TIMEOUT || err == DLOCK_UNAVAILABLE,
              "the acquire fails on silence, got %s: %s", dlock_errname(err),
              dlock_client_errmsg(c));
    TK_EXPECT(l == NULL, "no lock is handed out");
    TK_EXPECT(took >= 250 && took < 5000,
              "it gave up at its 300 ms deadline, after %lld ms",
              (long long)took);
    TK_EXPECT(testkit_proxy_ctl(link->proxy, "resume") == 0,
              "the proxy resumes");
    /* The key may hold the orphan of the timed-out acquire until the
     * library undoes it; a fresh key shows the client works again. */
    testkit_key(key, "busy-silent-after");
    fence = 0;
    pair_must_work(c, key, &fence);
    dlock_client_free(c);
    testkit_proxied_free(link);
}

static void replies_slower_than_the_budget_make_it_back_off(void **state)
{
    testkit_proxied *link = itkit_proxied("busy-slow");
    const dlock_client_opts co = polling_opts(BUDGET_US);
    dlock_client *c;
    char key[TESTKIT_KEY_MAX];
    uint64_t fence = 0;

    (void)state;
    c = itkit_client(link->url, &co);
    testkit_key(key, "busy-slow");
    TK_EXPECT(testkit_proxy_ctl(link->proxy, "delay 5") == 0,
              "the proxy delays every reply by 5 ms");
    const dlock_client_stats before = stats_of(c);
    for (int i = 0; i < 150; i++)
        pair_must_work(c, key, &fence);
    const dlock_client_stats after = stats_of(c);
    const unsigned long long waits = after.commands - before.commands,
                             polls = after.busy_polls - before.busy_polls;
    /* Without the back-off every wait would poll its full budget. */
    TK_EXPECT(waits >= 300 && polls * 4 < waits,
              "%llu of %llu waits polled: the back-off skips most", polls,
              waits);
    TK_EXPECT(testkit_proxy_ctl(link->proxy, "delay 0") == 0, "no delay");
    dlock_client_free(c);
    testkit_proxied_free(link);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(budgets_out_of_range_are_refused),
        cmocka_unit_test(a_default_client_never_busy_polls),
        cmocka_unit_test(
            a_polling_client_catches_replies_and_keeps_every_guarantee),
        cmocka_unit_test(a_silent_server_still_fails_by_the_deadline),
        cmocka_unit_test(replies_slower_than_the_budget_make_it_back_off),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
