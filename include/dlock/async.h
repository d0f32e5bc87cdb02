/*
 * dlock/async.h: locks driven from the caller's event loop, without
 * blocking.
 *
 * A dlock_async is for a service built on an event loop (epoll, libuv,
 * libevent) that holds many locks from one thread.  The blocking API costs
 * a thread per waiting caller and a thread wake-up per reply; here one
 * thread drives any number of acquires and releases in flight on one
 * connection: queued commands go out together, in one write and a few
 * more while a batch of replies is completed (so that the server starts
 * on them early), and each reply completes its command, strictly in send
 * order, by calling its callback.  The caller owns the loop, as with
 * hiredis's async context or libpq's non-blocking mode:
 *
 *     dlock_async_new(client, &a);
 *     register dlock_async_fd(a) with the loop;
 *     loop:
 *         want = dlock_async_events(a);        (READ, and WRITE when
 *                                               commands are queued)
 *         wait for want, at most dlock_async_timeout_ms(a);
 *         dlock_async_process(a, what came);   (I/O, callbacks, deadlines)
 *
 * docs/async.md has a complete epoll loop (examples/async/).
 *
 * What a lock acquired here is.  dlock_async_acquire is the synchronous
 * dlock_acquire with wait_ms 0, nothing less: the same acquire script,
 * the lease counted from before the request was written (so validity
 * never counts from the reply), the client's fence floor (a grant whose
 * fence the client cannot show is above everything it has seen answers
 * DLOCK_UNPROVEN), the server clock's skew, the watchdog (opts.watchdog)
 * and on_lost.  The lock it completes with is an ordinary dlock_lock,
 * which the caller owns: dlock_lock_fence, dlock_lock_valid_ms,
 * dlock_extend, dlock_release and dlock_lock_free work on it as on any
 * lock (they block), and dlock_async_release releases it without blocking
 * (also a lock acquired with dlock_acquire).
 *
 * Deadlines and failures.  Each command must be answered within the
 * client's io_timeout_ms from when it was queued.  A command past its
 * deadline fails with DLOCK_TIMEOUT and the connection is closed (a late
 * reply would be taken for the next command's): every command written
 * and not answered then completes with DLOCK_TIMEOUT too, and every
 * command not yet written with DLOCK_UNAVAILABLE.  A connection that fails
 * (reset, closed, a reply that cannot be parsed) completes the written
 * commands with that error and the unwritten ones with DLOCK_UNAVAILABLE.
 * So does, for a Sentinel client, a command answered READONLY or
 * MASTERDOWN: its master was demoted by a failover, so the command did
 * not run (it fails with DLOCK_UNAVAILABLE, the server's answer in its
 * message), and dlock_async_reconnect asks the sentinels for the new
 * master.  A Sentinel release or extend answered "not held" is reported
 * DLOCK_LOST only once a ROLE the handle sends behind it names a master
 * (a demoted one answers from its copy): otherwise it fails with
 * DLOCK_UNAVAILABLE and the handle closes as above.
 * Nothing that may have run is ever sent again by the library: an acquire
 * or release that may have run is reported as failed, and the watchdog
 * releases its token
 * in the background (as the synchronous API does after a timeout), so an
 * acquire that ran unseen leaves no orphan and no lock is ever claimed
 * held that was not answered.  A failure counts once in the client's
 * circuit breaker; while the breaker is open, a new command fails at once
 * with DLOCK_UNAVAILABLE.  After a failure the handle is closed:
 * dlock_async_fd returns -1, new commands fail with DLOCK_UNAVAILABLE, and
 * dlock_async_reconnect opens a new connection (a new descriptor, which
 * the loop must register again).  The one command sent again is one the
 * server answered NOSCRIPT (it lost its script cache, so the script did
 * not run): it goes out once more with the script's body, with a new
 * deadline, and the commands after it carry the body too.
 *
 * What it does not do, refused with DLOCK_INVALID when asked:
 *   - waiting (opts.wait_ms != 0): a busy lock completes with DLOCK_BUSY
 *     at once; try again later from the loop (a timer) if you must;
 *   - fair locks (opts.fair) and reentrancy (opts.reentrant), on acquire
 *     and on release (release those with dlock_release);
 *   - DLOCK_FAIL_OPEN (opts.policy): a degraded lock is not handed out;
 *     the failure comes back instead;
 *   - clients on redlock:// and redis+cluster:// URLs, clients with
 *     wait_replicas, and TLS (rediss://) connections, at dlock_async_new:
 *     single servers (redis://, unix://) and Sentinel masters
 *     (redis+sentinel://) are served.
 *
 * Ownership.  dlock_async_new makes a handle that dlock_async_free frees;
 * the client must outlive it.  Lock names are copied; a completed lock
 * is the caller's.  A lock given to dlock_async_release is the library's
 * from then on: it is freed before the callback runs, whatever the outcome.
 *
 * Threads.  A dlock_async belongs to one thread at a time (the loop's);
 * its client may be used by other threads meanwhile.  Callbacks run on
 * that thread, inside dlock_async_process (or dlock_async_free); a
 * callback may call dlock_async_acquire, dlock_async_release,
 * dlock_async_extend and the synchronous API, but not dlock_async_free or
 * dlock_async_reconnect.
 * dlock_async_free completes every pending command with DLOCK_STATE
 * ("the handle was freed") before it returns, and no callback runs after
 * it returns.
 */
