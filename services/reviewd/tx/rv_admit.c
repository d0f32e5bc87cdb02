/*
 * rv_admit.c: the write transactions' gate (see rv_admit.h).
 *
 * A mutex, a count and a condition variable on CLOCK_MONOTONIC: a place
 * is held for one transaction (a few milliseconds), so waiters are few
 * and short-lived, and a futex-based condition variable wakes one per
 * place given back.  Waiting is not strictly first come, first served;
 * each waiter's own deadline bounds how long it can be passed over.
 */
#include "tx/rv_admit.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "svc_deadline.h"

struct rv_admit {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a place was given back */
    int places;
    int running;
    int waiting;
    uint64_t timeouts;
};

rv_admit *rv_admit_new(int places)
{
    rv_admit *a = calloc(1, sizeof(*a));
    pthread_condattr_t attr;

    if (a == NULL)
        return NULL;
    a->places = places < 1 ? 1 : places;
    pthread_mutex_init(&a->mu, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&a->cv, &attr);
    pthread_condattr_destroy(&attr);
    return a;
}

void rv_admit_free(rv_admit *a)
{
    if (a == NULL)
        return;
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

int rv_admit_enter(rv_admit *a, int cap_ms)
{
    const int left = svc_deadline_left_ms(cap_ms);
    struct timespec until;
    int rc = 0;

    pthread_mutex_lock(&a->mu);
    if (a->running < a->places) {
        a->running++;
        pthread_mutex_unlock(&a->mu);
        return 0;
    }
    until = svc_deadline_timespec_in(left > 0 ? left : 0);
    a->waiting++;
    while (a->running >= a->places && rc != ETIMEDOUT)
        rc = left > 0 ? pthread_cond_timedwait(&a->cv, &a->mu, &until)
                      : ETIMEDOUT;
    a->waiting--;
    if (a->running < a->places) {
        a->running++;
        rc = 0;
    } else {
        a->timeouts++;
        rc = -1;
    }
    pthread_mutex_unlock(&a->mu);
    return rc;
}

void rv_admit_leave(rv_admit *a)
{
    pthread_mutex_lock(&a->mu);
    a->running--;
    if (a->waiting > 0)
        pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

void rv_admit_stats_get(rv_admit *a, rv_admit_stats *out)
{
    pthread_mutex_lock(&a->mu);
    out->running = a->running;
    out->waiting = a->waiting;
    out->timeouts = a->timeouts;
    pthread_mutex_unlock(&a->mu);
}
