/*
 * rv_content.c: the content store chosen at start-up (see rv_content.h).
 *
 * The PostgreSQL store is a pair of statements on the request's
 * connection.  The MongoDB store's outcomes are turned into replies
 * here, in one place, so every handler reports a store failure the same
 * way: a log line with the request id, the record and libmongoc's
 * message, and an error reply the client can act on (503: retry later;
 * 500: someone has to look).
 *
 * Every MongoDB call passes the store's bulkhead (svc_bulkhead.h): at
 * most REVIEWD_MONGO_MAX_CONCURRENT calls wait on the server at once and
 * a breaker fails calls at once while the server is known to be down, so
 * a dead MongoDB costs the requests that need the text a fast 503
 * CONTENT_UNAVAILABLE and holds no other worker.  A call is not started
 * once the request's budget is spent (svc_deadline.h), and libmongoc's
 * own timeouts come from what the budget leaves (svc_mongo_store_open).
 */
#include "tx/rv_content.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "svc_bulkhead.h"
#include "svc_content_mongo.h"
#include "svc_deadline.h"
#include "db/rv_query.h"

struct rv_content {
    svc_content_kind kind;
    svc_mongo_store *mongo; /* SVC_CONTENT_MONGO only */
    svc_bulkhead *bulkhead; /* SVC_CONTENT_MONGO only */
    /* Calls by outcome (svc_store_rc), and whether the last one reached
     * the server (1), could not (0), or none was made yet (-1). */
    atomic_uint_fast64_t outcomes[SVC_STORE_ERROR + 1];
    atomic_int reached;
};

/* Counts one MongoDB outcome; returns rc. */
static svc_store_rc count(rv_content *s, svc_store_rc rc)
{
    atomic_fetch_add(&s->outcomes[rc], 1);
    atomic_store(&s->reached, rc != SVC_STORE_UNAVAILABLE);
    return rc;
}

/* May a call go to MongoDB now?  SVC_STORE_OK (then call leave_store),
 * or SVC_STORE_UNAVAILABLE with the reason in why: the budget is spent,
 * the breaker is open or the cap is reached. */
static svc_store_rc enter_store(rv_content *s, char *why, size_t len)
{
    svc_bulkhead_rc rc;

    if (svc_deadline_left_ms(0) == 0) {
        snprintf(why, len, "mongo: the request's budget is spent");
        return SVC_STORE_UNAVAILABLE;
    }
    rc = svc_bulkhead_enter(s->bulkhead);
    if (rc != SVC_BULKHEAD_OK) {
        svc_bulkhead_describe(s->bulkhead, rc, why, len);
        atomic_fetch_add(&s->outcomes[SVC_STORE_UNAVAILABLE], 1);
        return SVC_STORE_UNAVAILABLE;
    }
    return SVC_STORE_OK;
}

/* After a call enter_store let through: counts it, tells the breaker. */
static svc_store_rc leave_store(rv_content *s, svc_store_rc rc)
{
    svc_bulkhead_leave(s->bulkhead, rc != SVC_STORE_UNAVAILABLE);
    return count(s, rc);
}

rv_content *rv_content_new(const rv_config *cfg, svc_log *log, char *err,
                           size_t errlen)
{
    char why[512];
    rv_content *s = calloc(1, sizeof(*s));

    if (s == NULL) {
        snprintf(err, errlen, "content store: out of memory");
        return NULL;
    }
    s->kind = cfg->content_store;
    atomic_init(&s->reached, -1);
    if (s->kind != SVC_CONTENT_MONGO)
        return s;
    s->mongo = svc_mongo_store_open(cfg->mongo_url, "reviewd",
                                    cfg->request_budget_ms, err, errlen);
    s->bulkhead = svc_bulkhead_new("mongo", cfg->mongo_max_concurrent,
                                   cfg->breaker_failures,
                                   cfg->breaker_open_ms);
    if (s->mongo == NULL || s->bulkhead == NULL) {
        if (s->mongo != NULL)
            snprintf(err, errlen, "content store: out of memory");
        rv_content_free(s);
        return NULL;
    }
    if (count(s, svc_mongo_store_ping(s->mongo, why, sizeof(why)))
        != SVC_STORE_OK) {
        svc_log_write(log, SVC_LOG_WARN, "content_store_unavailable",
                      json_pack("{s:s,s:s}", "store",
                                svc_mongo_store_endpoint(s->mongo), "error",
                                why));
    }
    return s;
}

void rv_content_free(rv_content *s)
{
    if (s == NULL)
        return;
    svc_mongo_store_free(s->mongo);
    svc_bulkhead_free(s->bulkhead);
    free(s);
}

const char *rv_content_name(const rv_content *s)
{
    return s->kind == SVC_CONTENT_MONGO ? "mongo" : "pg";
}

