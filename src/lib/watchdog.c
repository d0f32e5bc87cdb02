/*
 * watchdog.c: lock renewal and breaker probing on one thread (watchdog.h).
 *
 * The thread sleeps on a condition variable (CLOCK_MONOTONIC) until the
 * earliest of: a watched lock's next renewal, the next probe while the
 * breaker is open, or a kick.  It renews one lock at a time outside the
 * mutex; a lock under renewal has renewing = 1, and unwatch waits for it.
 *
 * Renewal outcomes:
 *   still ours     valid until t0 + ttl - drift, next renewal at t0 + ttl/3;
 *   token gone     lost at once, callback;
 *   no answer      retried every ttl/10 (at least 10 ms) until the known
 *                  validity runs out, then lost: without an answer we cannot
 *                  claim the lock, and the holder must stop.
 */
#include "watchdog.h"

#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"

struct dlock__watchdog {
    dlock_client *client;
    pthread_mutex_t mu;
    pthread_cond_t wake;      /* the thread waits here */
    pthread_cond_t renewed;   /* unwatch waits here for a renewal to end */
    pthread_t thread;
    int stop;
    int kicked;
    int64_t next_probe_us;
    dlock_lock *head;
};

/* The earliest watched lock due by now, or NULL; *next gets the earliest
 * future due time. */
static dlock_lock *due_lock(dlock__watchdog *w, int64_t now, int64_t *next)
{
    for (dlock_lock *l = w->head; l != NULL; l = l->wnext) {
        if (l->renewing)
            continue;
        if (l->next_renew_us <= now)
            return l;
        if (l->next_renew_us < *next)
            *next = l->next_renew_us;
    }
    return NULL;
}

static void unlink_lock(dlock__watchdog *w, dlock_lock *l)
{
    if (l->wprev != NULL)
        l->wprev->wnext = l->wnext;
    else
        w->head = l->wnext;
    if (l->wnext != NULL)
        l->wnext->wprev = l->wprev;
    l->wnext = l->wprev = NULL;
    l->watched = 0;
}

static int64_t retry_interval_us(const dlock_lock *l)
{
    int64_t us = l->ttl_ms * 100;   /* ttl / 10, in microseconds */

    return us < 10000 ? 10000 : us;
}

/* Renews l outside the mutex (held on entry and on return). */
static void renew_one(dlock__watchdog *w, dlock_lock *l)
{
    dlock__msg m;
    dlock_err err;
    int lost = 0;

    l->renewing = 1;
    pthread_mutex_unlock(&w->mu);
    err = dlock__lock_renew(l, l->ttl_ms, &m);
    if (err == DLOCK_OK) {
        atomic_fetch_add(&w->client->n_renewals, 1);
    } else if (err == DLOCK_LOST ||
               dlock__now_us() >= atomic_load(&l->valid_until_us)) {
        lost = dlock__lock_mark_lost(l);
    }
    if (lost && l->on_lost != NULL)
        l->on_lost(l, l->on_lost_arg);
    pthread_mutex_lock(&w->mu);
    if (err == DLOCK_OK)
        l->next_renew_us = dlock__now_us() + l->ttl_ms * 1000 / 3;
    else
        l->next_renew_us = dlock__now_us() + retry_interval_us(l);
    if (atomic_load(&l->lost) && l->watched)
        unlink_lock(w, l);
    l->renewing = 0;
    pthread_cond_broadcast(&w->renewed);
}

/* Connects and PINGs; on success closes the breaker and keeps the
 * connection for the pool. */
