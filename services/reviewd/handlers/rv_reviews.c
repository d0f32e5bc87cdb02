/*
 * rv_reviews.c: reading reviews: one, a page of all of them (the
 * reviewers' queue, GET /v1/reviews) or a page of one document's (its
 * history, GET /v1/documents/{id}/reviews).  Pages are keyset pages
 * (api/rv_pages.h).  A document's history is open to every role, like
 * the document and its reviews one by one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handlers/rv_handlers.h"
#include "handlers/rv_load.h"
#include "api/rv_pages.h"
#include "db/rv_query.h"
#include "tx/rv_tx.h"
#include "api/rv_views.h"

static int status_valid(const char *v)
{
    return strcmp(v, "pending") == 0 || strcmp(v, "approved") == 0
           || strcmp(v, "rejected") == 0;
}

static const rv_page_filter status_filter = {
    "status", status_valid, "status must be pending, approved or rejected"};

static json_t *review_row(PGresult *res, int i)
{
    rv_review r;

    rv_query_review_at(res, i, &r);
    return rv_view_review(&r);
}

static const rv_page_list review_pages = {&status_filter, rv_query_review_list,
                                          review_row};
/* A document's history: the document's id is the filter. */
static const rv_page_list document_review_pages = {
    NULL, rv_query_review_list_of_document, review_row};

void rv_handle_review_list(rv_request *req, rv_reply *reply)
{
    rv_page page;

    if (!rv_request_require_role(req, RV_ROLE_REVIEWER | RV_ROLE_ADMIN, reply))
        return;
    if (rv_page_open(req, &review_pages, &page, reply) == 0)
        rv_tx_read(req, rv_page_work, &page, reply);
}

static rv_db_status get_work(rv_request *req, rv_db_conn *c, void *arg,
                             rv_reply *reply)
{
    char id[RV_LOAD_ID_LEN];
    rv_review r;
    rv_db_status st;

    (void)arg;
    if (rv_load_review(req, c, id, &r, reply, &st)) {
        rv_reply_json(reply, 200, rv_view_review(&r));
        rv_query_review_clear(&r);
    }
    return st;
}

void rv_handle_review_get(rv_request *req, rv_reply *reply)
{
    rv_tx_read(req, get_work, NULL, reply);
}

/* A document's reviews: 404 when the document does not exist, so an
 * empty page always means "never submitted". */
static rv_db_status document_reviews_work(rv_request *req, rv_db_conn *c,
                                          void *arg, rv_reply *reply)
{
    char id[RV_LOAD_ID_LEN];
    rv_doc d;
    rv_db_status st;

    if (!rv_load_document(req, c, 0, id, &d, reply, &st))
        return st;
    rv_query_doc_clear(&d);
    return rv_page_fetch(arg, c, id, reply);
}

void rv_handle_document_reviews(rv_request *req, rv_reply *reply)
{
    rv_page page;

    if (rv_page_open(req, &document_review_pages, &page, reply) == 0)
        rv_tx_read(req, document_reviews_work, &page, reply);
}
