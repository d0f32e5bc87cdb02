/*
 * rv_locks.c: fail-open distributed locks through libdlock.
 *
 * The client is created with start_offline so reviewd starts while Redis
 * is down, and with short timeouts because a request waits on them.  Every
 * acquire is fail-open: DLOCK_OK with a degraded lock when Redis is
 * unavailable.  Other errors (a timeout, an error reply such as OOM or
 * READONLY) are not worth refusing a request for either, since PostgreSQL
 * still serialises it: they are counted as "error" and the request runs
 * degraded.  Only DLOCK_BUSY turns a request away.
 */
#include "core/rv_locks.h"

#include <dlock/dlock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rv_locks {
    dlock_client *client; /* NULL when REDIS_URL is empty */
    rv_metrics *metrics;
    svc_log *log;
};

rv_locks *rv_locks_new(const rv_config *cfg, svc_log *log, rv_metrics *m,
                       char *errbuf, size_t errlen)
{
    rv_locks *locks = calloc(1, sizeof(*locks));
    dlock_client_opts opts;
    char err[DLOCK_ERRMSG_MAX];
    dlock_err rc;

    if (locks == NULL) {
        snprintf(errbuf, errlen, "locks: out of memory");
        return NULL;
    }
    locks->metrics = m;
    locks->log = log;
    if (cfg->redis_url == NULL)
        return locks;
    dlock_client_opts_init(&opts);
    opts.start_offline = 1;
    opts.connect_timeout_ms = cfg->redis_timeout_ms;
    opts.io_timeout_ms = cfg->redis_timeout_ms;
    /* One connection per worker, plus the monitor's ping. */
    opts.pool_size = cfg->threads + 2;
    err[0] = '\0';
    rc = dlock_client_new(cfg->redis_url, &opts, &locks->client, err,
                          sizeof(err));
    if (rc != DLOCK_OK) {
        snprintf(errbuf, errlen, "REDIS_URL: %s (%s)",
                 err[0] != '\0' ? err : dlock_strerror(rc), dlock_errname(rc));
        free(locks);
        return NULL;
    }
    return locks;
}

void rv_locks_free(rv_locks *locks)
{
    if (locks == NULL)
        return;
    dlock_client_free(locks->client);
    free(locks);
}

static rv_lock_outcome degraded(rv_locks *locks, rv_held *held,
                                rv_lock_outcome outcome)
{
    held->lock = NULL;
    held->fence = 0;
    held->outcome = outcome;
    rv_metrics_lock(locks->metrics, outcome);
    return outcome;
}

rv_lock_outcome rv_locks_acquire(rv_locks *locks, const char *key,
                                 int64_t ttl_ms, rv_held *held)
{
    dlock_acquire_opts opts;
    dlock_lock *lock = NULL;
    dlock_err rc;

    memset(held, 0, sizeof(*held));
    if (locks->client == NULL)
        return degraded(locks, held, RV_LOCK_DEGRADED);
    dlock_acquire_opts_init(&opts);
    opts.ttl_ms = ttl_ms;
    opts.wait_ms = 0;
    opts.policy = DLOCK_FAIL_OPEN;
    rc = dlock_acquire(locks->client, key, &opts, &lock);
    if (rc == DLOCK_BUSY) {
        held->outcome = RV_LOCK_BUSY;
        rv_metrics_lock(locks->metrics, RV_LOCK_BUSY);
        return RV_LOCK_BUSY;
    }
    if (rc != DLOCK_OK)
        return degraded(locks, held, RV_LOCK_ERROR);
    if (dlock_lock_degraded(lock)) {
        dlock_lock_free(lock);
        return degraded(locks, held, RV_LOCK_DEGRADED);
    }
    held->lock = lock;
    held->fence = dlock_lock_fence(lock);
    held->outcome = RV_LOCK_OK;
    rv_metrics_lock(locks->metrics, RV_LOCK_OK);
    return RV_LOCK_OK;
}

void rv_locks_release(rv_locks *locks, rv_held *held)
{
    dlock_err rc;

    if (held->lock == NULL)
        return;
    rc = dlock_release(held->lock);
    held->lock = NULL;
    if (rc == DLOCK_OK)
        rv_metrics_release(locks->metrics, RV_RELEASE_OK);
    else if (rc == DLOCK_LOST)
        rv_metrics_release(locks->metrics, RV_RELEASE_LOST);
    else
        rv_metrics_release(locks->metrics, RV_RELEASE_ERROR);
}

int rv_locks_configured(const rv_locks *locks)
{
    return locks->client != NULL;
}

int rv_locks_ping(rv_locks *locks)
{
    return locks->client != NULL
           && dlock_client_ping(locks->client, NULL) == DLOCK_OK;
}

const char *rv_locks_endpoint(const rv_locks *locks)
{
    return locks->client != NULL ? dlock_client_endpoint(locks->client) : "";
}

void rv_locks_gauges(rv_locks *locks, rv_metrics_gauges *g)
{
    dlock_client_stats st;

    g->redis_configured = locks->client != NULL;
    if (locks->client == NULL)
        return;
    dlock_client_stats_get(locks->client, &st);
    g->breaker_open = dlock_client_breaker(locks->client)
                      == DLOCK_BREAKER_OPEN;
    g->redis_commands = st.commands;
    g->redis_transport_errors = st.transport_errors;
    g->redis_breaker_opens = st.breaker_opens;
    g->redis_fast_fails = st.fast_fails;
}
