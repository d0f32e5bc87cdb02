/*
 * redlock.h: one lock over N independent Redis masters (the Redlock
 * algorithm of the Redis documentation's distributed-locks page), and a
 * fence that a majority of them vouches for.
 *
 * A round sends one command to every master at once, each with its own
 * deadline far below the TTL (the per-node timeout), so that a master that
 * is down, slow or stopped costs at most that timeout and never the lease.
 * An acquire is granted only when a majority (N/2 + 1) set the key, and its
 * validity is TTL - elapsed - drift, the drift being TTL/100 + 2 ms for
 * the masters' clocks; otherwise the key is deleted on every master at
 * once and the caller retries after a random delay.  Extend needs a
 * majority too, and release goes to all.
 *
 * Fences.  Redlock's safety rests on timing (bounded pauses, drift and
 * network delay), which Kleppmann's critique shows a paused holder can
 * break; a fence checked by the resource is what protects then.  A fence
 * here is the value of a majority register: round one reads each master's
 * counter, F = the highest + 1, and round two writes F "only if greater"
 * to every master; the fence is handed out only when a majority took it.
 * Any two majorities share a master, so a later grant reads a value >= F
 * and computes a higher one, and two grants can never both get F written:
 * fences are unique and grow in the real-time order of grants, whatever
 * the clocks do, as long as no master loses its counter (they need
 * appendonly with fsync, docs/deployments.md).  What they cannot do is
 * stop two holders from both believing they hold the lock after a timing
 * failure: the resource must check the fence.
 *
 * Threads: a dlock__redlock is thread-safe.  A round runs one short-lived
 * thread per master (started with every signal blocked) and joins them
 * all before it returns, so it never outlives its deadline by more than
 * thread scheduling.
 */
#ifndef DLOCK_SRC_REDLOCK_H
#define DLOCK_SRC_REDLOCK_H

#include <stdint.h>

#include <hiredis/hiredis.h>

#include "transport/conn.h"
#include "base/msg.h"
#include "deploy/nodeset.h"
#include "transport/url.h"

typedef enum dlock__vote {
    DLOCK__VOTE_FAILED = 0, /* no usable answer (down, timeout, error) */
    DLOCK__VOTE_YES = 1,    /* the master did what was asked */
    DLOCK__VOTE_NO = 2      /* it answered no: another owner holds it */
} dlock__vote;

typedef struct dlock__node_result {
    dlock__vote vote;
    dlock_err err;  /* DLOCK_OK when the master answered */
    int64_t value;  /* what the answer carried (counter, pttl) */
    int64_t value2; /* a second number (inspect: the fence counter) */
    char text[40];  /* a string it carried (inspect: the token) */
    char why[160];  /* for FAILED: "timed out", "refused", ... */
} dlock__node_result;

typedef struct dlock__redlock {
    dlock__nodeset nodes; /* the masters, in the URL's order */
    int n;
} dlock__redlock;

/* Prepares the masters of d (kind DLOCK__REDLOCK); connects lazily. */
dlock_err dlock__redlock_init(dlock__redlock *r, const dlock__deployment *d,
                              const dlock__conn_cfg *cfg, int pool_size,
                              dlock__msg *m);
void dlock__redlock_destroy(dlock__redlock *r);

/* ---- pure decisions ---------------------------------------------------- */

/* The majority of n: n/2 + 1. */
int dlock__redlock_quorum(int n);

/* The clock drift allowed for a TTL: ttl/100 + 2 ms. */
int64_t dlock__redlock_drift_ms(int64_t ttl_ms);

/* ttl - elapsed - drift (may be <= 0: nothing left). */
int64_t dlock__redlock_validity_ms(int64_t ttl_ms, int64_t elapsed_ms);

/* A per-node timeout for a TTL: a tenth of it, within [min_ms, max_ms]. */
int64_t dlock__redlock_node_timeout_ms(int64_t ttl_ms, int64_t min_ms,
                                       int64_t max_ms);

/*
 * Decides a round from its n results.  descs[i] names master i.
 *   DLOCK_OK           a majority voted yes and validity (*validity_ms,
 *                      from ttl and elapsed) is positive;
 *   DLOCK_TIMEOUT      a majority voted yes but the round used up the TTL;
 *   DLOCK_UNAVAILABLE  so many masters failed that no majority answered
 *                      (fail-closed): the caller must not assume anything;
 *   DLOCK_BUSY         enough answered, but not a majority said yes.
 * m gets "<what>: 3 of 5 masters agreed (majority 3); 2 of 5 nodes:
 * 127.0.0.1:7002 timed out, 127.0.0.1:7004 refused" for anything but OK.
 */
dlock_err dlock__redlock_decide(const dlock__node_result *res, int n,
                                const char *const *descs, const char *what,
                                int64_t ttl_ms, int64_t elapsed_ms,
                                int64_t *validity_ms, dlock__msg *m);

/* Writes "k of n nodes: desc why, desc why" for the failed results into
 * buf (empty when none failed). */
void dlock__redlock_failures(const dlock__node_result *res, int n,
                             const char *const *descs, char *buf, size_t size);

/* A random delay in [max_ms/2, max_ms] from getrandom, so that clients
 * that failed together do not retry together. */
int64_t dlock__redlock_retry_delay_ms(int64_t max_ms);

/* ---- rounds ------------------------------------------------------------ */

