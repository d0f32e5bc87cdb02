/*
 * notify.h: release notifications for waiters.
 *
 * Each client has at most one subscriber connection, owned by one thread,
 * shared by every waiter of that client.  A waiter joins the channel of
 * the key it waits for (the first joiner subscribes), waits on its own
 * condition variable, and leaves (the last one out unsubscribes).
 *
 * Wake-ups: a message on a channel wakes the longest-waiting waiter of that
 * channel, not all of them, so a release hands the key to one contender of
 * this client and not a herd.  The confirmation of a SUBSCRIBE, and a lost
 * subscriber connection, wake every waiter of the channel: a release that
 * happened before the subscription took effect would otherwise be missed,
 * so each waiter tries again once it is subscribed.  Waiters also wake at
 * their own deadline, which the wait loop (wait.h) sets from the holder's
 * remaining TTL: the fallback for a holder that dies without releasing.
 *
 * A waiter that was woken but leaves without waiting again passes its
 * wake-up to the next waiter, so no notification is swallowed.  The
 * payload of the last non-empty message that woke a waiter (up to
 * DLOCK__NOTIFY_MSG_MAX bytes) is kept for it: a fair grant travels in it
 * (lock_fair.h).
 *
 * A release made by a thread of this client can wake the waiter itself
 * (dlock__notify_released), without waiting for the message to come
 * through the subscriber thread; the message then wakes nobody.
 *
 * A direct waiter (dlock__notify_join_direct) has the channel on a
 * connection of its own and is woken by its socket, not by this thread.
 * When it leaves, its channel stays subscribed on the kept connection
 * until the next direct waiter takes that connection (which unsubscribes
 * it in the write of its own SUBSCRIBE) or it is closed.
 *
 * Threads: thread-safe.  A dlock__waiter belongs to the thread that joined.
 */
#ifndef DLOCK_SRC_NOTIFY_H
#define DLOCK_SRC_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

#include "client/client_internal.h"

typedef struct dlock__waiter dlock__waiter;

/* Starts the subscriber thread (it connects in the background).
 * Returns DLOCK_OK, DLOCK_NOMEM or DLOCK_SYSTEM. */
dlock_err dlock__notifier_new(dlock_client *c, dlock__notifier **out);

/* Stops the thread and frees everything; no waiter may remain. */
void dlock__notifier_free(dlock__notifier *n);

/*
 * Joins channel; *out is NULL on failure (the caller polls).  *subscribed
 * is 1 if the channel was already subscribed: releases from now on wake
 * the waiter, but one since the caller's last try was missed, so it tries
 * again at once.  0: the SUBSCRIBE confirmation (or a lost connection)
 * will wake it, and that try covers the gap.  Returns DLOCK_OK,
 * DLOCK_NOMEM or DLOCK_SYSTEM.
 */
dlock_err dlock__notify_join(dlock__notifier *n, const char *channel,
                             dlock__waiter **out, int *subscribed);

/*
 * Joins channel as a direct waiter: on a connection of its own (one kept
 * from an earlier direct waiter, else a new one), on whose socket
 * dlock__notify_wait sleeps, so a message wakes the waiting thread with
 * no other thread between (notify.c, "Direct waiters").  For a channel
 * only this waiter listens on (a fair waiter's own).  The SUBSCRIBE
 * confirmation wakes it, as for a channel not yet subscribed.  A new
 * connection's connect, handshake and SUBSCRIBE give up at deadline_us
 * (clock.h; the end of the caller's wait) if that comes before the
 * connect and I/O timeouts, and so does a reconnect in
 * dlock__notify_wait (at its deadline): a fair acquire that may wait
 * 200 ms never blocks for the connect timeout behind a silent network.
 * *out is NULL on failure (DLOCK_NOMEM, or the connect or send's error,
 * DLOCK_TIMEOUT at deadline_us): the caller joins the shared way.
 */
dlock_err dlock__notify_join_direct(dlock__notifier *n, const char *channel,
                                    int64_t deadline_us, dlock__waiter **out);

/* Waits until w's SUBSCRIBE is confirmed, or deadline_us (clock.h); 1 if
 * it was: every message published from now on reaches w, and the
 * confirmation, read here, no longer wakes it.  0 on a failed connection
 * (the next wait reconnects, and that confirmation wakes it), at the
 * deadline (the confirmation, when it comes, wakes it), or if w is not a
 * direct waiter. */
int dlock__notify_direct_confirmed(dlock__notifier *n, dlock__waiter *w,
                                   int64_t deadline_us);

/* How many direct waiters' connections are kept for the next one (at
 * most DLOCK__NOTIFY_KEPT_MAX). */
int dlock__notify_kept(dlock__notifier *n);
#define DLOCK__NOTIFY_KEPT_MAX 16

/* Makes w keep its place when woken (notify.c, wake_one): for waiters of
 * whom any one can use a release (an exclusive lock's), so the longest
 * waiting is woken first until it leaves. */
void dlock__notify_set_fifo(dlock__notifier *n, dlock__waiter *w);

/*
 * Called by a thread of this client whose release of a key has just
 * deleted it (its reply said so), with id, the payload that release
 * published on channel (unique to the release: the released grant's
 * fence).  Wakes the longest-waiting waiter on channel at once, as the
 * message would when it came through the subscriber thread (notify.c);
 * the message, matched by id, then wakes nobody, and if it came first
 * this call wakes nobody.  Nothing happens for an empty id or when
 * nobody of this client waits on channel.  Returns 1 if it woke a waiter.
 */
int dlock__notify_released(dlock__notifier *n, const char *channel,
                           const char *id);

/* 1 if a waiter of this notifier is joined on channel. */
int dlock__notify_has_waiters(dlock__notifier *n, const char *channel);

/* Waits until woken or deadline_us; returns 1 if woken, 0 on deadline. */
int dlock__notify_wait(dlock__notifier *n, dlock__waiter *w,
                       int64_t deadline_us);

/* The longest message payload kept for a waiter; longer ones only wake. */
#define DLOCK__NOTIFY_MSG_MAX 64

/* Copies the payload kept for w (see the top of this file) into buf (cap
 * bytes, not NUL-terminated) and forgets it; returns its length, 0 if none
 * (or it does not fit). */
size_t dlock__notify_take_message(dlock__notifier *n, dlock__waiter *w,
                                  char *buf, size_t cap);

/* Leaves the channel and frees w; NULL is fine. */
void dlock__notify_leave(dlock__notifier *n, dlock__waiter *w);

#endif /* DLOCK_SRC_NOTIFY_H */