void rv_content_stats_get(const rv_content *s, rv_content_stats *out)
{
    out->ok = atomic_load(&s->outcomes[SVC_STORE_OK]);
    out->missing = atomic_load(&s->outcomes[SVC_STORE_MISSING]);
    out->unavailable = atomic_load(&s->outcomes[SVC_STORE_UNAVAILABLE]);
    out->errors = atomic_load(&s->outcomes[SVC_STORE_ERROR]);
    memset(&out->bulkhead, 0, sizeof(out->bulkhead));
    if (s->bulkhead != NULL)
        svc_bulkhead_stats_get(s->bulkhead, &out->bulkhead);
}

const char *rv_content_state(const rv_content *s, int pg_up)
{
    if (s->kind != SVC_CONTENT_MONGO)
        return pg_up ? "ok" : "down";
    /* rv_content_new's ping set reached, so it is never -1 here; were
     * it, "down" is what the contract allows (ok|down) and claims no
     * more than is known. */
    return atomic_load(&s->reached) == 1 ? "ok" : "down";
}

/* Logs a MongoDB failure and sets the reply; returns RV_DB_ABORTED. */
static rv_db_status store_failed(rv_request *req, svc_store_rc rc,
                                 const char *doc_id, int version,
                                 const char *why, rv_reply *reply)
{
    static const char *const events[] = {
        [SVC_STORE_OK] = "content_store_ok",
        [SVC_STORE_MISSING] = "content_missing",
        [SVC_STORE_UNAVAILABLE] = "content_store_unavailable",
        [SVC_STORE_ERROR] = "content_store_error",
    };

    svc_log_write(req->app->log,
                  rc == SVC_STORE_UNAVAILABLE ? SVC_LOG_WARN : SVC_LOG_ERROR,
                  events[rc],
                  json_pack("{s:s,s:s,s:i,s:s}", "request_id", req->request_id,
                            "document_id", doc_id, "version", version, "error",
                            why));
    switch (rc) {
    case SVC_STORE_UNAVAILABLE:
        rv_reply_error(reply, 503, "CONTENT_UNAVAILABLE",
                       "the content store is unavailable; retry later");
        break;
    case SVC_STORE_MISSING:
        rv_reply_error(reply, 500, "CONTENT_MISSING",
                       "the text of this document version is missing from "
                       "the content store");
        break;
    case SVC_STORE_OK:
    case SVC_STORE_ERROR:
        rv_reply_error(reply, 500, "CONTENT_STORE_ERROR",
                       "the content store failed");
        break;
    }
    return RV_DB_ABORTED;
}

rv_db_status rv_content_put(rv_request *req, rv_db_conn *c, const char *doc_id,
                            int version, const char *content, rv_reply *reply)
{
    char why[512];
    svc_store_rc rc;

    if (req->app->content->kind != SVC_CONTENT_MONGO)
        return rv_query_content_put(c, doc_id, content);
    rc = enter_store(req->app->content, why, sizeof(why));
    if (rc == SVC_STORE_OK) {
        rc = leave_store(req->app->content,
                         svc_mongo_store_put(req->app->content->mongo, doc_id,
                                             version, content, why,
                                             sizeof(why)));
    }
    return rc == SVC_STORE_OK
               ? RV_DB_OK
               : store_failed(req, rc, doc_id, version, why, reply);
}

rv_db_status rv_content_carry(rv_request *req, rv_db_conn *c,
                              const char *doc_id, int from, int to,
                              rv_reply *reply)
{
    char *text = NULL;
    rv_db_status st;

    if (req->app->content->kind != SVC_CONTENT_MONGO)
        return RV_DB_OK;
    st = rv_content_get(req, c, doc_id, from, &text, reply);
    if (st == RV_DB_OK)
        st = rv_content_put(req, c, doc_id, to, text, reply);
    free(text);
    return st;
}

rv_db_status rv_content_get(rv_request *req, rv_db_conn *c, const char *doc_id,
                            int version, char **text, rv_reply *reply)
{
    char why[512];
    PGresult *res = NULL;
    int found = 0;
    rv_db_status st;
    svc_store_rc rc;

    *text = NULL;
    if (req->app->content->kind == SVC_CONTENT_MONGO) {
        rc = enter_store(req->app->content, why, sizeof(why));
        if (rc == SVC_STORE_OK) {
            rc = leave_store(req->app->content,
                             svc_mongo_store_get(req->app->content->mongo,
                                                 doc_id, version, text, why,
                                                 sizeof(why)));
        }
        return rc == SVC_STORE_OK
                   ? RV_DB_OK
                   : store_failed(req, rc, doc_id, version, why, reply);
    }
    st = rv_query_content_get(c, doc_id, &res, &found);
    if (st == RV_DB_OK) {
        *text = strdup(found ? PQgetvalue(res, 0, 0) : "");
        if (*text == NULL) {
            rv_reply_error(reply, 500, "INTERNAL", "out of memory");
            st = RV_DB_ABORTED;
        }
    }
    PQclear(res);
    return st;
}
