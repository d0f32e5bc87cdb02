/*
 * dlock/lock.h: the distributed lock itself.
 *
 * A lock is a Redis key holding a random owner token with a TTL.  Acquire
 * is one Lua call that sets the key only if it is absent and, in the same
 * step, advances the key's fencing counter; release and extend are Lua calls
 * that act only while the stored token is still ours.  So a lock that
 * expired under a paused holder can never be released or extended by it
 * once someone else holds the key, and every grant carries a fence number
 * that a protected resource can use to refuse writes from an older grant.
 *
 * Redis keys, for a lock named K:
 *   K                  the lock: the owner token, with the TTL (PEXPIRE).
 *   #dlock:fence:{K}   the last fence granted for K (#dlock:fence:K when K
 *                      has a cluster hash tag already), so the counter sits
 *                      in K's hash slot.  It expires 30 days after the
 *                      lock's TTL from its last grant; the next fence then
 *                      comes from the server's clock, 30 days on.
 *   {K}:fence          the counter of earlier versions (K:fence with a
 *                      hash tag): read by acquire, never written, so an
 *                      upgrade never lowers a fence.  It is an ordinary
 *                      lock name now, independent of K.
 * Lock names that begin with "#dlock:" (keys the library derives) or with
 * a pattern's "{sem:", "{rw:", "{leader:", "{rl:", "{once:" or "{idem:"
 * are refused (DLOCK_INVALID), so no lock can reach a counter or another
 * object's keys.  A released lock publishes on the channel
 * "dlock:released:K" so waiters wake at once (the message is the released
 * grant's fence in decimal, or empty).
 *
 * Waiting (wait_ms != 0; the patterns that wait do the same):
 *   - The wait runs on the calling thread.  Each client has one subscriber
 *     thread and connection, shared by all its waiters, that only wakes
 *     them: a release wakes one waiter of each client at once.  A waiter
 *     of the releasing client is woken by the releasing thread itself,
 *     when its release's reply comes (not by the message).
 *   - Load: a waiter tries once, subscribes, and tries again when the
 *     subscription is confirmed (so a release in between is not missed);
 *     then it sleeps.  Without a notification it tries again just after
 *     the holder's TTL runs out (a holder that died), but at least every
 *     10 s; while a holder keeps renewing a short TTL the tries are at
 *     least 10 ms apart, doubling up to 1 s; a key without a TTL is tried
 *     with backoff from 50 ms to 10 s; all with jitter.  So a waiter costs
 *     a few round trips per holder TTL, not a steady poll.  A client whose
 *     subscriber cannot be started polls every 150-200 ms instead.
 *   - Errors: with wait_ms > 0 a transport error (DLOCK_UNAVAILABLE,
 *     DLOCK_TIMEOUT) ends the wait at once, and the wait never outlasts
 *     wait_ms.  With wait_ms < 0 the wait rides them out: it tries again
 *     with backoff (50 ms .. 2 s, jittered), and while the client's breaker
 *     is open it sleeps until the background probe finds Redis back,
 *     never spinning on fast failures; it tries again with the same token,
 *     so an acquire that timed out after the server applied it is ours.
 *     Any other error (DLOCK_AUTH, DLOCK_SERVER, ...) ends every wait;
 *     DLOCK_UNPROVEN waits for the server's clock when wait_ms covers the
 *     gap (see fences below).
 *     Under DLOCK_FAIL_OPEN a transport error ends even an unbounded wait,
 *     with a degraded lock.
 *
 * The scripts need Redis 5.0 or later (they read TIME before they write,
 * which needs script effects replication, the default since 5.0); `dlock
 * doctor` checks this and the settings below.  On 7.0 and later an acquire
 * takes the key and sets its fence counter each in one call that also
 * answers what they held (SET NX GET, SET GET); older servers refuse the
 * first form and the script reads and writes each in two calls.
 *
 * Fences are 64-bit.  The next fence of K is max(last + 1, server time in
 * microseconds), last being K's counter, and it is granted only if it is
 * above this client's floor: the highest fence and the highest server time
 * any reply has shown this dlock_client.  When it is not (the server lost
 * the counter or has a stale one, and its clock is behind what this client
 * saw: a restart without persistence, a failover to a lagging replica, a
 * clock stepped back), nothing is written and the acquire waits until the
 * server's clock passes the floor if its wait_ms allows, else answers
 * DLOCK_UNPROVEN.  What is proven: every fence this client is granted for
 * any key is above every fence and server time it has seen.  What is not:
 * another client's grants are unknown to this one, and a fresh client
 * (a new process) has no floor; across clients, fences are higher only
 * while the server keeps its counters (appendonly, noeviction; a failover
 * only to a replica that has every grant, for example with WAIT) or its
 * clock never goes back.  See docs/guarantees.md.
 *
 * Validity.  Each held lock has valid_until = the moment its last
 * successful acquire, extend or renewal was *sent* + its TTL - a drift
 * allowance (1% of the TTL + 2 ms), on CLOCK_BOOTTIME (which keeps counting
 * while the host is suspended).  An extend racing a watchdog renewal counts
 * the shorter of the two until both have answered, so a stale answer never
 * raises it.  At valid_until the lock is LOST by itself, whether or not any
 * answer ever comes: lost() is 1 from then on and on_lost runs once.
 *
 * What dlock_lock_valid_ms promises, and what it needs.  It never exceeds
 * the time Redis will keep our key, provided that
 *   - the Redis host's wall clock (by which Redis expires keys) does not
 *     step forward by more than the drift allowance between two round
 *     trips of this client that read the server's clock (extends and
 *     watchdog renewals do; so does dlock_client_new).  A forward step is
 *     seen at the next such round trip and shrinks every lock of the client
 *     by it (a lock past its shrunken end is LOST); before that round trip
 *     nobody can see it.  A backward step only makes keys live longer;
 *   - our clock and the server's run at rates within the drift allowance;
 *   - the key is not removed behind our back (DEL, eviction under a
 *     maxmemory-policy other than noeviction, a failover to a replica that
 *     missed the write, a restart without persistence).  Such a loss is
 *     seen at the next renewal, extend or release, not before.
 * A process that is paused (SIGSTOP, a long GC, a swapped-out page) cannot
 * act on its deadline; only a fence checked by the protected resource keeps
 * a paused holder's late writes out.
 *
 * Fair locks (opts.fair).  Waiters are served first come, first served,
 * across processes, and the hand-off happens inside the server:
 *   #dlock:queue:{K}    the waiters: a sorted set of tokens, by arrival;
 *   #dlock:waiters:{K}  a hash, token -> "deadline_ms:confirm_ms" (server
 *                       time).
 * A busy fair acquire that will wait joins the queue (or refreshes its
 * entry's deadline: at most 30 s ahead, the waiter's own deadline if
 * sooner, renewed by its fallback tries).  The fair release deletes the
 * key and, in the same script, sets it to the first waiter whose entry is
 * still live (entries past their deadline, of waiters that died or gave
 * up, are dropped), with a new fence by the core rule and a PX of that
 * waiter's confirm window, and publishes on "dlock:granted:TOKEN", the
 * waiter's own channel, with the fence and the number of the waiter's
 * try whose queue entry was granted.  The waiter holds the lock when that
 * message arrives, without another round trip: its validity is the
 * confirm window counted from the send time of that try (which ran before
 * the grant, so the count starts no later than the server's), and the
 * watchdog's renewer then sends the confirm within a fraction of a
 * millisecond (a renewal that sets the full TTL; the lock's validity
 * grows when it lands).  A fair waiter waits on a connection of its own
 * (kept for the client's next fair waiter), so the grant wakes it
 * directly.  A message that
 * cannot be trusted that way (an older try's grant, a fence not above
 * what the client had seen before that try, a confirm window already
 * spent in the queue) is not taken; the waiter confirms with a try (its
 * acquire finds its own token).  A waiter that never confirms (paused,
 * dead) loses the grant when the confirm window runs out, and the next
 * waiter's fallback try (a queued waiter tries once per confirm window,
 * at least every second) takes the free key in its turn.  docs/fair.md says
 * when to use it.  A free key with waiters queued is taken only by the
 * first of them; a fair try that will not wait
 * never jumps the queue.  A fair try that finds the key free with another
 * live waiter first (the holder died or Redis restarted, so no release
 * came) grants the key to that waiter as a release would and answers
 * DLOCK_BUSY, so a first waiter that is gone costs one confirm window,
 * not the rest of its entry's life.  A grant's validity also shrinks by
 * any forward step of the server's clock seen since that try was sent,
 * and a grant with nothing left is not taken.  A wait that ends without
 * the lock leaves the queue (and passes on a grant that arrived
 * meanwhile; when Redis cannot be reached, the client's watchdog thread
 * leaves for it once Redis answers).  Joining, the waiter's own
 * connection is opened by the wait's deadline (sooner than the connect
 * timeout when the wait is shorter).  Every party on a
 * fair key should use fair mode.  A plain acquire does not take a free key
 * while live fair waiters are queued (it answers DLOCK_BUSY, with a
 * message that says so, and a plain wait keeps waiting until the queue is
 * empty), and a plain holder's release nudges the first fair waiter; but a
 * plain acquire is not queued, so it is served only when no fair waiter
 * is.
 *
 * States of a dlock_lock, and what moves it:
 *   HELD      after dlock_acquire returns DLOCK_OK; valid_ms() > 0.
 *   DEGRADED  after a fail-open acquire while Redis could not be reached
 *             (see dlock_policy): no key exists, fence is 0; the caller
 *             relies on a stronger guard.
 *   LOST      valid_until passed (no renewal reached Redis in time, or a
 *             step of the server's clock cut it short), or a renewal,
 *             extend or release found our token gone; lost() is 1.
 *             Terminal.
 *   (freed)   dlock_release or dlock_lock_free; the pointer is invalid.
 *
 * Lifetime: dlock_acquire creates a dlock_lock; dlock_release releases it in
 * Redis and frees it, whatever it returns.  dlock_lock_free frees it without
 * talking to Redis (the key then expires by its TTL).  Both accept NULL.
 *
 * Threads: a dlock_lock belongs to the thread that holds it and must not be
 * used by two threads at once; the client's background threads only renew
 * it and mark it lost (its validity is behind its own mutex).  Renewals run
 * on a thread and a connection of their own, never behind the
 * application's pool, breaker probes or callbacks.  The lost callback runs
 * once, on the thread that found the loss first: the client's timer thread
 * (validity ran out, or a renewal found the token gone), or the owner's
 * thread inside dlock_extend, dlock_release or a reentrant dlock_acquire.
 * It may read the lock (lost, key, fence) and signal other threads, but
 * must not release, extend or free the lock, nor call anything that waits
 * on Redis.
 */
