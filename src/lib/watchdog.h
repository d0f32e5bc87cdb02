/*
 * watchdog.h: the client's background thread.
 *
 * One thread per client does the two jobs that must happen while callers
 * are busy elsewhere: it renews watchdog locks at about a third of their
 * TTL (Redisson's 30 s lease renewed every 10 s is the reference shape),
 * and while the circuit breaker is open it probes the server (connect and
 * PING every breaker_probe_ms) so the breaker closes soon after Redis is
 * back.
 *
 * A lock whose renewal finds the token gone, or that could not be renewed
 * before its known validity ran out, is marked lost and its callback runs,
 * on this thread.  Renewal happens outside the watchdog's mutex; a lock
 * being renewed is flagged, and dlock__watchdog_unwatch waits for that
 * renewal (and callback) to finish, so a released lock is never touched
 * afterwards.
 *
 * Threads: every function is thread-safe, except that dlock__watchdog_free
 * must be the last call.
 */
#ifndef DLOCK_SRC_WATCHDOG_H
#define DLOCK_SRC_WATCHDOG_H

#include "client_internal.h"
#include "lock_internal.h"

/* Starts the thread.  Returns DLOCK_OK, DLOCK_NOMEM or DLOCK_SYSTEM. */
dlock_err dlock__watchdog_new(dlock_client *c, dlock__watchdog **out,
                              dlock__msg *m);

/* Stops and joins the thread; NULL is fine. */
void dlock__watchdog_free(dlock__watchdog *w);

/* Starts renewing lock (first renewal at ttl/3 from now). */
void dlock__watchdog_watch(dlock__watchdog *w, dlock_lock *lock);

/* Stops renewing lock; returns once no renewal of it is under way. */
void dlock__watchdog_unwatch(dlock__watchdog *w, dlock_lock *lock);

/* Wakes the thread to start probing (the breaker just opened). */
void dlock__watchdog_kick(dlock__watchdog *w);

#endif /* DLOCK_SRC_WATCHDOG_H */
