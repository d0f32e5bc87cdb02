/*
 * rv_query.h: every SQL statement reviewd runs, and the rows they return.
 *
 * The statements live in one table (rv_query_stmts) that each
 * connection prepares, so the SQL is in one place, reviewable next to the
 * schema in sql/, and the benchmark's pgbench scripts can run exactly the
 * same text.  Rows keep their PGresult and point into it (no copies); the
 * caller clears them with rv_query_doc_clear / rv_query_review_clear.
 * Ids come as text, which is what the API sends; timestamps come as milliseconds since
 * the epoch and are formatted here as RFC 3339 UTC with milliseconds (the
 * SQL holds no format string, whose colons pgbench would take for
 * variables).
 *
 * Each function returns an rv_db_status; RV_DB_OK with found == 0 means
 * "no such row".  Threads: as rv_db_conn (one thread per connection).
 */
#ifndef RV_QUERY_H
#define RV_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "db/rv_db.h"

/* Indexes into rv_query_stmts. */
enum rv_stmt {
    RV_QUERY_DOC_GET = 0,
    RV_QUERY_DOC_LOCK,
    RV_QUERY_DOC_INSERT,
    RV_QUERY_DOC_UPDATE,
    RV_QUERY_CONTENT_PUT,
    RV_QUERY_CONTENT_GET,
    RV_QUERY_REVIEW_GET,
    RV_QUERY_REVIEW_DOC_GET,
    RV_QUERY_REVIEW_DOC_LOCK,
    RV_QUERY_REVIEW_SUBMIT,
    RV_QUERY_REVIEW_DECIDE,
    RV_QUERY_REVIEW_LIST,
    RV_QUERY_REVIEW_LIST_STATUS,
    RV_QUERY_IDEM_FIND,
    RV_QUERY_IDEM_TRY_LOCK,
    RV_QUERY_IDEM_STORE,
    RV_QUERY_IDEM_SWEEP,
    RV_QUERY_OUTBOX_INSERT,
    RV_QUERY_OUTBOX_TRY_LOCK,
    RV_QUERY_OUTBOX_CLAIM,
    RV_QUERY_OUTBOX_MARK_SENT,
    RV_QUERY_OUTBOX_PRUNE,
    RV_QUERY_OUTBOX_BACKLOG,
    RV_QUERY_SEARCH,
    RV_QUERY_DOC_LIST,
    RV_QUERY_DOC_LIST_AUTHOR,
    RV_QUERY_REVIEW_LIST_DOCUMENT,
    RV_QUERY_COUNT
};

extern const rv_stmt_def rv_query_stmts[RV_QUERY_COUNT];

/* A document's status column, parsed once when the row is read, so
 * handlers compare states, not strings.  RV_DOC_UNKNOWN is a value the
 * schema's CHECK constraint would not let in; no transition accepts it. */
typedef enum rv_doc_state {
    RV_DOC_UNKNOWN = 0,
    RV_DOC_DRAFT,
    RV_DOC_PENDING_REVIEW,
    RV_DOC_APPROVED,
    RV_DOC_REJECTED
} rv_doc_state;

/* A review's status column, as rv_doc_state is the document's. */
typedef enum rv_review_state {
    RV_REVIEW_UNKNOWN = 0,
    RV_REVIEW_PENDING,
    RV_REVIEW_APPROVED,
    RV_REVIEW_REJECTED
} rv_review_state;

/* A document row.  Strings borrow from res; current_review_id is NULL for
 * SQL NULL.  status is the column's text (for the JSON view), state the
 * same value parsed. */
typedef struct rv_doc {
    PGresult *res;
    const char *id;
    const char *title;
    const char *status;
    rv_doc_state state;
    const char *author;
    int version;
    const char *preview;
    const char *current_review_id;
    char created_at[64];
    char updated_at[64];
} rv_doc;

/* A review row; reviewer, comment and fence may be NULL, and decided_at
 * is "" until the review is decided. */
typedef struct rv_review {
    PGresult *res;
    int row;
    const char *id;
    const char *document_id;
    int document_version;
    const char *status;
    rv_review_state state;
    const char *submitted_by;
    const char *reviewer;
    const char *comment;
    const char *fence;
    char created_at[64];
    char decided_at[64];
} rv_review;

/* Formats milliseconds since the epoch as "2026-12-02T10:00:00.123Z". */
void rv_query_format_ms(const char *ms_text, char out[64]);

void rv_query_doc_clear(rv_doc *d);
void rv_query_review_clear(rv_review *r);

