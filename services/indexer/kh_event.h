/*
 * kh_event.h: the document.approved event kh-indexer consumes, and what
 * applying one did.
 *
 * An event is parsed and checked here, before any database work, so that
 * a malformed message is dropped (and logged) by kh_main.c without
 * touching PostgreSQL, and the store (store/kh_store.h) only ever sees
 * well-formed ids: a UUID-shaped event id and a canonical bigint
 * document id, which it passes to PostgreSQL as text parameters.
 *
 * Ownership: a kh_event is a plain value with its strings inside it.
 * Threads: reentrant.
 */
#ifndef KH_EVENT_H
#define KH_EVENT_H

#include <stddef.h>

/* What applying an event did. */
typedef enum kh_outcome {
    KH_INDEXED = 0, /* chunks replaced, event recorded */
    KH_STALE,       /* recorded; the document is not at that approval */
    KH_DUPLICATE,   /* seen before: nothing done */
    KH_FAILED       /* rolled back; retry later (err says why) */
} kh_outcome;

/* One document.approved event, as API.md's Events section defines it. */
typedef struct kh_event {
    char event_id[64];
    char document_id[24];
    int document_version;
} kh_event;

/*
 * Parses an event body (JSON) into ev.  Returns 0, or -1 with err set when
 * it is not an object with a UUID-shaped event_id, type
 * "document.approved", a canonical document_id and a positive
 * document_version.
 */
int kh_event_parse(const char *body, size_t len, kh_event *ev, char *err,
                   size_t errlen);

/* "indexed", "stale", "duplicate" or "failed". */
const char *kh_outcome_name(kh_outcome outcome);

#endif /* KH_EVENT_H */
