/*
 * test_acquire_answer.c: how the client reads the acquire script's answer
 * (dlock__lock_acquire_answer, src/lib/lock/lock.c).
 *
 * The plain acquire script answers a grant, a refused grant and a free
 * key held back for fair waiters in words ("1 fence now", "2 now",
 * "0 -2 now"), which cost redis-server less than a table; its busy path
 * and the fair scripts answer tables.  Whatever the form, an answer is
 * believed only when it is exactly one of these: a grant with a fence of
 * 0, a word too many or too few, an empty word, a server time of 0, a
 * sign where a fence goes, or a busy answer in words with any hint but
 * the fair queue's is a protocol error, never a grant.  Replies are made
 * the way the client gets them, by hiredis's reader from RESP bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "lock/lock_internal.h"
#include "testkit.h"

/* The reply hiredis reads from resp (the caller frees it). */
static redisReply *reply_of(const char *resp)
{
    redisReply *r = testkit_reply_of(resp);

    assert_non_null(r);
    return r;
}

/* The bulk string reply of words. */
static redisReply *words(const char *text)
{
    char resp[256];

    snprintf(resp, sizeof(resp), "$%zu\r\n%s\r\n", strlen(text), text);
    return reply_of(resp);
}

/* dlock__lock_acquire_answer of r, which it frees. */
static int read_answer(redisReply *r, dlock__acquire_answer *a)
{
    int ok;

    memset(a, 0, sizeof(*a));
    ok = dlock__lock_acquire_answer(r, a);
    freeReplyObject(r);
    return ok;
}

static void a_grant_in_words_carries_its_fence_and_the_servers_time(
    void **state)
{
    dlock__acquire_answer a;

    (void)state;
    assert_true(read_answer(words("1 1733000000123457 1733000000123456"), &a));
    assert_int_equal(a.status, 1);
    assert_true(a.fence == 1733000000123457ULL);
    assert_true(a.now_us == 1733000000123456ULL);
    /* The largest fence a counter holds (19 digits). */
    assert_true(
        read_answer(words("1 9223372036854775807 1733000000123456"), &a));
    assert_true(a.fence == 9223372036854775807ULL);
}

static void a_refusal_and_the_fair_queues_hold_back_read_as_such(void **state)
{
    dlock__acquire_answer a;

    (void)state;
    assert_true(read_answer(words("2 1733000000123456"), &a));
    assert_int_equal(a.status, 2);
    assert_true(a.now_us == 1733000000123456ULL);
    assert_true(read_answer(words("0 -2 1733000000123456"), &a));
    assert_int_equal(a.status, 0);
    assert_int_equal(a.pttl, -2);
    assert_true(a.now_us == 1733000000123456ULL);
}

static void tables_read_as_before(void **state)
{
    dlock__acquire_answer a;

    (void)state;
    assert_true(read_answer(
        reply_of("*3\r\n:0\r\n:2500\r\n$16\r\n1733000000123456\r\n"), &a));
    assert_int_equal(a.status, 0);
    assert_int_equal(a.pttl, 2500);
    assert_true(read_answer(reply_of("*3\r\n:1\r\n$2\r\n42\r\n$16\r\n"
                                     "1733000000123456\r\n"),
                            &a));
    assert_int_equal(a.status, 1);
    assert_true(a.fence == 42);
    assert_true(read_answer(reply_of("*2\r\n:2\r\n$3\r\n123\r\n"), &a));
    assert_int_equal(a.status, 2);
}

static void anything_but_an_exact_answer_is_refused(void **state)
{
    static const char *const bad[] = {
        "",                        /* nothing */
        "1",                       /* no now */
        "1 1733000000123456",      /* a grant without its fence */
        "1 0 1733000000123456",    /* fence 0 is no fence */
        "1 42 0",                  /* nor is a time of 0 */
        "1 -42 1733000000123456",  /* a signed fence */
        "1 4x 1733000000123456",   /* not a number */
        "1 42 1733000000123456 7", /* a word too many */
        "1 42  1733000000123456",  /* an empty word */
        "1 42 1733000000123456 ",  /* a trailing space */
        " 1 42 1733000000123456",  /* a leading one */
        "1 99999999999999999999 1733000000123456", /* past 2^64 */
        "2 42 1733000000123456",   /* a refusal carries no fence */
        "0 2500 1733000000123456", /* a busy TTL comes in a table */
        "0 -1 1733000000123456",
        "0 1733000000123456",
        "3 42 1733000000123456", /* no such status */
        "11 42 1733000000123456",
    };
    dlock__acquire_answer a;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (read_answer(words(bad[i]), &a))
            fail_msg("\"%s\" was read as an answer (status %d)", bad[i],
                     a.status);
    }
    /* Tables: a fence of 0, a fence as a number, a short grant. */
    assert_false(
        read_answer(reply_of("*3\r\n:1\r\n$1\r\n0\r\n$3\r\n123\r\n"), &a));
    assert_false(
        read_answer(reply_of("*3\r\n:1\r\n:42\r\n$3\r\n123\r\n"), &a));
    assert_false(read_answer(reply_of("*2\r\n:1\r\n$3\r\n123\r\n"), &a));
    /* Neither words nor a table. */
    assert_false(read_answer(reply_of(":1\r\n"), &a));
    assert_false(read_answer(reply_of("-ERR no\r\n"), &a));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            a_grant_in_words_carries_its_fence_and_the_servers_time),
        cmocka_unit_test(a_refusal_and_the_fair_queues_hold_back_read_as_such),
        cmocka_unit_test(tables_read_as_before),
        cmocka_unit_test(anything_but_an_exact_answer_is_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
