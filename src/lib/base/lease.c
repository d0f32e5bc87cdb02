/*
 * lease.c: validity of a time-limited grant (see lease.h).
 *
 * The arithmetic is deliberately small: one candidate per request
 * (sent + ttl - drift), a minimum over the requests that may have run last,
 * and a subtraction for a forward step of the server's clock.  Everything
 * that reads until_us takes the lease's mutex, so an extend racing the
 * watchdog's renewal is ordered, not a data race.
 */
#include "base/lease.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNKNOWN_BASE INT64_MIN

int64_t dlock__boot_us(void)
{
    struct timespec ts;
    int rc = clock_gettime(CLOCK_BOOTTIME, &ts);

    /* CLOCK_BOOTTIME exists on every Linux since 2.6.39. */
    assert(rc == 0);
    (void)rc;
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t dlock__lease_until_of(int64_t sent_us, int64_t ttl_ms)
{
    int64_t drift = ttl_ms * 10 + 2000; /* 1% of the TTL, plus 2 ms */
    int64_t until = sent_us + ttl_ms * 1000 - drift;

    return until > sent_us ? until : sent_us;
}

void dlock__lease_init(dlock__lease *l, int64_t ttl_ms)
{
    pthread_mutex_t init = PTHREAD_MUTEX_INITIALIZER;

    memset(l, 0, sizeof(*l));
    l->mu = init;
    l->base_hi_us = UNKNOWN_BASE;
    atomic_init(&l->ttl_ms, ttl_ms);
    atomic_init(&l->lost, 0);
}

void dlock__lease_destroy(dlock__lease *l)
{
    pthread_mutex_destroy(&l->mu);
}

static int64_t skew_hi(const dlock__skew *s)
{
    int64_t hi;

    if (s == NULL)
        return UNKNOWN_BASE;
    pthread_mutex_lock((pthread_mutex_t *)&s->mu);
    hi = s->have ? s->hi_us : UNKNOWN_BASE;
    pthread_mutex_unlock((pthread_mutex_t *)&s->mu);
    return hi;
}

dlock__lease_ticket dlock__lease_begin(dlock__lease *l, int64_t ttl_ms,
                                       const dlock__skew *skew)
{
    dlock__lease_ticket t;
    int64_t cand;

    t.base_hi_us = skew_hi(skew);
    t.ttl_ms = ttl_ms;
    t.slot = -1;
    pthread_mutex_lock(&l->mu);
    t.sent_us = dlock__boot_us();
    t.seq = ++l->events;
    cand = dlock__lease_until_of(t.sent_us, ttl_ms);
    for (int i = 0; i < DLOCK__LEASE_SLOTS && t.slot < 0; i++) {
        if (l->open_cand[i] == 0) {
            l->open_cand[i] = cand;
            t.slot = i;
        }
    }
    if (t.slot < 0)
        l->untracked++;
    /* If this request runs last in Redis, the key lives from (at least)
     * now for ttl_ms: no more than that may be claimed from here on. */
    if (l->granted && cand < l->until_us)
        l->until_us = cand;
    pthread_mutex_unlock(&l->mu);
    return t;
}

void dlock__lease_ticket_server_time(dlock__lease_ticket *t, int64_t server_us)
{
    if (server_us > 0)
        t->base_hi_us = server_us - t->sent_us;
}

/* The least candidate among the requests that may run after the one
 * begun at event seq: those in flight and those that ended since (mu
 * held). */
static int64_t least_after(const dlock__lease *l, uint64_t seq, int64_t cand)
{
    for (int i = 0; i < DLOCK__LEASE_SLOTS; i++) {
        if (l->open_cand[i] != 0 && l->open_cand[i] < cand)
            cand = l->open_cand[i];
        /* The ring keeps the last DLOCK__LEASE_SLOTS endings: more
         * requests than that ending while one is in flight do not
         * happen with one owner and one renewer. */
        if (l->ended_at[i] > seq && l->ended_cand[i] != 0
            && l->ended_cand[i] < cand)
            cand = l->ended_cand[i];
    }
    return cand;
}

int dlock__lease_end(dlock__lease *l, const dlock__lease_ticket *t,
                     dlock__lease_outcome outcome)
{
    int changed = 0;
    int64_t cand = dlock__lease_until_of(t->sent_us, t->ttl_ms);

    pthread_mutex_lock(&l->mu);
    if (t->slot >= 0)
        l->open_cand[t->slot] = 0;
    else
        l->untracked--;
    assert(l->untracked >= 0);
    if (outcome == DLOCK__LEASE_GRANTED && l->untracked == 0
        && !atomic_load(&l->lost)) {
        int64_t until = least_after(l, t->seq, cand);

        changed = !l->granted || l->until_us != until;
        l->until_us = until;
        l->base_hi_us = t->base_hi_us;
        l->granted_at_us = t->sent_us;
        l->granted = 1;
    }
    if (outcome != DLOCK__LEASE_NOT_RUN) {
        l->ended_at[l->ended_next] = ++l->events;
        l->ended_cand[l->ended_next] = cand;
        l->ended_next = (l->ended_next + 1) % DLOCK__LEASE_SLOTS;
    }
    pthread_mutex_unlock(&l->mu);
    return changed;
}

/* How far the server's clock stepped forward against ours since the lease
 * was granted, beyond what the round trips and clock rates explain. */
static int64_t step_since(const dlock__skew *s, int64_t base_hi,
                          int64_t granted_at, int64_t now)
{
    int64_t lo, step, tol;
    int have;

    if (s == NULL || base_hi == UNKNOWN_BASE)
        return 0;
    pthread_mutex_lock((pthread_mutex_t *)&s->mu);
    have = s->have;
    lo = s->lo_us;
    pthread_mutex_unlock((pthread_mutex_t *)&s->mu);
    if (!have)
        return 0;
    /* 1 ms, plus 1000 ppm of the time since the grant for clock rates. */
    tol = 1000 + (now - granted_at) / 1000;
    step = lo - base_hi - tol;
    return step > 0 ? step : 0;
}

int64_t dlock__lease_until(dlock__lease *l, const dlock__skew *skew)
{
    int64_t until, base, at;

    if (atomic_load(&l->lost))
        return 0;
    pthread_mutex_lock(&l->mu);
    until = l->granted ? l->until_us : 0;
    base = l->base_hi_us;
    at = l->granted_at_us;
    pthread_mutex_unlock(&l->mu);
    if (until == 0)
        return 0;
    until -= step_since(skew, base, at, dlock__boot_us());
    return until > 0 ? until : 1;
}

int64_t dlock__lease_left_us(dlock__lease *l, const dlock__skew *skew)
{
    int64_t until = dlock__lease_until(l, skew);
    int64_t left = until - dlock__boot_us();

    return until != 0 && left > 0 ? left : 0;
}

int dlock__lease_granted(dlock__lease *l)
{
    int granted;

    pthread_mutex_lock(&l->mu);
    granted = l->granted;
    pthread_mutex_unlock(&l->mu);
    return granted;
}

int dlock__lease_lost(dlock__lease *l, const dlock__skew *skew)
{
    if (atomic_load(&l->lost))
        return 1;
    return dlock__lease_granted(l) && dlock__lease_left_us(l, skew) == 0;
}

int dlock__lease_mark_lost(dlock__lease *l)
{
    int was = 0;

    return atomic_compare_exchange_strong(&l->lost, &was, 1);
}

int dlock__lease_marked(const dlock__lease *l)
{
    return atomic_load(&l->lost);
}

int64_t dlock__lease_ttl_ms(const dlock__lease *l)
{
    return atomic_load(&l->ttl_ms);
}

void dlock__lease_set_ttl_ms(dlock__lease *l, int64_t ttl_ms)
{
    atomic_store(&l->ttl_ms, ttl_ms);
}

void dlock__skew_init(dlock__skew *s)
{
    pthread_mutex_t init = PTHREAD_MUTEX_INITIALIZER;

    s->mu = init;
    s->have = 0;
    s->sent_us = s->lo_us = s->hi_us = 0;
}

void dlock__skew_destroy(dlock__skew *s)
{
    pthread_mutex_destroy(&s->mu);
}

int dlock__skew_sample(dlock__skew *s, int64_t sent_us, int64_t recv_us,
                       int64_t server_us)
{
    int64_t lo = server_us - recv_us, hi = server_us - sent_us;
    int stepped = 0;

    if (server_us <= 0)
        return 0;
    pthread_mutex_lock(&s->mu);
    if (!s->have || sent_us >= s->sent_us) {
        stepped = s->have && lo - s->hi_us > 1000;
        s->have = 1;
        s->sent_us = sent_us;
        s->lo_us = lo;
        s->hi_us = hi;
    }
    pthread_mutex_unlock(&s->mu);
    return stepped;
}

static int64_t int_of(const redisReply *e)
{
    uint64_t v;

    if (!dlock__fence_of_reply(e, &v) || v > (uint64_t)INT64_MAX / 2)
        return -1;
    return (int64_t)v;
}

int64_t dlock__server_time_us(const redisReply *r, size_t first)
{
    int64_t sec, usec;

    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < first + 2)
        return 0;
    sec = int_of(r->element[first]);
    usec = int_of(r->element[first + 1]);
    if (sec <= 0 || usec < 0 || usec >= 1000000
        || sec > INT64_MAX / 1000000 - 1)
        return 0;
    return sec * 1000000 + usec;
}

int dlock__fence_parse(const char *s, size_t len, uint64_t *out)
{
    uint64_t value = 0;

    if (len == 0 || len > 20)
        return 0;
    for (size_t i = 0; i < len; i++) {
        const uint64_t digit = (uint64_t)(s[i] - '0');

        if (s[i] < '0' || s[i] > '9')
            return 0;
        /* Nineteen digits always fit in 64 bits; only a twentieth can
         * overflow, so only it pays the division of the check (a fence
         * is parsed twice a lock pair, 16 digits each). */
        if (i == 19 && value > (UINT64_MAX - digit) / 10)
            return 0;
        value = value * 10 + digit;
    }
    *out = value;
    return 1;
}

int dlock__fence_of_reply(const redisReply *e, uint64_t *out)
{
    if (e == NULL)
        return 0;
    if (e->type == REDIS_REPLY_INTEGER) {
        if (e->integer < 0)
            return 0;
        *out = (uint64_t)e->integer;
        return 1;
    }
    if (e->type != REDIS_REPLY_STRING)
        return 0;
    return dlock__fence_parse(e->str, e->len, out);
}
