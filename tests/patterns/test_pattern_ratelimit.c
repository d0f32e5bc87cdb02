/*
 * test_pattern_ratelimit.c: the GCRA rate limiter (dlock/ratelimit.h).
 *
 * An idle limiter lets the burst through at once and then refuses, saying
 * how long until the next slot (one emission interval at most).  The
 * decision is made on the server's clock: the time it reports lies between
 * two TIME readings taken around it, and the arrival time it stores is that
 * server time plus the interval, exactly, so no client clock took part.
 * dlock_ratelimit_wait reserves the next slot in the same call and sleeps
 * just that long; one that would have to wait longer than allowed returns
 * at once and reserves nothing.  Under 4 threads asking as fast as they
 * can for 0.6 s, the slots granted (by the server's clock) never exceed
 * W/T + burst in any window W, and come close to the rate.
 *
 * The senders' run lives in static storage (the_run), and end_run, that
 * case's teardown, joins them and frees their limiters and clients
 * whether the case passed or failed.
 */
#include "patkit.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testkit_threads.h"

static void forget(const char *name)
{
    char k[TESTKIT_KEY_MAX + 64];

    patkit_forget(patkit_pkey(k, "rl", name, ""), NULL);
}

static dlock_ratelimit *limiter(dlock_client *c, const char *name,
                                int64_t rate, int64_t period_ms, int64_t burst)
{
    dlock_ratelimit *rl = NULL;

    TK_EXPECT_ERR(dlock_ratelimit_new(c, name, rate, period_ms, burst, &rl),
                  DLOCK_OK, c, "making a rate limiter");
    return rl;
}

static void the_burst_goes_at_once_then_the_wait_is_told(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX];
    dlock_ratelimit *rl;
    dlock_ratelimit_result res;

    (void)state;
    testkit_key(name, "rl_burst");
    rl = limiter(c, name, 10, 1000, 3);
    TK_EXPECT(dlock_ratelimit_interval_us(rl) == 100000, "10 per second is "
                                                         "one per 100 ms");
    for (int i = 0; i < 3; i++) {
        TK_EXPECT_ERR(dlock_ratelimit_take(rl, 1, &res), DLOCK_OK, c,
                      "a request within the burst");
        TK_EXPECT(res.allowed && res.wait_us == 0 && res.remaining == 2 - i,
                  "request %d is allowed at once with %d left, got allowed "
                  "%d wait %lld remaining %lld",
                  i, 2 - i, res.allowed, (long long)res.wait_us,
                  (long long)res.remaining);
    }
    TK_EXPECT_ERR(dlock_ratelimit_take(rl, 1, &res), DLOCK_BUSY, c,
                  "the request after the burst");
    TK_EXPECT(!res.allowed && res.wait_us > 0 && res.wait_us <= 100000,
              "it is told to wait at most one interval, got %lld us",
              (long long)res.wait_us);
    TK_EXPECT(dlock_client_busy_ttl_ms(c) == (res.wait_us + 999) / 1000,
              "the busy TTL says the same in ms");
    dlock_ratelimit_free(rl);
    forget(name);
    dlock_client_free(c);
}

static void decisions_use_the_servers_clock(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX], key[TESTKIT_KEY_MAX + 64];
    dlock_ratelimit *rl;
    dlock_ratelimit_result res;
    int64_t before, after;

    (void)state;
    testkit_key(name, "rl_server_time");
    patkit_pkey(key, "rl", name, "");
    rl = limiter(c, name, 5, 1000, 1);
    before = patkit_server_time_us();
    TK_EXPECT_ERR(dlock_ratelimit_take(rl, 1, &res), DLOCK_OK, c, "taking");
    after = patkit_server_time_us();
    TK_EXPECT(before > 0 && before <= res.server_time_us
                  && res.server_time_us <= after,
              "the decision's time %lld lies "
              "between the server's TIME before (%lld) and after (%lld)",
              (long long)res.server_time_us, (long long)before,
              (long long)after);
    TK_EXPECT(patkit_int(key, NULL) == res.server_time_us + 200000,
              "the stored arrival time is the server's time plus one "
              "interval exactly: %lld, got %lld",
              (long long)(res.server_time_us + 200000), patkit_int(key, NULL));
    TK_EXPECT(patkit_pttl(key) > 0 && patkit_pttl(key) <= 201,
              "the key lives until the limiter is idle again (~200 ms)");
    dlock_ratelimit_free(rl);
    forget(name);
    dlock_client_free(c);
}

