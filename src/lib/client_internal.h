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

#include "breaker.h"
#include "conn.h"
#include "dlock/client.h"
#include "dlock/lock.h"
#include "msg.h"
#include "pool.h"
#include "url.h"

typedef struct dlock__script {
    const char *name;   /* for messages: "acquire", "semaphore.take", ... */
    const char *body;   /* the Lua source */
    /* 1 if running the script twice has the effect of running it once, so a
     * call whose connection died mid-way may be sent again. */
    int retry_safe;
} dlock__script;

#define DLOCK__MAX_SCRIPTS 48

typedef struct dlock__watchdog dlock__watchdog;
typedef struct dlock__notifier dlock__notifier;

/* What each thread keeps per client: the last message and busy TTL. */
typedef struct dlock__tstate {
    dlock__msg msg;
    int64_t busy_ttl_ms;
    struct dlock__tstate *next;
    struct dlock__tstate *prev;
    struct dlock_client *client;
} dlock__tstate;

struct dlock_client {
    dlock__endpoint ep;
    dlock_client_opts opts;   /* its strings point at owned copies */
    dlock__conn_cfg cfg;
    SSL_CTX *tls;
    dlock__pool pool;
    int pool_ready;
    dlock__breaker breaker;

    pthread_mutex_t scripts_mu;
    int nscripts;
    struct {
        const dlock__script *script;
        char sha[41];
    } scripts[DLOCK__MAX_SCRIPTS];

    pthread_key_t tkey;
    int tkey_ready;
    pthread_mutex_t tstates_mu;
    dlock__tstate *tstates;

    dlock__watchdog *bg;            /* watchdog and breaker probe thread */
    dlock__notifier *notifier; /* subscriber for waiters, started lazily */
    pthread_mutex_t notifier_mu;

    pthread_mutex_t reentrant_mu;
    dlock_lock *reentrant;     /* held reentrant locks, list via lock->rnext */

    pthread_mutex_t last_error_mu;
    char last_error[DLOCK_ERRMSG_MAX]; /* the last transport failure */

    atomic_ullong n_commands;
    atomic_ullong n_transport_errors;
    atomic_ullong n_reconnects;
    atomic_ullong n_fast_fails;
    atomic_ullong n_renewals;
    atomic_ullong n_locks_lost;
    atomic_ullong n_connects;
    /* The highest fence or server time seen (fence.h). */
    atomic_ullong fence_floor;
};

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

/* Runs a plain command through the pool with the same rules. */
dlock_err dlock__client_command(dlock_client *c, int argc, const char **argv,
                                const size_t *lens, redisReply **reply,
                                dlock__msg *m);

/* Opens a new connection to the client's endpoint (for the subscriber and
 * the probe), with the connect timeout. */
dlock_err dlock__client_connect(dlock_client *c, dlock__conn **out,
                                dlock__msg *m);

/* Absolute deadline of one round trip begun now. */
int64_t dlock__client_io_deadline(const dlock_client *c);

/* The notifier, started on first use; NULL if it cannot be started (then
 * waiters poll). */
dlock__notifier *dlock__client_notifier(dlock_client *c);

/* Returns a probe's connection to the pool after the breaker closed. */
void dlock__client_adopt(dlock_client *c, dlock__conn *conn);

/* Starts a library thread with every signal blocked, so that the
 * application's signal handlers never run on it (the threads inherit the
 * mask).  Returns pthread_create's result. */
int dlock__thread_start(pthread_t *thread, void *(*fn)(void *), void *arg);

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
