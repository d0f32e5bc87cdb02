/*
 * rv_db.c: per-thread libpq connections with prepared statements.
 *
 * States of an rv_db_conn: DOWN (pg NULL or broken: the next rv_db_thread_conn
 * connects again) and READY (connected, statement_timeout set, every
 * statement prepared).  Only connect_ready moves DOWN to READY, and any
 * error that leaves libpq's connection bad moves READY to DOWN, so a
 * handler never runs a statement on a connection that lost its prepared
 * statements.
 *
 * A transaction of the request path starts with rv_db_conn_begin_deferred:
 * BEGIN then travels in one pipeline with the first statement (libpq's
 * pipeline mode, only for that pair), which saves a round trip per write
 * request, each of which on a loaded machine is also a wake-up of the
 * PostgreSQL backend that waits for a CPU.  While begin_pending is set
 * nothing of the transaction has been sent.
 *
 * A write whose result the work does not read (the outbox row, the
 * document's text) is queued by rv_db_conn_exec_later and goes out in the
 * same pipeline as the next statement or the COMMIT, so the cycle's
 * writes cost no round trip of their own.  The queue is sent in order
 * before anything else, so every later statement of the transaction sees
 * its effect; a queued statement's failure is the status of the call
 * that sent it, and the statements after it in that pipeline never ran
 * (the server skips to the sync, the transaction is then aborted and
 * rolled back).  ROLLBACK, and a connection closed, drop the queue
 * unsent.
 *
 * The thread's connection hangs off a pthread key whose destructor closes
 * it when the worker thread exits (rv_jobs_stop), so shutdown closes the
 * pool without a list of threads.  A worker makes it when it starts
 * (rv_db_thread_warm), bounded by timeout_s rather than a request's
 * budget.  Made on first use instead, a burst of first requests after a
 * start (bench_reviewd's 16 clients) made up to 16 connections at once,
 * each a backend start, an authentication and every statement prepared,
 * inside its request's 2 s budget: 40-160 ms each at a load of 6-9 on 2
 * CPUs, and on a busier machine some ran out of budget, answered 503
 * "no connection" and counted towards the breaker.
 *
 * No call waits longer than the thread's deadline (svc_deadline.h: the
 * request's budget, or timeout_s for background work): connections are
 * made with PQconnectStartParams/PQconnectPoll and queries sent on a
 * non-blocking connection, and every wait is a poll(2) on libpq's socket
 * bounded by the time left, so a server that stops answering (a dropped
 * packet, a blackholed host) costs a request its budget and no more.  A
 * connection that ran out of time is closed: what it was doing is
 * unknown.  Each blocking call also passes the database's bulkhead
 * (svc_bulkhead.h, when one is set): a concurrency cap and a circuit
 * breaker that turn a dead server into an immediate RV_DB_UNAVAILABLE.
 *
 * What the breaker hears is whether the server can be reached: a call
 * that ran out of time, a connect that failed or timed out.  A connection
 * the server closed (a restart, pg_terminate_backend, an idle timeout:
 * end of file, a reset, a FATAL) is not such a call, and leaves without
 * a verdict (svc_bulkhead_release): it failed at once, costing nobody a
 * wait, and it says nothing of the server now, which the connect that
 * follows it does say.  Counted, every pooled connection a restart had
 * closed was a failure when its worker next used it, and a few of them in
 * a row opened the breaker against a server that was answering again,
 * so that a worker's retry on a new connection was refused and a write
 * that would have committed answered 503 (reviewd.limits,
 * dropped_idle_connections_do_not_open_the_breaker).
 */
#include "db/rv_db.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "svc_log.h"
#include "svc_deadline.h"

struct rv_db {
    char *url;
    const rv_stmt_def *stmts;
    size_t nstmts;
    int timeout_s;
    svc_log *log;
    svc_bulkhead *bulkhead;  /* NULL: no cap, no breaker */
    const char *session_sql; /* rv_db_session_sql (borrowed), or NULL */
    pthread_key_t key;
    atomic_int_fast64_t open;
    atomic_int_fast64_t in_use;
    atomic_int_fast64_t loop_ready; /* rv_db_async's, ready */
    atomic_uint_fast64_t connects;
    atomic_uint_fast64_t failures;
};