#ifndef DLOCK_LOCK_H
#define DLOCK_LOCK_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/client.h"
#include "dlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_lock dlock_lock;

/* Longest lock name accepted, in bytes. */
#define DLOCK_KEY_MAX 1024
/* An owner token: 128 random bits as 32 lower-case hex digits. */
#define DLOCK_TOKEN_LEN 32

/*
 * What an acquire does when Redis cannot be reached.  "Cannot be reached"
 * is exactly: the acquire failed with DLOCK_UNAVAILABLE (connection
 * refused, reset or unreachable, the host name does not resolve, the
 * circuit breaker is open, or the server answered LOADING or BUSY: up but
 * unable to run anything yet) or DLOCK_TIMEOUT (no answer in time).  Every
 * other failure is returned as it is under either policy, never degraded:
 * an answer that refuses the command (DLOCK_AUTH: NOAUTH, WRONGPASS,
 * NOPERM; DLOCK_SERVER: OOM, READONLY, a script error, WRONGTYPE, ...), a
 * reply that is not Redis's (DLOCK_PROTOCOL), a TLS failure, DLOCK_BUSY,
 * DLOCK_UNPROVEN, DLOCK_INVALID, DLOCK_NOMEM, DLOCK_SYSTEM.
 */
typedef enum dlock_policy {
    /* Return the error (the default). */
    DLOCK_FAIL_CLOSED = 0,
    /* Return DLOCK_OK with a degraded lock (dlock_lock_degraded is 1). */
    DLOCK_FAIL_OPEN = 1
} dlock_policy;

