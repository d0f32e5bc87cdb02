/*
 * client.c: the dlock_client: URL, options, pool, breaker, scripts.
 *
 * Every round trip of the library goes through run_command below, which
 * applies, in order: the breaker (fail fast while open), the pool (the
 * command pipelined with other threads' on a pooled connection, pool.h),
 * one I/O deadline for all its attempts, and up to two more sends on
 * another connection when one that had answered before fails under it
 * (the usual sign of a server restart) and the command is safe to send
 * twice; a command that never left its queue is always sent again.  Lua
 * scripts add
 * the SHA cache and the NOSCRIPT fallback on top (dlock__client_eval),
 * and, for a Sentinel client's release or extend answered "token not
 * found", a second send with ROLE behind it, believed from a master only
 * (dlock__client_eval_owned).
 * A Redis Cluster client takes another road in run_command: each command
 * goes by its first key to the master of the key's slot, on that master's
 * pool, through cluster.c (redirections, map refreshes), and the breaker
 * is left to the single-server and Sentinel roads (one shard down says
 * nothing of the others).
 *
 * The public dlock_client_new and dlock_client_free are in
 * lock/client_new.c: they add the lock layer's watchdog and scripts to the
 * client built here, so this layer never reaches up into the lock's.
 *
 * Invariants: a client that dlock__client_build returned has a parsed
 * endpoint, a pool, a breaker and a running prober thread; its option
 * strings are its own copies; per-thread states are on c->tstates until the
 * thread exits or the client is freed.
 */
#include "client/client_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/decimal.h"
#include "deploy/deploy.h"
#include "transport/replwait.h"
#include "dlock/dlock.h"
#include "base/lease.h"
#include "client/notify.h"
#include "client/prober.h"
#include "transport/tls.h"

struct dlock_client {
    dlock__endpoint ep;
    dlock_client_opts opts; /* its strings point at owned copies */
    dlock__conn_cfg cfg;
    SSL_CTX *tls;
    dlock__pool pool;
    int pool_ready;
    dlock__breaker breaker;
    dlock__skew skew;

    pthread_mutex_t scripts_mu;
    atomic_int nscripts; /* entries of scripts[] complete (script_sha) */
    struct {
        const dlock__script *script;
        char sha[41];
    } scripts[DLOCK__MAX_SCRIPTS];

    pthread_key_t tkey;
    int tkey_ready;
    pthread_mutex_t tstates_mu;
    dlock__tstate *tstates;

    dlock__watchdog *watchdog; /* renewals and the validity timer */
    dlock__prober *prober;     /* breaker probes */
    dlock__reentry *reentry;   /* held reentrant locks (lock.c's) */
    dlock__notifier *notifier; /* subscriber for waiters, started lazily */
    dlock__deploy *deploy;     /* Sentinel, Cluster, Redlock; NULL: one */
    pthread_mutex_t notifier_mu;

    pthread_mutex_t last_error_mu;
    char last_error[DLOCK_ERRMSG_MAX]; /* the last transport failure */

    atomic_ullong n_commands;
    atomic_ullong n_transport_errors;
    atomic_ullong n_reconnects;
    atomic_ullong n_fast_fails;
    atomic_ullong n_renewals;
    atomic_ullong n_locks_lost;
    atomic_ullong n_busy_polls[2]; /* conn.h: begun, caught a reply */
    atomic_ullong n_connects;
    /* The highest fence or server time seen (fence.h). */
    atomic_ullong fence_floor;
};

dlock__watchdog *dlock__client_watchdog(dlock_client *c)
{
    return c->watchdog;
}

dlock__reentry *dlock__client_reentry(dlock_client *c)
{
    return c->reentry;
}

dlock__skew *dlock__client_skew(dlock_client *c)
{
    return &c->skew;
}

dlock__breaker *dlock__client_breaker(dlock_client *c)
{
    return &c->breaker;
}

atomic_ullong *dlock__client_fence_floor(dlock_client *c)
{
    return &c->fence_floor;
}

const dlock_client_opts *dlock__client_opts(const dlock_client *c)
{
    return &c->opts;
}

void dlock__client_count_renewal(dlock_client *c)
{
    atomic_fetch_add(&c->n_renewals, 1);
}

void dlock__client_count_lost(dlock_client *c)
{
    atomic_fetch_add(&c->n_locks_lost, 1);
}

void dlock_client_opts_init(dlock_client_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->connect_timeout_ms = 5000;
    o->io_timeout_ms = 5000;
    o->pool_size = 16;
    o->keepalive_s = 60;
    o->breaker_threshold = 3;
    o->breaker_probe_ms = 500;
    o->tls_verify_peer = 1;
}

/* Applies defaults to zeroed fields and rejects values out of range. */
static dlock_err normalise_opts(dlock_client_opts *o, dlock__msg *m)
{
    if (o->connect_timeout_ms == 0)
        o->connect_timeout_ms = 5000;
    if (o->io_timeout_ms == 0)
        o->io_timeout_ms = 5000;
    if (o->pool_size == 0)
        o->pool_size = 16;
    if (o->keepalive_s == 0)
        o->keepalive_s = 60;
    if (o->breaker_threshold == 0)
        o->breaker_threshold = 3;
    if (o->breaker_probe_ms == 0)
        o->breaker_probe_ms = 500;
    if (o->connect_timeout_ms < 0 || o->io_timeout_ms < 0
        || o->breaker_threshold < 0 || o->breaker_probe_ms < 0)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "client timeouts and breaker settings must "
                              "not be negative");
    if (o->wait_replicas < 0 || o->wait_timeout_ms < 0)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "wait_replicas %d and wait_timeout_ms %d "
                              "must not be negative",
                              o->wait_replicas, o->wait_timeout_ms);
    if (o->busy_poll_us < 0 || o->busy_poll_us > 1000)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "busy_poll_us %d is not 0..1000",
                              o->busy_poll_us);
    if (o->pool_size < 1 || o->pool_size > 1024)
        return dlock__msg_set(m, DLOCK_INVALID, "pool_size %d is not 1..1024",
                              o->pool_size);
    return DLOCK_OK;
}

