/*
 * rv_reviews.c: reading reviews, one or a page at a time.
 *
 * The list is keyset-paginated by id (WHERE id > after ORDER BY id LIMIT
 * n), which stays fast and stable while reviews are added, unlike OFFSET.
 * We fetch one row more than asked: if it exists, more may follow and
 * "next" is the last returned id; otherwise "next" is null.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handlers/rv_handlers.h"
#include "handlers/rv_load.h"
#include "db/rv_query.h"
#include "tx/rv_tx.h"
#include "api/rv_views.h"

#define RV_LIST_DEFAULT 50
#define RV_LIST_MAX 200

typedef struct list_args {
    const char *status; /* NULL: any */
    char after[24];
    int limit;
} list_args;

static int bad_param(rv_reply *reply, const char *detail)
{
    rv_reply_error(reply, 400, "INVALID_ARGUMENT", detail);
    return -1;
}

/* limit: canonical decimal 1..200. */
static int parse_limit(const char *v, int *out)
{
    int64_t n;

    if (rv_router_parse_id(v, strlen(v), &n) != 0 || n > RV_LIST_MAX) {
        return -1;
    }
    *out = (int)n;
    return 0;
}

static int read_param(const char *key, const char *v, list_args *a,
                      rv_reply *reply)
{
    int64_t id;

    if (strcmp(key, "status") == 0) {
        if (strcmp(v, "pending") != 0 && strcmp(v, "approved") != 0
            && strcmp(v, "rejected") != 0) {
            return bad_param(reply, "status must be pending, approved or "
                             "rejected");
        }
        a->status = v;
        return 0;
    }
    if (strcmp(key, "limit") == 0) {
        return parse_limit(v, &a->limit) == 0
                   ? 0 : bad_param(reply, "limit must be 1..200");
    }
    if (strcmp(key, "after") == 0) {
        if (rv_router_parse_id(v, strlen(v), &id) != 0) {
            return bad_param(reply, "after must be a review id");
        }
        snprintf(a->after, sizeof(a->after), "%lld", (long long)id);
        return 0;
    }
    return bad_param(reply, "unknown query parameter (status, limit, "
                     "after)");
}

static int read_params(const rv_request *req, list_args *a, rv_reply *reply)
{
    const char *key;
    json_t *value;

    a->status = NULL;
    a->limit = RV_LIST_DEFAULT;
    snprintf(a->after, sizeof(a->after), "0");
    if (req->query_dup != NULL) {
        return bad_param(reply, "a query parameter is given twice");
    }
    json_object_foreach(req->query, key, value) {
        if (read_param(key, json_string_value(value), a, reply) != 0) {
            return -1;
        }
    }
    return 0;
}

/* {"items": [...], "next": id|null} from up to limit + 1 rows. */
static json_t *page_of(PGresult *res, int limit)
{
    json_t *items = json_array();
    const int rows = PQntuples(res);
    const int shown = rows > limit ? limit : rows;
    rv_review r;
    int i;

    for (i = 0; items != NULL && i < shown; i++) {
        rv_query_review_at(res, i, &r);
        if (json_array_append_new(items, rv_view_review(&r)) != 0) {
            json_decref(items);
            items = NULL;
        }
    }
    if (items == NULL) {
        return NULL;
    }
    return json_pack("{s:o,s:s?}", "items", items, "next",
                     rows > limit ? PQgetvalue(res, shown - 1, 0) : NULL);
}

static rv_db_status list_work(rv_request *req, rv_db_conn *c, void *arg,
                              rv_reply *reply)
{
    const list_args *a = arg;
    PGresult *res = NULL;
    rv_db_status st;

    (void)req;
    st = rv_query_review_list(c, a->status, a->after, a->limit + 1, &res);
    if (st == RV_DB_OK) {
        rv_reply_json(reply, 200, page_of(res, a->limit));
        PQclear(res);
    }
    return st;
}

void rv_handle_review_list(rv_request *req, rv_reply *reply)
{
    list_args a;

    if (!rv_request_require_role(req, RV_ROLE_REVIEWER | RV_ROLE_ADMIN,
                                 reply)) {
        return;
    }
    if (read_params(req, &a, reply) == 0) {
        rv_tx_read(req, list_work, &a, reply);
    }
}

static rv_db_status get_work(rv_request *req, rv_db_conn *c, void *arg,
                             rv_reply *reply)
{
    char id[RV_LOAD_ID_LEN];
    rv_review r;
    rv_db_status st;

    (void)arg;
    if (rv_load_review(req, c, 0, id, &r, reply, &st)) {
        rv_reply_json(reply, 200, rv_view_review(&r));
        rv_query_review_clear(&r);
    }
    return st;
}

void rv_handle_review_get(rv_request *req, rv_reply *reply)
{
    rv_tx_read(req, get_work, NULL, reply);
}
