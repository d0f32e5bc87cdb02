/*
 * rv_request.h: one API request as the handlers see it, and the checks
 * every handler shares (role, body object, id as text; rv_request.c).
 * The reply they set is rv_reply.h's.
 *
 * rv_http.c fills an rv_request from the parsed head (headers read once,
 * the body accumulated under the 1 MiB cap, the path matched) and hands
 * it to rv_dispatch; handlers never see the HTTP library, so they can be
 * read and tested as plain functions of (request) -> reply.
 *
 * Ownership: the request and its strings belong to rv_http.c for the
 * request's life; body_json is owned by the request.  Threads: one request is
 * handled by one worker thread from start to end.
 */
#ifndef RV_REQUEST_H
#define RV_REQUEST_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rv_app.h"
#include "api/rv_auth.h"
#include "api/rv_reply.h"
#include "core/rv_router.h"

typedef struct rv_request {
    rv_app *app;
    const char *method;
    const char *path;
    rv_method method_kind;
    rv_match match;
    char request_id[129];

    /* Headers, borrowed from the connection's buffer for the request's
     * life (NULL: absent). */
    const char *authorization;
    const char *content_type;
    const char *idempotency_key;
    const char *if_none_match;
#ifdef REVIEWD_TESTING
    const char *hook_pause; /* X-Test-Pause-Ms (rv_hooks.h) */
    const char *hook_fail;  /* X-Test-Fail (rv_hooks.h) */
#endif

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

    /* Outbox rows this request's transactions inserted (rv_lifecycle.c):
     * once they are over, the notifier is asked for the NOTIFY that the
     * request's session leaves to it (rv_notifier.h). */
    int outbox_rows;
} rv_request;

/* Returns 1 if the caller's role is in roles (RV_ROLE_* bits); otherwise
 * sets 403 FORBIDDEN and returns 0. */
int rv_request_require_role(const rv_request *req, unsigned roles,
                            rv_reply *reply);

/*
 * Parses the body as a JSON object whose keys are all in allowed.  With
 * optional, an empty body is an empty object.  Returns the object (new
 * reference), or NULL with 400 INVALID_JSON or INVALID_ARGUMENT set.
 */
json_t *rv_request_body_object(const rv_request *req, int optional,
                               const char *const *allowed, rv_reply *reply);

/* The request's id as decimal text (ids in paths are parsed already). */
void rv_request_id_text(const rv_request *req, char *out, size_t outlen);

#endif /* RV_REQUEST_H */
