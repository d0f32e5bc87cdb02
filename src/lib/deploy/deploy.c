/*
 * deploy.c: routing a client's commands in a multi-server deployment (see
 * deploy.h).
 *
 * Sentinel invariant: dp->master is -1 or the index of a server that
 * answered ROLE with master when it was chosen.  It is reset to -1 by the
 * first command that finds it is not (READONLY, a broken connection), and
 * set by whichever thread next finds the master; the watcher sets it as
 * soon as a sentinel announces a switch.  A master found later replaces
 * the one a slower thread found before, which is harmless: both were
 * verified, and commands that reach a demoted one answer READONLY.
 */
#include "deploy/deploy.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/thread.h"
#include "base/clock.h"

/* How long the watcher waits for a switch before checking for stop. */
#define WATCH_SLICE_MS 200

static int is_readonly(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_ERROR
           && (strncmp(r->str, "READONLY", 8) == 0
               || strncmp(r->str, "MASTERDOWN", 10) == 0);
}

/* Makes the master at ep current (it was verified by the caller). */
static dlock_err set_master(dlock__deploy *dp, const char *host, int port,
                            dlock__msg *m)
{
    int index;
    dlock_err err = dlock__nodeset_add(&dp->masters, &dp->sentinel.master_ep,
                                       host, port, &index, m);

    if (err != DLOCK_OK)
        return err;
    pthread_mutex_lock(&dp->mu);
    if (dp->last_master >= 0 && dp->last_master != index)
        atomic_fetch_add(&dp->failovers, 1);
    dp->master = index;
    dp->last_master = index;
    pthread_mutex_unlock(&dp->mu);
    return DLOCK_OK;
}

/* The current master's index, found through the sentinels if unknown. */
static dlock_err current_master(dlock__deploy *dp, int64_t deadline_us,
                                int *index, dlock__msg *m)
{
    dlock__endpoint ep;
    dlock_err err;

    pthread_mutex_lock(&dp->mu);
    *index = dp->master;
    pthread_mutex_unlock(&dp->mu);
    if (*index >= 0)
        return DLOCK_OK;
    err = dlock__sentinel_discover(&dp->sentinel, deadline_us, &ep, m);
    if (err != DLOCK_OK)
        return err;
    err = set_master(dp, ep.host, ep.port, m);
    dlock__endpoint_clear(&ep);
    if (err != DLOCK_OK)
        return err;
    pthread_mutex_lock(&dp->mu);
    *index = dp->master;
    pthread_mutex_unlock(&dp->mu);
    return *index >= 0 ? DLOCK_OK
                       : dlock__msg_set(m, DLOCK_UNAVAILABLE,
                                        "the master "
                                        "changed again while it was found");
}

/* Forgets master index (if it is still current), so the next command
 * looks for the master again. */
static void master_failed(dlock__deploy *dp, int index)
{
    pthread_mutex_lock(&dp->mu);
    if (dp->master == index)
        dp->master = -1;
    pthread_mutex_unlock(&dp->mu);
}

static dlock_err sentinel_call(dlock__deploy *dp, int argc, const char **argv,
                               const size_t *lens, int retry_safe,
                               int64_t deadline_us, redisReply **reply,
                               dlock__msg *m)
{
    for (int attempt = 0;; attempt++) {
        int index, moved;
        dlock_err err = current_master(dp, deadline_us, &index, m);

        if (err != DLOCK_OK)
            return err;
        err = dlock__nodeset_call(&dp->masters, index, argc, argv, lens,
                                  deadline_us, reply, m);
        moved = is_readonly(*reply);
        if (err == DLOCK_OK && !moved)
            return DLOCK_OK;
        if (err != DLOCK_OK && err != DLOCK_UNAVAILABLE
            && err != DLOCK_TIMEOUT)
            return err;
        master_failed(dp, index);
        /* READONLY: the command did not run, so it can always go again;
         * a broken connection only for a command safe to repeat. */
        if (attempt > 0 || (!moved && (!retry_safe || err == DLOCK_TIMEOUT)))
            return moved ? DLOCK_OK : err;
        if (moved) {
            freeReplyObject(*reply);
            *reply = NULL;
        }
    }
}

dlock_err dlock__deploy_call(dlock__deploy *dp, const char *key, size_t keylen,
                             int argc, const char **argv, const size_t *lens,
                             int retry_safe, int64_t deadline_us,
                             redisReply **reply, dlock__msg *m)
{
    *reply = NULL;
    switch (dp->kind) {
    case DLOCK__SENTINEL:
        return sentinel_call(dp, argc, argv, lens, retry_safe, deadline_us,
                             reply, m);
    case DLOCK__CLUSTER:
        return dlock__cluster_call(&dp->cluster, key ? key : "",
                                   key ? keylen : 0, argc, argv, lens,
                                   deadline_us, reply, NULL, m);
    case DLOCK__SINGLE:
    case DLOCK__REDLOCK: break;
    }
    return dlock__msg_set(m, DLOCK_INVALID,
                          "a %s deployment has no one "
                          "server for %s",
                          dlock__deploy_kind_name(dp->kind), argv[0]);
}

