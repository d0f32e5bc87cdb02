/*
 * rv_router.h: maps a request's path and method to one of reviewd's
 * routes, and parses the ids in the path.
 *
 * The router is pure (no HTTP library, no I/O), so every path the API
 * knows, and every shape it refuses, can be unit-tested directly.  A path
 * is matched by shape first: "/v1/documents/abc" is the document route
 * with a malformed id (400 INVALID_ARGUMENT, after the method check), not
 * an unknown path (404).  Ids are canonical decimal 1..2^63-1: no sign, no
 * leading zeros, no spaces, at most 19 digits, so one document has exactly
 * one path (which also keeps Idempotency-Key scopes exact).
 *
 * Threads: everything here is read-only and reentrant.
 */
#ifndef RV_ROUTER_H
#define RV_ROUTER_H

#include <stddef.h>
#include <stdint.h>

/* Path shapes.  The order is the metrics label order. */
typedef enum rv_path {
    RV_PATH_UNKNOWN = 0,      /* anything else: 404 */
    RV_PATH_DOCUMENTS,        /* /v1/documents */
    RV_PATH_DOCUMENT,         /* /v1/documents/{id} */
    RV_PATH_DOCUMENT_SUBMIT,  /* /v1/documents/{id}/submit */
    RV_PATH_REVIEWS,          /* /v1/reviews */
    RV_PATH_REVIEW,           /* /v1/reviews/{id} */
    RV_PATH_REVIEW_APPROVE,   /* /v1/reviews/{id}/approve */
    RV_PATH_REVIEW_REJECT,    /* /v1/reviews/{id}/reject */
    RV_PATH_HEALTHZ,          /* /healthz */
    RV_PATH_READYZ,           /* /readyz */
    RV_PATH_METRICS,          /* /metrics */
    RV_PATH_SEARCH,           /* /v1/search */
    RV_PATH_DOCUMENT_REVIEWS, /* /v1/documents/{id}/reviews */
    RV_PATH_CONSOLE,          /* / and /{name}.html|.js|.css */
    RV_PATH_DEV_TOKEN,        /* /v1/dev/token (DEV_LOGIN=1 only) */
    RV_PATH_COUNT
} rv_path;

/* Methods the router distinguishes; everything else is OTHER. */
typedef enum rv_method {
    RV_METHOD_GET = 0,
    RV_METHOD_HEAD,
    RV_METHOD_POST,
    RV_METHOD_PUT,
    RV_METHOD_OTHER,
    RV_METHOD_COUNT
} rv_method;

/* What a handler is: one per (path, method) the API serves. */
typedef enum rv_op {
    RV_OP_NONE = 0, /* no such route: 404 or 405 */
    RV_OP_DOCUMENT_CREATE,
    RV_OP_DOCUMENT_GET,
    RV_OP_DOCUMENT_UPDATE,
    RV_OP_DOCUMENT_SUBMIT,
    RV_OP_REVIEW_LIST,
    RV_OP_REVIEW_GET,
    RV_OP_REVIEW_APPROVE,
    RV_OP_REVIEW_REJECT,
    RV_OP_HEALTHZ,
    RV_OP_READYZ,
    RV_OP_METRICS,
    RV_OP_SEARCH,
    RV_OP_DOCUMENT_LIST,
    RV_OP_DOCUMENT_REVIEWS,
    RV_OP_CONSOLE,
    RV_OP_DEV_TOKEN_INFO,
    RV_OP_DEV_TOKEN_ISSUE
} rv_op;

typedef struct rv_match {
    rv_path path;
    rv_op op;   /* RV_OP_NONE with a known path: 405 */
    int has_id; /* the path has an {id} segment */
    int id_ok;  /* ... and it is well-formed */
    int64_t id; /* the id when id_ok */
} rv_match;

/* Classifies a method name ("GET", ...), case-sensitively as HTTP says. */
rv_method rv_router_method(const char *method);

/* Matches path (without query string) and method into m. */
void rv_router_match(const char *path, rv_method method, rv_match *m);

/* The Allow header value for a known path, e.g. "GET, HEAD, PUT". */
const char *rv_router_allow(rv_path path);

/* The metrics label of a path shape, e.g. "/v1/documents/{id}". */
const char *rv_router_path_label(rv_path path);

/* The metrics label of a method. */
const char *rv_router_method_label(rv_method method);

/*
 * Parses a canonical id from s[0..len).  Returns 0 and sets *out, or -1 if
 * s is not 1..2^63-1 in canonical decimal.
 */
int rv_router_parse_id(const char *s, size_t len, int64_t *out);

#endif /* RV_ROUTER_H */
