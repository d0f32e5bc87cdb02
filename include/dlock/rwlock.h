/*
 * dlock/rwlock.h: a read-write lock: many readers, or one writer.
 *
 * For data that is read often and changed rarely (a catalogue rebuilt
 * nightly, a model file swapped in place): readers share the lock, a
 * writer excludes readers and other writers.  Every grant is a lease with
 * a TTL, so a crashed reader or writer blocks others only until its TTL
 * runs out.
 *
 *     dlock_rwlock *l;
 *     if (dlock_rwlock_acquire(c, "catalogue", DLOCK_RWLOCK_READ, 10000,
 *                              2000, &l) == DLOCK_OK) {
 *         serve_from_catalogue();
 *         dlock_rwlock_release(l);
 *     }
 *
 * Redis keys, for a lock named L (one cluster slot):
 *   {rw:L}:readers  sorted set of reader tokens scored by lease expiry in
 *                   server milliseconds (expired readers are dropped by
 *                   the server's clock in every step);
 *   {rw:L}:writer   the writer's token, with its TTL;
 *   {rw:L}:intent   a waiting writer's token, for one second at a time:
 *                   while it exists no new reader is admitted, so a steady
 *                   stream of readers cannot starve a writer;
 *   {rw:L}:fence    the last fence granted, to a reader or a writer
 *                   (dlock_rwlock_fence); it expires 30 days after the
 *                   TTL of its last grant;
 *   {rw:L}:waiters  how many callers wait, so a release wakes them all.
 * Releases publish on "dlock:rw:L": a writer's release wakes every waiting
 * reader, the last reader's release wakes the waiting writer.
 *
 * Writers are preferred: a writer that waits blocks new readers and gets
 * the lock as soon as the readers present drain (or their leases run
 * out).  A writer that tries once (wait_ms 0) does not block readers.
 *
 * Lifetime: dlock_rwlock_acquire creates a dlock_rwlock (a held read or
 * write grant); dlock_rwlock_release releases it in Redis and frees it,
 * whatever it returns; dlock_rwlock_free frees it without talking to Redis
 * (the grant then expires by its TTL).  Both accept NULL.
 *
 * Buffers: the name is copied; strings returned are borrowed for the life
 * of the object.
 *
 * Threads: a dlock_rwlock belongs to the thread that holds it and must not
 * be used by two threads at once, except dlock_rwlock_valid_ms and
 * dlock_rwlock_lost, which any thread may call while it exists.  The one
 * callback (dlock_rwlock_on_lost) runs on the client's watchdog timer
 * thread.
 */
#ifndef DLOCK_RWLOCK_H
#define DLOCK_RWLOCK_H

#include <stdint.h>

#include "dlock/client.h"
#include "dlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_rwlock dlock_rwlock;

typedef enum dlock_rwlock_mode {
    /* Shared: any number of readers at once, while there is no writer. */
    DLOCK_RWLOCK_READ = 1,
    /* Exclusive: one writer, and no reader. */
    DLOCK_RWLOCK_WRITE = 2
} dlock_rwlock_mode;

/*
 * Takes the lock named name (1..DLOCK_KEY_MAX bytes) in mode, with a lease
 * of ttl_ms (1 ms..1 year), waiting up to wait_ms (0: one try; < 0:
 * forever), woken by releases.  Returns DLOCK_OK with *out the grant;
 * DLOCK_BUSY when it could not be had in time (dlock_client_busy_ttl_ms
 * says how long the blocking holder's lease still runs); DLOCK_UNPROVEN
 * when no fence above the ones seen can be shown (see
 * dlock_rwlock_fence); DLOCK_INVALID,
 * DLOCK_NOMEM or a transport error.  One round trip when it is free.
 */
DLOCK_API dlock_err dlock_rwlock_acquire(dlock_client *client,
                                         const char *name,
                                         dlock_rwlock_mode mode,
                                         int64_t ttl_ms, int64_t wait_ms,
                                         dlock_rwlock **out);

/*
 * Releases the grant and wakes the waiters it was blocking, then frees it
 * whatever the outcome.  Returns DLOCK_OK (held until now), DLOCK_LOST
 * (its lease had run out) or a transport error (it expires by its TTL).
 * NULL is DLOCK_OK.
 */
DLOCK_API dlock_err dlock_rwlock_release(dlock_rwlock *lock);

/* Sets the grant's lease to ttl_ms from now (0: the TTL it was acquired
 * with) if it is still held.  Returns DLOCK_OK, DLOCK_LOST (now marked
 * lost), DLOCK_STATE (lost already), DLOCK_INVALID or a transport error. */
DLOCK_API dlock_err dlock_rwlock_extend(dlock_rwlock *lock, int64_t ttl_ms);

/* Frees the grant without talking to Redis.  NULL is fine. */
DLOCK_API void dlock_rwlock_free(dlock_rwlock *lock);

/* The mode it was acquired in. */
DLOCK_API dlock_rwlock_mode dlock_rwlock_mode_of(const dlock_rwlock *lock);

/*
 * Calls fn(lock, arg) once when the grant's lease is lost: at its
 * valid_until (below) if no extend moved it on, whether or not Redis ever
 * answers again, or when an extend or release finds it gone.  fn runs on
 * the client's watchdog timer thread (or on the thread whose call found the
 * loss); it must return quickly and must not free or release the grant.
 * fn NULL removes the callback.  Returns DLOCK_OK, DLOCK_STATE (lost
 * already: fn is never called), DLOCK_NOMEM or DLOCK_INVALID.
 */
typedef void (*dlock_rwlock_lost_fn)(dlock_rwlock *lock, void *arg);
DLOCK_API dlock_err dlock_rwlock_on_lost(dlock_rwlock *lock,
                                         dlock_rwlock_lost_fn fn, void *arg);

/* Milliseconds the lease is still known to run: from the send time of the
 * request that granted or last extended it, on CLOCK_BOOTTIME, plus the
 * TTL, minus a drift allowance (1% + 2 ms), so it ends before the
 * server's.  0 when lost or expired.  Any thread. */
DLOCK_API int64_t dlock_rwlock_valid_ms(const dlock_rwlock *lock);

/*
 * The grant's fence (> 0).  Read and write grants of a name draw fences
 * from one counter by one rule, the core lock's: max(counter + 1, the
 * server's clock in microseconds), granted only above every fence and
 * server time this client saw before.  So a write grant's fence is a
 * fencing token: higher than every grant before it.  A read grant's fence
 * tells which writes it can see: every write granted before it has a lower
 * fence, every write granted after it a higher one (the generation of the
 * data it reads is the highest write fence below it), and it is never
 * lower than a fence this client saw, even after the counter expired (30
 * days after the last grant) or a Redis restart lost it with the server's
 * clock behind: then acquire waits, within wait_ms, or fails with
 * DLOCK_UNPROVEN.  (A read grant used to answer the last write's fence
 * itself, which went back to 0 once the counter was gone.)
 */
DLOCK_API uint64_t dlock_rwlock_fence(const dlock_rwlock *lock);

/* 1 once the lease is lost: its valid_until passed, or an extend or
 * release found it gone; else 0.  Any thread. */
DLOCK_API int dlock_rwlock_lost(const dlock_rwlock *lock);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_RWLOCK_H */