/* Replaces each option string with an owned copy. */
static dlock_err copy_opt_strings(dlock_client_opts *o, dlock__msg *m)
{
    const char **fields[] = {
        &o->username,        &o->password,      &o->tls_ca_file,
        &o->tls_ca_dir,      &o->tls_cert_file, &o->tls_key_file,
        &o->tls_server_name,
    };
    size_t n = sizeof(fields) / sizeof(*fields);

    for (size_t i = 0; i < n; i++) {
        char *copy;

        if (*fields[i] == NULL)
            continue;
        copy = dlock__strdup(*fields[i]);
        if (copy == NULL) {
            for (size_t j = i; j < n; j++)
                *fields[j] = NULL;
            return dlock__msg_set(m, DLOCK_NOMEM, "copying client options");
        }
        *fields[i] = copy;
    }
    return DLOCK_OK;
}

static void free_opt_strings(dlock_client_opts *o)
{
    if (o->password != NULL)
        explicit_bzero((char *)o->password, strlen(o->password));
    dlock__free((char *)o->username);
    dlock__free((char *)o->password);
    dlock__free((char *)o->tls_ca_file);
    dlock__free((char *)o->tls_ca_dir);
    dlock__free((char *)o->tls_cert_file);
    dlock__free((char *)o->tls_key_file);
    dlock__free((char *)o->tls_server_name);
}

static void tstate_destroy(void *p)
{
    dlock__tstate *t = p;
    dlock_client *c = t->client;

    pthread_mutex_lock(&c->tstates_mu);
    if (t->prev != NULL)
        t->prev->next = t->next;
    else
        c->tstates = t->next;
    if (t->next != NULL)
        t->next->prev = t->prev;
    pthread_mutex_unlock(&c->tstates_mu);
    dlock__free(t);
}

dlock__tstate *dlock__client_tstate(const dlock_client *c)
{
    return c->tkey_ready ? pthread_getspecific(c->tkey) : NULL;
}

dlock__msg *dlock__client_begin(dlock_client *c)
{
    dlock__tstate *t = dlock__client_tstate(c);

    if (t == NULL && c->tkey_ready) {
        t = dlock__calloc(1, sizeof(*t));
        if (t == NULL)
            return NULL;
        t->client = c;
        if (pthread_setspecific(c->tkey, t) != 0) {
            dlock__free(t);
            return NULL;
        }
        pthread_mutex_lock(&c->tstates_mu);
        t->next = c->tstates;
        if (c->tstates != NULL)
            c->tstates->prev = t;
        c->tstates = t;
        pthread_mutex_unlock(&c->tstates_mu);
    }
    if (t == NULL)
        return NULL;
    t->msg.text[0] = '\0';
    t->busy_ttl_ms = 0;
    return &t->msg;
}

int64_t dlock__client_io_deadline(const dlock_client *c)
{
    const dlock__tstate *t = dlock__client_tstate(c);
    int64_t deadline = dlock__deadline_after_ms(c->opts.io_timeout_ms);

    if (t != NULL && t->io_until_us != 0 && t->io_until_us < deadline)
        return t->io_until_us;
    return deadline;
}

void dlock__client_transport_failed(dlock_client *c, const dlock__msg *m)
{
    atomic_fetch_add(&c->n_transport_errors, 1);
    if (m != NULL && m->text[0] != '\0') {
        pthread_mutex_lock(&c->last_error_mu);
        memcpy(c->last_error, m->text, sizeof(c->last_error));
        pthread_mutex_unlock(&c->last_error_mu);
    }
    if (dlock__breaker_failure(&c->breaker))
        dlock__prober_kick(c->prober);
}

void dlock__client_transport_ok(dlock_client *c)
{
    dlock__breaker_success(&c->breaker);
}

dlock_err dlock__client_connect(dlock_client *c, dlock__conn **out,
                                dlock__msg *m)
{
    dlock_err err = dlock__client_connect_until(c, DLOCK__FOREVER, out, m);

    if (atomic_fetch_add(&c->n_connects, 1) > 0)
        atomic_fetch_add(&c->n_reconnects, 1);
    return err;
}

dlock_err dlock__client_connect_until(dlock_client *c, int64_t deadline_us,
                                      dlock__conn **out, dlock__msg *m)
{
    int64_t deadline = dlock__deadline_after_ms(c->opts.connect_timeout_ms);

    if (deadline_us < deadline)
        deadline = deadline_us;
    if (c->deploy != NULL)
        return dlock__deploy_connect(c->deploy, deadline, out, m);
    return dlock__conn_open(&c->ep, &c->cfg, deadline, out, m);
}

void dlock__client_adopt(dlock_client *c, dlock__conn *conn)
{
    dlock__conn *unused;

    /* Take a slot without waiting; a full pool simply closes the probe's
     * connection. */
    if (dlock__pool_borrow(&c->pool, 0, &unused) != DLOCK_OK) {
        dlock__conn_free(conn);
        return;
    }
    if (unused != NULL) {
        dlock__pool_return(&c->pool, unused);
        dlock__conn_free(conn);
        return;
    }
    dlock__pool_return(&c->pool, conn);
}

static dlock_err fast_fail(dlock_client *c, dlock__msg *m)
{
    int64_t since = atomic_load(&c->breaker.opened_at_us);
    char last[sizeof(c->last_error)];

    atomic_fetch_add(&c->n_fast_fails, 1);
    if (m == NULL)
        return DLOCK_UNAVAILABLE;
    pthread_mutex_lock(&c->last_error_mu);
    memcpy(last, c->last_error, sizeof(last));
    pthread_mutex_unlock(&c->last_error_mu);
    return dlock__msg_set(m, DLOCK_UNAVAILABLE,
                          "circuit breaker open for %s for %lld ms, probing "
                          "every %d ms; last failure: %s",
                          c->ep.desc,
                          (long long)((dlock__now_us() - since) / 1000),
                          c->opts.breaker_probe_ms,
                          last[0] != '\0' ? last : "(none recorded)");
}

/* How the pool opens a connection: with the connect timeout, counted in
 * the stats like every connection of the application's pool. */
static dlock_err dial_for_pool(void *arg, int64_t deadline_us,
                               dlock__conn **out, dlock__msg *m)
{
    (void)deadline_us; /* a connect has its own timeout, as it always had */
    return dlock__client_connect(arg, out, m);
}

#define FORMAT_STACK_BYTES 1024
/* Attempts for a command that never left (its connection broke while it
 * was queued): safe to send again, but not forever. */
