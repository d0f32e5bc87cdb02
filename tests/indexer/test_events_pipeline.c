/*
 * test_events_pipeline.c: the outbox and its relay against the stack's
 * RabbitMQ, without faults: exactly one event per committed change, none
 * for a change that rolled back, and once per event with two relaying
 * reviewd instances on one database (issue 5, tests 1, 4 and 6).
 *
 * One database and one reviewd (with REVIEWD_TEST_HOOKS=1) serve all
 * cases; a test consumer with its own exclusive queue bound to
 * kh.documents counts what arrives by message_id.  The stack's broker is
 * shared with every other run, so a case only looks at events of its own
 * documents (ids are offset per process) and compares them three ways:
 * with the transitions the clients saw succeed, with the outbox rows, and
 * with each other (no id twice).  Waits are on conditions with generous
 * deadlines; nothing here depends on how fast the machine is.
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

#include "evt_kit.h"
#include "testkit.h"

#define CLIENTS 16
#define DOCS 200         /* test 1 */
#define TWIN_DOCS 100    /* test 6 */
#define ARRIVAL_MS 60000 /* only catches a hang */

typedef struct fixture {
    rvt_db db;
    rvt_server a, b;
    evt_consumer *consumer;
    evt_tokens tok;
} fixture;

/* One document's walk through the lifecycle, done by one client. */
typedef struct walk {
    char doc_id[24];
    char review_id[24];
    int approve;   /* else reject */
    int submitted; /* the submit answered 201 */
    int decided;   /* the decision answered 200 */
} walk;

typedef struct walks {
    fixture *f;
    walk *w;
    int ports[2]; /* clients alternate between these */
    atomic_int failures;
} walks;

static int fixture_open(void *arg)
{
    static const char *const env[] = {"REVIEWD_TEST_HOOKS=1",
                                      "REVIEWD_LOG_FILE=@log", NULL};
    fixture *f = arg;
    char e_amqp[300];
    const char *const env_amqp[] = {e_amqp, env[0], env[1], NULL};

    snprintf(e_amqp, sizeof(e_amqp), "AMQP_URL=%s", testkit_amqp_url());
    /* reviewd migrates the database at start; the ids come after. */
    if (testkit_shared_redis() == NULL || rvt_db_create(&f->db, "evtpipe") != 0
        || rvt_server_start(&f->a, &f->db, testkit_redis_url(), env_amqp,
                            "evt-pipeline")
               != 0
        || rvt_db_offset_ids(&f->db) != 0
        || (f->consumer = evt_consumer_start_shared()) == NULL
        || !rvt_wait_ready(f->a.port, "ok", NULL, 30000)
        || evt_tokens_make(&f->tok) != 0)
        return -1;
    return 0;
}

static int fixture_close(void *arg)
{
    fixture *f = arg;
    const int clean = evt_fixture_close(&f->a, f->consumer, &f->db);

    evt_tokens_free(&f->tok);
    return clean;
}

/* The group setup and teardown (evt_kit.h). */
EVT_GROUP_FIXTURE(fixture, fixture_open, fixture_close)

/* Creates, submits and decides one document (item), as one client. */
static void walk_one(int item, void *arg)
{
    walks *ws = arg;
    walk *w = &ws->w[item];
    const int port = ws->ports[item % 2];
    char path[96];
    rvt_resp r;

    w->approve = item % 2 == 0;
    if (rvt_create_pending(port, ws->f->tok.author, w->doc_id, w->review_id)
        != 0) {
        atomic_fetch_add(&ws->failures, 1);
        return;
    }
    w->submitted = 1;
    snprintf(path, sizeof(path), "/v1/reviews/%s/%s", w->review_id,
             w->approve ? "approve" : "reject");
    if (rvt_call(port, "POST", path, ws->f->tok.reviewer,
                 w->approve ? "{}" : "{\"comment\":\"no\"}", NULL, &r)
            == 0
        && r.status == 200) {
        w->decided = 1;
    } else {
        fprintf(stderr, "decision on review %s gave %d\n", w->review_id,
                r.status);
        atomic_fetch_add(&ws->failures, 1);
    }
    rvt_resp_free(&r);
}

static int doc_index(const walk *w, int n, const char *doc_id)
{
    int i;

    for (i = 0; i < n; i++)
        if (strcmp(w[i].doc_id, doc_id) == 0)
            return i;
    return -1;
}

