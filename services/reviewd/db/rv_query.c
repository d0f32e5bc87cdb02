/*
 * rv_query.c: reviewd's SQL, in one table, and the row mappings.
 *
 * Every statement is prepared on every connection (rv_db.c), so the text
 * below is all the SQL the request path runs.  Column lists are macros so
 * that the SELECT, INSERT ... RETURNING and UPDATE ... RETURNING forms of
 * a row stay identical and map through one function.  Documents are
 * locked with FOR UPDATE and reviews likewise, always review first, then
 * document, so two deciders cannot deadlock; submit locks only the
 * document.  left(content, 200) counts characters in the database
 * encoding (UTF8), which gives the preview without cutting a character.
 */
#include "db/rv_query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Milliseconds since the epoch, formatted by rv_query_format_ms. */
#define TS(col) "floor(extract(epoch FROM " col ") * 1000)::bigint"

#define DOC_COLS                                                      \
    "d.id::text, d.title, d.status, d.author, d.version, d.preview, " \
    "d.current_review_id::text, " TS("d.created_at") ", " TS("d.updated_at")

/* The review's id is named review_id, so that in a review-and-document
 * row it does not share a name with the document's id (pgbench's \gset
 * in bench_reviewd reads them by name). */
#define REVIEW_COLS                                                      \
    "r.id::text AS review_id, r.document_id::text, r.document_version, " \
    "r.status, "                                                         \
    "r.submitted_by, r.reviewer, r.comment, r.fence::text, " TS(         \
        "r.created_at") ", " TS("r.decided_at")

