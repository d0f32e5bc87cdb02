/*
 * test_pattern_idem.c: idempotency records (dlock/idem.h).
 *
 * The promise is "the work is done once and every caller gets its result":
 * a second caller while the first works is told it is in progress (or, if
 * it waits, gets the result as soon as the first completes: woken, not at
 * a poll); a later caller gets the stored bytes back exactly, NULs
 * included; a first caller that dies blocks the key only until its lease
 * runs out; an abort hands the work to the next caller; and a first caller
 * whose lease ran out can no longer store a result over the next one's.
 *
 * The waiting caller's state, thread and clients live in static storage
 * (the_wait), and end_wait, that case's teardown, completes the first
 * caller's record if the case did not (so the waiter returns), joins it
 * and frees what it used, whether the case passed or failed.
 */
#include "patkit.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static void forget(const char *name)
{
    char key[TESTKIT_KEY_MAX + 64];

    patkit_forget(patkit_pkey(key, "idem", name, ""), NULL);
}

static dlock_idem *begin_ok(dlock_client *c, const char *key, int64_t ttl,
                            dlock_idem_outcome want)
{
    dlock_idem *st = NULL;

    TK_EXPECT_ERR(dlock_idem_begin(c, key, ttl, &st), DLOCK_OK, c,
                  "beginning an idempotent request");
    TK_EXPECT(dlock_idem_status(st) == want, "the request is %s, got %s",
              want == DLOCK_IDEM_FIRST ? "FIRST" : "DONE",
              dlock_idem_status(st) == DLOCK_IDEM_FIRST ? "FIRST" : "DONE");
    return st;
}

static void a_later_caller_replays_the_stored_bytes(void **state)
{
    static const char receipt[] = "charge\0id=\xff\x01";
    dlock_client *c = patkit_client();
    char key[TESTKIT_KEY_MAX];
    dlock_idem *first, *later;
    const char *got;
    size_t len;

    (void)state;
    testkit_key(key, "idem_replay");
    first = begin_ok(c, key, 5000, DLOCK_IDEM_FIRST);
    TK_EXPECT(dlock_idem_valid_ms(first) > 4000,
              "a new lease of 5 s is "
              "known valid for most of it, got %lld ms",
              (long long)dlock_idem_valid_ms(first));
    TK_EXPECT(dlock_idem_result(first, &len) == NULL && len == 0,
              "a FIRST record has no result yet");
    TK_EXPECT_ERR(dlock_idem_complete(first, receipt, sizeof(receipt), 60000),
                  DLOCK_OK, c, "completing the first request");
    got = dlock_idem_result(first, &len);
    TK_EXPECT(len == sizeof(receipt) && memcmp(got, receipt, len) == 0,
              "the completer sees its own result");
    later = begin_ok(c, key, 5000, DLOCK_IDEM_DONE);
    got = dlock_idem_result(later, &len);
    TK_EXPECT(len == sizeof(receipt) && memcmp(got, receipt, len) == 0,
              "a retry gets the %zu stored bytes back exactly, got %zu",
              sizeof(receipt), len);
    TK_EXPECT(patkit_pttl(patkit_pkey((char[TESTKIT_KEY_MAX + 64]){0}, "idem",
                                      key, ""))
                  > 50000,
              "the done record is kept for keep_ms (60 s)");
    TK_EXPECT_ERR(dlock_idem_complete(later, "x", 1, 1000), DLOCK_STATE, c,
                  "completing a DONE record");
    dlock_idem_free(first);
    dlock_idem_free(later);
    forget(key);
    dlock_client_free(c);
}

static void a_concurrent_caller_is_told_it_is_in_progress(void **state)
{
    dlock_client *c = patkit_client();
    char key[TESTKIT_KEY_MAX];
    dlock_idem *first, *second = (dlock_idem *)1;
    int64_t busy;

    (void)state;
    testkit_key(key, "idem_in_progress");
    first = begin_ok(c, key, 5000, DLOCK_IDEM_FIRST);
    TK_EXPECT_ERR(dlock_idem_begin(c, key, 5000, &second), DLOCK_BUSY, c,
                  "a second request while the first works");
    TK_EXPECT(second == NULL, "a busy begin gives no record");
    busy = dlock_client_busy_ttl_ms(c);
    TK_EXPECT(busy > 0 && busy <= 5000,
              "the busy TTL is the first caller's "
              "remaining lease (0..5000 ms), got %lld",
              (long long)busy);
    TK_EXPECT(strstr(dlock_client_errmsg(c), key) != NULL,
              "the message names the key: %s", dlock_client_errmsg(c));
    TK_EXPECT_ERR(dlock_idem_abort(first), DLOCK_OK, c, "aborting");
    dlock_idem_free(first);
    forget(key);
    dlock_client_free(c);
}

