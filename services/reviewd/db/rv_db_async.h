/*
 * rv_db_async.h: one non-blocking PostgreSQL connection, driven by an
 * event loop that must never block (http/rv_loop.h).
 *
 * rv_db.h's connections block their thread until PostgreSQL answers,
 * which is why the handlers run on worker threads.  This one never
 * waits: a statement is queued (PQsendQueryPrepared, in libpq's pipeline
 * mode), the statements queued in one pass of the loop go out together
 * with one sync (rv_dba_flush: one write to PostgreSQL, whose backend
 * then reads them at once and answers them in one write), and the
 * answers are read when the loop sees the socket readable; several
 * statements may be in flight at once, answered in the order sent.  A
 * statement that fails makes PostgreSQL skip the rest of its batch (up
 * to the sync): those end DONE with a PGRES_PIPELINE_ABORTED result,
 * which the caller treats as it treats any failed statement (the loop's
 * reads go to the worker pool).  Connecting is non-blocking too (PQconnectStartParams,
 * PQconnectPoll), then the session is prepared as rv_db.c prepares its
 * own (statement_timeout, every statement of the table) in one round
 * trip.  While the connection is not ready, or RV_DBA_MAX_IN_FLIGHT
 * statements are out, rv_dba_send refuses and the caller takes its
 * other path (the worker pool): nothing queues here without bound.
 *
 * The bulkheads of rv_db.h hold: each statement passes the database's
 * bulkhead (svc_bulkhead.h) when sent and leaves it when answered
 * (reached) or not (lost, timed out), so the breaker and the cap count
 * these calls with the workers'; connecting passes it as one call.  Each
 * statement has a deadline (the request's budget); when the oldest one
 * passes it, the connection is closed (what it was doing is unknown):
 * the statements past their deadline end RV_DBA_TIMEOUT, the others
 * RV_DBA_LOST.  A lost connection (a PostgreSQL restart) ends every
 * statement RV_DBA_LOST and is made again, without blocking, when a
 * statement is next wanted.
 *
 * Ownership: rv_dba_new / rv_dba_free; a query (rv_dba_query) is the
 * caller's, embedded in its own state, and must stay valid until its
 * done callback has run, which happens exactly once for every send that
 * returned 0.  Results given to done are the callee's (PQclear).
 * Threads: an rv_dba belongs to the one thread that runs its loop; every
 * call and every callback happen on that thread.  done may call
 * rv_dba_send but not rv_dba_close or rv_dba_free.
 */
#ifndef RV_DB_ASYNC_H
#define RV_DB_ASYNC_H

#include <libpq-fe.h>
#include <stdint.h>

#include "db/rv_db.h"

/* Statements one connection carries at once. */
#define RV_DBA_MAX_IN_FLIGHT 32

typedef struct rv_dba rv_dba;

typedef enum rv_dba_outcome {
    RV_DBA_DONE = 0,   /* PostgreSQL answered: res is its result */
    RV_DBA_LOST = 1,   /* no answer (connection lost, or closed): res NULL */
    RV_DBA_TIMEOUT = 2 /* no answer within the deadline: res NULL */
} rv_dba_outcome;

typedef struct rv_dba_query rv_dba_query;

/* A statement's end; res (DONE only) may have any status. */
typedef void (*rv_dba_done_fn)(rv_dba_query *q, rv_dba_outcome outcome,
                               PGresult *res);

struct rv_dba_query {
    rv_dba_done_fn done; /* set by the caller */
    /* The connection's, while the statement is in flight: */
    rv_dba_query *next;
    int64_t deadline_ms;
    PGresult *res;
    int setup;  /* the session's preparation, not a caller's */
    int failed; /* setup: a statement of it failed */
};

/* A connection with db's URL, statements, timeout and bulkhead; it
 * connects when first wanted.  NULL out of memory. */
rv_dba *rv_dba_new(rv_db *db);

/* Ends every statement (RV_DBA_LOST), closes, frees.  NULL is fine. */
void rv_dba_free(rv_dba *a);

/*
 * Sends prepared statement stmt (an index into db's table) with text
 * params, due within budget_ms.  Returns 0 when sent (q->done will run),
 * or -1 when it was not (the connection is not ready, is full, or the
 * bulkhead refused): run it another way.  A connection that is down is
 * then made again in the background.
 */
int rv_dba_send(rv_dba *a, rv_dba_query *q, int stmt,
                const char *const *params, int budget_ms);

/*
 * Sends the statements rv_dba_send queued since the last flush, with one
 * sync.  The loop calls it before it waits, so nothing queued waits for
 * an event.  Returns 0, or -1 when the connection failed: the queued
 * statements' done callbacks have then run (RV_DBA_LOST), and whatever
 * they resumed must be run.
 */
int rv_dba_flush(rv_dba *a);

/* Statements in flight now; -1 when not ready to send. */
int rv_dba_load(const rv_dba *a);

/* Statements queued since the last flush, when the connection is ready
 * and can take one more; else 0.  A read joining them shares their sync. */
int rv_dba_open_batch(const rv_dba *a);

/* Asks a connection that is down to be made (rv_dba_tick does it). */
void rv_dba_want(rv_dba *a);

/* The socket the loop must watch (-1: none now) and for what
 * (EPOLLIN, with EPOLLOUT while output is pending or connecting). */
void rv_dba_watch(const rv_dba *a, int *fd, uint32_t *events);

/* The socket is ready: reads answers (running done callbacks), sends
 * what is pending, or moves a connect on. */
void rv_dba_handle(rv_dba *a);

/* Time-driven work (deadlines; starting a wanted connect).  Returns the
 * milliseconds until it is next needed, -1 for never. */
int rv_dba_tick(rv_dba *a);

/* Ends every statement in flight (RV_DBA_LOST) and closes the
 * connection, which is made again when next wanted. */
void rv_dba_close(rv_dba *a);

#endif /* RV_DB_ASYNC_H */
