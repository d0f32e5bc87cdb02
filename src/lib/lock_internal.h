/*
 * lock_internal.h: the dlock_lock object, shared by lock.c and watchdog.c.
 *
 * Field ownership: key, fence_key, channel and token are written once by
 * the acquiring thread before the lock is published to the watchdog and
 * are read-only after.  valid_until_us and lost are atomics: the watchdog
 * writes them, the owner reads them.  The watchdog links (watched, renewing,
 * next_renew_us, wnext, wprev) belong to the watchdog's mutex.  holds and
 * rnext belong to the client's reentrant_mu.
 */
#ifndef DLOCK_SRC_LOCK_INTERNAL_H
#define DLOCK_SRC_LOCK_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "client_internal.h"
#include "dlock/lock.h"

struct dlock_lock {
    dlock_client *client;
    char *key;
    char *fence_key;
    char *legacy_fence_key;   /* read only, see fence.h */
    char *channel;
    char token[DLOCK_TOKEN_LEN + 1];
    int64_t ttl_ms;
    uint64_t fence;
    int64_t fence_gap_us;     /* after DLOCK_UNPROVEN: the server's clock
                               * is this far behind the client's floor */
    atomic_llong valid_until_us;  /* monotonic; 0 = unknown or expired */
    atomic_int lost;
    int degraded;

    int reentrant;
    pthread_t owner;
    int holds;
    struct dlock_lock *rnext;

    dlock_lost_fn on_lost;
    void *on_lost_arg;
    int watchdog;
    int watched;
    int renewing;
    int64_t next_renew_us;
    struct dlock_lock *wnext;
    struct dlock_lock *wprev;
};

/* The scripts the client loads at warm-up, NULL-terminated. */
extern const dlock__script *const dlock__core_scripts[];

/*
 * Runs the extend script for lock with ttl_ms: returns DLOCK_OK (still ours,
 * TTL reset; valid_until_us updated from the time the request left),
 * DLOCK_LOST (the token is gone), or a transport error.  Used by
 * dlock_extend and the watchdog; does not mark the lock lost.
 */
dlock_err dlock__lock_renew(dlock_lock *lock, int64_t ttl_ms, dlock__msg *m);

/* Marks the lock lost (once) and counts it; returns 1 if this call did. */
int dlock__lock_mark_lost(dlock_lock *lock);

#endif /* DLOCK_SRC_LOCK_INTERNAL_H */
