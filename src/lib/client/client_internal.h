/*
 * client_internal.h: what the library's modules share about a client.
 *
 * The public dlock_client is opaque; lock.c, watchdog.c, notify.c and the
 * pattern modules reach Redis only through the calls below, which put every
 * round trip behind the circuit breaker, the pool, the per-call deadline,
 * the stale-connection retry and the script cache.
 *
 * Script cache: a dlock__script is a static const Lua body owned by the
 * module that uses it.  The client keeps each script's SHA-1 (computed
 * locally, so the first call can already be EVALSHA) and, when the server
 * answers NOSCRIPT (after a restart or SCRIPT FLUSH), loads the body with
 * SCRIPT LOAD and sends the EVALSHA again.
 */
#ifndef DLOCK_SRC_CLIENT_INTERNAL_H
#define DLOCK_SRC_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <openssl/ssl.h>

#include "base/breaker.h"
#include "base/thread.h"
#include "transport/conn.h"
#include "dlock/client.h"
#include "dlock/lock.h"
#include "base/msg.h"
#include "transport/pool.h"
#include "transport/url.h"

typedef struct dlock__script {
    const char *name; /* for messages: "acquire", "semaphore.take", ... */
    const char *body; /* the Lua source */
    /* 1 if running the script twice has the effect of running it once, so a
     * call whose connection died mid-way may be sent again. */
    int retry_safe;
} dlock__script;

#define DLOCK__MAX_SCRIPTS 48

typedef struct dlock__watchdog dlock__watchdog;
typedef struct dlock__notifier dlock__notifier;
typedef struct dlock__reentry dlock__reentry;
typedef struct dlock__skew dlock__skew;

/* What each thread keeps per client: the last message and busy TTL, and
 * a cap on its round trips (io_until_us, monotonic; 0: none) that a
 * pattern's renewal sets to its lease's end (pattern_lease.h). */
typedef struct dlock__tstate {
    dlock__msg msg;
    int64_t busy_ttl_ms;
    int64_t io_until_us;
    /* 1 if this thread's last command was sent again because its
     * connection failed after sending it: the first send may have run, so
     * a token-checking script may find its own earlier effect. */
    int resent;
    struct dlock__tstate *next;
    struct dlock__tstate *prev;
    struct dlock_client *client;
} dlock__tstate;

/*
 * The client's parts, each owned by its own module and reached through
 * these accessors (the struct is client.c's): the watchdog (renewals and
 * the validity timer, watchdog.h), the registry of reentrant locks
 * (lock.c), the server clock's offset (lease.h), the breaker and the
 * options.  Each lives as long as the client.
 */
dlock__watchdog *dlock__client_watchdog(dlock_client *c);
dlock__reentry *dlock__client_reentry(dlock_client *c);
dlock__skew *dlock__client_skew(dlock_client *c);
dlock__breaker *dlock__client_breaker(dlock_client *c);
const dlock_client_opts *dlock__client_opts(const dlock_client *c);

/*
 * How a client is made and ended; the public dlock_client_new and
 * dlock_client_free (lock/client_new.c) call these in this order:
 *
 * dlock__client_build parses url and opts (NULL: the defaults), and makes
 * the pool or deployment, the breaker and the prober; it connects to
 * nothing yet.  *out is the client, or NULL on failure (m says why).
 *
 * dlock__client_attach gives the client the lock layer's parts, which the
 * accessors above hand out: the watchdog and the reentrant registry.  The
 * caller keeps them and frees them (dlock_client_free) before or after
 * dlock__client_destroy, never while the client is in use.
 *
 * dlock__client_warm_up makes the first round trip: TIME on one server
 * (its sample starts the clock offset, lease.h), or a majority's PING for
 * Redlock.  Its error is the client's first transport error.
 *
 * dlock__client_start_offline returns DLOCK_OK when err (a warm-up's) is
 * one the client may start with under opts.start_offline: the breaker is
 * then open and the prober connects later.  Else it returns err.
 *
 * dlock__client_destroy stops the client's threads and frees all but the
 * attached parts.  NULL is a no-op.
 */
