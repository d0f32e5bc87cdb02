/*
 * kh_store_many.c: a whole batch of events in two round trips (see
 * kh_store_many.h).
 *
 * apply_batched sends BEGIN with one statement that claims every event
 * and reads every document, then one statement that writes every
 * document's chunks, marks the stale events and undoes the claims of
 * events that failed in between (a MongoDB read, an embedding), with
 * COMMIT.  Per event that is a share of two statements instead of four
 * statements and two round trips.
 *
 * Should the batched way fail (any failed statement), or not apply (an
 * event twice in the batch, a document to be written twice), the batch
 * is applied again event by event (apply_each), each event in a
 * savepoint (kh_store.c), so a bad event costs only itself.  Nothing of
 * the batched attempt survives it: its transaction was rolled back, or
 * its COMMIT's fate is unknown and the claims it made decide (a
 * committed claim makes the event a KH_DUPLICATE the second time).
 */
#include "kh_store_many.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kh_array_text.h"
#include "kh_store_conn.h"
#include "kh_store_text.h"

/* A whole batch's events claimed and their documents read (FOR SHARE)
 * in one statement, one row per event in the order of $1 (k = 1..n):
 * fresh is false for an event processed before.  The claims are made in
 * event id order, so two indexers claiming overlapping batches wait for
 * each other in one order and never deadlock. */
#define CLAIM_MANY(content, from)                                      \
    "WITH ev AS (SELECT * FROM unnest($1::uuid[], $2::bigint[]) "      \
    "WITH ORDINALITY AS t(event_id, document_id, k)), "                \
    "claim AS (INSERT INTO kh_processed_event "                        \
    "(event_id, document_id, outcome) SELECT event_id, document_id, "  \
    "'indexed' FROM ev ORDER BY event_id "                             \
    "ON CONFLICT (event_id) DO NOTHING RETURNING event_id) "           \
    "SELECT ev.k, claim.event_id IS NOT NULL, d.status, d.version, "   \
    "d.title, d.content FROM ev LEFT JOIN claim USING (event_id) "     \
    "LEFT JOIN LATERAL (SELECT d.status, d.version, d.title, " content \
    " AS content FROM " from " WHERE d.id = ev.document_id "           \
    "FOR SHARE OF d) d ON true ORDER BY ev.k"
static const char claim_many_sql[] = CLAIM_MANY(
    "coalesce(c.content, '')",
    "kh_document d LEFT JOIN kh_document_content c ON c.document_id = d.id");
static const char claim_many_mongo_sql[] = CLAIM_MANY("''", "kh_document d");
/* A whole batch's writes in one statement: the documents to index as
 * parallel arrays (id, number of chunks, event, version, title; k =
 * 1..m), their chunks as parallel arrays naming their document by k
 * (index, text, byte offset, embedding), then the events found stale and
 * the claims to undo (events that failed before their write).  Each part
 * touches rows no other part does: the documents are distinct, chunks
 * past a document's end are deleted while those before it are written,
 * and every event is in one list only.  The deletes and updates find
 * their rows with = ANY (array) on the primary keys, not by joining the
 * unnested arrays: the generic plan is made once per connection, and on
 * a young database (few rows, no statistics yet) the join is planned as
 * a sequential scan that the plan would keep while the table grows. */