/* The most statements rv_db_conn_exec_later keeps; one more is run at
 * once instead. */
#define RV_DB_LATER_MAX 4
#define RV_DB_LATER_PARAMS 8

/* A statement queued by rv_db_conn_exec_later, its parameters copied into
 * one allocation (text). */
typedef struct later_stmt {
    int stmt;
    char *text; /* owns every parameter's bytes */
    const char *params[RV_DB_LATER_PARAMS];
} later_stmt;

struct rv_db_conn {
    rv_db *db;
    PGconn *pg;
    int prepare;
    int broken;
    int closed; /* broken because the server closed it (not out of time) */
    int in_use;
    int begin_pending; /* rv_db_conn_begin_deferred: BEGIN not sent yet */
    int gated;         /* inside a bulkhead call (no nested entry) */
    int nlater;        /* statements queued by rv_db_conn_exec_later */
    later_stmt later[RV_DB_LATER_MAX];
    char errmsg[512];
    char constraint[128];
};

static void conn_destroy(void *p)
{
    rv_db_conn_close(p);
}

rv_db *rv_db_new(const char *url, const rv_stmt_def *stmts, size_t nstmts,
                 int timeout_s, svc_log *log)
{
    rv_db *db = calloc(1, sizeof(*db));

    if (db == NULL)
        return NULL;
    db->url = strdup(url);
    if (db->url == NULL || pthread_key_create(&db->key, conn_destroy) != 0) {
        free(db->url);
        free(db);
        return NULL;
    }
    db->stmts = stmts;
    db->nstmts = nstmts;
    db->timeout_s = timeout_s;
    db->log = log;
    return db;
}

int rv_db_limit(rv_db *db, int max_concurrent, int failures, int open_ms)
{
    db->bulkhead = svc_bulkhead_new("postgres", max_concurrent, failures,
                                    open_ms);
    return db->bulkhead != NULL ? 0 : -1;
}

void rv_db_session_sql(rv_db *db, const char *sql)
{
    db->session_sql = sql;
}

void rv_db_free(rv_db *db)
{
    if (db == NULL)
        return;
    pthread_key_delete(db->key);
    svc_bulkhead_free(db->bulkhead);
    free(db->url);
    free(db);
}

/* Keeps "what: msg" as the connection's error.  libpq's messages may
 * quote the URL or a piece of it: every form of its password is cut out
 * here, so no caller can leak it. */
static void set_error(rv_db_conn *c, const char *what, const char *msg)
{
    const int k = snprintf(c->errmsg, sizeof(c->errmsg), "%s: ", what);
    size_t n;

    if (k > 0 && (size_t)k < sizeof(c->errmsg)) {
        svc_log_redact_secrets(c->db->url, msg != NULL ? msg : "unknown error",
                               c->errmsg + k, sizeof(c->errmsg) - (size_t)k);
    }
    n = strlen(c->errmsg);
    while (n > 0 && (c->errmsg[n - 1] == '\n' || c->errmsg[n - 1] == ' '))
        c->errmsg[--n] = '\0';
}

/* Forgets the queued statements, unsent. */
static void drop_later(rv_db_conn *c)
{
    int i;

    for (i = 0; i < c->nlater; i++)
        free(c->later[i].text);
    c->nlater = 0;
}

static void close_pg(rv_db_conn *c)
{
    c->begin_pending = 0;
    drop_later(c);
    if (c->pg != NULL) {
        PQfinish(c->pg);
        c->pg = NULL;
        atomic_fetch_sub(&c->db->open, 1);
    }
    c->broken = 0;
    c->closed = 0;
}

/* The server closed the connection (or libpq could no longer use it):
 * errmsg says how. */
static void lost(rv_db_conn *c, const char *where, const char *msg)
{
    set_error(c, where, msg);
    c->broken = 1;
    c->closed = 1;
}

/* ---- waits bounded by the thread's deadline ---------------------------- */

/* The milliseconds this thread may still wait on the server. */
static int time_left_ms(const rv_db_conn *c)
{
    return svc_deadline_left_ms(c->db->timeout_s * 1000);
}