/* Classifies one master's answer; the round's caller supplies it. */
typedef void (*dlock__redlock_judge)(const redisReply *reply,
                                     dlock__node_result *res);

/*
 * Runs the command on every master in parallel, each bounded by
 * deadline_us, and fills res[0..n) through judge (an error reply, a
 * transport error or a timeout makes FAILED with its reason).  Returns
 * DLOCK_OK, or DLOCK_SYSTEM / DLOCK_NOMEM when the round could not run
 * (then every result is FAILED).
 */
dlock_err dlock__redlock_round(dlock__redlock *r, int argc, const char **argv,
                               const size_t *lens, int64_t deadline_us,
                               dlock__redlock_judge judge,
                               dlock__node_result *res, dlock__msg *m);

/*
 * EVAL of body with nkeys keys then nargs arguments (keys_and_args holds
 * both, at most 7 in all) as one round, each master bounded by
 * node_timeout_ms: for steps beside the lock's own (the leader's tick
 * claim, pattern_leader_redlock.c).  Returns what dlock__redlock_round
 * returns.
 */
dlock_err dlock__redlock_eval(dlock__redlock *r, const char *body, int nkeys,
                              const char **keys_and_args, int nargs,
                              int64_t node_timeout_ms,
                              dlock__redlock_judge judge,
                              dlock__node_result *res, dlock__msg *m);

/* The masters' descriptions, for dlock__redlock_decide. */
const char *const *dlock__redlock_descs(dlock__redlock *r,
                                        const char *out[DLOCK__NODES_MAX]);

/* ---- the lock ---------------------------------------------------------- */

/* What a busy acquire round saw (dlock__redlock_acquire). */
typedef struct dlock__redlock_busy {
    /* Some master had the key free: it is changing hands (a release in
     * flight, whose wake-up came from a master that deleted it first) or
     * contenders split the vote.  A try soon is worth more than waiting
     * for a wake-up that was already sent. */
    int free_somewhere;
    /* Absent a release, how long until enough masters, by their own
     * PTTLs, let the key expire for a majority to be free: -1 if one of
     * them holds it without a TTL, 0 if not known (too few answered, or
     * free_somewhere). */
    int64_t held_ms;
} dlock__redlock_busy;

/* Retry delays after a split round are drawn up to this. */
#define DLOCK__REDLOCK_SPLIT_RETRY_MS 20

/*
 * One acquire round for key with owner token and ttl_ms, each master
 * bounded by node_timeout_ms.  With fence_key (may be NULL: no fence), a
 * second round makes the majority fence described above.  On DLOCK_OK,
 * *validity_ms is what is left of the lease measured from the start of the
 * round, and *fence the fence (0 without fence_key).  On any failure the
 * key is deleted (by token) on every master before returning.  Returns
 * what dlock__redlock_decide returns, or DLOCK_BUSY when another grant's
 * fence raced ours; on DLOCK_BUSY, *busy (may be NULL) says what the
 * round saw.
 */
dlock_err dlock__redlock_acquire(dlock__redlock *r, const char *key,
                                 const char *fence_key, const char *token,
                                 int64_t ttl_ms, int64_t node_timeout_ms,
                                 int64_t *validity_ms, uint64_t *fence,
                                 dlock__redlock_busy *busy, dlock__msg *m);

/* Reads key on every master at once, each bounded by node_timeout_ms:
 * res[i] is YES with text the token, value the PTTL and value2 the fence
 * counter of fence_key, or FAILED with why.  Returns what
 * dlock__redlock_round returns. */
dlock_err dlock__redlock_inspect(dlock__redlock *r, const char *key,
                                 const char *fence_key,
                                 int64_t node_timeout_ms,
                                 dlock__node_result *res, dlock__msg *m);

/* Which token dlock__redlock_inspect's results show held by a majority:
 * its index in res with *ttl_ms the lowest PTTL among those holding it,
 * or -1 when none is. */
int dlock__redlock_majority_holder(const dlock__node_result *res, int n,
                                   int64_t *ttl_ms);

/* PINGs every master at once, each bounded by node_timeout_ms:
 * DLOCK_OK when a majority answered, else DLOCK_UNAVAILABLE naming the
 * masters that did not (the client's warm-up). */
dlock_err dlock__redlock_ping(dlock__redlock *r, int64_t node_timeout_ms,
                              dlock__msg *m);

/* Renews key on every master where token holds it; DLOCK_OK with
 * *validity_ms when a majority renewed, else as dlock__redlock_decide
 * (DLOCK_BUSY there means: lost on too many masters, so LOST is returned
 * instead). */
dlock_err dlock__redlock_extend(dlock__redlock *r, const char *key,
                                const char *token, int64_t ttl_ms,
                                int64_t node_timeout_ms, int64_t *validity_ms,
                                dlock__msg *m);

/* Deletes key (by token) on every master and, with a channel (may be
 * NULL), publishes the release on it where the key was deleted.  DLOCK_OK
 * when every master answered; DLOCK_UNAVAILABLE (the key will expire by
 * its TTL on the others) with the failures in m otherwise. */
dlock_err dlock__redlock_release(dlock__redlock *r, const char *key,
                                 const char *token, const char *channel,
                                 int64_t node_timeout_ms, dlock__msg *m);

#endif /* DLOCK_SRC_REDLOCK_H */
