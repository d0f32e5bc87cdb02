/*
 * kh_store.c: the exactly-once indexing transaction (see kh_store.h).
 *
 * Statements go with text parameters (no client-side quoting; the chunks
 * go as array literals, escaped here).  Every statement is prepared once
 * per connection (ensure_connected) and executed by name with the
 * session's generic plan: parsing, analysing and planning the claim and
 * the replace again for each event was half of the backend's CPU per
 * event (perf, docs/benchmarks.md), more than running them.
 *
 * A batch goes in two round trips whatever its size (apply_batched):
 * BEGIN with one statement that claims every event and reads every
 * document, then one statement that writes every document's chunks,
 * marks the stale events and undoes the claims of events that failed in
 * between (a MongoDB read, an embedding), with COMMIT.  Per event that
 * is a share of two statements instead of four statements and two round
 * trips, each of which, under load, was a wake-up of the backend and of
 * the indexer waiting their turn for a CPU.
 *
 * Should the batched way fail (any failed statement), or not apply (an
 * event twice in the batch, a document to be written twice), the batch
 * is applied again event by event (apply_each), each event in a
 * savepoint, in two round trips per event: the savepoint with the claim
 * and document read (and the batch's BEGIN before the first event's),
 * then the chunks replaced with their count (or the stale mark) with the
 * savepoint's release.  A statement that fails aborts the rest of its
 * pipeline, so a release never follows a failed write: the event is
 * rolled back to its savepoint.  So a bad event costs only itself, as
 * before.  Any failed statement ends the attempt: the transaction is
 * rolled back, a connection that libpq reports bad is dropped and made
 * again on the next call, and the caller retries the message later.
 *
 * The text comes from the store CONTENT_STORE names, as reviewd wrote
 * it.  With pg it is joined to the document row.  With mongo the row is
 * read first (FOR SHARE), and only once it is known to be approved at the
 * event's version is record (id, version) fetched through reviewd's own
 * MongoDB module (svc_content_mongo.c): that record is immutable once the
 * row points at it (rv_content.h), so the row lock and the record agree.
 * A record that is missing, malformed or unreachable fails the event
 * (KH_FAILED, rolled back, retried later) and is never indexed as an
 * empty text.
 */
#include "kh_store.h"

#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kh_embed.h"
#include "svc_content_mongo.h"

struct kh_store {
    char *url;
    kh_store_opts opts;
    PGconn *pg;
    svc_mongo_store *mongo; /* NULL: the text is in kh_document_content */
    int begin_pending;      /* the batch's BEGIN goes with its first event */
    int begin_failed;       /* ... and it failed: the batch cannot commit */
};

typedef struct doc_row {
    PGresult *res;
    const char *status;
    int version;
    const char *title;
    const char *content;
    size_t content_len;
    char *owned; /* the text when it came from MongoDB */
} doc_row;

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

/* The prepared statements' names; ensure_connected prepares each on a
 * new connection (STMT_CLAIM with the claim of the store's content). */
#define STMT_BEGIN "kh_begin"
#define STMT_SAVEPOINT "kh_savepoint"
#define STMT_CLAIM "kh_claim"
#define STMT_STALE "kh_stale"
#define STMT_REPLACE "kh_replace"
#define STMT_RELEASE "kh_release"
#define STMT_CLAIM_MANY "kh_claim_many"
#define STMT_WRITE_MANY "kh_write_many"
#define STMT_COMMIT "kh_commit"

const char *kh_outcome_name(kh_outcome outcome)
{
    switch (outcome) {
    case KH_INDEXED: return "indexed";
    case KH_STALE: return "stale";
    case KH_DUPLICATE: return "duplicate";
    case KH_FAILED: break;
    }
    return "failed";
}

kh_store *kh_store_new(const char *url, const kh_store_opts *opts, char *err,
                       size_t errlen)
{
    kh_store *s = calloc(1, sizeof(*s));

    if (s != NULL)
        s->url = strdup(url);
    if (s == NULL || s->url == NULL) {
        snprintf(err, errlen, "store: out of memory");
        free(s);
        return NULL;
    }
    s->opts = *opts;
    s->opts.mongo_url = NULL; /* borrowed only during this call */
    if (opts->content_store == SVC_CONTENT_MONGO) {
        s->mongo = svc_mongo_store_new(opts->mongo_url, "kh-indexer", err,
                                       errlen);
        if (s->mongo == NULL) {
            kh_store_free(s);
            return NULL;
        }
    }
    return s;
}

