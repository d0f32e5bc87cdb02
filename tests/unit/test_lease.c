/*
 * test_lease.c: the validity arithmetic of src/lib/base/lease.c.
 *
 * No server: tickets are begun and ended by hand in the orders that
 * racing requests can take, and the skew tracker is fed samples as round
 * trips would feed it.  Times are CLOCK_BOOTTIME microseconds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "base/lease.h"

#define SEC 1000000

static void a_granted_lease_runs_to_ttl_minus_drift(void **state)
{
    dlock__lease l;
    dlock__lease_ticket t;
    int64_t left;

    (void)state;
    dlock__lease_init(&l, 10000);
    assert_int_equal(dlock__lease_lost(&l, NULL), 0); /* not granted */
    assert_int_equal(dlock__lease_left_us(&l, NULL), 0);
    t = dlock__lease_begin(&l, 10000, NULL);
    assert_int_equal(dlock__lease_end(&l, &t, DLOCK__LEASE_GRANTED), 1);
    assert_int_equal(dlock__lease_until(&l, NULL),
                     t.sent_us + 10 * SEC - 102000);
    left = dlock__lease_left_us(&l, NULL);
    assert_true(left > 9 * SEC && left <= 10 * SEC - 102000);
    assert_int_equal(dlock__lease_lost(&l, NULL), 0);
    dlock__lease_destroy(&l);
}

static void a_lease_is_lost_once_its_validity_ran_out(void **state)
{
    dlock__lease l;
    dlock__lease_ticket t;

    (void)state;
    dlock__lease_init(&l, 1);
    t = dlock__lease_begin(&l, 1, NULL); /* 1 ms - 2.01 ms drift: 0 */
    dlock__lease_end(&l, &t, DLOCK__LEASE_GRANTED);
    assert_int_equal(dlock__lease_lost(&l, NULL), 1);
    assert_int_equal(dlock__lease_marked(&l), 0);
    assert_int_equal(dlock__lease_mark_lost(&l), 1);
    assert_int_equal(dlock__lease_mark_lost(&l), 0); /* once */
    assert_int_equal(dlock__lease_until(&l, NULL), 0);
    dlock__lease_destroy(&l);
}

/* An extend to 1 s races a renewal for 30 s sent just before it; Redis may
 * run them in either order, so until both have answered (in any order),
 * the lease claims no more than the 1 s one gives. */
static void a_stale_renewal_never_raises_a_shorter_extend(void **state)
{
    dlock__lease l;
    dlock__lease_ticket t0, renew, extend;
    int64_t cap;

    (void)state;
    dlock__lease_init(&l, 30000);
    t0 = dlock__lease_begin(&l, 30000, NULL);
    dlock__lease_end(&l, &t0, DLOCK__LEASE_GRANTED);
    renew = dlock__lease_begin(&l, 30000, NULL);
    extend = dlock__lease_begin(&l, 1000, NULL);
    cap = dlock__lease_until_of(extend.sent_us, 1000);
    assert_true(dlock__lease_until(&l, NULL) <= cap); /* at once */
    dlock__lease_end(&l, &extend, DLOCK__LEASE_GRANTED);
    assert_true(dlock__lease_until(&l, NULL) <= cap);
    dlock__lease_end(&l, &renew, DLOCK__LEASE_GRANTED); /* stale reply */
    assert_true(dlock__lease_until(&l, NULL) <= cap);
    /* The next renewal alone moves it on. */
    renew = dlock__lease_begin(&l, 1000, NULL);
    dlock__lease_end(&l, &renew, DLOCK__LEASE_GRANTED);
    assert_int_equal(dlock__lease_until(&l, NULL),
                     dlock__lease_until_of(renew.sent_us, 1000));
    dlock__lease_destroy(&l);
}

/* A request with no answer may have run: a timeout of a shorter extend
 * keeps the shorter validity; one that surely did not run changes
 * nothing. */
