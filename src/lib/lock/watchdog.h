/*
 * watchdog.h: what keeps a client's held locks honest while their owners
 * are busy elsewhere.
 *
 * Two threads per client, each with one job, so that nothing one does can
 * delay the other:
 *   renewer  renews watchdog locks at a third of their TTL on its own
 *            connection (never the application's pool).  Renewals are
 *            pipelined: every lock that is due is sent at once, and replies
 *            are read as they come, so 200 locks on a slow server are
 *            renewed side by side, not one after another.  A request is
 *            worth waiting for only until its lock's validity ends; when
 *            the oldest one outlives that, the connection is replaced.  The
 *            renewer also undoes orphans: a request that may have run
 *            without us seeing the answer (a timed-out acquire or release)
 *            is resolved with the same token by a release sent here until
 *            it has undone it or the key's TTL has run out anyway.  On a
 *            Redis Cluster each key has its own master and there is no
 *            one connection: the renewer sends each request through the
 *            client's routing (the key's master, its pool, redirections)
 *            one after another instead.
 *   timer    wakes at the earliest valid_until of the locks it watches and
 *            marks each lost that is past it, whether or not any reply ever
 *            comes; it runs on_lost callbacks (for losses found by time or
 *            by a renewal's answer).
 * Breaker probes run on a third thread (prober.h).
 *
 * A lock is registered with dlock__watchdog_watch (renew = 0 registers it
 * only with the timer, for a lock with a callback and no renewal); a
 * pattern's grant (pattern_lease.h) with dlock__watchdog_watch_lease, to
 * the timer only, through a small table of what the timer needs.  After
 * dlock__watchdog_unwatch returns, neither thread touches the lock again;
 * unwatch never waits on the network, only on a callback of that lock that
 * is running, or (for a client that renews in rounds: Redlock, or the
 * wait_replicas option, lock_internal.h) on a renewal of that lock in
 * progress, which its own timeouts bound.
 *
 * Threads: every function is thread-safe, except that dlock__watchdog_free
 * must be the last call.
 */
#ifndef DLOCK_SRC_WATCHDOG_H
#define DLOCK_SRC_WATCHDOG_H

#include "client/client_internal.h"
#include "base/lease.h"

typedef struct dlock__watch dlock__watch;

/* Starts both threads.  Returns DLOCK_OK, DLOCK_NOMEM or DLOCK_SYSTEM. */
dlock_err dlock__watchdog_new(dlock_client *c, dlock__watchdog **out,
                              dlock__msg *m);

/* Stops and joins the threads, drops orphans not yet undone; NULL is
 * fine. */
void dlock__watchdog_free(dlock__watchdog *w);

/* Registers lock (held, its lease granted); *out is the handle for the
 * calls below.  Returns DLOCK_OK or DLOCK_NOMEM. */
dlock_err dlock__watchdog_watch(dlock__watchdog *w, dlock_lock *lock,
                                int renew, dlock__watch **out, dlock__msg *m);

/*
 * What the timer needs of a lease that is not a core lock (a pattern's
 * permit, hold or term, pattern_lease.h): its lease; mark_lost, which
 * answers 1 for the one call that marked it; fire_lost, run on the timer
 * thread with the watchdog's mutex released after mark_lost answered 1
 * (or after nothing, if the owner has no callback).
 */
typedef struct dlock__watch_ops {
    dlock__lease *(*lease)(void *owner);
    int (*mark_lost)(void *owner);
    void (*fire_lost)(void *owner);
} dlock__watch_ops;

/* Registers owner with the timer only (no renewal): at its lease's
 * valid_until it is marked lost and fire_lost runs, once.  Returns
 * DLOCK_OK or DLOCK_NOMEM. */
dlock_err dlock__watchdog_watch_lease(dlock__watchdog *w,
                                      const dlock__watch_ops *ops, void *owner,
                                      dlock__watch **out, dlock__msg *m);

/* As dlock__watchdog_watch, for a fair lock held on a grant message
 * (lock_fair.c): its first renewal, the confirm that sets the full TTL, is
 * sent 200 us from now without waking the renewer now (watchdog.c, its
 * alarm), and again every 50 ms while it fails short of a loss;
 * after it, renew says whether the renewals go on. */
dlock_err dlock__watchdog_watch_confirm(dlock__watchdog *w, dlock_lock *lock,
                                        int renew, dlock__watch **out,
                                        dlock__msg *m);

/* Forgets the lock or lease; see the top of this file.  NULL is fine. */
void dlock__watchdog_unwatch(dlock__watchdog *w, dlock__watch *watch);

/* The lock's lease changed under its owner (dlock_extend): the next
 * renewal is a third of the new TTL from now, and the timer re-reads the
 * lock's validity. */
void dlock__watchdog_reschedule(dlock__watchdog *w, dlock__watch *watch);

/* Validity may have shrunk (a step of the server's clock was seen): the
 * timer re-reads every lock's validity. */
void dlock__watchdog_recheck(dlock__watchdog *w);

/*
 * Resolves a request that may have run unseen: sends script s (as EVAL,
 * nkeys keys first in argv, copied) on the renewer's connection, again
 * with backoff (50 ms doubling to 2 s) until it answers 1 (undone: the
 * original may still be on its way on the dead connection, so an answer
 * of 0 is not the end), or for at most ttl_ms (after that the key has
 * expired by itself).  Best effort: out of memory, it is dropped.
 */
void dlock__watchdog_cleanup(dlock__watchdog *w, const dlock__script *s,
                             int nkeys, int argc, const char **argv,
                             int64_t ttl_ms);

#endif /* DLOCK_SRC_WATCHDOG_H */
