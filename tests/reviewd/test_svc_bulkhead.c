/*
 * test_svc_bulkhead.c: the breaker and the cap of svc_bulkhead.h, and
 * the thread's deadline of svc_deadline.h, without a server.
 *
 *   - the breaker opens after `failures` unreachable calls in a row, not
 *     before, and a reached call in between resets the count;
 *   - open, it refuses; after open_ms exactly one trial goes through
 *     (half-open); the trial's failure reopens, its success closes;
 *   - the cap refuses the call beyond max_concurrent only while the
 *     server is failing: a healthy one is never refused;
 *   - a deadline bounds svc_deadline_left_ms, tighten lowers and restore
 *     gives it back, and no deadline means the cap (or -1).
 * The breaker's open_ms is waited out with a bounded wait on its state,
 * never a fixed sleep.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "svc_bulkhead.h"
#include "svc_deadline.h"
#include "testkit.h"

#define OPEN_MS 50

static int admits(void *arg)
{
    svc_bulkhead *b = arg;

    if (svc_bulkhead_enter(b) != SVC_BULKHEAD_OK)
        return 0;
    return 1; /* entered: the caller leaves */
}

static void breaker_opens_after_failures_in_a_row(void **state)
{
    svc_bulkhead *b = svc_bulkhead_new("t", 8, 3, OPEN_MS);
    svc_bulkhead_stats st;

    (void)state;
    assert_non_null(b);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(svc_bulkhead_enter(b), SVC_BULKHEAD_OK);
        svc_bulkhead_leave(b, 0);
    }
    assert_int_equal(svc_bulkhead_enter(b), SVC_BULKHEAD_OK);
    svc_bulkhead_leave(b, 1); /* reached: the count starts again */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(svc_bulkhead_enter(b), SVC_BULKHEAD_OK);
        svc_bulkhead_leave(b, 0);
    }
    svc_bulkhead_stats_get(b, &st);
    assert_int_equal(st.state, SVC_BREAKER_CLOSED);
    assert_int_equal(svc_bulkhead_enter(b), SVC_BULKHEAD_OK);
    svc_bulkhead_leave(b, 0);
    svc_bulkhead_stats_get(b, &st);
    assert_int_equal(st.state, SVC_BREAKER_OPEN);
    assert_int_equal(st.opened, 1);
    assert_int_equal(svc_bulkhead_enter(b), SVC_BULKHEAD_OPEN);

    /* Half-open: one trial, the next caller still refused. */
    assert_true(testkit_wait_until(admits, b, 5000));
    assert_int_equal(svc_bulkhead_enter(b), SVC_BULKHEAD_OPEN);
    svc_bulkhead_leave(b, 0); /* the trial failed: open again */
    svc_bulkhead_stats_get(b, &st);
    assert_int_equal(st.state, SVC_BREAKER_OPEN);
    assert_int_equal(st.opened, 2);

    assert_true(testkit_wait_until(admits, b, 5000));
    svc_bulkhead_leave(b, 1); /* the trial reached it: closed */
    svc_bulkhead_stats_get(b, &st);
    assert_int_equal(st.state, SVC_BREAKER_CLOSED);
    assert_int_equal(st.in_flight, 0);
    assert_int_equal(svc_bulkhead_enter(b), SVC_BULKHEAD_OK);
    svc_bulkhead_leave(b, 1);
    svc_bulkhead_free(b);
}

static void cap_holds_only_while_failing(void **state)
{
    svc_bulkhead *b = svc_bulkhead_new("t", 2, 5, OPEN_MS);
    svc_bulkhead_stats st;
    char why[160];

    (void)state;
    assert_non_null(b);
    /* Healthy: a burst past the cap goes through. */
    for (int i = 0; i < 4; i++)
        assert_int_equal(svc_bulkhead_enter(b), SVC_BULKHEAD_OK);
    for (int i = 0; i < 4; i++)
        svc_bulkhead_leave(b, 1);
    /* One failure: now at most 2 wait. */
    assert_int_equal(svc_bulkhead_enter(b), SVC_BULKHEAD_OK);
    svc_bulkhead_leave(b, 0);
    assert_int_equal(svc_bulkhead_enter(b), SVC_BULKHEAD_OK);
    assert_int_equal(svc_bulkhead_enter(b), SVC_BULKHEAD_OK);
    assert_int_equal(svc_bulkhead_enter(b), SVC_BULKHEAD_FULL);
    svc_bulkhead_describe(b, SVC_BULKHEAD_FULL, why, sizeof(why));
    assert_non_null(strstr(why, "t: 2 calls"));
    svc_bulkhead_stats_get(b, &st);
    assert_int_equal(st.in_flight, 2);
    assert_int_equal(st.refused_full, 1);
    svc_bulkhead_leave(b, 1);
    svc_bulkhead_leave(b, 1);
    svc_bulkhead_free(b);
    svc_bulkhead_free(NULL);
}

static void deadline_bounds_the_wait(void **state)
{
    int64_t outer;

    (void)state;
    svc_deadline_clear();
    assert_int_equal(svc_deadline_left_ms(0), -1);
    assert_int_equal(svc_deadline_left_ms(700), 700);
    svc_deadline_start(60000);
    assert_true(svc_deadline_left_ms(0) > 59000);
    assert_int_equal(svc_deadline_left_ms(700), 700);
    outer = svc_deadline_tighten(100);
    assert_true(svc_deadline_left_ms(0) <= 100);
    svc_deadline_restore(outer);
    assert_true(svc_deadline_left_ms(0) > 59000);
    svc_deadline_start(-1); /* none */
    assert_int_equal(svc_deadline_left_ms(0), -1);
    outer = svc_deadline_tighten(0);
    assert_int_equal(svc_deadline_left_ms(5000), 0);
    svc_deadline_restore(outer);
    assert_int_equal(svc_deadline_left_ms(0), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(breaker_opens_after_failures_in_a_row),
        cmocka_unit_test(cap_holds_only_while_failing),
        cmocka_unit_test(deadline_bounds_the_wait),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