/* A connection to a master of the cluster: slot 0's, or else the first
 * of the others that answers (a subscriber hears PUBLISH from the whole
 * cluster, and the breaker's probe asks only whether one answers).  When
 * none does, the slot map is read again for the next try. */
static dlock_err cluster_connect(dlock__cluster *c, int64_t deadline_us,
                                 dlock__conn **out, dlock__msg *m)
{
    int tried[DLOCK__NODESET_MAX] = {0};
    dlock_err err = dlock__msg_set(m, DLOCK_UNAVAILABLE,
                                   "no master of the cluster is known");

    for (unsigned slot = 0; slot < DLOCK__CLUSTER_SLOTS; slot++) {
        int index = dlock__cluster_slot_node(c, slot);

        if (index < 0 || tried[index])
            continue;
        tried[index] = 1;
        err = dlock__nodeset_connect(&c->nodes, index, deadline_us, out, m);
        if (err == DLOCK_OK || err == DLOCK_NOMEM || err == DLOCK_AUTH)
            return err;
    }
    (void)dlock__cluster_refresh(c, deadline_us, NULL);
    return err;
}

/* A Redlock release publishes on every master where it deleted the key,
 * so a subscriber needs only one: the first, in the URL's order, that a
 * connection reaches before deadline_us. */
static dlock_err redlock_connect(dlock__deploy *dp, int64_t deadline_us,
                                 dlock__conn **out, dlock__msg *m)
{
    dlock_err err = DLOCK_UNAVAILABLE;

    for (int i = 0; i < dp->redlock.n; i++) {
        err = dlock__nodeset_connect(&dp->redlock.nodes, i, deadline_us, out,
                                     m);
        if (err == DLOCK_OK)
            return DLOCK_OK;
    }
    return err;
}

dlock_err dlock__deploy_connect(dlock__deploy *dp, int64_t deadline_us,
                                dlock__conn **out, dlock__msg *m)
{
    int index = -1;
    dlock_err err;

    *out = NULL;
    switch (dp->kind) {
    case DLOCK__SENTINEL:
        err = current_master(dp, deadline_us, &index, m);
        if (err != DLOCK_OK)
            return err;
        err = dlock__nodeset_connect(&dp->masters, index, deadline_us, out, m);
        /* A master that cannot be reached is looked for again next time. */
        if (err == DLOCK_UNAVAILABLE || err == DLOCK_TIMEOUT)
            master_failed(dp, index);
        return err;
    case DLOCK__CLUSTER:
        return cluster_connect(&dp->cluster, deadline_us, out, m);
    case DLOCK__REDLOCK: return redlock_connect(dp, deadline_us, out, m);
    case DLOCK__SINGLE: break;
    }
    return dlock__msg_set(m, DLOCK_INVALID,
                          "a %s deployment has no one "
                          "server to subscribe to",
                          dlock__deploy_kind_name(dp->kind));
}

void dlock__deploy_master_failed(dlock__deploy *dp)
{
    int index;

    if (dp->kind != DLOCK__SENTINEL)
        return;
    pthread_mutex_lock(&dp->mu);
    index = dp->master;
    pthread_mutex_unlock(&dp->mu);
    master_failed(dp, index);
}

int dlock__deploy_is_readonly(const redisReply *reply)
{
    return is_readonly(reply);
}

const char *dlock__deploy_server(dlock__deploy *dp, const char *key,
                                 size_t keylen)
{
    int index;

    switch (dp->kind) {
    case DLOCK__SENTINEL:
        pthread_mutex_lock(&dp->mu);
        index = dp->master;
        pthread_mutex_unlock(&dp->mu);
        return index >= 0 ? dlock__nodeset_desc(&dp->masters, index) : "?";
    case DLOCK__CLUSTER:
        index = dlock__cluster_slot_node(
            &dp->cluster, key ? dlock__cluster_keyslot(key, keylen) : 0);
        return index >= 0 ? dlock__nodeset_desc(&dp->cluster.nodes, index)
                          : "?";
    case DLOCK__SINGLE:
    case DLOCK__REDLOCK: break;
    }
    return dp->desc;
}

/* ---- the +switch-master watcher --------------------------------------- */

/* Follows an announced switch: the announcement says a new master
 * exists, discovery finds it with ROLE verified (which is what goes into
 * dp->master, even if the sentinels have moved on again meanwhile). */
static void follow_switch(dlock__deploy *dp)
{
    dlock__endpoint ep;
    dlock__msg m;

    if (dlock__sentinel_discover(&dp->sentinel, dlock__deadline_after_ms(2000),
                                 &ep, &m)
        != DLOCK_OK)
        return;
    (void)set_master(dp, ep.host, ep.port, &m);
    dlock__endpoint_clear(&ep);
}