#define UNSENT_RETRIES 3
/* Sends again of a retry_safe command whose connection failed under it:
 * the second covers the other pooled connections dying with the first
 * (a server restart, CLIENT KILL) before anyone noticed. */
#define BROKEN_RETRIES 2

/* The command in RESP, on the caller's stack when it fits (*cmd ==
 * stack), else in an allocation the caller frees. */
static dlock_err format_command(dlock_client *c, int argc, const char **argv,
                                const size_t *lens,
                                char stack[FORMAT_STACK_BYTES], char **cmd,
                                size_t *len, dlock__msg *m)
{
    *cmd = stack;
    *len = dlock__resp_format(stack, FORMAT_STACK_BYTES, argc, argv, lens);
    if (*len <= FORMAT_STACK_BYTES)
        return DLOCK_OK;
    *cmd = dlock__malloc(*len);
    if (*cmd == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "formatting %s for %s",
                              argc > 0 ? argv[0] : "a command", c->ep.desc);
    dlock__resp_format(*cmd, *len, argc, argv, lens);
    return DLOCK_OK;
}

static dlock__cluster *cluster_of(dlock_client *c)
{
    return c->deploy != NULL && c->deploy->kind == DLOCK__CLUSTER
               ? &c->deploy->cluster
               : NULL;
}

/*
 * A cluster's command, formatted in cmd[0..len): to the master of key's
 * slot (key NULL: slot 0's) through that master's pool, following
 * redirections and failovers (cluster.c).  A failing node does not trip
 * the client's breaker: one shard down says nothing of the others, and
 * the cluster code already retries with a fresh slot map.
 */
static dlock_err run_routed(dlock_client *c, const char *key, size_t keylen,
                            const char *cmd, size_t len, const char *what,
                            int retry_safe, redisReply **reply, dlock__msg *m)
{
    dlock_err err;

    atomic_fetch_add(&c->n_commands, 1);
    err = dlock__cluster_call_raw(cluster_of(c), key ? key : "",
                                  key ? keylen : 0, cmd, len, what, retry_safe,
                                  dlock__client_io_deadline(c), reply, NULL,
                                  m);
    if (err == DLOCK_UNAVAILABLE || err == DLOCK_TIMEOUT)
        atomic_fetch_add(&c->n_transport_errors, 1);
    return err;
}

/* run_routed for a command given as arguments. */
static dlock_err run_routed_argv(dlock_client *c, const char *key,
                                 size_t keylen, int argc, const char **argv,
                                 const size_t *lens, int retry_safe,
                                 redisReply **reply, dlock__msg *m)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    dlock_err err;

    *reply = NULL;
    if (len < 0)
        return dlock__msg_set(m, DLOCK_NOMEM, "formatting %s", argv[0]);
    err = run_routed(c, key, keylen, cmd, (size_t)len, argv[0], retry_safe,
                     reply, m);
    free(cmd); /* hiredis allocates with malloc */
    return err;
}

dlock_err dlock__client_call_routed(dlock_client *c, const char *key,
                                    size_t keylen, const char *cmd, size_t len,
                                    const char *what, int retry_safe,
                                    redisReply **reply, dlock__msg *m)
{
    *reply = NULL;
    if (cluster_of(c) == NULL)
        return dlock__msg_set(m, DLOCK_INVALID, "%s: %s is not a cluster",
                              what, c->ep.desc);
    return run_routed(c, key, keylen, cmd, len, what, retry_safe, reply, m);
}

static dlock_err not_a_cluster(dlock_client *c, dlock__msg *m)
{
    return dlock__msg_set(m, DLOCK_INVALID, "%s is not a Redis Cluster",
                          c->ep.desc);
}

dlock_err dlock__client_cluster_members(dlock_client *c, dlock__member *out,
                                        int max, int *count, dlock__msg *m)
{
    *count = 0;
    if (cluster_of(c) == NULL)
        return not_a_cluster(c, m);
    return dlock__cluster_members(cluster_of(c), dlock__client_io_deadline(c),
                                  out, max, count, m);
}

dlock_err dlock__client_node_command(dlock_client *c, int node, int argc,
                                     const char **argv, redisReply **reply,
                                     dlock__msg *m)
{
    dlock_err err;

    *reply = NULL;
    if (cluster_of(c) == NULL)
        return not_a_cluster(c, m);
    err = dlock__cluster_node_call(cluster_of(c), node, argc, argv,
                                   dlock__client_io_deadline(c), reply, m);
    if (err == DLOCK_OK && (*reply)->type == REDIS_REPLY_ERROR) {
        err = dlock__reply_error(*reply, argv[0],
                                 dlock__client_node_desc(c, node), m);
        freeReplyObject(*reply);
        *reply = NULL;
    }
    return err;
}

const char *dlock__client_node_desc(dlock_client *c, int node)
{
    return cluster_of(c) != NULL
               ? dlock__nodeset_desc(&cluster_of(c)->nodes, node)
               : "?";
}

int dlock__client_is_cluster(const dlock_client *c)
{
    return cluster_of((dlock_client *)c) != NULL;
}

const char *dlock_client_node_of(dlock_client *c, const char *key)
{
    if (cluster_of(c) == NULL || key == NULL)
        return NULL;
    return dlock__deploy_server(c->deploy, key, strlen(key));
}

/*
 * One command through the breaker and the pool, pipelined with other
 * threads' (pool.h), under one deadline for all its attempts.  A connection
 * that fails under it may be dead from a server restart: then the idle
 * connections are dropped too and, if the command is retry_safe and the
 * connection had answered before, it goes again on another connection, at
 * most BROKEN_RETRIES times (with the same token, for a lock: re-asking
 * resolves what happened; tstate->resent tells lock.c it re-asked).
 * A command that never left its queue is sent again whatever it is.
 * bypass_breaker is for health checks.
 * In a cluster the command goes to the master of key's slot instead
 * (run_routed).
 */
