/*
 * rv_reply.h: the reply a handler sets for one request (rv_reply.c).
 *
 * Exactly one reply per request: a status, and a JSON body (or the
 * metrics text) with the headers it needs.  Ownership: reply.body is
 * malloc'd text that rv_http.c hands to libmicrohttpd; rv_reply_clear
 * frees it.  Threads: a reply belongs to its request's worker thread.
 */
#ifndef RV_REPLY_H
#define RV_REPLY_H

#include <jansson.h>

typedef struct rv_reply {
    unsigned status;   /* 0 until a handler sets it */
    const char *code;  /* the error code of an error reply (static) */
    char *body;        /* JSON (or metrics text), malloc'd */
    const char *content_type; /* NULL: application/json */
    const char *allow;        /* Allow header for 405 */
    char location[64];        /* Location header for 201 create, or "" */
} rv_reply;

/* Sets an error reply {"code","detail"}. */
void rv_reply_error(rv_reply *reply, unsigned status, const char *code,
                    const char *detail);

/* Sets a JSON reply, stealing obj; an allocation failure becomes 500. */
void rv_reply_json(rv_reply *reply, unsigned status, json_t *obj);

/* Frees the body and resets the reply. */
void rv_reply_clear(rv_reply *reply);

#endif /* RV_REPLY_H */
