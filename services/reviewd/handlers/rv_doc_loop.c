/*
 * rv_doc_loop.c: GET /v1/documents/{id} from the event loop (see
 * rv_doc_loop.h); the statement and the view are rv_documents.c's.
 */
#include "handlers/rv_doc_loop.h"

#include "api/rv_views.h"
#include "db/rv_query.h"
#include "handlers/rv_load.h"

int rv_doc_loop_fits(const rv_request *req)
{
    if (req->match.op != RV_OP_DOCUMENT_GET || !req->match.has_id
        || !req->match.id_ok || req->query == NULL || req->query_dup != NULL
        || json_object_size(req->query) != 0)
        return 0;
#ifdef REVIEWD_TESTING
    if (req->hook_pause != NULL || req->hook_fail != NULL)
        return 0;
#endif
    return 1;
}

int rv_doc_loop_send(rv_dba *a, const rv_request *req, rv_dba_query *q)
{
    char id[RV_LOAD_ID_LEN];
    const char *params[1] = {id};

    rv_request_id_text(req, id, sizeof(id));
    return rv_dba_send(a, q, RV_QUERY_DOC_GET, params,
                       req->app->cfg->request_budget_ms);
}

int rv_doc_loop_finish(rv_request *req, rv_dba_outcome outcome, PGresult *res,
                       rv_reply *reply)
{
    rv_doc d;

    if (outcome == RV_DBA_TIMEOUT) {
        svc_log_write(req->app->log, SVC_LOG_WARN, "postgres_unavailable",
                      json_pack("{s:s,s:s}", "request_id", req->request_id,
                                "error",
                                "deadline: PostgreSQL did not answer "
                                "within the request's budget"));
        rv_reply_error(reply, 503, "UNAVAILABLE",
                       "the database is unavailable; retry later");
        return 1;
    }
    if (outcome != RV_DBA_DONE || PQresultStatus(res) != PGRES_TUPLES_OK) {
        PQclear(res);
        return 0;
    }
    if (PQntuples(res) == 0) {
        PQclear(res);
        rv_reply_error(reply, 404, "NOT_FOUND", "no such document");
        return 1;
    }
    rv_query_doc_at(res, 0, &d);
    rv_reply_json(reply, 200, rv_view_document(&d, NULL));
    rv_query_doc_clear(&d);
    return 1;
}