static void *watch(void *arg)
{
    dlock__deploy *dp = arg;
    dlock__conn *sub = NULL;

    while (!atomic_load(&dp->stop)) {
        char host[256];
        int port;
        dlock__msg m;
        dlock_err err;

        if (sub == NULL
            && dlock__sentinel_subscribe(&dp->sentinel,
                                         dlock__deadline_after_ms(1000), &sub,
                                         &m)
                   != DLOCK_OK) {
            /* No sentinel answers: try again shortly. */
            poll(NULL, 0, WATCH_SLICE_MS);
            continue;
        }
        err = dlock__sentinel_next_switch(&dp->sentinel, sub,
                                          dlock__deadline_after_ms(
                                              WATCH_SLICE_MS),
                                          host, &port, &m);
        if (err == DLOCK_OK) {
            follow_switch(dp);
        } else if (err != DLOCK_TIMEOUT) {
            dlock__conn_free(sub);
            sub = NULL;
        }
    }
    dlock__conn_free(sub);
    return NULL;
}

/* ---- life ------------------------------------------------------------- */

static dlock_err sentinel_new(dlock__deploy *dp, const dlock__deployment *d,
                              const dlock__conn_cfg *cfg, int pool_size,
                              int64_t deadline_us, dlock__msg *m)
{
    int index;
    dlock_err err = dlock__sentinel_init(&dp->sentinel, d, cfg, m);

    if (err != DLOCK_OK)
        return err;
    err = dlock__nodeset_init(&dp->masters, cfg, pool_size, m);
    if (err != DLOCK_OK)
        return err;
    err = current_master(dp, deadline_us, &index, m);
    if (err != DLOCK_OK)
        return err;
    if (dlock__thread_start(&dp->watcher, watch, dp) != 0)
        return dlock__msg_set(m, DLOCK_SYSTEM,
                              "starting the Sentinel "
                              "watcher thread");
    dp->watching = 1;
    snprintf(dp->desc, sizeof(dp->desc),
             "Sentinel master %.128s via %d "
             "sentinels",
             d->master_name, d->nnodes);
    return DLOCK_OK;
}

dlock_err dlock__deploy_new(const dlock__deployment *d,
                            const dlock__conn_cfg *cfg, int pool_size,
                            int64_t deadline_us, dlock__deploy **out,
                            dlock__msg *m)
{
    dlock__deploy *dp = dlock__calloc(1, sizeof(*dp));
    dlock_err err = DLOCK_INVALID;

    *out = NULL;
    if (dp == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "allocating a deployment");
    dp->kind = d->kind;
    dp->master = -1;
    dp->last_master = -1;
    if (pthread_mutex_init(&dp->mu, NULL) != 0) {
        dlock__free(dp);
        return dlock__msg_set(m, DLOCK_SYSTEM, "creating a mutex");
    }
    switch (d->kind) {
    case DLOCK__SENTINEL:
        err = sentinel_new(dp, d, cfg, pool_size, deadline_us, m);
        break;
    case DLOCK__CLUSTER:
        err = dlock__cluster_init(&dp->cluster, d, cfg, pool_size, deadline_us,
                                  m);
        snprintf(dp->desc, sizeof(dp->desc), "Cluster seeded by %.200s",
                 d->nodes[0].desc);
        break;
    case DLOCK__REDLOCK:
        err = dlock__redlock_init(&dp->redlock, d, cfg, pool_size, m);
        snprintf(dp->desc, sizeof(dp->desc), "Redlock over %d masters",
                 d->nnodes);
        break;
    case DLOCK__SINGLE:
        err = dlock__msg_set(m, DLOCK_INVALID,
                             "a single server is not a "
                             "deployment");
        break;
    }
    if (err != DLOCK_OK) {
        dlock__deploy_free(dp);
        return err;
    }
    *out = dp;
    return DLOCK_OK;
}

void dlock__deploy_free(dlock__deploy *dp)
{
    if (dp == NULL)
        return;
    if (dp->watching) {
        atomic_store(&dp->stop, 1);
        pthread_join(dp->watcher, NULL);
    }
    switch (dp->kind) {
    case DLOCK__SENTINEL:
        /* Both are safe on zeroed memory (an init that failed half-way). */
        if (dp->masters.pool_size > 0)
            dlock__nodeset_destroy(&dp->masters);
        if (dp->sentinel.cfg != NULL)
            dlock__sentinel_destroy(&dp->sentinel);
        break;
    case DLOCK__CLUSTER:
        if (dp->cluster.nodes.pool_size > 0)
            dlock__cluster_destroy(&dp->cluster);
        break;
    case DLOCK__REDLOCK:
        if (dp->redlock.nodes.pool_size > 0)
            dlock__redlock_destroy(&dp->redlock);
        break;
    case DLOCK__SINGLE: break;
    }
    pthread_mutex_destroy(&dp->mu);
    dlock__free(dp);
}
