/*
 * test_events_faults.c: the pipeline through kh-indexer, with RabbitMQ
 * stopped and killed (issue 5, tests 2, 3, 5 and 7).
 *
 * The broker is a private node (evt_rabbit), started once and shared by
 * the cases, because the cases stop it and kill it; one database and one
 * relaying reviewd serve all cases, and each case runs its own kh-indexer
 * (so its log holds that case's work only).  The test consumer's queue is
 * durable here, so what the relay publishes while the consumer is cut off
 * waits for it, as it waits for the indexer.  The node's boot (14-25 s)
 * is not waited for idly: the first case's backlog is written meanwhile.
 * The cases, in this order:
 *
 *   - killed broker (3): 1000 events (500 approvals), written at setup by
 *     a reviewd that does not relay, wait in the outbox; the relaying
 *     reviewd starts and publishes them in batches of 500, and the node is
 *     SIGKILLed as soon as the first one arrives; after the restart every
 *     event has arrived at least once, and the indexer's effect is exactly
 *     once: one "indexed" outcome per approval, one kh_processed_event row
 *     each, and each document's chunks exactly what one run gives;
 *   - search (7): approved Chinese and English documents are found by a
 *     two-character word and by a word; rejected and pending ones holding
 *     the same words are not;
 *   - redelivery (5): KH_TEST_DROP_ACKS makes the indexer close its
 *     channel after applying a delivery instead of acking it; the log must
 *     show the redelivered copy as a duplicate (so the case cannot pass
 *     without a redelivery), and the document is indexed once;
 *   - lost database connection: the indexer's PostgreSQL backend is
 *     terminated between approvals; it connects again, prepares its
 *     statements again, and indexes each later approval exactly once;
 *   - stopped broker (2): 20 approvals while RabbitMQ is stopped succeed,
 *     wait in the outbox, and all arrive once within 30 s of its restart.
 *
 * Waits are conditions with generous deadlines (hang catchers); the only
 * time bound that is part of the contract is the 30 s.
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
#include <unistd.h>

#include "evt_kit.h"
#include "testkit.h"

#define CLIENTS 16
#define STOPPED_APPROVALS 20
#define KILLED_DOCS 500
#define CHUNK_TARGET 400
#define CHUNK_OVERLAP 40
/* Only catches a hang, and short enough that a failed case still leaves
 * the program time to tear down (stop its node) within CTest's TIMEOUT. */
#define WAIT_MS 60000
#define BACK_WITHIN_MS 30000 /* the bound for test 2 */

typedef struct fixture {
    evt_rabbit rabbit;
    rvt_db db;
    rvt_server relay; /* reviewd with AMQP_URL: serves and relays */
    evt_consumer *consumer;
    evt_tokens tok;
    char e_amqp[300];
    evt_indexer ix;   /* the case's kh-indexer; stopped after it */
    char (*docs)[24]; /* the backlog of the killed-broker case */
    char (*reviews)[24];
} fixture;

static int fill_backlog(fixture *f);

static const char *const indexer_env[] = {"KH_CHUNK_TARGET=400",
                                          "KH_CHUNK_OVERLAP=40", NULL};

static int start_relaying_reviewd(fixture *f)
{
    const char *const env[] = {f->e_amqp,
                               "REVIEWD_RELAY_BATCH=500",
                               "REVIEWD_RELAY_BACKOFF_MAX_MS=300",
                               "REVIEWD_AMQP_TIMEOUT_MS=3000",
                               "REVIEWD_LOG_FILE=@log",
                               NULL};

    return rvt_server_start(&f->relay, &f->db, testkit_redis_url(), env,
                            "evt-faults");
}

/* The cases after the first need the relaying reviewd running. */
static void ensure_relay(fixture *f)
{
    if (f->relay.pid <= 0)
        assert_int_equal(start_relaying_reviewd(f), 0);
    TK_EXPECT(rvt_wait_ready(f->relay.port, "ok", NULL, 30000),
              "the relaying reviewd is ready with RabbitMQ");
}

/* The node boots (14-25 s) while the killed-broker case's backlog is
 * written through a reviewd that does not relay; the relaying one starts
 * in that case, once the test consumer is bound. */
