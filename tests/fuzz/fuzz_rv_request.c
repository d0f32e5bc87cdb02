/*
 * fuzz_rv_request.c: fuzz target for reviewd's request checks, in process:
 * the router (method and path), the query string, the headers and the
 * shared checks of rv_dispatch, everything a request meets before a
 * handler touches the database.
 *
 * The input is one request, as lines:
 *
 *   METHOD \n TARGET \n AUTHORIZATION \n CONTENT-TYPE \n IDEMPOTENCY-KEY
 *   \n CONTENT-LENGTH \n BODY...
 *
 * TARGET is the path, optionally "?query"; the query is split on '&' and
 * '=' and percent-decoded with reviewd's own rv_hparse_unescape, then
 * collected as rv_http.c does (a JSON object of strings, NULL when a key
 * or value is not UTF-8).  An empty header line means the header is
 * absent.  AUTHORIZATION "@author", "@reviewer" or "@admin" is replaced
 * by a valid token for that role, "@expired" by an expired one; any other
 * value is sent as it is, and since the secret is random per process, no
 * such value can be a valid token.  CONTENT-LENGTH empty means chunked
 * (-1).
 *
 * Properties checked on every input, besides "no crash, leak or UB":
 *   - the router: a path with an id is the route's label with the id in
 *     canonical decimal in place of {id}, and only then id_ok; a path
 *     without id equals its label; a method has an operation on a known
 *     path exactly when the Allow header lists it;
 *   - rv_router_parse_id accepts a segment exactly when printing the
 *     result gives the segment back;
 *   - the checks answer in docs/api.md's order (404, 405, 413, 401, 400 id,
 *     400 query, 415, 400 key), and the answer is the one computed here
 *     independently from the request; a 405 carries Allow;
 *   - the query is refused exactly when jansson refuses one of its
 *     strings, and then exactly when svc_utf8_valid does too;
 *   - every error body is a JSON object whose "code" is the reply's code
 *     and whose "detail" is a string, in valid UTF-8;
 *   - a request that passes reaches rv_request_body_object, which returns an
 *     object or a 400 (INVALID_JSON or INVALID_ARGUMENT), never else.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "fuzz_target.h"
#include "http/rv_dispatch.h"
#include "http/rv_hparse.h"
#include "handlers/rv_handlers.h"
#include "tx/rv_idem.h"
#include "svc_json.h"

#define TARGET "rv_request"
#define INPUT_MAX 65536
#define FIELDS 6

/* The process's secret: random, so that only tokens this target signs
 * can verify. */
static unsigned char secret[32];

typedef struct fuzz_req {
    char *field[FIELDS]; /* NUL-terminated copies (NULL: absent) */
    const char *body;
    size_t body_len;
    char *token; /* issued for an "@role" line, or NULL */
    int token_ok;
} fuzz_req;

/* Splits the input into its header lines and body. */
static void split_input(const uint8_t *data, size_t size, fuzz_req *f)
{
    size_t pos = 0;

    for (int i = 0; i < FIELDS; i++) {
        const uint8_t *nl = memchr(data + pos, '\n', size - pos);
        const size_t end = nl != NULL ? (size_t)(nl - data) : size;

        f->field[i] = end > pos ? strndup((const char *)data + pos, end - pos)
                                : NULL;
        if (end > pos && f->field[i] == NULL)
            abort();
        pos = nl != NULL ? end + 1 : size;
    }
    f->body = (const char *)data + pos;
    f->body_len = size - pos;
}

/* Replaces "@role" by a real token; returns the header value to send. */
static const char *authorization(fuzz_req *f, int64_t now)
{
    static const char *const roles[] = {"author", "reviewer", "admin"};
    const char *a = f->field[2];
    char *tok;

    if (a == NULL || a[0] != '@')
        return a;
    for (size_t i = 0; i < 3; i++) {
        const int expired = strcmp(a + 1, "expired") == 0;

        if (!expired && strcmp(a + 1, roles[i]) != 0)
            continue;
        tok = rv_auth_issue(secret, sizeof(secret), "fuzz-user", roles[i], now,
                            expired ? -60 : 600);
        if (tok == NULL)
            fuzz_fail(TARGET, "rv_auth_issue failed");
        f->token = malloc(strlen(tok) + 8);
        if (f->token == NULL)
            abort();
        sprintf(f->token, "Bearer %s", tok);
        free(tok);
        f->token_ok = !expired;
        return f->token;
    }
    return a;
}