/* Called once when a held lock is found lost, on the thread that found it.
 * See the thread rules at the top of this file. */
typedef void (*dlock_lost_fn)(dlock_lock *lock, void *arg);

typedef struct dlock_acquire_opts {
    /* Lock TTL in milliseconds.  0: 30000 (the watchdog's default lease,
     * renewed every 10 s, as in Redisson). */
    int64_t ttl_ms;
    /* 0: try once, DLOCK_BUSY at once if held.  > 0: wait up to this many
     * milliseconds, woken when the holder releases.  < 0: wait forever,
     * through Redis outages (see "Waiting" at the top of this file). */
    int64_t wait_ms;
    /* Non-zero: the client's background thread renews the lock every
     * ttl/3 until it is released, and marks it lost if renewal fails. */
    int watchdog;
    /* Non-zero: the same thread acquiring the same key on the same client
     * again gets the lock it already holds with its hold count raised; each
     * release lowers the count and the last one releases in Redis.  A lock
     * whose validity ran out is not re-entered: its loss is reported and
     * the key is acquired afresh through Redis. */
    int reentrant;
    /* What to do when Redis is unavailable. */
    dlock_policy policy;
    /* Optional: called once when the lock is found lost (with or without
     * watchdog: at valid_until at the latest). */
    dlock_lost_fn on_lost;
    void *on_lost_arg;
    /* Non-zero: a fair lock ("Fair locks" at the top of this file): waiters
     * queue in Redis and the release hands the lock to the first live one. */
    int fair;
    /* Fair locks: how long a waiter that was handed the lock has to
     * confirm it before the grant lapses and the next waiter's turn
     * comes.  0: min(TTL, 2 s). */
    int64_t fair_confirm_ms;
} dlock_acquire_opts;

