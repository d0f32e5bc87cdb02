/*
 * pattern_record.h: a claimable record with a stored result, the engine of
 * idempotency (pattern_idem.c) and single-flight (pattern_once.c).
 *
 * Both patterns answer the same question in one step: "has this work been
 * done, is someone doing it, or is it mine to do?"  The record is one Redis
 * hash, "{KIND:NAME}", with the fields
 *   state    "run" while a claimer works, "done" once it stored a result;
 *   token    the claimer's owner token (128 random bits);
 *   value    the result bytes (binary-safe), in state "done";
 *   waiters  how many callers are waiting for it (for the wake-up count).
 * and a TTL: the claimer's lease in state "run" (a claimer that dies
 * leaves the record only until then), the keep time in state "done".
 *
 * States of a dlock__record, moved by the functions below:
 *   FIRST     claim found no record and made one in state "run" with our
 *             token: we do the work; complete, abort or extend act on it.
 *   DONE      claim found state "done" (value copied), or complete stored
 *             ours (value is what we stored).
 *   finished  after complete or abort (or a LOST answer from either):
 *             nothing more is sent.
 * Every script checks the token, so a claimer whose lease ran out can
 * neither complete nor abort the next claimer's record, and each script
 * may be sent twice (retry_safe): claim by the token check, complete and
 * abort by answering "ours" or "gone".
 */
#ifndef DLOCK_SRC_PATTERN_RECORD_H
#define DLOCK_SRC_PATTERN_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "client/client_internal.h"
#include "patterns/pattern_lease.h"

typedef enum dlock__record_status {
    DLOCK__RECORD_NONE = 0,
    DLOCK__RECORD_FIRST = 1,
    DLOCK__RECORD_DONE = 2
} dlock__record_status;

typedef struct dlock__record {
    dlock_client *client;
    const char *what; /* "idempotency key", for messages */
    char *name;
    char *key;
    char *channel;
    dlock__pattern_lease lease; /* token, TTL and validity of a claim */
    dlock__record_status status;
    int finished;
    char *value; /* NUL-terminated copy, len bytes before */
    size_t len;
} dlock__record;

/* Largest result a record stores. */
#define DLOCK__RECORD_VALUE_MAX ((size_t)16 * 1024 * 1024)

/*
 * Allocates a record for name (copied) of kind ("idem", "once") with a new
 * token.  what is a static string for messages.  Returns DLOCK_OK,
 * DLOCK_INVALID (bad name), DLOCK_NOMEM or DLOCK_SYSTEM; *out is NULL
 * unless DLOCK_OK.
 */
dlock_err dlock__record_new(dlock_client *c, const char *kind,
                            const char *what, const char *name,
                            dlock__record **out, dlock__msg *m);

/* Frees the record without talking to Redis; NULL is fine. */
void dlock__record_free(dlock__record *r);

/*
 * Claims the record with a lease of ttl_ms, waiting up to wait_ms (0: one
 * try; < 0: forever) while another claimer holds it.  Returns DLOCK_OK
 * with status FIRST or DONE, DLOCK_BUSY (still claimed by another when the
 * wait ran out; the busy TTL is set), or a transport error.
 */
dlock_err dlock__record_claim(dlock__record *r, int64_t ttl_ms,
                              int64_t wait_ms, dlock__msg *m);

/*
 * Stores value (len bytes, copied) as the result, keeps the record for
 * keep_ms (0: without expiry) and wakes every waiter.  Only in state FIRST,
 * once.  Returns DLOCK_OK (status DONE, value is ours), DLOCK_LOST (the
 * lease had run out and the record is gone or another's), DLOCK_STATE,
 * DLOCK_INVALID, DLOCK_NOMEM or a transport error.
 */
dlock_err dlock__record_complete(dlock__record *r, const void *value,
                                 size_t len, int64_t keep_ms, dlock__msg *m);

/* Deletes a FIRST record and wakes the waiters, one of whom becomes the
 * next claimer.  Returns DLOCK_OK, DLOCK_LOST, DLOCK_STATE or a transport
 * error. */
dlock_err dlock__record_abort(dlock__record *r, dlock__msg *m);

/* Sets a FIRST record's lease to ttl_ms from now (0: the claim's).
 * Returns DLOCK_OK, DLOCK_LOST, DLOCK_STATE, DLOCK_INVALID or a transport
 * error. */
dlock_err dlock__record_extend(dlock__record *r, int64_t ttl_ms,
                               dlock__msg *m);

#endif /* DLOCK_SRC_PATTERN_RECORD_H */