const rv_stmt_def rv_query_stmts[RV_QUERY_COUNT] = {
    [RV_QUERY_DOC_GET] = {"doc_get",
                          "SELECT " DOC_COLS
                          " FROM kh_document d WHERE d.id = $1::bigint",
                          1},
    [RV_QUERY_DOC_LOCK] = {"doc_lock",
                           "SELECT " DOC_COLS
                           " FROM kh_document d WHERE d.id = $1::bigint "
                           "FOR UPDATE",
                           1},
    [RV_QUERY_DOC_INSERT] =
        {"doc_insert",
         "INSERT INTO kh_document AS d (title, author, preview) "
         "VALUES ($1, $2, left($3, 200)) RETURNING " DOC_COLS,
         3},
    [RV_QUERY_DOC_UPDATE] =
        {"doc_update",
         "UPDATE kh_document AS d SET title = coalesce($2, d.title), "
         "preview = coalesce(left($3, 200), d.preview), "
         "version = d.version + 1, updated_at = now() "
         "WHERE d.id = $1::bigint RETURNING " DOC_COLS,
         3},
    [RV_QUERY_CONTENT_PUT] =
        {"content_put",
         "INSERT INTO kh_document_content (document_id, content) "
         "VALUES ($1::bigint, $2) ON CONFLICT (document_id) DO UPDATE "
         "SET content = EXCLUDED.content, updated_at = now()",
         2},
    [RV_QUERY_CONTENT_GET] = {"content_get",
                              "SELECT content FROM kh_document_content "
                              "WHERE document_id = $1::bigint",
                              1},
    [RV_QUERY_REVIEW_GET] = {"review_get",
                             "SELECT " REVIEW_COLS
                             " FROM kh_document_review r "
                             "WHERE r.id = $1::bigint",
                             1},
    /* A review with its document, in one round trip; locked, review
     * first, then document: FOR UPDATE OF locks each output row's rows in
     * the order named. */
    [RV_QUERY_REVIEW_DOC_GET] =
        {"review_doc_get",
         "SELECT " REVIEW_COLS ", " DOC_COLS " FROM kh_document_review r "
         "JOIN kh_document d ON d.id = r.document_id WHERE r.id = $1::bigint",
         1},
    [RV_QUERY_REVIEW_DOC_LOCK] =
        {"review_doc_lock",
         "SELECT " REVIEW_COLS ", " DOC_COLS " FROM kh_document_review r "
         "JOIN kh_document d ON d.id = r.document_id WHERE r.id = $1::bigint "
         "FOR UPDATE OF r, d",
         1},
    /* Submit as one statement: the document row locked (FOR UPDATE, so
     * a concurrent change is waited for and the conditions are checked
     * again on the row as committed) only if $2 wrote it and it is a
     * draft or rejected; then the new pending review of its version,
     * and the document moved to pending_review naming it (the composite
     * foreign key is checked at the statement's end, when the review
     * row exists).  No row, nothing written, when a condition fails.
     * Returns the review's columns, then the document's. */
    [RV_QUERY_REVIEW_SUBMIT] =
        {"review_submit",
         "WITH s AS (SELECT d.id, d.version FROM kh_document d "
         "WHERE d.id = $1::bigint AND d.author = $2 "
         "AND d.status IN ('draft', 'rejected') FOR UPDATE), "
         "r AS (INSERT INTO kh_document_review "
         "(document_id, document_version, submitted_by) "
         "SELECT s.id, s.version, $2 FROM s RETURNING *), "
         "d AS (UPDATE kh_document AS d SET status = 'pending_review', "
         "current_review_id = r.id, updated_at = now() FROM r "
         "WHERE d.id = r.document_id RETURNING d.*) "
         "SELECT " REVIEW_COLS ", " DOC_COLS " FROM r, d",
         2},
    /* A decision as one statement: the review and its document locked,
     * review first, then document (FOR UPDATE OF r, d, so a concurrent
     * change is waited for and the conditions checked again on the rows
     * as committed), only if the review is pending, its document is
     * pending_review on it, and the reviewer $3 neither submitted the
     * review nor wrote the document (four eyes); then the review decided
     * ($2: approved or rejected) and the document given the same status.
     * No row, nothing written, when a condition fails. */
    [RV_QUERY_REVIEW_DECIDE] =
        {"review_decide",
         "WITH s AS (SELECT r.id FROM kh_document_review r "
         "JOIN kh_document d ON d.id = r.document_id "
         "WHERE r.id = $1::bigint AND r.status = 'pending' "
         "AND d.status = 'pending_review' AND d.current_review_id = r.id "
         "AND r.submitted_by <> $3 AND d.author <> $3 FOR UPDATE OF r, d), "
         "r AS (UPDATE kh_document_review AS r SET status = $2, "
         "reviewer = $3, comment = $4, fence = $5::numeric, "
         "decided_at = now() FROM s WHERE r.id = s.id RETURNING r.*), "
         "d AS (UPDATE kh_document AS d SET status = $2, updated_at = now() "
         "FROM r WHERE d.id = r.document_id RETURNING d.*) "
         "SELECT " REVIEW_COLS ", " DOC_COLS " FROM r, d",
         5},
    [RV_QUERY_REVIEW_LIST] =
        {"review_list",
         "SELECT " REVIEW_COLS " FROM kh_document_review r "
         "WHERE r.id > $1::bigint ORDER BY r.id LIMIT $2::integer",
         2},
    [RV_QUERY_REVIEW_LIST_STATUS] =
        {"review_list_status",
         "SELECT " REVIEW_COLS " FROM kh_document_review r "
         "WHERE r.status = $3 AND r.id > $1::bigint ORDER BY r.id "
         "LIMIT $2::integer",
         3},
    [RV_QUERY_IDEM_FIND] =
        {"idem_find",
         "SELECT status_code, response_body, "
         "request_hash = sha256(convert_to($5, 'UTF8')) "
         "FROM kh_idempotency WHERE user_sub = $1 AND method = $2 "
         "AND path = $3 AND key = $4 AND expires_at > now()",
         5},
    /* The key's scope as one 64-bit advisory key: the first 64 bits of
     * the SHA-256 of the scope written unambiguously (a JSON array), with
     * the top bit set.  Single-bigint keys are a space apart from the
     * relay's (int, int) key, and the top bit keeps them off every
     * positive bigint key (the migrations' "kh_migr"), so no user's key
     * can collide with the relay's or the migrations' lock, and two
     * users' keys collide only by a 63-bit chance. */
    [RV_QUERY_IDEM_TRY_LOCK] =
        {"idem_try_lock",
         "SELECT pg_try_advisory_xact_lock((('x' || left(encode(sha256("
         "convert_to(json_build_array($1::text, $2::text, $3::text, "
         "$4::text)::text, 'UTF8')), 'hex'), 16))::bit(64) "
         "| x'8000000000000000')::bigint)",
         4},
    [RV_QUERY_IDEM_STORE] =
        {"idem_store",
         "INSERT INTO kh_idempotency (user_sub, method, path, key, "
         "request_hash, status_code, response_body, expires_at) "
         "VALUES ($1, $2, $3, $4, sha256(convert_to($5, 'UTF8')), "
         "$6::integer, $7, now() + make_interval(secs => $8::integer)) "
         "ON CONFLICT (user_sub, method, path, key) DO UPDATE SET "
         "request_hash = EXCLUDED.request_hash, "
         "status_code = EXCLUDED.status_code, "
         "response_body = EXCLUDED.response_body, "
         "created_at = now(), expires_at = EXCLUDED.expires_at "
         "WHERE kh_idempotency.expires_at <= now()",
         8},
    /* At most $1 expired rows per statement (rv_sweeper.c says why);
     * the outer expiry check keeps a row that an upsert revived after
     * the inner scan saw it. */
    [RV_QUERY_IDEM_SWEEP] =
        {"idem_sweep",
         "DELETE FROM kh_idempotency WHERE ctid = ANY (ARRAY("
         "SELECT ctid FROM kh_idempotency WHERE expires_at <= now() "
         "ORDER BY expires_at LIMIT $1::integer)) AND expires_at <= now()",
         1},
    /* The outbox (sql/0004_outbox.sql); the payload is API.md's event. */
    [RV_QUERY_OUTBOX_INSERT] =
        {"outbox_insert",
         "WITH e AS (SELECT gen_random_uuid() AS id) "
         "INSERT INTO kh_outbox (event_id, routing_key, document_id, payload) "
         "SELECT e.id, $1, $2::bigint, json_build_object("
         "'event_id', e.id::text, 'type', $1::text, 'document_id', $2::text, "
         "'review_id', $3::text, 'document_version', $4::integer, "
         "'actor', $5::text, 'occurred_at', $6::text) FROM e",
         6},
    /* The relay (rv_relay.c says why one relays at a time). */
    [RV_QUERY_OUTBOX_TRY_LOCK] =
        {"outbox_try_lock",
         "SELECT pg_try_advisory_xact_lock(1263028548, "
         "hashtext('kh_outbox_relay'))",
         0},
    /* ORDER BY kh_outbox.id, the number: a bare "id" names the text
     * output column, which sorts "10" before "9" and breaks commit order. */
    [RV_QUERY_OUTBOX_CLAIM] =
        {"outbox_claim",
         "SELECT id::text, event_id::text, routing_key, payload::text, "
         "document_id::text "
         "FROM kh_outbox WHERE sent_at IS NULL ORDER BY kh_outbox.id "
         "LIMIT $1::integer FOR UPDATE SKIP LOCKED",
         1},
    [RV_QUERY_OUTBOX_MARK_SENT] =
        {"outbox_mark_sent",
         "UPDATE kh_outbox SET sent_at = clock_timestamp() "
         "WHERE id = ANY ($1::bigint[]) AND sent_at IS NULL",
         1},
    [RV_QUERY_OUTBOX_PRUNE] =
        {"outbox_prune",
         "DELETE FROM kh_outbox WHERE id IN (SELECT id FROM kh_outbox "
         "WHERE sent_at < now() - make_interval(secs => $1::integer) "
         "LIMIT 10000)",
         1},
    [RV_QUERY_OUTBOX_BACKLOG] =
        {"outbox_backlog",
         "SELECT count(*), coalesce(floor(extract(epoch FROM "
         "clock_timestamp() - min(created_at)) * 1000), 0)::bigint "
         "FROM kh_outbox WHERE sent_at IS NULL",
         0},
    /* GET /v1/search (sql/0005_search_index.sql): each approved
     * document's best chunk, ranked; $1 the query, $2 the limit, $3 the
     * first word of the query, around which the snippet is cut.  The
     * final ORDER BY names hits' columns: a bare document_id would be the
     * text output column, putting "10" before "9" among equal ranks. */
    [RV_QUERY_SEARCH] =
        {"search",
         "WITH q AS (SELECT kh_search_query($1) AS tsq), "
         "hits AS (SELECT DISTINCT ON (c.document_id) c.document_id, "
         "d.title, c.chunk_index, c.content, ts_rank_cd(c.tsv, q.tsq) AS rank "
         "FROM q, kh_chunk c JOIN kh_document d ON d.id = c.document_id "
         "WHERE c.tsv @@ q.tsq AND d.status = 'approved' "
         "AND c.document_version = d.version "
         "ORDER BY c.document_id, rank DESC, c.chunk_index) "
         "SELECT document_id::text, title, chunk_index, "
         "substr(content, greatest(1, strpos(lower(content), lower($3)) - "
         "60), "
         "200), round(rank::numeric, 6)::text FROM hits "
         "ORDER BY hits.rank DESC, hits.document_id LIMIT $2::integer",
         3},
    /* Lists for the console (GET /v1/documents, .../{id}/reviews): the
     * author's walks kh_document_author_id (sql/0006), a document's
     * reviews the (document_id, id) unique index. */
    [RV_QUERY_DOC_LIST] = {"doc_list",
                           "SELECT " DOC_COLS
                           " FROM kh_document d WHERE d.id > $1::bigint "
                           "ORDER BY d.id LIMIT $2::integer",
                           2},
    [RV_QUERY_DOC_LIST_AUTHOR] =
        {"doc_list_author",
         "SELECT " DOC_COLS " FROM kh_document d WHERE d.author = $3 "
         "AND d.id > $1::bigint ORDER BY d.id LIMIT $2::integer",
         3},
    [RV_QUERY_REVIEW_LIST_DOCUMENT] =
        {"review_list_document",
         "SELECT " REVIEW_COLS " FROM kh_document_review r "
         "WHERE r.document_id = $3::bigint AND r.id > $1::bigint "
         "ORDER BY r.id LIMIT $2::integer",
         3},
};