/* Fills opts with the defaults: TTL 30 s, no wait, no watchdog, not
 * reentrant, fail closed, no callback, not fair. */
DLOCK_API void dlock_acquire_opts_init(dlock_acquire_opts *opts);

/*
 * Takes the lock named key (1..DLOCK_KEY_MAX bytes, copied).  A request
 * that timed out may still run on the server: then the library releases
 * it with the same token in the background, so it leaves no orphan.
 *
 * opts may be NULL for the defaults.  out receives the lock, or NULL.
 * Returns DLOCK_OK (held, or degraded under DLOCK_FAIL_OPEN when Redis
 * could not be reached: then dlock_client_errmsg says why), DLOCK_BUSY
 * (held by someone else and no wait, or the wait ran out: then
 * dlock_client_busy_ttl_ms says how long the holder's TTL still runs),
 * DLOCK_UNPROVEN (no fence above this client's floor could be shown, see
 * above; nothing was written), DLOCK_UNAVAILABLE, DLOCK_TIMEOUT,
 * DLOCK_AUTH, DLOCK_SERVER, DLOCK_INVALID (an empty, too long or reserved
 * name), DLOCK_NOMEM, or another transport error.  Costs one round trip
 * when the key is free.
 */
DLOCK_API dlock_err dlock_acquire(dlock_client *client, const char *key,
                                  const dlock_acquire_opts *opts,
                                  dlock_lock **out);

/*
 * Releases the lock if the stored token is still ours, wakes one waiter,
 * and frees the lock object whatever the outcome.
 * Returns DLOCK_OK (we held it until now), DLOCK_LOST (it had expired or been
 * taken: nothing was deleted), DLOCK_UNAVAILABLE (Redis unreachable: the key
 * expires by its TTL, and the library keeps sending the release with the
 * same token in the background until it is answered or the TTL is over),
 * or another transport error.  A lock whose validity ran out is reported
 * DLOCK_LOST even if its key had not yet expired, and even if the release
 * could not reach Redis (it is then sent in the background as above).  For a reentrant lock
 * held more than once, lowers the hold count and returns DLOCK_OK without a
 * round trip while its validity is known positive, DLOCK_LOST once it is
 * not.  A degraded lock is freed and DLOCK_OK returned.
 */
DLOCK_API dlock_err dlock_release(dlock_lock *lock);

/*
 * Sets the lock's TTL to ttl_ms from now (0: the TTL it was acquired with;
 * for a lock from dlock_lock_attach, whose TTL is unknown, 30 s),
 * if the stored token is still ours, and moves the watchdog's next renewal
 * to a third of that TTL from now.  Returns DLOCK_OK, DLOCK_LOST (the token
 * is gone or the lock's validity had already run out: the lock is marked
 * lost and on_lost runs here if nothing had found the loss before),
 * DLOCK_STATE for a degraded lock or one already marked lost, or a
 * transport error (then the lock may still be held until its old validity
 * runs out; an extend to a shorter TTL counts from the moment it was sent).
 */
DLOCK_API dlock_err dlock_extend(dlock_lock *lock, int64_t ttl_ms);

/* Frees the lock object without talking to Redis.  NULL is fine. */
DLOCK_API void dlock_lock_free(dlock_lock *lock);

/*
 * Builds a lock object for a lock that another process acquired, from its
 * key and token (for example the CLI's `dlock release KEY TOKEN`), so that
 * dlock_release and dlock_extend can act on it.  Its release is the fair
 * one (see "Fair locks"): it hands the key to the first fair waiter
 * queued, if any, and is the plain release otherwise, so it suits both
 * kinds.  No round trip: the first extend or release says whether the
 * token still holds.  The fence is 0 and
 * the TTL unknown until an extend.  Returns DLOCK_OK, DLOCK_INVALID (bad key
 * or a token that is not DLOCK_TOKEN_LEN hex digits) or DLOCK_NOMEM.
 */
DLOCK_API dlock_err dlock_lock_attach(dlock_client *client, const char *key,
                                      const char *token, dlock_lock **out);

/* Milliseconds until valid_until (see "Validity" at the top of this file
 * for exactly what it promises and needs).  0 when lost or expired;
 * INT64_MAX when degraded. */
