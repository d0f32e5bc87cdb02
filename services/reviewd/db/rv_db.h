/*
 * rv_db.h: PostgreSQL connections for reviewd, one per thread.
 *
 * Each HTTP worker thread owns one libpq connection, made when the
 * thread starts (rv_db_thread_warm; else on its first request) and kept
 * for the thread's life, so a request never waits for a pooled
 * connection and a transaction never crosses threads.  Every
 * connection prepares the service's statements once (the table comes
 * from rv_query.c) and runs them with PQexecPrepared.  A connection
 * that breaks (server restart, network) is closed and made again on the
 * next use; rv_db_thread_conn then returns NULL while PostgreSQL cannot
 * be reached, and the caller answers 503.
 *
 * Errors are classified for the caller (rv_db_status) so handlers decide
 * on "unavailable", "retry the transaction" or "constraint" without
 * reading SQLSTATEs themselves.
 *
 * Ownership: rv_db_new creates the factory; rv_db_free frees it after
 * every thread that used it has exited (a thread's connection is closed by
 * the thread-exit destructor).  rv_db_conn_open/rv_db_conn_close make
 * connections owned by the caller (the sweeper, `reviewd migrate`).
 * PGresults returned through out-parameters belong to the caller
 * (PQclear).
 *
 * Threads: an rv_db is shared; an rv_db_conn belongs to one thread.
 */
#ifndef RV_DB_H
#define RV_DB_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "svc_bulkhead.h"
#include "svc_log.h"

typedef struct rv_db rv_db;
typedef struct rv_db_conn rv_db_conn;

typedef enum rv_db_status {
    RV_DB_OK = 0,
    RV_DB_UNAVAILABLE, /* connection lost or refused, or a timeout: 503 */
    RV_DB_RETRY,       /* deadlock or serialization failure: run again */
    RV_DB_CONSTRAINT,  /* a constraint said no (class 23) */
    RV_DB_ERROR,       /* anything else: a bug or a broken schema */
    RV_DB_ABORTED      /* the work set its own reply: roll back, keep it */
} rv_db_status;

/* One prepared statement: its name, its SQL and its parameter count. */
typedef struct rv_stmt_def {
    const char *name;
    const char *sql;
    int nparams;
} rv_stmt_def;

/* Pool use, for /metrics. */
typedef struct rv_db_stats {
    int64_t open;       /* connections open now */
    int64_t in_use;     /* connections running a unit of work now */
    int64_t loop_ready; /* of the open ones, event loops' ready to send */
    uint64_t connects;  /* successful connects since start */
    uint64_t failures;  /* failed connects since start */
    svc_bulkhead_stats bulkhead; /* zeros without rv_db_limit */
} rv_db_stats;

/*
 * Creates the factory.  url: a libpq URI or key=value string (copied).
 * stmts/nstmts: the statements every connection prepares (borrowed; a
 * static table).  timeout_s: the statement timeout, and the bound on
 * every wait of a thread without a deadline (svc_deadline.h).
 * Returns NULL on allocation failure.
 */
rv_db *rv_db_new(const char *url, const rv_stmt_def *stmts, size_t nstmts,
                 int timeout_s, svc_log *log);
void rv_db_free(rv_db *db);

/*
 * Puts every blocking call of db's connections (connect, each statement)
 * behind a bulkhead of its own (svc_bulkhead.h: at most max_concurrent
 * calls waiting at once, a breaker that opens after `failures`
 * unreachable calls in a row for open_ms): a refused call returns
 * RV_DB_UNAVAILABLE (rv_db_thread_conn NULL) at once, errmsg saying why.
 * Call once, before the threads that use db start.  Returns 0, or -1 out
 * of memory.  Every wait is also bounded by the calling thread's
 * deadline (svc_deadline.h), at most timeout_s without one.
 */
int rv_db_limit(rv_db *db, int max_concurrent, int failures, int open_ms);

/*
 * One more statement every connection of db runs when it is made, in the
 * pipeline that sets statement_timeout (no round trip of its own): a
 * session setting such as "SET kh.outbox_notify = off" (rv_notifier.h).
 * sql is borrowed and must outlive db (a literal).  Call before the
 * threads that use db start; connections made earlier keep their session
 * as it was.  A connection whose statement fails is not made (errmsg
 * says why).
 */
void rv_db_session_sql(rv_db *db, const char *sql);

/* This thread's connection, connected and prepared, or NULL when
 * PostgreSQL cannot be reached now (logged, counted). */
rv_db_conn *rv_db_thread_conn(rv_db *db);

/*
 * Makes the calling thread's connection ahead of its first request (an
 * HTTP worker's thread start, given to rv_jobs_start by rv_http.c), within the
 * thread's deadline or, without one, timeout_s: a burst of first requests
 * after a start then finds every worker connected, instead of each making
 * a connection (a backend start, authentication, every statement
 * prepared) inside its request's budget on a loaded machine.  Outside
 * the bulkhead (it is no request's call: it neither takes a place under
 * the cap nor counts towards the breaker); a failure is logged and left
 * to the thread's first request, which connects as before.
 */
