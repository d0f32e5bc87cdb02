/*
 * pattern_common.c: names, validity, replies and waiting for the pattern
 * modules (see pattern_common.h).
 *
 * The waiting loop is the core lock's (lock.c, acquire_waiting) made
 * generic: attempt, and while busy join the object's channel once, try
 * again at once (a release between the attempt and the join would be
 * missed otherwise), then sleep until woken or until a jittered poll
 * interval runs out.  The interval is just past the holder's remaining
 * time when that is below the cap, otherwise between half the cap and the
 * cap, so a crashed holder is replaced soon after its TTL and a lost
 * notification costs at most one cap.
 */
#include "pattern_common.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "notify.h"

#define POLL_CAP_MS 200

dlock_err dlock__pattern_check_name(const char *what, const char *name,
                                    dlock__msg *m)
{
    if (name == NULL || name[0] == '\0')
        return dlock__msg_set(m, DLOCK_INVALID, "the %s name is empty", what);
    if (strnlen(name, DLOCK_KEY_MAX + 1) > DLOCK_KEY_MAX)
        return dlock__msg_set(m, DLOCK_INVALID, "the %s name is longer than "
                              "%d bytes", what, DLOCK_KEY_MAX);
    return DLOCK_OK;
}

const char *const dlock__pattern_kinds[] = {
    "sem", "rw", "leader", "rl", "once", "idem", NULL,
};

int dlock__pattern_owns_key(const char *key)
{
    if (key[0] != '{')
        return 0;
    for (size_t i = 0; dlock__pattern_kinds[i] != NULL; i++) {
        size_t n = strlen(dlock__pattern_kinds[i]);

        if (strncmp(key + 1, dlock__pattern_kinds[i], n) == 0 &&
            key[n + 1] == ':')
            return 1;
    }
    return 0;
}

char *dlock__pattern_key(const char *kind, const char *name,
                         const char *suffix)
{
    size_t len = strlen(kind) + strlen(name) + strlen(suffix) + 4;
    char *key = dlock__malloc(len);

    if (key != NULL)
        snprintf(key, len, "{%s:%s}%s", kind, name, suffix);
    /* A kind missing from the table would make keys a lock could reach. */
    assert(key == NULL || dlock__pattern_owns_key(key));
    return key;
}

char *dlock__pattern_channel(const char *kind, const char *name)
{
    size_t len = strlen(kind) + strlen(name) + sizeof("dlock::");
    char *channel = dlock__malloc(len);

    if (channel != NULL)
        snprintf(channel, len, "dlock:%s:%s", kind, name);
    return channel;
}

dlock_err dlock__pattern_check_ms(const char *what, int64_t ms,
                                  dlock__msg *m)
{
    if (ms < 1 || ms > DLOCK__PATTERN_MAX_MS)
        return dlock__msg_set(m, DLOCK_INVALID, "%s %lld ms is not 1 ms..1 "
                              "year", what, (long long)ms);
    return DLOCK_OK;
}

int64_t dlock__pattern_valid_until(int64_t sent_us, int64_t ttl_ms)
{
    int64_t drift = ttl_ms * 10 + 2000;   /* 1% of the TTL, plus 2 ms */
    int64_t until = sent_us + ttl_ms * 1000 - drift;

    return until > sent_us ? until : sent_us;
}

int64_t dlock__pattern_left_ms(int64_t valid_until_us)
{
    int64_t left = valid_until_us - dlock__now_us();

    return left > 0 ? left / 1000 : 0;
}

int dlock__pattern_ints(const redisReply *r, size_t n, long long *out)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return 0;
        out[i] = r->element[i]->integer;
    }
    return 1;
}

int dlock__pattern_u64(const redisReply *e, uint64_t *out)
{
    char *end;
    unsigned long long v;

    if (e->type == REDIS_REPLY_INTEGER && e->integer >= 0) {
        *out = (uint64_t)e->integer;
        return 1;
    }
    if (e->type != REDIS_REPLY_STRING || e->len == 0 || e->len > 20 ||
        e->str[0] < '0' || e->str[0] > '9')
        return 0;
    errno = 0;
    v = strtoull(e->str, &end, 10);
    if (errno != 0 || end != e->str + e->len)
        return 0;
    *out = v;
    return 1;
}