static void probe(dlock__watchdog *w)
{
    dlock_client *c = w->client;
    dlock__conn *conn = NULL;
    dlock__msg m;
    const char *argv[] = {"PING"};
    redisReply *r = NULL;
    dlock_err err = dlock__client_connect(c, &conn, &m);

    if (err == DLOCK_OK)
        err = dlock__conn_call(conn, 1, argv, NULL,
                               dlock__client_io_deadline(c), &r, &m);
    if (err == DLOCK_OK && r->type != REDIS_REPLY_ERROR) {
        dlock__client_transport_ok(c);
        dlock__client_adopt(c, conn);
        conn = NULL;
    }
    if (r != NULL)
        freeReplyObject(r);
    dlock__conn_free(conn);
}

/* Probes if the breaker is open and a probe is due (or was asked for by a
 * kick); updates *next. */
static void maybe_probe(dlock__watchdog *w, int kicked, int64_t *next)
{
    int64_t now = dlock__now_us();

    if (dlock__breaker_allows(&w->client->breaker))
        return;
    if (kicked || now >= w->next_probe_us) {
        pthread_mutex_unlock(&w->mu);
        probe(w);
        pthread_mutex_lock(&w->mu);
        w->next_probe_us = dlock__now_us() +
                           (int64_t)w->client->opts.breaker_probe_ms * 1000;
    }
    if (!dlock__breaker_allows(&w->client->breaker) &&
        w->next_probe_us < *next)
        *next = w->next_probe_us;
}

static void *watchdog_main(void *arg)
{
    dlock__watchdog *w = arg;

    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        int64_t next = DLOCK__FOREVER;
        int kicked = w->kicked;
        dlock_lock *l;
        struct timespec ts;

        w->kicked = 0;
        maybe_probe(w, kicked, &next);
        if (w->stop)
            break;
        l = due_lock(w, dlock__now_us(), &next);
        if (l != NULL) {
            renew_one(w, l);
            continue;
        }
        if (w->kicked)
            continue;
        ts = dlock__timespec_of(next);
        pthread_cond_timedwait(&w->wake, &w->mu, &ts);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static int init_cond(pthread_cond_t *cv)
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

dlock_err dlock__watchdog_new(dlock_client *c, dlock__watchdog **out,
                              dlock__msg *m)
{
    dlock__watchdog *w = dlock__calloc(1, sizeof(*w));
    int rc;

    *out = NULL;
    if (w == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "allocating the watchdog");
    w->client = c;
    if (pthread_mutex_init(&w->mu, NULL) != 0)
        goto fail_mutex;
    if (init_cond(&w->wake) != 0)
        goto fail_wake;
    if (init_cond(&w->renewed) != 0)
        goto fail_renewed;
    rc = dlock__thread_start(&w->thread, watchdog_main, w);
    if (rc != 0) {
        pthread_cond_destroy(&w->renewed);
        errno = rc;
        goto fail_renewed;
    }
    *out = w;
    return DLOCK_OK;
fail_renewed:
    pthread_cond_destroy(&w->wake);
fail_wake:
    pthread_mutex_destroy(&w->mu);
fail_mutex:
    dlock__free(w);
    return dlock__msg_set(m, DLOCK_SYSTEM, "starting the watchdog thread: %s",
                          strerror(errno));
}

void dlock__watchdog_free(dlock__watchdog *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->renewed);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->mu);
    dlock__free(w);
}

void dlock__watchdog_watch(dlock__watchdog *w, dlock_lock *l)
{
    pthread_mutex_lock(&w->mu);
    l->next_renew_us = dlock__now_us() + l->ttl_ms * 1000 / 3;
    l->wprev = NULL;
    l->wnext = w->head;
    if (w->head != NULL)
        w->head->wprev = l;
    w->head = l;
    l->watched = 1;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
}

void dlock__watchdog_unwatch(dlock__watchdog *w, dlock_lock *l)
{
    pthread_mutex_lock(&w->mu);
    while (l->renewing)
        pthread_cond_wait(&w->renewed, &w->mu);
    if (l->watched)
        unlink_lock(w, l);
    pthread_mutex_unlock(&w->mu);
}

void dlock__watchdog_kick(dlock__watchdog *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    w->kicked = 1;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
}