DLOCK_API int64_t dlock_lock_valid_ms(const dlock_lock *lock);

/* The fencing token of this grant (> 0; above every fence and server time
 * this client had seen, see the top of this file), or 0 for a degraded or
 * attached lock. */
DLOCK_API uint64_t dlock_lock_fence(const dlock_lock *lock);

/* 1 once the lock is lost: its validity ran out (checked at each call,
 * whether or not anything else noticed) or its token was found gone; else
 * 0.  Always 0 for a degraded lock. */
DLOCK_API int dlock_lock_lost(const dlock_lock *lock);

/* 1 for a lock granted under DLOCK_FAIL_OPEN without Redis, else 0. */
DLOCK_API int dlock_lock_degraded(const dlock_lock *lock);

/* The lock's name and owner token (NUL-terminated), borrowed for the lock's
 * life. */
DLOCK_API const char *dlock_lock_key(const dlock_lock *lock);
DLOCK_API const char *dlock_lock_token(const dlock_lock *lock);

/* How many times a reentrant lock is held by its thread (1 otherwise). */
DLOCK_API int dlock_lock_holds(const dlock_lock *lock);

/* What Redis says about a lock name, for inspection (dlock status). */
typedef struct dlock_lock_info {
    int held;            /* 1 if the key exists */
    int64_t ttl_ms;      /* remaining TTL; -1 without TTL; 0 if free */
    uint64_t last_fence; /* last fence granted (the larger of the
                            * counter and the legacy one), 0 if never */
    char token[DLOCK_TOKEN_LEN + 1]; /* the holder's token, "" if free */
    int64_t waiters;        /* fair waiters queued (live or not yet dropped) */
    int64_t next_waiter_ms; /* ms until the first waiter's entry lapses;
                             * -1 without waiters */
} dlock_lock_info;

/* Reads the state of the lock named key in one round trip.  On a
 * redlock:// client: held when a majority of the masters hold one token
 * (that token, the least TTL among them, the highest fence counter). */
DLOCK_API dlock_err dlock_inspect(dlock_client *client, const char *key,
                                  dlock_lock_info *info);

/* What one server says about a lock name (dlock_inspect_nodes). */
typedef struct dlock_node_info {
    char node[64];                   /* "host:port" */
    int answered;                    /* 0: no answer (why says so) */
    int held;                        /* 1 if the key exists there */
    int64_t ttl_ms;                  /* its remaining TTL there; 0 if free */
    char token[DLOCK_TOKEN_LEN + 1]; /* its holder there, "" if free */
    char why[96];                    /* when it did not answer */
} dlock_node_info;

/*
 * Reads the lock named key on every server that votes on it: the masters
 * of a redlock:// client, all at once, each bounded by the I/O timeout.
 * out[0..max) receives one entry per master, *n how many (at most max).
 * For other deployments one server decides; DLOCK_INVALID says to use
 * dlock_inspect.  Returns DLOCK_OK (also when some masters did not
 * answer: their entries say so), DLOCK_INVALID or DLOCK_NOMEM.
 */
DLOCK_API dlock_err dlock_inspect_nodes(dlock_client *client, const char *key,
                                        dlock_node_info *out, int max, int *n);

/*
 * Scoped form: acquires key with opts, runs fn(lock, arg) while holding it,
 * then releases.  fn is not called if the acquire fails.  fn_result, when not
 * NULL, receives fn's return value (0 if fn was not called).  Returns the
 * acquire's error, else the release's (DLOCK_LOST: the lock expired while fn
 * ran, so fn's writes may have raced with another holder).
 */
DLOCK_API dlock_err dlock_with(dlock_client *client, const char *key,
                               const dlock_acquire_opts *opts,
                               int (*fn)(dlock_lock *lock, void *arg),
                               void *arg, int *fn_result);

/*
 * For DLOCK_GUARD: releases *slot if it is not NULL and sets it to NULL.
 * The release's error is dropped; release explicitly when it matters.
 */
DLOCK_API void dlock_guard_release(dlock_lock **slot);

#if defined(__GNUC__) || defined(__clang__)
/*
 * Declares a dlock_lock * named var, initialised to NULL, that is released
 * when it goes out of scope, whatever the path out (GCC/Clang cleanup
 * attribute).  Assign it with dlock_acquire(c, key, &o, &var).  To keep the
 * lock past the scope, move it out and set var to NULL.
 */
#define DLOCK_GUARD(var) \
    dlock_lock *var __attribute__((cleanup(dlock_guard_release))) = NULL
#endif

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_LOCK_H */
