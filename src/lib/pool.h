/*
 * pool.h: the client's connection pool.
 *
 * The pool bounds how many connections a client opens (pool_size) and lends
 * idle ones out, most recently used first, so a busy client reuses warm
 * connections and an idle one can let the rest age.  It does not connect:
 * when no idle connection is there but a slot is free, the borrower gets a
 * slot and opens the connection itself, outside the pool's mutex, so a slow
 * connect never blocks other borrowers.
 *
 * Invariant: open == idle count + lent connections + slots being connected,
 * and open <= max.  Each borrow is matched by exactly one dlock__pool_return
 * (with the connection, or NULL for a slot whose connect failed).
 *
 * Threads: every function is thread-safe.
 */
#ifndef DLOCK_SRC_POOL_H
#define DLOCK_SRC_POOL_H

#include <pthread.h>
#include <stdint.h>

#include "conn.h"

typedef struct dlock__pool {
    pthread_mutex_t mu;
    pthread_cond_t freed; /* signalled when a slot or connection returns */
    dlock__conn **idle;
    int nidle;
    int open;
    int lent;
    int max;
} dlock__pool;

/* Returns DLOCK_OK, DLOCK_NOMEM or DLOCK_SYSTEM. */
dlock_err dlock__pool_init(dlock__pool *p, int max);

/* Frees idle connections; all lent ones must have come back. */
void dlock__pool_destroy(dlock__pool *p);

/* Waits until deadline for an idle connection (*conn set) or a free slot
 * (*conn NULL: the caller connects, then returns the result).  Returns
 * DLOCK_OK or DLOCK_TIMEOUT (every connection stayed busy). */
dlock_err dlock__pool_borrow(dlock__pool *p, int64_t deadline_us,
                             dlock__conn **conn);

/* Gives back a borrowed connection, or NULL for a slot that did not connect.
 * A broken connection is freed and its slot released. */
void dlock__pool_return(dlock__pool *p, dlock__conn *conn);

/* Frees every idle connection (after a transport failure they are likely
 * dead too, as after a server restart). */
void dlock__pool_drop_idle(dlock__pool *p);

/* Snapshot of open and lent connections. */
void dlock__pool_counts(dlock__pool *p, int *open, int *lent);

#endif /* DLOCK_SRC_POOL_H */
