/*
 * rv_sweeper.c: the idempotency sweep thread (see rv_sweeper.h).
 *
 * The thread waits on a condition variable with a monotonic deadline, so
 * stopping it never waits out the interval.  It connects lazily and
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

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "db/rv_query.h"

/* Rows deleted per statement: milliseconds of work each. */
#define RV_SWEEP_BATCH 1000

struct rv_sweeper {
    rv_app *app;
    rv_db_conn *conn;
    int failing;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping;
};

static int stop_requested(rv_sweeper *sw)
{
    int stopping;

    pthread_mutex_lock(&sw->mu);
    stopping = sw->stopping;
    pthread_mutex_unlock(&sw->mu);
    return stopping;
}

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

static void sweep_once(rv_sweeper *sw)
{
    rv_db_status st = RV_DB_UNAVAILABLE;
    unsigned long deleted = RV_SWEEP_BATCH;

    if (sw->conn == NULL)
        sw->conn = rv_db_conn_open(sw->app->db, 1);
    if (sw->conn != NULL) {
        do {
            st = sweep_batch(sw, &deleted);
        } while (st == RV_DB_OK && deleted == RV_SWEEP_BATCH
                 && !stop_requested(sw));
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

static void *sweeper_main(void *arg)
{
    rv_sweeper *sw = arg;
    const int interval = sw->app->cfg->sweep_interval_s;
    struct timespec deadline;

    pthread_mutex_lock(&sw->mu);
    while (!sw->stopping) {
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += interval;
        while (!sw->stopping
               && pthread_cond_timedwait(&sw->cv, &sw->mu, &deadline)
                      != ETIMEDOUT) {
        }
        if (sw->stopping)
            break;
        pthread_mutex_unlock(&sw->mu);
        sweep_once(sw);
        pthread_mutex_lock(&sw->mu);
    }
    pthread_mutex_unlock(&sw->mu);
    return NULL;
}

rv_sweeper *rv_sweeper_start(rv_app *app)
{
    rv_sweeper *sw = calloc(1, sizeof(*sw));
    pthread_condattr_t attr;

    if (sw == NULL || pthread_condattr_init(&attr) != 0) {
        free(sw);
        return NULL;
    }
    sw->app = app;
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&sw->cv, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&sw->mu, NULL);
    if (pthread_create(&sw->thread, NULL, sweeper_main, sw) != 0) {
        pthread_cond_destroy(&sw->cv);
        pthread_mutex_destroy(&sw->mu);
        free(sw);
        return NULL;
    }
    return sw;
}

void rv_sweeper_stop(rv_sweeper *sw)
{
    if (sw == NULL)
        return;
    pthread_mutex_lock(&sw->mu);
    sw->stopping = 1;
    pthread_cond_signal(&sw->cv);
    pthread_mutex_unlock(&sw->mu);
    pthread_join(sw->thread, NULL);
    rv_db_conn_close(sw->conn);
    pthread_cond_destroy(&sw->cv);
    pthread_mutex_destroy(&sw->mu);
    free(sw);
}