typedef struct waiter {
    dlock_client *client;
    const char *key;
    dlock_err err;
    dlock_idem *st;
    int64_t done_us;
} waiter;

static void *wait_for_result(void *arg)
{
    waiter *w = arg;

    w->err = dlock_idem_begin_wait(w->client, w->key, 5000, 5000, &w->st);
    w->done_us = testkit_now_us();
    return NULL;
}

/* The waiting case's state, in static storage: a failed expectation
 * leaves the case by longjmp while the waiter still waits on a client and
 * a key the case made. */
typedef struct wait_case {
    waiter w;
    pthread_t thread;
    int running; /* started, not yet joined */
    dlock_client *c, *other;
    dlock_idem *first;
    char key[TESTKIT_KEY_MAX];
} wait_case;

static wait_case the_wait;

/* Teardown of the waiting case, passed or failed: a first record still
 * open is aborted (the waiter then becomes FIRST, or its 5 s wait runs
 * out), the waiter joined, and the records, key and clients freed. */
static int end_wait(void **state)
{
    wait_case *wc = &the_wait;

    (void)state;
    if (wc->first != NULL && dlock_idem_status(wc->first) == DLOCK_IDEM_FIRST)
        dlock_idem_abort(wc->first);
    if (wc->running)
        pthread_join(wc->thread, NULL);
    if (wc->w.st != NULL && dlock_idem_status(wc->w.st) == DLOCK_IDEM_FIRST)
        dlock_idem_abort(wc->w.st);
    dlock_idem_free(wc->first);
    dlock_idem_free(wc->w.st);
    if (wc->key[0] != '\0')
        forget(wc->key);
    dlock_client_free(wc->other);
    dlock_client_free(wc->c);
    memset(wc, 0, sizeof(*wc));
    return 0;
}

static void a_waiting_caller_gets_the_result_once_the_first_completes(
    void **state)
{
    wait_case *const wc = &the_wait;
    dlock_client *c, *other;
    char *const key = wc->key;
    char rkey[TESTKIT_KEY_MAX + 64];
    char channel[TESTKIT_KEY_MAX + 32];
    waiter *const w = &wc->w;
    int64_t completed;
    size_t len;

    (void)state;
    memset(wc, 0, sizeof(*wc));
    c = wc->c = patkit_client();
    other = wc->other = patkit_client();
    *w = (waiter){other, NULL, DLOCK_OK, NULL, 0};
    testkit_key(key, "idem_wait");
    patkit_pkey(rkey, "idem", key, "");
    w->key = key;
    wc->first = begin_ok(c, key, 10000, DLOCK_IDEM_FIRST);
    pthread_create(&wc->thread, NULL, wait_for_result, w);
    wc->running = 1;
    TK_EXPECT(patkit_wait_int_at_least(rkey, "waiters", 1, 3000),
              "the second caller registers as a waiter (in progress)");
    snprintf(channel, sizeof(channel), "dlock:idem:%s", key);
    TK_EXPECT(patkit_wait_subscribed(channel, 3000),
              "the waiter subscribes "
              "to %s",
              channel);
    completed = testkit_now_us();
    TK_EXPECT_ERR(dlock_idem_complete(wc->first, "ok", 2, 60000), DLOCK_OK, c,
                  "completing");
    pthread_join(wc->thread, NULL);
    wc->running = 0;
    TK_EXPECT(w->err == DLOCK_OK
                  && dlock_idem_status(w->st) == DLOCK_IDEM_DONE,
              "the waiter ends with DONE, got %s", dlock_errname(w->err));
    TK_EXPECT(memcmp(dlock_idem_result(w->st, &len), "ok", 2) == 0 && len == 2,
              "the waiter gets the first caller's result");
    print_message("waiter had the result %lld us after the completion\n",
                  (long long)(w->done_us - completed));
    TK_EXPECT(w->done_us - completed < 1000000,
              "the waiter is woken well "
              "before the 10 s lease could run out, got %lld us",
              (long long)(w->done_us - completed));
}

typedef struct retry {
    dlock_client *client;
    const char *key;
    dlock_idem *st;
} retry;

static int becomes_first(void *arg)
{
    retry *r = arg;

    if (dlock_idem_begin(r->client, r->key, 5000, &r->st) != DLOCK_OK)
        return 0;
    return dlock_idem_status(r->st) == DLOCK_IDEM_FIRST;
}

