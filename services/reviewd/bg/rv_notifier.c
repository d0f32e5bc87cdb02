/*
 * rv_notifier.c: the outbox's NOTIFY after the commit (see rv_notifier.h).
 *
 * States, under mu: idle (pending 0, the thread waits on cv), asked
 * (pending 1: a poke came since the thread last took the flag) and
 * stopping.  The thread takes the flag (pending back to 0) before it
 * sends, so a poke that comes while a NOTIFY is on its way sets it again
 * and is answered by the next NOTIFY, never by one that may have left
 * before the poke's commit.  A poke signals cv only when it moves the
 * flag from 0 to 1: while the thread is busy the pokes cost a mutex and
 * nothing else.
 */
#include "bg/rv_notifier.h"

#include <pthread.h>
#include <stdlib.h>

#include "db/rv_db.h"

struct rv_notifier {
    rv_app *app;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;      /* a NOTIFY is asked for (under mu) */
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

static void *notifier_main(void *arg)
{
    rv_notifier *n = arg;

    pthread_mutex_lock(&n->mu);
    for (;;) {
        while (!n->pending && !n->stopping)
            pthread_cond_wait(&n->cv, &n->mu);
        if (!n->pending)
            break; /* stopping, nothing asked for */
        n->pending = 0;
        pthread_mutex_unlock(&n->mu);
        send_notify(n);
        pthread_mutex_lock(&n->mu);
    }
    pthread_mutex_unlock(&n->mu);
    return NULL;
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
    if (pthread_cond_init(&n->cv, NULL) != 0) {
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
    wake = !n->pending;
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
