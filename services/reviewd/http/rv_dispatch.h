/*
 * rv_dispatch.h: from a routed request to its handler, with the checks
 * every endpoint shares, in the order clients see them:
 *   404 unknown path, 405 wrong method (with Allow), 413 declared body
 *   too large, 401 authentication (API endpoints only), 400 malformed id,
 *   415 a body that is not application/json, 400 a malformed
 *   Idempotency-Key, then the handler (400 body, 403 role, ...).
 * The first four need only the headers, so rv_http.c runs them before it
 * reads any body (rv_dispatch_early) and answers at once.
 *
 * Threads: called on the request's worker thread.
 */
#ifndef RV_DISPATCH_H
#define RV_DISPATCH_H

#include <stdint.h>

#include "api/rv_request.h"

/* The request body limit of API.md. */
#define RV_BODY_MAX ((size_t)1048576)

/*
 * Checks what the headers alone decide.  declared_len: Content-Length, or
 * -1 when absent (chunked).  Returns 1 with reply set when the request is
 * answered already, else 0.
 */
int rv_dispatch_early(rv_request *req, int64_t declared_len, rv_reply *reply);

/*
 * The checks that need the whole request (id, query, media type,
 * Idempotency-Key), after rv_dispatch_early passed.  Returns 1 with reply
 * set when one fails, else 0 (the handler may run).  Separate from
 * rv_dispatch so that they can be fuzzed without a database.
 */
int rv_dispatch_late(const rv_request *req, rv_reply *reply);

/* 1 when the request's handler answers from memory (/healthz, the
 * console's files): run on the event-loop thread, never handed to the
 * worker pool (rv_jobs.h), so it cannot wait behind blocked work. */
int rv_dispatch_in_memory(const rv_request *req);

/* Runs rv_dispatch_late and then the handler; reply is always set. */
void rv_dispatch(rv_request *req, rv_reply *reply);

/* 1 if a Content-Type value is application/json, parameters allowed
 * (a charset parameter, if any, must be utf-8). */
int rv_dispatch_is_json(const char *content_type);

#endif /* RV_DISPATCH_H */