void kh_store_free(kh_store *s)
{
    if (s == NULL)
        return;
    PQfinish(s->pg);
    svc_mongo_store_free(s->mongo);
    free(s->url);
    free(s);
}

const char *kh_store_content_where(const kh_store *s)
{
    return s->mongo != NULL ? svc_mongo_store_endpoint(s->mongo)
                            : "kh_document_content";
}

static void set_err(char *err, size_t errlen, const char *what,
                    const char *msg)
{
    size_t n;

    snprintf(err, errlen, "%s: %s", what, msg != NULL ? msg : "?");
    n = strlen(err);
    while (n > 0 && (err[n - 1] == '\n' || err[n - 1] == ' '))
        err[--n] = '\0';
}

/* A connection whose pipeline is in an unknown state is never used
 * again: the next batch connects afresh. */
static void drop_connection(kh_store *s)
{
    PQfinish(s->pg);
    s->pg = NULL;
}

/* Prepares the statements of an event on a new connection.  Returns 0,
 * or -1 with err set and the connection dropped (it is made again, and
 * the statements prepared again, on the next call). */
static int prepare_all(kh_store *s, char *err, size_t errlen)
{
    const struct {
        const char *name, *sql;
        int n;
    } stmts[] = {
        {STMT_BEGIN, "BEGIN", 0},
        {STMT_SAVEPOINT, savepoint_sql, 0},
        {STMT_CLAIM, s->mongo != NULL ? claim_doc_mongo_sql : claim_doc_sql,
         2},
        {STMT_STALE, stale_sql, 1},
        {STMT_REPLACE, replace_sql, 8},
        {STMT_RELEASE, release_sql, 0},
        {STMT_CLAIM_MANY,
         s->mongo != NULL ? claim_many_mongo_sql : claim_many_sql, 2},
        {STMT_WRITE_MANY, write_many_sql, 12},
        {STMT_COMMIT, "COMMIT", 0},
    };
    size_t i;

    for (i = 0; i < sizeof(stmts) / sizeof(stmts[0]); i++) {
        PGresult *res = PQprepare(s->pg, stmts[i].name, stmts[i].sql,
                                  stmts[i].n, NULL);

        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            char what[64];

            snprintf(what, sizeof(what), "prepare %s", stmts[i].name);
            set_err(err, errlen, what,
                    res != NULL ? PQresultErrorMessage(res)
                                : PQerrorMessage(s->pg));
            PQclear(res);
            drop_connection(s);
            return -1;
        }
        PQclear(res);
    }
    return 0;
}

/* Connects when there is no usable connection, and prepares the
 * statements on a new one.  Returns 0 or -1. */
static int ensure_connected(kh_store *s, char *err, size_t errlen)
{
    char timeout[16], stmt[128];
    const char *keys[] = {"connect_timeout", "application_name", "dbname",
                          NULL};
    const char *vals[] = {timeout, "kh-indexer", s->url, NULL};
    PGresult *res;

    if (s->pg != NULL && PQstatus(s->pg) == CONNECTION_OK)
        return 0;
    PQfinish(s->pg);
    snprintf(timeout, sizeof(timeout), "%d", s->opts.pg_timeout_s);
    s->pg = PQconnectdbParams(keys, vals, 1);
    if (s->pg == NULL || PQstatus(s->pg) != CONNECTION_OK) {
        set_err(err, errlen, "postgres connect",
                s->pg != NULL ? PQerrorMessage(s->pg) : "out of memory");
        PQfinish(s->pg);
        s->pg = NULL;
        return -1;
    }
    /* A generic plan for every prepared statement: their plans are the
     * same primary-key lookups whatever the parameters, and the default
     * (auto) would plan the first five executions of each again.  A
     * generic plan is made once and kept while the tables grow, so it
     * must not depend on how big they were then: every row this session
     * touches is found by a key, and without enable_seqscan = off a
     * plan made on a young or just emptied table (no statistics, a few
     * pages) scans kh_chunk sequentially for = ANY (array) for as long
     * as the connection lives (perf: a quarter of the backend's CPU after
     * 20,000 events, and growing). */
    snprintf(stmt, sizeof(stmt),
             "SET statement_timeout = %d; "
             "SET plan_cache_mode = force_generic_plan; "
             "SET enable_seqscan = off",
             s->opts.pg_timeout_s * 1000);
    res = PQexec(s->pg, stmt);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        set_err(err, errlen, "postgres session", PQresultErrorMessage(res));
        PQclear(res);
        drop_connection(s);
        return -1;
    }
    PQclear(res);
    return prepare_all(s, err, errlen);
}

