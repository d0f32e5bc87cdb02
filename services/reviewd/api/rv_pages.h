/*
 * rv_pages.h: keyset pagination, shared by the list endpoints
 * (GET /v1/reviews, GET /v1/documents, GET /v1/documents/{id}/reviews).
 *
 * A page is "rows with id > after, ordered by id, at most limit": it
 * stays fast and stable while rows are added, unlike OFFSET.  The query
 * asks for limit + 1 rows; when the extra row exists more may follow and
 * "next" is the last shown id, otherwise "next" is null.  Each endpoint
 * may take one filter parameter of its own (status=, author=).
 *
 * Threads: no state; everything works on the caller's request.
 */
#ifndef RV_PAGES_H
#define RV_PAGES_H

#include <jansson.h>
#include <libpq-fe.h>

#include "api/rv_request.h"
#include "db/rv_db.h"

#define RV_PAGE_DEFAULT 50
#define RV_PAGE_MAX 200

typedef struct rv_page_args {
    char after[24];     /* canonical decimal id, "0" when absent */
    int limit;          /* 1..RV_PAGE_MAX */
    const char *filter; /* the filter's value (borrowed from req), or NULL */
} rv_page_args;

/* An endpoint's filter parameter: its name, a check of its value (1:
 * good) and the 400 detail when the check fails. */
typedef struct rv_page_filter {
    const char *name;
    int (*valid)(const char *value);
    const char *detail;
} rv_page_filter;

/* Turns row i of a list result into its JSON view (a new reference). */
typedef json_t *(*rv_page_row_fn)(PGresult *res, int i);

/* An endpoint's query: rows with id > after whose filter column is
 * filter (NULL: any), ordered by id, at most limit (rv_query.h). */
typedef rv_db_status (*rv_page_query_fn)(rv_db_conn *c, const char *filter,
                                         const char *after, int limit,
                                         PGresult **out);

/* What a list endpoint is: its filter parameter (NULL: none), its query
 * and its rows' view. */
typedef struct rv_page_list {
    const rv_page_filter *filter;
    rv_page_query_fn query;
    rv_page_row_fn row;
} rv_page_list;

/* One request's page of a list. */
typedef struct rv_page {
    const rv_page_list *list;
    rv_page_args args;
} rv_page;

/*
 * The opening of a list handler: reads limit, after and the list's
 * filter from req's query into page.  Returns 0, or -1 with 400
 * INVALID_ARGUMENT set on reply for an unknown, repeated or bad
 * parameter.
 */
int rv_page_open(const rv_request *req, const rv_page_list *list,
                 rv_page *page, rv_reply *reply);

/*
 * The end of a list's work: runs the list's query for the page with
 * filter (NULL: the query string's) and on success replies 200 with
 * {"items": [...], "next": id|null} (an allocation failure becomes
 * 500).  Returns the query's status (for rv_tx_read).
 */
rv_db_status rv_page_fetch(const rv_page *page, rv_db_conn *c,
                           const char *filter, rv_reply *reply);

/* The whole work of a list with nothing to check first, in the shape of
 * rv_tx_read's work function: arg is an rv_page. */
rv_db_status rv_page_work(rv_request *req, rv_db_conn *c, void *arg,
                          rv_reply *reply);

#endif