typedef struct tally {
    int ours;         /* events of these documents */
    int foreign_type; /* of these documents but an unknown type */
    int out_of_order; /* a decision before its document's submit */
    int late_doc;     /* the last walk whose submit came late */
    int *seen;        /* per walk: 1 after submitted, 2 after decided */
} tally;

/* Counts the consumer's events for the walks' documents, checking each
 * document's events came as submitted, then its decision. */
static void count_ours(fixture *f, const walk *w, int n, tally *t)
{
    size_t got = 0, i;
    evt_event *ev = evt_consumer_events(f->consumer, &got);

    memset(t->seen, 0, (size_t)n * sizeof(int));
    t->ours = t->foreign_type = t->out_of_order = 0;
    for (i = 0; i < got; i++) {
        const int k = doc_index(w, n, ev[i].document_id);

        if (k < 0)
            continue;
        t->ours++;
        if (strcmp(ev[i].routing_key, "document.submitted") == 0) {
            t->seen[k] = 1;
        } else if (strcmp(ev[i].routing_key, w[k].approve
                                                 ? "document.approved"
                                                 : "document.rejected")
                   == 0) {
            if (t->seen[k] != 1) {
                t->out_of_order++;
                t->late_doc = k;
            }
            t->seen[k] = 2;
        } else {
            t->foreign_type++;
        }
    }
    free(ev);
}

typedef struct arrival {
    fixture *f;
    const walk *w;
    int n;
    int want;
    tally *t;
} arrival;

static int all_arrived(void *arg)
{
    arrival *a = arg;

    count_ours(a->f, a->w, a->n, a->t);
    return a->t->ours >= a->want;
}

/* Every outbox id arrived exactly once: returns how many did not. */
static int ids_not_once(fixture *f, char *ids)
{
    char *save = NULL, *id;
    int bad = 0;

    for (id = strtok_r(ids, ",", &save); id != NULL;
         id = strtok_r(NULL, ",", &save)) {
        const int n = evt_consumer_count(f->consumer, id);

        if (n != 1) {
            fprintf(stderr, "event %s arrived %d times\n", id, n);
            bad++;
        }
    }
    return bad;
}

/* After a failure: a document's outbox rows and what the consumer got. */
static void print_outbox_of(fixture *f, const char *doc_id)
{
    char sql[512], out[2048];
    size_t got = 0, i;
    evt_event *ev = evt_consumer_events(f->consumer, &got);

    snprintf(sql, sizeof(sql),
             "SELECT string_agg(id || ' ' || routing_key "
             "|| ' ' || event_id || ' created ' || created_at || ' sent ' "
             "|| coalesce(sent_at::text, '-'), E'\\n' ORDER BY id) "
             "FROM kh_outbox WHERE document_id = %s",
             doc_id);
    if (rvt_sql(&f->db, sql, out, sizeof(out)) == 0) {
        fprintf(stderr, "outbox of document %s:\n%s\nreceived:\n", doc_id,
                out);
    }
    for (i = 0; i < got; i++) {
        if (strcmp(ev[i].document_id, doc_id) == 0) {
            fprintf(stderr, "  #%zu %s %s%s\n", i, ev[i].routing_key,
                    ev[i].message_id, ev[i].redelivered ? " redelivered" : "");
        }
    }
    free(ev);
}

/*
 * The checks of tests 1 and 6: every change the clients saw succeed has
 * one outbox row and one delivery, nothing else of these documents came,
 * and each document's events came in commit order.
 */