/* Runs one statement; returns the result (caller clears) or NULL with
 * err set. */
static PGresult *run(kh_store *s, const char *what, const char *sql, int n,
                     const char *const *params, char *err, size_t errlen)
{
    PGresult *res = PQexecParams(s->pg, sql, n, NULL, params, NULL, NULL, 0);
    const ExecStatusType st = PQresultStatus(res);

    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        return res;
    set_err(err, errlen, what,
            res != NULL ? PQresultErrorMessage(res) : PQerrorMessage(s->pg));
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

/* One statement of a pipeline (run_steps). */
typedef struct kh_step {
    const char *what; /* for the error message */
    const char *name; /* of the prepared statement (prepare_all) */
    int n;
    const char *const *params;
} kh_step;

/* The next result of the pipeline, past the NULL that ends each
 * statement's results. */
static PGresult *next_result(PGconn *pg)
{
    PGresult *r = PQgetResult(pg);

    if (r == NULL && PQstatus(pg) == CONNECTION_OK)
        r = PQgetResult(pg);
    return r;
}

/*
 * Sends the n steps in one pipeline (one round trip) and reads every
 * result.  Returns 0 with *kept the result of step keep (-1: none kept;
 * the caller clears it), or -1 with err naming the first step that
 * failed; the steps after a failed one did not run.  *failed_at gets
 * the index of that step (n when none failed).
 */
static int run_steps(kh_store *s, const kh_step *steps, int n, int keep,
                     PGresult **kept, int *failed_at, char *err, size_t errlen)
{
    int i, sent = s->pg != NULL && PQenterPipelineMode(s->pg) == 1;
    PGresult *r;

    *kept = NULL;
    *failed_at = 0;
    for (i = 0; sent && i < n; i++)
        sent = PQsendQueryPrepared(s->pg, steps[i].name, steps[i].n,
                                   steps[i].params, NULL, NULL, 0)
               == 1;
    if (!sent || PQpipelineSync(s->pg) != 1) {
        set_err(err, errlen, steps[0].what,
                s->pg != NULL ? PQerrorMessage(s->pg) : "not connected");
        drop_connection(s);
        return -1;
    }
    *failed_at = n;
    for (i = 0; i < n; i++) {
        ExecStatusType st;

        r = next_result(s->pg);
        st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK
            && *failed_at == n) {
            *failed_at = i;
            set_err(err, errlen, steps[i].what,
                    r != NULL ? PQresultErrorMessage(r)
                              : PQerrorMessage(s->pg));
        }
        if (i == keep && *failed_at == n)
            *kept = r;
        else
            PQclear(r);
        if (r == NULL)
            break; /* the connection failed: no sync will come */
    }
    while (PQstatus(s->pg) == CONNECTION_OK
           && (r = next_result(s->pg)) != NULL) {
        const int done = PQresultStatus(r) == PGRES_PIPELINE_SYNC;

        PQclear(r);
        if (done)
            break;
    }
    if (PQstatus(s->pg) != CONNECTION_OK || PQexitPipelineMode(s->pg) != 1)
        drop_connection(s);
    if (*failed_at < n || (*kept == NULL && keep >= 0)) {
        if (*failed_at == n)
            set_err(err, errlen, steps[n - 1].what, "the connection failed");
        PQclear(*kept);
        *kept = NULL;
        return -1;
    }
    return 0;
}

