/*
 * rv_content.h: where document text lives (CONTENT_STORE), behind one
 * store object chosen at start-up.
 *
 * pg (the default): kh_document_content, one row per document, written on
 * the request's own connection inside its transaction, so a document and
 * its text commit together; the version is not needed.
 *
 * mongo (svc_content_mongo.h): one immutable record per (document id,
 * version).  PostgreSQL's kh_document row is the pointer: its committed
 * (id, version) names the one record that holds its text, and a reader
 * fetches exactly that record.  A create or edit runs, inside the
 * request's PostgreSQL transaction:
 *   1. INSERT the row, or lock it FOR UPDATE and bump its version, with
 *      RETURNING id, version = v (not committed yet);
 *   2. put the record (id, v) in MongoDB and wait for the acknowledgement
 *      (an edit of the title alone copies record (id, v-1) to (id, v));
 *   3. COMMIT.
 * What each failure leads to:
 *   - MongoDB unreachable, or it refuses the write, at 2: the transaction
 *     rolls back, so the row, its version and its preview are unchanged;
 *     the client gets 503 CONTENT_UNAVAILABLE (or 500 CONTENT_STORE_ERROR)
 *     and the log says content_store_unavailable / content_store_error;
 *     /metrics counts every outcome and /readyz shows the last one.
 *     The write may still have landed (a lost acknowledgement): then the
 *     record is an orphan, as below.
 *   - PostgreSQL fails at 1 or 3, or reviewd dies between 2 and 3: record
 *     (id, v) is an orphan that no committed row points at.  It is
 *     harmless: a new document's id comes from an identity sequence and is
 *     never handed out again, and the next edit of an existing document
 *     writes (id, v) afresh under the row lock, replacing the orphan,
 *     before its commit makes it visible.  Orphans are the records whose
 *     document has no row, or whose version is above the row's; they are
 *     listed by `reviewd content-orphans` (rv_content_orphans.h) and not
 *     swept yet.
 *   - A committed row whose record is missing or malformed (someone
 *     deleted it, or a store was restored from an older backup): GET
 *     ?include=content answers 500 CONTENT_MISSING naming (id, version),
 *     never an empty text, and logs content_missing.
 *   - MongoDB unreachable on a read: 503 CONTENT_UNAVAILABLE; reads
 *     without ?include=content (and submit, approve, reject, which never
 *     touch the text) keep working from PostgreSQL alone.
 * The preview (first 200 characters) is cut by PostgreSQL from the text
 * the request carries (rv_query.c), so it is the same with either store.
 *
 * Threads: the store is thread-safe (the MongoDB one shares a client
 * pool); the rv_db_conn passed in belongs to the calling request.
 */
#ifndef RV_CONTENT_H
#define RV_CONTENT_H

#include <stddef.h>
#include <stdint.h>

#include "core/rv_config.h"
#include "svc_bulkhead.h"
#include "db/rv_db.h"
#include "api/rv_request.h"

typedef struct rv_content rv_content;

/* Builds the store cfg->content_store names; NULL with the reason in err.
 * The MongoDB store is pinged once and an unreachable server is logged,
 * not refused: requests that need it fail with 503 until it answers. */
rv_content *rv_content_new(const rv_config *cfg, svc_log *log, char *err,
                           size_t errlen);
void rv_content_free(rv_content *s);

/* "pg" or "mongo". */
const char *rv_content_name(const rv_content *s);

/* What the MongoDB store has done since start-up (zeros for pg). */
typedef struct rv_content_stats {
    uint64_t ok;          /* records written or read */
    uint64_t missing;     /* reads that found no record: CONTENT_MISSING */
    uint64_t unavailable; /* calls that could not reach the server */
    uint64_t errors;      /* calls the server refused, malformed records */
    svc_bulkhead_stats bulkhead; /* its breaker and cap (zeros for pg) */
} rv_content_stats;

void rv_content_stats_get(const rv_content *s, rv_content_stats *out);

/*
 * The store's state for /readyz, never waiting on a server: pg follows
 * pg_up; mongo is "ok" when its last call (or the start-up ping) reached
 * the server, "down" when it could not, so it recovers with the next
 * request that needs the text.
 */
const char *rv_content_state(const rv_content *s, int pg_up);

/*
 * Stores content as the text of version `version` of doc_id.  On a
 * content-store failure the reply is set and RV_DB_ABORTED is returned,
 * so the caller's transaction rolls back; a PostgreSQL failure returns
 * its status for rv_tx to report.
 */
rv_db_status rv_content_put(rv_request *req, rv_db_conn *c, const char *doc_id,
                            int version, const char *content, rv_reply *reply);

/* An edit that left the text alone: version `to` gets the text of version
 * `from` (nothing to do in PostgreSQL, where the row has no version). */
rv_db_status rv_content_carry(rv_request *req, rv_db_conn *c,
                              const char *doc_id, int from, int to,
                              rv_reply *reply);

/*
 * Reads the text of version `version` of doc_id into *text (malloc'd, the
 * caller frees it; "" when a PostgreSQL document has none).  Failures as
 * for rv_content_put; a missing MongoDB record is 500 CONTENT_MISSING.
 */
rv_db_status rv_content_get(rv_request *req, rv_db_conn *c, const char *doc_id,
                            int version, char **text, rv_reply *reply);

#endif /* RV_CONTENT_H */
