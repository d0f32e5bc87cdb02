/*
 * svc_deadline.h: the calling thread's deadline, for every dependency call
 * a request makes.
 *
 * A request has one total budget (reviewd: REVIEWD_REQUEST_BUDGET_MS).
 * The HTTP layer sets the thread's deadline when it dispatches a request
 * and clears it after; the modules that wait on a server (PostgreSQL,
 * MongoDB) ask how long they may still wait, so the waits of one request
 * together never outlast its budget, whichever dependency they are on.
 * A thread without a deadline (background work) waits up to the cap the
 * caller passes, so no wait is ever unbounded.
 *
 * The deadline is thread-local: each thread sees only its own, and no
 * lock is needed.  Times are CLOCK_MONOTONIC milliseconds.
 */
#ifndef SVC_DEADLINE_H
#define SVC_DEADLINE_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC now, in milliseconds. */
int64_t svc_deadline_now_ms(void);

/* CLOCK_MONOTONIC ms from now (ms >= 0), as a timespec: the absolute
 * time for pthread_cond_timedwait on a condition variable set to
 * CLOCK_MONOTONIC. */
struct timespec svc_deadline_timespec_in(int ms);

/* Sets this thread's deadline to now + budget_ms (budget_ms <= 0 clears
 * it). */
void svc_deadline_start(int budget_ms);

/* Lowers this thread's deadline to now + ms if that comes earlier (or
 * sets it if none is set); returns the previous deadline (0: none), to be
 * given back to svc_deadline_restore.  For a probe with a shorter bound. */
int64_t svc_deadline_tighten(int ms);
void svc_deadline_restore(int64_t at_ms);

/* Moves this thread's deadline ms later, if it has one (a test build's
 * pause that must not eat the budget). */
void svc_deadline_extend(int ms);

/* Clears this thread's deadline. */
void svc_deadline_clear(void);

/* The milliseconds this thread may still wait: until its deadline, and
 * at most cap_ms (cap_ms <= 0: no cap; with no deadline and no cap, -1,
 * "forever").  0 once the deadline has passed. */
int svc_deadline_left_ms(int cap_ms);

#endif /* SVC_DEADLINE_H */