static dlock_err run_command(dlock_client *c, const char *key, size_t keylen,
                             int argc, const char **argv, const size_t *lens,
                             int retry_safe, int bypass_breaker,
                             redisReply **reply, dlock__msg *m)
{
    char stack[FORMAT_STACK_BYTES], *cmd;
    size_t len;
    int64_t deadline = dlock__client_io_deadline(c);
    dlock__tstate *t = dlock__client_tstate(c);
    int retried = 0, followed = 0;
    dlock_err err;

    *reply = NULL;
    if (cluster_of(c) != NULL)
        return run_routed_argv(c, key, keylen, argc, argv, lens, retry_safe,
                               reply, m);
    if (!bypass_breaker && !dlock__breaker_allows(&c->breaker))
        return fast_fail(c, m);
    err = format_command(c, argc, argv, lens, stack, &cmd, &len, m);
    if (err != DLOCK_OK)
        return err;
    for (int attempt = 0;; attempt++) {
        dlock__pool_outcome oc;

        atomic_fetch_add(&c->n_commands, 1);
        err = dlock__pool_call(&c->pool, dial_for_pool, c, cmd, len, deadline,
                               reply, &oc, m);
        if (oc.dial_failed && err != DLOCK_NOMEM && err != DLOCK_INVALID)
            dlock__client_transport_failed(c, m);
        if (err == DLOCK_OK && c->deploy != NULL && !followed
            && dlock__deploy_is_readonly(*reply)) {
            /* A demoted master refused the command, which did not run:
             * find the master again and send it there, on a connection
             * of its own (the idle ones go to the old server).  Once,
             * whichever attempt met it (a retry after a broken
             * connection may be the first to reach the demoted one). */
            followed = 1;
            freeReplyObject(*reply);
            *reply = NULL;
            dlock__pool_drop_idle(&c->pool);
            dlock__deploy_master_failed(c->deploy);
            deadline = dlock__client_io_deadline(c);
            continue;
        }
        if (err == DLOCK_OK)
            dlock__client_transport_ok(c);
        if (err == DLOCK_OK || !oc.broken)
            break;
        if (oc.report)
            dlock__client_transport_failed(c, m);
        if (!oc.sent && attempt < UNSENT_RETRIES)
            continue;
        if (!oc.reused || retried >= BROKEN_RETRIES || !retry_safe
            || err == DLOCK_TIMEOUT)
            break;
        retried++;
        dlock__pool_drop_idle(&c->pool);
    }
    if (t != NULL)
        t->resent = retried > 0;
    if (cmd != stack)
        dlock__free(cmd);
    return err;
}

/* Fills the free slot that dlock__pool_borrow lent (no connection in it)
 * with a new connection in *conn.  On failure the slot goes back to the
 * pool, and a failure to reach the server (not one of memory or of the
 * options) counts against the breaker, as run_command's dials do. */
static dlock_err dial_free_slot(dlock_client *c, dlock__conn **conn,
                                dlock__msg *m)
{
    const dlock_err err = dlock__client_connect(c, conn, m);

    if (err == DLOCK_OK)
        return DLOCK_OK;
    dlock__pool_return(&c->pool, NULL);
    if (err != DLOCK_NOMEM && err != DLOCK_INVALID)
        dlock__client_transport_failed(c, m);
    return err;
}

/* Gives back a lent connection whose call failed; one that the failure
 * broke counts against the breaker (a server error reply breaks none).
 * Returns 1 when it was broken. */
static int return_failed(dlock_client *c, dlock__conn *conn, dlock__msg *m)
{
    const int broken = dlock__conn_broken(conn);

    dlock__pool_return(&c->pool, conn);
    if (broken)
        dlock__client_transport_failed(c, m);
    return broken;
}

/* One round trip on conn, lent to this caller alone: the command followed
 * by WAIT for the client's wait_replicas (replwait.h), whose timeout
 * extends the deadline.  The two must share a connection back to back,
 * so they are not pipelined with other threads' commands. */
static dlock_err call_with_wait(dlock_client *c, dlock__conn *conn, int argc,
                                const char **argv, const size_t *lens,
                                redisReply **reply, int *acked, dlock__msg *m)
{
    return dlock__call_with_wait(conn, argc, argv, lens, c->opts.wait_replicas,
                                 c->opts.wait_timeout_ms,
                                 dlock__client_io_deadline(c)
                                     + (int64_t)c->opts.wait_timeout_ms * 1000,
                                 reply, acked, m);
}

/*
 * run_command for a write whose replication must be acknowledged (acked
 * not NULL: *acked receives WAIT's count): on a connection borrowed from
 * the pool for the command and its WAIT, with run_command's rules for a
 * demoted master and one retry of a retry_safe command on a fresh
 * connection.  A cluster client does not serve WAIT (refused).
 */
static dlock_err run_command_acked(dlock_client *c, const char *key,
                                   size_t keylen, int argc, const char **argv,
                                   const size_t *lens, int retry_safe,
                                   redisReply **reply, int *acked,
                                   dlock__msg *m)
{
    if (acked == NULL)
        return run_command(c, key, keylen, argc, argv, lens, retry_safe, 0,
                           reply, m);
    *reply = NULL;
    if (cluster_of(c) != NULL)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "wait_replicas on %s: a Redis Cluster client "
                              "does not wait for replicas",
                              c->ep.desc);
    if (!dlock__breaker_allows(&c->breaker))
        return fast_fail(c, m);
    for (int attempt = 0, followed = 0;; attempt++) {
        dlock__conn *conn;
        int fresh = 0;
        dlock_err err = dlock__pool_borrow(&c->pool,
                                           dlock__client_io_deadline(c),
                                           &conn);

        if (err != DLOCK_OK)
            return dlock__msg_set(m, err,
                                  "waiting for one of %d pooled "
                                  "connections to %s",
                                  c->pool.max, c->ep.desc);
        if (conn == NULL) {
            fresh = 1;
            err = dial_free_slot(c, &conn, m);
            if (err != DLOCK_OK)
                return err;
        }
        atomic_fetch_add(&c->n_commands, 1);
        err = call_with_wait(c, conn, argc, argv, lens, reply, acked, m);
        if (err == DLOCK_OK && c->deploy != NULL && !followed
            && dlock__deploy_is_readonly(*reply)) {
            /* A demoted master refused the command, which did not run
             * (its WAIT, refused too, is not counted: replwait.h). */
            followed = 1;
            freeReplyObject(*reply);
            *reply = NULL;
            dlock__pool_return(&c->pool, conn);
            dlock__pool_drop_idle(&c->pool);
            dlock__deploy_master_failed(c->deploy);
            continue;
        }
        if (err == DLOCK_OK) {
            dlock__pool_return(&c->pool, conn);
            dlock__client_transport_ok(c);
            return DLOCK_OK;
        }
        if (!return_failed(c, conn, m))
            return err;
        if (fresh || attempt > 0 || !retry_safe || err == DLOCK_TIMEOUT)
            return err;
        dlock__pool_drop_idle(&c->pool);
    }
}

