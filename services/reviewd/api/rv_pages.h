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

/*
 * Reads limit, after and the filter (NULL: the endpoint has none) from
 * req's query.  Returns 0, or -1 with 400 INVALID_ARGUMENT set on reply
 * for an unknown, repeated or bad parameter.
 */
int rv_page_args_read(const rv_request *req, const rv_page_filter *filter,
                      rv_page_args *a, rv_reply *reply);

/* Turns row i of a list result into its JSON view (a new reference). */
typedef json_t *(*rv_page_row_fn)(PGresult *res, int i);

/*
 * The end of a list's work function: when st is RV_DB_OK, replies 200
 * with {"items": [...], "next": id|null} from res, which holds up to
 * limit + 1 rows whose first column is the id (an allocation failure
 * becomes 500).  Frees res either way and returns st (for rv_tx_read).
 */
rv_db_status rv_page_reply(rv_db_status st, PGresult *res, int limit,
                           rv_page_row_fn row, rv_reply *reply);

#endif
