/*
 * test_kh_store.c: kh_store_apply_many, the batch in two round trips
 * (kh_store_many.h), on the stack's PostgreSQL without a broker: each
 * event's outcome and effect must be what applying the events one by one
 * gives.
 *
 * One migrated database (reviewd migrate) holds documents written here
 * in SQL: approved ones with short and with long text (several chunks),
 * and one pending.  The cases:
 *   - a batch of fresh, stale (another version, a pending document, a
 *     document that does not exist) and, again, already processed
 *     events goes the batched way (0): indexed ones get the chunks of one
 *     run, stale ones are recorded and write nothing, the processed ones
 *     are duplicates and change nothing;
 *   - a document that shrinks to fewer chunks loses the chunks past its
 *     new end;
 *   - an event whose embedding fails inside a batched batch is KH_FAILED
 *     with its claim undone (no processed-event row, no chunk), while the
 *     others of the batch are indexed; applied again it is indexed;
 *   - an event twice in one batch, and a document written twice in one
 *     batch, make the batch go event by event (1): the copy is a
 *     duplicate, and both events of the document are indexed in order
 *     (the later one's chunks stay).
 * Without the batched way (kh_store_apply_many) this program does not
 * build; a batched way that lost or doubled an event fails these cases.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kh_store_many.h"
#include "rvt_kit.h"
#include "testkit.h"

#define TARGET 400
#define OVERLAP 40
/* Fails for a chunk holding POISON, else prints a two-number vector. */
#define EMBED_CMD "if grep -q POISON; then exit 3; else echo '[0.5, 0.25]'; fi"

typedef struct fixture {
    rvt_db db;
    long long first; /* id of the first document made here */
} fixture;

static fixture fx;

/* Makes n documents titled "<prefix> i" with that text (approved at
 * version 1 unless pending); their ids into ids[0..n). */
static int make_docs(const char *prefix, const char *text, int n, int pending,
                     long long *ids)
{
    char sql[2048], out[32];
    int i;

    for (i = 0; i < n; i++) {
        snprintf(sql, sizeof(sql),
                 "INSERT INTO kh_document (title, author) VALUES "
                 "('%s %d', 'alice') RETURNING id",
                 prefix, i);
        if (rvt_sql(&fx.db, sql, out, sizeof(out)) != 0)
            return -1;
        ids[i] = atoll(out);
        snprintf(sql, sizeof(sql),
                 "WITH r AS (INSERT INTO kh_document_review (document_id, "
                 "document_version, status, submitted_by, reviewer, fence, "
                 "decided_at) SELECT %lld, 1, %s, 'alice', %s, %s, %s "
                 "RETURNING id) UPDATE kh_document d SET status = %s, "
                 "current_review_id = r.id FROM r WHERE d.id = %lld",
                 ids[i], pending ? "'pending'" : "'approved'",
                 pending ? "NULL" : "'bob'", pending ? "NULL" : "1",
                 pending ? "NULL" : "now()",
                 pending ? "'pending_review'" : "'approved'", ids[i]);
        if (rvt_sql(&fx.db, sql, NULL, 0) != 0)
            return -1;
        snprintf(sql, sizeof(sql),
                 "INSERT INTO kh_document_content (document_id, content) "
                 "VALUES (%lld, %s)",
                 ids[i], text);
        if (rvt_sql(&fx.db, sql, NULL, 0) != 0)
            return -1;
    }
    return 0;
}

static int setup(void **state)
{
    static const char *const args[] = {"migrate", NULL};
    char env[600], out[2048];
    const char *const envp[] = {env, NULL};

    (void)state;
    if (rvt_db_create(&fx.db, "khstore") != 0)
        return -1;
    snprintf(env, sizeof(env), "DATABASE_URL=%s", fx.db.url);
    if (rvt_run_reviewd(args, envp, out, sizeof(out)) != 0) {
        fprintf(stderr, "reviewd migrate failed: %s\n", out);
        rvt_db_drop(&fx.db);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    rvt_db_drop(&fx.db);
    return 0;
}

static kh_store *store_new(const char *embed)
{
    kh_store_opts o;
    char err[512];
    kh_store *s;

    memset(&o, 0, sizeof(o));
    o.chunk.target_bytes = TARGET;
    o.chunk.overlap_bytes = OVERLAP;
    o.pg_timeout_s = 30;
    o.embed_command = embed;
    o.embed_timeout_ms = 10000;
    o.content_store = SVC_CONTENT_PG;
    s = kh_store_new(fx.db.url, &o, err, sizeof(err));
    TK_EXPECT(s != NULL, "kh_store_new: %s", err);
    return s;
}

/* Event number k of the program, on document doc at version v. */
static void event(kh_apply *a, int k, long long doc, int v)
{
    memset(a, 0, sizeof(*a));
    snprintf(a->ev.event_id, sizeof(a->ev.event_id),
             "00000000-0000-4000-8000-%012d", k);
    snprintf(a->ev.document_id, sizeof(a->ev.document_id), "%lld", doc);
    a->ev.document_version = v;
}

static long long count_of(const char *fmt, const char *arg)
{
    char sql[512];

    snprintf(sql, sizeof(sql), fmt, arg);
    return rvt_sql_int(&fx.db, sql);
}

/* The chunks of doc: count, and how many are not of event id at v1 or
 * are not numbered 0..n-1. */
static void expect_chunks(long long doc, long long want, const char *event_id)
{
    char sql[512];

    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM kh_chunk WHERE document_id = %lld", doc);
    TK_EXPECT(rvt_sql_int(&fx.db, sql) == want,
              "document %lld has %lld chunk(s), got %lld", doc, want,
              rvt_sql_int(&fx.db, sql));
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM kh_chunk WHERE document_id = %lld AND "
             "(event_id <> '%s' OR chunk_index >= %lld OR tsv <> "
             "kh_search_vector((SELECT title FROM kh_document WHERE id = "
             "%lld), content))",
             doc, event_id, want, doc);
    TK_EXPECT(rvt_sql_int(&fx.db, sql) == 0,
              "document %lld's chunks are event %s's, numbered 0..%lld, "
              "with their tsvector",
              doc, event_id, want - 1);
}