dlock_err dlock__client_command(dlock_client *c, int argc, const char **argv,
                                const size_t *lens, redisReply **reply,
                                dlock__msg *m)
{
    dlock_err err = run_command(c, NULL, 0, argc, argv, lens, 1, 0, reply, m);

    if (err == DLOCK_OK && (*reply)->type == REDIS_REPLY_ERROR) {
        err = dlock__reply_error(*reply, argv[0], c->ep.desc, m);
        freeReplyObject(*reply);
        *reply = NULL;
    }
    return err;
}

#ifdef DLOCK_TESTING
static atomic_int sha_fails;

void dlock__client_test_sha_fail(int on)
{
    atomic_store(&sha_fails, on);
}
#endif

static void sha1_hex(const char *body, char out[41])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;

    /* EVP_Digest with SHA-1 cannot fail short of allocation failure inside
     * OpenSSL; then out stays "" and dlock__client_eval sends the body with
     * EVAL instead. */
    out[0] = '\0';
#ifdef DLOCK_TESTING
    if (atomic_load(&sha_fails))
        return;
#endif
    if (EVP_Digest(body, strlen(body), digest, &len, EVP_sha1(), NULL) != 1
        || len != 20)
        return;
    for (unsigned int i = 0; i < len; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 0x0f];
    }
    out[40] = '\0';
}

/* 1 if s is among the first n entries of the SHA table. */
static int script_known(const dlock_client *c, const dlock__script *s, int n)
{
    for (int i = 0; i < n; i++)
        if (c->scripts[i].script == s)
            return 1;
    return 0;
}

/* Copies the script's SHA into sha, computing and caching it once.  The
 * table only grows and an entry is complete before nscripts counts it
 * (release store, acquire load), so a lookup takes no lock: every
 * command of every thread comes here. */
