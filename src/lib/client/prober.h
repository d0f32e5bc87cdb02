/*
 * prober.h: the thread that closes the circuit breaker.
 *
 * While a client's breaker is open, every call fails fast; this thread
 * connects and PINGs every breaker_probe_ms, and on success closes the
 * breaker and gives the connection to the pool.  It has a thread of its
 * own because a probe can block for the whole connect timeout, and
 * nothing that keeps locks honest (renewals, the validity timer, on_lost
 * callbacks: watchdog.h) may wait behind it.
 *
 * Threads: every function is thread-safe, except that dlock__prober_free
 * must be the last call.
 */
#ifndef DLOCK_SRC_PROBER_H
#define DLOCK_SRC_PROBER_H

#include "client/client_internal.h"

typedef struct dlock__prober dlock__prober;

/* Starts the thread.  Returns DLOCK_OK, DLOCK_NOMEM or DLOCK_SYSTEM. */
dlock_err dlock__prober_new(dlock_client *c, dlock__prober **out,
                            dlock__msg *m);

/* Stops and joins the thread; NULL is fine. */
void dlock__prober_free(dlock__prober *p);

/* Wakes the thread to probe at once (the breaker just opened). */
void dlock__prober_kick(dlock__prober *p);

#endif /* DLOCK_SRC_PROBER_H */