/* GET by id; lock = 1 adds FOR UPDATE (inside a transaction). */
rv_db_status rv_query_doc_get(rv_db_conn *c, const char *id, int lock,
                              rv_doc *out, int *found);
/* Inserts a draft by author; preview is left(content, 200) in SQL. */
rv_db_status rv_query_doc_insert(rv_db_conn *c, const char *title,
                                 const char *author, const char *content,
                                 rv_doc *out);
/* Sets title and/or content's preview (NULL: unchanged), bumps version. */
rv_db_status rv_query_doc_update(rv_db_conn *c, const char *id,
                                 const char *title, const char *content,
                                 rv_doc *out);
/* The PostgreSQL content store: upsert and read one document's text.
 * The upsert is queued (rv_db_conn_exec_later: sent with the next
 * statement or the COMMIT); rv_query_content_get returns the result, the
 * text is row 0, column 0. */
rv_db_status rv_query_content_put(rv_db_conn *c, const char *doc_id,
                                  const char *content);
rv_db_status rv_query_content_get(rv_db_conn *c, const char *doc_id,
                                  PGresult **out, int *found);

rv_db_status rv_query_review_get(rv_db_conn *c, const char *id, rv_review *out,
                                 int *found);

/*
 * The functions below return a review and its document from one row, in
 * one round trip: r owns the result and d borrows from it (d->res is
 * NULL, so rv_query_doc_clear(d) frees nothing): clear r after the last
 * use of d.
 */

/* Review id and its document, FOR UPDATE when lock (review first, then
 * document); *found 0 when there is no such review. */
rv_db_status rv_query_review_doc_get(rv_db_conn *c, const char *id, int lock,
                                     rv_review *r, rv_doc *d, int *found);
/* Submit in one statement: if document doc_id is author's and a draft
 * or rejected (checked on the row locked FOR UPDATE), a new pending
 * review of its version by author, and the document moved to
 * pending_review naming it; else *found 0 and nothing written (the
 * caller reads the row to say why). */
rv_db_status rv_query_review_submit(rv_db_conn *c, const char *doc_id,
                                    const char *author, rv_review *r,
                                    rv_doc *d, int *found);
/* Decides review id (status: "approved" or "rejected") and sets its
 * document's status to the same, in one statement, if the review is
 * pending, its document pending_review on it and reviewer neither
 * submitted the review nor wrote the document (checked on both rows
 * locked, review first); else *found 0 and nothing written (the caller
 * reads the rows to say why).  fence NULL: degraded, no fence. */
rv_db_status rv_query_review_decide(rv_db_conn *c, const char *id,
                                    const char *status, const char *reviewer,
                                    const char *comment, const char *fence,
                                    rv_review *r, rv_doc *d, int *found);
/* Reviews with id > after (status NULL: any), ordered by id, at most
 * limit rows; *out holds them all (read with rv_query_review_at). */
rv_db_status rv_query_review_list(rv_db_conn *c, const char *status,
                                  const char *after, int limit,
                                  PGresult **out);
/* Points r at row i of a list result (r does not own res). */
void rv_query_review_at(PGresult *res, int i, rv_review *r);
/* The reviews of document doc_id with id > after, ordered by id (its
 * history, oldest first), at most limit rows; read with
 * rv_query_review_at. */
rv_db_status rv_query_review_list_of_document(rv_db_conn *c,
                                              const char *doc_id,
                                              const char *after, int limit,
                                              PGresult **out);
/* Documents with id > after (author NULL: anyone's), ordered by id, at
 * most limit rows; *out holds them all (read with rv_query_doc_at). */
rv_db_status rv_query_doc_list(rv_db_conn *c, const char *author,
                               const char *after, int limit, PGresult **out);
/* Points d at row i of a list result (d does not own res: never
 * rv_doc_clear it). */
void rv_query_doc_at(PGresult *res, int i, rv_doc *d);

/*
 * Inserts the outbox row of one state change (sql/0004_outbox.sql) in the
 * caller's transaction.  type is the routing key (document.submitted,
 * .approved, .rejected); occurred_at the change's RFC 3339 time.  The
 * event id is a random UUID made by PostgreSQL (gen_random_uuid), and the
 * payload is API.md's event body.  Queued like the content upsert
 * (rv_db_conn_exec_later): it costs no round trip of its own, and its
 * failure comes back from the next statement or the COMMIT.
 */
rv_db_status rv_query_outbox_insert(rv_db_conn *c, const char *type,
                                    const char *doc_id, const char *review_id,
                                    int version, const char *actor,
                                    const char *occurred_at);

#endif /* RV_QUERY_H */