static void wait_reserves_the_next_slot_and_sleeps_until_it(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX];
    dlock_ratelimit *rl;
    dlock_ratelimit_result first, res;
    int64_t started, slept;

    (void)state;
    testkit_key(name, "rl_wait");
    rl = limiter(c, name, 20, 1000, 1);
    TK_EXPECT_ERR(dlock_ratelimit_take(rl, 1, &first), DLOCK_OK, c, "taking");
    started = testkit_now_us();
    TK_EXPECT_ERR(dlock_ratelimit_wait(rl, 1, 1000, &res), DLOCK_OK, c,
                  "waiting for the next slot");
    slept = testkit_now_us() - started;
    TK_EXPECT(res.allowed && res.wait_us > 0 && res.wait_us <= 50000,
              "the slot is at most one interval (50 ms) away, got %lld us",
              (long long)res.wait_us);
    TK_EXPECT(slept >= res.wait_us,
              "the call returns no earlier than the "
              "slot (%lld us), returned after %lld us",
              (long long)res.wait_us, (long long)slept);
    TK_EXPECT(res.server_time_us + res.wait_us == first.server_time_us + 50000,
              "the reserved slot is exactly "
              "one interval after the first request");
    dlock_ratelimit_free(rl);
    forget(name);
    dlock_client_free(c);
}

static void a_wait_beyond_the_limit_returns_at_once_and_takes_nothing(
    void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX], key[TESTKIT_KEY_MAX + 64];
    dlock_ratelimit *rl;
    dlock_ratelimit_result res;
    long long tat;
    int64_t started;

    (void)state;
    testkit_key(name, "rl_timeout");
    patkit_pkey(key, "rl", name, "");
    rl = limiter(c, name, 1, 10000, 1);
    TK_EXPECT_ERR(dlock_ratelimit_take(rl, 1, &res), DLOCK_OK, c, "taking");
    tat = patkit_int(key, NULL);
    started = testkit_now_us();
    TK_EXPECT_ERR(dlock_ratelimit_wait(rl, 1, 100, &res), DLOCK_TIMEOUT, c,
                  "waiting 100 ms for a slot 10 s away");
    TK_EXPECT(testkit_now_us() - started < 1000000, "it does not sleep");
    TK_EXPECT(res.wait_us > 9000000,
              "it says the slot is ~10 s away, got "
              "%lld us",
              (long long)res.wait_us);
    TK_EXPECT(patkit_int(key, NULL) == tat, "nothing was reserved");
    dlock_ratelimit_free(rl);
    forget(name);
    dlock_client_free(c);
}

#define SENDERS 4
#define RUN_US 600000
#define MAX_SLOTS 1000

typedef struct run {
    dlock_ratelimit *rl[2];
    int64_t until_us;
    atomic_int n;
    int64_t slots[MAX_SLOTS];
    atomic_int errors;
    testkit_threads senders;
    dlock_client *c[2];
    char name[TESTKIT_KEY_MAX];
} run;

/* The senders' run, in static storage: a failed expectation leaves the
 * case by longjmp while they may still send, and end_run joins them
 * (each stops at until_us) before it frees the limiters and clients. */
static run the_run;

/* Teardown of the senders' case, passed or failed. */
static int end_run(void **state)
{
    run *r = &the_run;

    (void)state;
    testkit_threads_join_all(&r->senders);
    dlock_ratelimit_free(r->rl[0]);
    dlock_ratelimit_free(r->rl[1]);
    if (r->name[0] != '\0')
        forget(r->name);
    dlock_client_free(r->c[0]);
    dlock_client_free(r->c[1]);
    memset(r, 0, sizeof(*r));
    return 0;
}