static void out_of_time(rv_db_conn *c)
{
    set_error(c, "deadline",
              "PostgreSQL did not answer within the "
              "request's budget");
    c->broken = 1;
}

/* Waits until the socket is readable (or writable, with want_write)
 * within the time left.  0, or -1 with errmsg set and c broken. */
static int wait_socket(rv_db_conn *c, int want_write)
{
    struct pollfd p;
    int rc;

    for (;;) {
        const int left = time_left_ms(c);

        p.fd = PQsocket(c->pg);
        p.events = (short)(want_write ? POLLIN | POLLOUT : POLLIN);
        p.revents = 0;
        if (left == 0 || p.fd < 0) {
            out_of_time(c);
            return -1;
        }
        rc = poll(&p, 1, left);
        if (rc > 0)
            return 0;
        if (rc == 0) {
            out_of_time(c);
            return -1;
        }
        if (errno != EINTR) {
            set_error(c, "poll", strerror(errno));
            c->broken = 1;
            return -1;
        }
    }
}

/* Reads what arrived; 0, or -1 with the connection broken. */
static int consume(rv_db_conn *c)
{
    if (PQconsumeInput(c->pg) != 1) {
        lost(c, "recv", PQerrorMessage(c->pg));
        return -1;
    }
    return 0;
}

/* Sends what libpq buffered, within the time left. */
static int flush_out(rv_db_conn *c)
{
    int rc;

    while ((rc = PQflush(c->pg)) == 1)
        if (wait_socket(c, 1) != 0 || consume(c) != 0)
            return -1;
    if (rc != 0) {
        lost(c, "send", PQerrorMessage(c->pg));
        return -1;
    }
    return 0;
}

/* The next result of what was sent, waiting within the time left; NULL
 * after a query's last result, or on failure (c broken). */
static PGresult *await_result(rv_db_conn *c)
{
    if (flush_out(c) != 0)
        return NULL;
    while (PQisBusy(c->pg))
        if (wait_socket(c, 0) != 0 || consume(c) != 0)
            return NULL;
    return PQgetResult(c->pg);
}

/* PQexec's answer to what was sent: the first failed result, else the
 * last one; NULL when the connection failed or ran out of time. */
static PGresult *await_query(rv_db_conn *c, int sent)
{
    PGresult *keep = NULL, *r;

    if (!sent) {
        lost(c, "send", PQerrorMessage(c->pg));
        return NULL;
    }
    while ((r = await_result(c)) != NULL) {
        if (keep != NULL && PQresultStatus(keep) == PGRES_FATAL_ERROR) {
            PQclear(r);
            continue;
        }
        PQclear(keep);
        keep = r;
    }
    if (c->broken) {
        PQclear(keep);
        return NULL;
    }
    return keep;
}

static PGresult *exec_bounded(rv_db_conn *c, const char *sql)
{
    return await_query(c, PQsendQuery(c->pg, sql));
}

/* Enters the database's bulkhead for one blocking call: 0, or -1 with
 * errmsg set (the caller answers RV_DB_UNAVAILABLE; c is untouched). */
static int gate_enter(rv_db_conn *c)
{
    svc_bulkhead_rc rc;

    if (c->gated)
        return 0;
    if (time_left_ms(c) == 0) {
        set_error(c, "deadline", "the request's budget is spent");
        return -1;
    }
    if (c->db->bulkhead == NULL) {
        c->gated = 1;
        return 0;
    }
    rc = svc_bulkhead_enter(c->db->bulkhead);
    if (rc != SVC_BULKHEAD_OK) {
        char why[200];

        svc_bulkhead_describe(c->db->bulkhead, rc, why, sizeof(why));
        set_error(c, "refused", why);
        return -1;
    }
    c->gated = 2;
    return 0;
}

/* Leaves it: the server was reached unless the connection broke, and no
 * verdict when the server had closed it (the file's comment). */
static void gate_leave(rv_db_conn *c, int entered_here)
{
    if (!entered_here)
        return;
    if (c->gated == 2 && c->broken && c->closed)
        svc_bulkhead_release(c->db->bulkhead);
    else if (c->gated == 2)
        svc_bulkhead_leave(c->db->bulkhead, !c->broken);
    c->gated = 0;
}

