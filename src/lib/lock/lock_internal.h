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

/* The client the lock belongs to. */
dlock_client *dlock__lock_client(const dlock_lock *lock);

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

/*
 * The plain acquire in two steps, so that the blocking acquire (try_once)
 * and the asynchronous one (async.c) share one meaning of the request and
 * of its answer.  dlock__lock_acquire_prepare formats the acquire script's
 * KEYS and ARGV into q (5 keys, 9 arguments in q->argv, which point into
 * q and the lock) with the client's fence floor, and begins the request's
 * lease ticket now: call it just before the request is queued for
 * sending, so that validity counts from no later than the write.
 * dlock__lock_acquire_finish ends the ticket exactly once with what came
 * back: err (a transport error, r NULL) or the script's reply r (taken:
 * it is freed), acked replicas (with wait_replicas) and waiting (fair
 * only).  It returns DLOCK_OK (fence and validity set, floor raised),
 * DLOCK_BUSY (*holder_ttl_ms set), DLOCK_UNPROVEN (status 2: no fence
 * above the floor), DLOCK_PROTOCOL, or err wrapped with the lock's name.
 */
typedef struct dlock__acquire_req {
    char ttl[24];
    char floor[24];
    char keep[24];
    const char *argv[9];
    uint64_t floor_us;
    dlock__lease_ticket ticket;
} dlock__acquire_req;

void dlock__lock_acquire_prepare(dlock_lock *lock, dlock__acquire_req *q);
dlock_err dlock__lock_acquire_finish(dlock_lock *lock, dlock__acquire_req *q,
                                     dlock_err err, redisReply *r, int acked,
                                     int waiting, int64_t *holder_ttl_ms,
                                     dlock__msg *m);

/* What one acquire script call answered. */
typedef struct dlock__acquire_answer {
    int status;      /* 1 granted, 0 busy, 2 fence not provable */
    uint64_t fence;  /* when granted */
    long long pttl;  /* when busy */
    uint64_t now_us; /* the server's clock */
} dlock__acquire_answer;

/* Reads an acquire script's answer into *a: the plain script's words
 * "1 fence now", "0 -2 now" (a free key with fair waiters) and "2 now",
 * the table {0, pttl, now} (a busy key; the fair scripts' too), or the
 * tables {1, fence, now} and {2, now} that the scripts answered before.
 * 0 if r is none of these exactly (a fence of 0, a word too many, a now
 * of 0), and *a then undefined. */
int dlock__lock_acquire_answer(const redisReply *r, dlock__acquire_answer *a);

/* The core lock's acquire and release scripts (static, never freed). */
const dlock__script *dlock__lock_acquire_script(void);
const dlock__script *dlock__lock_release_script(void);

/* A new lock on key with its token, opts checked as dlock_acquire checks
 * them (the name, the TTL, the policy); not held.  *out is NULL on
 * failure. */
dlock_err dlock__lock_create(dlock_client *c, const char *key,
                             const dlock_acquire_opts *opts, dlock_lock **out,
                             dlock__msg *m);

/* A lock just granted, as dlock_acquire leaves it: registered with the
 * watchdog for renewals (opts->watchdog) and its on_lost timer. */
dlock_err dlock__lock_held(dlock_lock *lock, const dlock_acquire_opts *opts,
                           dlock__msg *m);

/* The message of a busy acquire (holder_ttl_ms: the script's PTTL). */
void dlock__lock_busy_message(const dlock_lock *lock, int64_t holder_ttl_ms,
                              int64_t started_us, dlock__msg *m);

/* A request of lock's token that may have run, but whose answer is not
 * known: the watchdog releases the key with the same token in the
 * background, so it leaves no orphan. */
void dlock__lock_leave_no_orphan(dlock_lock *lock);

/*
 * The plain release in steps (dlock_release runs them, and so does the
 * asynchronous release): dlock__lock_release_begin takes the lock off the
 * watchdog and returns 1 if its validity had run out already;
 * dlock__lock_release_args formats the release script's 2 KEYS and 3
 * ARGV (id holds the release's id); dlock__lock_release_reply reads what
 * came back (err, or the reply r, which it frees; resent: the request was
 * sent again after its connection failed): DLOCK_OK, DLOCK_LOST or an
 * error; dlock__lock_release_end then leaves no orphan after a timeout
 * and reports a loss (on_lost) as dlock_release does, returning the
 * release's outcome.  The caller frees the lock after.
 * dlock__lock_release_plain is 1 for a lock these steps serve alone: not
 * fair, not degraded, not Redlock's, not a reentrant hold of several.
 */
int dlock__lock_release_plain(const dlock_lock *lock);
int dlock__lock_release_begin(dlock_lock *lock);
void dlock__lock_release_args(dlock_lock *lock, char id[24],
                              const char *argv[5]);
dlock_err dlock__lock_release_reply(dlock_lock *lock, dlock_err err,
                                    redisReply *r, int resent, dlock__msg *m);
dlock_err dlock__lock_release_end(dlock_lock *lock, int expired, dlock_err err,
                                  dlock__msg *m);

/*
 * The extend in steps, as dlock_extend runs it, for the asynchronous
 * extend: dlock__lock_extend_check refuses what dlock_extend refuses
 * (a negative TTL, a degraded or lost lock; a lock whose validity ran out
 * is reported lost and on_lost runs) and turns *ttl_ms 0 into the lease's
 * TTL; dlock__lock_extend_prepare formats the extend script's 1 KEY and 2
 * ARGV (ttl holds the TTL) and begins the request's lease ticket: call it
 * just before the request is queued; dlock__lock_extend_finish ends the
 * ticket with err or the reply r (freed), runs on_lost if the token was
 * gone, and on success makes ttl_ms the TTL renewals ask for.  Returns
 * DLOCK_OK, DLOCK_LOST, DLOCK_PROTOCOL or err.
 */
dlock_err dlock__lock_extend_check(dlock_lock *lock, int64_t *ttl_ms,
                                   dlock__msg *m);
dlock__lease_ticket dlock__lock_extend_prepare(dlock_lock *lock,
                                               int64_t ttl_ms, char ttl[24],
                                               const char *argv[3]);
dlock_err dlock__lock_extend_finish(dlock_lock *lock, dlock__lease_ticket *t,
                                    int64_t ttl_ms, dlock_err err,
                                    redisReply *r, dlock__msg *m);
const dlock__script *dlock__lock_extend_script(void);

#endif /* DLOCK_SRC_LOCK_INTERNAL_H */