#ifndef DLOCK_ASYNC_H
#define DLOCK_ASYNC_H

#include <stdint.h>

#include "dlock/client.h"
#include "dlock/error.h"
#include "dlock/lock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_async dlock_async;

/* What dlock_async_events wants and dlock_async_process is told. */
#define DLOCK_ASYNC_READ 1
#define DLOCK_ASYNC_WRITE 2

/*
 * Called once per acquire: err is DLOCK_OK with lock the caller's (free it
 * with dlock_release, dlock_async_release or dlock_lock_free), or an error
 * with lock NULL: DLOCK_BUSY (held by another owner), DLOCK_UNPROVEN (no
 * fence above the client's floor can be shown), DLOCK_TIMEOUT,
 * DLOCK_UNAVAILABLE, DLOCK_SERVER, DLOCK_PROTOCOL, DLOCK_NOMEM, or
 * DLOCK_STATE when the handle was freed first.  errmsg says why, with
 * the lock's name and the server (borrowed for the call only; "" on
 * success).
 */
typedef void (*dlock_async_acquire_fn)(dlock_async *a, dlock_err err,
                                       dlock_lock *lock, const char *errmsg,
                                       void *arg);

/*
 * Called once per release: DLOCK_OK (released), DLOCK_LOST (the key no
 * longer held our token, or the lock's validity had run out: the work it
 * protected was not protected to the end; on_lost has run), or an error
 * (the release's outcome is not known; the token is released in the
 * background).  The lock is already freed.
 */
typedef void (*dlock_async_release_fn)(dlock_async *a, dlock_err err,
                                       const char *errmsg, void *arg);

/*
 * Called once per extend: DLOCK_OK (validity renewed from when the extend
 * was queued, and renewals ask for its TTL from now on), DLOCK_LOST (the
 * key no longer held our token: on_lost has run), or an error (the
 * validity keeps its old end, or an earlier one).  lock is the one given
 * to dlock_async_extend, still the caller's.
 */
typedef void (*dlock_async_extend_fn)(dlock_async *a, dlock_err err,
                                      dlock_lock *lock, const char *errmsg,
                                      void *arg);

/*
 * Makes a handle with its own connection to c's server (for Sentinel, the
 * current master), connected before this returns (it blocks for at most
 * the client's connect timeout) and with the lock scripts loaded.
 * Returns DLOCK_OK with *out set, DLOCK_INVALID for a client it cannot
 * serve (see the top of this file), or the connection's error;
 * dlock_client_errmsg(c) says why.
 */
DLOCK_API dlock_err dlock_async_new(dlock_client *c, dlock_async **out);

/* Completes every pending command with DLOCK_STATE (the acquires and
 * releases that may have run are released in the background), closes the
 * connection and frees a.  No callback runs after it returns.  NULL is
 * fine.  Not from a callback. */
DLOCK_API void dlock_async_free(dlock_async *a);

/* The socket to watch, or -1 while the handle is closed (after a
 * failure, until dlock_async_reconnect). */
DLOCK_API int dlock_async_fd(const dlock_async *a);

