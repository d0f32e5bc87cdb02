/*
 * kh_store.c: the exactly-once indexing transaction, event by event (see
 * kh_store.h).
 *
 * Each event goes in a savepoint of the batch's transaction, in two
 * round trips: the savepoint with the claim and document read (and the
 * batch's BEGIN before the first event's), then the chunks replaced with
 * their count (or the stale mark) with the savepoint's release.  A
 * statement that fails aborts the rest of its pipeline, so a release
 * never follows a failed write: the event is rolled back to its
 * savepoint.  So a bad event costs only itself.  Any failed statement
 * ends the attempt: the transaction is rolled back, a connection that
 * libpq reports bad is dropped and made again on the next call
 * (kh_store_conn.h), and the caller retries the message later.
 *
 * This is the path of kh_store_apply and of kh_store_apply_many's
 * fallback (kh_store_many.h), which applies a whole batch in two round
 * trips and comes here when it cannot.
 */
#include "kh_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kh_array_text.h"
#include "kh_store_conn.h"
#include "kh_store_text.h"

/* The event claimed and the document read in one round trip: fresh is
 * 0 for an event already processed (then nothing was written), and the
 * document's columns are NULL when it does not exist. */
#define CLAIM_AND_READ(content, from)                                     \
    "WITH claim AS (INSERT INTO kh_processed_event "                      \
    "(event_id, document_id, outcome) "                                   \
    "VALUES ($1::uuid, $2::bigint, 'indexed') "                           \
    "ON CONFLICT (event_id) DO NOTHING RETURNING 1) "                     \
    "SELECT (SELECT count(*) FROM claim), d.status, d.version, d.title, " \
    "d.content FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT d.status, "  \
    "d.version, d.title, " content " AS content FROM " from               \
    " WHERE d.id = $2::bigint FOR SHARE OF d) d ON true"
static const char claim_doc_sql[] = CLAIM_AND_READ(
    "coalesce(c.content, '')",
    "kh_document d LEFT JOIN kh_document_content c ON c.document_id = d.id");
/* The same row without the text, which is in MongoDB. */
static const char claim_doc_mongo_sql[] = CLAIM_AND_READ("''",
                                                         "kh_document d");
static const char stale_sql[] =
    "UPDATE kh_processed_event SET outcome = 'stale' "
    "WHERE event_id = $1::uuid";
/* The document's chunks replaced and their number recorded in one
 * statement: the chunks come as parallel arrays (index, text, byte
 * offset, embedding as a real[] literal or NULL); those at an index the
 * document still has are overwritten and those past its end deleted (the
 * two touch different rows, so the statement's parts cannot meet). */
static const char replace_sql[] =
    "WITH chunk AS (SELECT * FROM unnest($2::integer[], $3::text[], "
    "$4::integer[], $5::text[]) AS t(i, c, o, e)), "
    "ins AS (INSERT INTO kh_chunk (document_id, chunk_index, "
    "document_version, content, byte_offset, tsv, embedding, event_id) "
    "SELECT $1::bigint, i, $6::integer, c, o, kh_search_vector($7, c), "
    "e::real[], $8::uuid FROM chunk "
    "ON CONFLICT (document_id, chunk_index) DO UPDATE SET "
    "document_version = EXCLUDED.document_version, "
    "content = EXCLUDED.content, byte_offset = EXCLUDED.byte_offset, "
    "tsv = EXCLUDED.tsv, embedding = EXCLUDED.embedding, "
    "event_id = EXCLUDED.event_id, indexed_at = now()), "
    "gone AS (DELETE FROM kh_chunk WHERE document_id = $1::bigint "
    "AND chunk_index >= cardinality($2::integer[])) "
    "UPDATE kh_processed_event SET chunks = cardinality($2::integer[]) "
    "WHERE event_id = $8::uuid";

static const char savepoint_sql[] = "SAVEPOINT kh_event";
static const char release_sql[] = "RELEASE SAVEPOINT kh_event";

#define STMT_SAVEPOINT "kh_savepoint"
#define STMT_CLAIM "kh_claim"
#define STMT_STALE "kh_stale"
#define STMT_REPLACE "kh_replace"
#define STMT_RELEASE "kh_release"

/* Prepared on each new connection (kh_store_connect); STMT_CLAIM with
 * the claim of the store's content. */
const kh_stmt kh_store_tx_stmts[] = {
    {STMT_SAVEPOINT, savepoint_sql, NULL, 0},
    {STMT_CLAIM, claim_doc_sql, claim_doc_mongo_sql, 2},
    {STMT_STALE, stale_sql, NULL, 1},
    {STMT_REPLACE, replace_sql, NULL, 8},
    {STMT_RELEASE, release_sql, NULL, 0},
};
const size_t kh_store_tx_nstmts = sizeof(kh_store_tx_stmts)
                                  / sizeof(kh_store_tx_stmts[0]);

