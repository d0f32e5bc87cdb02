/*
 * rv_dispatch.c: shared request checks and the handler table.
 *
 * Keeping these checks in one place is what makes "never a 5xx for bad
 * input" hold for every endpoint at once: a handler only runs once the
 * path, method, token, id, media type and key have been checked, and its
 * own body parsing goes through rv_request_body_object.
 */
#include "http/rv_dispatch.h"

#include <string.h>
#include <strings.h>
#include <time.h>

#include "handlers/rv_handlers.h"
#include "tx/rv_idem.h"

typedef void (*handler_fn)(rv_request *req, rv_reply *reply);

typedef struct op_entry {
    handler_fn fn;
    int needs_auth;
    int takes_body;  /* a body is read, so its media type matters */
    int takes_query; /* the handler checks its own query parameters */
    int in_memory;   /* answers from memory: never waits on a server */
} op_entry;

/* One rule for query parameters on every route (docs/api.md): an
 * operation that takes none refuses any with 400, as the three that take
 * some refuse one they do not know. */
static const op_entry ops[] = {
    [RV_OP_NONE] = {NULL, 0, 0, 0, 1},
    [RV_OP_DOCUMENT_CREATE] = {rv_handle_document_create, 1, 1, 0},
    [RV_OP_DOCUMENT_GET] = {rv_handle_document_get, 1, 0, 1},
    [RV_OP_DOCUMENT_UPDATE] = {rv_handle_document_update, 1, 1, 0},
    [RV_OP_DOCUMENT_SUBMIT] = {rv_handle_document_submit, 1, 1, 0},
    [RV_OP_REVIEW_LIST] = {rv_handle_review_list, 1, 0, 1},
    [RV_OP_REVIEW_GET] = {rv_handle_review_get, 1, 0, 0},
    [RV_OP_REVIEW_APPROVE] = {rv_handle_review_approve, 1, 1, 0},
    [RV_OP_REVIEW_REJECT] = {rv_handle_review_reject, 1, 1, 0},
    [RV_OP_HEALTHZ] = {rv_handle_healthz, 0, 0, 0, 1},
    [RV_OP_READYZ] = {rv_handle_readyz, 0, 0, 0},
    [RV_OP_METRICS] = {rv_handle_metrics, 0, 0, 0},
    [RV_OP_SEARCH] = {rv_handle_search, 1, 0, 1},
    [RV_OP_DOCUMENT_LIST] = {rv_handle_document_list, 1, 0, 1},
    [RV_OP_DOCUMENT_REVIEWS] = {rv_handle_document_reviews, 1, 0, 1},
    /* The console's files ignore a query string (a browser may add one). */
    [RV_OP_CONSOLE] = {rv_handle_console, 0, 0, 1, 1},
    [RV_OP_DEV_TOKEN_INFO] = {rv_handle_dev_token_info, 0, 0, 0},
    [RV_OP_DEV_TOKEN_ISSUE] = {rv_handle_dev_token_issue, 0, 1, 0},
};

int rv_dispatch_is_json(const char *ct)
{
    const char *p;

    if (ct == NULL)
        return 0;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    if (strncasecmp(ct, "application/json", 16) != 0)
        return 0;
    p = ct + 16;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '\0')
        return 1;
    if (*p != ';')
        return 0;
    /* Parameters: only a charset one is checked. */
    p = strcasestr(p, "charset=");
    if (p == NULL)
        return 1;
    p += 8;
    if (*p == '"')
        p++;
    return strncasecmp(p, "utf-8", 5) == 0
           && (p[5] == '\0' || p[5] == '"' || p[5] == ';' || p[5] == ' ');
}

int rv_dispatch_early(rv_request *req, int64_t declared_len, rv_reply *reply)
{
    const rv_config *cfg = req->app->cfg;
    const rv_auth_policy policy = {(const unsigned char *)cfg->jwt_secret,
                                   cfg->jwt_secret_len, cfg->jwt_leeway_s,
                                   cfg->jwt_max_lifetime_s};
    char detail[160];

    if (req->match.path == RV_PATH_UNKNOWN) {
        rv_reply_error(reply, 404, "NOT_FOUND", "no such path");
        return 1;
    }
    if (req->match.op == RV_OP_NONE) {
        rv_reply_error(reply, 405, "METHOD_NOT_ALLOWED",
                       "method not allowed on this path");
        reply->allow = rv_router_allow(req->match.path);
        return 1;
    }
    if (declared_len > (int64_t)RV_BODY_MAX) {
        rv_reply_error(reply, 413, "PAYLOAD_TOO_LARGE",
                       "the request body is over 1 MiB");
        return 1;
    }
    if (!ops[req->match.op].needs_auth)
        return 0;
    if (rv_auth_verify(req->authorization, &policy, (int64_t)time(NULL),
                       &req->who, detail, sizeof(detail))
        != 0) {
        rv_reply_error(reply, 401, "UNAUTHENTICATED", detail);
        return 1;
    }
    req->authenticated = 1;
    return 0;
}

int rv_dispatch_late(const rv_request *req, rv_reply *reply)
{
    const op_entry *op = &ops[req->match.op];

    if (req->match.has_id && !req->match.id_ok) {
        rv_reply_error(reply, 400, "INVALID_ARGUMENT",
                       "malformed id in "
                       "the path (expected 1..9223372036854775807)");
        return 1;
    }
    if (req->query == NULL) {
        rv_reply_error(reply, 400, "INVALID_ARGUMENT",
                       "the query string is not valid UTF-8");
        return 1;
    }
    if (!op->takes_query
        && (json_object_size(req->query) > 0 || req->query_dup != NULL)) {
        rv_reply_error(reply, 400, "INVALID_ARGUMENT",
                       "this operation takes no query parameters");
        return 1;
    }
    if (op->takes_body && req->body_len > 0
        && !rv_dispatch_is_json(req->content_type)) {
        rv_reply_error(reply, 415, "UNSUPPORTED_MEDIA_TYPE",
                       "send the body as Content-Type: application/json");
        return 1;
    }
    if (rv_idem_applies(req) && !rv_idem_key_valid(req->idempotency_key)) {
        rv_reply_error(reply, 400, "INVALID_ARGUMENT",
                       "Idempotency-Key must "
                       "be 1..255 visible ASCII characters");
        return 1;
    }
    return 0;
}

int rv_dispatch_in_memory(const rv_request *req)
{
    return ops[req->match.op].in_memory;
}

void rv_dispatch(rv_request *req, rv_reply *reply)
{
    if (rv_dispatch_late(req, reply))
        return;
    ops[req->match.op].fn(req, reply);
}
