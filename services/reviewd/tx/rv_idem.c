/*
 * rv_idem.c: stored responses for Idempotency-Key (see the header
 * for the rules).  The request hash is computed by PostgreSQL
 * (sha256(convert_to(body, 'UTF8'))): the body is valid UTF-8 by the time
 * we get here, and keeping the hash in SQL keeps the comparison and the
 * stored value in one place.
 */
#include "tx/rv_idem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/rv_query.h"

int rv_idem_key_valid(const char *key)
{
    size_t n = 0;

    for (; key[n] != '\0'; n++)
        if ((unsigned char)key[n] < 0x21 || (unsigned char)key[n] > 0x7E)
            return 0;
    return n >= 1 && n <= 255;
}

int rv_idem_applies(const rv_request *req)
{
    return req->idempotency_key != NULL && req->method_kind == RV_METHOD_POST;
}

/* Answers from a found record: the first response, or 422. */
static void answer_from(rv_request *req, PGresult *res, rv_reply *reply)
{
    const int same = PQgetvalue(res, 0, 2)[0] == 't';

    if (!same) {
        rv_metrics_idem(req->app->metrics, RV_IDEM_MISMATCH);
        rv_reply_error(reply, 422, "IDEMPOTENCY_MISMATCH",
                       "this Idempotency-Key was used with a different "
                       "request body");
        return;
    }
    rv_metrics_idem(req->app->metrics, RV_IDEM_REPLAYED);
    rv_reply_clear(reply);
    reply->status = (unsigned)atoi(PQgetvalue(res, 0, 0));
    reply->body = strdup(PQgetvalue(res, 0, 1));
    if (reply->body == NULL) {
        rv_reply_error(reply, 500, "INTERNAL", "out of memory");
        return;
    }
    if (reply->status == 201 && req->match.op == RV_OP_DOCUMENT_CREATE) {
        /* The replay names the document as the first answer did. */
        rv_reply_location_from_id(reply, "/v1/documents/");
    }
}

int rv_idem_lookup(rv_request *req, rv_db_conn *c, rv_reply *reply,
                   rv_db_status *st)
{
    const char *params[] = {req->who.sub, req->method, req->path,
                            req->idempotency_key,
                            req->body != NULL ? req->body : ""};
    PGresult *res = NULL;

    *st = rv_db_conn_exec(c, RV_QUERY_IDEM_FIND, params, &res);
    if (*st != RV_DB_OK)
        return -1;
    if (PQntuples(res) == 0) {
        PQclear(res);
        return 0;
    }
    answer_from(req, res, reply);
    PQclear(res);
    return 1;
}

int rv_idem_claim(rv_request *req, rv_db_conn *c, rv_reply *reply,
                  rv_db_status *st)
{
    const char *params[] = {req->who.sub, req->method, req->path,
                            req->idempotency_key};
    PGresult *res = NULL;
    int locked;

    *st = rv_db_conn_exec(c, RV_QUERY_IDEM_TRY_LOCK, params, &res);
    if (*st != RV_DB_OK)
        return -1;
    locked = PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    if (!locked) {
        rv_metrics_idem(req->app->metrics, RV_IDEM_BUSY);
        rv_reply_error(reply, 409, "LOCK_BUSY",
                       "a request with this "
                       "Idempotency-Key is still running; retry later");
        return 1;
    }
    return rv_idem_lookup(req, c, reply, st);
}

static int recordable(const rv_reply *reply)
{
    return reply->status >= 200 && reply->status < 500 && reply->status != 400
           && reply->status != 401 && reply->status != 413
           && reply->status != 415
           && !(reply->code != NULL && strcmp(reply->code, "LOCK_BUSY") == 0);
}

rv_db_status rv_idem_store(rv_request *req, rv_db_conn *c,
                           const rv_reply *reply)
{
    char status[8];
    char ttl[16];
    const char *params[] = {req->who.sub,
                            req->method,
                            req->path,
                            req->idempotency_key,
                            req->body != NULL ? req->body : "",
                            status,
                            reply->body != NULL ? reply->body : "",
                            ttl};
    rv_db_status st;

    if (!recordable(reply))
        return RV_DB_OK;
    snprintf(status, sizeof(status), "%u", reply->status);
    snprintf(ttl, sizeof(ttl), "%d", req->app->cfg->idempotency_ttl_s);
    st = rv_db_conn_exec(c, RV_QUERY_IDEM_STORE, params, NULL);
    if (st == RV_DB_OK)
        rv_metrics_idem(req->app->metrics, RV_IDEM_STORED);
    return st;
}
