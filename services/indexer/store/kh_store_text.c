/*
 * kh_store_text.c: reading an event's text from MongoDB and embedding
 * its chunks (see kh_store_text.h).
 */
#include "kh_store_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kh_embed.h"

void kh_doc_clear(kh_doc *d)
{
    PQclear(d->res);
    free(d->owned);
    memset(d, 0, sizeof(*d));
}

int kh_store_load_text(kh_store *s, const kh_event *ev, kh_doc *d, char *err,
                       size_t errlen)
{
    char why[256];
    svc_store_rc rc;

    if (s->mongo == NULL)
        return 0;
    rc = svc_mongo_store_get(s->mongo, ev->document_id, d->version, &d->owned,
                             why, sizeof(why));
    if (rc != SVC_STORE_OK) {
        snprintf(err, errlen, "content of document %s version %d %s: %s",
                 ev->document_id, d->version,
                 rc == SVC_STORE_MISSING       ? "missing"
                 : rc == SVC_STORE_UNAVAILABLE ? "unavailable"
                                               : "unreadable",
                 why);
        return -1;
    }
    d->content = d->owned;
    d->content_len = strlen(d->owned);
    return 0;
}

/* Runs EMBED_COMMAND on text (NUL-terminated at len).  Returns 0 with
 * *out the vector as a PostgreSQL array literal, or -1. */
static int embed_text(const kh_store *s, const char *text, size_t len,
                      char **out, char *err, size_t errlen)
{
    float *vec = NULL;
    size_t dim = 0;

    if (kh_embed_run(s->opts.embed_command, text, len,
                     s->opts.embed_timeout_ms, &vec, &dim, err, errlen)
        != 0)
        return -1;
    *out = kh_embed_pg_array(vec, dim);
    free(vec);
    if (*out == NULL) {
        snprintf(err, errlen, "embedding: out of memory");
        return -1;
    }
    return 0;
}

int kh_store_embed_span(const kh_store *s, const char *text, size_t len,
                        char **out, char *err, size_t errlen)
{
    char *copy;
    int rc;

    *out = NULL;
    if (s->opts.embed_command == NULL)
        return 0;
    copy = strndup(text, len);
    if (copy == NULL) {
        snprintf(err, errlen, "chunk: out of memory");
        return -1;
    }
    rc = embed_text(s, copy, len, out, err, errlen);
    free(copy);
    return rc;
}
