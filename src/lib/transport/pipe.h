/*
 * pipe.h: one connection shared by many threads, their commands pipelined.
 *
 * A dlock__pipe carries the commands of every thread that the pool sends
 * to it (pool.c picks the pipe).  There is no I/O thread: the threads take
 * turns at the two jobs (flat combining).  A thread whose command is queued
 * while nobody writes becomes the writer and sends every queued command in
 * one write; a thread waiting for its reply while nobody reads becomes the
 * reader and hands out replies in send order until its own has come, then
 * wakes the oldest waiter to take over.  On two cores this costs one
 * wake-up per command, where an I/O thread would cost two.
 *
 * States: a pipe is LIVE until any failure of its connection (a write or
 * read error, a protocol error, a command past its deadline: a late reply
 * would be matched to the wrong command once that one gave up), then
 * BROKEN for good.  Breaking resolves every command at once: those in
 * flight fail with sent set (they may have run: the caller decides whether
 * re-asking is safe, as client.c does with its retry_safe scripts), those
 * still queued fail with sent clear (they never left: safe to send
 * anywhere), and the socket is shut down so that a reader or writer blocked
 * on it returns.  The one whose deadline passed gets DLOCK_TIMEOUT.
 *
 * Invariant: replies are matched to calls strictly in send order: the
 * in-flight list is appended in the order bytes are written (one writer at
 * a time) and popped one reply at a time (one reader at a time).
 *
 * Threads: dlock__pipe_run is called by any number of threads at once; a
 * pipe's own mutex guards its lists and roles and is dropped while a thread
 * writes or reads.  The pool joins, detaches and frees pipes under its own
 * mutex (pool.c says how a broken pipe is freed exactly once).  Calls live
 * on their callers' stacks; a call is on a pipe's lists only until it is
 * done.
 */
#ifndef DLOCK_SRC_PIPE_H
#define DLOCK_SRC_PIPE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/conn.h"
#include "base/msg.h"

/* One command's trip through a pipe (the caller's, on its stack). */
typedef struct dlock__call {
    const char *cmd; /* the formatted command, borrowed until done */
    size_t len;
    int64_t deadline_us;
    dlock__msg *m; /* may be NULL */
    /* Results, valid once done: */
    redisReply *reply; /* the caller's, when err is DLOCK_OK */
    dlock_err err;
    int sent;   /* its bytes reached the socket: it may have run */
    int reused; /* the pipe had answered before this call failed */
    int broke;  /* it failed because its pipe broke */
    int report; /* the one call of a broken pipe that reports the failure
                 * (to the breaker: one failure, however many calls) */
    /* The pipe's: */
    atomic_int state; /* running, sleeping, done, turn */
    unsigned park;    /* the pipe's parking slot its thread sleeps in */
    struct dlock__call *next;
} dlock__call;

typedef struct dlock__pipe dlock__pipe;

/* A pipe over conn, which it owns from now on (also on failure: then conn
 * is freed).  Returns NULL when out of memory. */
dlock__pipe *dlock__pipe_new(dlock__conn *conn);

/* Frees the pipe and its connection; nobody may have joined it.  NULL is
 * fine. */
void dlock__pipe_free(dlock__pipe *p);

/* Counts a call in before it runs and out after; both under the pool's
 * mutex, so that a pipe seen there with load 0 has nobody inside.  Leave
 * returns 1 if p is broken and now empty: the caller frees it. */
void dlock__pipe_join(dlock__pipe *p);
int dlock__pipe_leave(dlock__pipe *p);

/* Runs call (cmd, len, deadline_us and m set) on p, which the caller
 * joined, and returns once the call is done, without touching p again. */
void dlock__pipe_run(dlock__pipe *p, dlock__call *call);

/* Calls joined and not yet left (under the pool's mutex). */
int dlock__pipe_load(const dlock__pipe *p);

/* 1 once p has failed: it takes no more calls. */
int dlock__pipe_broken(dlock__pipe *p);

/* Takes the connection out of a live pipe nobody has joined and frees the
 * pipe (for a caller that needs a connection to itself). */
dlock__conn *dlock__pipe_detach(dlock__pipe *p);

#endif /* DLOCK_SRC_PIPE_H */
