/*
 * rv_load.h: the opening every work function shares: the row the path
 * names, or 404, and who may change it, or 403.
 *
 * A handler's work function (run by rv_tx_run or rv_tx_read) first reads
 * the document or review whose id is in the path, optionally FOR UPDATE,
 * and answers 404 NOT_FOUND when there is none.  One helper per row type
 * keeps that answer the same everywhere.
 *
 * Who may act is checked twice (API.md, the order of the checks): once
 * from a plain read before any lock, Redis or row, so that a caller who
 * may not act is refused with 403 and never holds a lock the rightful
 * caller needs; and again on the row-locked read inside the transaction,
 * which is the last word.  The same helper answers both times, so the two
 * checks cannot drift apart.
 *
 *   if (!rv_load_document(req, c, 1, id, &d, reply, &st)) {
 *       return st;
 *   }
 *
 * Ownership: on success the row is the caller's (rv_query_doc_clear /
 * rv_query_review_clear).  Threads: the request's worker thread.
 */
#ifndef RV_LOAD_H
#define RV_LOAD_H

#include "api/rv_request.h"
#include "db/rv_db.h"
#include "db/rv_query.h"

/* The size of the id text the loaders write (a decimal int64). */
#define RV_LOAD_ID_LEN 24

/*
 * Reads the document named by the path's id into *d (FOR UPDATE when
 * lock) and its id text into id.  Returns 1 when the row is there
 * (*st RV_DB_OK).  Returns 0 otherwise, with *st what the work function
 * must return: RV_DB_OK with 404 NOT_FOUND set on reply (committed like
 * any reply, so an Idempotency-Key replays it), or the database's
 * failure.
 */
int rv_load_document(const rv_request *req, rv_db_conn *c, int lock,
                     char id[RV_LOAD_ID_LEN], rv_doc *d, rv_reply *reply,
                     rv_db_status *st);

/* The same for the review named by the path's id (never locked). */
int rv_load_review(const rv_request *req, rv_db_conn *c,
                   char id[RV_LOAD_ID_LEN], rv_review *r, rv_reply *reply,
                   rv_db_status *st);

/*
 * rv_load_document, and then only its author may go on: when the caller
 * is not the author, 403 FORBIDDEN ("only the document's author may
 * <verb> it") is set, the row is cleared and 0 is returned with *st
 * RV_DB_OK.  Edit and submit check ownership, not the role.
 */
int rv_load_own_document(const rv_request *req, rv_db_conn *c, int lock,
                         const char *verb, char id[RV_LOAD_ID_LEN], rv_doc *d,
                         rv_reply *reply, rv_db_status *st);

/*
 * The check before a lock of an operation only the author may do, as an
 * rv_tx_work for rv_tx_read: arg is the verb for the 403's detail
 * ("edit", "submit").  Sets 404 or 403 on reply, or leaves reply unset
 * when the caller is the author; returns the database status.
 */
rv_db_status rv_load_check_author(rv_request *req, rv_db_conn *c, void *verb,
                                  rv_reply *reply);

/*
 * The review named by the path's id and its document, in one statement
 * (FOR UPDATE when lock: review first, then document, rv_query.c's
 * order), or 404 as rv_load_review; then the four-eyes rule: a caller who
 * submitted the review or wrote the document gets 403 FORBIDDEN and 0,
 * with both rows cleared and *st RV_DB_OK.  On 1 both rows are the
 * caller's; d borrows r's result (rv_query_review_doc_get), so clear d,
 * then r.
 */
int rv_load_decidable(const rv_request *req, rv_db_conn *c, int lock,
                      char id[RV_LOAD_ID_LEN], rv_review *r, rv_doc *d,
                      rv_reply *reply, rv_db_status *st);

#endif /* RV_LOAD_H */
