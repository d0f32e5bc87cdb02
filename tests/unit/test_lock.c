/*
 * test_lock.c: lock.c's renewal interface and its reentrant registry.
 *
 * Replies are real RESP bytes run through hiredis's reader, so the shapes
 * are exactly what a server sends: the extend script's "1 sec usec"
 * (and the table {1, sec, usec} it answered before), its 0 (token gone),
 * an error, and no reply at all; words that are not exactly a renewal's
 * answer renew nothing.  The lock is an
 * attached one on a client of the shared stack's Redis; nothing here
 * needs the key to exist.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "base/alloc.h"
#include "dlock/dlock.h"
#include "lock/lock_internal.h"
#include "testkit.h"

#define TOKEN "0123456789abcdef0123456789abcdef"

static redisReply *parse(const char *resp)
{
    redisReply *r = testkit_reply_of(resp);

    assert_non_null(r);
    return r;
}

typedef struct fixture {
    dlock_client *c;
    dlock_lock *l;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    char err[DLOCK_ERRMSG_MAX];

    if (f == NULL
        || dlock_client_new(testkit_shared_redis(), NULL, &f->c, err,
                            sizeof(err))
               != DLOCK_OK)
        return -1;
    if (dlock_lock_attach(f->c, "t:unit:lock", TOKEN, &f->l) != DLOCK_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;

    dlock_lock_free(f->l);
    dlock_client_free(f->c);
    free(f);
    return 0;
}

/* One renewal of f's lock, its request formatted and answered with r
 * (NULL: no answer); what the lock made of the answer. */
static dlock_err renew_answered(fixture *f, redisReply *r, int *marked)
{
    dlock__lease_ticket t;
    char *cmd;

    assert_true(dlock__lock_renew_command(f->l, &cmd, &t) > 0);
    free(cmd);
    return dlock__lock_renew_reply(f->l, &t, r, dlock__boot_us(), marked);
}

static void a_renewal_request_is_an_eval_of_key_token_and_ttl(void **state)
{
    fixture *f = *state;
    dlock__lease_ticket t;
    char *cmd;
    long long len = dlock__lock_renew_command(f->l, &cmd, &t);

    assert_true(len > 0);
    assert_non_null(strstr(cmd, "EVAL"));
    assert_non_null(strstr(cmd, "t:unit:lock"));
    assert_non_null(strstr(cmd, TOKEN));
    assert_non_null(strstr(cmd, "\r\n30000\r\n")); /* attached: 30 s */
    free(cmd);
    dlock__lease_end(dlock__lock_lease(f->l), &t, DLOCK__LEASE_NOT_RUN);
}

/* A granted renewal, in the words the extend script answers now and in
 * the table it answered before. */
static void a_granted_renewal_makes_the_lock_valid(void **state)
{
    static const char *const granted[] = {
        "$19\r\n1 1700000000 123456\r\n",
        "*3\r\n:1\r\n$10\r\n1700000000\r\n$6\r\n123456\r\n",
    };
    fixture *f = *state;

    for (size_t i = 0; i < sizeof(granted) / sizeof(granted[0]); i++) {
        redisReply *r = parse(granted[i]);
        int marked = 1;

        assert_int_equal(renew_answered(f, r, &marked), DLOCK_OK);
        assert_int_equal(marked, 0);
        assert_true(dlock_lock_valid_ms(f->l) > 29000);
        assert_int_equal(dlock_lock_lost(f->l), 0);
        freeReplyObject(r);
    }
}

/* Words that are not exactly "1 seconds microseconds" renew nothing: the
 * lock is neither made valid nor marked lost. */
static void a_renewal_answer_not_exactly_in_words_is_no_renewal(void **state)
{
    static const char *const bad[] = {
        "1",
        "1 1700000000",
        "1 1700000000 123456 7",
        "1 1700000000  123456",
        "1 1700000000 123456 ",
        "0 1700000000 123456",
        "1 0 123456",
        "1 1700000000 1000000",
        "1 -1700000000 123456",
        "1 17000000x0 123456",
        "1 99999999999999999999 1",
    };
    fixture *f = *state;
    int64_t before = dlock_lock_valid_ms(f->l);

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char resp[128];
        redisReply *r;
        int marked = 1;

        snprintf(resp, sizeof(resp), "$%zu\r\n%s\r\n", strlen(bad[i]), bad[i]);
        r = parse(resp);
        if (renew_answered(f, r, &marked) != DLOCK_PROTOCOL)
            fail_msg("\"%s\" was taken for a renewal's answer", bad[i]);
        assert_int_equal(marked, 0);
        freeReplyObject(r);
    }
    assert_true(dlock_lock_valid_ms(f->l) <= before);
    assert_int_equal(dlock_lock_lost(f->l), 0);
}

static void no_answer_or_an_error_is_no_renewal(void **state)
{
    fixture *f = *state;
    redisReply *err = parse("-ERR boom\r\n");
    int marked;

    assert_int_equal(renew_answered(f, NULL, &marked), DLOCK_TIMEOUT);
    assert_int_equal(renew_answered(f, err, &marked), DLOCK_SERVER);
    assert_int_equal(dlock_lock_lost(f->l), 0);
    freeReplyObject(err);
}

static void a_gone_token_marks_the_lock_lost_once(void **state)
{
    fixture *f = *state;
    redisReply *r = parse(":0\r\n");
    int marked = 0;
    dlock_client_stats st;

    assert_int_equal(renew_answered(f, r, &marked), DLOCK_LOST);
    assert_int_equal(marked, 1);
    assert_int_equal(dlock__lock_mark_lost(f->l), 0);
    assert_int_equal(dlock_lock_lost(f->l), 1);
    assert_int_equal(dlock_lock_valid_ms(f->l), 0);
    dlock_client_stats_get(f->c, &st);
    assert_int_equal(st.locks_lost, 1);
    freeReplyObject(r);
}

static void the_reentrant_registry_reports_nomem(void **state)
{
    dlock__reentry *r = NULL;
    dlock__msg m;

    (void)state;
    dlock__alloc_fail_nth(1);
    assert_int_equal(dlock__reentry_new(&r, &m), DLOCK_NOMEM);
    dlock__alloc_fail_nth(0);
    assert_null(r);
    assert_int_equal(dlock__reentry_new(&r, &m), DLOCK_OK);
    dlock__reentry_free(r);
    dlock__reentry_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_renewal_request_is_an_eval_of_key_token_and_ttl, setup,
            teardown),
        cmocka_unit_test_setup_teardown(a_granted_renewal_makes_the_lock_valid,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_renewal_answer_not_exactly_in_words_is_no_renewal, setup,
            teardown),
        cmocka_unit_test_setup_teardown(no_answer_or_an_error_is_no_renewal,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_gone_token_marks_the_lock_lost_once,
                                        setup, teardown),
        cmocka_unit_test(the_reentrant_registry_reports_nomem),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