void rv_db_thread_warm(rv_db *db);

/* A connection owned by the caller (NULL when unreachable); close it with
 * rv_db_conn_close.  prepare = 0 skips the prepared statements, for the
 * migrations that create the tables they name. */
rv_db_conn *rv_db_conn_open(rv_db *db, int prepare);
void rv_db_conn_close(rv_db_conn *conn);

/* Marks the connection as running a unit of work (for the in_use gauge);
 * rv_db_conn_end_use undoes it. */
void rv_db_conn_begin_use(rv_db_conn *conn);
void rv_db_conn_end_use(rv_db_conn *conn);

/*
 * Runs prepared statement number stmt (an index into the table) with text
 * parameters (NULL entries are SQL NULL).  On RV_DB_OK *out (when not
 * NULL) receives the result; otherwise *out is NULL and rv_db_conn_errmsg
 * says why.
 */
rv_db_status rv_db_conn_exec(rv_db_conn *conn, int stmt,
                             const char *const *params, PGresult **out);

/*
 * Queues prepared statement stmt (params copied) to be sent, inside the
 * current transaction, in one pipeline with the next statement, SQL or
 * COMMIT on conn: a write whose result the caller never reads costs no
 * round trip of its own.  Statements run in the order given, so what
 * follows sees the write.  Its failure is returned by the call that sends
 * it (the statements after it in that pipeline do not run; the caller
 * rolls back as for any failure).  ROLLBACK drops the queue unsent.
 * Returns RV_DB_OK once queued (when the queue is full, the statement
 * runs at once and this is its status), RV_DB_ERROR out of memory.
 */
rv_db_status rv_db_conn_exec_later(rv_db_conn *conn, int stmt,
                                   const char *const *params);

/* Runs a parameterless SQL string (BEGIN, COMMIT, a migration). */
rv_db_status rv_db_conn_exec_sql(rv_db_conn *conn, const char *sql);

/* Runs SQL with text parameters without preparing it (migrations). */
rv_db_status rv_db_conn_exec_params(rv_db_conn *conn, const char *sql,
                                    int nparams, const char *const *params,
                                    PGresult **out);

/* BEGIN / COMMIT / ROLLBACK.  Rollback is best-effort and never fails. */
rv_db_status rv_db_conn_begin(rv_db_conn *conn);

/*
 * BEGIN without a round trip of its own: it is sent in one pipeline with
 * the transaction's first rv_db_conn_exec or rv_db_conn_exec_params (or alone,
 * before an rv_db_conn_exec_sql or at commit if nothing ran).  Always
 * RV_DB_OK.  If the connection fails before the server began the
 * transaction, that first call returns RV_DB_RETRY (nothing ran, so the
 * work may run again on a new connection), never RV_DB_UNAVAILABLE.
 * Only for work that reaches the database through those calls.
 */
rv_db_status rv_db_conn_begin_deferred(rv_db_conn *conn);
/* Sends now a BEGIN that rv_db_conn_begin_deferred left pending (RV_DB_OK
 * when none is pending); a broken connection gives RV_DB_RETRY, as the
 * deferred BEGIN's first statement would. */
rv_db_status rv_db_conn_send_begin(rv_db_conn *conn);
rv_db_status rv_db_conn_commit(rv_db_conn *conn);
void rv_db_conn_rollback(rv_db_conn *conn);

/* The last error on conn (SQLSTATE and message), for logs. */
const char *rv_db_conn_errmsg(const rv_db_conn *conn);

/* The constraint named by the last RV_DB_CONSTRAINT error, or "". */
const char *rv_db_conn_constraint(const rv_db_conn *conn);

/* Succeeds (RV_DB_OK) if the server answers "SELECT 1" now. */
rv_db_status rv_db_conn_ping(rv_db_conn *conn);

void rv_db_stats_get(rv_db *db, rv_db_stats *out);

/* The libpq connection under conn (NULL when closed), for LISTEN/NOTIFY:
 * the outbox relay polls its socket and reads PQnotifies.  Borrowed. */
PGconn *rv_db_conn_pg(rv_db_conn *conn);

/* For db/rv_db_async.c, whose connections an event loop drives: they
 * share db's URL, statements, timeout, bulkhead, log and counters. */
const char *rv_db_url(const rv_db *db);
int rv_db_timeout_s(const rv_db *db);
const rv_stmt_def *rv_db_stmts(const rv_db *db, size_t *nstmts);
svc_bulkhead *rv_db_bulkhead(rv_db *db);
svc_log *rv_db_log(rv_db *db);
/* Counts a connection opened (open_delta 1) or closed (-1), and a
 * connect that succeeded (connected) or failed (failed). */
void rv_db_count(rv_db *db, int open_delta, int connected, int failed);
/* Counts an event loop's connection that became ready (1) or stopped
 * being ready (-1). */
void rv_db_count_loop_ready(rv_db *db, int delta);

#endif /* RV_DB_H */
