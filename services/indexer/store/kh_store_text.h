/*
 * kh_store_text.h: the text an event indexes and its chunks' embeddings,
 * private to store/.
 *
 * The text comes from the store CONTENT_STORE names, as reviewd wrote
 * it.  With pg it is joined to the document row by the claim, so it is
 * already in the row's result.  With mongo the row is read first (FOR
 * SHARE), and only once it is known to be approved at the event's
 * version is record (id, version) fetched through reviewd's own MongoDB
 * module (svc_content_mongo.c): that record is immutable once the row
 * points at it (rv_content.h), so the row lock and the record agree.  A
 * record that is missing, malformed or unreachable fails the event
 * (KH_FAILED, rolled back, retried later) and is never indexed as an
 * empty text.
 *
 * Ownership: a kh_doc borrows its strings from res (which it owns) or
 * owns them (owned); kh_doc_clear frees both.  Threads: as kh_store.h.
 */
#ifndef KH_STORE_TEXT_H
#define KH_STORE_TEXT_H

#include <libpq-fe.h>

#include "kh_store_conn.h"

/* A document as the claim read it. */
typedef struct kh_doc {
    PGresult *res;
    const char *status;
    int version;
    const char *title;
    const char *content;
    size_t content_len;
    char *owned; /* the text when it came from MongoDB */
} kh_doc;

/* Frees what d holds and zeroes it. */
void kh_doc_clear(kh_doc *d);

/* With MongoDB, fetches the text of d->version into d->content (owned);
 * with pg does nothing.  Returns 0, or -1 with err naming the record and
 * what went wrong. */
int kh_store_load_text(kh_store *s, const kh_event *ev, kh_doc *d, char *err,
                       size_t errlen);

/* The embedding of text[0..len) as a PostgreSQL array literal in *out
 * (malloc'd), or NULL when no EMBED_COMMAND is set.  Returns 0, or -1
 * with err set (the command failed, or no memory). */
int kh_store_embed_span(const kh_store *s, const char *text, size_t len,
                        char **out, char *err, size_t errlen);

#endif /* KH_STORE_TEXT_H */