static PGresult *next_result(rv_db_conn *c);
static void end_pipeline(rv_db_conn *c);

/* What the i-th result of prepare_session answers, for its error. */
static const char *session_step(const rv_db_conn *c, size_t i, size_t first)
{
    if (i == 0)
        return "statement_timeout";
    return i < first ? "session_sql" : c->db->stmts[i - first].name;
}

/*
 * Sets the session up: statement timeout, the session statement
 * (rv_db_session_sql) when there is one, then every prepared statement,
 * all in one pipeline, so a connection is ready after one round trip
 * instead of one per statement (a reconnect after an outage, or a worker's
 * first request, then fits in a short deadline even on a loaded
 * machine).  Returns 0 or -1 (errmsg set).
 */
static int prepare_session(rv_db_conn *c)
{
    const size_t n = c->prepare ? c->db->nstmts : 0;
    const char *extra = c->db->session_sql;
    const size_t first = extra != NULL ? 2 : 1; /* results before stmts */
    char sql[128];
    size_t i;
    int sent;

    snprintf(sql, sizeof(sql), "SET statement_timeout = %d",
             c->db->timeout_s * 1000);
    sent = PQenterPipelineMode(c->pg) == 1
           && PQsendQueryParams(c->pg, sql, 0, NULL, NULL, NULL, NULL, 0) == 1;
    if (sent && extra != NULL)
        sent = PQsendQueryParams(c->pg, extra, 0, NULL, NULL, NULL, NULL, 0)
               == 1;
    for (i = 0; sent && i < n; i++) {
        const rv_stmt_def *s = &c->db->stmts[i];

        sent = PQsendPrepare(c->pg, s->name, s->sql, s->nparams, NULL) == 1;
    }
    if (!sent || PQpipelineSync(c->pg) != 1) {
        set_error(c, "prepare", PQerrorMessage(c->pg));
        c->broken = 1;
        return -1;
    }
    for (i = 0; i < n + first; i++) {
        PGresult *res = next_result(c);

        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            if (!c->broken) {
                set_error(c, session_step(c, i, first),
                          res != NULL ? PQresultErrorMessage(res)
                                      : PQerrorMessage(c->pg));
            }
            PQclear(res);
            c->broken = 1; /* the pipeline is aborted: connect again */
            return -1;
        }
        PQclear(res);
    }
    end_pipeline(c);
    return c->broken ? -1 : 0;
}

/* Server notices ("relation already exists, skipping") would go to
 * stderr as plain text and break the JSON-lines log: log them instead. */
static void log_notice(void *arg, const char *message)
{
    rv_db *db = arg;
    char text[512];
    size_t n;

    snprintf(text, sizeof(text), "%s", message);
    n = strlen(text);
    while (n > 0 && text[n - 1] == '\n')
        text[--n] = '\0';
    svc_log_write(db->log, SVC_LOG_DEBUG, "postgres_notice",
                  json_pack("{s:s}", "notice", text));
}

/* Drives PQconnectPoll on c->pg until it is made or failed, within the
 * time left.  0 when connected, else -1 (errmsg set). */
static int finish_connect(rv_db_conn *c)
{
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;

    while (st != PGRES_POLLING_OK) {
        if (st == PGRES_POLLING_FAILED) {
            set_error(c, "connect", PQerrorMessage(c->pg));
            return -1;
        }
        if (wait_socket(c, st == PGRES_POLLING_WRITING) != 0) {
            set_error(c, "connect",
                      "PostgreSQL did not answer within the "
                      "request's budget");
            return -1;
        }
        st = PQconnectPoll(c->pg);
    }
    return 0;
}

