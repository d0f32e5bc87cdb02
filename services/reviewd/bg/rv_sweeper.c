/*
 * rv_sweeper.c: the idempotency sweep thread (see rv_sweeper.h).
 *
 * The sweep runs on a ticker (rv_ticker.h), so stopping it never waits
 * out the interval.  It connects lazily and
 * reconnects after a failure on its next round; a failure is logged once
 * per outage, not every round.
 *
 * A round deletes in batches of RV_SWEEP_BATCH rows, one statement each,
 * until a batch finds fewer: one DELETE over a backlog (a day of keys
 * after an outage of the sweep, or a burst of traffic) would run into the
 * statement timeout, roll back, and fail again every round for ever,
 * while a batch stays far under it whatever the backlog.  A stop request
 * is seen between batches.
 */
#include "bg/rv_sweeper.h"

#include <stdio.h>
#include <stdlib.h>

#include "bg/rv_ticker.h"
#include "db/rv_query.h"

/* Rows deleted per statement: milliseconds of work each. */
#define RV_SWEEP_BATCH 1000

struct rv_sweeper {
    rv_app *app;
    rv_db_conn *conn;
    int failing;
    rv_ticker *ticker;
};

/* Deletes one batch; *deleted is how many rows it took. */
static rv_db_status sweep_batch(rv_sweeper *sw, unsigned long *deleted)
{
    char limit[16];
    const char *params[] = {limit};
    PGresult *res = NULL;
    rv_db_status st;

    *deleted = 0;
    snprintf(limit, sizeof(limit), "%d", RV_SWEEP_BATCH);
    st = rv_db_conn_exec(sw->conn, RV_QUERY_IDEM_SWEEP, params, &res);
    if (st == RV_DB_OK) {
        *deleted = strtoul(PQcmdTuples(res), NULL, 10);
        atomic_fetch_add(&sw->app->idem_swept, *deleted);
        PQclear(res);
    }
    return st;
}

/* One round, on the ticker's thread t; a stop request is seen between
 * batches. */
static void sweep_once(rv_ticker *t, void *arg)
{
    rv_sweeper *sw = arg;
    rv_db_status st = RV_DB_UNAVAILABLE;
    unsigned long deleted = RV_SWEEP_BATCH;

    if (sw->conn == NULL)
        sw->conn = rv_db_conn_open(sw->app->db, 1);
    if (sw->conn != NULL) {
        do {
            st = sweep_batch(sw, &deleted);
        } while (st == RV_DB_OK && deleted == RV_SWEEP_BATCH
                 && !rv_ticker_stopping(t));
    }
    if (st == RV_DB_OK) {
        sw->failing = 0;
        return;
    }
    if (!sw->failing) {
        svc_log_write(sw->app->log, SVC_LOG_WARN, "idempotency_sweep_failed",
                      json_pack("{s:s}", "error",
                                sw->conn != NULL ? rv_db_conn_errmsg(sw->conn)
                                                 : "no connection"));
    }
    sw->failing = 1;
    rv_db_conn_close(sw->conn);
    sw->conn = NULL;
}

rv_sweeper *rv_sweeper_start(rv_app *app)
{
    rv_sweeper *sw = calloc(1, sizeof(*sw));

    if (sw == NULL)
        return NULL;
    sw->app = app;
    sw->ticker = rv_ticker_start(app->cfg->sweep_interval_s * 1000, sweep_once,
                                 sw);
    if (sw->ticker == NULL) {
        free(sw);
        return NULL;
    }
    return sw;
}

void rv_sweeper_stop(rv_sweeper *sw)
{
    if (sw == NULL)
        return;
    rv_ticker_stop(sw->ticker);
    rv_db_conn_close(sw->conn);
    free(sw);
}
