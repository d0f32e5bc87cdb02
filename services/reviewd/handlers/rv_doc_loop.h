/*
 * rv_doc_loop.h: GET /v1/documents/{id} answered on the event loop.
 *
 * The read without ?include=content is one statement (doc_get), so the
 * event loop that read the request can send it on its own non-blocking
 * connection (db/rv_db_async.h) and build the reply when the answer
 * comes (http/rv_loop.h says why).  The reply is the one
 * rv_handle_document_get gives: 200 with the document's view, 404
 * NOT_FOUND, or, when PostgreSQL does not answer within the request's
 * budget, 503 UNAVAILABLE with the same log line (rv_tx_fail).  Whatever
 * else happens (the connection was lost or is not ready, the statement
 * failed) the request goes to the worker path, which decides as before.
 *
 * Threads: every call on the event loop's thread.  Ownership: the result
 * given to rv_doc_loop_finish is consumed.
 */
#ifndef RV_DOC_LOOP_H
#define RV_DOC_LOOP_H

#include "api/rv_request.h"
#include "db/rv_db_async.h"

/* 1 if req (its early and late checks passed) may be answered on the
 * loop: GET /v1/documents/{id} with no query and no test hook. */
int rv_doc_loop_fits(const rv_request *req);

/* Sends req's statement on a within the request's budget: 0, or -1 (run
 * it on the worker path).  q->done is the caller's. */
int rv_doc_loop_send(rv_dba *a, const rv_request *req, rv_dba_query *q);

/* Sets reply from the statement's end and returns 1, or returns 0 when
 * the worker path must answer instead (reply untouched). */
int rv_doc_loop_finish(rv_request *req, rv_dba_outcome outcome, PGresult *res,
                       rv_reply *reply);

#endif /* RV_DOC_LOOP_H */
