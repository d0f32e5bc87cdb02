/*
 * pattern_lease.h: the one lease every pattern grant carries (a semaphore
 * permit, a read or write hold, a leadership term, a claimed record).
 *
 * It is the core lock's lease (lease.h) with what a pattern adds around
 * it, so that every pattern keeps the core's promises without its own
 * arithmetic:
 *   - valid_until is on CLOCK_BOOTTIME: the send time of the last request
 *     that granted or renewed the grant, plus the TTL, minus the drift
 *     allowance; overlapping requests update it in request order (every
 *     request runs between dlock__pattern_lease_begin and _end);
 *   - the grant is LOST at valid_until by itself: dlock__pattern_lease_lost
 *     reads 1 from then on, and a grant with a loss callback is registered
 *     with the client's watchdog timer (watchdog.h), which marks it and runs
 *     the callback once at valid_until whether or not any reply ever comes;
 *   - a renewal never outlives the grant: while it is in flight the calling
 *     thread's round trips end at valid_until at the latest (the client's
 *     per-thread io cap), and one that ends without an answer counts as a
 *     request that may have run;
 *   - fences go through the client's floor (fence.h): a grant script gets
 *     the floor as its last argument and hands out a new fence only above
 *     it, else answers {2, now}; the caller then waits until the server's
 *     clock passes the floor, as far as its wait allows, or fails with
 *     DLOCK_UNPROVEN.  A fence is never lower than one the client saw.
 *
 * Threads: a pattern lease belongs to the thread that holds its grant,
 * except dlock__pattern_lease_valid_ms and _lost, which any thread may call
 * while the grant exists, and the callback, which runs on the watchdog's
 * timer thread.
 */
#ifndef DLOCK_SRC_PATTERN_LEASE_H
#define DLOCK_SRC_PATTERN_LEASE_H

#include <stdint.h>

#include "client/client_internal.h"
#include "dlock/rwlock.h"
#include "dlock/semaphore.h"
#include "base/lease.h"
#include "base/token.h"
#include "client/wait.h"
#include "lock/watchdog.h"

/* Called once when the grant is found lost (timer thread or owner). */
typedef void (*dlock__pattern_lost_fn)(void *arg);

/* Whom a loss is told: a public callback with its object, or an internal
 * one with its argument. */
typedef struct dlock__pattern_callback {
    enum {
        DLOCK__LOST_NONE,
        DLOCK__LOST_PERMIT,
        DLOCK__LOST_HOLD,
        DLOCK__LOST_INTERNAL
    } kind;
    union {
        dlock_permit_lost_fn permit;
        dlock_rwlock_lost_fn hold;
        dlock__pattern_lost_fn internal;
    } fn;
    void *object; /* the dlock_permit or dlock_rwlock */
    void *arg;
} dlock__pattern_callback;

typedef struct dlock__pattern_lease {
    dlock_client *client;
    dlock__lease lease;
    char token[DLOCK_TOKEN_LEN + 1];
    uint64_t fence;       /* the last grant's fence or term */
    int64_t fence_gap_us; /* after {2, now}: how far the server is behind */
    dlock__watch *watch;  /* with the timer while on_lost is set */
    dlock__pattern_callback on_lost;
    /* For messages: "semaphore", "rwlock", ... and the object's name. */
    const char *what;
    const char *name;
} dlock__pattern_lease;

/* A lease of ttl_ms with a fresh token, not yet granted.  what and name
 * are borrowed for the lease's life.  Returns DLOCK_OK or the token's
 * error. */
dlock_err dlock__pattern_lease_init(dlock__pattern_lease *pl, dlock_client *c,
                                    int64_t ttl_ms, const char *what,
                                    const char *name, dlock__msg *m);

/* Leaves the timer (waiting for a callback of this lease that runs) and
 * frees what init made. */
void dlock__pattern_lease_destroy(dlock__pattern_lease *pl);

/* Leaves the timer (the callback is not run again); waits for a callback
 * of this lease that runs. */
void dlock__pattern_lease_leave_timer(dlock__pattern_lease *pl);

/* Starts over for a new grant with the same token (a leader's next term):
 * forgets validity, loss and fence.  Call dlock__pattern_lease_leave_timer
 * first; the caller keeps every other thread away from the lease while
 * this runs. */
void dlock__pattern_lease_reset(dlock__pattern_lease *pl, int64_t ttl_ms);

