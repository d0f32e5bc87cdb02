/*
 * rv_reply.h: the reply a handler sets for one request (rv_reply.c).
 *
 * Exactly one reply per request: a status, and a JSON body (or the
 * metrics text) with the headers it needs.  Ownership: reply.body is
 * malloc'd text that rv_http.c writes to the client; rv_reply_clear
 * frees it.  Threads: a reply belongs to its request's worker thread.
 */
#ifndef RV_REPLY_H
#define RV_REPLY_H

#include <jansson.h>
#include <stddef.h>

typedef struct rv_reply {
    unsigned status;          /* 0 until a handler sets it */
    const char *code;         /* the error code of an error reply (static) */
    char *body;               /* JSON (or metrics text), malloc'd */
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

/* Sets an error reply {"code","detail"}. */
void rv_reply_error(rv_reply *reply, unsigned status, const char *code,
                    const char *detail);

/* Sets a JSON reply, stealing obj; an allocation failure becomes 500. */
void rv_reply_json(rv_reply *reply, unsigned status, json_t *obj);

/* Sets Location to prefix + the "id" string of the reply's JSON body
 * (a replayed 201 names what the first request created); leaves it ""
 * when the body has no such id. */
void rv_reply_location_from_id(rv_reply *reply, const char *prefix);

/* Frees the body and resets the reply. */
void rv_reply_clear(rv_reply *reply);

#endif /* RV_REPLY_H */
