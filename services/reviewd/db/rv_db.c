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
 * The thread's connection hangs off a pthread key whose destructor closes
 * it when the MHD worker thread exits (at MHD_stop_daemon), so shutdown
 * closes the pool without a list of threads.
 */
#include "db/rv_db.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rv_db {
    char *url;
    const rv_stmt_def *stmts;
    size_t nstmts;
    int timeout_s;
    svc_log *log;
    pthread_key_t key;
    atomic_int_fast64_t open;
    atomic_int_fast64_t in_use;
    atomic_uint_fast64_t connects;
    atomic_uint_fast64_t failures;
};

struct rv_db_conn {
    rv_db *db;
    PGconn *pg;
    int prepare;
    int broken;
    int in_use;
    int begin_pending;  /* rv_db_conn_begin_deferred: BEGIN not sent yet */
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

    if (db == NULL) {
        return NULL;
    }
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

void rv_db_free(rv_db *db)
{
    if (db == NULL) {
        return;
    }
    pthread_key_delete(db->key);
    free(db->url);
    free(db);
}

static void set_error(rv_db_conn *c, const char *what, const char *msg)
{
    size_t n;

    snprintf(c->errmsg, sizeof(c->errmsg), "%s: %s", what,
             msg != NULL ? msg : "unknown error");
    n = strlen(c->errmsg);
    while (n > 0 && (c->errmsg[n - 1] == '\n' || c->errmsg[n - 1] == ' ')) {
        c->errmsg[--n] = '\0';
    }
}

static void close_pg(rv_db_conn *c)
{
    c->begin_pending = 0;
    if (c->pg != NULL) {
        PQfinish(c->pg);
        c->pg = NULL;
        atomic_fetch_sub(&c->db->open, 1);
    }
    c->broken = 0;
}

/* Sets the session up: statement timeout, then every prepared
 * statement.  Returns 0 or -1 (errmsg set). */
static int prepare_session(rv_db_conn *c)
{
    char sql[128];
    PGresult *res;
    size_t i;

    snprintf(sql, sizeof(sql), "SET statement_timeout = %d",
             c->db->timeout_s * 1000);
    if (rv_db_conn_exec_sql(c, sql) != RV_DB_OK) {
        return -1;
    }
    for (i = 0; c->prepare && i < c->db->nstmts; i++) {
        const rv_stmt_def *s = &c->db->stmts[i];

        res = PQprepare(c->pg, s->name, s->sql, s->nparams, NULL);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            set_error(c, s->name, PQresultErrorMessage(res));
            PQclear(res);
            return -1;
        }
        PQclear(res);
    }
    return 0;
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
    while (n > 0 && text[n - 1] == '\n') {
        text[--n] = '\0';
    }
    svc_log_write(db->log, SVC_LOG_DEBUG, "postgres_notice",
                 json_pack("{s:s}", "notice", text));
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
    c->pg = PQconnectdbParams(keys, vals, 1);
    if (c->pg == NULL) {
        set_error(c, "connect", "out of memory");
        atomic_fetch_add(&c->db->failures, 1);
        return -1;
    }
    atomic_fetch_add(&c->db->open, 1);
    PQsetNoticeProcessor(c->pg, log_notice, c->db);
    if (PQstatus(c->pg) != CONNECTION_OK || prepare_session(c) != 0) {
        if (PQstatus(c->pg) != CONNECTION_OK) {
            set_error(c, "connect", PQerrorMessage(c->pg));
        }
        close_pg(c);
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

rv_db_conn *rv_db_thread_conn(rv_db *db)
{
    rv_db_conn *c = pthread_getspecific(db->key);

    if (c == NULL) {
        c = calloc(1, sizeof(*c));
        if (c == NULL) {
            return NULL;
        }
        c->db = db;
        c->prepare = 1;
        if (pthread_setspecific(db->key, c) != 0) {
            free(c);
            return NULL;
        }
    }
    if (conn_usable(c)) {
        return c;
    }
    if (connect_ready(c) != 0) {
        svc_log_write(db->log, SVC_LOG_DEBUG, "postgres_connect_failed",
                     json_pack("{s:s}", "error", c->errmsg));
        return NULL;
    }
    return c;
}

rv_db_conn *rv_db_conn_open(rv_db *db, int prepare)
{
    rv_db_conn *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        return NULL;
    }
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
    if (c == NULL) {
        return;
    }
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

    set_error(c, state != NULL ? state : "-",
              res != NULL ? PQresultErrorMessage(res) : PQerrorMessage(c->pg));
    c->constraint[0] = '\0';
    if (PQstatus(c->pg) != CONNECTION_OK || state == NULL) {
        c->broken = 1;
        return RV_DB_UNAVAILABLE;
    }
    if (strcmp(state, "40P01") == 0 || strcmp(state, "40001") == 0) {
        return RV_DB_RETRY;
    }
    if (sqlstate_class(state, "23")) {
        snprintf(c->constraint, sizeof(c->constraint), "%s",
                 cons != NULL ? cons : "");
        return RV_DB_CONSTRAINT;
    }
    if (sqlstate_class(state, "08") || sqlstate_class(state, "53")
        || sqlstate_class(state, "57") || strcmp(state, "55P03") == 0) {
        return RV_DB_UNAVAILABLE;
    }
    return RV_DB_ERROR;
}

/* Turns a libpq result into a status, keeping it in *out on success. */
static rv_db_status finish(rv_db_conn *c, PGresult *res, PGresult **out)
{
    const ExecStatusType st = PQresultStatus(res);
    rv_db_status rc;

    if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
        if (out != NULL) {
            *out = res;
        } else {
            PQclear(res);
        }
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

static PGresult *exec_query(PGconn *pg, const query *q)
{
    return q->name != NULL
               ? PQexecPrepared(pg, q->name, q->nparams, q->params, NULL,
                                NULL, 0)
               : PQexecParams(pg, q->sql, q->nparams, NULL, q->params, NULL,
                              NULL, 0);
}

static int send_query(PGconn *pg, const query *q)
{
    return q->name != NULL
               ? PQsendQueryPrepared(pg, q->name, q->nparams, q->params, NULL,
                                     NULL, 0)
               : PQsendQueryParams(pg, q->sql, q->nparams, NULL, q->params,
                                   NULL, NULL, 0);
}

/* The next result of the pipeline, past the NULL that ends the results
 * of the query before; NULL once the connection failed. */
static PGresult *next_result(PGconn *pg)
{
    PGresult *r = PQgetResult(pg);

    if (r == NULL && PQstatus(pg) == CONNECTION_OK) {
        r = PQgetResult(pg);
    }
    return r;
}

/* Reads the pipeline up to its sync and leaves pipeline mode; a
 * connection that cannot is marked broken. */
static void end_pipeline(rv_db_conn *c)
{
    PGresult *r;

    while (PQstatus(c->pg) == CONNECTION_OK
           && (r = next_result(c->pg)) != NULL) {
        const int done = PQresultStatus(r) == PGRES_PIPELINE_SYNC;

        PQclear(r);
        if (done) {
            break;
        }
    }
    if (PQexitPipelineMode(c->pg) != 1) {
        c->broken = 1;
    }
}

/* BEGIN and q in one round trip.  A failure of BEGIN itself (nothing of
 * the transaction ran) is RV_DB_RETRY; q's own is classified as usual. */
static rv_db_status exec_after_begin(rv_db_conn *c, const query *q,
                                     PGresult **out)
{
    PGresult *begin = NULL, *res = NULL;
    rv_db_status st;

    c->begin_pending = 0;
    if (PQenterPipelineMode(c->pg) != 1
        || PQsendQueryParams(c->pg, "BEGIN", 0, NULL, NULL, NULL, NULL, 0)
               != 1
        || send_query(c->pg, q) != 1 || PQpipelineSync(c->pg) != 1) {
        set_error(c, "pipeline", PQerrorMessage(c->pg));
        c->broken = 1;
        PQexitPipelineMode(c->pg);
        return RV_DB_RETRY;
    }
    begin = next_result(c->pg);
    if (PQresultStatus(begin) != PGRES_COMMAND_OK) {
        st = classify(c, begin);
        PQclear(begin);
        end_pipeline(c);
        return st == RV_DB_UNAVAILABLE ? RV_DB_RETRY : st;
    }
    PQclear(begin);
    res = next_result(c->pg);
    end_pipeline(c);
    return finish(c, res, out);
}

/* Sends a BEGIN that rv_db_conn_begin_deferred left pending, on its own. */
static rv_db_status flush_begin(rv_db_conn *c)
{
    rv_db_status st;

    c->begin_pending = 0;
    st = finish(c, PQexec(c->pg, "BEGIN"), NULL);
    return st == RV_DB_UNAVAILABLE ? RV_DB_RETRY : st;
}

static rv_db_status run_query(rv_db_conn *c, const query *q, PGresult **out)
{
    if (out != NULL) {
        *out = NULL;
    }
    if (c->begin_pending) {
        return exec_after_begin(c, q, out);
    }
    return finish(c, exec_query(c->pg, q), out);
}

rv_db_status rv_db_conn_exec(rv_db_conn *c, int stmt, const char *const *params,
                          PGresult **out)
{
    const rv_stmt_def *s = &c->db->stmts[stmt];
    const query q = {s->name, NULL, s->nparams, params};

    return run_query(c, &q, out);
}

rv_db_status rv_db_conn_exec_sql(rv_db_conn *c, const char *sql)
{
    if (c->begin_pending) {
        const rv_db_status st = flush_begin(c);

        if (st != RV_DB_OK) {
            return st;
        }
    }
    return finish(c, PQexec(c->pg, sql), NULL);
}

rv_db_status rv_db_conn_exec_params(rv_db_conn *c, const char *sql, int nparams,
                                 const char *const *params, PGresult **out)
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
    return c->begin_pending ? flush_begin(c) : RV_DB_OK;
}

rv_db_status rv_db_conn_commit(rv_db_conn *c)
{
    if (c->begin_pending) {
        c->begin_pending = 0; /* nothing was sent: nothing to commit */
        return RV_DB_OK;
    }
    return rv_db_conn_exec_sql(c, "COMMIT");
}

void rv_db_conn_rollback(rv_db_conn *c)
{
    c->begin_pending = 0;
    if (c->pg != NULL && PQstatus(c->pg) == CONNECTION_OK
        && PQtransactionStatus(c->pg) != PQTRANS_IDLE) {
        PQclear(PQexec(c->pg, "ROLLBACK"));
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
    out->connects = atomic_load(&db->connects);
    out->failures = atomic_load(&db->failures);
}

PGconn *rv_db_conn_pg(rv_db_conn *c)
{
    return c != NULL ? c->pg : NULL;
}