static void a_crashed_first_caller_blocks_only_until_its_lease_runs_out(
    void **state)
{
    dlock_client *c = patkit_client();
    char key[TESTKIT_KEY_MAX];
    retry r = {c, NULL, NULL};
    dlock_idem *crashed;
    int64_t began = testkit_now_us(), took_ms;

    (void)state;
    testkit_key(key, "idem_crash");
    r.key = key;
    crashed = begin_ok(c, key, 300, DLOCK_IDEM_FIRST);
    dlock_idem_free(crashed); /* dies: neither completes nor aborts */
    TK_EXPECT(!becomes_first(&r), "right after, the key is still in "
                                  "progress");
    TK_EXPECT(testkit_wait_until(becomes_first, &r, 3000),
              "after the 300 ms "
              "lease the next caller is FIRST");
    took_ms = (testkit_now_us() - began) / 1000;
    TK_EXPECT(took_ms >= 250, "not before the lease ran out (%lld ms)",
              (long long)took_ms);
    TK_EXPECT_ERR(dlock_idem_abort(r.st), DLOCK_OK, c, "aborting");
    dlock_idem_free(r.st);
    forget(key);
    dlock_client_free(c);
}

static void an_abort_makes_the_next_caller_first(void **state)
{
    dlock_client *c = patkit_client();
    char key[TESTKIT_KEY_MAX];
    dlock_idem *first, *next;

    (void)state;
    testkit_key(key, "idem_abort");
    first = begin_ok(c, key, 5000, DLOCK_IDEM_FIRST);
    TK_EXPECT_ERR(dlock_idem_abort(first), DLOCK_OK, c, "aborting");
    TK_EXPECT_ERR(dlock_idem_abort(first), DLOCK_STATE, c, "aborting twice");
    next = begin_ok(c, key, 5000, DLOCK_IDEM_FIRST);
    TK_EXPECT_ERR(dlock_idem_complete(next, NULL, 0, 0), DLOCK_OK, c,
                  "completing with an empty result kept without expiry");
    TK_EXPECT(patkit_pttl(patkit_pkey((char[TESTKIT_KEY_MAX + 64]){0}, "idem",
                                      key, ""))
                  == -1,
              "keep_ms 0 keeps the record without a TTL");
    dlock_idem_free(first);
    dlock_idem_free(next);
    forget(key);
    dlock_client_free(c);
}

static void a_first_caller_past_its_lease_cannot_complete(void **state)
{
    dlock_client *c = patkit_client();
    char key[TESTKIT_KEY_MAX], rkey[TESTKIT_KEY_MAX + 64];
    dlock_idem *slow, *next, *later;
    size_t len;

    (void)state;
    testkit_key(key, "idem_lost");
    patkit_pkey(rkey, "idem", key, "");
    slow = begin_ok(c, key, 100, DLOCK_IDEM_FIRST);
    TK_EXPECT(patkit_wait_gone(rkey, 2000), "the 100 ms lease runs out");
    next = begin_ok(c, key, 5000, DLOCK_IDEM_FIRST);
    TK_EXPECT_ERR(dlock_idem_complete(slow, "old", 3, 60000), DLOCK_LOST, c,
                  "completing after the lease ran out");
    TK_EXPECT_ERR(dlock_idem_extend(next, 8000), DLOCK_OK, c, "extending");
    TK_EXPECT(patkit_pttl(rkey) > 7000, "extend set the lease to 8 s");
    TK_EXPECT_ERR(dlock_idem_complete(next, "new", 3, 60000), DLOCK_OK, c,
                  "the current first caller completes");
    later = begin_ok(c, key, 5000, DLOCK_IDEM_DONE);
    TK_EXPECT(memcmp(dlock_idem_result(later, &len), "new", 3) == 0,
              "the stored result is the current first caller's");
    dlock_idem_free(slow);
    dlock_idem_free(next);
    dlock_idem_free(later);
    forget(key);
    dlock_client_free(c);
}

static void bad_arguments_are_refused(void **state)
{
    dlock_client *c = patkit_client();
    dlock_idem *st = (dlock_idem *)1;

    (void)state;
    TK_EXPECT_ERR(dlock_idem_begin(c, "", 1000, &st), DLOCK_INVALID, c,
                  "an empty key");
    TK_EXPECT(st == NULL, "a failed begin sets *out to NULL");
    TK_EXPECT_ERR(dlock_idem_begin(c, "k", 0, &st), DLOCK_INVALID, c,
                  "a zero lease");
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_later_caller_replays_the_stored_bytes),
        cmocka_unit_test(a_concurrent_caller_is_told_it_is_in_progress),
        cmocka_unit_test_teardown(
            a_waiting_caller_gets_the_result_once_the_first_completes,
            end_wait),
        cmocka_unit_test(
            a_crashed_first_caller_blocks_only_until_its_lease_runs_out),
        cmocka_unit_test(an_abort_makes_the_next_caller_first),
        cmocka_unit_test(a_first_caller_past_its_lease_cannot_complete),
        cmocka_unit_test(bad_arguments_are_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