/*
 * Calls cb (copied; a NULL function or kind NONE removes it) once when the
 * grant is lost, on the watchdog's timer thread at valid_until or on the
 * owner's thread when a reply shows the loss; registers the lease with the
 * timer.  Returns DLOCK_OK, DLOCK_NOMEM or DLOCK_STATE (the grant is lost
 * already: cb is not called).
 */
dlock_err dlock__pattern_lease_on_lost(dlock__pattern_lease *pl,
                                       const dlock__pattern_callback *cb,
                                       dlock__msg *m);

/*
 * One grant attempt (a dlock__wait_try_fn's body): runs script s with the
 * client's floor appended to argv (so argc + 1 arguments go out), whose
 * answer is {1, fence} (granted), {0, pttl} (busy) or {2, now} (no fence
 * above the floor).  Returns DLOCK_OK (fence and validity set), DLOCK_BUSY
 * (*hint_ms set), DLOCK_UNPROVEN (fence_gap_us set) or an error.
 */
dlock_err dlock__pattern_lease_try(dlock__pattern_lease *pl,
                                   const dlock__script *s, int nkeys, int argc,
                                   const char **argv, int64_t *hint_ms,
                                   dlock__msg *m);

/* dlock__wait_run (wait.h), and after DLOCK_UNPROVEN a sleep until the
 * server's clock can pass the floor, while w's deadline allows. */
dlock_err dlock__pattern_lease_wait(dlock__pattern_lease *pl,
                                    const dlock__wait *w,
                                    dlock__wait_try_fn fn, void *arg,
                                    int64_t *hint_ms, dlock__msg *m);

/* Opens and closes one request on the lease (see lease.h); begin caps the
 * thread's round trips at valid_until while the grant is held, end lifts
 * the cap and records the outcome that err (the request's result) implies.
 * Returns err. */
dlock__lease_ticket dlock__pattern_lease_begin(dlock__pattern_lease *pl,
                                               int64_t ttl_ms);
dlock_err dlock__pattern_lease_end(dlock__pattern_lease *pl,
                                   const dlock__lease_ticket *t,
                                   dlock_err err);

/*
 * Runs script s (lens as dlock__client_eval's), which answers 1 (the
 * grant is ours) or 0 (it is gone), as a renewal for renew_ttl_ms (> 0: validity moves on when it answers 1)
 * or as a plain step (0: a release).  Returns DLOCK_OK, DLOCK_LOST (marked,
 * the callback run if this found it), DLOCK_PROTOCOL or a transport error.
 */
dlock_err dlock__pattern_lease_call(dlock__pattern_lease *pl,
                                    const dlock__script *s, int nkeys,
                                    int argc, const char **argv,
                                    const size_t *lens, int64_t renew_ttl_ms,
                                    dlock__msg *m);

/*
 * The extend of every pattern: refuses a grant that is lost (DLOCK_STATE)
 * or whose validity ran out (DLOCK_LOST, found here); ttl_ms 0 keeps the
 * current TTL; writes the TTL as decimal into ttl_arg (which argv holds)
 * and renews with s.  On DLOCK_OK the lease renews for ttl_ms from then on.
 */
dlock_err dlock__pattern_lease_extend(dlock__pattern_lease *pl, int64_t ttl_ms,
                                      const dlock__script *s, int nkeys,
                                      int argc, const char **argv,
                                      char ttl_arg[24], dlock__msg *m);

/* What every grant's public accessors answer (dlock_permit_valid_ms,
 * dlock_rwlock_fence, ...), each a one-line call of these.
 * valid_ms: milliseconds left (0 when lost or expired); any thread.
 * lost: 1 once the grant is lost: marked, or valid_until passed; any
 * thread.  fence: the last grant's fence or term (0 before a grant); the
 * owner's thread. */
int64_t dlock__pattern_lease_valid_ms(const dlock__pattern_lease *pl);
int dlock__pattern_lease_lost(const dlock__pattern_lease *pl);
uint64_t dlock__pattern_lease_fence(const dlock__pattern_lease *pl);

/* Marks the grant lost and runs the callback if this call marked it. */
void dlock__pattern_lease_found_lost(dlock__pattern_lease *pl);

/* The TTL renewals ask for. */
int64_t dlock__pattern_lease_ttl_ms(const dlock__pattern_lease *pl);

#endif /* DLOCK_SRC_PATTERN_LEASE_H */
