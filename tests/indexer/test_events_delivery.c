/*
 * test_events_delivery.c: what the relay promises about delivery, on a
 * private RabbitMQ node with a TLS listener (issue 15, items 4, 5, 11).
 *
 * One node (evt_rabbit_begin_tls: plain AMQP and AMQP over TLS, the
 * broker's certificate signed by a CA tls_certs.sh makes for this run)
 * and one database serve the cases; each case uses an exchange (and
 * queue) of its own, so one case's events never reach another's
 * consumer.  The node boots (14-25 s) while the first case's backlog is
 * written through a reviewd that does not relay.  The cases:
 *
 *   - a nack in the middle of a batch (11): ten documents, each submitted
 *     and then approved, wait in the outbox; the relaying reviewd-testing
 *     treats its third publish as nacked (REVIEWD_TEST_NACK_PUBLISH=3).
 *     The nacked event must arrive twice (the hook fired and the row was
 *     sent again), and for every document the test consumer must see the
 *     last copy of its submitted event before the first copy of its
 *     approved one;
 *   - events before any consumer (5): a reviewd that declares the
 *     indexer's queue (REVIEWD_AMQP_QUEUES) takes five approvals while no
 *     consumer has ever connected; once the outbox says they were sent, a
 *     kh-indexer starts, and all five documents get indexed;
 *   - amqps with the test CA (4): the same, with the relay publishing and
 *     kh-indexer consuming over amqps:// (AMQP_CACERT = the test CA);
 *   - amqps with a wrong CA (4): a reviewd given another CA never
 *     connects: /readyz keeps amqp "down", and its log says the TLS
 *     handshake was refused because the peer's certificate did not
 *     verify (and names the CA file);
 *   - kh-indexer over amqps with a wrong CA (4): two approvals wait in a
 *     queue; a kh-indexer given another CA logs the same refusal, never
 *     consumes and indexes nothing, and a kh-indexer given the test CA
 *     then indexes both (they were left in the queue);
 *   - unbound keys with the default configuration (5): a reviewd with
 *     neither REVIEWD_AMQP_EXCHANGE nor REVIEWD_AMQP_QUEUES (kh.documents,
 *     kh.indexer bound to document.approved) relays a submitted and a
 *     rejected event, which no queue binds: once the outbox says they
 *     were sent, both are in kh.documents.unrouted, the alternate
 *     exchange's queue (before, they were acked into nowhere); a
 *     kh-indexer then declares the same exchange without a 406;
 *   - a deleted queue (5): with the configured queue and the unrouted
 *     queue both deleted under a running reviewd, the next approval is
 *     returned (event_unroutable, the row kept unsent), and once the
 *     relay has reconnected and declared the queue again it is delivered
 *     there;
 *   - an exchange from before the alternate exchange (5): declared
 *     without it before reviewd starts, reviewd warns once
 *     (amqp_exchange_without_ae) and a submitted event, which no queue
 *     binds, is returned and stays unsent rather than lost; a kh-indexer
 *     on that exchange warns once too and consumes.  Last, as it leaves
 *     that row in the outbox.
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

#define ORDER_DOCS 10
#define EARLY_DOCS 5
#define WAIT_MS 30000 /* only catches a hang */

typedef struct fixture {
    evt_rabbit rabbit;
    rvt_db db;
    rvt_server relay; /* the case's reviewd; stopped after the case */
    evt_consumer *consumer;
    evt_indexer ix;
    evt_tokens tok;
    char order_docs[ORDER_DOCS][24];
} fixture;

/* ---- the backlog of the order case ----------------------------------- */

/* Ten documents created and submitted, then all ten approved, through a
 * reviewd without AMQP_URL (it also migrates the fresh database): the
 * outbox holds S1..S10 then A1..A10. */
