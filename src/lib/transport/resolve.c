/*
 * resolve.c: getaddrinfo under a deadline (see resolve.h).
 *
 * The waiting caller and the lookup thread share one heap block with a
 * count of two references; whoever drops the last one frees it, with the
 * result if the caller never took it.  So a caller that gives up at its
 * deadline returns at once and the thread never touches freed memory.
 */
#include "transport/resolve.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/thread.h"
#include "base/clock.h"

typedef struct lookup {
    pthread_mutex_t mu;
    pthread_cond_t done_cv;
    int refs;
    int done;
    int rc;
    struct addrinfo *res;
    char port[8];
    char host[];
} lookup;

static void hints_init(struct addrinfo *hints, int flags)
{
    memset(hints, 0, sizeof(*hints));
    hints->ai_family = AF_UNSPEC;
    hints->ai_socktype = SOCK_STREAM;
    hints->ai_flags = flags;
}

/* Drops one reference (mu held on entry, released here); the last frees. */
static void lookup_drop(lookup *q)
{
    int last = --q->refs == 0;

    pthread_mutex_unlock(&q->mu);
    if (!last)
        return;
    if (q->res != NULL)
        freeaddrinfo(q->res);
    pthread_cond_destroy(&q->done_cv);
    pthread_mutex_destroy(&q->mu);
    dlock__free(q);
}

static void *lookup_run(void *arg)
{
    lookup *q = arg;
    struct addrinfo hints, *res = NULL;
    int rc;

    hints_init(&hints, 0);
    rc = getaddrinfo(q->host, q->port, &hints, &res);
    pthread_mutex_lock(&q->mu);
    q->done = 1;
    q->rc = rc;
    q->res = rc == 0 ? res : NULL;
    pthread_cond_signal(&q->done_cv);
    lookup_drop(q);
    return NULL;
}

static dlock_err lookup_new(const char *host, const char *port, lookup **out,
                            dlock__msg *m)
{
    size_t len = strlen(host) + 1;
    lookup *q = dlock__calloc(1, sizeof(*q) + len);
    pthread_condattr_t attr;
    int ok;

    *out = NULL;
    if (q == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "resolving %s", host);
    memcpy(q->host, host, len);
    snprintf(q->port, sizeof(q->port), "%s", port);
    q->refs = 2;
    ok = pthread_condattr_init(&attr) == 0;
    if (ok) {
        ok = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0
             && pthread_cond_init(&q->done_cv, &attr) == 0;
        pthread_condattr_destroy(&attr);
    }
    if (ok && pthread_mutex_init(&q->mu, NULL) != 0) {
        pthread_cond_destroy(&q->done_cv);
        ok = 0;
    }
    if (!ok) {
        dlock__free(q);
        return dlock__msg_set(m, DLOCK_SYSTEM,
                              "resolving %s: initialising "
                              "a condition variable",
                              host);
    }
    *out = q;
    return DLOCK_OK;
}

/* Looks host up on its own thread, waiting until deadline_us at most. */
static dlock_err lookup_by(const char *host, const char *port,
                           int64_t deadline_us, struct addrinfo **out, int *rc,
                           dlock__msg *m)
{
    int64_t started = dlock__now_us();
    pthread_t thread;
    lookup *q;
    dlock_err err = lookup_new(host, port, &q, m);

    if (err != DLOCK_OK)
        return err;
    if (dlock__thread_start(&thread, lookup_run, q) != 0) {
        pthread_cond_destroy(&q->done_cv);
        pthread_mutex_destroy(&q->mu);
        dlock__free(q);
        return dlock__msg_set(m, DLOCK_SYSTEM,
                              "resolving %s: starting a "
                              "thread",
                              host);
    }
    pthread_detach(thread);
    pthread_mutex_lock(&q->mu);
    while (!q->done && dlock__now_us() < deadline_us) {
        struct timespec ts = dlock__timespec_of(deadline_us);

        pthread_cond_timedwait(&q->done_cv, &q->mu, &ts);
    }
    if (q->done) {
        *rc = q->rc;
        *out = q->res;
        q->res = NULL;
    } else {
        err = dlock__msg_set(m, DLOCK_TIMEOUT,
                             "resolving %s: no answer "
                             "after %lld ms",
                             host,
                             (long long)((dlock__now_us() - started) / 1000));
    }
    lookup_drop(q);
    return err;
}

dlock_err dlock__resolve(const char *host, int port, int64_t deadline_us,
                         struct addrinfo **out, dlock__msg *m)
{
    struct addrinfo hints;
    char ports[8];
    int rc;
    dlock_err err;

    *out = NULL;
    snprintf(ports, sizeof(ports), "%d", port);
    hints_init(&hints, AI_NUMERICHOST);
    rc = getaddrinfo(host, ports, &hints, out);
    if (rc == EAI_NONAME) {
        err = lookup_by(host, ports, deadline_us, out, &rc, m);
        if (err != DLOCK_OK)
            return err;
    }
    if (rc == 0)
        return DLOCK_OK;
    *out = NULL;
    return dlock__msg_set(m,
                          rc == EAI_MEMORY   ? DLOCK_NOMEM
                          : rc == EAI_SYSTEM ? DLOCK_SYSTEM
                                             : DLOCK_UNAVAILABLE,
                          "resolving %s: %s", host,
                          rc == EAI_SYSTEM ? strerror(errno)
                                           : gai_strerror(rc));
}