static const char write_many_sql[] =
    "WITH doc AS (SELECT * FROM unnest($6::bigint[], $7::integer[], "
    "$8::uuid[], $9::integer[], $10::text[]) "
    "WITH ORDINALITY AS t(id, n, event_id, version, title, k)), "
    "chunk AS (SELECT * FROM unnest($1::integer[], $2::integer[], "
    "$3::text[], $4::integer[], $5::text[]) AS t(k, i, c, o, e)), "
    "ins AS (INSERT INTO kh_chunk (document_id, chunk_index, "
    "document_version, content, byte_offset, tsv, embedding, event_id) "
    "SELECT doc.id, chunk.i, doc.version, chunk.c, chunk.o, "
    "kh_search_vector(doc.title, chunk.c), chunk.e::real[], doc.event_id "
    "FROM chunk JOIN doc ON doc.k = chunk.k "
    "ON CONFLICT (document_id, chunk_index) DO UPDATE SET "
    "document_version = EXCLUDED.document_version, "
    "content = EXCLUDED.content, byte_offset = EXCLUDED.byte_offset, "
    "tsv = EXCLUDED.tsv, embedding = EXCLUDED.embedding, "
    "event_id = EXCLUDED.event_id, indexed_at = now()), "
    "gone AS (DELETE FROM kh_chunk WHERE document_id = ANY ($6::bigint[]) "
    "AND chunk_index >= ($7::integer[])[array_position($6::bigint[], "
    "document_id)]), "
    "counted AS (UPDATE kh_processed_event SET chunks = ($7::integer[])"
    "[array_position($8::uuid[], event_id)] "
    "WHERE event_id = ANY ($8::uuid[])), "
    "stale AS (UPDATE kh_processed_event SET outcome = 'stale' "
    "WHERE event_id = ANY ($11::uuid[])), "
    "unclaim AS (DELETE FROM kh_processed_event "
    "WHERE event_id = ANY ($12::uuid[])) "
    "SELECT count(*) FROM doc";

#define STMT_CLAIM_MANY "kh_claim_many"
#define STMT_WRITE_MANY "kh_write_many"

/* Prepared on each new connection (kh_store_connect); STMT_CLAIM_MANY
 * with the claim of the store's content. */
const kh_stmt kh_store_many_stmts[] = {
    {STMT_CLAIM_MANY, claim_many_sql, claim_many_mongo_sql, 2},
    {STMT_WRITE_MANY, write_many_sql, NULL, 12},
};
const size_t kh_store_many_nstmts = sizeof(kh_store_many_stmts)
                                    / sizeof(kh_store_many_stmts[0]);

/* The arrays of write_many_sql, in its parameter order ($1..$12). */
enum {
    W_CHUNK_DOC,
    W_CHUNK_INDEX,
    W_CHUNK_TEXT,
    W_CHUNK_OFFSET,
    W_CHUNK_EMBEDDING,
    W_DOC_ID,
    W_DOC_CHUNKS,
    W_DOC_EVENT,
    W_DOC_VERSION,
    W_DOC_TITLE,
    W_STALE,
    W_UNCLAIM,
    W_ARRAYS
};

typedef struct write_many {
    kh_array_text a[W_ARRAYS];
    size_t count[W_ARRAYS]; /* elements in each */
} write_many;

static void wm_add(write_many *w, int which, const char *text, size_t n)
{
    kh_array_text_add(&w->a[which], w->count[which]++, text, n);
}

static void wm_add_str(write_many *w, int which, const char *text)
{
    wm_add(w, which, text, strlen(text));
}

static void wm_add_num(write_many *w, int which, size_t v)
{
    char num[24];

    snprintf(num, sizeof(num), "%zu", v);
    wm_add_str(w, which, num);
}

static void wm_free(write_many *w)
{
    int i;

    for (i = 0; i < W_ARRAYS; i++)
        free(w->a[i].data);
}

/* The chunks of one document to write: split, embedded when
 * EMBED_COMMAND is set, and added to w as document number k (1-based).
 * Returns 0, or -1 with err set and nothing added. */
static int wm_add_doc(const kh_store *s, write_many *w, const kh_event *ev,
                      const char *title, size_t title_len, int version,
                      const char *text, size_t len, int *chunks, char *err,
                      size_t errlen)
{
    kh_chunk_span *spans = NULL;
    char **embeddings = NULL;
    size_t n = 0, i, k = w->count[W_DOC_ID] + 1;
    int rc = 0;

    if (kh_chunk_split(text, len, &s->opts.chunk, &spans, &n) != 0) {
        snprintf(err, errlen, "chunking: bad options or out of memory");
        return -1;
    }
    if (s->opts.embed_command != NULL && n > 0) {
        embeddings = calloc(n, sizeof(*embeddings));
        rc = embeddings != NULL ? 0 : -1;
        if (rc != 0)
            snprintf(err, errlen, "chunk: out of memory");
        for (i = 0; rc == 0 && i < n; i++)
            rc = kh_store_embed_span(s, text + spans[i].offset,
                                     spans[i].length, &embeddings[i], err,
                                     errlen);
    }
    for (i = 0; rc == 0 && i < n; i++) {
        wm_add_num(w, W_CHUNK_DOC, k);
        wm_add_num(w, W_CHUNK_INDEX, i);
        wm_add(w, W_CHUNK_TEXT, text + spans[i].offset, spans[i].length);
        wm_add_num(w, W_CHUNK_OFFSET, spans[i].offset);
        if (embeddings != NULL)
            wm_add_str(w, W_CHUNK_EMBEDDING, embeddings[i]);
        else
            wm_add(w, W_CHUNK_EMBEDDING, NULL, 0);
    }
    if (rc == 0) {
        wm_add_str(w, W_DOC_ID, ev->document_id);
        wm_add_num(w, W_DOC_CHUNKS, n);
        wm_add_str(w, W_DOC_EVENT, ev->event_id);
        wm_add_num(w, W_DOC_VERSION, (size_t)version);
        wm_add(w, W_DOC_TITLE, title, title_len);
        *chunks = (int)n;
    }
    for (i = 0; embeddings != NULL && i < n; i++)
        free(embeddings[i]);
    free(embeddings);
    free(spans);
    return rc;
}

