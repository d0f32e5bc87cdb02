/*
 * test_breaker.c: the circuit breaker (src/lib/base/breaker.c).
 *
 * The breaker decides whether a call pays a connect timeout or fails fast,
 * so its two transitions are pinned here: CLOSED -> OPEN exactly at the
 * threshold of consecutive failures (and a success in between starts the
 * count again), OPEN -> CLOSED on the first success, and trip opening it
 * at once for a client that starts while Redis is down.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/breaker.h"
#include "testkit.h"

static void opens_exactly_at_the_threshold(void **state)
{
    dlock__breaker b;

    (void)state;
    dlock__breaker_init(&b, 3);
    TK_EXPECT(dlock__breaker_allows(&b), "a new breaker is closed");
    TK_EXPECT(dlock__breaker_failure(&b) == 0, "failure 1 of 3 does not "
                                               "open it");
    TK_EXPECT(dlock__breaker_failure(&b) == 0, "failure 2 of 3 does not "
                                               "open it");
    TK_EXPECT(dlock__breaker_allows(&b), "below the threshold calls go on");
    TK_EXPECT(dlock__breaker_failure(&b) == 1, "failure 3 of 3 opens it and "
                                               "says so");
    TK_EXPECT(!dlock__breaker_allows(&b), "an open breaker refuses calls");
    TK_EXPECT(dlock__breaker_failure(&b) == 0, "a failure while open does "
                                               "not open it again");
    TK_EXPECT(atomic_load(&b.opens) == 1, "it opened once, counted %llu",
              (unsigned long long)atomic_load(&b.opens));
    TK_EXPECT(atomic_load(&b.opened_at_us) > 0, "the opening time is kept");
}

static void success_closes_an_open_breaker(void **state)
{
    dlock__breaker b;

    (void)state;
    dlock__breaker_init(&b, 2);
    dlock__breaker_failure(&b);
    dlock__breaker_failure(&b);
    TK_EXPECT(!dlock__breaker_allows(&b), "two failures of 2 open it");
    TK_EXPECT(dlock__breaker_success(&b) == 1, "a success closes it and says "
                                               "so");
    TK_EXPECT(dlock__breaker_allows(&b), "closed again after the success");
    TK_EXPECT(dlock__breaker_success(&b) == 0, "a success while closed "
                                               "closes nothing");
    TK_EXPECT(dlock__breaker_failure(&b) == 0, "after closing, the count "
                                               "starts again from zero");
    TK_EXPECT(dlock__breaker_failure(&b) == 1, "and opens at the threshold "
                                               "once more");
    TK_EXPECT(atomic_load(&b.opens) == 2, "two openings counted, got %llu",
              (unsigned long long)atomic_load(&b.opens));
}

static void success_between_failures_resets_the_count(void **state)
{
    dlock__breaker b;

    (void)state;
    dlock__breaker_init(&b, 3);
    dlock__breaker_failure(&b);
    dlock__breaker_failure(&b);
    dlock__breaker_success(&b);
    dlock__breaker_failure(&b);
    dlock__breaker_failure(&b);
    TK_EXPECT(dlock__breaker_allows(&b),
              "failures are counted only when "
              "consecutive: 2, success, 2 keeps a threshold-3 breaker "
              "closed");
}

static void trip_opens_at_once(void **state)
{
    dlock__breaker b;

    (void)state;
    dlock__breaker_init(&b, 5);
    dlock__breaker_trip(&b);
    TK_EXPECT(!dlock__breaker_allows(&b), "a tripped breaker is open "
                                          "without any failure");
    TK_EXPECT(atomic_load(&b.opens) == 1, "tripping counts as an opening");
    dlock__breaker_trip(&b);
    TK_EXPECT(atomic_load(&b.opens) == 1, "tripping an open breaker does not "
                                          "count again");
    TK_EXPECT(dlock__breaker_success(&b) == 1, "a success closes a tripped "
                                               "breaker");
    TK_EXPECT(dlock__breaker_allows(&b), "closed after the success");
}

static void threshold_below_one_means_one(void **state)
{
    dlock__breaker b;

    (void)state;
    dlock__breaker_init(&b, 0);
    TK_EXPECT(dlock__breaker_failure(&b) == 1, "with threshold 0 the first "
                                               "failure opens it");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(opens_exactly_at_the_threshold),
        cmocka_unit_test(success_closes_an_open_breaker),
        cmocka_unit_test(success_between_failures_resets_the_count),
        cmocka_unit_test(trip_opens_at_once),
        cmocka_unit_test(threshold_below_one_means_one),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
