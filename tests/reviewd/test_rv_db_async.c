/*
 * test_rv_db_async.c: an event loop's PostgreSQL connection
 * (db/rv_db_async.h) against the stack's PostgreSQL, driven here with
 * poll(2) the way http/rv_loop.c drives it (flush, tick, watch, handle).
 *
 * The loop sends the statements one pass queued in one write with one
 * sync (rv_dba_flush).  What that must keep:
 *   - each statement of a batch gets its own answer, in the order sent;
 *   - a statement that fails in the middle of a batch ends with its own
 *     error, the statements after it in the batch end with
 *     PGRES_PIPELINE_ABORTED (which the loop's reads hand to the worker
 *     pool), the ones before it keep their rows, and the connection
 *     serves the next batch as if nothing happened.
 * The failing statement is a division by zero: an error PostgreSQL
 * raises while executing, like a statement timeout, with no timing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include "db/rv_db.h"
#include "db/rv_db_async.h"
#include "svc_log.h"
#include "testkit.h"

/* Bound on anything that should happen at once (a loaded machine). */
#define SOON_MS 10000

enum { STMT_ECHO, STMT_TENTH };

static const rv_stmt_def stmts[] = {
    {"t_echo", "SELECT $1::int AS v", 1},
    {"t_tenth", "SELECT 10 / $1::int AS v", 1},
};

typedef struct read_rec {
    rv_dba_query q; /* first: the callback finds the read from it */
    int done;
    rv_dba_outcome outcome;
    ExecStatusType status;
    int value;
} read_rec;

static svc_log *log_;
static rv_db *db;
static rv_dba *dba;
static read_rec reads[4];

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void read_done(rv_dba_query *q, rv_dba_outcome outcome, PGresult *res)
{
    read_rec *r = (read_rec *)q;

    r->done = 1;
    r->outcome = outcome;
    r->status = res != NULL ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (r->status == PGRES_TUPLES_OK && PQntuples(res) == 1)
        r->value = atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
}

/* One pass of the loop: sends what is queued, runs what is due, waits
 * up to 50 ms for the socket and handles it. */
static void pass(void)
{
    struct pollfd p;
    uint32_t events;
    int fd;

    (void)rv_dba_flush(dba);
    (void)rv_dba_tick(dba);
    rv_dba_watch(dba, &fd, &events);
    if (fd < 0) {
        struct timespec ts = {0, 10 * 1000000};

        nanosleep(&ts, NULL);
        return;
    }
    p.fd = fd;
    p.events = (short)(((events & EPOLLIN) ? POLLIN : 0)
                       | ((events & EPOLLOUT) ? POLLOUT : 0));
    p.revents = 0;
    if (poll(&p, 1, 50) > 0)
        rv_dba_handle(dba);
}

static int all_done(int n)
{
    for (int i = 0; i < n; i++)
        if (!reads[i].done)
            return 0;
    return 1;
}

static void run_until_done(int n)
{
    const int64_t until = now_ms() + SOON_MS;

    while (!all_done(n) && now_ms() < until)
        pass();
    assert_true(all_done(n));
}

static void queue_read(int i, int stmt, const char *param)
{
    const char *params[1] = {param};

    memset(&reads[i], 0, sizeof(reads[i]));
    reads[i].q.done = read_done;
    assert_int_equal(rv_dba_send(dba, &reads[i].q, stmt, params, SOON_MS), 0);
}

static int setup(void **state)
{
    char err[256];
    int64_t until;

    (void)state;
    log_ = svc_log_new(NULL, SVC_LOG_WARN, err, sizeof(err));
    if (log_ == NULL)
        fail_msg("log: %s", err);
    db = rv_db_new(testkit_database_url(), stmts,
                   sizeof(stmts) / sizeof(stmts[0]), 5, log_);
    assert_non_null(db);
    dba = rv_dba_new(db);
    assert_non_null(dba);
    /* Connected and prepared, without blocking, as a loop does it. */
    rv_dba_want(dba);
    until = now_ms() + SOON_MS;
    while (rv_dba_load(dba) < 0 && now_ms() < until)
        pass();
    if (rv_dba_load(dba) < 0)
        fail_msg("the connection to %s was not ready within %d ms",
                 testkit_database_url(), SOON_MS);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    rv_dba_free(dba); /* ends whatever a failed case left in flight */
    dba = NULL;
    rv_db_free(db);
    db = NULL;
    svc_log_free(log_);
    log_ = NULL;
    return 0;
}

static void a_batch_answers_each_statement_in_order(void **state)
{
    (void)state;
    queue_read(0, STMT_ECHO, "7");
    queue_read(1, STMT_TENTH, "5");
    queue_read(2, STMT_ECHO, "8");
    assert_int_equal(rv_dba_load(dba), 3);
    run_until_done(3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(reads[i].outcome, RV_DBA_DONE);
        assert_int_equal(reads[i].status, PGRES_TUPLES_OK);
    }
    assert_int_equal(reads[0].value, 7);
    assert_int_equal(reads[1].value, 2);
    assert_int_equal(reads[2].value, 8);
    assert_int_equal(rv_dba_load(dba), 0);
}

static void a_failure_mid_batch_aborts_only_the_rest_of_it(void **state)
{
    (void)state;
    queue_read(0, STMT_ECHO, "7");
    queue_read(1, STMT_TENTH, "0"); /* division by zero */
    queue_read(2, STMT_ECHO, "8");
    run_until_done(3);
    assert_int_equal(reads[0].outcome, RV_DBA_DONE);
    assert_int_equal(reads[0].status, PGRES_TUPLES_OK);
    assert_int_equal(reads[0].value, 7);
    assert_int_equal(reads[1].outcome, RV_DBA_DONE);
    assert_int_equal(reads[1].status, PGRES_FATAL_ERROR);
    assert_int_equal(reads[2].outcome, RV_DBA_DONE);
    assert_int_equal(reads[2].status, PGRES_PIPELINE_ABORTED);
    /* The next batch is served as if nothing had happened. */
    queue_read(3, STMT_ECHO, "9");
    run_until_done(4);
    assert_int_equal(reads[3].outcome, RV_DBA_DONE);
    assert_int_equal(reads[3].status, PGRES_TUPLES_OK);
    assert_int_equal(reads[3].value, 9);
    assert_int_equal(rv_dba_load(dba), 0);
}

static void batches_sent_back_to_back_keep_their_order(void **state)
{
    (void)state;
    /* Two passes' batches in flight at once, the second sent before the
     * first is answered. */
    queue_read(0, STMT_ECHO, "1");
    queue_read(1, STMT_ECHO, "2");
    assert_int_equal(rv_dba_flush(dba), 0);
    queue_read(2, STMT_ECHO, "3");
    queue_read(3, STMT_TENTH, "0");
    run_until_done(4);
    assert_int_equal(reads[0].value, 1);
    assert_int_equal(reads[1].value, 2);
    assert_int_equal(reads[2].value, 3);
    assert_int_equal(reads[3].status, PGRES_FATAL_ERROR);
    for (int i = 0; i < 3; i++)
        assert_int_equal(reads[i].status, PGRES_TUPLES_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_batch_answers_each_statement_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_failure_mid_batch_aborts_only_the_rest_of_it, setup, teardown),
        cmocka_unit_test_setup_teardown(
            batches_sent_back_to_back_keep_their_order, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
