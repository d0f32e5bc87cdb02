/*
 * prober.c: breaker probes on their own thread (see prober.h).
 *
 * The thread sleeps on a condition variable (CLOCK_MONOTONIC) until a kick
 * or, while the breaker is open, the next probe time.
 */
#include "client/prober.h"

#include <string.h>

#include "base/alloc.h"
#include "transport/tls.h"
#include "base/clock.h"

struct dlock__prober {
    dlock_client *client;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t thread;
    int stop;
    int kicked;
};

/* Connects and PINGs; on success closes the breaker and keeps the
 * connection for the pool. */
static void probe(dlock_client *c)
{
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

static void *prober_main(void *arg)
{
    dlock__prober *p = arg;
    dlock__breaker *b = dlock__client_breaker(p->client);
    int64_t every = (int64_t)dlock__client_opts(p->client)->breaker_probe_ms
                    * 1000;
    int64_t next = 0;

    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        struct timespec ts;

        if (!dlock__breaker_allows(b)
            && (p->kicked || dlock__now_us() >= next)) {
            p->kicked = 0;
            pthread_mutex_unlock(&p->mu);
            probe(p->client);
            pthread_mutex_lock(&p->mu);
            next = dlock__now_us() + every;
            continue;
        }
        p->kicked = 0;
        ts = dlock__timespec_of(dlock__breaker_allows(b) ? DLOCK__FOREVER
                                                         : next);
        pthread_cond_timedwait(&p->wake, &p->mu, &ts);
    }
    pthread_mutex_unlock(&p->mu);
    dlock__tls_thread_end();
    return NULL;
}

dlock_err dlock__prober_new(dlock_client *c, dlock__prober **out,
                            dlock__msg *m)
{
    dlock__prober *p = dlock__calloc(1, sizeof(*p));
    pthread_condattr_t attr;
    int rc;

    *out = NULL;
    if (p == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "allocating the prober");
    p->client = c;
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        dlock__free(p);
        return dlock__msg_set(m, DLOCK_SYSTEM, "initialising a mutex");
    }
    rc = pthread_condattr_init(&attr);
    if (rc == 0) {
        rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        if (rc == 0)
            rc = pthread_cond_init(&p->wake, &attr);
        pthread_condattr_destroy(&attr);
        if (rc == 0) {
            rc = dlock__thread_start(&p->thread, prober_main, p);
            if (rc != 0)
                pthread_cond_destroy(&p->wake);
        }
    }
    if (rc != 0) {
        pthread_mutex_destroy(&p->mu);
        dlock__free(p);
        return dlock__msg_set(m, DLOCK_SYSTEM,
                              "starting the breaker's "
                              "probe thread: %s",
                              strerror(rc));
    }
    *out = p;
    return DLOCK_OK;
}

void dlock__prober_free(dlock__prober *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    dlock__free(p);
}

void dlock__prober_kick(dlock__prober *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->kicked = 1;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->mu);
}
