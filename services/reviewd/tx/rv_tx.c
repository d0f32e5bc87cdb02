/*
 * rv_tx.c: the transaction runner (see rv_tx.h).
 *
 * Stages of one attempt, and what a failure at each one allows:
 *   BEGIN     nothing was sent: reconnect and try again (once)
 *   WORK      rolled back: retry on deadlock/serialization only
 *   COMMIT    the outcome is unknown if the connection broke: never retry
 * BEGIN is deferred (rv_db_conn_begin_deferred): it goes out with the first
 * statement, one round trip for both, and a connection that fails before
 * the server began the transaction comes back from that statement as
 * RV_DB_RETRY, so it is still reconnected and tried again.
 */
#include "tx/rv_tx.h"

#include <stdio.h>

#include "tx/rv_admit.h"
#include "tx/rv_hooks.h"
#include "tx/rv_idem.h"

#define RV_TX_ATTEMPTS 3

typedef enum stage { STAGE_BEGIN = 0, STAGE_WORK, STAGE_COMMIT } stage;

void rv_tx_fail(rv_request *req, rv_db_conn *c, rv_db_status st,
                rv_reply *reply)
{
    const char *msg = c != NULL ? rv_db_conn_errmsg(c) : "no connection";

    switch (st) {
    case RV_DB_UNAVAILABLE:
    case RV_DB_RETRY:
        svc_log_write(req->app->log, SVC_LOG_WARN, "postgres_unavailable",
                      json_pack("{s:s,s:s}", "request_id", req->request_id,
                                "error", msg));
        rv_reply_error(reply, 503, "UNAVAILABLE",
                       "the database is unavailable; retry later");
        return;
    case RV_DB_CONSTRAINT:
        svc_log_write(req->app->log, SVC_LOG_INFO, "database_guard",
                      json_pack("{s:s,s:s}", "request_id", req->request_id,
                                "constraint",
                                c != NULL ? rv_db_conn_constraint(c) : ""));
        rv_reply_error(reply, 409, "INVALID_STATE",
                       "the change conflicts with the current state");
        return;
    case RV_DB_ABORTED: return;
    case RV_DB_OK:
    case RV_DB_ERROR: break;
    }
    svc_log_write(req->app->log, SVC_LOG_ERROR, "database_error",
                  json_pack("{s:s,s:s}", "request_id", req->request_id,
                            "error", msg));
    rv_reply_error(reply, 500, "INTERNAL", "internal database error");
}

/* One attempt; *at says how far it got.  Returns RV_DB_OK when the
 * transaction committed or a reply was settled inside it. */
static rv_db_status attempt(rv_request *req, rv_db_conn *c, rv_tx_work work,
                            void *arg, rv_reply *reply, stage *at)
{
    rv_db_status st;

    *at = STAGE_BEGIN;
    st = rv_db_conn_begin_deferred(c);
    if (st != RV_DB_OK)
        return st;
    *at = STAGE_WORK;
    if (rv_idem_applies(req)) {
        const int r = rv_idem_claim(req, c, reply, &st);

        if (r != 0) {
            /* A replay, 422 or busy: nothing to keep either way. */
            rv_db_conn_rollback(c);
            return r > 0 ? RV_DB_OK : st;
        }
    }
    /* Test builds only (rv_hooks.h): X-Test-Pause-Ms stalls here. */
    st = rv_hook_pause(req, c);
    if (st != RV_DB_OK)
        return st;
    st = work(req, c, arg, reply);
    if (st == RV_DB_OK && rv_idem_applies(req))
        st = rv_idem_store(req, c, reply);
    if (st != RV_DB_OK)
        return st;
    *at = STAGE_COMMIT;
    return rv_db_conn_commit(c);
}

/* Whether a failed attempt may run again. */
static int may_retry(rv_db_status st, stage at, int n)
{
    if (n + 1 >= RV_TX_ATTEMPTS)
        return 0;
    if (st == RV_DB_RETRY)
        return 1;
    return st == RV_DB_UNAVAILABLE && at == STAGE_BEGIN && n == 0;
}