/* Connects c (DOWN to READY).  Returns 0 or -1 with errmsg set. */
static int connect_ready(rv_db_conn *c)
{
    char timeout[16];
    const char *keys[] = {"connect_timeout", "application_name", "dbname",
                          NULL};
    const char *vals[] = {timeout, "reviewd", c->db->url, NULL};

    close_pg(c);
    snprintf(timeout, sizeof(timeout), "%d", c->db->timeout_s);
    /* dbname comes last: the URL's own settings override our defaults. */
    c->pg = PQconnectStartParams(keys, vals, 1);
    if (c->pg == NULL) {
        set_error(c, "connect", "out of memory");
        atomic_fetch_add(&c->db->failures, 1);
        return -1;
    }
    atomic_fetch_add(&c->db->open, 1);
    PQsetNoticeProcessor(c->pg, log_notice, c->db);
    if (PQstatus(c->pg) == CONNECTION_BAD)
        set_error(c, "connect", PQerrorMessage(c->pg));
    if (PQstatus(c->pg) == CONNECTION_BAD || finish_connect(c) != 0
        || PQsetnonblocking(c->pg, 1) != 0 || prepare_session(c) != 0) {
        close_pg(c);
        c->broken = 1; /* for the bulkhead: the server was not reached */
        atomic_fetch_add(&c->db->failures, 1);
        return -1;
    }
    atomic_fetch_add(&c->db->connects, 1);
    return 0;
}

static int conn_usable(const rv_db_conn *c)
{
    return c->pg != NULL && !c->broken && PQstatus(c->pg) == CONNECTION_OK;
}

/* The calling thread's connection state, made DOWN on first call; NULL
 * when out of memory. */
static rv_db_conn *thread_state(rv_db *db)
{
    rv_db_conn *c = pthread_getspecific(db->key);

    if (c == NULL) {
        c = calloc(1, sizeof(*c));
        if (c == NULL)
            return NULL;
        c->db = db;
        c->prepare = 1;
        if (pthread_setspecific(db->key, c) != 0) {
            free(c);
            return NULL;
        }
    }
    return c;
}

rv_db_conn *rv_db_thread_conn(rv_db *db)
{
    rv_db_conn *c = thread_state(db);
    int rc;

    if (c == NULL)
        return NULL;
    if (conn_usable(c))
        return c;
    if (gate_enter(c) != 0) {
        svc_log_write(db->log, SVC_LOG_DEBUG, "postgres_connect_refused",
                      json_pack("{s:s}", "error", c->errmsg));
        return NULL;
    }
    rc = connect_ready(c);
    gate_leave(c, 1);
    if (rc != 0) {
        svc_log_write(db->log, SVC_LOG_DEBUG, "postgres_connect_failed",
                      json_pack("{s:s}", "error", c->errmsg));
        return NULL;
    }
    return c;
}

/* Outside the bulkhead: no request waits on it, and workers still
 * connecting just after a start must neither fill the cap (so that the
 * first requests' calls were refused as FULL) nor count towards the
 * breaker.  A connect that fails leaves the thread's connection DOWN,
 * for its first request to make as before. */
void rv_db_thread_warm(rv_db *db)
{
    rv_db_conn *c = thread_state(db);

    if (c != NULL && (conn_usable(c) || connect_ready(c) == 0))
        return;
    svc_log_write(db->log, SVC_LOG_WARN, "postgres_warm_failed",
                  json_pack("{s:s,s:s}", "error",
                            c != NULL ? c->errmsg : "out of memory", "then",
                            "the worker connects on its first request"));
}

rv_db_conn *rv_db_conn_open(rv_db *db, int prepare)
{
    rv_db_conn *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return NULL;
    c->db = db;
    c->prepare = prepare;
    if (connect_ready(c) != 0) {
        svc_log_write(db->log, SVC_LOG_WARN, "postgres_connect_failed",
                      json_pack("{s:s}", "error", c->errmsg));
        free(c);
        return NULL;
    }
    return c;
}

void rv_db_conn_close(rv_db_conn *c)
{
    if (c == NULL)
        return;
    rv_db_conn_end_use(c);
    close_pg(c);
    free(c);
}

void rv_db_conn_begin_use(rv_db_conn *c)
{
    if (!c->in_use) {
        c->in_use = 1;
        atomic_fetch_add(&c->db->in_use, 1);
    }
}

void rv_db_conn_end_use(rv_db_conn *c)
{
    if (c->in_use) {
        c->in_use = 0;
        atomic_fetch_sub(&c->db->in_use, 1);
    }
}

static int sqlstate_class(const char *state, const char *cls)
{
    return state != NULL && strncmp(state, cls, 2) == 0;
}

