/*
 * test_events_indexer.c: what kh-indexer itself promises, on the stack's
 * RabbitMQ with an exchange and durable queues of this run's own (issue
 * 15: the audit's gaps in kh-indexer).
 *
 * A reviewd relays approvals to the run's exchange, which it binds to two
 * queues (REVIEWD_AMQP_QUEUES), so the events wait there before any
 * kh-indexer consumes.  The cases:
 *
 *   - batches: twenty approvals wait in the queue while no kh-indexer
 *     runs; one starts and indexes them all, and it must have done so in
 *     fewer transactions than events (kh_main.c takes what is already
 *     waiting into one transaction, kh_store_apply_many).  The count of
 *     transactions is PostgreSQL's own: the distinct xmin of the
 *     kh_processed_event rows, each written by the transaction that
 *     applied its event, so no counter in kh-indexer can make it lie.
 *     One event per transaction gives twenty;
 *   - the password (finding 7, as reviewd.recovery checks for reviewd):
 *     kh-indexer meets PostgreSQL only when an event comes, so with an
 *     event waiting it is started on DATABASE_URLs carrying a distinctive
 *     password that cannot work (an unreachable port, a wrong password
 *     for the real server, a host that does not resolve, a password with
 *     '/', '@' or "%2F", a URI that does not parse); each time it must log
 *     the failed event with libpq's reason, and no piece of the password
 *     may show in its log or its stdout and stderr.
 *
 * Waits are conditions with deadlines that only catch a hang.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "evt_kit.h"
#include "testkit.h"

#define BATCH_DOCS 20
#define WAIT_MS 60000 /* only catches a hang */
#define PASSWORD_HEAD "Pw9xQz"

typedef struct fixture {
    rvt_db db;
    rvt_server relay;
    evt_indexer ix;
    evt_tokens tok;
    char exchange[64];
    char batch_q[80]; /* the batch case's queue */
    char pw_q[80];    /* the password case's queue */
} fixture;

static int fixture_open(void *arg)
{
    fixture *f = arg;
    char e_amqp[300], e_ex[100], e_q[300];
    const char *const env[] = {e_amqp, e_ex, e_q, "REVIEWD_LOG_FILE=@log",
                               NULL};

    snprintf(f->exchange, sizeof(f->exchange), "evt.ix.%d", (int)getpid());
    snprintf(f->batch_q, sizeof(f->batch_q), "%s.batch", f->exchange);
    snprintf(f->pw_q, sizeof(f->pw_q), "%s.pw", f->exchange);
    snprintf(e_amqp, sizeof(e_amqp), "AMQP_URL=%s", testkit_amqp_url());
    snprintf(e_ex, sizeof(e_ex), "REVIEWD_AMQP_EXCHANGE=%s", f->exchange);
    snprintf(e_q, sizeof(e_q),
             "REVIEWD_AMQP_QUEUES=%s:document.approved,%s:document.approved",
             f->batch_q, f->pw_q);
    if (testkit_shared_redis() == NULL || evt_tokens_make(&f->tok) != 0)
        return -1;
    if (rvt_db_create(&f->db, "evtix") != 0
        || rvt_server_start(&f->relay, &f->db, testkit_redis_url(), env,
                            "evt-indexer")
               != 0
        || rvt_db_offset_ids(&f->db) != 0
        || !rvt_wait_ready(f->relay.port, "ok", NULL, WAIT_MS)) {
        fprintf(stderr, "the relaying reviewd did not get ready\n");
        return -1;
    }
    return 0;
}

static int fixture_close(void *arg)
{
    fixture *f = arg;
    const int clean = rvt_server_stop(&f->relay);

    if (clean)
        rvt_server_remove_dir(&f->relay);
    else
        rvt_server_log_tail(&f->relay);
    /* The relaying reviewd declared them, if it ever started. */
    if (f->relay.dir[0] != '\0') {
        evt_amqp_forget(testkit_amqp_url(), f->exchange, f->batch_q);
        evt_amqp_forget(testkit_amqp_url(), f->exchange, f->pw_q);
    }
    rvt_db_drop(&f->db);
    evt_tokens_free(&f->tok);
    return clean;
}

/* The group setup and teardown (evt_kit.h). */
EVT_GROUP_FIXTURE(fixture, fixture_open, fixture_close)

/* After each case: its kh-indexer goes, whatever happened, and must
 * exit 0 (a sanitizer's report makes it exit otherwise). */
static int end_case(void **state)
{
    fixture *f = *state;
    int clean = 1;

    if (f->ix.pid > 0)
        clean = evt_indexer_stop(&f->ix);
    f->ix.pid = 0;
    return clean ? 0 : -1;
}

/* Creates, submits and approves n documents; their ids into docs. */
static int approve_docs(fixture *f, char (*docs)[24], int n)
{
    char review[24];
    int i;

    for (i = 0; i < n; i++)
        if (evt_create_doc(f->relay.port, f->tok.author, "Batch",
                           "One paragraph to index.", docs[i])
                != 0
            || evt_submit(f->relay.port, f->tok.author, docs[i], review) != 0
            || evt_decide(f->relay.port, f->tok.reviewer, review, 1) != 0)
            return -1;
    return 0;
}

/* ---- batches ---------------------------------------------------------- */