static int fill_order_backlog(fixture *f)
{
    static const char *const env[] = {"REVIEWD_LOG_FILE=@log", NULL};
    char reviews[ORDER_DOCS][24];
    rvt_server quiet;
    int i, ok = 1;

    if (rvt_server_start(&quiet, &f->db, testkit_redis_url(), env,
                         "evt-delivery")
        != 0)
        return -1;
    ok = rvt_db_offset_ids(&f->db) == 0;
    for (i = 0; ok && i < ORDER_DOCS; i++) {
        ok = evt_create_doc(quiet.port, f->tok.author, "Order",
                            "One paragraph to index.", f->order_docs[i])
                 == 0
             && evt_submit(quiet.port, f->tok.author, f->order_docs[i],
                           reviews[i])
                    == 0;
    }
    for (i = 0; ok && i < ORDER_DOCS; i++)
        ok = evt_decide(quiet.port, f->tok.reviewer, reviews[i], 1) == 0;
    if (!ok)
        fprintf(stderr, "the order backlog was not written\n");
    return rvt_server_stop(&quiet) && ok ? 0 : -1;
}

static int fixture_open(void *arg)
{
    fixture *f = arg;

    if (testkit_shared_redis() == NULL
        || evt_rabbit_begin_tls(&f->rabbit, "evt-delivery") != 0
        || evt_tokens_make(&f->tok) != 0
        || rvt_db_create(&f->db, "evtdeliv") != 0 || fill_order_backlog(f) != 0
        || evt_rabbit_wait_booted(&f->rabbit) != 0)
        return -1;
    return 0;
}

static int fixture_close(void *arg)
{
    fixture *f = arg;

    rvt_db_drop(&f->db);
    evt_rabbit_free(&f->rabbit);
    evt_tokens_free(&f->tok);
    return 1;
}

/* The group setup and teardown (evt_kit.h). */
EVT_GROUP_FIXTURE(fixture, fixture_open, fixture_close)

/* After each case: its reviewd, consumer and indexer go, whatever
 * happened. */
static int end_case(void **state)
{
    fixture *f = *state;
    int clean = 1;

    if (f->ix.pid > 0) {
        evt_indexer_stop(&f->ix);
        f->ix.pid = 0;
    }
    if (f->relay.pid > 0) {
        clean = rvt_server_stop(&f->relay);
        if (clean)
            rvt_server_remove_dir(&f->relay);
        else
            rvt_server_log_tail(&f->relay);
        f->relay.pid = 0;
    }
    evt_consumer_free(f->consumer);
    f->consumer = NULL;
    return clean ? 0 : -1;
}

/* A name unique to this run: "<what>.<pid>". */
static void own_name(char *out, size_t len, const char *what)
{
    snprintf(out, len, "evt.%s.%d", what, (int)getpid());
}

/* ---- per-document order after a nack --------------------------------- */

typedef struct seen_all {
    fixture *f;
    size_t want;
} seen_all;

static int consumer_has(void *arg)
{
    const seen_all *s = arg;

    return evt_consumer_total(s->f->consumer) >= s->want;
}

/* Index of the first (last != 0: last) delivery of doc's event of type
 * key in the record, or -1. */
static long delivery_at(const evt_event *ev, size_t n, const char *doc,
                        const char *key, int last)
{
    long at = -1;
    size_t i;

    for (i = 0; i < n; i++) {
        if (strcmp(ev[i].document_id, doc) == 0
            && strcmp(ev[i].routing_key, key) == 0) {
            at = (long)i;
            if (!last)
                break;
        }
    }
    return at;
}

