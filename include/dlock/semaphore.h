/*
 * dlock/semaphore.h: a counting semaphore with a lease on every permit.
 *
 * N permits for a shared resource (connections to a licence server, slots
 * of a GPU pool, concurrent exports): at most N holders at any moment,
 * across every process and machine.  Each permit is a lease with its own
 * TTL, so a holder that crashes gives its permit back when the TTL runs
 * out, not never.
 *
 *     dlock_semaphore *sem;
 *     dlock_permit *p;
 *     dlock_semaphore_new(c, "export-slots", 4, &sem);
 *     if (dlock_semaphore_acquire(sem, 30000, 5000, &p) == DLOCK_OK) {
 *         run_export();                  // at most 4 of these at once
 *         dlock_semaphore_release(p);
 *     }
 *     dlock_semaphore_free(sem);
 *
 * Redis keys, for a semaphore named S (one cluster slot):
 *   {sem:S}:holders  a sorted set: each holder's token, scored by its
 *                    expiry in server milliseconds; the key's own TTL
 *                    reaches at least the latest expiry (it may outlast
 *                    a lease released early), so an unused semaphore
 *                    disappears.
 *   {sem:S}:fence    the last grant number (see dlock_permit_fence); it
 *                    expires 30 days after the TTL of the last grant.
 * Every step is one Lua call that first drops expired holders by the
 * server's clock (TIME), so expiry never depends on a client's clock, and
 * then grants only while fewer than N remain.  A release publishes on
 * "dlock:sem:S" so that a waiter wakes at once.
 *
 * N is not stored in Redis: every user of a name must pass the same N
 * (one constant in shared code).  A smaller N on one client makes that
 * client stricter, never the others looser.
 *
 * Lifetime: dlock_semaphore_new creates a handle (no round trip) and
 * dlock_semaphore_free frees it; free every permit first.  A permit comes
 * from dlock_semaphore_acquire; dlock_semaphore_release gives it back in
 * Redis and frees it, whatever it returns; dlock_permit_free frees it
 * without talking to Redis (the permit then returns by its TTL).  All
 * accept NULL.
 *
 * Buffers: the name is copied.  Strings returned are borrowed for the
 * life of their object.
 *
 * Threads: a dlock_semaphore handle is read-only after it is made: any
 * number of threads share one.  A dlock_permit belongs to the thread that
 * holds it and must not be used by two threads at once, except
 * dlock_permit_valid_ms and dlock_permit_lost, which any thread may call
 * while it exists.  The one callback (dlock_permit_on_lost) runs on the
 * client's watchdog timer thread.
 */
#ifndef DLOCK_SEMAPHORE_H
#define DLOCK_SEMAPHORE_H

#include <stdint.h>

#include "dlock/client.h"
#include "dlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_semaphore dlock_semaphore;
typedef struct dlock_permit dlock_permit;

/* Most permits a semaphore may have. */
#define DLOCK_SEMAPHORE_MAX_PERMITS 1000000

/*
 * Makes a handle for the semaphore named name (1..DLOCK_KEY_MAX bytes)
 * with permits permits (1..DLOCK_SEMAPHORE_MAX_PERMITS).  No round trip.
 * Returns DLOCK_OK, DLOCK_INVALID or DLOCK_NOMEM; *out is NULL unless
 * DLOCK_OK.
 */
DLOCK_API dlock_err dlock_semaphore_new(dlock_client *client, const char *name,
                                        int permits, dlock_semaphore **out);

/* Frees the handle.  NULL is fine. */
DLOCK_API void dlock_semaphore_free(dlock_semaphore *sem);

/*
 * Takes one permit with a lease of ttl_ms (1 ms..1 year), waiting up to
 * wait_ms (0: one try; < 0: forever) while all are held, woken when one is
 * released.  Returns DLOCK_OK with *out the permit; DLOCK_BUSY when none
 * was free in time (dlock_client_busy_ttl_ms says when the first lease
 * runs out); DLOCK_UNPROVEN when no grant number above the ones seen can
 * be shown (see dlock_permit_fence); DLOCK_INVALID, DLOCK_NOMEM or a transport error.  Costs one
 * round trip when a permit is free.
 */
