/*
 * rv_notifier.c: the outbox's NOTIFY after the commit (see rv_notifier.h).
 *
 * States, under mu: idle (waiting 1, pending 0: the thread waits on cv
 * for a poke), asked (pending 1: a poke came since the thread last took
 * the flag), quiet (the RV_NOTIFIER_GAP_MS after a NOTIFY, while the
 * thread sleeps and pokes only set the flag) and stopping.  The thread
 * takes the flag (pending back to 0) before it sends, so a poke that
 * comes while a NOTIFY is on its way or in the quiet gap sets it again
 * and is answered by the next NOTIFY, never by one that may have left
 * before the poke's commit.  A poke signals cv only when the thread is
 * idle: otherwise it costs a mutex and nothing else.
 *
 * Why the gap: one NOTIFY per poke cost a PostgreSQL transaction (an xid
 * and a commit record) and two thread wake-ups per submit or decision,
 * about 110 us of reviewd's CPU and 150-400 us of the machine's per
 * bench_reviewd cycle, and it showed in the cycle's p99 on 2 CPUs
 * (docs/benchmarks.md, session 12).  With the gap a burst of commits costs
 * at most one NOTIFY per RV_NOTIFIER_GAP_MS, while a lone commit (the
 * thread idle) is notified at once; an event under load leaves at most
 * that much later.
 */
#include "bg/rv_notifier.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "db/rv_db.h"
#include "svc_deadline.h"

/* The least time between two NOTIFYs; the pokes of the gap share one. */
#define RV_NOTIFIER_GAP_MS 5

struct rv_notifier {
    rv_app *app;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;      /* a NOTIFY is asked for (under mu) */
    int waiting;      /* idle: a poke must signal cv (under mu) */
    int stopping;     /* rv_notifier_stop was called (under mu) */
    rv_db_conn *conn; /* the thread's; NULL until connected */
    int failing;      /* the last attempt failed (logged once) */
};

/* Sends one NOTIFY on the thread's connection, connecting first when it
 * has none; a failure drops the connection (the next poke connects
 * again) and is logged when it starts an outage. */
static void send_notify(rv_notifier *n)
{
    rv_db_status st = RV_DB_UNAVAILABLE;

    if (n->conn == NULL)
        n->conn = rv_db_conn_open(n->app->db, 0);
    if (n->conn != NULL)
        st = rv_db_conn_exec_sql(n->conn, "NOTIFY kh_outbox");
    if (st == RV_DB_OK) {
        n->failing = 0;
        return;
    }
    if (!n->failing) {
        svc_log_write(n->app->log, SVC_LOG_WARN, "outbox_notify_failed",
                      json_pack("{s:s,s:s}", "error",
                                n->conn != NULL ? rv_db_conn_errmsg(n->conn)
                                                : "no connection",
                                "then", "the relay's sweep sends the events"));
    }
    n->failing = 1;
    rv_db_conn_close(n->conn);
    n->conn = NULL;
}

/* Sleeps (mu held, released while asleep) until RV_NOTIFIER_GAP_MS from
 * now or a stop request, whichever comes first; pokes do not wake it. */
static void quiet_gap(rv_notifier *n)
{
    const struct timespec end = svc_deadline_timespec_in(RV_NOTIFIER_GAP_MS);

    while (!n->stopping
           && pthread_cond_timedwait(&n->cv, &n->mu, &end) != ETIMEDOUT) {
    }
}

static void *notifier_main(void *arg)
{
    rv_notifier *n = arg;

    pthread_mutex_lock(&n->mu);
    for (;;) {
        n->waiting = 1;
        while (!n->pending && !n->stopping)
            pthread_cond_wait(&n->cv, &n->mu);
        n->waiting = 0;
        if (!n->pending)
            break; /* stopping, nothing asked for */
        n->pending = 0;
        pthread_mutex_unlock(&n->mu);
        send_notify(n);
        pthread_mutex_lock(&n->mu);
        quiet_gap(n);
    }
    pthread_mutex_unlock(&n->mu);
    return NULL;
}

/* cv on CLOCK_MONOTONIC, so a step of the wall clock neither stretches
 * nor cuts the gap; 0 or -1. */
static int init_cv(pthread_cond_t *cv)
{
    pthread_condattr_t attr;
    int rc;

    if (pthread_condattr_init(&attr) != 0)
        return -1;
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
    return rc == 0 ? 0 : -1;
}

rv_notifier *rv_notifier_start(rv_app *app)
{
    rv_notifier *n = calloc(1, sizeof(*n));

    if (n == NULL)
        return NULL;
    n->app = app;
    if (pthread_mutex_init(&n->mu, NULL) != 0) {
        free(n);
        return NULL;
    }
    if (init_cv(&n->cv) != 0) {
        pthread_mutex_destroy(&n->mu);
        free(n);
        return NULL;
    }
    if (pthread_create(&n->thread, NULL, notifier_main, n) != 0) {
        pthread_cond_destroy(&n->cv);
        pthread_mutex_destroy(&n->mu);
        free(n);
        return NULL;
    }
    return n;
}

void rv_notifier_poke(rv_notifier *n)
{
    int wake;

    if (n == NULL)
        return;
    pthread_mutex_lock(&n->mu);
    wake = n->waiting && !n->pending;
    n->pending = 1;
    pthread_mutex_unlock(&n->mu);
    if (wake)
        pthread_cond_signal(&n->cv);
}

void rv_notifier_stop(rv_notifier *n)
{
    if (n == NULL)
        return;
    pthread_mutex_lock(&n->mu);
    n->stopping = 1;
    pthread_mutex_unlock(&n->mu);
    pthread_cond_signal(&n->cv);
    pthread_join(n->thread, NULL);
    rv_db_conn_close(n->conn);
    pthread_cond_destroy(&n->cv);
    pthread_mutex_destroy(&n->mu);
    free(n);
}