static void *send_fast(void *arg)
{
    static atomic_int next_id;
    run *r = arg;
    dlock_ratelimit *rl = r->rl[atomic_fetch_add(&next_id, 1) % 2];

    while (testkit_now_us() < r->until_us) {
        dlock_ratelimit_result res;
        int i;

        if (dlock_ratelimit_wait(rl, 1, 1000, &res) != DLOCK_OK) {
            atomic_fetch_add(&r->errors, 1);
            continue;
        }
        i = atomic_fetch_add(&r->n, 1);
        if (i < MAX_SLOTS)
            r->slots[i] = res.server_time_us + res.wait_us;
    }
    return NULL;
}

static int by_time(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* The most slots in any window of window_us starting at a slot. */
static int busiest_window(const int64_t *slots, int n, int64_t window_us)
{
    int most = 0;

    for (int i = 0, j = 0; i < n; i++) {
        while (j < n && slots[j] < slots[i] + window_us)
            j++;
        if (j - i > most)
            most = j - i;
    }
    return most;
}

static void many_senders_share_one_rate(void **state)
{
    run *const r = &the_run;
    dlock_client **const c = r->c;
    char *const name = r->name;
    int n, most;

    (void)state;
    memset(r, 0, sizeof(*r));
    c[0] = patkit_client();
    c[1] = patkit_client();
    testkit_key(name, "rl_share");
    r->rl[0] = limiter(c[0], name, 100, 1000, 5); /* T = 10 ms */
    r->rl[1] = limiter(c[1], name, 100, 1000, 5);
    r->until_us = testkit_now_us() + RUN_US;
    for (int i = 0; i < SENDERS; i++)
        testkit_threads_start(&r->senders, send_fast, r);
    testkit_threads_join_all(&r->senders);
    n = atomic_load(&r->n);
    TK_EXPECT(atomic_load(&r->errors) == 0 && n <= MAX_SLOTS,
              "no call fails (%d did)", atomic_load(&r->errors));
    qsort(r->slots, (size_t)n, sizeof(r->slots[0]), by_time);
    most = busiest_window(r->slots, n, 200000);
    print_message("%d slots in %d ms; busiest 200 ms window: %d (limit "
                  "%d)\n",
                  n, RUN_US / 1000, most, 20 + 5);
    TK_EXPECT(most <= 20 + 5,
              "no 200 ms window of server time holds more "
              "than 200/10 + burst 5 slots, saw %d",
              most);
    TK_EXPECT(busiest_window(r->slots, n, 10000) <= 1 + 5,
              "nor any 10 ms "
              "window more than 1 + burst");
    TK_EXPECT(n >= 50,
              "the senders get close to the rate: at least 50 of "
              "~65 slots in 0.6 s, got %d",
              n);
}

static void bad_arguments_are_refused(void **state)
{
    dlock_client *c = patkit_client();
    dlock_ratelimit *rl = (dlock_ratelimit *)1;

    (void)state;
    TK_EXPECT_ERR(dlock_ratelimit_new(c, "x", 0, 1000, 1, &rl), DLOCK_INVALID,
                  c, "a zero rate");
    TK_EXPECT(rl == NULL, "a failed new sets *out to NULL");
    TK_EXPECT_ERR(dlock_ratelimit_new(c, "x", 2000, 1, 1, &rl), DLOCK_INVALID,
                  c, "more than one per microsecond");
    TK_EXPECT_ERR(dlock_ratelimit_new(c, "x", 10, 1000, 0, &rl), DLOCK_INVALID,
                  c, "a zero burst");
    rl = limiter(c, "x", 10, 1000, 2);
    TK_EXPECT_ERR(dlock_ratelimit_take(rl, 3, NULL), DLOCK_INVALID, c,
                  "a cost above the burst");
    TK_EXPECT_ERR(dlock_ratelimit_wait(rl, 0, 10, NULL), DLOCK_INVALID, c,
                  "a zero cost");
    dlock_ratelimit_free(rl);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_burst_goes_at_once_then_the_wait_is_told),
        cmocka_unit_test(decisions_use_the_servers_clock),
        cmocka_unit_test(wait_reserves_the_next_slot_and_sleeps_until_it),
        cmocka_unit_test(
            a_wait_beyond_the_limit_returns_at_once_and_takes_nothing),
        cmocka_unit_test_teardown(many_senders_share_one_rate, end_run),
        cmocka_unit_test(bad_arguments_are_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
