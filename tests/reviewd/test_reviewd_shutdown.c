/*
 * test_reviewd_shutdown.c: SIGTERM under load exits 0, every time.
 *
 * reviewd is started and stopped again and again (for about 2 s, or 60 s
 * with DLOCK_TEST_LONG=1) while clients keep it busy: some send POSTs
 * that the test hook X-Test-Pause-Ms parks in a worker with their
 * connection suspended, others ask /healthz on fresh connections as fast
 * as they can, so reviewd's event loops are running when SIGTERM arrives.
 * Each stop must drain and exit with status 0: the listener stopped
 * under busy loops, connections still open while a worker holds their
 * request (rv_http_stop, rv_listener.h), no crash, no abort, and no
 * sanitizer report in its log (under ASan no error or leak, under UBSan
 * no runtime error, whatever exit status they left).  Every request in
 * flight is answered (201, or 503 once the workers have stopped), never
 * left hanging.
 *
 * The clients, their counters and the run's server live in static storage
 * (the_run), and end_run, the case's teardown, stops reviewd and joins
 * the clients whether the case passed or failed: a failed expectation
 * leaves by longjmp while they still run, and the group's teardown frees
 * the token they send.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rvt_kit.h"
#include "testkit.h"
#include "testkit_threads.h"

#define PAUSERS 3
#define PROBERS 3
#define SHORT_MS 2000
#define LONG_MS 60000

static rvt_db db;
static char *alice;

static int setup(void **state)
{
    (void)state;
    alice = rvt_token("alice", "author", 3600);
    return alice != NULL && rvt_db_create(&db, "shutdown") == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    rvt_db_drop(&db);
    free(alice);
    return 0;
}

/* The clients of one run, against one reviewd. */
typedef struct load {
    int port;
    atomic_int stop;
    atomic_int parked;  /* paused POSTs sent */
    atomic_int probes;  /* /healthz answered 200 */
    atomic_int hanging; /* a request with no answer and no close */
    atomic_int bad;     /* an answer that is neither 201 nor 503 */
} load;

/* One run's clients and server, in static storage (one run at a time). */
typedef struct run {
    load l;
    testkit_threads clients;
    rvt_server srv;
    int srv_running;
} run;

static run the_run;

/* Stops the clients started and joins them (each returns after its
 * request in flight, bounded by rvt_http's wait). */
static void stop_clients(run *rn)
{
    atomic_store(&rn->l.stop, 1);
    testkit_threads_join_all(&rn->clients);
}

/* Teardown of the case, passed or failed: stops the run's reviewd and
 * its clients. */
static int end_run(void **state)
{
    run *rn = &the_run;

    (void)state;
    if (rn->srv_running)
        rvt_server_terminate(&rn->srv);
    stop_clients(rn);
    memset(rn, 0, sizeof(*rn));
    return 0;
}

/* POSTs that a worker holds for 1-40 ms, with the connection suspended. */
static void *pauser_main(void *arg)
{
    load *l = arg;
    char auth[4200], pause[64];
    const char *headers[] = {auth, pause, "Content-Type: application/json",
                             NULL};
    static const char body[] = "{\"title\":\"t\",\"content\":\"x\"}";
    unsigned seed = (unsigned)(uintptr_t)&auth;

    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", alice);
    while (!atomic_load(&l->stop)) {
        rvt_resp r;

        snprintf(pause, sizeof(pause), "X-Test-Pause-Ms: %d",
                 1 + (int)(rand_r(&seed) % 40));
        atomic_fetch_add(&l->parked, 1);
        rvt_http(l->port, "POST", "/v1/documents", headers, body,
                 sizeof(body) - 1, &r);
        if (r.timed_out)
            atomic_fetch_add(&l->hanging, 1);
        else if (r.status != 0 && r.status != 201 && r.status != 503)
            atomic_fetch_add(&l->bad, 1);
        rvt_resp_free(&r);
    }
    return NULL;
}

/* /healthz on fresh connections, answered on the event loops. */
static void *prober_main(void *arg)
{
    load *l = arg;

    while (!atomic_load(&l->stop)) {
        rvt_resp r;

        rvt_http(l->port, "GET", "/healthz", NULL, NULL, 0, &r);
        if (r.status == 200)
            atomic_fetch_add(&l->probes, 1);
        if (r.timed_out)
            atomic_fetch_add(&l->hanging, 1);
        rvt_resp_free(&r);
    }
    return NULL;
}

/* Busy: paused POSTs out and the event loops answering. */
static int busy(void *arg)
{
    load *l = arg;

    return atomic_load(&l->parked) >= PAUSERS + 2
           && atomic_load(&l->probes) >= 2 * PROBERS;
}

/* One start, load and SIGTERM; the clients stop before the checks. */
static void stop_once_under_load(void)
{
    static const char *const env[] = {"REVIEWD_TEST_HOOKS=1",
                                      "REVIEWD_THREADS=4",
                                      "REVIEWD_LOG_FILE=@log", NULL};
    run *const rn = &the_run;
    rvt_server *const srv = &rn->srv;
    load *const l = &rn->l;
    int i;

    memset(rn, 0, sizeof(*rn));
    assert_int_equal(rvt_server_start(srv, &db, NULL, env, "rv_shutdown"), 0);
    rn->srv_running = 1;
    l->port = srv->port;
    for (i = 0; i < PAUSERS + PROBERS; i++)
        assert_int_equal(testkit_threads_start(&rn->clients,
                                               i < PAUSERS ? pauser_main
                                                           : prober_main,
                                               l),
                         0);
    TK_EXPECT(testkit_wait_until(busy, l, 10000),
              "the clients get going (%d POSTs sent, %d probes answered)",
              atomic_load(&l->parked), atomic_load(&l->probes));
    rvt_server_terminate(srv);
    rn->srv_running = 0;
    stop_clients(rn);
    rvt_server_expect_clean(srv);
    TK_EXPECT(!rvt_server_log_has_sanitizer_report(srv),
              "no sanitizer report in %s", srv->log);
    TK_EXPECT(atomic_load(&l->hanging) == 0 && atomic_load(&l->bad) == 0,
              "every request in flight at SIGTERM is answered 201 or 503 "
              "or refused (%d hung, %d other answers)",
              atomic_load(&l->hanging), atomic_load(&l->bad));
    rvt_server_remove_dir(srv);
}

static void sigterm_under_load_exits_0_every_time(void **state)
{
    const char *long_run = getenv("DLOCK_TEST_LONG");
    const int64_t budget_us = (long_run != NULL && strcmp(long_run, "1") == 0
                                   ? LONG_MS
                                   : SHORT_MS)
                              * INT64_C(1000);
    const int64_t start = testkit_now_us();
    int runs = 0;

    (void)state;
    do {
        stop_once_under_load();
        runs++;
    } while (testkit_now_us() - start < budget_us);
    fprintf(stderr, "reviewd stopped under load %d times, exit 0 each\n",
            runs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(sigterm_under_load_exits_0_every_time,
                                  end_run),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