static void reset_items(kh_apply *items, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        items[i].out = KH_FAILED;
        items[i].chunks = 0;
        items[i].err[0] = '\0';
    }
}

/* 1 if an event id comes twice in items[0..n) (in any case: PostgreSQL
 * reads uuids so). */
static int event_twice(const kh_apply *items, size_t n)
{
    size_t i, j;

    for (i = 0; i < n; i++)
        for (j = 0; j < i; j++)
            if (strcasecmp(items[i].ev.event_id, items[j].ev.event_id) == 0)
                return 1;
    return 0;
}

/* The ids of items[0..n) as the two arrays of claim_many_sql. */
static int claim_arrays(const kh_apply *items, size_t n, kh_array_text *ids,
                        kh_array_text *docs)
{
    size_t i;

    for (i = 0; i < n; i++) {
        kh_array_text_add(ids, i, items[i].ev.event_id,
                          strlen(items[i].ev.event_id));
        kh_array_text_add(docs, i, items[i].ev.document_id,
                          strlen(items[i].ev.document_id));
    }
    kh_array_text_end(ids, n);
    kh_array_text_end(docs, n);
    return ids->failed || docs->failed ? -1 : 0;
}

/* Sorts out each event by its row of the claim: a duplicate, stale, or
 * to write (its text loaded, chunked and embedded into w).  An event
 * that fails here is KH_FAILED and its claim is undone by the write.
 * Returns 0, or -1 with why set when the batch cannot go this way. */
static int sort_out(kh_store *s, kh_apply *items, size_t n, PGresult *res,
                    write_many *w, char *why, size_t whylen)
{
    size_t i, j;

    if ((size_t)PQntuples(res) != n || PQnfields(res) != 6) {
        snprintf(why, whylen, "the claim gave %d rows for %zu events",
                 PQntuples(res), n);
        return -1;
    }
    for (i = 0; i < n; i++) {
        kh_apply *it = &items[i];
        const int found = !PQgetisnull(res, (int)i, 2);
        const int version = found ? atoi(PQgetvalue(res, (int)i, 3)) : 0;
        kh_doc d;

        if (PQgetvalue(res, (int)i, 1)[0] != 't') {
            it->out = KH_DUPLICATE;
            continue;
        }
        if (!found || strcmp(PQgetvalue(res, (int)i, 2), "approved") != 0
            || version != it->ev.document_version) {
            it->out = KH_STALE;
            wm_add_str(w, W_STALE, it->ev.event_id);
            continue;
        }
        for (j = 0; j < i; j++) {
            if (items[j].out == KH_INDEXED
                && strcmp(items[j].ev.document_id, it->ev.document_id) == 0) {
                snprintf(why, whylen, "document %s is written twice",
                         it->ev.document_id);
                return -1;
            }
        }
        memset(&d, 0, sizeof(d));
        d.version = version;
        d.content = PQgetvalue(res, (int)i, 5);
        d.content_len = (size_t)PQgetlength(res, (int)i, 5);
        if (kh_store_load_text(s, &it->ev, &d, it->err, sizeof(it->err)) != 0
            || wm_add_doc(s, w, &it->ev, PQgetvalue(res, (int)i, 4),
                          (size_t)PQgetlength(res, (int)i, 4), version,
                          d.content, d.content_len, &it->chunks, it->err,
                          sizeof(it->err))
                   != 0) {
            it->out = KH_FAILED;
            wm_add_str(w, W_UNCLAIM, it->ev.event_id);
        } else {
            it->out = KH_INDEXED;
        }
        free(d.owned);
    }
    return 0;
}

