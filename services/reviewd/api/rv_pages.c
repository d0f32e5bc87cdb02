/*
 * rv_pages.c: the query parameters and the JSON shape of a keyset page
 * (rv_pages.h says why keyset).  The parameters are strict like every
 * other input of the API: an unknown or repeated one is a 400, not
 * ignored, so a misspelt filter never silently lists everything.
 */
#include "api/rv_pages.h"

#include <stdio.h>
#include <string.h>

#include "core/rv_router.h"

static int bad_param(rv_reply *reply, const char *detail)
{
    rv_reply_error(reply, 400, "INVALID_ARGUMENT", detail);
    return -1;
}

/* limit: canonical decimal 1..RV_PAGE_MAX. */
static int parse_limit(const char *v, int *out)
{
    int64_t n;

    if (rv_router_parse_id(v, strlen(v), &n) != 0 || n > RV_PAGE_MAX)
        return -1;
    *out = (int)n;
    return 0;
}

static int read_param(const char *key, const char *v,
                      const rv_page_filter *filter, rv_page_args *a,
                      rv_reply *reply)
{
    int64_t id;

    if (filter != NULL && strcmp(key, filter->name) == 0) {
        if (!filter->valid(v))
            return bad_param(reply, filter->detail);
        a->filter = v;
        return 0;
    }
    if (strcmp(key, "limit") == 0) {
        return parse_limit(v, &a->limit) == 0
                   ? 0
                   : bad_param(reply, "limit must be 1..200");
    }
    if (strcmp(key, "after") == 0) {
        if (rv_router_parse_id(v, strlen(v), &id) != 0)
            return bad_param(reply, "after must be an id");
        snprintf(a->after, sizeof(a->after), "%lld", (long long)id);
        return 0;
    }
    return bad_param(reply, filter != NULL
                                ? "unknown query parameter (limit, after "
                                  "or the endpoint's filter)"
                                : "unknown query parameter (limit, after)");
}

int rv_page_open(const rv_request *req, const rv_page_list *list,
                 rv_page *page, rv_reply *reply)
{
    const rv_page_filter *filter = list->filter;
    rv_page_args *a = &page->args;

    const char *key;
    json_t *value;

    page->list = list;
    a->filter = NULL;
    a->limit = RV_PAGE_DEFAULT;
    snprintf(a->after, sizeof(a->after), "0");
    if (req->query_dup != NULL)
        return bad_param(reply, "a query parameter is given twice");
    json_object_foreach(req->query, key, value)
    {
        if (read_param(key, json_string_value(value), filter, a, reply) != 0)
            return -1;
    }
    return 0;
}

/* {"items": [...], "next": id|null}, or NULL when out of memory. */
static json_t *page_json(PGresult *res, int limit, rv_page_row_fn row)
{
    json_t *items = json_array();
    const int rows = PQntuples(res);
    const int shown = rows > limit ? limit : rows;
    int i;

    for (i = 0; items != NULL && i < shown; i++) {
        if (json_array_append_new(items, row(res, i)) != 0) {
            json_decref(items);
            items = NULL;
        }
    }
    if (items == NULL)
        return NULL;
    return json_pack("{s:o,s:s?}", "items", items, "next",
                     rows > limit ? PQgetvalue(res, shown - 1, 0) : NULL);
}

rv_db_status rv_page_fetch(const rv_page *page, rv_db_conn *c,
                           const char *filter, rv_reply *reply)
{
    const rv_page_list *list = page->list;
    const int limit = page->args.limit;
    PGresult *res = NULL;
    /* One row more than shown: whether a next page exists. */
    const rv_db_status st = list->query(c,
                                        filter != NULL ? filter
                                                       : page->args.filter,
                                        page->args.after, limit + 1, &res);

    if (st == RV_DB_OK)
        rv_reply_json(reply, 200, page_json(res, limit, list->row));
    PQclear(res);
    return st;
}

rv_db_status rv_page_work(rv_request *req, rv_db_conn *c, void *arg,
                          rv_reply *reply)
{
    (void)req;
    return rv_page_fetch(arg, c, NULL, reply);
}
