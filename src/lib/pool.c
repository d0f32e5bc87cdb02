/*
 * pool.c: the bounded connection pool (see pool.h).
 */
#include "pool.h"

#include <errno.h>

#include "alloc.h"
#include "clock.h"

dlock_err dlock__pool_init(dlock__pool *p, int max)
{
    pthread_condattr_t attr;

    p->idle = dlock__calloc((size_t)max, sizeof(*p->idle));
    if (p->idle == NULL)
        return DLOCK_NOMEM;
    p->nidle = p->open = p->lent = 0;
    p->max = max;
    if (pthread_condattr_init(&attr) != 0)
        goto fail;
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (pthread_cond_init(&p->freed, &attr) != 0) {
        pthread_condattr_destroy(&attr);
        goto fail;
    }
    pthread_condattr_destroy(&attr);
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        pthread_cond_destroy(&p->freed);
        goto fail;
    }
    return DLOCK_OK;
fail:
    dlock__free(p->idle);
    p->idle = NULL;
    return DLOCK_SYSTEM;
}

void dlock__pool_destroy(dlock__pool *p)
{
    if (p->idle == NULL)
        return;
    for (int i = 0; i < p->nidle; i++)
        dlock__conn_free(p->idle[i]);
    dlock__free(p->idle);
    p->idle = NULL;
    pthread_cond_destroy(&p->freed);
    pthread_mutex_destroy(&p->mu);
}

dlock_err dlock__pool_borrow(dlock__pool *p, int64_t deadline_us,
                             dlock__conn **conn)
{
    dlock_err err = DLOCK_OK;

    *conn = NULL;
    pthread_mutex_lock(&p->mu);
    while (p->nidle == 0 && p->open >= p->max) {
        struct timespec ts = dlock__timespec_of(deadline_us);

        if (pthread_cond_timedwait(&p->freed, &p->mu, &ts) == ETIMEDOUT
            && p->nidle == 0 && p->open >= p->max) {
            err = DLOCK_TIMEOUT;
            goto out;
        }
    }
    if (p->nidle > 0)
        *conn = p->idle[--p->nidle];
    else
        p->open++;
    p->lent++;
out:
    pthread_mutex_unlock(&p->mu);
    return err;
}

void dlock__pool_return(dlock__pool *p, dlock__conn *conn)
{
    int drop = conn == NULL || dlock__conn_broken(conn);

    pthread_mutex_lock(&p->mu);
    p->lent--;
    if (drop)
        p->open--;
    else
        p->idle[p->nidle++] = conn;
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->mu);
    if (drop)
        dlock__conn_free(conn);
}

void dlock__pool_drop_idle(dlock__pool *p)
{
    for (;;) {
        dlock__conn *victims[64];
        int n = 0;

        pthread_mutex_lock(&p->mu);
        while (p->nidle > 0 && n < (int)(sizeof(victims) / sizeof(*victims))) {
            victims[n++] = p->idle[--p->nidle];
            p->open--;
        }
        pthread_cond_broadcast(&p->freed);
        pthread_mutex_unlock(&p->mu);
        if (n == 0)
            return;
        for (int i = 0; i < n; i++)
            dlock__conn_free(victims[i]);
    }
}

void dlock__pool_counts(dlock__pool *p, int *open, int *lent)
{
    pthread_mutex_lock(&p->mu);
    *open = p->open;
    *lent = p->lent;
    pthread_mutex_unlock(&p->mu);
}