static void expect_one_event_per_change(fixture *f, walk *w, int n)
{
    tally t = {0, 0, 0, -1, calloc((size_t)n, sizeof(int))};
    arrival a = {f, w, n, 2 * n, &t};
    long long rows;
    size_t nids = 0;
    char *ids;
    int i, changes = 0;

    assert_non_null(t.seen);
    for (i = 0; i < n; i++)
        changes += w[i].submitted + w[i].decided;
    TK_EXPECT(changes == 2 * n,
              "all %d submits and decisions succeed, "
              "%d did",
              2 * n, changes);
    TK_EXPECT(evt_db_wait_outbox_empty(&f->db, ARRIVAL_MS),
              "the relay sends the whole outbox");
    testkit_wait_until(all_arrived, &a, ARRIVAL_MS);
    rows = rvt_sql_int(&f->db, "SELECT count(*) FROM kh_outbox");
    ids = evt_db_outbox_ids(&f->db, NULL, &nids);
    assert_non_null(ids);
    count_ours(f, w, n, &t);
    TK_EXPECT(t.ours == changes,
              "one event per change: %d changes, %d "
              "events of these documents arrived",
              changes, t.ours);
    TK_EXPECT((long long)nids == rows && rows >= changes,
              "the outbox holds every change (%lld rows, %d changes)", rows,
              changes);
    TK_EXPECT(ids_not_once(f, ids) == 0, "every outbox event arrives once");
    TK_EXPECT(t.foreign_type == 0,
              "no event of an unexpected type "
              "(%d)",
              t.foreign_type);
    if (t.out_of_order > 0)
        print_outbox_of(f, w[t.late_doc].doc_id);
    TK_EXPECT(t.out_of_order == 0,
              "each document's decision comes after "
              "its submit (%d did not)",
              t.out_of_order);
    free(ids);
    free(t.seen);
}

static void walk_documents(fixture *f, walk *w, int n, int port_a, int port_b)
{
    walks ws = {f, w, {port_a, port_b}, 0};

    assert_int_equal(evt_parallel(CLIENTS, n, walk_one, &ws), 0);
    TK_EXPECT(atomic_load(&ws.failures) == 0, "no request fails (%d did)",
              atomic_load(&ws.failures));
}

/* Test 1. */
static void concurrent_changes_give_exactly_one_event_each(void **state)
{
    fixture *f = *state;
    walk *w = calloc(DOCS, sizeof(*w));
    const long long before = rvt_sql_int(&f->db,
                                         "SELECT count(*) FROM kh_outbox");

    assert_non_null(w);
    TK_EXPECT(before == 0, "the first case starts with an empty outbox");
    walk_documents(f, w, DOCS, f->a.port, f->a.port);
    expect_one_event_per_change(f, w, DOCS);
    free(w);
}

/* Sends one request with X-Test-Fail: after-event; returns the status. */
static int call_failing(fixture *f, const char *path, const char *token,
                        const char *body)
{
    char auth[4200];
    const char *const headers[] = {auth, "Content-Type: application/json",
                                   "X-Test-Fail: after-event", NULL};
    rvt_resp r;
    int status;

    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
    rvt_http(f->a.port, "POST", path, headers, body, strlen(body), &r);
    status = r.status;
    rvt_resp_free(&r);
    return status;
}

static int call_status(fixture *f, const char *path, const char *token,
                       const char *body, char *field_out, const char *field)
{
    rvt_resp r;
    int status;

    rvt_call(f->a.port, "POST", path, token, body, NULL, &r);
    status = r.status;
    if (field_out != NULL) {
        snprintf(field_out, 24, "%s",
                 rvt_field(&r, field) != NULL ? rvt_field(&r, field) : "");
    }
    rvt_resp_free(&r);
    return status;
}

typedef struct marker {
    fixture *f;
    const char *event_id;
} marker;

static int marker_arrived(void *arg)
{
    const marker *m = arg;

    return evt_consumer_count(m->f->consumer, m->event_id) > 0;
}

/* Test 4: a submit and an approval whose transactions roll back after
 * their outbox insert leave no row and send nothing; the successful
 * submit and rejection around them are the markers that show the relay
 * had its chance. */