int rv_tx_admit(rv_request *req, rv_reply *reply)
{
    rv_admit *const gate = req->app->writes;

    /* At most REVIEWD_WRITE_CONCURRENCY transactions at once; a request
     * whose budget ends while it waits for a place gets the 503 a
     * PostgreSQL that did not answer in time would give. */
    if (gate == NULL
        || rv_admit_enter(gate, req->app->cfg->request_budget_ms) == 0)
        return 0;
    svc_log_write(req->app->log, SVC_LOG_WARN, "write_admission_timeout",
                  json_pack("{s:s,s:i}", "request_id", req->request_id,
                            "write_concurrency",
                            req->app->cfg->write_concurrency));
    rv_reply_error(reply, 503, "UNAVAILABLE",
                   "too many changes in progress; retry later");
    return -1;
}

void rv_tx_dismiss(rv_request *req)
{
    if (req->app->writes != NULL)
        rv_admit_leave(req->app->writes);
}

void rv_tx_run_admitted(rv_request *req, rv_tx_work work, void *arg,
                        rv_reply *reply)
{
    rv_db_conn *c = NULL;
    rv_db_status st = RV_DB_UNAVAILABLE;
    stage at = STAGE_BEGIN;
    int n;

    for (n = 0; n < RV_TX_ATTEMPTS; n++) {
        c = rv_db_thread_conn(req->app->db);
        if (c == NULL) {
            st = RV_DB_UNAVAILABLE;
            break;
        }
        rv_db_conn_begin_use(c);
        st = attempt(req, c, work, arg, reply, &at);
        if (st != RV_DB_OK)
            rv_db_conn_rollback(c);
        rv_db_conn_end_use(c);
        if (st == RV_DB_OK || !may_retry(st, at, n))
            break;
    }
    if (st != RV_DB_OK)
        rv_tx_fail(req, c, st, reply);
}

void rv_tx_run(rv_request *req, rv_tx_work work, void *arg, rv_reply *reply)
{
    if (rv_tx_admit(req, reply) != 0)
        return;
    rv_tx_run_admitted(req, work, arg, reply);
    rv_tx_dismiss(req);
}

/* work inside one read-only snapshot; ended with ROLLBACK, which for a
 * transaction that wrote nothing is the same as COMMIT and cannot fail
 * a reply that the work already set. */
static rv_db_status in_snapshot(rv_request *req, rv_db_conn *c,
                                rv_tx_work work, void *arg, rv_reply *reply)
{
    rv_db_status st = rv_db_conn_exec_sql(
        c, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY");

    if (st == RV_DB_OK)
        st = work(req, c, arg, reply);
    rv_db_conn_rollback(c);
    return st;
}

/* rv_tx_read and rv_tx_snapshot: a second try on a new connection when
 * the first one broke. */
static void read_twice(rv_request *req, int snapshot, rv_tx_work work,
                       void *arg, rv_reply *reply)
{
    rv_db_conn *c = NULL;
    rv_db_status st = RV_DB_UNAVAILABLE;
    int n;

    for (n = 0; n < 2; n++) {
        c = rv_db_thread_conn(req->app->db);
        if (c == NULL) {
            st = RV_DB_UNAVAILABLE;
            break;
        }
        rv_db_conn_begin_use(c);
        st = snapshot ? in_snapshot(req, c, work, arg, reply)
                      : work(req, c, arg, reply);
        rv_db_conn_end_use(c);
        if (st != RV_DB_UNAVAILABLE)
            break;
    }
    if (st != RV_DB_OK)
        rv_tx_fail(req, c, st, reply);
}

void rv_tx_read(rv_request *req, rv_tx_work work, void *arg, rv_reply *reply)
{
    read_twice(req, 0, work, arg, reply);
}

void rv_tx_snapshot(rv_request *req, rv_tx_work work, void *arg,
                    rv_reply *reply)
{
    read_twice(req, 1, work, arg, reply);
}