static int fixture_open(void *arg)
{
    fixture *f = arg;
    char queue[64];

    if (testkit_shared_redis() == NULL
        || evt_rabbit_begin(&f->rabbit, "evt-faults") != 0)
        return -1;
    snprintf(f->e_amqp, sizeof(f->e_amqp), "AMQP_URL=%s", f->rabbit.url);
    snprintf(queue, sizeof(queue), "evt.test.%d", (int)getpid());
    f->docs = calloc(KILLED_DOCS, sizeof(*f->docs));
    f->reviews = calloc(KILLED_DOCS, sizeof(*f->reviews));
    if (f->docs == NULL || f->reviews == NULL || evt_tokens_make(&f->tok) != 0
        || rvt_db_create(&f->db, "evtfault") != 0 || fill_backlog(f) != 0
        || evt_rabbit_wait_booted(&f->rabbit) != 0
        || (f->consumer = evt_consumer_start(f->rabbit.url, NULL, queue))
               == NULL)
        return -1;
    return 0;
}

static int fixture_close(void *arg)
{
    fixture *f = arg;
    const int clean = evt_fixture_close(&f->relay, f->consumer, &f->db);

    evt_rabbit_free(&f->rabbit);
    evt_tokens_free(&f->tok);
    free(f->docs);
    free(f->reviews);
    return clean;
}

/* The group setup and teardown (evt_kit.h). */
EVT_GROUP_FIXTURE(fixture, fixture_open, fixture_close)

/* ---- helpers --------------------------------------------------------- */