/* Collects "k=v&..." like rv_http.c's collect_arg; NULL: a string was not
 * UTF-8.  *dup is set when a key repeats. */
static json_t *collect_query(const char *q, int *dup, int *utf8_ok)
{
    json_t *obj = json_object();
    char *copy = strdup(q), *save = NULL;

    *dup = 0;
    *utf8_ok = 1;
    if (obj == NULL || copy == NULL)
        abort();
    for (char *arg = strtok_r(copy, "&", &save); arg != NULL;
         arg = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(arg, '=');
        const char *value = "";
        json_t *v;

        if (eq != NULL) {
            *eq = '\0';
            value = eq + 1;
            rv_hparse_unescape(eq + 1);
        }
        rv_hparse_unescape(arg);
        if (obj == NULL)
            continue; /* rv_http.c stops collecting here */
        if (json_object_get(obj, arg) != NULL) {
            *dup = 1; /* and, as in rv_http.c, its value goes unread */
            continue;
        }
        if (!svc_utf8_valid(arg, strlen(arg))
            || !svc_utf8_valid(value, strlen(value)))
            *utf8_ok = 0;
        v = json_string(value);
        if (v == NULL || json_object_set_new(obj, arg, v) != 0) {
            json_decref(obj);
            obj = NULL;
        }
    }
    free(copy);
    return obj;
}

/* 1 if the Allow list names method as a whole token. */
static int allow_lists(const char *allow, const char *method)
{
    const size_t n = strlen(method);

    for (const char *p = strstr(allow, method); p != NULL;
         p = strstr(p + 1, method))
        if ((p == allow || p[-1] == ' ') && (p[n] == '\0' || p[n] == ','))
            return 1;
    return 0;
}

/* The router's properties for one path and method. */
/* The console's files, written out independently of the router: "/" or
 * "/" + a name of [a-z0-9_-] + ".html", ".js" or ".css". */
static int console_path(const char *path)
{
    const char *dot;

    if (strcmp(path, "/") == 0)
        return 1;
    if (path[0] != '/' || path[1] == '\0' || strchr(path + 1, '/') != NULL)
        return 0;
    dot = strchr(path + 1, '.');
    if (dot == NULL || dot == path + 1)
        return 0;
    for (const char *c = path + 1; c < dot; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'
              || *c == '-'))
            return 0;
    return strcmp(dot, ".html") == 0 || strcmp(dot, ".js") == 0
           || strcmp(dot, ".css") == 0;
}

static void check_route(const char *path, rv_method method,
                        const char *method_name, const rv_match *m)
{
    const char *label = rv_router_path_label(m->path);
    const char *brace = strstr(label, "{id}");
    char expect[512];

    if (m->path == RV_PATH_UNKNOWN) {
        if (m->op != RV_OP_NONE)
            fuzz_fail(TARGET, "unknown path %s has an operation", path);
        return;
    }
    if (m->path == RV_PATH_CONSOLE) {
        if (!console_path(path))
            fuzz_fail(TARGET, "%s matched the console's files", path);
        return;
    }
    if ((brace != NULL) != (m->has_id != 0))
        fuzz_fail(TARGET, "%s: has_id %d for route %s", path, m->has_id,
                  label);
    if (brace == NULL && strcmp(path, label) != 0)
        fuzz_fail(TARGET, "%s matched route %s", path, label);
    if (brace != NULL && m->id_ok) {
        snprintf(expect, sizeof(expect), "%.*s%lld%s", (int)(brace - label),
                 label, (long long)m->id, brace + 4);
        if (strcmp(path, expect) != 0)
            fuzz_fail(TARGET, "%s read as id %lld of %s", path,
                      (long long)m->id, label);
    }
    if (method == RV_METHOD_OTHER) {
        if (m->op != RV_OP_NONE)
            fuzz_fail(TARGET, "method %s has an operation", method_name);
        return;
    }
    if ((m->op != RV_OP_NONE)
        != allow_lists(rv_router_allow(m->path), method_name))
        fuzz_fail(TARGET, "%s %s: op %d but Allow \"%s\"", method_name, path,
                  (int)m->op, rv_router_allow(m->path));
}