/* The batched way: BEGIN and every claim and read in one round trip,
 * every write and COMMIT in a second.  Returns 0 with every item's
 * outcome set, or -1 with why set and nothing written (the transaction
 * rolled back, or its COMMIT's fate unknown: the claims decide then). */
static int apply_batched(kh_store *s, kh_apply *items, size_t n, char *why,
                         size_t whylen)
{
    kh_array_text ids, docs;
    write_many w;
    PGresult *res = NULL, *none = NULL;
    int failed_at = 0, rc = -1, i;

    memset(&ids, 0, sizeof(ids));
    memset(&docs, 0, sizeof(docs));
    memset(&w, 0, sizeof(w));
    if (event_twice(items, n)) {
        snprintf(why, whylen, "an event comes twice in the batch");
        return -1;
    }
    if (kh_store_connect(s, why, whylen) != 0)
        return -1;
    if (claim_arrays(items, n, &ids, &docs) == 0) {
        const char *params[] = {ids.data, docs.data};
        const kh_step claim[] = {
            {"begin", KH_STMT_BEGIN, 0, NULL},
            {"record events and read documents", STMT_CLAIM_MANY, 2, params},
        };

        rc = kh_store_run_steps(s, claim, 2, 1, &res, &failed_at, why, whylen);
        if (rc != 0)
            kh_store_rollback_quietly(s);
    } else {
        snprintf(why, whylen, "claims: out of memory");
    }
    if (rc == 0) {
        rc = sort_out(s, items, n, res, &w, why, whylen);
        for (i = 0; rc == 0 && i < W_ARRAYS; i++) {
            kh_array_text_end(&w.a[i], w.count[i]);
            if (w.a[i].failed) {
                snprintf(why, whylen, "writes: out of memory");
                rc = -1;
            }
        }
        if (rc == 0) {
            const char *params[W_ARRAYS];
            const kh_step write[] = {
                {"write chunks and outcomes", STMT_WRITE_MANY, W_ARRAYS,
                 params},
                {"commit", KH_STMT_COMMIT, 0, NULL},
            };

            for (i = 0; i < W_ARRAYS; i++)
                params[i] = w.a[i].data;
            rc = kh_store_run_steps(s, write, 2, -1, &none, &failed_at, why,
                                    whylen);
        }
        if (rc != 0)
            kh_store_rollback_quietly(s);
    }
    PQclear(res);
    free(ids.data);
    free(docs.data);
    wm_free(&w);
    return rc;
}

/* The batch event by event, each in a savepoint of one transaction. */
static void apply_each(kh_store *s, kh_apply *items, size_t n)
{
    char err[400];
    size_t i;
    int open = kh_store_batch_begin(s, err, sizeof(err)) == 0;

    for (i = 0; i < n; i++) {
        if (!open) {
            snprintf(items[i].err, sizeof(items[i].err), "%s", err);
            continue;
        }
        items[i].out = kh_store_batch_apply(s, &items[i].ev, &items[i].chunks,
                                            items[i].err,
                                            sizeof(items[i].err));
    }
    if (open && kh_store_batch_commit(s, err, sizeof(err)) != 0) {
        /* Nothing of the batch was written. */
        for (i = 0; i < n; i++) {
            if (items[i].out == KH_INDEXED || items[i].out == KH_STALE) {
                items[i].out = KH_FAILED;
                items[i].chunks = 0;
                snprintf(items[i].err, sizeof(items[i].err), "%s", err);
            }
        }
    }
}

int kh_store_apply_many(kh_store *s, kh_apply *items, size_t n, char *why,
                        size_t whylen)
{
    why[0] = '\0';
    if (n == 0)
        return 0;
    reset_items(items, n);
    if (apply_batched(s, items, n, why, whylen) == 0)
        return 0;
    reset_items(items, n);
    apply_each(s, items, n);
    return 1;
}