static void nack_mid_batch_keeps_per_document_order(void **state)
{
    fixture *f = *state;
    char exchange[64], queue[64], e_ex[100], e_amqp[200];
    const char *const env[] = {e_amqp,
                               e_ex,
                               "REVIEWD_AMQP_QUEUES=",
                               "REVIEWD_TEST_NACK_PUBLISH=3",
                               "REVIEWD_RELAY_BATCH=100",
                               "REVIEWD_LOG_FILE=@log",
                               NULL};
    seen_all want = {f, 2 * ORDER_DOCS + 1};
    evt_event *ev;
    size_t n = 0, twice = 0, i;

    own_name(exchange, sizeof(exchange), "order");
    own_name(queue, sizeof(queue), "order.q");
    snprintf(e_ex, sizeof(e_ex), "REVIEWD_AMQP_EXCHANGE=%s", exchange);
    snprintf(e_amqp, sizeof(e_amqp), "AMQP_URL=%s", f->rabbit.url);
    f->consumer = evt_consumer_start(f->rabbit.url, exchange, queue);
    assert_non_null(f->consumer);
    assert_int_equal(rvt_server_start(&f->relay, &f->db, testkit_redis_url(),
                                      env, "evt-delivery"),
                     0);
    TK_EXPECT(evt_db_wait_outbox_empty(&f->db, WAIT_MS),
              "the relay sends the whole backlog despite the nack");
    TK_EXPECT(testkit_wait_until(consumer_has, &want, WAIT_MS),
              "all %d events and the nacked one's second copy arrive",
              2 * ORDER_DOCS);
    ev = evt_consumer_events(f->consumer, &n);
    assert_non_null(ev);
    for (i = 0; i < n; i++)
        twice += evt_consumer_count(f->consumer, ev[i].message_id) == 2;
    TK_EXPECT(twice == 2,
              "exactly one event (the nacked one) arrives "
              "twice; %zu deliveries belong to twice-seen events",
              twice);
    for (i = 0; i < ORDER_DOCS; i++) {
        const char *doc = f->order_docs[i];
        const long s_last = delivery_at(ev, n, doc, "document.submitted", 1);
        const long a_first = delivery_at(ev, n, doc, "document.approved", 0);

        TK_EXPECT(s_last >= 0 && a_first > s_last,
                  "document %s: every "
                  "copy of its submitted event (last at %ld) comes before "
                  "its approved event (first at %ld)",
                  doc, s_last, a_first);
    }
    free(ev);
}

/* ---- amqps, and events before any consumer --------------------------- */

/* Creates, submits and approves n documents through port. */
static int approve_docs(fixture *f, int port, char (*docs)[24], int n)
{
    char review[24];
    int i;

    for (i = 0; i < n; i++)
        if (evt_create_doc(port, f->tok.author, "Early",
                           "Published before anyone listened.", docs[i])
                != 0
            || evt_submit(port, f->tok.author, docs[i], review) != 0
            || evt_decide(port, f->tok.reviewer, review, 1) != 0)
            return -1;
    return 0;
}

/* Five approvals while no consumer has ever connected, then a kh-indexer
 * on url (with the test CA for amqps://) indexes them all.  what names
 * the exchange and queue. */
static void early_events_reach_a_late_indexer(fixture *f, const char *url,
                                              const char *what)
{
    char exchange[64], queue[80], e_ex[100], e_q[160], e_amqp[200];
    char e_ca[600], k_ex[100], k_q[100], docs[EARLY_DOCS][24];
    const char *const env[] = {
        e_amqp, e_ex, e_q, e_ca, "REVIEWD_LOG_FILE=@log", NULL};
    const char *const ix_env[] = {k_ex, k_q, e_ca, NULL};

    own_name(exchange, sizeof(exchange), what);
    snprintf(queue, sizeof(queue), "%s.q", exchange);
    snprintf(e_ex, sizeof(e_ex), "REVIEWD_AMQP_EXCHANGE=%s", exchange);
    snprintf(e_q, sizeof(e_q), "REVIEWD_AMQP_QUEUES=%s:document.approved",
             queue);
    snprintf(e_amqp, sizeof(e_amqp), "AMQP_URL=%s", url);
    snprintf(e_ca, sizeof(e_ca), "AMQP_CACERT=%s/ca.pem", f->rabbit.tls_dir);
    snprintf(k_ex, sizeof(k_ex), "KH_EXCHANGE=%s", exchange);
    snprintf(k_q, sizeof(k_q), "KH_QUEUE=%s", queue);
    assert_int_equal(rvt_server_start(&f->relay, &f->db, testkit_redis_url(),
                                      env, "evt-delivery"),
                     0);
    TK_EXPECT(rvt_wait_ready(f->relay.port, "ok", NULL, WAIT_MS),
              "reviewd connects to the broker at %s", url);
    assert_int_equal(approve_docs(f, f->relay.port, docs, EARLY_DOCS), 0);
    TK_EXPECT(evt_db_wait_outbox_empty(&f->db, WAIT_MS),
              "the relay publishes the approvals (no consumer yet)");
    assert_int_equal(evt_indexer_start(&f->ix, &f->db, url, ix_env,
                                       "evt-delivery"),
                     0);
    TK_EXPECT(evt_db_wait_docs_indexed(&f->db, docs, EARLY_DOCS, WAIT_MS),
              "kh-indexer, consuming from %s, indexes all %d documents "
              "approved before it first connected",
              url, EARLY_DOCS);
}

