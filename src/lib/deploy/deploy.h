/*
 * deploy.h: the client's view of a multi-server deployment: where each
 * command goes.
 *
 * A single server needs none of this (client.c sends to its endpoint).
 * For a Sentinel deployment a command goes to the current master: found
 * through the sentinels with ROLE verified (sentinel.c), followed at once
 * when a sentinel announces +switch-master (a watcher thread), and looked
 * for again when a command answers READONLY or its connection breaks.  For
 * a cluster a command goes to the master of its key's slot (cluster.c).  A
 * Redlock deployment has no single place for a command: lock.c runs its
 * rounds on dp->redlock.
 *
 * Masters found over time are kept (a dlock__nodeset never forgets a
 * server), so an endpoint a connection borrows stays valid for the life of
 * the deploy.
 *
 * Ownership: dlock__deploy_new copies what it needs of the deployment and
 * borrows cfg, which must outlive it.  Threads: every function is
 * thread-safe; the watcher thread is stopped and joined by
 * dlock__deploy_free.
 */
#ifndef DLOCK_SRC_DEPLOY_H
#define DLOCK_SRC_DEPLOY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "deploy/cluster.h"
#include "transport/conn.h"
#include "base/msg.h"
#include "deploy/nodeset.h"
#include "deploy/redlock.h"
#include "deploy/sentinel.h"
#include "transport/url.h"

typedef struct dlock__deploy {
    dlock__deploy_kind kind;
    char desc[300]; /* "Sentinel master dlock via ...", ... */

    /* DLOCK__SENTINEL */
    dlock__sentinel sentinel;
    dlock__nodeset masters;  /* every master found so far */
    pthread_mutex_t mu;      /* guards master */
    int master;              /* index in masters; -1: look again */
    int last_master;         /* the last one set, for failovers */
    atomic_ullong failovers; /* masters switched to after the first */
    pthread_t watcher;
    int watching;
    atomic_int stop;

    /* DLOCK__CLUSTER */
    dlock__cluster cluster;

    /* DLOCK__REDLOCK */
    dlock__redlock redlock;
} dlock__deploy;

/* Prepares the deployment d (not DLOCK__SINGLE): Sentinel finds its
 * master and starts its watcher, Cluster reads its slot map, Redlock
 * prepares its masters; all before deadline_us.  *out is NULL on failure.
 * Returns DLOCK_OK, DLOCK_UNAVAILABLE, DLOCK_AUTH, DLOCK_NOMEM,
 * DLOCK_SYSTEM, DLOCK_PROTOCOL or DLOCK_INVALID. */
dlock_err dlock__deploy_new(const dlock__deployment *d,
                            const dlock__conn_cfg *cfg, int pool_size,
                            int64_t deadline_us, dlock__deploy **out,
                            dlock__msg *m);

/* Stops the watcher and frees everything; NULL is fine. */
void dlock__deploy_free(dlock__deploy *dp);

/*
 * Runs one command whose first key is key[0..keylen) (key NULL: a command
 * without keys) on the server that must serve it, all before deadline_us.
 * A command that may have run already (its connection broke mid-way) is
 * sent again only when retry_safe.  Error replies other than the
 * redirections handled here come back as replies.  Returns DLOCK_OK or a
 * transport error (DLOCK_UNAVAILABLE, DLOCK_TIMEOUT, ...).
 */
dlock_err dlock__deploy_call(dlock__deploy *dp, const char *key, size_t keylen,
                             int argc, const char **argv, const size_t *lens,
                             int retry_safe, int64_t deadline_us,
                             redisReply **reply, dlock__msg *m);

/* A connection of the caller's own for a subscriber: to the Sentinel
 * master, or to any cluster master (PUBLISH travels the whole cluster). */
dlock_err dlock__deploy_connect(dlock__deploy *dp, int64_t deadline_us,
                                dlock__conn **out, dlock__msg *m);

/* Tells a Sentinel deployment that the current master refused a write
 * (READONLY) or could not be reached: the next command or connection
 * looks for the master again.  No-op for other kinds. */
void dlock__deploy_master_failed(dlock__deploy *dp);

/* 1 if reply is an error that says the server is not (or no longer) a
 * writable master: READONLY or MASTERDOWN.  The command did not run. */
int dlock__deploy_is_readonly(const redisReply *reply);

/* "host:port" of the server that serves key (key NULL: any), for
 * messages; "?" when none is known. */
const char *dlock__deploy_server(dlock__deploy *dp, const char *key,
                                 size_t keylen);

#endif /* DLOCK_SRC_DEPLOY_H */