static void script_sha(dlock_client *c, const dlock__script *s, char sha[41])
{
    int n = atomic_load_explicit(&c->nscripts, memory_order_acquire);

    for (int i = 0; i < n; i++) {
        if (c->scripts[i].script == s) {
            memcpy(sha, c->scripts[i].sha, 41);
            return;
        }
    }
    sha1_hex(s->body, sha);
    /* The table is sized for every script the library has; one that does
     * not fit is still correct, only hashed on each call. */
    pthread_mutex_lock(&c->scripts_mu);
    n = atomic_load_explicit(&c->nscripts, memory_order_relaxed);
    if (n < DLOCK__MAX_SCRIPTS && sha[0] != '\0' && !script_known(c, s, n)) {
        c->scripts[n].script = s;
        memcpy(c->scripts[n].sha, sha, 41);
        atomic_store_explicit(&c->nscripts, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&c->scripts_mu);
}

void dlock__client_script_sha(dlock_client *c, const dlock__script *s,
                              char sha[41])
{
    script_sha(c, s, sha);
}

dlock_err dlock__client_script_load(dlock_client *c, const dlock__script *s,
                                    dlock__msg *m)
{
    const char *argv[] = {"SCRIPT", "LOAD", s->body};
    redisReply *r;
    dlock_err err = dlock__client_command(c, 3, argv, NULL, &r, m);

    if (err != DLOCK_OK)
        return dlock__msg_wrap(m, err, "loading script %s", s->name);
    if (r->type != REDIS_REPLY_STRING || r->len != 40)
        err = dlock__msg_set(m, DLOCK_PROTOCOL,
                             "SCRIPT LOAD %s on %s: "
                             "expected a 40-digit SHA, got %s",
                             s->name, c->ep.desc, dlock__reply_type_name(r));
    freeReplyObject(r);
    return err;
}

static int is_noscript(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && r->len >= 8
           && memcmp(r->str, "NOSCRIPT", 8) == 0;
}

#define EVAL_STACK_ARGS 16

dlock_err dlock__client_eval(dlock_client *c, const dlock__script *s,
                             int nkeys, int argc, const char **argv,
                             const size_t *lens, redisReply **reply,
                             dlock__msg *m)
{
    return dlock__client_eval_acked(c, s, nkeys, argc, argv, lens, reply, NULL,
                                    m);
}

/* Sends the script's command and ROLE on conn, lent to this caller alone,
 * and reads both answers: *reply the script's, *master 1 if ROLE names a
 * master. */
static dlock_err call_with_role(dlock_client *c, dlock__conn *conn, int argc,
                                const char **argv, const size_t *lens,
                                redisReply **reply, int *master, dlock__msg *m)
{
    const char *role_argv[] = {"ROLE"};
    const int64_t deadline = dlock__client_io_deadline(c);
    size_t len = 0;
    char *both = dlock__resp_format_pair(argc, argv, lens, 1, role_argv, &len);
    redisReply *role = NULL;
    dlock_err err;

    *reply = NULL;
    *master = 0;
    if (both == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "formatting %s with ROLE",
                              argv[0]);
    atomic_fetch_add(&c->n_commands, 1);
    err = dlock__conn_call_pair(conn, both, len, deadline, reply, &role, m);
    dlock__free(both);
    if (err == DLOCK_OK)
        *master = dlock__role_is_master(role);
    freeReplyObject(role);
    return err;
}

/*
 * A Sentinel client's script answered 0 (the key does not hold the
 * token): dlock__client_eval_owned's check.  The script (av, al: EVALSHA
 * and its arguments, turned into EVAL here: a new master may lack the
 * script) goes again with ROLE behind it on a borrowed connection; from a
 * master its answer replaces *reply.  A server that is not one (a demoted
 * master, an idle connection still on it) makes the deployment look for
 * the master again, and the script goes once more, on a connection of
 * its own.  Never DLOCK_OK with an answer from a replica.
 */
static dlock_err confirm_on_master(dlock_client *c, const dlock__script *s,
                                   int argc, const char **av, size_t *al,
                                   redisReply **reply, int *acked,
                                   dlock__msg *m)
{
    av[0] = "EVAL";
    av[1] = s->body;
    al[0] = 4;
    al[1] = strlen(s->body);
    if (acked != NULL)
        *acked = 0; /* the second send's replication is not waited for */
    for (int attempt = 0; attempt < 2; attempt++) {
        dlock__conn *conn;
        redisReply *r = NULL;
        int master = 0;
        dlock_err err = dlock__pool_borrow(&c->pool,
                                           dlock__client_io_deadline(c),
                                           &conn);

        if (err != DLOCK_OK)
            return dlock__msg_set(m, err,
                                  "script %s: waiting for one of %d pooled "
                                  "connections to %s to ask again on the "
                                  "master",
                                  s->name, c->pool.max, c->ep.desc);
        if (conn == NULL) {
            err = dial_free_slot(c, &conn, m);
            if (err != DLOCK_OK)
                return dlock__msg_wrap(m, err,
                                       "script %s: asking again on the "
                                       "master",
                                       s->name);
        }
        err = call_with_role(c, conn, argc, av, al, &r, &master, m);
        if (err != DLOCK_OK) {
            return_failed(c, conn, m);
            return dlock__msg_wrap(m, err,
                                   "script %s: asking again on the master",
                                   s->name);
        }
        dlock__pool_return(&c->pool, conn);
        if (master && !dlock__deploy_is_readonly(r)) {
            dlock__client_transport_ok(c);
            freeReplyObject(*reply);
            *reply = r;
            return DLOCK_OK;
        }
        freeReplyObject(r);
        dlock__pool_drop_idle(&c->pool);
        dlock__deploy_master_failed(c->deploy);
    }
    return dlock__msg_set(m, DLOCK_UNAVAILABLE,
                          "script %s on %s: the key did not hold the "
                          "token on a server that is no longer a master (a "
                          "failover?), and no master was found to ask "
                          "again; what became of the lock is unknown",
                          s->name, c->ep.desc);
}

static dlock_err eval(dlock_client *c, const dlock__script *s, int nkeys,
                      int argc, const char **argv, const size_t *lens,
                      redisReply **reply, int *acked, int owned,
                      dlock__msg *m);

dlock_err dlock__client_eval_acked(dlock_client *c, const dlock__script *s,
                                   int nkeys, int argc, const char **argv,
                                   const size_t *lens, redisReply **reply,
                                   int *acked, dlock__msg *m)
{
    return eval(c, s, nkeys, argc, argv, lens, reply, acked, 0, m);
}

dlock_err dlock__client_eval_owned(dlock_client *c, const dlock__script *s,
                                   int nkeys, int argc, const char **argv,
                                   const size_t *lens, redisReply **reply,
                                   int *acked, dlock__msg *m)
{
    return eval(c, s, nkeys, argc, argv, lens, reply, acked, 1, m);
}

/* dlock__client_eval_acked, and dlock__client_eval_owned's check when
 * owned. */
static dlock_err eval(dlock_client *c, const dlock__script *s, int nkeys,
                      int argc, const char **argv, const size_t *lens,
                      redisReply **reply, int *acked, int owned, dlock__msg *m)
{
    const char *stack_argv[EVAL_STACK_ARGS + 3];
    size_t stack_lens[EVAL_STACK_ARGS + 3];
    const char **av = stack_argv;
    size_t *al = stack_lens;
    char sha[41], nk[DLOCK__DECIMAL_MAX];
    dlock__tstate *t = dlock__client_tstate(c);
    int resent = 0;
    dlock_err err;

    *reply = NULL;
    if (dlock__client_redlock(c) != NULL)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "%s on %s: not served on redlock://; it is one "
                              "atomic script over one server's keys, and "
                              "independent masters share no atomic step (a "
                              "count or holder set split over masters is "
                              "none); use a lock (dlock_acquire) or a leader "
                              "on redlock://, or this pattern on one server, "
                              "Sentinel or Cluster (docs/deployments.md)",
                              s->name, c->ep.desc);
    if (c->opts.wait_replicas <= 0)
        acked = NULL;
    if (argc > EVAL_STACK_ARGS) {
        av = dlock__calloc((size_t)argc + 3, sizeof(*av));
        al = dlock__calloc((size_t)argc + 3, sizeof(*al));
        if (av == NULL || al == NULL) {
            err = dlock__msg_set(m, DLOCK_NOMEM, "building script %s",
                                 s->name);
            goto out;
        }
    }
    script_sha(c, s, sha);
    dlock__decimal_i64(nk, nkeys);
    /* Without a SHA (OpenSSL failed to hash), the body itself. */
    av[0] = sha[0] != '\0' ? "EVALSHA" : "EVAL";
    av[1] = sha[0] != '\0' ? sha : s->body;
    av[2] = nk;
    for (int i = 0; i < argc; i++) {
        av[i + 3] = argv[i];
        al[i + 3] = lens != NULL ? lens[i] : strlen(argv[i]);
    }
    for (int i = 0; i < 3; i++)
        al[i] = strlen(av[i]);
    for (int attempt = 0;; attempt++) {
        err = run_command_acked(c, nkeys > 0 ? argv[0] : NULL,
                                nkeys > 0 ? al[3] : 0, argc + 3, av, al,
                                s->retry_safe, reply, acked, m);
        /* A send that may have run stays told (tstate->resent) through
         * the NOSCRIPT retry and its SCRIPT LOAD. */
        if (t != NULL) {
            resent |= t->resent;
            t->resent = resent;
        }
        if (err != DLOCK_OK)
            goto out;
        if (!is_noscript(*reply) || attempt > 0)
            break;
        /* The server lost its script cache (restart, SCRIPT FLUSH). */
        freeReplyObject(*reply);
        *reply = NULL;
        if (cluster_of(c) != NULL) {
            /* A master of a cluster that has not seen the script (it was
             * loaded on another): EVAL caches it there, on the node the
             * key routes to, which SCRIPT LOAD could not aim at. */
            av[0] = "EVAL";
            av[1] = s->body;
            al[0] = 4;
            al[1] = strlen(s->body);
            continue;
        }
        err = dlock__client_script_load(c, s, m);
        if (err != DLOCK_OK)
            goto out;
    }
    if (owned && c->deploy != NULL && c->deploy->kind == DLOCK__SENTINEL
        && (*reply)->type == REDIS_REPLY_INTEGER && (*reply)->integer == 0) {
        err = confirm_on_master(c, s, argc + 3, av, al, reply, acked, m);
        if (err != DLOCK_OK) {
            freeReplyObject(*reply);
            *reply = NULL;
            goto out;
        }
    }
    if ((*reply)->type == REDIS_REPLY_ERROR) {
        char what[80];

        snprintf(what, sizeof(what), "script %s", s->name);
        err = dlock__reply_error(*reply, what, c->ep.desc, m);
        freeReplyObject(*reply);
        *reply = NULL;
    }
out:
    if (av != stack_argv) {
        dlock__free(av);
        dlock__free(al);
    }
    return err;
}