static void events_before_any_consumer_reach_the_indexer(void **state)
{
    fixture *f = *state;

    early_events_reach_a_late_indexer(f, f->rabbit.url, "early");
}

static void amqps_with_the_test_ca_publishes_and_consumes(void **state)
{
    fixture *f = *state;

    early_events_reach_a_late_indexer(f, f->rabbit.tls_url, "tls");
}

static void amqps_with_a_wrong_ca_is_refused(void **state)
{
    fixture *f = *state;
    char exchange[64], e_ex[100], e_amqp[200], e_ca[600];
    const char *const env[] = {
        e_amqp, e_ex, e_ca, "REVIEWD_AMQP_QUEUES=", "REVIEWD_LOG_FILE=@log",
        NULL};
    const char *amqp;
    rvt_resp r;

    own_name(exchange, sizeof(exchange), "wrongca");
    snprintf(e_ex, sizeof(e_ex), "REVIEWD_AMQP_EXCHANGE=%s", exchange);
    snprintf(e_amqp, sizeof(e_amqp), "AMQP_URL=%s", f->rabbit.tls_url);
    snprintf(e_ca, sizeof(e_ca), "AMQP_CACERT=%s/wrong-ca.pem",
             f->rabbit.tls_dir);
    assert_int_equal(rvt_server_start(&f->relay, &f->db, testkit_redis_url(),
                                      env, "evt-delivery"),
                     0);
    TK_EXPECT(testkit_wait_until(evt_server_refused_ca, &f->relay, WAIT_MS),
              "the log says the TLS handshake was refused: peer "
              "certificate verification failed");
    rvt_http(f->relay.port, "GET", "/readyz", NULL, NULL, 0, &r);
    amqp = rvt_field(&r, "amqp");
    TK_EXPECT(amqp != NULL && strcmp(amqp, "down") == 0,
              "/readyz says amqp \"down\", got \"%s\"",
              amqp != NULL ? amqp : "(none)");
    rvt_resp_free(&r);
}

/* Two approvals wait in a queue of their own (published over plain
 * AMQP); a kh-indexer given another CA for amqps:// must refuse the
 * broker and take none of them, and one given the test CA then indexes
 * both, which shows they were still there. */
