/*
 * pool.h: the client's connection pool.
 *
 * The pool bounds how many connections a client opens (pool_size) and
 * runs commands on them in two ways.
 *
 * dlock__pool_call pipelines (pipe.h).  While fewer than a few commands
 * run at once, a command goes to an idle pipe if there is one, else to a
 * new connection while a slot is free; from then on it joins the busiest
 * pipe that is not yet full, so that many threads' commands gather on few
 * connections (pool.c, PIPE_SHARE_FROM); with every pipe full, a new
 * connection while a slot is free, else the pipe with the fewest commands
 * on it, behind them.  No caller ever waits for a connection to come
 * free, so pool_size bounds connections, not concurrency: 64 threads run
 * on a pool of 2.
 *
 * dlock__pool_borrow lends a connection to one caller alone (a command
 * that needs two round trips in a row, ASKING then the command, or a
 * caller multiplexing several servers with poll), idle ones most recently
 * used first; an idle pipe gives up its connection for it.
 *
 * Neither connects under the mutex: a caller given a free slot opens the
 * connection itself, so a slow connect never blocks the others.
 *
 * Invariant: open == idle count + lent connections + pipes + slots being
 * connected, and open <= max.  Each borrow is matched by exactly one
 * dlock__pool_return (with the connection, or NULL for a slot whose
 * connect failed).  A broken pipe is freed by the last call to leave it.
 *
 * Threads: every function is thread-safe.
 */
#ifndef DLOCK_SRC_POOL_H
#define DLOCK_SRC_POOL_H

#include <pthread.h>
#include <stdint.h>

#include "transport/conn.h"
#include "transport/pipe.h"

typedef struct dlock__pool {
    pthread_mutex_t mu;
    pthread_cond_t freed; /* signalled when a slot or connection returns */
    dlock__conn **idle;
    int nidle;
    dlock__pipe **pipes;
    int npipes;
    int open;
    int lent;
    int dialing; /* commands whose slot dlock__pool_call is connecting */
    int max;
} dlock__pool;

/* Opens a connection for the pool by deadline_us (the client's endpoint or
 * current master; one server of a set).  *out is NULL on failure. */
typedef dlock_err (*dlock__pool_dial)(void *arg, int64_t deadline_us,
                                      dlock__conn **out, dlock__msg *m);

/* How a dlock__pool_call that failed went, for the caller's retry rule. */
typedef struct dlock__pool_outcome {
    int dial_failed; /* no connection: the pool could not open one */
    int broken;      /* the connection failed while the command was on it */
    int sent;        /* its bytes reached the socket: it may have run */
    int reused;      /* that connection had answered before, or this
                      * command had not opened it */
    int opened;      /* the pool opened a connection for this command */
    int report;      /* count the failure: one command per broken
                      * connection has this */
} dlock__pool_outcome;

/* Returns DLOCK_OK, DLOCK_NOMEM or DLOCK_SYSTEM. */
dlock_err dlock__pool_init(dlock__pool *p, int max);

/* Frees idle connections; all lent ones must have come back. */
void dlock__pool_destroy(dlock__pool *p);

/* Waits until deadline for an idle connection (*conn set) or a free slot
 * (*conn NULL: the caller connects, then returns the result).  Returns
 * DLOCK_OK or DLOCK_TIMEOUT (every connection stayed busy). */
dlock_err dlock__pool_borrow(dlock__pool *p, int64_t deadline_us,
                             dlock__conn **conn);

/*
 * Sends cmd (len bytes, a formatted command, borrowed for the call) on a
 * pooled connection, pipelined with other threads' commands, and waits for
 * its reply until deadline_us.  Opens a connection with dial(arg) when the
 * pool has a free slot and no idle one.  Returns DLOCK_OK with *reply the
 * caller's (an error reply included), or the failure with *out saying how
 * it went; every connection failure breaks that connection for each
 * command on it (pipe.h).
 */
dlock_err dlock__pool_call(dlock__pool *p, dlock__pool_dial dial, void *arg,
                           const char *cmd, size_t len, int64_t deadline_us,
                           redisReply **reply, dlock__pool_outcome *out,
                           dlock__msg *m);

/* Gives back a borrowed connection, or NULL for a slot that did not connect.
 * A broken connection is freed and its slot released. */
void dlock__pool_return(dlock__pool *p, dlock__conn *conn);

/* Frees every idle connection and idle pipe (after a transport failure
 * they are likely dead too, as after a server restart). */
void dlock__pool_drop_idle(dlock__pool *p);

/* Snapshot of open connections, and of those lent or carrying commands. */
void dlock__pool_counts(dlock__pool *p, int *open, int *lent);

#endif /* DLOCK_SRC_POOL_H */