dlock__notifier *dlock__client_notifier(dlock_client *c)
{
    dlock__notifier *n;

    pthread_mutex_lock(&c->notifier_mu);
    if (c->notifier == NULL)
        dlock__notifier_new(c, &c->notifier);
    n = c->notifier;
    pthread_mutex_unlock(&c->notifier_mu);
    return n;
}

dlock__notifier *dlock__client_notifier_peek(dlock_client *c)
{
    dlock__notifier *n;

    pthread_mutex_lock(&c->notifier_mu);
    n = c->notifier;
    pthread_mutex_unlock(&c->notifier_mu);
    return n;
}

/* Connects, reads the server's clock (the first sample of its offset:
 * lease.h) and loads the core scripts. */
struct dlock__deploy *dlock__client_deploy(dlock_client *c)
{
    return c->deploy;
}

struct dlock__redlock *dlock__client_redlock(dlock_client *c)
{
    return c->deploy != NULL && c->deploy->kind == DLOCK__REDLOCK
               ? &c->deploy->redlock
               : NULL;
}

dlock_err dlock__client_warm_up(dlock_client *c, dlock__msg *m)
{
    const char *argv[] = {"TIME"};
    int64_t sent = dlock__boot_us();
    redisReply *r;
    dlock_err err;

    /* Redlock masters have no one clock to sample and load their scripts
     * with EVAL: a majority that answers is the warm-up. */
    if (dlock__client_redlock(c) != NULL)
        return dlock__redlock_ping(dlock__client_redlock(c),
                                   c->opts.connect_timeout_ms, m);
    err = run_command(c, NULL, 0, 1, argv, NULL, 1, 1, &r, m);
    if (err != DLOCK_OK)
        return dlock__msg_wrap(m, err, "warm-up TIME");
    if (r->type == REDIS_REPLY_ERROR)
        err = dlock__reply_error(r, "warm-up TIME", c->ep.desc, m);
    else
        dlock__skew_sample(&c->skew, sent, dlock__boot_us(),
                           dlock__server_time_us(r, 0));
    freeReplyObject(r);
    return err;
}

static dlock_err init_sync(dlock_client *c, dlock__msg *m)
{
    if (pthread_mutex_init(&c->last_error_mu, NULL) != 0
        || pthread_mutex_init(&c->scripts_mu, NULL) != 0
        || pthread_mutex_init(&c->tstates_mu, NULL) != 0
        || pthread_mutex_init(&c->notifier_mu, NULL) != 0)
        return dlock__msg_set(m, DLOCK_SYSTEM, "initialising mutexes");
    if (pthread_key_create(&c->tkey, tstate_destroy) != 0)
        return dlock__msg_set(m, DLOCK_SYSTEM,
                              "creating a thread key (at "
                              "most about 1000 clients per process)");
    c->tkey_ready = 1;
    return DLOCK_OK;
}

/* Everything that can fail before the warm-up. */
/*
 * Parses url into d and c->ep.  A single server's endpoint moves into
 * c->ep; for a Sentinel deployment c->ep is the first sentinel's, named
 * after the deployment in messages, and d keeps the rest for
 * dlock__deploy_new.  A cluster's c->ep is its first seed's, named after
 * the cluster.
 */
static dlock_err parse_url(dlock_client *c, const char *url,
                           dlock__deployment *d, dlock__msg *m)
{
    dlock_err err = dlock__url_parse_deployment(url, d, m);

    if (err != DLOCK_OK)
        return err;
    if (d->kind == DLOCK__SINGLE) {
        c->ep = d->nodes[0];
        memset(&d->nodes[0], 0, sizeof(d->nodes[0]));
        return DLOCK_OK;
    }
    err = dlock__endpoint_copy(&c->ep, &d->nodes[0], m);
    if (err == DLOCK_OK && d->kind == DLOCK__SENTINEL)
        snprintf(c->ep.desc, sizeof(c->ep.desc),
                 "Sentinel master %.100s "
                 "via %d sentinels",
                 d->master_name, d->nnodes);
    else if (err == DLOCK_OK && d->kind == DLOCK__CLUSTER)
        snprintf(c->ep.desc, sizeof(c->ep.desc),
                 "Cluster seeded by %d nodes (%.100s...)", d->nnodes,
                 d->nodes[0].desc);
    else if (err == DLOCK_OK)
        snprintf(c->ep.desc, sizeof(c->ep.desc), "Redlock over %d masters",
                 d->nnodes);
    return err;
}

static dlock_err build_with(dlock_client *c, const char *url,
                            const dlock_client_opts *opts,
                            dlock__deployment *d, dlock__msg *m);

static dlock_err build(dlock_client *c, const char *url,
                       const dlock_client_opts *opts, dlock__msg *m)
{
    dlock__deployment *d = dlock__calloc(1, sizeof(*d));
    dlock_err err;

    if (d == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "allocating a deployment");
    err = build_with(c, url, opts, d, m);
    dlock__deployment_clear(d);
    dlock__free(d);
    return err;
}