static void indexer_over_amqps_with_a_wrong_ca_refuses(void **state)
{
    fixture *f = *state;
    char exchange[64], queue[80], e_ex[100], e_q[160], e_amqp[200];
    char wrong_ca[600], right_ca[600], k_ex[100], k_q[100], docs[2][24];
    const char *const env[] = {e_amqp, e_ex, e_q, "REVIEWD_LOG_FILE=@log",
                               NULL};
    const char *const wrong_env[] = {k_ex, k_q, wrong_ca, NULL};
    const char *const right_env[] = {k_ex, k_q, right_ca, NULL};
    int i;

    own_name(exchange, sizeof(exchange), "wrongca.ix");
    snprintf(queue, sizeof(queue), "%s.q", exchange);
    snprintf(e_ex, sizeof(e_ex), "REVIEWD_AMQP_EXCHANGE=%s", exchange);
    snprintf(e_q, sizeof(e_q), "REVIEWD_AMQP_QUEUES=%s:document.approved",
             queue);
    snprintf(e_amqp, sizeof(e_amqp), "AMQP_URL=%s", f->rabbit.url);
    snprintf(wrong_ca, sizeof(wrong_ca), "AMQP_CACERT=%s/wrong-ca.pem",
             f->rabbit.tls_dir);
    snprintf(right_ca, sizeof(right_ca), "AMQP_CACERT=%s/ca.pem",
             f->rabbit.tls_dir);
    snprintf(k_ex, sizeof(k_ex), "KH_EXCHANGE=%s", exchange);
    snprintf(k_q, sizeof(k_q), "KH_QUEUE=%s", queue);
    assert_int_equal(rvt_server_start(&f->relay, &f->db, testkit_redis_url(),
                                      env, "evt-delivery"),
                     0);
    TK_EXPECT(rvt_wait_ready(f->relay.port, "ok", NULL, WAIT_MS),
              "reviewd connects to the broker at %s", f->rabbit.url);
    assert_int_equal(approve_docs(f, f->relay.port, docs, 2), 0);
    TK_EXPECT(evt_db_wait_outbox_empty(&f->db, WAIT_MS),
              "the relay publishes the approvals into %s", queue);
    assert_int_equal(evt_indexer_spawn(&f->ix, &f->db, f->rabbit.tls_url,
                                       wrong_env, "evt-delivery"),
                     0);
    TK_EXPECT(testkit_wait_until(evt_indexer_refused_ca, &f->ix, WAIT_MS),
              "kh-indexer's log says the TLS handshake was refused: peer "
              "certificate verification failed (%s)",
              f->ix.log);
    TK_EXPECT(!evt_indexer_output_has(&f->ix, "\"consuming\""),
              "kh-indexer never says it is consuming");
    TK_EXPECT(evt_log_count(f->ix.log, "event_done", NULL) == 0,
              "kh-indexer applied no event");
    for (i = 0; i < 2; i++)
        TK_EXPECT(evt_db_chunks(&f->db, docs[i]) == 0,
                  "document %s is not indexed", docs[i]);
    TK_EXPECT(evt_indexer_stop(&f->ix), "the refused kh-indexer exits 0");
    f->ix.pid = 0;
    assert_int_equal(evt_indexer_start(&f->ix, &f->db, f->rabbit.tls_url,
                                       right_env, "evt-delivery"),
                     0);
    TK_EXPECT(evt_db_wait_docs_indexed(&f->db, docs, 2, WAIT_MS),
              "with the test CA, kh-indexer indexes both waiting documents");
}

/* ---- unroutable events (5) ------------------------------------------- */

/* 1 if keys[0..n) holds key. */
static int has_key(char (*keys)[40], int n, const char *key)
{
    int i;

    for (i = 0; i < n; i++)
        if (strcmp(keys[i], key) == 0)
            return 1;
    return 0;
}

static void default_config_keeps_unbound_events(void **state)
{
    fixture *f = *state;
    char e_amqp[200], doc[24], review[24], keys[16][40];
    const char *const env[] = {e_amqp, "REVIEWD_LOG_FILE=@log", NULL};
    int n;

    snprintf(e_amqp, sizeof(e_amqp), "AMQP_URL=%s", f->rabbit.url);
    assert_int_equal(rvt_server_start(&f->relay, &f->db, testkit_redis_url(),
                                      env, "evt-delivery"),
                     0);
    TK_EXPECT(rvt_wait_ready(f->relay.port, "ok", NULL, WAIT_MS),
              "reviewd connects to the broker");
    assert_int_equal(evt_create_doc(f->relay.port, f->tok.author, "Unbound",
                                    "Nobody consumes its submission.", doc),
                     0);
    assert_int_equal(evt_submit(f->relay.port, f->tok.author, doc, review), 0);
    assert_int_equal(evt_decide(f->relay.port, f->tok.reviewer, review, 0), 0);
    TK_EXPECT(evt_db_wait_outbox_empty(&f->db, WAIT_MS),
              "the relay marks the submitted and rejected events sent");
    n = evt_amqp_take(f->rabbit.url, "kh.documents.unrouted", keys, 16);
    TK_EXPECT(n >= 2 && has_key(keys, n, "document.submitted")
                  && has_key(keys, n, "document.rejected"),
              "the submitted and rejected events, which no queue binds, are "
              "kept in kh.documents.unrouted (took %d messages)",
              n);
    /* kh-indexer declares the same exchange with the same arguments:
     * RabbitMQ accepts it (no 406, no warning). */
    assert_int_equal(evt_indexer_start(&f->ix, &f->db, f->rabbit.url, NULL,
                                       "evt-delivery"),
                     0);
    TK_EXPECT(evt_log_count(f->ix.log, "amqp_exchange_without_ae", NULL) == 0,
              "kh-indexer's declaration of kh.documents matches reviewd's");
}