/* Percent-encodes every byte that is not an unreserved character. */
static void url_encode(const char *s, char *out, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;

    for (; *s != '\0' && n + 4 < len; s++) {
        const unsigned char c = (unsigned char)*s;

        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
            || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.') {
            out[n++] = (char)c;
        } else {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    out[n] = '\0';
}

/* Searches q; returns the number of hits (-1 on a failed request) and the
 * first hit's document id and snippet. */
static int search(fixture *f, const char *q, char *doc_id, char *snippet,
                  size_t snippet_len)
{
    char enc[512], path[600];
    const json_t *items, *first;
    rvt_resp r;
    int n = -1;

    url_encode(q, enc, sizeof(enc));
    snprintf(path, sizeof(path), "/v1/search?q=%s&limit=10", enc);
    doc_id[0] = snippet[0] = '\0';
    if (rvt_call(f->relay.port, "GET", path, f->tok.reviewer, NULL, NULL, &r)
            == 0
        && r.status == 200
        && json_is_array(items = json_object_get(r.json, "items"))) {
        n = (int)json_array_size(items);
        first = json_array_get(items, 0);
        if (first != NULL) {
            snprintf(doc_id, 24, "%s",
                     json_string_value(json_object_get(first, "document_id")));
            snprintf(snippet, snippet_len, "%s",
                     json_string_value(json_object_get(first, "snippet")));
        }
    } else {
        fprintf(stderr, "search %s gave %d %s\n", q, r.status,
                r.body != NULL ? r.body : "");
    }
    rvt_resp_free(&r);
    return n;
}

/* Creates and submits a document; with approve >= 0 also decides it. */
static int make_doc(fixture *f, int port, const char *title,
                    const char *content, int approve, char *doc_id)
{
    char review[24];

    if (evt_create_doc(port, f->tok.author, title, content, doc_id) != 0
        || evt_submit(port, f->tok.author, doc_id, review) != 0)
        return -1;
    return approve < 0 ? 0
                       : evt_decide(port, f->tok.reviewer, review, approve);
}

/* ---- test 7 ---------------------------------------------------------- */

static void expect_hits(fixture *f, const char *q, int want,
                        const char *want_doc)
{
    char doc[24], snippet[1024];
    const int n = search(f, q, doc, snippet, sizeof(snippet));

    TK_EXPECT(n == want, "a search for \"%s\" has %d hit(s), got %d", q, want,
              n);
    if (want_doc != NULL) {
        TK_EXPECT(strcmp(doc, want_doc) == 0,
                  "\"%s\" finds document %s, "
                  "got %s",
                  q, want_doc, doc);
        TK_EXPECT(strcasestr(snippet, q) != NULL,
                  "the snippet of \"%s\" holds "
                  "the word: \"%s\"",
                  q, snippet);
    }
}

static void search_finds_approved_chinese_and_english_only(void **state)
{
    fixture *f = *state;
    char zh[24], en[24], rejected[24], pending[24], ids[2][64];
    evt_indexer *const ix = &f->ix;
    int port;

    ensure_relay(f);
    port = f->relay.port;

    assert_int_equal(evt_indexer_start(ix, &f->db, f->rabbit.url, indexer_env,
                                       "evt-faults"),
                     0);
    assert_int_equal(make_doc(f, port, "数据库手册",
                              "我们的数据库文档说明"
                              "如何备份。每天晚上备份一次，保留七天。",
                              1, zh),
                     0);
    assert_int_equal(make_doc(f, port, "Ledger guide",
                              "Quarterly "
                              "reconciliation keeps the ledgers honest.",
                              1, en),
                     0);
    assert_int_equal(make_doc(f, port, "Rejected notes",
                              "草稿：如何备份。"
                              "A reconciliation draft.",
                              0, rejected),
                     0);
    assert_int_equal(make_doc(f, port, "Pending notes",
                              "草稿：备份之前。"
                              "Pending reconciliation.",
                              -1, pending),
                     0);
    assert_int_equal(evt_db_event_id(&f->db, zh, "document.approved", ids[0]),
                     0);
    assert_int_equal(evt_db_event_id(&f->db, en, "document.approved", ids[1]),
                     0);
    TK_EXPECT(evt_db_wait_indexed(&f->db, ids, 2, WAIT_MS),
              "kh-indexer indexes both approvals");
    expect_hits(f, "备份", 1, zh); /* a word inside a sentence */
    expect_hits(f, "数据", 1, zh); /* the first half of 数据库 */
    expect_hits(f, "reconciliation", 1, en);
    expect_hits(f, "Reconciliation", 1, en);
    expect_hits(f, "草稿", 0, NULL); /* only in rejected and pending */
    expect_hits(f, "Pending", 0, NULL);
    TK_EXPECT(evt_db_chunks(&f->db, rejected) == 0
                  && evt_db_chunks(&f->db, pending) == 0,
              "rejected and pending documents have no chunks");
    TK_EXPECT(evt_indexer_stop(ix), "kh-indexer exits cleanly");
}

/* ---- test 5 ---------------------------------------------------------- */

static int redelivery_seen(void *arg)
{
    const evt_indexer *ix = arg;

    return evt_log_count(ix->log, "test_channel_dropped", NULL) >= 2
           && evt_log_count(ix->log, "event_done", "outcome", "duplicate",
                            "redelivered", "true", NULL)
                  >= 1;
}

static void redelivered_message_is_not_indexed_twice(void **state)
{
    static const char *const env[] = {"KH_TEST_DROP_ACKS=2",
                                      "KH_CHUNK_TARGET=400",
                                      "KH_CHUNK_OVERLAP=40", NULL};
    fixture *f = *state;
    char docs[2][24], ids[2][64];
    evt_indexer *const ix = &f->ix;
    int i;

    ensure_relay(f);
    assert_int_equal(evt_indexer_start(ix, &f->db, f->rabbit.url, env,
                                       "evt-faults"),
                     0);
    for (i = 0; i < 2; i++) {
        assert_int_equal(make_doc(f, f->relay.port, "Redelivered",
                                  "A document the broker delivers twice.\n\n"
                                  "Its chunks must be built once.",
                                  1, docs[i]),
                         0);
        assert_int_equal(evt_db_event_id(&f->db, docs[i], "document.approved",
                                         ids[i]),
                         0);
    }
    TK_EXPECT(evt_db_wait_indexed(&f->db, ids, 2, WAIT_MS),
              "both approvals are indexed");
    TK_EXPECT(testkit_wait_until(redelivery_seen, ix, WAIT_MS),
              "the indexer drops its channel twice and sees a redelivered "
              "copy (log: %d drops, %d redelivered duplicates)",
              evt_log_count(ix->log, "test_channel_dropped", NULL),
              evt_log_count(ix->log, "event_done", "outcome", "duplicate",
                            "redelivered", "true", NULL));
    for (i = 0; i < 2; i++) {
        TK_EXPECT(evt_indexer_wait_logged(ix, ids[i], WAIT_MS),
                  "kh-indexer logs event %s's outcome after its commit",
                  ids[i]);
        TK_EXPECT(evt_log_count(ix->log, "event_done", "event_id", ids[i],
                                "outcome", "indexed", NULL)
                      == 1,
                  "event %s is indexed exactly once", ids[i]);
        TK_EXPECT(evt_db_chunks_match(&f->db, docs[i], CHUNK_TARGET,
                                      CHUNK_OVERLAP, ids[i]),
                  "document %s has the chunks of one run", docs[i]);
    }
    TK_EXPECT(evt_indexer_stop(ix), "kh-indexer exits cleanly");
}

/* ---- the database connection lost ------------------------------------ */

/* Approves one document of this case; its id and its event's id out. */
static void approve_lost_doc(fixture *f, int i, char *doc, char *id)
{
    char title[64];

    snprintf(title, sizeof(title), "Reconnected %d", i);
    assert_int_equal(make_doc(f, f->relay.port, title,
                              "A document indexed across a lost database "
                              "connection.\n\nIts chunks must be built "
                              "once, by statements prepared again.",
                              1, doc),
                     0);
    assert_int_equal(evt_db_event_id(&f->db, doc, "document.approved", id), 0);
}

/* kh-indexer prepares its statements on each connection it makes
 * (store/kh_store_conn.c): after its backend is terminated it connects again,
 * prepares them again, and indexes what follows exactly once. */
static void lost_database_connection_is_made_again(void **state)
{
    fixture *f = *state;
    char docs[4][24], ids[4][64];
    evt_indexer *const ix = &f->ix;
    int i;

    ensure_relay(f);
    assert_int_equal(evt_indexer_start(ix, &f->db, f->rabbit.url, indexer_env,
                                       "evt-faults"),
                     0);
    approve_lost_doc(f, 0, docs[0], ids[0]);
    TK_EXPECT(evt_db_wait_indexed(&f->db, ids, 1, WAIT_MS),
              "the first approval is indexed");
    TK_EXPECT(rvt_sql_int(&f->db, "SELECT count(pg_terminate_backend(pid)) "
                                  "FROM pg_stat_activity WHERE "
                                  "application_name = 'kh-indexer' AND "
                                  "datname = current_database()")
                  >= 1,
              "the indexer's database connection is terminated");
    for (i = 1; i < 4; i++)
        approve_lost_doc(f, i, docs[i], ids[i]);
    TK_EXPECT(evt_db_wait_indexed(&f->db, ids, 4, WAIT_MS),
              "the approvals after the lost connection are indexed");
    for (i = 0; i < 4; i++) {
        TK_EXPECT(evt_indexer_wait_logged(ix, ids[i], WAIT_MS),
                  "kh-indexer logs event %s's outcome after its commit",
                  ids[i]);
        TK_EXPECT(evt_db_event_processed(&f->db, ids[i], "indexed") == 1
                      && evt_log_count(ix->log, "event_done", "event_id",
                                       ids[i], "outcome", "indexed", NULL)
                             == 1,
                  "event %s is indexed exactly once", ids[i]);
        TK_EXPECT(evt_db_chunks_match(&f->db, docs[i], CHUNK_TARGET,
                                      CHUNK_OVERLAP, ids[i]),
                  "document %s has the chunks of one run", docs[i]);
    }
    TK_EXPECT(evt_indexer_stop(ix), "kh-indexer exits cleanly");
}

/* ---- test 2 ---------------------------------------------------------- */

typedef struct batch_docs {
    fixture *f;
    int port;
    int approve; /* decide in the same walk */
    char (*docs)[24];
    char (*reviews)[24];
    atomic_int failures;
} batch_docs;

/* One client's document: created with several paragraphs (so it has
 * several chunks), submitted, and approved when asked. */
static void create_one(int item, void *arg)
{
    batch_docs *b = arg;
    char content[2048];
    size_t n = 0;
    int p;

    for (p = 0; p < 5; p++) {
        n += (size_t)snprintf(content + n, sizeof(content) - n,
                              "Paragraph %d of document %d. The ledgers are "
                              "reconciled each quarter, and every entry is "
                              "checked twice before it is closed.%s",
                              p, item, p < 4 ? "\n\n" : "");
    }
    if (evt_create_doc(b->port, b->f->tok.author, "Batch", content,
                       b->docs[item])
            != 0
        || evt_submit(b->port, b->f->tok.author, b->docs[item],
                      b->reviews[item])
               != 0
        || (b->approve
            && evt_decide(b->port, b->f->tok.reviewer, b->reviews[item], 1)
                   != 0))
        atomic_fetch_add(&b->failures, 1);
}

static void approve_one(int item, void *arg)
{
    batch_docs *b = arg;

    if (evt_decide(b->port, b->f->tok.reviewer, b->reviews[item], 1) != 0)
        atomic_fetch_add(&b->failures, 1);
}

typedef struct amqp_state {
    int port;
    const char *want;
} amqp_state;

static int readyz_amqp_is(void *arg)
{
    const amqp_state *s = arg;
    const char *v;
    rvt_resp r;
    int ok;

    rvt_http(s->port, "GET", "/readyz", NULL, NULL, 0, &r);
    v = rvt_field(&r, "amqp");
    ok = v != NULL && strcmp(v, s->want) == 0;
    rvt_resp_free(&r);
    return ok;
}

static void approvals_while_broker_stopped_arrive_once_after_restart(
    void **state)
{
    fixture *f = *state;
    char docs[STOPPED_APPROVALS][24], reviews[STOPPED_APPROVALS][24];
    char ids[STOPPED_APPROVALS][64];
    batch_docs b = {f, 0, 0, docs, reviews, 0};
    amqp_state down = {0, "down"};
    evt_indexer *const ix = &f->ix;
    int64_t t0;
    int i, arrived;

    ensure_relay(f);
    b.port = down.port = f->relay.port;
    assert_int_equal(evt_indexer_start(ix, &f->db, f->rabbit.url, indexer_env,
                                       "evt-faults"),
                     0);
    assert_int_equal(evt_parallel(CLIENTS, STOPPED_APPROVALS, create_one, &b),
                     0);
    TK_EXPECT(atomic_load(&b.failures) == 0, "documents are submitted");
    TK_EXPECT(evt_db_wait_outbox_empty(&f->db, WAIT_MS),
              "the submits are relayed before the broker stops");
    assert_int_equal(evt_rabbit_stop(&f->rabbit), 0);
    TK_EXPECT(testkit_wait_until(readyz_amqp_is, &down, 30000),
              "/readyz says amqp down once RabbitMQ is stopped");
    assert_int_equal(evt_parallel(CLIENTS, STOPPED_APPROVALS, approve_one, &b),
                     0);
    TK_EXPECT(atomic_load(&b.failures) == 0,
              "all %d approvals succeed "
              "while RabbitMQ is stopped (%d failed)",
              STOPPED_APPROVALS, atomic_load(&b.failures));
    TK_EXPECT(rvt_sql_int(&f->db, "SELECT count(*) FROM kh_outbox WHERE "
                                  "sent_at IS NULL")
                  == STOPPED_APPROVALS,
              "the %d events wait in the outbox", STOPPED_APPROVALS);
    for (i = 0; i < STOPPED_APPROVALS; i++) {
        assert_int_equal(evt_db_event_id(&f->db, docs[i], "document.approved",
                                         ids[i]),
                         0);
    }
    assert_int_equal(evt_rabbit_restart(&f->rabbit), 0);
    t0 = testkit_now_ms();
    arrived = evt_consumer_wait_all(f->consumer, ids, STOPPED_APPROVALS,
                                    BACK_WITHIN_MS);
    fprintf(stderr,
            "stopped broker: %d events arrived %lld ms after the "
            "restart\n",
            STOPPED_APPROVALS, (long long)(testkit_now_ms() - t0));
    TK_EXPECT(arrived, "all %d events arrive within 30 s of the restart",
              STOPPED_APPROVALS);
    TK_EXPECT(evt_db_wait_outbox_empty(&f->db, WAIT_MS),
              "the outbox is empty after the restart");
    for (i = 0; i < STOPPED_APPROVALS; i++) {
        TK_EXPECT(evt_consumer_count(f->consumer, ids[i]) == 1,
                  "event %s arrives once, got %d", ids[i],
                  evt_consumer_count(f->consumer, ids[i]));
    }
    TK_EXPECT(evt_db_wait_indexed(&f->db, ids, STOPPED_APPROVALS, WAIT_MS),
              "kh-indexer reconnects and indexes the %d approvals",
              STOPPED_APPROVALS);
    TK_EXPECT(evt_indexer_stop(ix), "kh-indexer exits cleanly");
}

/* ---- test 3 ---------------------------------------------------------- */

typedef struct first_arrival {
    evt_consumer *c;
    size_t before;
} first_arrival;

static int one_more_arrived(void *arg)
{
    const first_arrival *fa = arg;

    return evt_consumer_total(fa->c) > fa->before;
}

/* Fills the outbox with 500 documents' submits and approvals through a
 * reviewd that does not relay (no AMQP_URL; it also migrates the fresh
 * database), so the relay meets them all at once when it starts.
 * Returns 0, or -1 with the reason on stderr. */
static int fill_backlog(fixture *f)
{
    static const char *const env[] = {"REVIEWD_LOG_FILE=@log", NULL};
    rvt_server quiet;
    batch_docs b = {f, 0, 1, f->docs, f->reviews, 0};
    int ok;

    if (rvt_server_start(&quiet, &f->db, testkit_redis_url(), env,
                         "evt-faults")
        != 0)
        return -1;
    b.port = quiet.port;
    ok = rvt_db_offset_ids(&f->db) == 0
         && evt_parallel(CLIENTS, KILLED_DOCS, create_one, &b) == 0
         && atomic_load(&b.failures) == 0;
    if (!ok) {
        fprintf(stderr,
                "the backlog of %d documents was not written (%d "
                "failed)\n",
                KILLED_DOCS, atomic_load(&b.failures));
    }
    return rvt_server_stop(&quiet) && ok ? 0 : -1;
}

/* After the restart: every event of the outbox arrived at least once.
 * Returns how many arrived more than once. */
static int expect_every_event_at_least_once(fixture *f)
{
    size_t n = 0;
    char *ids = evt_db_outbox_ids(&f->db, NULL, &n), *id, *save = NULL;
    int missing = 0, twice = 0;

    assert_non_null(ids);
    for (id = strtok_r(ids, ",", &save); id != NULL;
         id = strtok_r(NULL, ",", &save)) {
        const int k = evt_consumer_count(f->consumer, id);

        missing += k == 0;
        twice += k > 1;
    }
    free(ids);
    TK_EXPECT(missing == 0,
              "every one of the %zu outbox events arrives at "
              "least once (%d missing)",
              n, missing);
    return twice;
}

static int outbox_all_arrived(void *arg)
{
    fixture *f = arg;
    size_t n = 0;
    char *ids = evt_db_outbox_ids(&f->db, NULL, &n), *id, *save = NULL;
    int ok = ids != NULL;

    for (id = ids != NULL ? strtok_r(ids, ",", &save) : NULL; id != NULL && ok;
         id = strtok_r(NULL, ",", &save))
        ok = evt_consumer_count(f->consumer, id) > 0;
    free(ids);
    return ok;
}

typedef struct count_wait {
    fixture *f;
    long long want;
} count_wait;

static int indexed_rows_reach(void *arg)
{
    const count_wait *w = arg;

    return evt_db_processed(&w->f->db, "indexed") >= w->want;
}

static void expect_indexed_once(fixture *f, const evt_indexer *ix,
                                char (*docs)[24], long long before)
{
    count_wait cw = {f, before + KILLED_DOCS};
    char id[64];
    int i, mismatched = 0;

    TK_EXPECT(testkit_wait_until(indexed_rows_reach, &cw, WAIT_MS),
              "kh-indexer records all %d approvals", KILLED_DOCS);
    TK_EXPECT(evt_db_processed(&f->db, "indexed") == before + KILLED_DOCS,
              "one kh_processed_event row per approval: %lld, want %lld",
              evt_db_processed(&f->db, "indexed") - before,
              (long long)KILLED_DOCS);
    TK_EXPECT(evt_indexer_wait_indexed_lines(ix, KILLED_DOCS, WAIT_MS),
              "kh-indexer logs the %d outcomes after their commits",
              KILLED_DOCS);
    TK_EXPECT(evt_log_count(ix->log, "event_done", "outcome", "indexed", NULL)
                  == KILLED_DOCS,
              "the indexer builds chunks %d times, once per approval, got "
              "%d",
              KILLED_DOCS,
              evt_log_count(ix->log, "event_done", "outcome", "indexed",
                            NULL));
    for (i = 0; i < KILLED_DOCS; i++)
        if (evt_db_event_id(&f->db, docs[i], "document.approved", id) != 0
            || !evt_db_chunks_match(&f->db, docs[i], CHUNK_TARGET,
                                    CHUNK_OVERLAP, id))
            mismatched++;
    TK_EXPECT(mismatched == 0,
              "every document's chunks are those of one "
              "run (%d differ)",
              mismatched);
}

static void broker_killed_mid_batch_loses_nothing_and_indexes_once(
    void **state)
{
    fixture *f = *state;
    first_arrival fa = {f->consumer, 0};
    const long long before = evt_db_processed(&f->db, "indexed");
    const long long backlog = rvt_sql_int(&f->db,
                                          "SELECT count(*) FROM "
                                          "kh_outbox WHERE sent_at IS NULL");
    long long sent_at_kill;
    size_t delivered_at_kill;
    evt_indexer *const ix = &f->ix;
    int twice;

    TK_EXPECT(backlog == 2 * KILLED_DOCS && before == 0 && f->relay.pid <= 0,
              "the case runs first, on the backlog written at setup (%lld "
              "unsent events)",
              backlog);
    assert_int_equal(evt_indexer_start(ix, &f->db, f->rabbit.url, indexer_env,
                                       "evt-faults"),
                     0);
    fa.before = evt_consumer_total(f->consumer);
    assert_int_equal(start_relaying_reviewd(f), 0);
    TK_EXPECT(testkit_wait_until(one_more_arrived, &fa, WAIT_MS),
              "the relay starts publishing the backlog");
    assert_int_equal(evt_rabbit_kill(&f->rabbit), 0);
    delivered_at_kill = evt_consumer_total(f->consumer) - fa.before;
    sent_at_kill = rvt_sql_int(&f->db, "SELECT count(*) FROM kh_outbox "
                                       "WHERE sent_at IS NOT NULL");
    fprintf(stderr,
            "killed broker: at the kill %zu of %d deliveries had "
            "arrived and %lld outbox rows were marked sent\n",
            delivered_at_kill, 2 * KILLED_DOCS, sent_at_kill);
    TK_EXPECT(rvt_sql_int(&f->db, "SELECT count(*) FROM kh_outbox WHERE "
                                  "sent_at IS NULL")
                  > 0,
              "the kill lands while events are still unsent");
    assert_int_equal(evt_rabbit_restart(&f->rabbit), 0);
    TK_EXPECT(evt_db_wait_outbox_empty(&f->db, WAIT_MS),
              "the relay sends the rest after the restart");
    TK_EXPECT(testkit_wait_until(outbox_all_arrived, f, WAIT_MS),
              "every event reaches the test consumer");
    twice = expect_every_event_at_least_once(f);
    expect_indexed_once(f, ix, f->docs, before);
    fprintf(stderr,
            "killed broker: %d events arrived more than once; the "
            "indexer saw %d duplicates\n",
            twice,
            evt_log_count(ix->log, "event_done", "outcome", "duplicate",
                          NULL));
    TK_EXPECT(evt_indexer_stop(ix), "kh-indexer exits cleanly");
}

/* A failed case jumps past its own stop: never leave its indexer
 * consuming (it would take the next case's messages). */
static int stop_case_indexer(void **state)
{
    fixture *f = *state;

    if (f->ix.pid > 0)
        evt_indexer_stop(&f->ix);
    return 0;
}

#define CASE(fn) cmocka_unit_test_teardown(fn, stop_case_indexer)

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(broker_killed_mid_batch_loses_nothing_and_indexes_once),
        CASE(search_finds_approved_chinese_and_english_only),
        CASE(redelivered_message_is_not_indexed_twice),
        CASE(lost_database_connection_is_made_again),
        CASE(approvals_while_broker_stopped_arrive_once_after_restart),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