/*
 * Opens the event's savepoint, claims the event and reads its document,
 * in one round trip (with the batch's BEGIN when it is still to be sent):
 * *fresh = 0 when the event was processed before, *found = 0 when the
 * document does not exist.  *saved says whether the savepoint was made
 * (so whether a failure must roll back to it).
 */
static int claim_and_load(kh_store *s, const kh_event *ev, doc_row *d,
                          int *fresh, int *found, int *saved, char *err,
                          size_t errlen)
{
    const char *params[] = {ev->event_id, ev->document_id};
    const int b = s->begin_pending;
    const kh_step steps[] = {
        {"begin", STMT_BEGIN, 0, NULL},
        {"savepoint", STMT_SAVEPOINT, 0, NULL},
        {"record event and read document", STMT_CLAIM, 2, params},
    };
    int failed_at = 0, rc;

    memset(d, 0, sizeof(*d));
    *saved = 0;
    s->begin_pending = 0;
    rc = run_steps(s, steps + (b ? 0 : 1), b ? 3 : 2, b ? 2 : 1, &d->res,
                   &failed_at, err, errlen);
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

    return run_steps(s, steps, 2, -1, &none, &failed_at, err, errlen);
}

static void doc_clear(doc_row *d)
{
    PQclear(d->res);
    free(d->owned);
    memset(d, 0, sizeof(*d));
}

/* With MongoDB, fetches the text of the version the row is at.  Returns
 * 0, or -1 with err naming the record and what went wrong. */
static int load_text(kh_store *s, const kh_event *ev, doc_row *d, char *err,
                     size_t errlen)
{
    char why[256];
    svc_store_rc rc;

    if (s->mongo == NULL)
        return 0;
    rc = svc_mongo_store_get(s->mongo, ev->document_id, d->version, &d->owned,
                             why, sizeof(why));
    if (rc != SVC_STORE_OK) {
        snprintf(err, errlen, "content of document %s version %d %s: %s",
                 ev->document_id, d->version,
                 rc == SVC_STORE_MISSING       ? "missing"
                 : rc == SVC_STORE_UNAVAILABLE ? "unavailable"
                                               : "unreadable",
                 why);
        return -1;
    }
    d->content = d->owned;
    d->content_len = strlen(d->owned);
    return 0;
}

/* The embedding of one chunk as a PostgreSQL array literal, or NULL in
 * *out when no command is set.  Returns 0 or -1. */
static int embed_chunk(const kh_store *s, const char *text, size_t len,
                       char **out, char *err, size_t errlen)
{
    float *vec = NULL;
    size_t dim = 0;

    *out = NULL;
    if (s->opts.embed_command == NULL)
        return 0;
    if (kh_embed_run(s->opts.embed_command, text, len,
                     s->opts.embed_timeout_ms, &vec, &dim, err, errlen)
        != 0)
        return -1;
    *out = kh_embed_pg_array(vec, dim);
    free(vec);
    if (*out == NULL) {
        snprintf(err, errlen, "embedding: out of memory");
        return -1;
    }
    return 0;
}

/* A growing PostgreSQL array literal ("{...}"); failed on no memory. */
typedef struct array_text {
    char *data;
    size_t len, cap;
    int failed;
} array_text;

static void at_put(array_text *a, const char *bytes, size_t n)
{
    if (a->failed)
        return;
    if (a->len + n + 2 > a->cap) {
        const size_t cap = (a->len + n + 2) * 2;
        char *p = realloc(a->data, cap);

        if (p == NULL) {
            a->failed = 1;
            return;
        }
        a->data = p;
        a->cap = cap;
    }
    memcpy(a->data + a->len, bytes, n);
    a->len += n;
    a->data[a->len] = '\0';
}

/* Appends element i: a double-quoted string with " and \ escaped, or
 * NULL when text is NULL. */