/* DLOCK_ASYNC_READ (while the handle is open), with DLOCK_ASYNC_WRITE
 * while commands wait to be written; 0 while closed. */
DLOCK_API int dlock_async_events(const dlock_async *a);

/* Milliseconds until the earliest pending command's deadline (0: due
 * now), or -1 with nothing pending: the loop's wait timeout. */
DLOCK_API int dlock_async_timeout_ms(const dlock_async *a);

/* Commands queued or in flight. */
DLOCK_API int dlock_async_pending(const dlock_async *a);

/*
 * Does what revents (DLOCK_ASYNC_READ / DLOCK_ASYNC_WRITE, or 0 on a
 * timeout) allows: writes the queued commands, reads and completes the
 * answered ones in order, and fails those past their deadline.  Calling
 * it with events that did not come is harmless.  Returns DLOCK_OK, or the
 * error that closed the connection in this call (every pending command
 * has then completed; see the top of this file).
 */
DLOCK_API dlock_err dlock_async_process(dlock_async *a, int revents);

/*
 * One turn of a loop that drives this handle alone: waits with poll(2)
 * for what dlock_async_events asks, at most max_ms (-1: no bound of its
 * own) and never past the next deadline, then calls dlock_async_process
 * with what came (on a closed handle it does not wait).  For programs and
 * tests without an event loop of their own; a service with one watches
 * dlock_async_fd there instead.  Returns dlock_async_process's result.
 */
DLOCK_API dlock_err dlock_async_poll(dlock_async *a, int max_ms);

/* Opens a new connection for a closed handle (blocking, within the
 * client's connect timeout); DLOCK_OK at once if it is open.  Refused
 * with DLOCK_UNAVAILABLE while the client's breaker is open. */
DLOCK_API dlock_err dlock_async_reconnect(dlock_async *a);

/*
 * Queues a try-acquire of key (copied) with opts (NULL: the defaults of
 * dlock_acquire_opts_init; wait_ms, fair, reentrant and DLOCK_FAIL_OPEN
 * are refused).  cb runs once, from dlock_async_process, with the
 * outcome.  Returns DLOCK_OK when queued, or an error (cb will not run):
 * DLOCK_INVALID (bad name or options), DLOCK_UNAVAILABLE (the handle is
 * closed or the breaker open), DLOCK_NOMEM.  The detail of an error is
 * dlock_async_errmsg(a).
 */
DLOCK_API dlock_err dlock_async_acquire(dlock_async *a, const char *key,
                                        const dlock_acquire_opts *opts,
                                        dlock_async_acquire_fn cb, void *arg);

/*
 * Queues the release of lock (any plain lock of a's client, acquired here
 * or with dlock_acquire): from now on the lock is the library's, and it is
 * freed before cb runs.  Returns DLOCK_OK when queued; or DLOCK_INVALID
 * (a fair, reentrant, degraded or Redlock lock, or another client's:
 * release it with dlock_release) and DLOCK_UNAVAILABLE, DLOCK_NOMEM,
 * with the lock still the caller's and cb never run.
 */
DLOCK_API dlock_err dlock_async_release(dlock_async *a, dlock_lock *lock,
                                        dlock_async_release_fn cb, void *arg);

/*
 * Queues an extend of lock (a lock of a's client) to ttl_ms (0: its TTL),
 * as dlock_extend does.  The lock stays the caller's, who must neither
 * free nor release it (blocking) until cb has run; an async release queued
 * after it is fine (commands complete in order).  Returns DLOCK_OK when
 * queued; or DLOCK_INVALID (a negative TTL, another client's lock, a
 * Redlock client), DLOCK_STATE (a degraded or lost lock), DLOCK_LOST (its
 * validity had run out: on_lost has run), DLOCK_UNAVAILABLE, DLOCK_NOMEM,
 * with cb never run.
 */
DLOCK_API dlock_err dlock_async_extend(dlock_async *a, dlock_lock *lock,
                                       int64_t ttl_ms,
                                       dlock_async_extend_fn cb, void *arg);

/* The message of a's last failed call (borrowed until the next call on
 * a); "" if none. */
DLOCK_API const char *dlock_async_errmsg(const dlock_async *a);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_ASYNC_H */