static const char long_text[] =
    "repeat('A sentence of the long document. ', 40)";

static void batch_gives_each_event_its_outcome(void **state)
{
    long long doc[4], pending, shrink[1];
    kh_apply a[7];
    char why[400];
    kh_store *s = store_new(NULL);
    int rc, i;

    (void)state;
    assert_int_equal(make_docs("Short", "'A short approved text.'", 2, 0, doc),
                     0);
    assert_int_equal(make_docs("Long", long_text, 2, 0, doc + 2), 0);
    assert_int_equal(make_docs("Pending", "'Not yet.'", 1, 1, &pending), 0);
    event(&a[0], 1, doc[0], 1);
    event(&a[1], 2, doc[1], 1);
    event(&a[2], 3, doc[2], 1);
    event(&a[3], 4, doc[3], 2);       /* another version: stale */
    event(&a[4], 5, pending, 1);      /* not approved: stale */
    event(&a[5], 6, 999999999999, 1); /* no such document: stale */
    rc = kh_store_apply_many(s, a, 6, why, sizeof(why));
    TK_EXPECT(rc == 0, "the batch goes the batched way: %s", why);
    for (i = 0; i < 3; i++)
        TK_EXPECT(a[i].out == KH_INDEXED, "event %d is indexed: %s (%s)",
                  i + 1, kh_outcome_name(a[i].out), a[i].err);
    for (i = 3; i < 6; i++)
        TK_EXPECT(a[i].out == KH_STALE, "event %d is stale: %s (%s)", i + 1,
                  kh_outcome_name(a[i].out), a[i].err);
    TK_EXPECT(a[0].chunks == 1 && a[2].chunks > 2,
              "a short text is one chunk and a long one several (%d, %d)",
              a[0].chunks, a[2].chunks);
    expect_chunks(doc[0], 1, a[0].ev.event_id);
    expect_chunks(doc[1], 1, a[1].ev.event_id);
    expect_chunks(doc[2], a[2].chunks, a[2].ev.event_id);
    expect_chunks(doc[3], 0, a[3].ev.event_id);
    expect_chunks(pending, 0, a[4].ev.event_id);
    TK_EXPECT(count_of("SELECT count(*) FROM kh_processed_event WHERE "
                       "outcome = '%s'",
                       "indexed")
                      == 3
                  && count_of("SELECT count(*) FROM kh_processed_event WHERE "
                              "outcome = '%s'",
                              "stale")
                         == 3,
              "three events are recorded indexed and three stale");
    TK_EXPECT(count_of("SELECT chunks FROM kh_processed_event WHERE "
                       "event_id = '%s'",
                       a[2].ev.event_id)
                  == a[2].chunks,
              "the long document's event records its chunk count");

    /* Again, with one new event: a shrinking long document. */
    shrink[0] = doc[2];
    assert_int_equal(rvt_sql(&fx.db,
                             "UPDATE kh_document_content SET content = "
                             "'Now short.' WHERE document_id = "
                             "(SELECT min(id) FROM kh_document "
                             "WHERE title = 'Long 0')",
                             NULL, 0),
                     0);
    event(&a[6], 7, shrink[0], 1);
    rc = kh_store_apply_many(s, a, 7, why, sizeof(why));
    TK_EXPECT(rc == 0, "the second batch goes the batched way: %s", why);
    for (i = 0; i < 6; i++)
        TK_EXPECT(a[i].out == KH_DUPLICATE, "event %d is a duplicate: %s",
                  i + 1, kh_outcome_name(a[i].out));
    TK_EXPECT(a[6].out == KH_INDEXED && a[6].chunks == 1,
              "the new event is indexed into one chunk: %s, %d (%s)",
              kh_outcome_name(a[6].out), a[6].chunks, a[6].err);
    expect_chunks(shrink[0], 1, a[6].ev.event_id);
    expect_chunks(doc[0], 1, a[0].ev.event_id);
    TK_EXPECT(rvt_sql_int(&fx.db, "SELECT count(*) FROM kh_processed_event")
                  == 7,
              "seven events are recorded, once each");
    kh_store_free(s);
}