static void at_element(array_text *a, size_t i, const char *text, size_t n)
{
    size_t k, from = 0;

    at_put(a, i == 0 ? "{" : ",", 1);
    if (text == NULL) {
        at_put(a, "NULL", 4);
        return;
    }
    at_put(a, "\"", 1);
    for (k = 0; k < n; k++) {
        if (text[k] == '"' || text[k] == '\\') {
            at_put(a, text + from, k - from);
            at_put(a, "\\", 1);
            from = k;
        }
    }
    at_put(a, text + from, n - from);
    at_put(a, "\"", 1);
}

static void at_end(array_text *a, size_t n)
{
    at_put(a, n == 0 ? "{}" : "}", n == 0 ? 2 : 1);
}

/* The chunks as the four arrays of replace_sql.  Returns 0, or -1 with
 * err set (an embedding that failed, or no memory). */
static int chunk_arrays(const kh_store *s, const doc_row *d,
                        const kh_chunk_span *spans, size_t n,
                        array_text out[4], char *err, size_t errlen)
{
    char num[24];
    size_t i;

    for (i = 0; i < n; i++) {
        const char *text = d->content + spans[i].offset;
        char *embedding = NULL;

        snprintf(num, sizeof(num), "%zu", i);
        at_element(&out[0], i, num, strlen(num));
        at_element(&out[1], i, text, spans[i].length);
        snprintf(num, sizeof(num), "%zu", spans[i].offset);
        at_element(&out[2], i, num, strlen(num));
        if (s->opts.embed_command != NULL) {
            char *copy = strndup(text, spans[i].length);

            if (copy == NULL) {
                snprintf(err, errlen, "chunk: out of memory");
                return -1;
            }
            if (embed_chunk(s, copy, spans[i].length, &embedding, err, errlen)
                != 0) {
                free(copy);
                return -1;
            }
            free(copy);
        }
        at_element(&out[3], i, embedding,
                   embedding != NULL ? strlen(embedding) : 0);
        free(embedding);
    }
    for (i = 0; i < 4; i++) {
        at_end(&out[i], n);
        if (out[i].failed) {
            snprintf(err, errlen, "chunks: out of memory");
            return -1;
        }
    }
    return 0;
}

/* Replaces the document's chunks and releases the event's savepoint;
 * *chunks gets their number. */
static int replace_chunks(kh_store *s, const kh_event *ev, const doc_row *d,
                          int *chunks, char *err, size_t errlen)
{
    kh_chunk_span *spans = NULL;
    array_text arrays[4];
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
    doc_row d;
    int fresh = 0, found = 0, rc;

    if (claim_and_load(s, ev, &d, &fresh, &found, saved, err, errlen) != 0)
        return KH_FAILED;
    if (!fresh) {
        doc_clear(&d);
        return KH_DUPLICATE;
    }
    if (!found || strcmp(d.status, "approved") != 0
        || d.version != ev->document_version) {
        doc_clear(&d);
        return write_and_release(s, &mark_stale, err, errlen) == 0 ? KH_STALE
                                                                   : KH_FAILED;
    }
    rc = load_text(s, ev, &d, err, errlen);
    if (rc == 0)
        rc = replace_chunks(s, ev, &d, chunks, err, errlen);
    doc_clear(&d);
    return rc == 0 ? KH_INDEXED : KH_FAILED;
}

/* BEGIN is not sent here: it travels with the first event's statements
 * (claim_and_load), one round trip less per batch. */
int kh_store_batch_begin(kh_store *s, char *err, size_t errlen)
{
    if (ensure_connected(s, err, errlen) != 0)
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

/* ---- a whole batch in two round trips ---------------------------------- */

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
    array_text a[W_ARRAYS];
    size_t count[W_ARRAYS]; /* elements in each */
} write_many;