DLOCK_API dlock_err dlock_semaphore_acquire(dlock_semaphore *sem,
                                            int64_t ttl_ms, int64_t wait_ms,
                                            dlock_permit **out);

/*
 * Gives the permit back and wakes a waiter, then frees the permit whatever
 * the outcome.  Returns DLOCK_OK (held until now), DLOCK_LOST (its lease
 * had run out: it may have been granted to someone else meanwhile) or a
 * transport error (the permit returns by its TTL).  NULL is DLOCK_OK.
 */
DLOCK_API dlock_err dlock_semaphore_release(dlock_permit *permit);

/*
 * Sets the permit's lease to ttl_ms from now (0: its current TTL) if it is
 * still held.  Returns DLOCK_OK, DLOCK_LOST (the lease had run out; the
 * permit is marked lost), DLOCK_STATE (lost already), DLOCK_INVALID or a
 * transport error.
 */
DLOCK_API dlock_err dlock_semaphore_extend(dlock_permit *permit,
                                           int64_t ttl_ms);

/*
 * How many permits are free now (by the server's clock: expired leases
 * count as free), into *free_permits.  A snapshot for metrics and health
 * checks; to take one, acquire.  Returns DLOCK_OK or a transport error.
 */
DLOCK_API dlock_err dlock_semaphore_available(dlock_semaphore *sem,
                                              int *free_permits);

/* The semaphore's name and permits, as given to dlock_semaphore_new. */
DLOCK_API const char *dlock_semaphore_name(const dlock_semaphore *sem);
DLOCK_API int dlock_semaphore_permits(const dlock_semaphore *sem);

/* Frees the permit without talking to Redis.  NULL is fine. */
DLOCK_API void dlock_permit_free(dlock_permit *permit);

/*
 * Calls fn(permit, arg) once when the permit's lease is lost: at its
 * valid_until (below) if no renewal moved it on, whether or not Redis ever
 * answers again, or when an extend or release finds it gone.  fn runs on
 * the client's watchdog timer thread (or on the thread whose call found the
 * loss); it must return quickly and must not free or release the permit
 * (stop the work, then release on the owner's thread).  fn NULL removes
 * the callback.  Returns DLOCK_OK, DLOCK_STATE (lost already: fn is never
 * called), DLOCK_NOMEM or DLOCK_INVALID.
 */
typedef void (*dlock_permit_lost_fn)(dlock_permit *permit, void *arg);
DLOCK_API dlock_err dlock_permit_on_lost(dlock_permit *permit,
                                         dlock_permit_lost_fn fn, void *arg);

/* Milliseconds the permit's lease is still known to run: from the send
 * time of the request that granted or last renewed it, on CLOCK_BOOTTIME
 * (it keeps counting while the host sleeps), plus the TTL, minus a drift
 * allowance (1% + 2 ms), so it ends before the server's.  0 when lost or
 * expired.  Any thread. */
DLOCK_API int64_t dlock_permit_valid_ms(const dlock_permit *permit);

/* The permit's grant number (> 0): it grows with every grant of any permit
 * of this semaphore, so a resource can tell a newer grant from an older
 * one; not a mutual-exclusion fence (N holders share the resource).  It is
 * never lower than a grant number or fence this client saw before, even
 * after a Redis restart that lost the counter with the server's clock
 * behind: then acquire waits until the server's clock passes it (within
 * wait_ms) or fails with DLOCK_UNPROVEN. */
DLOCK_API uint64_t dlock_permit_fence(const dlock_permit *permit);

/* 1 once the lease is lost: its valid_until passed, or an extend or
 * release found it gone; else 0.  Any thread. */
DLOCK_API int dlock_permit_lost(const dlock_permit *permit);

/* The permit's owner token (DLOCK_TOKEN_LEN hex digits), borrowed. */
DLOCK_API const char *dlock_permit_token(const dlock_permit *permit);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_SEMAPHORE_H */