static void failed_embedding_undoes_only_its_claim(void **state)
{
    long long doc[3];
    kh_apply a[3];
    char why[400];
    kh_store *s = store_new(EMBED_CMD);
    int rc;

    (void)state;
    assert_int_equal(make_docs("Embedded", "'A text to embed.'", 1, 0, doc),
                     0);
    assert_int_equal(make_docs("Poisoned", "'POISON for the embedder.'", 1, 0,
                               doc + 1),
                     0);
    assert_int_equal(make_docs("Embedded too", "'Another text.'", 1, 0,
                               doc + 2),
                     0);
    event(&a[0], 11, doc[0], 1);
    event(&a[1], 12, doc[1], 1);
    event(&a[2], 13, doc[2], 1);
    rc = kh_store_apply_many(s, a, 3, why, sizeof(why));
    TK_EXPECT(rc == 0, "the batch goes the batched way: %s", why);
    TK_EXPECT(a[0].out == KH_INDEXED && a[2].out == KH_INDEXED,
              "the other events are indexed: %s, %s",
              kh_outcome_name(a[0].out), kh_outcome_name(a[2].out));
    TK_EXPECT(a[1].out == KH_FAILED && strstr(a[1].err, "status 3") != NULL,
              "the poisoned event fails with the command's status: %s (%s)",
              kh_outcome_name(a[1].out), a[1].err);
    TK_EXPECT(count_of("SELECT count(*) FROM kh_processed_event WHERE "
                       "event_id = '%s'",
                       a[1].ev.event_id)
                  == 0,
              "the failed event's claim is undone");
    expect_chunks(doc[1], 0, a[1].ev.event_id);
    TK_EXPECT(count_of("SELECT count(*) FROM kh_chunk WHERE event_id = '%s' "
                       "AND embedding = '{0.5,0.25}'",
                       a[0].ev.event_id)
                  == 1,
              "an indexed chunk carries its embedding");
    kh_store_free(s);

    /* The retry with a working command indexes it. */
    s = store_new(NULL);
    rc = kh_store_apply_many(s, &a[1], 1, why, sizeof(why));
    TK_EXPECT(rc == 0 && a[1].out == KH_INDEXED,
              "the retried event is indexed: %s (%s)",
              kh_outcome_name(a[1].out), a[1].err);
    expect_chunks(doc[1], 1, a[1].ev.event_id);
    kh_store_free(s);
}

static void repeats_in_a_batch_go_event_by_event(void **state)
{
    long long doc[2];
    kh_apply a[3];
    char why[400];
    kh_store *s = store_new(NULL);
    int rc;

    (void)state;
    assert_int_equal(make_docs("Repeated", "'Delivered twice.'", 2, 0, doc),
                     0);
    event(&a[0], 21, doc[0], 1);
    event(&a[1], 21, doc[0], 1); /* the same event again */
    rc = kh_store_apply_many(s, a, 2, why, sizeof(why));
    TK_EXPECT(rc == 1 && strstr(why, "twice") != NULL,
              "an event twice in the batch goes event by event (%d: %s)", rc,
              why);
    TK_EXPECT(a[0].out == KH_INDEXED && a[1].out == KH_DUPLICATE,
              "the first copy is indexed and the second a duplicate: %s, %s",
              kh_outcome_name(a[0].out), kh_outcome_name(a[1].out));
    expect_chunks(doc[0], 1, a[0].ev.event_id);

    event(&a[0], 22, doc[1], 1);
    event(&a[1], 23, doc[1], 1); /* the same document, another event */
    rc = kh_store_apply_many(s, a, 2, why, sizeof(why));
    TK_EXPECT(rc == 1 && strstr(why, "twice") != NULL,
              "a document written twice in the batch goes event by event "
              "(%d: %s)",
              rc, why);
    TK_EXPECT(a[0].out == KH_INDEXED && a[1].out == KH_INDEXED,
              "both events are indexed: %s, %s", kh_outcome_name(a[0].out),
              kh_outcome_name(a[1].out));
    expect_chunks(doc[1], 1, a[1].ev.event_id);
    TK_EXPECT(count_of("SELECT count(*) FROM kh_processed_event WHERE "
                       "event_id IN ('%s', "
                       "'00000000-0000-4000-8000-000000000023')",
                       a[0].ev.event_id)
                  == 2,
              "both are recorded");
    kh_store_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(batch_gives_each_event_its_outcome),
        cmocka_unit_test(failed_embedding_undoes_only_its_claim),
        cmocka_unit_test(repeats_in_a_batch_go_event_by_event),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