dlock_err dlock__client_build(const char *url, const dlock_client_opts *opts,
                              dlock_client **out, dlock__msg *m);
void dlock__client_attach(dlock_client *c, dlock__watchdog *w,
                          dlock__reentry *r);
dlock_err dlock__client_warm_up(dlock_client *c, dlock__msg *m);
dlock_err dlock__client_start_offline(dlock_client *c, dlock_err err);
void dlock__client_destroy(dlock_client *c);

/* The client's deployment (deploy.h) when its URL names several
 * servers, else NULL. */
struct dlock__deploy *dlock__client_deploy(dlock_client *c);

/* The client's Redlock masters when its URL is redlock:// (lock.c then
 * runs its rounds on them), else NULL. */
struct dlock__redlock *dlock__client_redlock(dlock_client *c);

/* 1 if the client's URL is redis+cluster://: each key's commands go to the
 * master of its slot (cluster.c). */
int dlock__client_is_cluster(const dlock_client *c);

/* Runs a command formatted in RESP, cmd[0..len) (borrowed), on the
 * master of key's slot of a cluster client, with the cluster's
 * redirections and retries; what names it in messages.  For the
 * watchdog, whose renewals are formatted ahead.  Returns as
 * dlock__client_eval's transport, with server errors as replies;
 * DLOCK_INVALID if the client is not a cluster's. */
dlock_err dlock__client_call_routed(dlock_client *c, const char *key,
                                    size_t keylen, const char *cmd, size_t len,
                                    const char *what, int retry_safe,
                                    redisReply **reply, dlock__msg *m);

/* A cluster client's members (cluster.h's dlock__cluster_members) and a
 * command on one of them; "host:port" of a member.  DLOCK_INVALID for a
 * client of another deployment. */
struct dlock__member;
dlock_err dlock__client_cluster_members(dlock_client *c,
                                        struct dlock__member *out, int max,
                                        int *count, dlock__msg *m);
dlock_err dlock__client_node_command(dlock_client *c, int node, int argc,
                                     const char **argv, redisReply **reply,
                                     dlock__msg *m);
const char *dlock__client_node_desc(dlock_client *c, int node);

/* Counts a renewal, or a lock found lost, in the client's stats. */
void dlock__client_count_renewal(dlock_client *c);
void dlock__client_count_lost(dlock_client *c);

/* The SHA-1 of script s in hex, cached by the client; "" if it could not
 * be computed (then send the body with EVAL). */
void dlock__client_script_sha(dlock_client *c, const dlock__script *s,
                              char sha[41]);

/* Loads script s on the server (SCRIPT LOAD), through the pool. */
dlock_err dlock__client_script_load(dlock_client *c, const dlock__script *s,
                                    dlock__msg *m);

/* The highest fence or server time any reply has shown this client (the
 * fence floor, fence.h); read and raised atomically. */
atomic_ullong *dlock__client_fence_floor(dlock_client *c);

/*
 * The calling thread's message buffer for this client, emptied; NULL if it
 * could not be allocated (then messages are dropped and dlock_client_errmsg
 * says "out of memory").  Each public call starts with this.
 */
dlock__msg *dlock__client_begin(dlock_client *c);

/* The calling thread's state (NULL if never allocated). */
dlock__tstate *dlock__client_tstate(const dlock_client *c);

/*
 * Runs a Lua script: EVALSHA sha nkeys argv...  (argc counts keys and
 * arguments; lens may be NULL for NUL-terminated strings).  Returns DLOCK_OK
 * with *reply the script's reply (never an error reply: those come back as
 * codes with a message), DLOCK_UNAVAILABLE at once while the breaker is
 * open, or a transport or server error.  *reply is the caller's to free with
 * freeReplyObject.
 */