/* The id segment: accepted exactly when it is canonical. */
static void check_parse_id(const char *s, size_t len)
{
    int64_t id = 0;
    char back[32];
    const int ok = rv_router_parse_id(s, len, &id) == 0;
    const int canonical = ok && id > 0
                          && (size_t)snprintf(back, sizeof(back), "%lld",
                                              (long long)id)
                                 == len
                          && memcmp(back, s, len) == 0;

    if (ok != canonical)
        fuzz_fail(TARGET, "parse_id of \"%.*s\": ok %d, gives %lld", (int)len,
                  s, ok, (long long)id);
}

/* An error body: {"code": reply->code, "detail": "..."}, valid UTF-8. */
static void check_error_body(const rv_reply *reply)
{
    json_error_t err;
    json_t *root;
    const char *code, *detail;

    if (reply->body == NULL || reply->code == NULL)
        fuzz_fail(TARGET, "status %u without a body or code", reply->status);
    if (!svc_utf8_valid(reply->body, strlen(reply->body)))
        fuzz_fail(TARGET, "error body is not UTF-8: %s", reply->body);
    root = json_loads(reply->body, JSON_REJECT_DUPLICATES, &err);
    code = json_string_value(json_object_get(root, "code"));
    detail = json_string_value(json_object_get(root, "detail"));
    if (code == NULL || detail == NULL || strcmp(code, reply->code) != 0)
        fuzz_fail(TARGET, "error body %s for code %s", reply->body,
                  reply->code);
    json_decref(root);
}

/* The operations anyone may call without a token (docs/api.md): the
 * probes, the console's files and the development sign-in. */
static int op_is_open(rv_op op)
{
    return op == RV_OP_HEALTHZ || op == RV_OP_READYZ || op == RV_OP_METRICS
           || op == RV_OP_CONSOLE || op == RV_OP_DEV_TOKEN_INFO
           || op == RV_OP_DEV_TOKEN_ISSUE;
}

/* The operations that read query parameters (docs/api.md's rule: every
 * other one refuses any with 400). */
static int op_takes_query(rv_op op)
{
    return op == RV_OP_DOCUMENT_GET || op == RV_OP_REVIEW_LIST
           || op == RV_OP_SEARCH || op == RV_OP_DOCUMENT_LIST
           || op == RV_OP_DOCUMENT_REVIEWS || op == RV_OP_CONSOLE;
}

/* What the checks must answer, computed without them: 0 for "passes". */
static unsigned expected_status(const rv_request *req, int64_t declared,
                                int token_ok, int query_ok)
{
    const rv_op op = req->match.op;
    const int open = op_is_open(op);
    const int takes_body = op == RV_OP_DOCUMENT_CREATE
                           || op == RV_OP_DOCUMENT_UPDATE
                           || op == RV_OP_DOCUMENT_SUBMIT
                           || op == RV_OP_REVIEW_APPROVE
                           || op == RV_OP_REVIEW_REJECT
                           || op == RV_OP_DEV_TOKEN_ISSUE;

    if (req->match.path == RV_PATH_UNKNOWN)
        return 404;
    if (op == RV_OP_NONE)
        return 405;
    if (declared > (int64_t)RV_BODY_MAX)
        return 413;
    if (!open && !token_ok)
        return 401;
    if (req->match.has_id && !req->match.id_ok)
        return 400;
    if (!query_ok)
        return 400;
    if (!op_takes_query(op)
        && (json_object_size(req->query) > 0 || req->query_dup != NULL))
        return 400;
    if (takes_body && req->body_len > 0
        && !rv_dispatch_is_json(req->content_type))
        return 415;
    if (req->method_kind == RV_METHOD_POST && req->idempotency_key != NULL
        && !rv_idem_key_valid(req->idempotency_key))
        return 400;
    return 0;
}

