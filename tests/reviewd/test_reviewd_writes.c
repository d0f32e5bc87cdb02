/*
 * test_reviewd_writes.c: REVIEWD_WRITE_CONCURRENCY, the write
 * transactions' gate (tx/rv_admit.h).
 *
 * reviewd-testing runs with one place for writes and a 600 ms request
 * budget.  A create parked by X-Test-Pause-Ms inside its transaction
 * holds the only place (the pause does not eat its own budget,
 * rv_hooks.h); meanwhile:
 *   - /metrics shows one write running;
 *   - a second create waits for the place, shows as waiting, and when its
 *     budget ends is answered 503 UNAVAILABLE (JSON, as docs/api.md says),
 *     counted in reviewd_write_admission_timeouts_total, and leaves no
 *     document behind;
 *   - a read is not gated: it is answered 200 at once.
 * When the parked create commits, the place is free again: a third create
 * gets 201 and nothing is left running or waiting.
 *
 * The parked create lives in static storage and end_case, the case's
 * teardown, joins it whether the case passed or failed.  Bounds are
 * generous; nothing here times the server except that the waiting create
 * must not outlast the parked one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rvt_kit.h"
#include "testkit.h"

#define PAUSE_MS 4000
#define WAIT_MS 15000

static rvt_db db;
static rvt_server srv;
static char *alice;
static const rvt_person people[] = {{&alice, "alice", "author"},
                                    {NULL, NULL, NULL}};

/* The parked create (static: see the top comment). */
static pthread_t parked_thread;
static int parked_started;
static atomic_int parked_answered;
static rvt_resp parked_resp;

static int setup(void **state)
{
    const char *const env[] = {"REVIEWD_WRITE_CONCURRENCY=1",
                               "REVIEWD_REQUEST_BUDGET_MS=600",
                               "REVIEWD_TEST_HOOKS=1", NULL};

    (void)state;
    if (rvt_fixture_start(&db, &srv, "writes", NULL, env, 0) != 0)
        return -1;
    return rvt_people_mint(people);
}

static int teardown(void **state)
{
    (void)state;
    return rvt_fixture_end(&db, &srv, people);
}

static int end_case(void **state)
{
    (void)state;
    if (parked_started) {
        pthread_join(parked_thread, NULL);
        parked_started = 0;
    }
    rvt_resp_free(&parked_resp);
    return 0;
}

static void *parked_main(void *arg)
{
    char auth[4200], pause[48];
    const char *headers[] = {auth, "Content-Type: application/json", pause,
                             NULL};
    static const char body[] = "{\"title\":\"parked\",\"content\":\"x\"}";

    (void)arg;
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", alice);
    snprintf(pause, sizeof(pause), "X-Test-Pause-Ms: %d", PAUSE_MS);
    rvt_http(srv.port, "POST", "/v1/documents", headers, body, strlen(body),
             &parked_resp);
    atomic_store(&parked_answered, 1);
    return NULL;
}

static int one_write_running(void *arg)
{
    (void)arg;
    return rvt_metric(srv.port, "reviewd_writes_running") == 1;
}

static long long documents_titled(const char *title)
{
    char sql[160];

    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM kh_document WHERE title = '%s'", title);
    return rvt_sql_int(&db, sql);
}

static void a_write_waits_for_a_place_within_its_budget(void **state)
{
    rvt_resp r;

    (void)state;
    assert_int_equal(pthread_create(&parked_thread, NULL, parked_main, NULL),
                     0);
    parked_started = 1;
    TK_EXPECT(testkit_wait_until(one_write_running, NULL, WAIT_MS),
              "the parked create holds the one place within %d ms", WAIT_MS);

    /* The only place is taken: this create waits, then its budget ends. */
    rvt_call(srv.port, "POST", "/v1/documents", alice,
             "{\"title\":\"turned away\",\"content\":\"x\"}", NULL, &r);
    rvt_expect_status(&r, 503, "UNAVAILABLE",
                      "a create while the place is held");
    rvt_resp_free(&r);
    TK_EXPECT(!atomic_load(&parked_answered),
              "the waiting create was answered before the parked one "
              "(its budget, not the parked create, ended its wait)");
    TK_EXPECT(rvt_metric(srv.port, "reviewd_write_admission_timeouts_total")
                  == 1,
              "the timeout is counted");
    TK_EXPECT(documents_titled("turned away") == 0,
              "a create turned away wrote nothing");

    /* Reads are not gated. */
    rvt_call(srv.port, "GET", "/v1/documents?limit=1", alice, NULL, NULL, &r);
    rvt_expect_status(&r, 200, NULL, "a list while the place is held");
    rvt_resp_free(&r);
    TK_EXPECT(!atomic_load(&parked_answered),
              "the read was answered while the create was still parked");

    /* The parked create commits; the place is free again. */
    pthread_join(parked_thread, NULL);
    parked_started = 0;
    rvt_expect_status(&parked_resp, 201, NULL, "the parked create");
    rvt_call(srv.port, "POST", "/v1/documents", alice,
             "{\"title\":\"after\",\"content\":\"x\"}", NULL, &r);
    rvt_expect_status(&r, 201, NULL, "a create after the place was freed");
    rvt_resp_free(&r);
    TK_EXPECT(rvt_metric(srv.port, "reviewd_writes_running") == 0
                  && rvt_metric(srv.port, "reviewd_writes_waiting") == 0,
              "nothing left running or waiting");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(a_write_waits_for_a_place_within_its_budget,
                                  end_case),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