dlock_err dlock__client_eval(dlock_client *c, const dlock__script *s,
                             int nkeys, int argc, const char **argv,
                             const size_t *lens, redisReply **reply,
                             dlock__msg *m);

/*
 * dlock__client_eval for a write that must reach replicas: when the
 * client asks for wait_replicas (dlock_client_opts), the script is
 * followed by WAIT on the same connection and *acked gets how many
 * replicas acknowledged it within wait_timeout_ms (replwait.h); without
 * that option (or with acked NULL) it is dlock__client_eval and *acked is
 * left alone.  Deciding what too few acknowledgements mean is the
 * caller's.
 */
dlock_err dlock__client_eval_acked(dlock_client *c, const dlock__script *s,
                                   int nkeys, int argc, const char **argv,
                                   const size_t *lens, redisReply **reply,
                                   int *acked, dlock__msg *m);

/*
 * dlock__client_eval_acked for a script whose answer 0 says that a key
 * does not hold the caller's token (release, extend), and which writes
 * nothing then.  On a Sentinel client that answer may come from a demoted
 * master that still answers (a pooled connection kept across a
 * failover): a replica runs such a script from its copy and never says
 * READONLY.  So there, and only on that answer, the script goes again
 * (it wrote nothing, and finding the token runs it as once) followed by
 * ROLE on one connection: the answer is believed from a master only; a
 * replica makes the deployment look for the master again and the script
 * goes once more there; DLOCK_UNAVAILABLE if no master is confirmed
 * (what happened to the lock is unknown).  *acked is 0 after that second
 * send (its replication is not waited for).  Every other client and
 * answer: dlock__client_eval_acked, with no extra round trip.
 */
dlock_err dlock__client_eval_owned(dlock_client *c, const dlock__script *s,
                                   int nkeys, int argc, const char **argv,
                                   const size_t *lens, redisReply **reply,
                                   int *acked, dlock__msg *m);

/* Runs a plain command through the pool with the same rules. */
dlock_err dlock__client_command(dlock_client *c, int argc, const char **argv,
                                const size_t *lens, redisReply **reply,
                                dlock__msg *m);

/* Opens a new connection to the client's endpoint (for the subscriber and
 * the probe), with the connect timeout. */
dlock_err dlock__client_connect(dlock_client *c, dlock__conn **out,
                                dlock__msg *m);

/* The same, giving up at deadline_us (clock.h) if that is sooner than the
 * connect timeout: the renewer never waits past the leases it serves.
 * Not counted in the stats' connects and reconnects (which describe the
 * application's pool and the probe). */
dlock_err dlock__client_connect_until(dlock_client *c, int64_t deadline_us,
                                      dlock__conn **out, dlock__msg *m);

/* Absolute deadline of one round trip begun now: the io timeout, or the
 * calling thread's io_until_us if that is sooner. */
int64_t dlock__client_io_deadline(const dlock_client *c);

/* The notifier, started on first use; NULL if it cannot be started (then
 * waiters poll). */
dlock__notifier *dlock__client_notifier(dlock_client *c);
/* The client's notifier if it has been started, else NULL (starts
 * nothing). */
dlock__notifier *dlock__client_notifier_peek(dlock_client *c);

/* Returns a probe's connection to the pool after the breaker closed. */
void dlock__client_adopt(dlock_client *c, dlock__conn *conn);

/* Records the outcome of a transport step for the breaker and stats; m
 * (may be NULL) is kept as the last transport error, which the breaker's
 * fast-fail message quotes. */
void dlock__client_transport_failed(dlock_client *c, const dlock__msg *m);
void dlock__client_transport_ok(dlock_client *c);

#ifdef DLOCK_TESTING
/* Test hook: while on, computing a script's SHA-1 fails as it would if
 * OpenSSL could not allocate, for every client of the process. */
void dlock__client_test_sha_fail(int on);
#endif

#endif /* DLOCK_SRC_CLIENT_INTERNAL_H */
