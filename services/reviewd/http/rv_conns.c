/*
 * rv_conns.c: the registry of open connections and the deadline reaper
 * (rv_conns.h says why MHD's idle timeout is not enough).
 *
 * A doubly linked list under one mutex: add and remove are O(1) and
 * happen once per connection; the deadline itself is an atomic, so
 * moving it (several times per request) takes no lock.  The reaper scans
 * the list every RV_REAP_MS; with REVIEWD_MAX_CONNECTIONS (2048) entries
 * that is a few microseconds.
 */
#include "http/rv_conns.h"

#include "svc_deadline.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RV_REAP_MS 100
/* The deadline of a connection the reaper has claimed. */
#define RV_REAPED INT64_C(-1)

struct rv_conn {
    rv_conn *prev;
    rv_conn *next;
    int fd;
    _Atomic int_least64_t deadline_ms; /* 0: none; RV_REAPED: claimed */
};

struct rv_conns {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t reaper;
    int stopping;
    rv_conn *head;
    rv_conns_expire_fn expire;
    void *cls;
};

int64_t rv_conns_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Claims the connections past their deadline; registry locked. */
static void reap_expired(rv_conns *conns, int64_t now)
{
    for (rv_conn *c = conns->head; c != NULL; c = c->next) {
        int_least64_t d = atomic_load(&c->deadline_ms);

        if (d > 0 && d <= now
            && atomic_compare_exchange_strong(&c->deadline_ms, &d, RV_REAPED))
            conns->expire(conns->cls, c->fd);
    }
}

static void *reaper_main(void *arg)
{
    rv_conns *conns = arg;
    struct timespec until;

    pthread_mutex_lock(&conns->mu);
    while (!conns->stopping) {
        until = svc_deadline_timespec_in(RV_REAP_MS);
        pthread_cond_timedwait(&conns->wake, &conns->mu, &until);
        if (!conns->stopping)
            reap_expired(conns, rv_conns_now_ms());
    }
    pthread_mutex_unlock(&conns->mu);
    return NULL;
}

rv_conns *rv_conns_new(rv_conns_expire_fn expire, void *cls, char *errbuf,
                       size_t errlen)
{
    rv_conns *conns = calloc(1, sizeof(*conns));
    pthread_condattr_t ca;
    int rc;

    if (conns == NULL) {
        snprintf(errbuf, errlen, "http: out of memory");
        return NULL;
    }
    conns->expire = expire;
    conns->cls = cls;
    pthread_mutex_init(&conns->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&conns->wake, &ca);
    pthread_condattr_destroy(&ca);
    rc = pthread_create(&conns->reaper, NULL, reaper_main, conns);
    if (rc != 0) {
        snprintf(errbuf, errlen,
                 "http: cannot start the deadline reaper: "
                 "%s",
                 strerror(rc));
        pthread_cond_destroy(&conns->wake);
        pthread_mutex_destroy(&conns->mu);
        free(conns);
        return NULL;
    }
    return conns;
}

void rv_conns_free(rv_conns *conns)
{
    if (conns == NULL)
        return;
    pthread_mutex_lock(&conns->mu);
    conns->stopping = 1;
    pthread_cond_signal(&conns->wake);
    pthread_mutex_unlock(&conns->mu);
    pthread_join(conns->reaper, NULL);
    pthread_cond_destroy(&conns->wake);
    pthread_mutex_destroy(&conns->mu);
    free(conns);
}

rv_conn *rv_conns_add(rv_conns *conns, int fd, int64_t deadline_ms)
{
    rv_conn *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return NULL;
    c->fd = fd;
    atomic_init(&c->deadline_ms, deadline_ms);
    pthread_mutex_lock(&conns->mu);
    c->next = conns->head;
    if (conns->head != NULL)
        conns->head->prev = c;
    conns->head = c;
    pthread_mutex_unlock(&conns->mu);
    return c;
}

void rv_conns_remove(rv_conns *conns, rv_conn *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&conns->mu);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        conns->head = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&conns->mu);
    free(c);
}

/* Moves the deadline to deadline_ms (only earlier when earlier_only). */
static int arm(rv_conn *c, int64_t deadline_ms, int earlier_only)
{
    int_least64_t d;

    if (c == NULL)
        return 1;
    d = atomic_load(&c->deadline_ms);
    for (;;) {
        if (d == RV_REAPED)
            return 0;
        if (earlier_only && d > 0 && d <= deadline_ms)
            return 1;
        if (atomic_compare_exchange_weak(&c->deadline_ms, &d, deadline_ms))
            return 1;
    }
}

int rv_conn_arm(rv_conn *c, int64_t deadline_ms)
{
    return arm(c, deadline_ms, 0);
}

int rv_conn_arm_by(rv_conn *c, int64_t deadline_ms)
{
    return arm(c, deadline_ms, 1);
}
