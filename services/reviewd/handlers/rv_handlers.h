/*
 * rv_handlers.h: the API's handlers, one rv_handle_* per operation.
 *
 * One function per operation of API.md.  Each receives a request that the
 * dispatcher has already routed, authenticated (except the health
 * endpoints) and given a well-formed id, and sets exactly one reply.
 * Handlers live in three files by what they touch: rv_documents.c
 * (create, read, edit), rv_reviews.c (read reviews) and rv_lifecycle.c
 * (submit, approve, reject: the locked state transitions); rv_health.c
 * serves /healthz, /readyz and /metrics, and rv_search.c /v1/search.
 *
 * Threads: a handler runs on the request's worker thread.
 */
#ifndef RV_HANDLERS_H
#define RV_HANDLERS_H

#include <jansson.h>

#include "api/rv_request.h"

void rv_handle_document_create(rv_request *req, rv_reply *reply);
void rv_handle_document_get(rv_request *req, rv_reply *reply);
void rv_handle_document_update(rv_request *req, rv_reply *reply);
void rv_handle_document_submit(rv_request *req, rv_reply *reply);
void rv_handle_review_list(rv_request *req, rv_reply *reply);
void rv_handle_review_get(rv_request *req, rv_reply *reply);
void rv_handle_review_approve(rv_request *req, rv_reply *reply);
void rv_handle_review_reject(rv_request *req, rv_reply *reply);
void rv_handle_healthz(rv_request *req, rv_reply *reply);
void rv_handle_readyz(rv_request *req, rv_reply *reply);
void rv_handle_metrics(rv_request *req, rv_reply *reply);
void rv_handle_search(rv_request *req, rv_reply *reply);

#endif /* RV_HANDLERS_H */
