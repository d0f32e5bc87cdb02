/*
 * svc_bulkhead.h: a circuit breaker and a concurrency cap for one
 * dependency (PostgreSQL, MongoDB), so that a dead or slow server costs
 * its own callers a fast refusal and nobody else a worker thread.
 *
 * Every blocking call on the dependency is bracketed by
 * svc_bulkhead_enter and svc_bulkhead_leave:
 *   - enter refuses (SVC_BULKHEAD_FULL) when max_concurrent calls are
 *     already waiting on a server that is failing (the last call could
 *     not reach it, or the breaker is not closed): the threads beyond the
 *     cap stay free for the requests that do not need it (and for
 *     /healthz), while a healthy server under a burst is never refused;
 *   - enter refuses (SVC_BULKHEAD_OPEN) while the breaker is open: after
 *     `failures` calls in a row could not reach the server (refused,
 *     timed out, connection lost), it stays open for open_ms, then lets
 *     one trial call through (half-open); the trial's success closes it,
 *     its failure opens it for another open_ms.
 * leave says whether the call reached the server (an SQL error or a
 * missing record is the server answering, not a failure of it).
 *
 * Threads: a bulkhead is shared by every thread (one mutex, held for a
 * few instructions; never while a call waits).  Created by
 * svc_bulkhead_new, freed by svc_bulkhead_free (NULL is fine).
 */
#ifndef SVC_BULKHEAD_H
#define SVC_BULKHEAD_H

#include <stddef.h>
#include <stdint.h>

typedef struct svc_bulkhead svc_bulkhead;

typedef enum svc_bulkhead_rc {
    SVC_BULKHEAD_OK = 0,   /* go ahead; call svc_bulkhead_leave after */
    SVC_BULKHEAD_OPEN = 1, /* the breaker is open: fail fast */
    SVC_BULKHEAD_FULL = 2  /* max_concurrent calls are waiting already */
} svc_bulkhead_rc;

typedef enum svc_breaker_state {
    SVC_BREAKER_CLOSED = 0,
    SVC_BREAKER_OPEN = 1,
    SVC_BREAKER_HALF_OPEN = 2
} svc_breaker_state;

/* What /metrics shows. */
typedef struct svc_bulkhead_stats {
    svc_breaker_state state;
    int64_t in_flight;     /* calls waiting on the server now */
    uint64_t opened;       /* times the breaker opened */
    uint64_t refused_open; /* calls refused by the open breaker */
    uint64_t refused_full; /* calls refused by the cap */
} svc_bulkhead_stats;

/* max_concurrent >= 1, failures >= 1, open_ms >= 1.  NULL when out of
 * memory.  name ("postgres", "mongo") is copied, for messages. */
svc_bulkhead *svc_bulkhead_new(const char *name, int max_concurrent,
                               int failures, int open_ms);
void svc_bulkhead_free(svc_bulkhead *b);

svc_bulkhead_rc svc_bulkhead_enter(svc_bulkhead *b);
/* After a call that enter let through: reached = 1 when the server
 * answered (whatever it said), 0 when it could not be reached in time. */
void svc_bulkhead_leave(svc_bulkhead *b, int reached);

/* After a call that enter let through and that ended without telling
 * whether the server can be reached (cut short when another call on the
 * same connection failed): frees its place, judges nothing. */
void svc_bulkhead_release(svc_bulkhead *b);

void svc_bulkhead_stats_get(svc_bulkhead *b, svc_bulkhead_stats *out);

/* "closed", "open", "half_open". */
const char *svc_breaker_state_name(svc_breaker_state s);

/* A message for a refusal, e.g. "postgres: circuit breaker open (5
 * failures in a row; next trial in 740 ms)", into buf. */
void svc_bulkhead_describe(svc_bulkhead *b, svc_bulkhead_rc rc, char *buf,
                           size_t len);

#endif /* SVC_BULKHEAD_H */
