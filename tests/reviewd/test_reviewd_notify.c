/*
 * test_reviewd_notify.c: the outbox's NOTIFY comes after the commit, from
 * reviewd's notifier, and no longer inside a request's transaction.
 *
 * A transaction with a NOTIFY pending takes one lock of the whole
 * PostgreSQL cluster at commit and holds it until it has committed, so
 * the outbox trigger's NOTIFY made every submit's and decision's commit
 * wait for the one before (sql/0008_outbox_notify_after_commit.sql,
 * docs/benchmarks.md session 12).  Checked here, on a database of the
 * test's own with a real reviewd:
 *   - a session that sets kh.outbox_notify = 'off', as reviewd's request
 *     sessions do, commits an outbox row without a notification: a
 *     LISTENer's first notification is the marker that session sends
 *     after its commit (before 0008 the trigger's came first);
 *   - any other session (psql, a tool) is still notified by the trigger;
 *   - a submit and an approval through reviewd still wake a LISTENer
 *     (the notifier's NOTIFY, rv_notifier.h).
 * Every wait is bounded (30 s) and nothing here measures a time.
 *
 * The server and the connections live in static storage; the group's
 * teardown stops and closes them whether the cases passed or failed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rvt_kit.h"
#include "testkit.h"

#define WAIT_MS 30000

static rvt_db db;
static rvt_server srv;
static int srv_running;
static PGconn *listener; /* LISTEN kh_outbox */
static PGconn *writer;   /* inserts outbox rows by hand */
static char *alice, *bob;
static const rvt_person people[] = {{&alice, "alice", "author"},
                                    {&bob, "bob", "reviewer"},
                                    {NULL, NULL, NULL}};

static PGconn *connect_db(void)
{
    PGconn *c = PQconnectdb(db.url);

    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "# cannot connect to %s: %s\n", db.name,
                PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    return c;
}

/* Runs sql on c; 1 when it succeeded (else the error on stderr). */
static int run(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    const ExecStatusType st = PQresultStatus(r);
    const int ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;

    if (!ok)
        fprintf(stderr, "# %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return ok;
}

static int setup(void **state)
{
    (void)state;
    if (rvt_people_mint(people) != 0
        || rvt_fixture_start(&db, &srv, "notify", testkit_shared_redis(), NULL,
                             0)
               != 0)
        return -1;
    srv_running = 1;
    listener = connect_db();
    writer = connect_db();
    return listener != NULL && writer != NULL
                   && run(listener, "LISTEN kh_outbox")
               ? 0
               : -1;
}

static int teardown(void **state)
{
    (void)state;
    PQfinish(listener);
    PQfinish(writer);
    if (srv_running)
        rvt_fixture_stop(&db, &srv);
    srv_running = 0;
    rvt_people_free(people);
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The listener's next notification on kh_outbox, waiting at most WAIT_MS;
 * its payload is copied into payload.  Returns 1, or 0 if none came. */
static int next_notification(char *payload, size_t len)
{
    const int64_t end = now_ms() + WAIT_MS;

    for (;;) {
        PGnotify *n;
        struct pollfd p = {PQsocket(listener), POLLIN, 0};
        const int64_t left = end - now_ms();

        if (PQconsumeInput(listener) != 1)
            return 0;
        n = PQnotifies(listener);
        if (n != NULL) {
            const int ours = strcmp(n->relname, "kh_outbox") == 0;

            snprintf(payload, len, "%s", n->extra);
            PQfreemem(n);
            if (ours)
                return 1;
            continue;
        }
        if (left <= 0 || poll(&p, 1, (int)left) < 0)
            return 0;
    }
}

/* Sends a notification of its own (payload tag) from the writer and
 * reads the listener up to it, so that a case starts with nothing left
 * over from the one before; 1, or 0 if it never came. */
static int sync_listener(const char *tag)
{
    char sql[128], payload[64];

    snprintf(sql, sizeof(sql), "NOTIFY kh_outbox, '%s'", tag);
    if (!run(writer, sql))
        return 0;
    while (next_notification(payload, sizeof(payload)))
        if (strcmp(payload, tag) == 0)
            return 1;
    return 0;
}

/* Commits one outbox row for document doc on the writer, with
 * kh.outbox_notify set to setting in the transaction (NULL: unset), then
 * sends the marker notification; 1 when all of it succeeded. */
static int insert_then_mark(const char *doc, const char *setting)
{
    char sql[1024];

    snprintf(sql, sizeof(sql),
             "WITH e AS (SELECT gen_random_uuid() AS id) "
             "INSERT INTO kh_outbox (event_id, routing_key, document_id, "
             "payload) SELECT e.id, 'document.submitted', %s, "
             "json_build_object('event_id', e.id, 'type', "
             "'document.submitted') FROM e",
             doc);
    if (!run(writer, "BEGIN"))
        return 0;
    if (setting != NULL) {
        char set[128];

        snprintf(set, sizeof(set), "SET LOCAL kh.outbox_notify = '%s'",
                 setting);
        if (!run(writer, set))
            return 0;
    }
    return run(writer, sql) && run(writer, "COMMIT")
           && run(writer, "NOTIFY kh_outbox, 'marker'");
}

static void a_session_with_the_notify_off_commits_its_row_silently(
    void **state)
{
    char doc[24], payload[64];

    (void)state;
    assert_int_equal(rvt_create_doc(srv.port, alice, "notify", doc), 0);
    assert_true(sync_listener("sync-off"));
    assert_true(insert_then_mark(doc, "off"));
    assert_true(next_notification(payload, sizeof(payload)));
    TK_EXPECT(strcmp(payload, "marker") == 0,
              "with kh.outbox_notify = 'off' the outbox insert sends no "
              "notification: the first one is the marker sent after the "
              "commit, got \"%s\"",
              payload);
}

static void any_other_session_is_notified_by_the_trigger(void **state)
{
    char doc[24], payload[64];

    (void)state;
    assert_int_equal(rvt_create_doc(srv.port, alice, "notify", doc), 0);
    assert_true(sync_listener("sync-unset"));
    assert_true(insert_then_mark(doc, NULL));
    assert_true(next_notification(payload, sizeof(payload)));
    TK_EXPECT(payload[0] == '\0',
              "without the setting the trigger notifies at the commit, "
              "before the marker: got \"%s\" first",
              payload);
    assert_true(next_notification(payload, sizeof(payload)));
    TK_EXPECT(strcmp(payload, "marker") == 0, "then the marker, got \"%s\"",
              payload);
}

static void a_submit_and_an_approval_wake_a_listener(void **state)
{
    char doc[24], review[24], path[96], payload[64];
    rvt_resp r;

    (void)state;
    assert_true(sync_listener("sync-requests"));
    assert_int_equal(rvt_create_pending(srv.port, alice, doc, review), 0);
    TK_EXPECT(next_notification(payload, sizeof(payload)),
              "the submit's event wakes a LISTENer within %d ms", WAIT_MS);
    snprintf(path, sizeof(path), "/v1/reviews/%s/approve", review);
    assert_int_equal(rvt_call(srv.port, "POST", path, bob, "{}", NULL, &r), 0);
    rvt_expect_status(&r, 200, NULL, "approve");
    rvt_resp_free(&r);
    TK_EXPECT(next_notification(payload, sizeof(payload)),
              "the approval's event wakes a LISTENer within %d ms", WAIT_MS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            a_session_with_the_notify_off_commits_its_row_silently),
        cmocka_unit_test(any_other_session_is_notified_by_the_trigger),
        cmocka_unit_test(a_submit_and_an_approval_wake_a_listener),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