static void wm_add(write_many *w, int which, const char *text, size_t n)
{
    at_element(&w->a[which], w->count[which]++, text, n);
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
        for (i = 0; rc == 0 && i < n; i++) {
            char *copy = strndup(text + spans[i].offset, spans[i].length);

            if (copy == NULL) {
                snprintf(err, errlen, "chunk: out of memory");
                rc = -1;
                break;
            }
            rc = embed_chunk(s, copy, spans[i].length, &embeddings[i], err,
                             errlen);
            free(copy);
        }
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
static int claim_arrays(const kh_apply *items, size_t n, array_text *ids,
                        array_text *docs)
{
    size_t i;

    for (i = 0; i < n; i++) {
        at_element(ids, i, items[i].ev.event_id, strlen(items[i].ev.event_id));
        at_element(docs, i, items[i].ev.document_id,
                   strlen(items[i].ev.document_id));
    }
    at_end(ids, n);
    at_end(docs, n);
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
        doc_row d;

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
        if (load_text(s, &it->ev, &d, it->err, sizeof(it->err)) != 0
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

static void rollback_quietly(kh_store *s)
{
    if (s->pg != NULL)
        PQclear(PQexec(s->pg, "ROLLBACK"));
}

/* The batched way: BEGIN and every claim and read in one round trip,
 * every write and COMMIT in a second.  Returns 0 with every item's
 * outcome set, or -1 with why set and nothing written (the transaction
 * rolled back, or its COMMIT's fate unknown: the claims decide then). */
static int apply_batched(kh_store *s, kh_apply *items, size_t n, char *why,
                         size_t whylen)
{
    array_text ids, docs;
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
    if (ensure_connected(s, why, whylen) != 0)
        return -1;
    if (claim_arrays(items, n, &ids, &docs) == 0) {
        const char *params[] = {ids.data, docs.data};
        const kh_step claim[] = {
            {"begin", STMT_BEGIN, 0, NULL},
            {"record events and read documents", STMT_CLAIM_MANY, 2, params},
        };

        rc = run_steps(s, claim, 2, 1, &res, &failed_at, why, whylen);
        if (rc != 0)
            rollback_quietly(s);
    } else {
        snprintf(why, whylen, "claims: out of memory");
    }
    if (rc == 0) {
        rc = sort_out(s, items, n, res, &w, why, whylen);
        for (i = 0; rc == 0 && i < W_ARRAYS; i++) {
            at_end(&w.a[i], w.count[i]);
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
                {"commit", STMT_COMMIT, 0, NULL},
            };

            for (i = 0; i < W_ARRAYS; i++)
                params[i] = w.a[i].data;
            rc = run_steps(s, write, 2, -1, &none, &failed_at, why, whylen);
        }
        if (rc != 0)
            rollback_quietly(s);
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

/* 8-4-4-4-12 hex digits. */
static int uuid_shaped(const char *s)
{
    size_t i;

    if (strlen(s) != 36)
        return 0;
    for (i = 0; i < 36; i++) {
        const int dash = i == 8 || i == 13 || i == 18 || i == 23;
        const char c = s[i];

        if (dash ? c != '-'
                 : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')
                     || (c >= 'A' && c <= 'F')))
            return 0;
    }
    return 1;
}

static int canonical_id(const char *s)
{
    size_t i, n = strlen(s);

    if (n == 0 || n > 19 || s[0] == '0')
        return 0;
    for (i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return n < 19 || strcmp(s, "9223372036854775807") <= 0;
}

int kh_event_parse(const char *body, size_t len, kh_event *ev, char *err,
                   size_t errlen)
{
    json_error_t jerr;
    json_t *obj = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    const char *id = NULL, *type = NULL, *doc = NULL;
    json_int_t version = 0;
    int rc = -1;

    memset(ev, 0, sizeof(*ev));
    if (obj == NULL) {
        snprintf(err, errlen, "event: not JSON: %s", jerr.text);
        return -1;
    }
    if (json_unpack_ex(obj, &jerr, 0, "{s:s,s:s,s:s,s:I}", "event_id", &id,
                       "type", &type, "document_id", &doc, "document_version",
                       &version)
        != 0) {
        snprintf(err, errlen, "event: %s", jerr.text);
    } else if (!uuid_shaped(id) || strcmp(type, "document.approved") != 0
               || !canonical_id(doc) || version < 1 || version > INT32_MAX) {
        snprintf(err, errlen,
                 "event: malformed event_id, type, "
                 "document_id or document_version");
    } else {
        snprintf(ev->event_id, sizeof(ev->event_id), "%s", id);
        snprintf(ev->document_id, sizeof(ev->document_id), "%s", doc);
        ev->document_version = (int)version;
        rc = 0;
    }
    json_decref(obj);
    return rc;
}
