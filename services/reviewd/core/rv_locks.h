/*
 * rv_locks.h: the distributed locks in front of submit, approve and
 * reject.
 *
 * reviewd takes every lock with wait 0 (a concurrent duplicate gets 409 at
 * once) and fail-open: when Redis is off (no REDIS_URL), down, or answers
 * with an error, the request goes on without the lock, flagged degraded,
 * because the PostgreSQL transaction under it (row locks and state checks)
 * is the last word on state.  A degraded decision stores no fence.
 *
 * libdlock's breaker makes lock calls fail fast while Redis is down and
 * probes until it is back, so recovery needs no restart; rv_monitor.c
 * pings through rv_locks_ping to tell /readyz how Redis is.  Nothing here
 * logs per request: failures are counted in the metrics.
 *
 * Ownership: rv_locks_new / rv_locks_free.  An rv_held is filled by
 * rv_locks_acquire and emptied by rv_locks_release.
 * Threads: an rv_locks is shared by every worker; an rv_held belongs to
 * the request's thread.
 */
#ifndef RV_LOCKS_H
#define RV_LOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "core/rv_config.h"
#include "svc_log.h"
#include "core/rv_metrics.h"

typedef struct rv_locks rv_locks;

/* A lock taken for one request. */
typedef struct rv_held {
    struct dlock_lock *lock; /* NULL when degraded */
    uint64_t fence;          /* 0 when degraded */
    rv_lock_outcome outcome;
} rv_held;

/*
 * Creates the lock client from cfg (copying what it needs); with no
 * REDIS_URL every lock is degraded.  A REDIS_URL that libdlock refuses
 * (malformed, bad options) is an error: NULL with "REDIS_URL: ..." in
 * errbuf.  Redis being down is not an error.
 */
rv_locks *rv_locks_new(const rv_config *cfg, svc_log *log, rv_metrics *m,
                       char *errbuf, size_t errlen);
void rv_locks_free(rv_locks *locks);

/*
 * Takes the lock named key for ttl_ms without waiting.  Returns the
 * outcome (also in held->outcome and in the metrics): RV_LOCK_OK and
 * RV_LOCK_DEGRADED and RV_LOCK_ERROR mean "go on" (release afterwards),
 * RV_LOCK_BUSY means "answer 409" (nothing to release).
 */
rv_lock_outcome rv_locks_acquire(rv_locks *locks, const char *key,
                                 int64_t ttl_ms, rv_held *held);

/* Releases what rv_locks_acquire took (no-op when degraded). */
void rv_locks_release(rv_locks *locks, rv_held *held);

/* 1 if REDIS_URL is set. */
int rv_locks_configured(const rv_locks *locks);

/* Pings Redis now (bypassing the breaker's fast fail, and feeding it).
 * Returns 1 if it answered, 0 if not (or not configured). */
int rv_locks_ping(rv_locks *locks);

/* Where the lock client points ("127.0.0.1:6379"), or "" when off. */
const char *rv_locks_endpoint(const rv_locks *locks);

/* Fills the client's counters and breaker state in g. */
void rv_locks_gauges(rv_locks *locks, rv_metrics_gauges *g);

#endif /* RV_LOCKS_H */
