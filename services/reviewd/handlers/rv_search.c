/*
 * rv_search.c: GET /v1/search?q=...&limit=..., full-text search over
 * approved documents (docs/search.md has the contract).
 *
 * The index is kh-indexer's kh_chunk table (sql/0005_search_index.sql).
 * The query is tokenised in the database by kh_search_query, the same
 * SQL function family the indexer builds the vectors with, so Chinese
 * text (cut into character bigrams) and Latin words are matched the same
 * way on both sides and the service holds no tokeniser of its own.  A hit
 * is a document: its best-ranked chunk gives the snippet and the score
 * (ts_rank_cd), and only chunks of the document's current, approved
 * version count, so a rejected or pending document is never found even
 * if an old index row remained.
 *
 * The snippet is up to 200 characters of that chunk starting a little
 * before the first occurrence of the query's first word (or the chunk's
 * start); cut by character in SQL, so never inside a UTF-8 sequence.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handlers/rv_handlers.h"
#include "db/rv_query.h"
#include "tx/rv_tx.h"

#define RV_SEARCH_DEFAULT 10
#define RV_SEARCH_MAX 50
#define RV_SEARCH_Q_MAX 500

typedef struct search_args {
    const char *q;
    char first_word[128];
    int limit;
} search_args;

static int bad_param(rv_reply *reply, const char *detail)
{
    rv_reply_error(reply, 400, "INVALID_ARGUMENT", detail);
    return -1;
}

/* The query's first white-space-separated word, cut at a character
 * boundary to fit out. */
static void first_word(const char *q, char *out, size_t outlen)
{
    size_t start = strspn(q, " \t\r\n");
    size_t n = strcspn(q + start, " \t\r\n");

    if (n >= outlen) {
        n = outlen - 1;
        while (n > 0 && ((unsigned char)q[start + n] & 0xC0) == 0x80)
            n--;
    }
    memcpy(out, q + start, n);
    out[n] = '\0';
}

static int read_param(const char *key, const char *v, search_args *a,
                      rv_reply *reply)
{
    int64_t n;

    if (strcmp(key, "q") == 0) {
        if (v[strspn(v, " \t\r\n")] == '\0' || strlen(v) > RV_SEARCH_Q_MAX) {
            return bad_param(reply, "q must have a word and at most 500 "
                                    "bytes");
        }
        a->q = v;
        return 0;
    }
    if (strcmp(key, "limit") == 0) {
        if (rv_router_parse_id(v, strlen(v), &n) != 0 || n > RV_SEARCH_MAX)
            return bad_param(reply, "limit must be 1..50");
        a->limit = (int)n;
        return 0;
    }
    return bad_param(reply, "unknown query parameter (q, limit)");
}

static int read_params(const rv_request *req, search_args *a, rv_reply *reply)
{
    const char *key;
    json_t *value;

    memset(a, 0, sizeof(*a));
    a->limit = RV_SEARCH_DEFAULT;
    if (req->query_dup != NULL)
        return bad_param(reply, "a query parameter is given twice");
    json_object_foreach(req->query, key, value)
    {
        if (read_param(key, json_string_value(value), a, reply) != 0)
            return -1;
    }
    if (a->q == NULL)
        return bad_param(reply, "q is required");
    first_word(a->q, a->first_word, sizeof(a->first_word));
    return 0;
}

/* One hit: {"document_id","title","chunk_index","snippet","score"}. */
static json_t *hit_at(PGresult *res, int i)
{
    return json_pack("{s:s,s:s,s:i,s:s,s:f}", "document_id",
                     PQgetvalue(res, i, 0), "title", PQgetvalue(res, i, 1),
                     "chunk_index", atoi(PQgetvalue(res, i, 2)), "snippet",
                     PQgetvalue(res, i, 3), "score",
                     strtod(PQgetvalue(res, i, 4), NULL));
}

static json_t *hits_of(PGresult *res, const char *q)
{
    json_t *items = json_array();
    int i;

    for (i = 0; items != NULL && i < PQntuples(res); i++) {
        if (json_array_append_new(items, hit_at(res, i)) != 0) {
            json_decref(items);
            items = NULL;
        }
    }
    return items != NULL ? json_pack("{s:s,s:o}", "query", q, "items", items)
                         : NULL;
}

static rv_db_status search_work(rv_request *req, rv_db_conn *c, void *arg,
                                rv_reply *reply)
{
    const search_args *a = arg;
    char limit[16];
    const char *params[] = {a->q, limit, a->first_word};
    PGresult *res = NULL;
    rv_db_status st;

    (void)req;
    snprintf(limit, sizeof(limit), "%d", a->limit);
    st = rv_db_conn_exec(c, RV_QUERY_SEARCH, params, &res);
    if (st == RV_DB_OK) {
        rv_reply_json(reply, 200, hits_of(res, a->q));
        PQclear(res);
    }
    return st;
}

void rv_handle_search(rv_request *req, rv_reply *reply)
{
    search_args a;

    if (read_params(req, &a, reply) == 0)
        rv_tx_read(req, search_work, &a, reply);
}
