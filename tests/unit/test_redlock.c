/*
 * test_redlock.c: the pure decisions of Redlock (src/lib/deploy/redlock.c):
 * majority, drift, validity, per-node timeout, what a round's votes mean,
 * the per-node failure message, and the random retry delay.
 *
 * The rounds themselves run against real masters in tests/scale/.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "deploy/redlock.h"
#include "testkit.h"

static const char *const descs[] = {
    "127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002",
    "127.0.0.1:7003", "127.0.0.1:7004",
};

/* Results from a string of votes: 'y' yes, 'n' no, 't' timed out, 'r'
 * refused. */
static void votes(const char *v, dlock__node_result *res)
{
    for (size_t i = 0; v[i] != '\0'; i++) {
        memset(&res[i], 0, sizeof(res[i]));
        switch (v[i]) {
        case 'y': res[i].vote = DLOCK__VOTE_YES; break;
        case 'n': res[i].vote = DLOCK__VOTE_NO; break;
        case 't':
            res[i].err = DLOCK_TIMEOUT;
            snprintf(res[i].why, sizeof(res[i].why), "timed out");
            break;
        default:
            res[i].err = DLOCK_UNAVAILABLE;
            snprintf(res[i].why, sizeof(res[i].why), "refused");
            break;
        }
    }
}

static dlock_err decide(const char *v, int64_t ttl, int64_t elapsed,
                        int64_t *validity, dlock__msg *m)
{
    dlock__node_result res[DLOCK__NODES_MAX];

    votes(v, res);
    dlock__msg_clear(m);
    return dlock__redlock_decide(res, (int)strlen(v), descs, "acquiring k",
                                 ttl, elapsed, validity, m);
}

static void majority_is_more_than_half(void **state)
{
    (void)state;
    TK_EXPECT(dlock__redlock_quorum(3) == 2 && dlock__redlock_quorum(4) == 3
                  && dlock__redlock_quorum(5) == 3
                  && dlock__redlock_quorum(7) == 4,
              "n/2 + 1");
}

static void validity_subtracts_elapsed_time_and_drift(void **state)
{
    (void)state;
    TK_EXPECT(dlock__redlock_drift_ms(10000) == 102, "1%% + 2 ms");
    TK_EXPECT(dlock__redlock_validity_ms(10000, 50) == 10000 - 50 - 102,
              "TTL - elapsed - drift");
    TK_EXPECT(dlock__redlock_validity_ms(100, 99) < 0, "nothing left");
    TK_EXPECT(dlock__redlock_node_timeout_ms(10000, 5, 50) == 50
                  && dlock__redlock_node_timeout_ms(300, 5, 50) == 30
                  && dlock__redlock_node_timeout_ms(20, 5, 50) == 5,
              "a tenth of the TTL, clamped");
}

static void majority_of_yes_grants_with_validity(void **state)
{
    int64_t validity;
    dlock__msg m;

    (void)state;
    TK_EXPECT(decide("yytyr", 10000, 40, &validity, &m) == DLOCK_OK,
              "3 of 5 grant: %s", m.text);
    TK_EXPECT(validity == 10000 - 40 - 102, "validity %lld",
              (long long)validity);
    TK_EXPECT(decide("yyy", 1000, 0, &validity, &m) == DLOCK_OK, "3 of 3");
}

static void too_few_answers_are_unavailable_not_busy(void **state)
{
    int64_t validity;
    dlock__msg m;

    (void)state;
    TK_EXPECT(decide("yytrt", 10000, 40, &validity, &m) == DLOCK_UNAVAILABLE
                  && validity == 0,
              "2 of 5 answered: "
              "fail-closed, got %s",
              m.text);
    TK_EXPECT(strstr(m.text,
                     "3 of 5 nodes: 127.0.0.1:7002 timed out, "
                     "127.0.0.1:7003 refused, 127.0.0.1:7004 timed out")
                  != NULL,
              "each failed node is named with its reason: %s", m.text);
    TK_EXPECT(strstr(m.text, "2 of 5 masters agreed (majority 3)") != NULL,
              "the count is given: %s", m.text);
}

static void answers_without_majority_are_busy(void **state)
{
    int64_t validity;
    dlock__msg m;

    (void)state;
    TK_EXPECT(decide("yynnt", 10000, 40, &validity, &m) == DLOCK_BUSY,
              "2 yes, 2 no: held elsewhere, got %s", m.text);
    TK_EXPECT(decide("nnnnn", 10000, 40, &validity, &m) == DLOCK_BUSY,
              "all no");
    TK_EXPECT(strstr(m.text, "5 answered no") != NULL
                  && strstr(m.text, "nodes:") == NULL,
              "no failure list when none failed: %s", m.text);
    TK_EXPECT(decide("ynt", 10000, 40, &validity, &m) == DLOCK_BUSY,
              "1 yes 1 no of 3: the majority answered");
}

static void a_round_that_used_the_ttl_grants_nothing(void **state)
{
    int64_t validity;
    dlock__msg m;

    (void)state;
    TK_EXPECT(decide("yyyyy", 1000, 990, &validity, &m) == DLOCK_TIMEOUT
                  && validity == 0,
              "990 ms of a 1000 ms TTL leaves nothing after "
              "drift: %s",
              m.text);
}

static void failure_list_is_empty_without_failures(void **state)
{
    dlock__node_result res[DLOCK__NODES_MAX];
    char buf[256];

    (void)state;
    votes("ynyny", res);
    dlock__redlock_failures(res, 5, descs, buf, sizeof(buf));
    TK_EXPECT(buf[0] == '\0', "no failure, empty text: %s", buf);
    votes("yyyty", res);
    dlock__redlock_failures(res, 5, descs, buf, sizeof(buf));
    TK_EXPECT(strcmp(buf, "1 of 5 nodes: 127.0.0.1:7003 timed out") == 0,
              "one failure: %s", buf);
    dlock__redlock_failures(res, 5, descs, buf, 12);
    TK_EXPECT(strlen(buf) == 11, "truncated within its buffer");
}

static void retry_delay_is_random_within_bounds(void **state)
{
    int64_t lowest = INT64_MAX, highest = 0;

    (void)state;
    for (int i = 0; i < 2000; i++) {
        int64_t d = dlock__redlock_retry_delay_ms(200);

        TK_EXPECT(d >= 100 && d <= 200, "delay %lld in [100, 200]",
                  (long long)d);
        lowest = d < lowest ? d : lowest;
        highest = d > highest ? d : highest;
    }
    TK_EXPECT(highest - lowest > 50, "the delays spread (%lld..%lld)",
              (long long)lowest, (long long)highest);
    TK_EXPECT(dlock__redlock_retry_delay_ms(0) == 0
                  && dlock__redlock_retry_delay_ms(-5) == 0,
              "no delay");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(majority_is_more_than_half),
        cmocka_unit_test(validity_subtracts_elapsed_time_and_drift),
        cmocka_unit_test(majority_of_yes_grants_with_validity),
        cmocka_unit_test(too_few_answers_are_unavailable_not_busy),
        cmocka_unit_test(answers_without_majority_are_busy),
        cmocka_unit_test(a_round_that_used_the_ttl_grants_nothing),
        cmocka_unit_test(failure_list_is_empty_without_failures),
        cmocka_unit_test(retry_delay_is_random_within_bounds),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
