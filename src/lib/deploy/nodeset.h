/*
 * nodeset.h: a set of Redis servers, each with its own connection pool.
 *
 * The multi-server deployments (sentinel.c, cluster.c, redlock.c) talk to
 * several servers that share the client's credentials and TLS settings but
 * not its connections: a command goes to one named server.  A nodeset keeps
 * one dlock__pool per server, so each module runs commands on "server i"
 * with the same rules as the single-server client: a borrowed connection
 * per call, opened lazily outside the pool's mutex, never reused once
 * broken, every call bounded by the caller's deadline.
 *
 * Servers can be added (a cluster learns of nodes from its slot map, a
 * Sentinel deployment of its master from the sentinels) up to
 * DLOCK__NODESET_MAX; they are never removed, so an index stays valid for
 * the set's life.
 *
 * Ownership: the set copies every endpoint it is given and owns the copies;
 * it borrows cfg (and what cfg points to), which must outlive it.
 * Threads: every function is thread-safe; one call per borrowed connection.
 */
#ifndef DLOCK_SRC_NODESET_H
#define DLOCK_SRC_NODESET_H

#include <pthread.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "transport/conn.h"
#include "base/msg.h"
#include "transport/pool.h"
#include "transport/url.h"

#define DLOCK__NODESET_MAX 64

typedef struct dlock__node {
    dlock__endpoint ep;
    dlock__pool pool;
} dlock__node;

typedef struct dlock__nodeset {
    pthread_mutex_t mu; /* guards count and adding */
    int count;
    int pool_size;
    const dlock__conn_cfg *cfg;
    dlock__node *nodes[DLOCK__NODESET_MAX];
} dlock__nodeset;

/* Prepares an empty set whose servers get pools of pool_size connections.
 * Returns DLOCK_OK or DLOCK_SYSTEM. */
dlock_err dlock__nodeset_init(dlock__nodeset *ns, const dlock__conn_cfg *cfg,
                              int pool_size, dlock__msg *m);

/* Frees every server and connection; no call may be running. */
void dlock__nodeset_destroy(dlock__nodeset *ns);

/* The index of the server at host:port, added (with template's
 * credentials, transport and db) if it is not in the set yet.  Returns
 * DLOCK_OK, DLOCK_NOMEM, or DLOCK_INVALID when the set is full. */
dlock_err dlock__nodeset_add(dlock__nodeset *ns,
                             const dlock__endpoint *template_ep,
                             const char *host, int port, int *index,
                             dlock__msg *m);

/* The number of servers; indexes 0..count-1 are valid. */
int dlock__nodeset_count(dlock__nodeset *ns);

/* "host:port" of server i (stable for the set's life). */
const char *dlock__nodeset_desc(dlock__nodeset *ns, int i);

/* Server i's endpoint (stable for the set's life), or NULL. */
const dlock__endpoint *dlock__nodeset_endpoint(dlock__nodeset *ns, int i);

/* Runs one command on server i, all before deadline_us (see
 * dlock__conn_call).  A server error comes back as a reply of type
 * REDIS_REPLY_ERROR, not as an error code.  *reply is the caller's.  When
 * an idle pooled connection turns out closed by the server, the command
 * is sent once more on a fresh connection: send only commands that are
 * safe to repeat (every caller's are: reads, and scripts idempotent by
 * token). */
dlock_err dlock__nodeset_call(dlock__nodeset *ns, int i, int argc,
                              const char **argv, const size_t *lens,
                              int64_t deadline_us, redisReply **reply,
                              dlock__msg *m);

/* Runs two commands in one round trip on one connection of server i:
 * first (whose reply must be +OK, as ASKING's) then the command proper,
 * whose reply is returned as by dlock__nodeset_call. */
dlock_err dlock__nodeset_call_after(dlock__nodeset *ns, int i,
                                    const char *first, int argc,
                                    const char **argv, const size_t *lens,
                                    int64_t deadline_us, redisReply **reply,
                                    dlock__msg *m);

/* The same with the command already formatted in RESP, cmd[0..len)
 * (borrowed for the call); what names it in messages ("EVALSHA"). */
dlock_err dlock__nodeset_call_raw(dlock__nodeset *ns, int i, const char *first,
                                  const char *cmd, size_t len,
                                  const char *what, int64_t deadline_us,
                                  redisReply **reply, dlock__msg *m);

/* Lends an idle connection of server i without waiting and without
 * connecting: 1 and *conn when one is idle, else 0 (*conn NULL).  It must
 * come back through dlock__nodeset_put.  For callers that multiplex
 * several servers with poll(2) (redlock.c). */
int dlock__nodeset_take_idle(dlock__nodeset *ns, int i, dlock__conn **conn);

/* Gives back a connection lent by dlock__nodeset_take_idle; with discard
 * (a reply that may still come, or a broken stream) it is closed. */
void dlock__nodeset_put(dlock__nodeset *ns, int i, dlock__conn *conn,
                        int discard);

/* Closes server i's idle connections (they likely died with one that
 * was found closed). */
void dlock__nodeset_drop_idle(dlock__nodeset *ns, int i);

/* Opens a connection of its own to server i (for a subscriber), which the
 * caller frees with dlock__conn_free. */
dlock_err dlock__nodeset_connect(dlock__nodeset *ns, int i,
                                 int64_t deadline_us, dlock__conn **out,
                                 dlock__msg *m);

#endif /* DLOCK_SRC_NODESET_H */