int dlock__pattern_grant(const redisReply *r, int *granted, uint64_t *fence,
                         int64_t *pttl)
{
    long long g;

    if (!dlock__pattern_ints(r, 1, &g) || r->elements != 2)
        return 0;
    *granted = g == 1;
    if (g == 1)
        return dlock__pattern_u64(r->element[1], fence);
    if (r->element[1]->type != REDIS_REPLY_INTEGER)
        return 0;
    *pttl = r->element[1]->integer;
    return 1;
}

dlock_err dlock__pattern_bad_reply(dlock_client *c, const char *what,
                                   const char *expected, const redisReply *r,
                                   dlock__msg *m)
{
    return dlock__msg_set(m, DLOCK_PROTOCOL, "%s on %s: expected %s, got %s",
                          what, dlock_client_endpoint(c), expected,
                          dlock__reply_type_name(r));
}

void dlock__pattern_set_busy_ttl(dlock_client *c, int64_t ttl_ms)
{
    dlock__tstate *t = dlock__client_tstate(c);

    if (t != NULL)
        t->busy_ttl_ms = ttl_ms;
}

/* xorshift64: per-call jitter with no shared state. */
static uint64_t jitter_next(uint64_t *state)
{
    uint64_t x = *state;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return x;
}

static uint64_t jitter_seed(const char *seed)
{
    uint64_t rng = 0x9e3779b97f4a7c15ull;

    for (size_t i = 0; seed != NULL && seed[i] != '\0' && i < 16; i++)
        rng = rng * 31 + (unsigned char)seed[i];
    return rng != 0 ? rng : 1;
}

/* How long to sleep before trying again when no notification comes. */
static int64_t poll_interval_us(int64_t hint_ms, uint64_t *rng)
{
    int64_t cap_us = POLL_CAP_MS * 1000;

    if (hint_ms > 0 && hint_ms * 1000 < cap_us) {
        int64_t base = hint_ms * 1000;

        return base + 500 + (int64_t)(jitter_next(rng) %
                                      (uint64_t)(base / 8 + 1000));
    }
    return cap_us / 2 + (int64_t)(jitter_next(rng) % (uint64_t)(cap_us / 2));
}

void dlock__pattern_sleep_until(int64_t deadline_us)
{
    struct timespec ts = dlock__timespec_of(deadline_us);

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        if (dlock__now_us() >= deadline_us)
            break;
}

static int cancelled(const atomic_int *cancel)
{
    return cancel != NULL && atomic_load(cancel) != 0;
}

dlock_err dlock__pattern_wait(dlock_client *c, const char *channel,
                              int64_t deadline_us, const char *seed,
                              dlock__attempt_fn attempt, void *arg,
                              const atomic_int *cancel, int64_t *hint_ms,
                              dlock__msg *m)
{
    dlock__notifier *n = NULL;
    dlock__waiter *w = NULL;
    uint64_t rng = jitter_seed(seed);
    int joined = 0;
    dlock_err err;

    for (;;) {
        int64_t now = dlock__now_us(), wake_at;
        int will_wait = now < deadline_us && !cancelled(cancel);

        *hint_ms = 0;
        err = attempt(arg, will_wait, hint_ms, m);
        now = dlock__now_us();
        if (err != DLOCK_BUSY || now >= deadline_us || cancelled(cancel))
            break;
        if (!joined) {
            /* Join, then try again at once: see the top of this file. */
            joined = 1;
            n = dlock__client_notifier(c);
            if (n != NULL)
                dlock__notify_join(n, channel, &w);
            if (w != NULL)
                continue;
        }
        wake_at = now + poll_interval_us(*hint_ms, &rng);
        if (wake_at > deadline_us)
            wake_at = deadline_us;
        if (w != NULL)
            dlock__notify_wait(n, w, wake_at);
        else
            dlock__pattern_sleep_until(wake_at);
    }
    dlock__notify_leave(n, w);
    return err;
}