static dlock_err build_with(dlock_client *c, const char *url,
                            const dlock_client_opts *opts,
                            dlock__deployment *d, dlock__msg *m)
{
    dlock_err err;

    if (opts != NULL)
        c->opts = *opts;
    else
        dlock_client_opts_init(&c->opts);
    err = normalise_opts(&c->opts, m);
    if (err == DLOCK_OK)
        err = copy_opt_strings(&c->opts, m);
    if (err == DLOCK_OK)
        err = parse_url(c, url, d, m);
    if (err == DLOCK_OK)
        err = dlock__replwait_opts(&c->opts, d, m);
    if (err != DLOCK_OK)
        return err;
    c->cfg.keepalive_s = c->opts.keepalive_s;
    c->cfg.busy_poll_us = c->opts.busy_poll_us;
    c->cfg.busy_poll_counts = c->n_busy_polls;
    c->cfg.user = c->opts.username ? c->opts.username : c->ep.user;
    c->cfg.password = c->opts.password ? c->opts.password : c->ep.password;
    c->cfg.tls_verify = c->opts.tls_verify_peer;
    c->cfg.tls_name = c->opts.tls_server_name ? c->opts.tls_server_name
                                              : c->ep.host;
    if (c->ep.transport == DLOCK__TLS) {
        err = dlock__tls_ctx_new(&c->opts, &c->tls, m);
        if (err != DLOCK_OK)
            return err;
        c->cfg.tls = c->tls;
    }
    if (d->kind != DLOCK__SINGLE) {
        err = dlock__deploy_new(d, &c->cfg, c->opts.pool_size,
                                dlock__deadline_after_ms(
                                    c->opts.connect_timeout_ms),
                                &c->deploy, m);
        if (err != DLOCK_OK)
            return err;
    }
    err = dlock__pool_init(&c->pool, c->opts.pool_size);
    if (err != DLOCK_OK)
        return dlock__msg_set(m, err, "creating the connection pool");
    c->pool_ready = 1;
    dlock__breaker_init(&c->breaker, c->opts.breaker_threshold);
    err = init_sync(c, m);
    if (err == DLOCK_OK)
        err = dlock__prober_new(c, &c->prober, m);
    return err;
}

dlock_err dlock__client_build(const char *url, const dlock_client_opts *opts,
                              dlock_client **out, dlock__msg *m)
{
    dlock_client *c = dlock__calloc(1, sizeof(*c));
    dlock_err err;

    *out = NULL;
    if (c == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "allocating a client");
    dlock__skew_init(&c->skew);
    err = build(c, url, opts, m);
    if (err != DLOCK_OK) {
        dlock__client_destroy(c);
        return err;
    }
    *out = c;
    return DLOCK_OK;
}

void dlock__client_attach(dlock_client *c, dlock__watchdog *w,
                          dlock__reentry *r)
{
    c->watchdog = w;
    c->reentry = r;
}

dlock_err dlock__client_start_offline(dlock_client *c, dlock_err err)
{
    if (!c->opts.start_offline || err == DLOCK_NOMEM || err == DLOCK_INVALID
        || err == DLOCK_AUTH)
        return err;
    /* Start with the breaker open; the probe connects later. */
    dlock__breaker_trip(&c->breaker);
    dlock__prober_kick(c->prober);
    return DLOCK_OK;
}

void dlock__client_destroy(dlock_client *c)
{
    if (c == NULL)
        return;
    dlock__prober_free(c->prober);
    dlock__notifier_free(c->notifier);
    if (c->pool_ready)
        dlock__pool_destroy(&c->pool);
    dlock__deploy_free(c->deploy);
    dlock__tls_ctx_free(c->tls);
    if (c->tkey_ready) {
        pthread_key_delete(c->tkey);
        while (c->tstates != NULL) {
            dlock__tstate *t = c->tstates;

            c->tstates = t->next;
            dlock__free(t);
        }
        pthread_mutex_destroy(&c->last_error_mu);
        pthread_mutex_destroy(&c->scripts_mu);
        pthread_mutex_destroy(&c->tstates_mu);
        pthread_mutex_destroy(&c->notifier_mu);
    }
    dlock__skew_destroy(&c->skew);
    dlock__endpoint_clear(&c->ep);
    free_opt_strings(&c->opts);
    dlock__free(c);
}

dlock_err dlock_client_ping(dlock_client *c, int64_t *rtt_us)
{
    const char *argv[] = {"PING"};
    dlock__msg *m = dlock__client_begin(c);
    int64_t started = dlock__now_us();
    redisReply *r;
    dlock_err err;

    if (rtt_us != NULL)
        *rtt_us = 0;
    err = run_command(c, NULL, 0, 1, argv, NULL, 1, 1, &r, m);
    if (err != DLOCK_OK)
        return dlock__msg_wrap(m, err, "PING");
    if (r->type == REDIS_REPLY_ERROR)
        err = dlock__reply_error(r, "PING", c->ep.desc, m);
    freeReplyObject(r);
    if (err == DLOCK_OK && rtt_us != NULL)
        *rtt_us = dlock__now_us() - started;
    return err;
}

const char *dlock_client_errmsg(const dlock_client *c)
{
    const dlock__tstate *t = dlock__client_tstate(c);

    return t != NULL ? t->msg.text : "";
}

int64_t dlock_client_busy_ttl_ms(const dlock_client *c)
{
    const dlock__tstate *t = dlock__client_tstate(c);

    return t != NULL ? t->busy_ttl_ms : 0;
}

dlock_breaker_state dlock_client_breaker(const dlock_client *c)
{
    return atomic_load(&c->breaker.open) ? DLOCK_BREAKER_OPEN
                                         : DLOCK_BREAKER_CLOSED;
}

void dlock_client_stats_get(const dlock_client *cc, dlock_client_stats *out)
{
    dlock_client *c = (dlock_client *)cc; /* the pool's mutex is not const */

    memset(out, 0, sizeof(*out));
    out->commands = atomic_load(&c->n_commands);
    out->transport_errors = atomic_load(&c->n_transport_errors);
    out->reconnects = atomic_load(&c->n_reconnects);
    out->breaker_opens = atomic_load(&c->breaker.opens);
    out->fast_fails = atomic_load(&c->n_fast_fails);
    out->renewals = atomic_load(&c->n_renewals);
    out->locks_lost = atomic_load(&c->n_locks_lost);
    out->busy_polls = atomic_load(&c->n_busy_polls[0]);
    out->busy_poll_hits = atomic_load(&c->n_busy_polls[1]);
    dlock__pool_counts(&c->pool, &out->pool_open, &out->pool_in_use);
}

const char *dlock_client_endpoint(const dlock_client *c)
{
    return c->ep.desc;
}

const char *dlock_version(void)
{
    return DLOCK_VERSION_STRING;
}