void rv_query_format_ms(const char *ms_text, char out[64])
{
    const long long ms = atoll(ms_text);
    const time_t secs = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    struct tm tm;

    if (ms_text[0] == '\0' || gmtime_r(&secs, &tm) == NULL) {
        out[0] = '\0';
        return;
    }
    snprintf(out, 64, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int)(ms - (long long)secs * 1000));
}

static const char *nullable(PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* The status columns' values, indexed by their enum (0: unknown). */
static const char *const doc_states[] = {
    [RV_DOC_DRAFT] = "draft",
    [RV_DOC_PENDING_REVIEW] = "pending_review",
    [RV_DOC_APPROVED] = "approved",
    [RV_DOC_REJECTED] = "rejected",
};
static const char *const review_states[] = {
    [RV_REVIEW_PENDING] = "pending",
    [RV_REVIEW_APPROVED] = "approved",
    [RV_REVIEW_REJECTED] = "rejected",
};

/* The index of s in names[1..n-1], or 0 (unknown). */
static int state_of(const char *s, const char *const *names, size_t n)
{
    size_t i;

    for (i = 1; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return (int)i;
    return 0;
}

/* The number of columns REVIEW_COLS lists: a review-and-document row's
 * document starts there. */
#define REVIEW_NCOLS 10

/* Maps row i of res, DOC_COLS from column k on, into d; d->res is res. */
static void doc_at_col(PGresult *res, int i, int k, rv_doc *d)
{
    d->res = res;
    d->id = PQgetvalue(res, i, k);
    d->title = PQgetvalue(res, i, k + 1);
    d->status = PQgetvalue(res, i, k + 2);
    d->state = (rv_doc_state)state_of(d->status, doc_states,
                                      COUNT_OF(doc_states));
    d->author = PQgetvalue(res, i, k + 3);
    d->version = atoi(PQgetvalue(res, i, k + 4));
    d->preview = PQgetvalue(res, i, k + 5);
    d->current_review_id = nullable(res, i, k + 6);
    rv_query_format_ms(PQgetvalue(res, i, k + 7), d->created_at);
    rv_query_format_ms(PQgetvalue(res, i, k + 8), d->updated_at);
}

void rv_query_doc_at(PGresult *res, int i, rv_doc *d)
{
    doc_at_col(res, i, 0, d);
}

void rv_query_review_at(PGresult *res, int i, rv_review *r)
{
    r->res = res;
    r->row = i;
    r->id = PQgetvalue(res, i, 0);
    r->document_id = PQgetvalue(res, i, 1);
    r->document_version = atoi(PQgetvalue(res, i, 2));
    r->status = PQgetvalue(res, i, 3);
    r->state = (rv_review_state)state_of(r->status, review_states,
                                         COUNT_OF(review_states));
    r->submitted_by = PQgetvalue(res, i, 4);
    r->reviewer = nullable(res, i, 5);
    r->comment = nullable(res, i, 6);
    r->fence = nullable(res, i, 7);
    rv_query_format_ms(PQgetvalue(res, i, 8), r->created_at);
    rv_query_format_ms(PQgetisnull(res, i, 9) ? "" : PQgetvalue(res, i, 9),
                       r->decided_at);
}

void rv_query_doc_clear(rv_doc *d)
{
    PQclear(d->res);
    d->res = NULL;
}

void rv_query_review_clear(rv_review *r)
{
    PQclear(r->res);
    r->res = NULL;
}

/* Runs stmt and keeps its first row in *res (NULL when there is none):
 * a missing row is RV_DB_OK with *found 0 when found is given, and
 * RV_DB_ERROR when the caller was certain of a row (found NULL). */
static rv_db_status exec_one(rv_db_conn *c, int stmt,
                             const char *const *params, PGresult **res,
                             int *found)
{
    const rv_db_status rc = rv_db_conn_exec(c, stmt, params, res);

    if (found != NULL)
        *found = 0;
    if (rc != RV_DB_OK)
        return rc;
    if (PQntuples(*res) == 0) {
        PQclear(*res);
        *res = NULL;
        return found != NULL ? RV_DB_OK : RV_DB_ERROR;
    }
    if (found != NULL)
        *found = 1;
    return RV_DB_OK;
}

/* Runs stmt and maps one document row; *found says whether there was
 * one (found may be NULL when a row is certain). */
static rv_db_status doc_one(rv_db_conn *c, int stmt, const char *const *params,
                            rv_doc *out, int *found)
{
    PGresult *res = NULL;
    const rv_db_status rc = exec_one(c, stmt, params, &res, found);

    out->res = NULL;
    if (res != NULL)
        rv_query_doc_at(res, 0, out);
    return rc;
}

static rv_db_status review_one(rv_db_conn *c, int stmt,
                               const char *const *params, rv_review *out,
                               int *found)
{
    PGresult *res = NULL;
    const rv_db_status rc = exec_one(c, stmt, params, &res, found);

    out->res = NULL;
    if (res != NULL)
        rv_query_review_at(res, 0, out);
    return rc;
}

/* Runs stmt and maps one review-and-document row: r owns the result, d
 * borrows it (d->res NULL). */
static rv_db_status review_doc_one(rv_db_conn *c, int stmt,
                                   const char *const *params, rv_review *r,
                                   rv_doc *d, int *found)
{
    PGresult *res = NULL;
    const rv_db_status rc = exec_one(c, stmt, params, &res, found);

    r->res = NULL;
    d->res = NULL;
    if (res != NULL) {
        rv_query_review_at(res, 0, r);
        doc_at_col(res, 0, REVIEW_NCOLS, d);
        d->res = NULL;
    }
    return rc;
}

rv_db_status rv_query_doc_get(rv_db_conn *c, const char *id, int lock,
                              rv_doc *out, int *found)
{
    const char *params[] = {id};

    return doc_one(c, lock ? RV_QUERY_DOC_LOCK : RV_QUERY_DOC_GET, params, out,
                   found);
}

rv_db_status rv_query_doc_insert(rv_db_conn *c, const char *title,
                                 const char *author, const char *content,
                                 rv_doc *out)
{
    const char *params[] = {title, author, content};

    return doc_one(c, RV_QUERY_DOC_INSERT, params, out, NULL);
}

rv_db_status rv_query_doc_update(rv_db_conn *c, const char *id,
                                 const char *title, const char *content,
                                 rv_doc *out)
{
    const char *params[] = {id, title, content};

    return doc_one(c, RV_QUERY_DOC_UPDATE, params, out, NULL);
}

rv_db_status rv_query_content_put(rv_db_conn *c, const char *doc_id,
                                  const char *content)
{
    const char *params[] = {doc_id, content};

    return rv_db_conn_exec_later(c, RV_QUERY_CONTENT_PUT, params);
}

rv_db_status rv_query_content_get(rv_db_conn *c, const char *doc_id,
                                  PGresult **out, int *found)
{
    const char *params[] = {doc_id};
    const rv_db_status rc = rv_db_conn_exec(c, RV_QUERY_CONTENT_GET, params,
                                            out);

    *found = rc == RV_DB_OK && PQntuples(*out) > 0;
    return rc;
}

rv_db_status rv_query_review_get(rv_db_conn *c, const char *id, rv_review *out,
                                 int *found)
{
    const char *params[] = {id};

    return review_one(c, RV_QUERY_REVIEW_GET, params, out, found);
}

rv_db_status rv_query_review_doc_get(rv_db_conn *c, const char *id, int lock,
                                     rv_review *r, rv_doc *d, int *found)
{
    const char *params[] = {id};

    return review_doc_one(c,
                          lock ? RV_QUERY_REVIEW_DOC_LOCK
                               : RV_QUERY_REVIEW_DOC_GET,
                          params, r, d, found);
}

rv_db_status rv_query_review_submit(rv_db_conn *c, const char *doc_id,
                                    const char *author, rv_review *r,
                                    rv_doc *d, int *found)
{
    const char *params[] = {doc_id, author};

    return review_doc_one(c, RV_QUERY_REVIEW_SUBMIT, params, r, d, found);
}

rv_db_status rv_query_review_decide(rv_db_conn *c, const char *id,
                                    const char *status, const char *reviewer,
                                    const char *comment, const char *fence,
                                    rv_review *r, rv_doc *d, int *found)
{
    const char *params[] = {id, status, reviewer, comment, fence};

    return review_doc_one(c, RV_QUERY_REVIEW_DECIDE, params, r, d, found);
}

/* A list statement whose parameters are after, limit and one more
 * ($3, when extra is not NULL). */
static rv_db_status list_exec(rv_db_conn *c, int stmt, const char *after,
                              int limit, const char *extra, PGresult **out)
{
    char lim[16];
    const char *params[] = {after, lim, extra};

    snprintf(lim, sizeof(lim), "%d", limit);
    return rv_db_conn_exec(c, stmt, params, out);
}

rv_db_status rv_query_review_list(rv_db_conn *c, const char *status,
                                  const char *after, int limit, PGresult **out)
{
    return list_exec(c,
                     status != NULL ? RV_QUERY_REVIEW_LIST_STATUS
                                    : RV_QUERY_REVIEW_LIST,
                     after, limit, status, out);
}

rv_db_status rv_query_review_list_of_document(rv_db_conn *c,
                                              const char *doc_id,
                                              const char *after, int limit,
                                              PGresult **out)
{
    return list_exec(c, RV_QUERY_REVIEW_LIST_DOCUMENT, after, limit, doc_id,
                     out);
}

rv_db_status rv_query_doc_list(rv_db_conn *c, const char *author,
                               const char *after, int limit, PGresult **out)
{
    return list_exec(c,
                     author != NULL ? RV_QUERY_DOC_LIST_AUTHOR
                                    : RV_QUERY_DOC_LIST,
                     after, limit, author, out);
}

rv_db_status rv_query_outbox_insert(rv_db_conn *c, const char *type,
                                    const char *doc_id, const char *review_id,
                                    int version, const char *actor,
                                    const char *occurred_at)
{
    char v[16];
    const char *params[] = {type, doc_id, review_id, v, actor, occurred_at};

    snprintf(v, sizeof(v), "%d", version);
    return rv_db_conn_exec_later(c, RV_QUERY_OUTBOX_INSERT, params);
}