/* Runs one statement; returns the result (caller clears) or NULL with
 * err set. */
static PGresult *run(kh_store *s, const char *what, const char *sql, int n,
                     const char *const *params, char *err, size_t errlen)
{
    PGresult *res = PQexecParams(s->pg, sql, n, NULL, params, NULL, NULL, 0);
    const ExecStatusType st = PQresultStatus(res);

    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        return res;
    kh_store_set_err(s, err, errlen, what,
                     res != NULL ? PQresultErrorMessage(res)
                                 : PQerrorMessage(s->pg));
    PQclear(res);
    return NULL;
}

static int run_ok(kh_store *s, const char *what, const char *sql, int n,
                  const char *const *params, char *err, size_t errlen)
{
    PGresult *res = run(s, what, sql, n, params, err, errlen);

    PQclear(res);
    return res != NULL ? 0 : -1;
}

/*
 * Opens the event's savepoint, claims the event and reads its document,
 * in one round trip (with the batch's BEGIN when it is still to be sent):
 * *fresh = 0 when the event was processed before, *found = 0 when the
 * document does not exist.  *saved says whether the savepoint was made
 * (so whether a failure must roll back to it).
 */
static int claim_and_load(kh_store *s, const kh_event *ev, kh_doc *d,
                          int *fresh, int *found, int *saved, char *err,
                          size_t errlen)
{
    const char *params[] = {ev->event_id, ev->document_id};
    const int b = s->begin_pending;
    const kh_step steps[] = {
        {"begin", KH_STMT_BEGIN, 0, NULL},
        {"savepoint", STMT_SAVEPOINT, 0, NULL},
        {"record event and read document", STMT_CLAIM, 2, params},
    };
    int failed_at = 0, rc;

    memset(d, 0, sizeof(*d));
    *saved = 0;
    s->begin_pending = 0;
    rc = kh_store_run_steps(s, steps + (b ? 0 : 1), b ? 3 : 2, b ? 2 : 1,
                            &d->res, &failed_at, err, errlen);
    if (b && failed_at == 0)
        s->begin_failed = 1;
    *saved = failed_at > (b ? 1 : 0);
    if (rc != 0)
        return -1;
    *fresh = PQntuples(d->res) == 1 && atoi(PQgetvalue(d->res, 0, 0)) == 1;
    *found = PQntuples(d->res) == 1 && !PQgetisnull(d->res, 0, 1);
    if (*found) {
        d->status = PQgetvalue(d->res, 0, 1);
        d->version = atoi(PQgetvalue(d->res, 0, 2));
        d->title = PQgetvalue(d->res, 0, 3);
        d->content = PQgetvalue(d->res, 0, 4);
        d->content_len = (size_t)PQgetlength(d->res, 0, 4);
    }
    return 0;
}

/* The event's write and the savepoint's release in one round trip.  A
 * failed write aborts the release, so the savepoint is still there to
 * roll back to.  Returns 0 or -1 (err set). */
static int write_and_release(kh_store *s, const kh_step *write, char *err,
                             size_t errlen)
{
    const kh_step steps[] = {*write, {"release", STMT_RELEASE, 0, NULL}};
    PGresult *none = NULL;
    int failed_at = 0;

    return kh_store_run_steps(s, steps, 2, -1, &none, &failed_at, err, errlen);
}

/* The chunks as the four arrays of replace_sql.  Returns 0, or -1 with
 * err set (an embedding that failed, or no memory). */
static int chunk_arrays(const kh_store *s, const kh_doc *d,
                        const kh_chunk_span *spans, size_t n,
                        kh_array_text out[4], char *err, size_t errlen)
{
    char num[24];
    size_t i;

    for (i = 0; i < n; i++) {
        const char *text = d->content + spans[i].offset;
        char *embedding = NULL;

        snprintf(num, sizeof(num), "%zu", i);
        kh_array_text_add(&out[0], i, num, strlen(num));
        kh_array_text_add(&out[1], i, text, spans[i].length);
        snprintf(num, sizeof(num), "%zu", spans[i].offset);
        kh_array_text_add(&out[2], i, num, strlen(num));
        if (kh_store_embed_span(s, text, spans[i].length, &embedding, err,
                                errlen)
            != 0)
            return -1;
        kh_array_text_add(&out[3], i, embedding,
                          embedding != NULL ? strlen(embedding) : 0);
        free(embedding);
    }
    for (i = 0; i < 4; i++) {
        kh_array_text_end(&out[i], n);
        if (out[i].failed) {
            snprintf(err, errlen, "chunks: out of memory");
            return -1;
        }
    }
    return 0;
}

/* Replaces the document's chunks and releases the event's savepoint;
 * *chunks gets their number. */
