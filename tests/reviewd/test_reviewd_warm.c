/*
 * test_reviewd_warm.c: reviewd's workers have their PostgreSQL connections
 * before the first requests come.
 *
 * Each HTTP worker thread owns one PostgreSQL connection (rv_db.h).  Made
 * on the worker's first request, a burst of first requests after a start
 * (bench_reviewd's 16 clients at the start of its GET phase) made one
 * connection per worker at once, each inside its request's 2 s budget: on
 * a loaded machine some took longer, those requests answered 503 "no
 * connection", and the failed connects counted towards the breaker.  Now
 * a worker connects when its thread starts (rv_db_thread_warm), before it
 * takes a job:
 *   - a fresh reviewd with 8 workers shows, before any request but the
 *     /metrics it is asked, at least 8 PostgreSQL connections open (the
 *     wait is bounded, 30 s; before the fix it saw one, the background
 *     work's);
 *   - 16 GETs sent at once then all answer 200, and no connect failed.
 * Nothing here measures a time.
 *
 * The case's server lives in static storage and end_case, its teardown,
 * stops it whether the case passed or failed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rvt_kit.h"
#include "testkit.h"

#define WORKERS 8
#define CLIENTS 16
#define WAIT_MS 30000

static rvt_db db;
static const char *redis_url;
static char *alice;
static const rvt_person people[] = {{&alice, "alice", "author"},
                                    {NULL, NULL, NULL}};

static int setup(void **state)
{
    (void)state;
    if (rvt_setup_shared(&redis_url, people) != 0
        || rvt_db_create(&db, "warm") != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    rvt_people_free(people);
    rvt_db_drop(&db);
    return 0;
}

/* The case's reviewd, in static storage so that end_case stops it when a
 * failed expectation leaves the case by longjmp. */
static rvt_server srv;
static int srv_running;

static int end_case(void **state)
{
    (void)state;
    if (srv_running)
        rvt_server_terminate(&srv);
    srv_running = 0;
    return 0;
}

typedef struct open_wait {
    int port;
    long long seen; /* the last reviewd_pg_connections_open */
} open_wait;

static int workers_connected(void *arg)
{
    open_wait *w = arg;

    w->seen = rvt_metric(w->port, "reviewd_pg_connections_open");
    return w->seen >= WORKERS;
}

static void first_requests_find_every_worker_connected(void **state)
{
    const char *const env[] = {"REVIEWD_THREADS=8", NULL};
    static rvt_storm_req reqs[CLIENTS];
    open_wait w = {0, -1};
    char doc[24];
    int ok = 0;

    (void)state;
    assert_int_equal(rvt_server_start(&srv, &db, redis_url, env,
                                      "reviewd_warm"),
                     0);
    srv_running = 1;
    w.port = srv.port;
    TK_EXPECT(testkit_wait_until(workers_connected, &w, WAIT_MS),
              "the %d workers connect to PostgreSQL before any request: "
              "%lld connections open after %d ms",
              WORKERS, w.seen, WAIT_MS);
    assert_int_equal(rvt_create_doc(srv.port, alice, "warm", doc), 0);
    memset(reqs, 0, sizeof(reqs));
    for (int i = 0; i < CLIENTS; i++) {
        reqs[i].method = "GET";
        snprintf(reqs[i].path, sizeof(reqs[i].path), "/v1/documents/%s", doc);
        reqs[i].token = alice;
    }
    assert_int_equal(rvt_storm(srv.port, reqs, CLIENTS, NULL, NULL), 0);
    for (int i = 0; i < CLIENTS; i++) {
        if (reqs[i].status == 200)
            ok++;
        else
            fprintf(stderr, "# GET %d: %d %s\n", i, reqs[i].status,
                    reqs[i].code);
    }
    TK_EXPECT(ok == CLIENTS, "%d GETs sent at once all answer 200: %d did",
              CLIENTS, ok);
    TK_EXPECT(rvt_metric(srv.port, "reviewd_pg_connect_failures_total") == 0,
              "no PostgreSQL connect failed");
    srv_running = 0;
    TK_EXPECT(rvt_server_stop(&srv), "reviewd exits 0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(first_requests_find_every_worker_connected,
                                  end_case),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
