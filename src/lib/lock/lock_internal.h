/*
 * lock_internal.h: what lock.c lets the watchdog and the client see of a
 * dlock_lock.
 *
 * The struct itself is lock.c's.  The watchdog renews a lock through the
 * two renewal calls below (it formats the request, sends it on its own
 * connection and hands the reply back), and reports a loss it found by
 * time through dlock__lock_mark_lost and dlock__lock_fire_lost.
 */
#ifndef DLOCK_SRC_LOCK_INTERNAL_H
#define DLOCK_SRC_LOCK_INTERNAL_H

#include <stdint.h>

#include "client/client_internal.h"
#include "dlock/lock.h"
#include "base/lease.h"

/* The lock's key (its name); lives as long as the lock. */
const char *dlock__lock_key(const dlock_lock *lock);

/* The lock's lease (its validity); lives as long as the lock. */
dlock__lease *dlock__lock_lease(dlock_lock *lock);

/* 1 if the lock has an on_lost callback. */
int dlock__lock_has_callback(const dlock_lock *lock);

/*
 * Formats the renewal request of lock (an EVAL of the extend script with
 * the lease's TTL) into *cmd, allocated with malloc (free it with free), and
 * begins its lease ticket in *ticket.  Returns the length, or -1 when out of
 * memory (then no ticket was begun).
 */
long long dlock__lock_renew_command(dlock_lock *lock, char **cmd,
                                    dlock__lease_ticket *ticket);

/*
 * Ends the renewal that *ticket began with its reply r (NULL: no answer)
 * received at recv_us (dlock__boot_us).  Returns DLOCK_OK (renewed),
 * DLOCK_LOST (the token is gone: the lock is marked lost, and the return
 * tells whether this call marked it through *marked), or DLOCK_PROTOCOL /
 * DLOCK_SERVER / DLOCK_TIMEOUT (no renewal).
 */
dlock_err dlock__lock_renew_reply(dlock_lock *lock,
                                  dlock__lease_ticket *ticket,
                                  const redisReply *r, int64_t recv_us,
                                  int *marked);

/*
 * 1 when the client's renewals cannot ride the renewer's pipeline: a
 * Redlock renewal is a round on every master, and a renewal that waits
 * for replicas (wait_replicas) is followed by WAIT on its connection.
 * The renewer then renews such locks one at a time through
 * dlock__lock_renew_sync.
 */
int dlock__lock_renews_in_rounds(dlock_client *c);

/*
 * Renews lock now with its lease's TTL, as dlock_extend does, on the
 * calling thread (the renewer's), without running on_lost: *marked says
 * whether this call marked the lock lost.  Returns DLOCK_OK (renewed),
 * DLOCK_LOST, or another error (not renewed: try again).  Bounded by the
 * I/O timeout (and the WAIT timeout), or by the Redlock per-node timeout.
 */
dlock_err dlock__lock_renew_sync(dlock_lock *lock, int *marked);

/* Marks the lock lost and counts it; returns 1 for the one call that did
 * (that caller then runs dlock__lock_fire_lost). */
int dlock__lock_mark_lost(dlock_lock *lock);

/* Runs the lock's on_lost callback, if it has one. */
void dlock__lock_fire_lost(dlock_lock *lock);

/* 1 if the lock is lost by its lease (marked, or its validity ran out). */
int dlock__lock_is_lost(dlock_lock *lock);

/* The client's registry of reentrant locks (owned by the client, created
 * and freed through these calls; its contents are lock.c's). */
typedef struct dlock__reentry dlock__reentry;
dlock_err dlock__reentry_new(dlock__reentry **out, dlock__msg *m);
void dlock__reentry_free(dlock__reentry *r);

/* Loads the core lock's scripts on the client's server (warm-up). */
dlock_err dlock__lock_load_scripts(dlock_client *c, dlock__msg *m);

#endif /* DLOCK_SRC_LOCK_INTERNAL_H */
