/*
 * svc_bulkhead.c: circuit breaker and concurrency cap (see svc_bulkhead.h).
 *
 * One mutex guards the counters; it is never held while a caller waits
 * on the server, so it costs a few hundred nanoseconds per call against a
 * round trip of tens of microseconds at least.  Half-open lets exactly
 * one trial through: `trial` marks it taken until its leave.  The cap
 * applies once the last call failed (failed_in_row > 0) or the breaker
 * is not closed: a healthy server under a burst (a storm on a row lock)
 * is never refused, a failing one never holds more than the cap.
 */
#include "svc_bulkhead.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "svc_deadline.h"

struct svc_bulkhead {
    char name[32];
    int max_concurrent;
    int failures; /* in a row that open the breaker */
    int open_ms;
    pthread_mutex_t mu;
    svc_breaker_state state;
    int in_flight;
    int failed_in_row;
    int trial;             /* half-open: the trial call is out */
    int64_t open_until_ms; /* open: when the next trial may go */
    uint64_t opened;
    uint64_t refused_open;
    uint64_t refused_full;
};

svc_bulkhead *svc_bulkhead_new(const char *name, int max_concurrent,
                               int failures, int open_ms)
{
    svc_bulkhead *b = calloc(1, sizeof(*b));

    if (b == NULL)
        return NULL;
    if (pthread_mutex_init(&b->mu, NULL) != 0) {
        free(b);
        return NULL;
    }
    snprintf(b->name, sizeof(b->name), "%s", name);
    b->max_concurrent = max_concurrent > 0 ? max_concurrent : 1;
    b->failures = failures > 0 ? failures : 1;
    b->open_ms = open_ms > 0 ? open_ms : 1;
    return b;
}

void svc_bulkhead_free(svc_bulkhead *b)
{
    if (b == NULL)
        return;
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* Under mu: may this call go, given the breaker's state? */
static svc_bulkhead_rc breaker_admits(svc_bulkhead *b)
{
    switch (b->state) {
    case SVC_BREAKER_CLOSED: return SVC_BULKHEAD_OK;
    case SVC_BREAKER_OPEN:
        if (svc_deadline_now_ms() < b->open_until_ms)
            return SVC_BULKHEAD_OPEN;
        b->state = SVC_BREAKER_HALF_OPEN;
        b->trial = 0;
        break;
    case SVC_BREAKER_HALF_OPEN: break;
    }
    if (b->trial)
        return SVC_BULKHEAD_OPEN;
    b->trial = 1;
    return SVC_BULKHEAD_OK;
}

svc_bulkhead_rc svc_bulkhead_enter(svc_bulkhead *b)
{
    svc_bulkhead_rc rc;

    pthread_mutex_lock(&b->mu);
    if (b->in_flight >= b->max_concurrent
        && (b->failed_in_row > 0 || b->state != SVC_BREAKER_CLOSED)) {
        rc = SVC_BULKHEAD_FULL;
        b->refused_full++;
    } else {
        rc = breaker_admits(b);
        if (rc == SVC_BULKHEAD_OK)
            b->in_flight++;
        else
            b->refused_open++;
    }
    pthread_mutex_unlock(&b->mu);
    return rc;
}

/* Under mu: opens the breaker for open_ms. */
static void trip(svc_bulkhead *b)
{
    if (b->state != SVC_BREAKER_OPEN)
        b->opened++;
    b->state = SVC_BREAKER_OPEN;
    b->trial = 0;
    b->open_until_ms = svc_deadline_now_ms() + b->open_ms;
}

void svc_bulkhead_release(svc_bulkhead *b)
{
    pthread_mutex_lock(&b->mu);
    if (b->in_flight > 0)
        b->in_flight--;
    if (b->state == SVC_BREAKER_HALF_OPEN)
        b->trial = 0; /* the trial said nothing: another may go */
    pthread_mutex_unlock(&b->mu);
}

void svc_bulkhead_leave(svc_bulkhead *b, int reached)
{
    pthread_mutex_lock(&b->mu);
    if (b->in_flight > 0)
        b->in_flight--;
    if (reached) {
        b->failed_in_row = 0;
        b->state = SVC_BREAKER_CLOSED;
        b->trial = 0;
    } else {
        b->failed_in_row++;
        if (b->state == SVC_BREAKER_HALF_OPEN
            || (b->state == SVC_BREAKER_CLOSED
                && b->failed_in_row >= b->failures))
            trip(b);
    }
    pthread_mutex_unlock(&b->mu);
}

void svc_bulkhead_stats_get(svc_bulkhead *b, svc_bulkhead_stats *out)
{
    pthread_mutex_lock(&b->mu);
    out->state = b->state;
    out->in_flight = b->in_flight;
    out->opened = b->opened;
    out->refused_open = b->refused_open;
    out->refused_full = b->refused_full;
    pthread_mutex_unlock(&b->mu);
}

const char *svc_breaker_state_name(svc_breaker_state s)
{
    switch (s) {
    case SVC_BREAKER_CLOSED: return "closed";
    case SVC_BREAKER_OPEN: return "open";
    case SVC_BREAKER_HALF_OPEN: return "half_open";
    }
    return "unknown";
}

void svc_bulkhead_describe(svc_bulkhead *b, svc_bulkhead_rc rc, char *buf,
                           size_t len)
{
    int64_t wait_ms;

    pthread_mutex_lock(&b->mu);
    wait_ms = b->open_until_ms - svc_deadline_now_ms();
    if (rc == SVC_BULKHEAD_FULL) {
        snprintf(buf, len,
                 "%s: %d calls are waiting on the server already "
                 "(the cap)",
                 b->name, b->max_concurrent);
    } else {
        snprintf(buf, len,
                 "%s: circuit breaker open (%d failures in a "
                 "row; next trial in %lld ms)",
                 b->name, b->failed_in_row,
                 (long long)(wait_ms > 0 ? wait_ms : 0));
    }
    pthread_mutex_unlock(&b->mu);
}