static int log_has_unroutable(void *arg)
{
    return rvt_server_log_has(arg, "\"event_unroutable\"");
}

static void a_deleted_queue_returns_then_delivers(void **state)
{
    fixture *f = *state;
    char exchange[64], queue[80], unrouted[90], e_ex[100], e_q[160];
    char e_amqp[200], doc[24], review[24], keys[8][40];
    const char *const env[] = {e_amqp, e_ex, e_q, "REVIEWD_LOG_FILE=@log",
                               NULL};
    int n;

    own_name(exchange, sizeof(exchange), "deleted");
    snprintf(queue, sizeof(queue), "%s.q", exchange);
    snprintf(unrouted, sizeof(unrouted), "%s.unrouted", exchange);
    snprintf(e_ex, sizeof(e_ex), "REVIEWD_AMQP_EXCHANGE=%s", exchange);
    snprintf(e_q, sizeof(e_q), "REVIEWD_AMQP_QUEUES=%s:document.approved",
             queue);
    snprintf(e_amqp, sizeof(e_amqp), "AMQP_URL=%s", f->rabbit.url);
    assert_int_equal(rvt_server_start(&f->relay, &f->db, testkit_redis_url(),
                                      env, "evt-delivery"),
                     0);
    TK_EXPECT(rvt_wait_ready(f->relay.port, "ok", NULL, WAIT_MS),
              "reviewd connects to the broker");
    assert_int_equal(evt_create_doc(f->relay.port, f->tok.author, "Deleted",
                                    "Its queue goes away.", doc),
                     0);
    assert_int_equal(evt_submit(f->relay.port, f->tok.author, doc, review), 0);
    TK_EXPECT(evt_db_wait_outbox_empty(&f->db, WAIT_MS),
              "the submitted event is sent (to the unrouted queue)");
    TK_EXPECT(!rvt_server_log_has(&f->relay, "\"event_unroutable\""),
              "nothing was returned while the queues existed");
    /* Both gone: the approval now matches no queue at all. */
    assert_int_equal(evt_amqp_delete_queue(f->rabbit.url, queue), 0);
    assert_int_equal(evt_amqp_delete_queue(f->rabbit.url, unrouted), 0);
    assert_int_equal(evt_decide(f->relay.port, f->tok.reviewer, review, 1), 0);
    TK_EXPECT(testkit_wait_until(log_has_unroutable, &f->relay, WAIT_MS),
              "the approval is returned and logged as event_unroutable");
    TK_EXPECT(evt_db_wait_outbox_empty(&f->db, WAIT_MS),
              "after reconnecting (which declares the queue again) the "
              "relay sends the approval");
    n = evt_amqp_take(f->rabbit.url, queue, keys, 8);
    TK_EXPECT(n == 1 && strcmp(keys[0], "document.approved") == 0,
              "the approval is in %s once, got %d messages", queue, n);
}

/* Two returns: the relay has reconnected at least once since. */
static int returned_twice(void *arg)
{
    const rvt_server *s = arg;

    return evt_log_count(s->log, "event_unroutable", NULL) >= 2;
}

static int log_has_without_ae(void *arg)
{
    return rvt_server_log_has(arg, "\"amqp_exchange_without_ae\"");
}