static int replace_chunks(kh_store *s, const kh_event *ev, const kh_doc *d,
                          int *chunks, char *err, size_t errlen)
{
    kh_chunk_span *spans = NULL;
    kh_array_text arrays[4];
    size_t n = 0, i;
    char version[24];
    int rc;

    memset(arrays, 0, sizeof(arrays));
    if (kh_chunk_split(d->content, d->content_len, &s->opts.chunk, &spans, &n)
        != 0) {
        snprintf(err, errlen, "chunking: bad options or out of memory");
        return -1;
    }
    rc = chunk_arrays(s, d, spans, n, arrays, err, errlen);
    free(spans);
    if (rc == 0) {
        const char *params[] = {ev->document_id, arrays[0].data,
                                arrays[1].data,  arrays[2].data,
                                arrays[3].data,  version,
                                d->title,        ev->event_id};

        const kh_step write = {"replace chunks", STMT_REPLACE, 8, params};

        snprintf(version, sizeof(version), "%d", d->version);
        rc = write_and_release(s, &write, err, errlen);
        *chunks = rc == 0 ? (int)n : 0;
    }
    for (i = 0; i < 4; i++)
        free(arrays[i].data);
    return rc;
}

/* The body of the transaction: *saved says whether the event's
 * savepoint exists (it is released already on KH_INDEXED and KH_STALE). */
static kh_outcome apply_in_tx(kh_store *s, const kh_event *ev, int *chunks,
                              int *saved, char *err, size_t errlen)
{
    const char *stale[] = {ev->event_id};
    const kh_step mark_stale = {"record stale", STMT_STALE, 1, stale};
    kh_doc d;
    int fresh = 0, found = 0, rc;

    if (claim_and_load(s, ev, &d, &fresh, &found, saved, err, errlen) != 0)
        return KH_FAILED;
    if (!fresh) {
        kh_doc_clear(&d);
        return KH_DUPLICATE;
    }
    if (!found || strcmp(d.status, "approved") != 0
        || d.version != ev->document_version) {
        kh_doc_clear(&d);
        return write_and_release(s, &mark_stale, err, errlen) == 0 ? KH_STALE
                                                                   : KH_FAILED;
    }
    rc = kh_store_load_text(s, ev, &d, err, errlen);
    if (rc == 0)
        rc = replace_chunks(s, ev, &d, chunks, err, errlen);
    kh_doc_clear(&d);
    return rc == 0 ? KH_INDEXED : KH_FAILED;
}

/* BEGIN is not sent here: it travels with the first event's statements
 * (claim_and_load), one round trip less per batch. */
int kh_store_batch_begin(kh_store *s, char *err, size_t errlen)
{
    if (kh_store_connect(s, err, errlen) != 0)
        return -1;
    s->begin_pending = 1;
    s->begin_failed = 0;
    return 0;
}

kh_outcome kh_store_batch_apply(kh_store *s, const kh_event *ev, int *chunks,
                                char *err, size_t errlen)
{
    kh_outcome out;
    int saved = 0;

    *chunks = 0;
    if (s->begin_failed) {
        snprintf(err, errlen, "begin: the batch's transaction did not start");
        return KH_FAILED;
    }
    out = apply_in_tx(s, ev, chunks, &saved, err, errlen);
    if (out == KH_INDEXED || out == KH_STALE)
        return out;
    /* A duplicate wrote nothing; a failure must leave nothing.  The
     * savepoint is released too, so a batch never stacks them.  If there
     * is none, or even the rollback to it fails, the transaction is lost
     * and the commit will say so. */
    *chunks = 0;
    if (saved) {
        PQclear(PQexec(s->pg, "ROLLBACK TO SAVEPOINT kh_event; "
                              "RELEASE SAVEPOINT kh_event"));
    }
    return out;
}

int kh_store_batch_commit(kh_store *s, char *err, size_t errlen)
{
    if (s->begin_pending) {
        s->begin_pending = 0; /* no event was applied: nothing began */
        return 0;
    }
    if (s->begin_failed) {
        snprintf(err, errlen, "begin: the batch's transaction did not start");
        return -1;
    }
    if (run_ok(s, "commit", "COMMIT", 0, NULL, err, errlen) != 0) {
        PQclear(PQexec(s->pg, "ROLLBACK"));
        return -1;
    }
    return 0;
}

kh_outcome kh_store_apply(kh_store *s, const kh_event *ev, int *chunks,
                          char *err, size_t errlen)
{
    kh_outcome out;

    *chunks = 0;
    if (kh_store_batch_begin(s, err, errlen) != 0)
        return KH_FAILED;
    out = kh_store_batch_apply(s, ev, chunks, err, errlen);
    if (kh_store_batch_commit(s, err, errlen) != 0) {
        *chunks = 0;
        return KH_FAILED; /* redelivery finds out what happened */
    }
    return out;
}