static void an_unanswered_request_counts_as_maybe_run(void **state)
{
    dlock__lease l;
    dlock__lease_ticket t0, t;
    int64_t before;

    (void)state;
    dlock__lease_init(&l, 30000);
    t0 = dlock__lease_begin(&l, 30000, NULL);
    dlock__lease_end(&l, &t0, DLOCK__LEASE_GRANTED);
    before = dlock__lease_until(&l, NULL);
    t = dlock__lease_begin(&l, 500, NULL);
    dlock__lease_end(&l, &t, DLOCK__LEASE_UNKNOWN);
    assert_true(dlock__lease_until(&l, NULL)
                <= dlock__lease_until_of(t.sent_us, 500));
    assert_true(dlock__lease_until(&l, NULL) < before);
    dlock__lease_destroy(&l);
}

/* The server's clock steps 20 s forward after a grant: the next sample
 * shows it, and the lease shrinks by it; a sample without a step does
 * not shrink it; a backward step does not lengthen it. */
static void a_forward_step_of_the_server_clock_shrinks_the_lease(void **state)
{
    dlock__skew skew;
    dlock__lease l;
    dlock__lease_ticket t;
    int64_t wall = (int64_t)1700000000 * SEC, now, until;

    (void)state;
    dlock__skew_init(&skew);
    dlock__lease_init(&l, 30000);
    t = dlock__lease_begin(&l, 30000, &skew);
    now = dlock__boot_us();
    dlock__skew_sample(&skew, t.sent_us, now, wall + (now - t.sent_us));
    dlock__lease_ticket_server_time(&t, wall + (now - t.sent_us));
    dlock__lease_end(&l, &t, DLOCK__LEASE_GRANTED);
    until = dlock__lease_until(&l, &skew);
    now = dlock__boot_us();
    assert_int_equal(dlock__skew_sample(&skew, now, now,
                                        wall + (now - t.sent_us)),
                     0);
    assert_int_equal(dlock__lease_until(&l, &skew), until);
    now = dlock__boot_us();
    assert_int_equal(dlock__skew_sample(&skew, now, now,
                                        wall + (now - t.sent_us) + 20 * SEC),
                     1);
    assert_true(dlock__lease_until(&l, &skew) <= until - 20 * SEC + 2000);
    assert_true(dlock__lease_until(&l, &skew) >= until - 20 * SEC - 2000);
    now = dlock__boot_us();
    dlock__skew_sample(&skew, now, now, wall - 60 * SEC);
    assert_int_equal(dlock__lease_until(&l, &skew), until);
    dlock__lease_destroy(&l);
    dlock__skew_destroy(&skew);
}

static void fences_have_one_rule_on_the_wire(void **state)
{
    uint64_t v = 7;

    (void)state;
    assert_int_equal(dlock__fence_parse("1", 1, &v), 1);
    assert_int_equal(v, 1);
    assert_int_equal(dlock__fence_parse("18446744073709551615", 20, &v), 1);
    assert_true(v == UINT64_MAX);
    assert_int_equal(dlock__fence_parse("18446744073709551616", 20, &v), 0);
    assert_int_equal(dlock__fence_parse("99999999999999999999", 20, &v), 0);
    assert_int_equal(dlock__fence_parse("9999999999999999999", 19, &v), 1);
    assert_true(v == 9999999999999999999u);
    assert_int_equal(dlock__fence_parse("10000000000000000000", 20, &v), 1);
    assert_true(v == 10000000000000000000u);
    assert_int_equal(dlock__fence_parse("00000000000000000001", 20, &v), 1);
    assert_int_equal(v, 1);
    assert_int_equal(dlock__fence_parse("1796480633902386", 16, &v), 1);
    assert_true(v == 1796480633902386u);
    assert_int_equal(dlock__fence_parse("", 0, &v), 0);
    assert_int_equal(dlock__fence_parse("-1", 2, &v), 0);
    assert_int_equal(dlock__fence_parse("12a", 3, &v), 0);
    assert_int_equal(dlock__fence_parse("123456789012345678901", 21, &v), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_granted_lease_runs_to_ttl_minus_drift),
        cmocka_unit_test(a_lease_is_lost_once_its_validity_ran_out),
        cmocka_unit_test(a_stale_renewal_never_raises_a_shorter_extend),
        cmocka_unit_test(an_unanswered_request_counts_as_maybe_run),
        cmocka_unit_test(a_forward_step_of_the_server_clock_shrinks_the_lease),
        cmocka_unit_test(fences_have_one_rule_on_the_wire),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
