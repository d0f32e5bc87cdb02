/*
 * rv_admit.h: how many write transactions run at once.
 *
 * reviewd's workers are many (REVIEWD_THREADS, sized for waiting on
 * PostgreSQL and Redis), but a write's transaction is work for
 * PostgreSQL's CPUs and for its row and index locks: on a small machine,
 * thirty-two transactions committing at once take longer each than six
 * do, and their tail is the sum of everyone's queueing inside the server
 * (docs/benchmarks.md, "Session 12: the cycle's tail").  The gate lets at
 * most REVIEWD_WRITE_CONCURRENCY write transactions run (by default three
 * per CPU, at least four); the others wait here, in reviewd, where waiting
 * costs nothing, within their request's budget (svc_deadline.h).  A
 * request whose budget runs out while waiting is answered 503 UNAVAILABLE
 * by its caller, as when PostgreSQL does not answer in time.
 *
 * A write takes its place before anything others contend for and holds
 * it until its transaction ends (rv_tx.h): submit, approve and reject
 * wait here first and only then take their Redis lock (without waiting),
 * so a request waiting for a place holds no lock that would turn another
 * request on its document away with 409 LOCK_BUSY, and no lock TTL runs
 * down while it waits.  The price: while Redis does not answer and the
 * client's breaker has not opened yet, a place is held during the lock's
 * timeout (REVIEWD_REDIS_TIMEOUT_MS); once the breaker is open the lock
 * fails fast and the write runs degraded under its place as usual.
 *
 * Reads are not gated: they take no row locks and the event loops answer
 * most of them.
 *
 * Ownership: rv_admit_new / rv_admit_free.  Threads: enter and leave from
 * any thread; stats from any thread.
 */
#ifndef RV_ADMIT_H
#define RV_ADMIT_H

#include <stdint.h>

typedef struct rv_admit rv_admit;

/* A gate for at most `places` at once (>= 1).  NULL out of memory. */
rv_admit *rv_admit_new(int places);
void rv_admit_free(rv_admit *a);

/* Takes a place, waiting while all are taken, until the calling thread's
 * deadline (svc_deadline.h; capped at cap_ms, which bounds a thread
 * without one).  0 with a place taken (give it back with rv_admit_leave),
 * -1 when the deadline came first. */
int rv_admit_enter(rv_admit *a, int cap_ms);
void rv_admit_leave(rv_admit *a);

/* For /metrics. */
typedef struct rv_admit_stats {
    int64_t running;   /* places taken now */
    int64_t waiting;   /* callers waiting for one now */
    uint64_t timeouts; /* callers whose deadline came while waiting */
} rv_admit_stats;
void rv_admit_stats_get(rv_admit *a, rv_admit_stats *out);

#endif /* RV_ADMIT_H */