/* Classifies a failed result and records the message. */
static rv_db_status classify(rv_db_conn *c, PGresult *res)
{
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char *cons = PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME);

    if (res == NULL && c->broken) {
        /* Timed out or lost: errmsg says so already. */
        c->constraint[0] = '\0';
        return RV_DB_UNAVAILABLE;
    }
    set_error(c, state != NULL ? state : "-",
              res != NULL ? PQresultErrorMessage(res) : PQerrorMessage(c->pg));
    c->constraint[0] = '\0';
    if (PQstatus(c->pg) != CONNECTION_OK || state == NULL) {
        c->broken = 1;
        c->closed = PQstatus(c->pg) != CONNECTION_OK;
        return RV_DB_UNAVAILABLE;
    }
    if (strcmp(state, "40P01") == 0 || strcmp(state, "40001") == 0)
        return RV_DB_RETRY;
    if (sqlstate_class(state, "23")) {
        snprintf(c->constraint, sizeof(c->constraint), "%s",
                 cons != NULL ? cons : "");
        return RV_DB_CONSTRAINT;
    }
    if (sqlstate_class(state, "08") || sqlstate_class(state, "53")
        || sqlstate_class(state, "57") || strcmp(state, "55P03") == 0)
        return RV_DB_UNAVAILABLE;
    return RV_DB_ERROR;
}

/* Turns a libpq result into a status, keeping it in *out on success. */
static rv_db_status finish(rv_db_conn *c, PGresult *res, PGresult **out)
{
    const ExecStatusType st = PQresultStatus(res);
    rv_db_status rc;

    if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
        if (out != NULL)
            *out = res;
        else
            PQclear(res);
        return RV_DB_OK;
    }
    rc = classify(c, res);
    PQclear(res);
    return rc;
}

/* One statement with text parameters: prepared (name) or not (sql). */
typedef struct query {
    const char *name;
    const char *sql;
    int nparams;
    const char *const *params;
} query;

static int send_query(PGconn *pg, const query *q)
{
    return q->name != NULL ? PQsendQueryPrepared(pg, q->name, q->nparams,
                                                 q->params, NULL, NULL, 0)
                           : PQsendQueryParams(pg, q->sql, q->nparams, NULL,
                                               q->params, NULL, NULL, 0);
}

/* The next result of the pipeline, past the NULL that ends the results
 * of the query before; NULL once the connection failed or ran out of
 * time. */
static PGresult *next_result(rv_db_conn *c)
{
    PGresult *r = await_result(c);

    if (r == NULL && !c->broken && PQstatus(c->pg) == CONNECTION_OK)
        r = await_result(c);
    return r;
}

/* Reads the pipeline up to its sync and leaves pipeline mode; a
 * connection that cannot is marked broken. */
static void end_pipeline(rv_db_conn *c)
{
    PGresult *r;

    while (!c->broken && PQstatus(c->pg) == CONNECTION_OK
           && (r = next_result(c)) != NULL) {
        const int done = PQresultStatus(r) == PGRES_PIPELINE_SYNC;

        PQclear(r);
        if (done)
            break;
    }
    if (c->broken || PQexitPipelineMode(c->pg) != 1)
        c->broken = 1;
}

/* Sends what is pending (a deferred BEGIN, the queued statements) and
 * then q, all in one pipeline; 1, or 0 when libpq refused (c broken). */
static int send_pipeline(rv_db_conn *c, int begin, const query *q)
{
    int ok = PQenterPipelineMode(c->pg) == 1;
    int i;

    if (ok && begin)
        ok = PQsendQueryParams(c->pg, "BEGIN", 0, NULL, NULL, NULL, NULL, 0)
             == 1;
    for (i = 0; ok && i < c->nlater; i++) {
        const later_stmt *l = &c->later[i];
        const rv_stmt_def *s = &c->db->stmts[l->stmt];

        ok = PQsendQueryPrepared(c->pg, s->name, s->nparams, l->params, NULL,
                                 NULL, 0)
             == 1;
    }
    ok = ok && send_query(c->pg, q) == 1 && PQpipelineSync(c->pg) == 1;
    if (!ok) {
        lost(c, "pipeline", PQerrorMessage(c->pg));
        PQexitPipelineMode(c->pg);
    }
    return ok;
}