static void rolled_back_change_emits_nothing(void **state)
{
    fixture *f = *state;
    char doc[24], review[24], path[96], sql[256], reject_id[64];
    marker m = {f, reject_id};
    size_t got = 0, i;
    evt_event *ev;
    int ours = 0;

    assert_int_equal(rvt_create_doc(f->a.port, f->tok.author, "rollback", doc),
                     0);
    snprintf(path, sizeof(path), "/v1/documents/%s/submit", doc);
    TK_EXPECT(call_failing(f, path, f->tok.author, "{}") == 500,
              "a submit failing after its event answers 500");
    TK_EXPECT(call_status(f, path, f->tok.author, "{}", review, "review.id")
                  == 201,
              "the same submit without the failure answers 201");
    snprintf(path, sizeof(path), "/v1/reviews/%s/approve", review);
    TK_EXPECT(call_failing(f, path, f->tok.reviewer, "{}") == 500,
              "an approval failing after its event answers 500");
    snprintf(path, sizeof(path), "/v1/reviews/%s/reject", review);
    TK_EXPECT(call_status(f, path, f->tok.reviewer, "{\"comment\":\"no\"}",
                          NULL, NULL)
                  == 200,
              "the review is still pending and "
              "can be rejected");
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM kh_outbox WHERE "
             "document_id = %s",
             doc);
    TK_EXPECT(rvt_sql_int(&f->db, sql) == 2,
              "the outbox holds the two "
              "committed changes only, got %lld rows",
              rvt_sql_int(&f->db, sql));
    assert_int_equal(evt_db_event_id(&f->db, doc, "document.rejected",
                                     reject_id),
                     0);
    TK_EXPECT(testkit_wait_until(marker_arrived, &m, ARRIVAL_MS),
              "the rejection after the failures arrives");
    TK_EXPECT(evt_db_wait_outbox_empty(&f->db, ARRIVAL_MS),
              "the relay has sent everything");
    ev = evt_consumer_events(f->consumer, &got);
    for (i = 0; i < got; i++) {
        if (strcmp(ev[i].document_id, doc) == 0) {
            ours++;
            TK_EXPECT(strcmp(ev[i].routing_key, "document.approved") != 0,
                      "no approval event for the rolled-back approval");
        }
    }
    free(ev);
    TK_EXPECT(ours == 2,
              "exactly the submit and the rejection arrive for "
              "the document, got %d events",
              ours);
}

static double metric(int port, const char *name)
{
    const size_t len = strlen(name);
    rvt_resp r;
    const char *p;
    double v = -1;

    if (rvt_http(port, "GET", "/metrics", NULL, NULL, 0, &r) == 0
        && r.body != NULL) {
        for (p = r.body; p != NULL; p = strchr(p, '\n')) {
            p += *p == '\n';
            if (strncmp(p, name, len) == 0 && p[len] == ' ') {
                v = atof(p + len + 1);
                break;
            }
        }
    }
    rvt_resp_free(&r);
    return v;
}

/* Test 6: a second reviewd relays from the same database while clients
 * spread their requests over both. */
static void two_relays_on_one_database_send_each_event_once(void **state)
{
    static const char *const env_hooks[] = {"REVIEWD_LOG_FILE=@log", NULL};
    fixture *f = *state;
    walk *w = calloc(TWIN_DOCS, sizeof(*w));
    char e_amqp[300];
    const char *const env[] = {e_amqp, env_hooks[0], NULL};
    double pub_a, pub_b;

    assert_non_null(w);
    TK_EXPECT(evt_db_wait_outbox_empty(&f->db, ARRIVAL_MS),
              "earlier cases' events are all sent");
    snprintf(e_amqp, sizeof(e_amqp), "AMQP_URL=%s", testkit_amqp_url());
    assert_int_equal(rvt_server_start(&f->b, &f->db, testkit_redis_url(), env,
                                      "evt-pipeline"),
                     0);
    TK_EXPECT(rvt_wait_ready(f->b.port, "ok", NULL, 30000),
              "the second reviewd connects to RabbitMQ");
    pub_a = metric(f->a.port, "reviewd_relay_publishes_total");
    pub_b = metric(f->b.port, "reviewd_relay_publishes_total");
    walk_documents(f, w, TWIN_DOCS, f->a.port, f->b.port);
    expect_one_event_per_change(f, w, TWIN_DOCS);
    pub_a = metric(f->a.port, "reviewd_relay_publishes_total") - pub_a;
    pub_b = metric(f->b.port, "reviewd_relay_publishes_total") - pub_b;
    fprintf(stderr, "two relays: instance A published %.0f, B %.0f\n", pub_a,
            pub_b);
    TK_EXPECT(pub_a + pub_b == 2 * TWIN_DOCS,
              "the two relays publish %d "
              "messages between them, no more (A %.0f, B %.0f)",
              2 * TWIN_DOCS, pub_a, pub_b);
    TK_EXPECT(rvt_server_stop(&f->b), "the second reviewd exits cleanly");
    rvt_server_remove_dir(&f->b);
    free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(concurrent_changes_give_exactly_one_event_each),
        cmocka_unit_test(rolled_back_change_emits_nothing),
        cmocka_unit_test(two_relays_on_one_database_send_each_event_once),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