/* Past the checks: the body goes through rv_request_body_object. */
static void check_body_object(const rv_request *req)
{
    static const char *const allowed[] = {"title", "content", "comment", NULL};
    rv_reply reply = {0};
    json_t *obj = rv_request_body_object(req, 1, allowed, &reply);

    if (obj == NULL
        && (reply.status != 400
            || (strcmp(reply.code, "INVALID_JSON") != 0
                && strcmp(reply.code, "INVALID_ARGUMENT") != 0)))
        fuzz_fail(TARGET, "rv_request_body_object: %u %s", reply.status,
                  reply.code);
    if (obj == NULL)
        check_error_body(&reply);
    else if (!json_is_object(obj) || reply.status != 0)
        fuzz_fail(TARGET, "rv_request_body_object gave a non-object");
    json_decref(obj);
    rv_reply_clear(&reply);
}

static void run_request(fuzz_req *f, rv_app *app)
{
    const int64_t now = (int64_t)time(NULL);
    const char *target = f->field[1] != NULL ? f->field[1] : "/";
    const char *q = strchr(target, '?');
    char *path = strndup(target,
                         q != NULL ? (size_t)(q - target) : strlen(target));
    rv_request req = {0};
    rv_reply reply = {0};
    int64_t declared = -1;
    int dup = 0, utf8_ok = 1;
    unsigned want;

    if (path == NULL)
        abort();
    req.app = app;
    req.method = f->field[0] != NULL ? f->field[0] : "";
    req.path = path;
    req.method_kind = rv_router_method(req.method);
    req.authorization = authorization(f, now);
    req.content_type = f->field[3];
    req.idempotency_key = f->field[4];
    req.query = collect_query(q != NULL ? q + 1 : "", &dup, &utf8_ok);
    if (dup)
        req.query_dup = "dup";
    if ((req.query != NULL) != utf8_ok)
        fuzz_fail(TARGET, "query %s: jansson says %d, svc_utf8_valid %d", q,
                  req.query != NULL, utf8_ok);
    if (f->field[5] != NULL)
        declared = strtoll(f->field[5], NULL, 10);
    req.body = f->body;
    req.body_len = f->body_len;
    req.lock_outcome = "";
    rv_router_match(path, req.method_kind, &req.match);
    check_route(path, req.method_kind, req.method, &req.match);
    want = expected_status(&req, declared, f->token_ok, req.query != NULL);
    if (!rv_dispatch_early(&req, declared, &reply))
        (void)rv_dispatch_late(&req, &reply);
    if (reply.status != want)
        fuzz_fail(TARGET, "%s %s: answered %u, expected %u", req.method,
                  target, reply.status, want);
    if (want == 405 && reply.allow == NULL)
        fuzz_fail(TARGET, "405 without Allow");
    if (want != 0)
        check_error_body(&reply);
    else if (req.authenticated != !op_is_open(req.match.op))
        fuzz_fail(TARGET, "passed with authenticated %d", req.authenticated);
    if (want == 0)
        check_body_object(&req);
    rv_reply_clear(&reply);
    json_decref(req.query);
    free(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    rv_config cfg = {0};
    rv_app app = {0};
    fuzz_req f = {0};

    if (size > INPUT_MAX)
        return 0;
    if (!ready) {
        if (getrandom(secret, sizeof(secret), 0) != (ssize_t)sizeof(secret))
            fuzz_fail(TARGET, "getrandom failed");
        ready = 1;
    }
    cfg.jwt_secret = (char *)secret;
    cfg.jwt_secret_len = sizeof(secret);
    /* reviewd's defaults (rv_config.c): tokens expired 60 s ago stay
     * expired past the leeway; 600 s tokens are within the lifetime. */
    cfg.jwt_leeway_s = 30;
    cfg.jwt_max_lifetime_s = 86400;
    app.cfg = &cfg;
    split_input(data, size, &f);
    run_request(&f, &app);
    /* The id parser on the path's last segment too, whatever the route. */
    if (f.field[1] != NULL) {
        const char *seg = strrchr(f.field[1], '/');

        seg = seg != NULL ? seg + 1 : f.field[1];
        check_parse_id(seg, strcspn(seg, "?"));
    }
    for (int i = 0; i < FIELDS; i++)
        free(f.field[i]);
    free(f.token);
    return 0;
}