/*
 * The deferred BEGIN (when pending), the queued statements and q in one
 * round trip.  A queued statement's failure is classified as usual and is
 * the result (q did not run); else q's own.  When this pipeline begins
 * the transaction, a connection lost before BEGIN's answer is RV_DB_RETRY
 * (the transaction died with it), unless q is the COMMIT: then the
 * server may have run everything, and that is RV_DB_UNAVAILABLE, whose
 * outcome the caller must not guess.
 */
static rv_db_status exec_pipelined(rv_db_conn *c, const query *q,
                                   PGresult **out)
{
    const int begin = c->begin_pending;
    const int nlater = c->nlater;
    const int commits = q->name == NULL && strcmp(q->sql, "COMMIT") == 0;
    const rv_db_status lost = begin && !commits ? RV_DB_RETRY
                                                : RV_DB_UNAVAILABLE;
    rv_db_status st = RV_DB_OK;
    PGresult *res;
    int i;

    c->begin_pending = 0;
    if (!send_pipeline(c, begin, q)) {
        drop_later(c);
        return lost;
    }
    drop_later(c);
    if (begin) {
        res = next_result(c);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            st = classify(c, res);
            PQclear(res);
            end_pipeline(c);
            return st == RV_DB_UNAVAILABLE ? lost : st;
        }
        PQclear(res);
    }
    for (i = 0; i < nlater; i++) {
        st = finish(c, next_result(c), NULL);
        if (st != RV_DB_OK) {
            end_pipeline(c);
            return st;
        }
    }
    res = next_result(c);
    end_pipeline(c);
    return finish(c, res, out);
}

/* Sends a BEGIN that rv_db_conn_begin_deferred left pending, on its own. */
static rv_db_status flush_begin(rv_db_conn *c)
{
    rv_db_status st;

    c->begin_pending = 0;
    st = finish(c, exec_bounded(c, "BEGIN"), NULL);
    return st == RV_DB_UNAVAILABLE ? RV_DB_RETRY : st;
}

static rv_db_status run_query(rv_db_conn *c, const query *q, PGresult **out)
{
    const int entered = !c->gated;
    rv_db_status st;

    if (out != NULL)
        *out = NULL;
    if (gate_enter(c) != 0)
        return RV_DB_UNAVAILABLE;
    if (c->begin_pending || c->nlater > 0)
        st = exec_pipelined(c, q, out);
    else
        st = finish(c, await_query(c, send_query(c->pg, q)), out);
    gate_leave(c, entered);
    return st;
}

rv_db_status rv_db_conn_exec(rv_db_conn *c, int stmt,
                             const char *const *params, PGresult **out)
{
    const rv_stmt_def *s = &c->db->stmts[stmt];
    const query q = {s->name, NULL, s->nparams, params};

    return run_query(c, &q, out);
}

rv_db_status rv_db_conn_exec_later(rv_db_conn *c, int stmt,
                                   const char *const *params)
{
    const rv_stmt_def *s = &c->db->stmts[stmt];
    size_t len[RV_DB_LATER_PARAMS], total = 0;
    later_stmt *l;
    char *p;
    int i;

    if (c->nlater == RV_DB_LATER_MAX || s->nparams > RV_DB_LATER_PARAMS)
        return rv_db_conn_exec(c, stmt, params, NULL);
    for (i = 0; i < s->nparams; i++) {
        len[i] = params[i] != NULL ? strlen(params[i]) + 1 : 0;
        total += len[i];
    }
    l = &c->later[c->nlater];
    l->text = malloc(total > 0 ? total : 1);
    if (l->text == NULL) {
        set_error(c, "queue", "out of memory");
        return RV_DB_ERROR;
    }
    l->stmt = stmt;
    p = l->text;
    for (i = 0; i < s->nparams; i++) {
        l->params[i] = params[i] != NULL ? p : NULL;
        if (params[i] != NULL)
            memcpy(p, params[i], len[i]);
        p += len[i];
    }
    c->nlater++;
    return RV_DB_OK;
}

