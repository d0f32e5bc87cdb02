/*
 * rv_load.h: the opening every work function shares: the row the path
 * names, or 404.
 *
 * A handler's work function (run by rv_tx_run or rv_tx_read) first reads
 * the document or review whose id is in the path, optionally FOR UPDATE,
 * and answers 404 NOT_FOUND when there is none.  One helper per row type
 * keeps that answer the same everywhere.
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

/* The same for the review named by the path's id. */
int rv_load_review(const rv_request *req, rv_db_conn *c, int lock,
                   char id[RV_LOAD_ID_LEN], rv_review *r, rv_reply *reply,
                   rv_db_status *st);

#endif /* RV_LOAD_H */