static void a_backlog_is_applied_in_fewer_transactions_than_events(
    void **state)
{
    fixture *f = *state;
    char docs[BATCH_DOCS][24], k_ex[100], k_q[120];
    const char *const ix_env[] = {k_ex, k_q, NULL};
    long long events, transactions;

    snprintf(k_ex, sizeof(k_ex), "KH_EXCHANGE=%s", f->exchange);
    snprintf(k_q, sizeof(k_q), "KH_QUEUE=%s", f->batch_q);
    assert_int_equal(approve_docs(f, docs, BATCH_DOCS), 0);
    TK_EXPECT(evt_db_wait_outbox_empty(&f->db, WAIT_MS),
              "the relay publishes the %d approvals (no consumer yet)",
              BATCH_DOCS);
    assert_int_equal(evt_indexer_start(&f->ix, &f->db, testkit_amqp_url(),
                                       ix_env, "evt-indexer"),
                     0);
    TK_EXPECT(evt_db_wait_docs_indexed(&f->db, docs, BATCH_DOCS, WAIT_MS),
              "kh-indexer indexes all %d waiting documents", BATCH_DOCS);
    events = rvt_sql_int(&f->db, "SELECT count(*) FROM kh_processed_event");
    transactions = rvt_sql_int(&f->db,
                               "SELECT count(DISTINCT xmin::text) FROM "
                               "kh_processed_event");
    fprintf(stderr, "%lld events applied in %lld transactions\n", events,
            transactions);
    TK_EXPECT(events == BATCH_DOCS, "one processed row per event: %lld",
              events);
    TK_EXPECT(transactions >= 1 && transactions < events,
              "kh-indexer applies a waiting backlog in batches: %lld "
              "events in %lld transactions",
              events, transactions);
}

/* ---- the password --------------------------------------------------------- */

static int event_failed_logged(void *arg)
{
    const evt_indexer *ix = arg;

    return ix->pid > 0 && evt_log_count(ix->log, "event_failed", NULL) > 0;
}

/* Runs kh-indexer on url until it has failed an event, stops it, and
 * checks its output: libpq's reason shows, no piece of the password. */
static void no_password_in_the_output(fixture *f, const char *url)
{
    char k_ex[100], k_q[120];
    const char *const ix_env[] = {k_ex, k_q, "KH_LOG_LEVEL=debug", NULL};
    rvt_db bad = f->db;

    bad.conn = NULL;
    snprintf(bad.url, sizeof(bad.url), "%s", url);
    snprintf(k_ex, sizeof(k_ex), "KH_EXCHANGE=%s", f->exchange);
    snprintf(k_q, sizeof(k_q), "KH_QUEUE=%s", f->pw_q);
    assert_int_equal(evt_indexer_start(&f->ix, &bad, testkit_amqp_url(),
                                       ix_env, "evt-indexer"),
                     0);
    TK_EXPECT(testkit_wait_until(event_failed_logged, &f->ix, WAIT_MS),
              "kh-indexer on %s logs the event it could not apply", url);
    TK_EXPECT(evt_indexer_stop(&f->ix),
              "kh-indexer on %s stops cleanly (exit 0)", url);
    f->ix.pid = 0;
    TK_EXPECT(evt_indexer_output_has(&f->ix, "postgres connect: "),
              "the failure gives libpq's reason (%s)", f->ix.log);
    TK_EXPECT(!evt_indexer_output_has(&f->ix, PASSWORD_HEAD),
              "no piece of the password in what kh-indexer wrote for %s "
              "(%s and its .out)",
              url, f->ix.log);
}

static void the_password_is_in_no_line_of_the_indexer(void **state)
{
    fixture *f = *state;
    char doc[1][24], wrong[600];
    const char *const urls[] = {
        "postgresql://kh:" PASSWORD_HEAD "secret@127.0.0.1:1/db",
        "postgresql://kh:" PASSWORD_HEAD "secret@nohost.invalid:5432/db",
        "postgresql://kh:" PASSWORD_HEAD "/secret@127.0.0.1:1/db",
        "postgresql://kh:" PASSWORD_HEAD "@secret@127.0.0.1:1/db",
        "postgresql://kh:" PASSWORD_HEAD "%2Fsecret@127.0.0.1:1/db",
        "postgresql://kh:" PASSWORD_HEAD "secret@[::1/db",
        "host=127.0.0.1 port=1 password " PASSWORD_HEAD "secret",
        wrong,
    };
    size_t i;

    /* The real server and user, with a password that is not theirs: a
     * later keyword wins in a key=value string. */
    snprintf(wrong, sizeof(wrong), "%s password=" PASSWORD_HEAD "secret",
             f->db.url);
    assert_int_equal(approve_docs(f, doc, 1), 0);
    TK_EXPECT(evt_db_wait_outbox_empty(&f->db, WAIT_MS),
              "the relay publishes the approval");
    for (i = 0; i < sizeof(urls) / sizeof(urls[0]); i++)
        no_password_in_the_output(f, urls[i]);
}

#define CASE(fn) cmocka_unit_test_teardown(fn, end_case)

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(a_backlog_is_applied_in_fewer_transactions_than_events),
        CASE(the_password_is_in_no_line_of_the_indexer),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