rv_db_status rv_db_conn_exec_sql(rv_db_conn *c, const char *sql)
{
    const int entered = !c->gated;
    rv_db_status st = RV_DB_OK;

    if (c->nlater > 0) {
        /* The queue goes first, in one pipeline with sql (one statement). */
        const query q = {NULL, sql, 0, NULL};

        return run_query(c, &q, NULL);
    }
    if (gate_enter(c) != 0)
        return RV_DB_UNAVAILABLE;
    if (c->begin_pending)
        st = flush_begin(c);
    if (st == RV_DB_OK)
        st = finish(c, exec_bounded(c, sql), NULL);
    gate_leave(c, entered);
    return st;
}

rv_db_status rv_db_conn_exec_params(rv_db_conn *c, const char *sql,
                                    int nparams, const char *const *params,
                                    PGresult **out)
{
    const query q = {NULL, sql, nparams, params};

    return run_query(c, &q, out);
}

rv_db_status rv_db_conn_begin(rv_db_conn *c)
{
    c->begin_pending = 0;
    return rv_db_conn_exec_sql(c, "BEGIN");
}

rv_db_status rv_db_conn_begin_deferred(rv_db_conn *c)
{
    c->begin_pending = 1;
    return RV_DB_OK;
}

rv_db_status rv_db_conn_send_begin(rv_db_conn *c)
{
    const int entered = !c->gated;
    rv_db_status st;

    if (!c->begin_pending)
        return RV_DB_OK;
    if (gate_enter(c) != 0)
        return RV_DB_RETRY; /* nothing was sent */
    st = flush_begin(c);
    gate_leave(c, entered);
    return st;
}

rv_db_status rv_db_conn_commit(rv_db_conn *c)
{
    if (c->begin_pending && c->nlater == 0) {
        c->begin_pending = 0; /* nothing was sent: nothing to commit */
        return RV_DB_OK;
    }
    return rv_db_conn_exec_sql(c, "COMMIT");
}

void rv_db_conn_rollback(rv_db_conn *c)
{
    c->begin_pending = 0;
    drop_later(c);
    if (c->pg != NULL && !c->broken && PQstatus(c->pg) == CONNECTION_OK
        && PQtransactionStatus(c->pg) != PQTRANS_IDLE) {
        /* Outside the bulkhead: it must not be refused, and it is bounded
         * by the deadline like any other wait. */
        PQclear(exec_bounded(c, "ROLLBACK"));
    }
}

const char *rv_db_conn_errmsg(const rv_db_conn *c)
{
    return c->errmsg;
}

const char *rv_db_conn_constraint(const rv_db_conn *c)
{
    return c->constraint;
}

rv_db_status rv_db_conn_ping(rv_db_conn *c)
{
    return rv_db_conn_exec_sql(c, "SELECT 1");
}

void rv_db_stats_get(rv_db *db, rv_db_stats *out)
{
    out->open = atomic_load(&db->open);
    out->in_use = atomic_load(&db->in_use);
    out->loop_ready = atomic_load(&db->loop_ready);
    out->connects = atomic_load(&db->connects);
    out->failures = atomic_load(&db->failures);
    memset(&out->bulkhead, 0, sizeof(out->bulkhead));
    if (db->bulkhead != NULL)
        svc_bulkhead_stats_get(db->bulkhead, &out->bulkhead);
}

PGconn *rv_db_conn_pg(rv_db_conn *c)
{
    return c != NULL ? c->pg : NULL;
}

const char *rv_db_url(const rv_db *db)
{
    return db->url;
}

int rv_db_timeout_s(const rv_db *db)
{
    return db->timeout_s;
}

const rv_stmt_def *rv_db_stmts(const rv_db *db, size_t *nstmts)
{
    *nstmts = db->nstmts;
    return db->stmts;
}

svc_bulkhead *rv_db_bulkhead(rv_db *db)
{
    return db->bulkhead;
}

svc_log *rv_db_log(rv_db *db)
{
    return db->log;
}

void rv_db_count(rv_db *db, int open_delta, int connected, int failed)
{
    if (open_delta != 0)
        atomic_fetch_add(&db->open, open_delta);
    if (connected)
        atomic_fetch_add(&db->connects, 1);
    if (failed)
        atomic_fetch_add(&db->failures, 1);
}

void rv_db_count_loop_ready(rv_db *db, int delta)
{
    atomic_fetch_add(&db->loop_ready, delta);
}
