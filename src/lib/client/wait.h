/*
 * wait.h: the one wait loop of libdlock, for the core lock and every
 * pattern that waits (semaphore, read-write lock, single-flight,
 * idempotency, leader election).
 *
 * A wait is a try function called again and again until it stops
 * answering DLOCK_BUSY.  Between tries the caller's thread sleeps on the
 * object's release channel (notify.h), so a release wakes it at once; the
 * fallback timer only matters when no release comes (a holder that died
 * and whose lease runs out):
 *   - busy, the holder's remaining time known (the hint): wake just after
 *     it runs out, with jitter, never sooner than a floor that doubles
 *     with every busy answer the timer (not a release) led to, so a holder
 *     renewing a short lease is not polled at its TTL for ever;
 *   - busy, no hint (no TTL, or a pattern that cannot tell): exponential
 *     backoff with jitter;
 *   - either way at most 10 s while subscribed (a release missed by a
 *     silently dead subscriber connection costs at most that), 200 ms when
 *     no notifier could be started.
 * So N waiters on a held key cost a few round trips each, not a steady
 * poll.  The channel is joined after the first busy answer; if it is not
 * subscribed yet, the SUBSCRIBE confirmation wakes every waiter of the
 * channel and that try covers a release between the busy answer and the
 * subscription; if it already is, the loop tries again at once.  A wait
 * that expects to be busy may subscribe before its first try instead
 * (dlock__wait.subscribe_first).
 *
 * Barging.  A release wakes the longest-waiting waiter of the client,
 * which then needs a round trip; a thread of the same client that has just
 * released and wants the key again would win that race almost every time,
 * so one waiter could lose release after release (the free-for-all hot
 * loop: nearly every grant went back to the releaser, and a waiter waited
 * up to a second).  With fifo set, a bounded wait whose client already has
 * waiters on the channel does not try first: it joins behind them and
 * tries when a release wakes it (or after a fallback of 150-200 ms, in
 * case no release comes).  A waiter a release woke that then loses the
 * key (to such a fallback try, or to another client) keeps its place at
 * the front, so the next release is its again.  Within one client the key
 * then goes round in order of arrival; across clients it is still first come, first served
 * at the server (a fair lock, lock_fair.h, queues across processes).
 *
 * Transport errors (DLOCK_UNAVAILABLE, DLOCK_TIMEOUT) end a bounded wait at
 * once, as before.  An unbounded wait (DLOCK__FOREVER) rides them out
 * unless fail_fast is set: it backs off exponentially (50 ms .. 2 s, with
 * jitter), and while the client's breaker is open it sleeps until the
 * background probe closes it (or a re-subscription shows Redis is back)
 * instead of failing fast over and over.  The try is repeated with the
 * same token, which every acquire script treats as "ours already", so an
 * acquire that timed out after the server applied it is resolved, not
 * orphaned.
 *
 * Threads: the loop runs on the caller's thread; the client's subscriber
 * thread, or a thread of the same client whose release freed the key
 * (notify.h, dlock__notify_released), only wakes it.
 */
#ifndef DLOCK_SRC_WAIT_H
#define DLOCK_SRC_WAIT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "client/client_internal.h"

/*
 * One try of a waiting call.  waiting is 1 when a DLOCK_BUSY answer will
 * be followed by a wait (a script that counts waiters should register),
 * 0 for a last or only try.  On DLOCK_BUSY, *hint_ms is how long the
 * holder keeps what we want (<= 0: unknown).  Any other answer ends the
 * wait, except the transport errors an unbounded wait rides out.
 */
typedef dlock_err (*dlock__wait_try_fn)(void *arg, int waiting,
                                        int64_t *hint_ms, dlock__msg *m);

/* What to wait for, and how long.  All pointers are borrowed for the
 * call. */
typedef struct dlock__wait {
    dlock_client *client;
    /* The release channel; NULL: poll only. */
    const char *channel;
    /* Absolute monotonic deadline (clock.h); DLOCK__FOREVER: no end. */
    int64_t deadline_us;
    /* Spreads the jitter of contenders (their tokens); may be NULL. */
    const char *seed;
    /* When not NULL, the wait ends (with the last try's answer) once it
     * reads non-zero; checked at least every 100 ms while asleep. */
    const atomic_int *cancel;
    /* Non-zero: a transport error ends even an unbounded wait (a fail-open
     * acquire degrades on it instead). */
    int fail_fast;
    /* The longest sleep without a notification, for a try that must be
     * repeated to keep something alive (a waiting writer's intent); 0:
     * the default 10 s. */
    int64_t poll_max_ms;
    /* When not NULL, the payload of a notification that woke the wait is
     * offered to it (with the try's arg) before the next try; answering
     * DLOCK__MSG_TAKEN ends the wait with DLOCK_OK, as a try that
     * succeeded would: the message carried what the try would have
     * fetched (a fair grant, lock_fair.h).  DLOCK__MSG_BUSY: the message
     * says what a busy answer would (the holder's time in *hint_ms, a fair
     * nudge), so the wait sleeps again without a try.  0: the try runs as
     * usual. */
    int (*take_message)(void *arg, const char *msg, size_t len,
                        int64_t *hint_ms);
    /* Non-zero: queue behind this client's waiters on the channel before
     * the first try (see "Barging" above).  For waits where one release
     * lets one waiter in (an exclusive lock), not where it may let in
     * several (readers, permits). */
    int fifo;
    /* Non-zero: the channel is this wait's alone (a fair waiter's own);
     * it is joined on a connection of its own, so a message wakes this
     * thread from its socket with no thread between (notify.h).  The
     * shared subscriber is the fallback if that connection cannot be
     * had. */
    int direct;
    /* Non-zero (with direct): the channel is joined before the first try,
     * and the try is sent once the SUBSCRIBE is confirmed, so a message
     * published after the try reaches the wait and no second try is
     * needed.  For a wait that expects to find the key busy (a fair
     * waiter whose client has just waited for the key, such as its
     * releaser looping back for it): the hand-off window then sees the
     * SUBSCRIBE and one try, not a try, the SUBSCRIBE and the try the
     * confirmation calls for.  It costs a round trip before the first try
     * when the key turns out to be free.  If the confirmation does not
     * come (a failed connection, the deadline), the wait goes on as
     * without it. */
    int subscribe_first;
} dlock__wait;

/* What take_message answers besides 0 (see dlock__wait). */
#define DLOCK__MSG_TAKEN 1
#define DLOCK__MSG_BUSY 2

/*
 * Runs try_fn(arg, ...) until it answers something other than DLOCK_BUSY
 * (or a transport error it rides out), the deadline passes, or cancel is
 * set.  *hint_ms receives the last hint.  Returns the last try's answer;
 * its message is in m.
 */
dlock_err dlock__wait_run(const dlock__wait *w, dlock__wait_try_fn try_fn,
                          void *arg, int64_t *hint_ms, dlock__msg *m);

/* Sleeps until deadline_us on the monotonic clock (a scheduled delay, such
 * as a rate limiter's reserved slot; not a wait for a condition). */
void dlock__wait_sleep_until(int64_t deadline_us);

#endif /* DLOCK_SRC_WAIT_H */