static void an_exchange_without_ae_keeps_unbound_events_unsent(void **state)
{
    fixture *f = *state;
    char exchange[64], e_ex[100], e_q[160], e_amqp[200], doc[24], review[24];
    char k_ex[100], k_q[100];
    const char *const env[] = {e_amqp, e_ex, e_q, "REVIEWD_LOG_FILE=@log",
                               NULL};
    const char *const ix_env[] = {k_ex, k_q, NULL};
    long long unsent;

    own_name(exchange, sizeof(exchange), "noae");
    snprintf(e_ex, sizeof(e_ex), "REVIEWD_AMQP_EXCHANGE=%s", exchange);
    snprintf(e_q, sizeof(e_q), "REVIEWD_AMQP_QUEUES=%s.q:document.approved",
             exchange);
    snprintf(e_amqp, sizeof(e_amqp), "AMQP_URL=%s", f->rabbit.url);
    assert_int_equal(evt_amqp_plain_exchange(f->rabbit.url, exchange), 0);
    assert_int_equal(rvt_server_start(&f->relay, &f->db, testkit_redis_url(),
                                      env, "evt-delivery"),
                     0);
    TK_EXPECT(rvt_wait_ready(f->relay.port, "ok", NULL, WAIT_MS),
              "reviewd connects to the broker despite the old exchange");
    TK_EXPECT(testkit_wait_until(log_has_without_ae, &f->relay, WAIT_MS),
              "reviewd warns that the exchange has no alternate exchange");
    assert_int_equal(evt_create_doc(f->relay.port, f->tok.author, "Old",
                                    "Submitted to an old exchange.", doc),
                     0);
    assert_int_equal(evt_submit(f->relay.port, f->tok.author, doc, review), 0);
    TK_EXPECT(testkit_wait_until(returned_twice, &f->relay, WAIT_MS),
              "the submitted event, which no queue binds, is returned, "
              "and returned again after the relay reconnects");
    /* It stays unsent however often it is retried (each retry is
     * returned again). */
    unsent = evt_db_unsent(&f->db, "document.submitted");
    TK_EXPECT(unsent == 1,
              "the submitted event stays unsent in the outbox (%lld)", unsent);
    TK_EXPECT(evt_log_count(f->relay.log, "event_unroutable", "retry_ms",
                            "100", NULL)
                      == 1
                  && evt_log_count(f->relay.log, "event_unroutable",
                                   "retry_ms", "200", NULL)
                         == 1,
              "the wait before the retry doubles while the event keeps "
              "being returned (100 ms, then 200 ms)");
    TK_EXPECT(evt_log_count(f->relay.log, "amqp_exchange_without_ae", NULL)
                  == 1,
              "the warning is logged once, not on every reconnect (%d)",
              evt_log_count(f->relay.log, "amqp_exchange_without_ae", NULL));
    TK_EXPECT(rvt_wait_ready(f->relay.port, "ok", NULL, WAIT_MS),
              "the relay still reports the broker up");
    /* kh-indexer on the same old exchange: it warns too, and consumes. */
    snprintf(k_ex, sizeof(k_ex), "KH_EXCHANGE=%s", exchange);
    snprintf(k_q, sizeof(k_q), "KH_QUEUE=%s.q", exchange);
    assert_int_equal(evt_indexer_start(&f->ix, &f->db, f->rabbit.url, ix_env,
                                       "evt-delivery"),
                     0);
    TK_EXPECT(evt_log_count(f->ix.log, "amqp_exchange_without_ae", NULL) == 1,
              "kh-indexer warns once that the exchange has no alternate "
              "exchange, and consumes");
}

#define CASE(fn) cmocka_unit_test_teardown(fn, end_case)

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(nack_mid_batch_keeps_per_document_order),
        CASE(events_before_any_consumer_reach_the_indexer),
        CASE(amqps_with_the_test_ca_publishes_and_consumes),
        CASE(amqps_with_a_wrong_ca_is_refused),
        CASE(indexer_over_amqps_with_a_wrong_ca_refuses),
        CASE(default_config_keeps_unbound_events),
        CASE(a_deleted_queue_returns_then_delivers),
        CASE(an_exchange_without_ae_keeps_unbound_events_unsent),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
