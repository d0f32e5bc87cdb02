/*
 * rv_request.h: one API request as the handlers see it, and their reply.
 *
 * rv_http.c fills an rv_request from libmicrohttpd (headers read once,
 * the body accumulated under the 1 MiB cap, the path matched) and hands
 * it to rv_dispatch; handlers never see the HTTP library, so they can be
 * read and tested as plain functions of (request) -> reply.
 *
 * Ownership: the request and its strings belong to rv_http.c for the
 * request's life; body_json is owned by the request.  reply.body is
 * malloc'd text that rv_http.c hands to MHD.  Threads: one request is
 * handled by one worker thread from start to end.
 */
#ifndef RV_REQUEST_H
#define RV_REQUEST_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "rv_app.h"
#include "rv_auth.h"
#include "rv_router.h"

typedef struct rv_reply {
    unsigned status;   /* 0 until a handler sets it */
    const char *code;  /* the error code of an error reply (static) */
    char *body;        /* JSON (or metrics text), malloc'd */
    const char *content_type; /* NULL: application/json */
    const char *allow;        /* Allow header for 405 */
    char location[64];        /* Location header for 201 create, or "" */
    /* A body that is static data (the console's files): sent as is and
     * never freed; body stays NULL. */
    const char *static_body;
    size_t static_len;
    const char *cache_control; /* NULL: no-store */
    const char *etag;          /* ETag header, or NULL */
    int console_headers;       /* add the console's CSP and friends */
} rv_reply;

typedef struct rv_request {
    rv_app *app;
    const char *method;
    const char *path;
    rv_method method_kind;
    rv_match match;
    char request_id[129];

    /* Headers, borrowed from MHD for the request's life (NULL: absent). */
    const char *authorization;
    const char *content_type;
    const char *idempotency_key;
    const char *if_none_match;
    const char *test_pause;
    const char *test_fail;  /* X-Test-Fail (REVIEWD_TEST_HOOKS only) */

    /* Query arguments as a JSON object of strings; query_dup names a
     * parameter given twice (NULL if none). */
    json_t *query;
    const char *query_dup;

    /* The body as received (NUL-terminated, len bytes). */
    const char *body;
    size_t body_len;

    /* Set by the dispatcher once the caller is authenticated. */
    int authenticated;
    rv_identity who;

    /* What the lock did, for the access log ("" if no lock). */
    const char *lock_outcome;
} rv_request;

/* Sets an error reply {"code","detail"}. */
void rv_reply_error(rv_reply *reply, unsigned status, const char *code,
                    const char *detail);

/* Sets a JSON reply, stealing obj; an allocation failure becomes 500. */
void rv_reply_json(rv_reply *reply, unsigned status, json_t *obj);

/* Frees the body and resets the reply. */
void rv_reply_clear(rv_reply *reply);

#endif /* RV_REQUEST_H */
