/*
 * test_client.c: the client's own state, behind its accessors
 * (client_internal.h).
 *
 * The client is built against the shared stack's Redis (the warm-up needs
 * a server).  What is checked: the options are normalised and owned, the
 * warm-up takes the first sample of the server's clock offset (lease.h),
 * each part (watchdog, reentrant registry, breaker) exists for the
 * client's life, and the counters the other modules bump reach the stats.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "client/client_internal.h"
#include "dlock/dlock.h"
#include "base/lease.h"
#include "testkit.h"

static dlock_client *new_client(const dlock_client_opts *o)
{
    dlock_client *c = NULL;
    char err[DLOCK_ERRMSG_MAX];
    dlock_err rc = dlock_client_new(testkit_shared_redis(), o, &c, err,
                                    sizeof(err));

    if (rc != DLOCK_OK)
        fail_msg("dlock_client_new: %s", err);
    return c;
}

static void zero_options_become_the_defaults(void **state)
{
    dlock_client_opts o;
    dlock_client *c;
    const dlock_client_opts *got;

    (void)state;
    memset(&o, 0, sizeof(o));
    c = new_client(&o);
    got = dlock__client_opts(c);
    assert_int_equal(got->io_timeout_ms, 5000);
    assert_int_equal(got->connect_timeout_ms, 5000);
    assert_int_equal(got->pool_size, 16);
    assert_int_equal(got->breaker_probe_ms, 500);
    dlock_client_free(c);
}

static void warm_up_samples_the_server_clock(void **state)
{
    dlock_client *c = new_client(NULL);
    dlock__skew *s = dlock__client_skew(c);

    (void)state;
    assert_int_equal(s->have, 1);
    assert_true(s->lo_us <= s->hi_us);
    /* The server's wall clock and our boot clock differ by years, not
     * by nothing. */
    assert_true(s->lo_us > 0);
    dlock_client_free(c);
}

static void each_part_lives_as_long_as_the_client(void **state)
{
    dlock_client *c = new_client(NULL);

    (void)state;
    assert_non_null(dlock__client_watchdog(c));
    assert_non_null(dlock__client_reentry(c));
    assert_non_null(dlock__client_breaker(c));
    assert_true(dlock__breaker_allows(dlock__client_breaker(c)));
    dlock_client_free(c);
}

static void counters_of_other_modules_reach_the_stats(void **state)
{
    dlock_client *c = new_client(NULL);
    dlock_client_stats st;

    (void)state;
    dlock__client_count_renewal(c);
    dlock__client_count_renewal(c);
    dlock__client_count_lost(c);
    dlock_client_stats_get(c, &st);
    assert_int_equal(st.renewals, 2);
    assert_int_equal(st.locks_lost, 1);
    assert_string_equal(dlock_client_endpoint(c), dlock_client_endpoint(c));
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(zero_options_become_the_defaults),
        cmocka_unit_test(warm_up_samples_the_server_clock),
        cmocka_unit_test(each_part_lives_as_long_as_the_client),
        cmocka_unit_test(counters_of_other_modules_reach_the_stats),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
