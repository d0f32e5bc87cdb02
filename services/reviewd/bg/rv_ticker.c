/*
 * rv_ticker.c: one job every interval on a thread of its own (see
 * rv_ticker.h).
 *
 * stopping is read and written only under mu, and the thread drops mu
 * while it ticks, so a stop request is seen at once between ticks and
 * through rv_ticker_stopping during one.
 */
#include "bg/rv_ticker.h"

#include "svc_deadline.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct rv_ticker {
    int interval_ms;
    rv_ticker_fn tick;
    void *arg;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping;
};

static void *ticker_main(void *arg)
{
    rv_ticker *t = arg;
    struct timespec deadline;

    pthread_mutex_lock(&t->mu);
    while (!t->stopping) {
        deadline = svc_deadline_timespec_in(t->interval_ms);
        while (!t->stopping
               && pthread_cond_timedwait(&t->cv, &t->mu, &deadline)
                      != ETIMEDOUT) {
        }
        if (t->stopping)
            break;
        pthread_mutex_unlock(&t->mu);
        t->tick(t, t->arg);
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

static int init_sync(rv_ticker *t)
{
    pthread_condattr_t attr;
    int rc;

    if (pthread_condattr_init(&attr) != 0)
        return -1;
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init(&t->cv, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0)
        return -1;
    pthread_mutex_init(&t->mu, NULL);
    return 0;
}

rv_ticker *rv_ticker_start(int interval_ms, rv_ticker_fn tick, void *arg)
{
    rv_ticker *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return NULL;
    if (init_sync(t) != 0) {
        free(t);
        return NULL;
    }
    t->interval_ms = interval_ms;
    t->tick = tick;
    t->arg = arg;
    if (pthread_create(&t->thread, NULL, ticker_main, t) != 0) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        free(t);
        return NULL;
    }
    return t;
}

int rv_ticker_stopping(rv_ticker *t)
{
    int stopping;

    pthread_mutex_lock(&t->mu);
    stopping = t->stopping;
    pthread_mutex_unlock(&t->mu);
    return stopping;
}

void rv_ticker_stop(rv_ticker *t)
{
    if (t == NULL)
        return;
    pthread_mutex_lock(&t->mu);
    t->stopping = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}
