/*
 * pattern_semaphore.c: counting semaphore with per-permit leases (see
 * dlock/semaphore.h).
 *
 * The holders are a sorted set of tokens scored by lease expiry in server
 * milliseconds.  Each script starts from the server's TIME, so "expired"
 * means expired by one clock, the server's, whatever the clients' clocks
 * say:
 *   acquire  drop expired holders; our token present (a retried call that
 *            had succeeded): renew it; fewer than N: add us with a new
 *            grant number; else busy, with the time until the first lease
 *            runs out (the waiter's poll bound).
 *   release  remove our token; if its lease was still running, publish so
 *            one waiter per client wakes (one permit freed, one taker).
 *   extend   re-score our token if its lease is still running.
 *   count    holders whose lease is running (read-only).
 * After every grant or renewal the set's key TTL is made to reach at
 * least the new lease's end (keep_zset, pattern_common.h), so the set
 * never expires under a live holder and an idle semaphore leaves nothing
 * behind but its grant counter.
 *
 * Invariant: after any script, at most N members of the set have a score
 * above the server's now; so at most N holders are valid at any instant
 * by the server's clock.  A holder's own view (dlock_permit_valid_ms) is
 * measured from when its request left, minus the drift allowance, so it
 * ends before the server's.
 */
#include "dlock/semaphore.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/decimal.h"
#include "patterns/pattern_common.h"
#include "patterns/pattern_lease.h"

static const dlock__script acquire_script = {
    "semaphore.acquire",
    DLOCK__LUA_NOW_MS DLOCK__LUA_FENCE DLOCK__LUA_KEEP_ZSET
    "call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))\n"
    "local expiry = string.format('%d', now + ARGV[3])\n"
    "if call('ZSCORE', KEYS[1], ARGV[1]) then\n"
    "  call('ZADD', KEYS[1], expiry, ARGV[1])\n"
    "  keep_zset(ARGV[3])\n"
    "  return {1, call('GET', KEYS[2]) or '0'}\n"
    "end\n"
    "if call('ZCARD', KEYS[1]) >= ARGV[2] + 0 then\n"
    "  local first = call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')\n"
    "  return {0, first[2] - now}\n"
    "end\n"
    "local fence = next_fence(KEYS[2], ARGV[4], ARGV[3])\n"
    "if not fence then return {2, now_str} end\n"
    "call('ZADD', KEYS[1], expiry, ARGV[1])\n"
    "keep_zset(ARGV[3])\n"
    "return {1, fence}\n",
    1,
};

static const dlock__script release_script = {
    "semaphore.release",
    DLOCK__LUA_NOW_MS "local s = call('ZSCORE', KEYS[1], ARGV[1])\n"
                      "if not s then return 0 end\n"
                      "call('ZREM', KEYS[1], ARGV[1])\n"
                      "if s + 0 <= now then return 0 end\n"
                      "call('PUBLISH', ARGV[2], '')\n"
                      "return 1\n",
    1,
};

static const dlock__script count_script = {
    "semaphore.count",
    DLOCK__LUA_NOW_MS
    "return redis.call('ZCOUNT', KEYS[1], string.format('(%d', now), "
    "'+inf')\n",
    1,
};

struct dlock_semaphore {
    dlock_client *client;
    char *name;
    char *holders_key;
    char *fence_key;
    char *channel;
    int permits;
};

struct dlock_permit {
    dlock_semaphore *sem;
    dlock__pattern_lease lease;
};

void dlock_semaphore_free(dlock_semaphore *s)
{
    if (s == NULL)
        return;
    dlock__free(s->name);
    dlock__free(s->holders_key);
    dlock__free(s->fence_key);
    dlock__free(s->channel);
    dlock__free(s);
}

dlock_err dlock_semaphore_new(dlock_client *c, const char *name, int permits,
                              dlock_semaphore **out)
{
    dlock_semaphore *s;
    dlock__msg *m;
    dlock_err err;

    if (out != NULL)
        *out = NULL;
    err = dlock__pattern_open(c, out != NULL, "semaphore", name, &m);
    if (err != DLOCK_OK)
        return err;
    if (permits < 1 || permits > DLOCK_SEMAPHORE_MAX_PERMITS)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "semaphore %.64s: %d permits "
                              "is not 1..%d",
                              name, permits, DLOCK_SEMAPHORE_MAX_PERMITS);
    s = dlock__calloc(1, sizeof(*s));
    if (s == NULL)
        goto nomem;
    s->client = c;
    s->permits = permits;
    s->name = dlock__strdup(name);
    s->holders_key = dlock__pattern_key("sem", name, ":holders");
    s->fence_key = dlock__pattern_key("sem", name, ":fence");
    s->channel = dlock__pattern_channel("sem", name);
    if (s->name == NULL || s->holders_key == NULL || s->fence_key == NULL
        || s->channel == NULL)
        goto nomem;
    *out = s;
    return DLOCK_OK;
nomem:
    dlock_semaphore_free(s);
    return dlock__msg_set(m, DLOCK_NOMEM, "allocating semaphore %.64s", name);
}

/* One acquire attempt (a dlock__wait_try_fn). */
static dlock_err acquire_once(void *arg, int waiting, int64_t *hint_ms,
                              dlock__msg *m)
{
    dlock_permit *p = arg;
    dlock_semaphore *s = p->sem;
    char permits[DLOCK__DECIMAL_MAX], ttl[24];
    const char *argv[] = {s->holders_key, s->fence_key, p->lease.token,
                          permits, ttl};

    (void)waiting;
    dlock__decimal_i64(permits, s->permits);
    dlock__decimal_i64(ttl, dlock__pattern_lease_ttl_ms(&p->lease));
    return dlock__pattern_lease_try(&p->lease, &acquire_script, 2, 5, argv,
                                    hint_ms, m);
}

dlock_err dlock_semaphore_acquire(dlock_semaphore *s, int64_t ttl_ms,
                                  int64_t wait_ms, dlock_permit **out)
{
    dlock_permit *p;
    dlock__msg *m;
    int64_t started = dlock__now_us(), hint = 0;
    dlock_err err;

    if (s == NULL || out == NULL)
        return DLOCK_INVALID;
    *out = NULL;
    m = dlock__client_begin(s->client);
    err = dlock__pattern_check_ms("permit TTL", ttl_ms, m);
    if (err != DLOCK_OK)
        return err;
    p = dlock__calloc(1, sizeof(*p));
    if (p == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM,
                              "allocating a permit of "
                              "semaphore %.64s",
                              s->name);
    p->sem = s;
    err = dlock__pattern_lease_init(&p->lease, s->client, ttl_ms, "semaphore",
                                    s->name, m);
    if (err == DLOCK_OK)
        err = dlock__pattern_lease_wait(
            &p->lease,
            &(const dlock__wait){
                .client = s->client,
                .channel = s->channel,
                .deadline_us = dlock__deadline_after_ms(wait_ms),
                .seed = p->lease.token,
            },
            acquire_once, p, &hint, m);
    if (err == DLOCK_BUSY) {
        dlock__pattern_set_busy_ttl(s->client, hint);
        dlock__msg_set(m, DLOCK_BUSY,
                       "semaphore %.64s on %s: all %d permits "
                       "are held; the first lease runs %lld more ms (waited "
                       "%lld ms)",
                       s->name, dlock_client_endpoint(s->client), s->permits,
                       (long long)hint,
                       (long long)((dlock__now_us() - started) / 1000));
    } else if (err != DLOCK_OK) {
        dlock__msg_wrap(m, err, "acquiring a permit of semaphore %.64s",
                        s->name);
    }
    if (err != DLOCK_OK) {
        dlock_permit_free(p);
        return err;
    }
    dlock__msg_clear(m);
    *out = p;
    return DLOCK_OK;
}

dlock_err dlock_semaphore_release(dlock_permit *p)
{
    const char *argv[3];
    dlock_err err;

    if (p == NULL)
        return DLOCK_OK;
    argv[0] = p->sem->holders_key;
    argv[1] = p->lease.token;
    argv[2] = p->sem->channel;
    err = dlock__pattern_lease_call(&p->lease, &release_script, 1, 3, argv,
                                    NULL, 0,
                                    dlock__client_begin(p->sem->client));
    dlock_permit_free(p);
    return err;
}

dlock_err dlock_semaphore_extend(dlock_permit *p, int64_t ttl_ms)
{
    char ttl[24];
    const char *argv[3];

    if (p == NULL)
        return DLOCK_INVALID;
    argv[0] = p->sem->holders_key;
    argv[1] = p->lease.token;
    argv[2] = ttl;
    return dlock__pattern_lease_extend(&p->lease, ttl_ms,
                                       &dlock__pattern_zset_extend, 1, 3, argv,
                                       ttl,
                                       dlock__client_begin(p->sem->client));
}

dlock_err dlock_semaphore_available(dlock_semaphore *s, int *free_permits)
{
    const char *argv[1];
    dlock__msg *m;
    redisReply *r;
    dlock_err err;

    if (s == NULL || free_permits == NULL)
        return DLOCK_INVALID;
    *free_permits = 0;
    m = dlock__client_begin(s->client);
    argv[0] = s->holders_key;
    err = dlock__client_eval(s->client, &count_script, 1, 1, argv, NULL, &r,
                             m);
    if (err != DLOCK_OK)
        return dlock__msg_wrap(m, err, "counting permits of semaphore %.64s",
                               s->name);
    if (r->type != REDIS_REPLY_INTEGER) {
        err = dlock__pattern_bad_reply(s->client, "semaphore.count",
                                       "an integer", r, m);
    } else {
        long long held = r->integer;

        *free_permits = held >= s->permits ? 0 : s->permits - (int)held;
    }
    freeReplyObject(r);
    return err;
}

const char *dlock_semaphore_name(const dlock_semaphore *s)
{
    return s->name;
}

int dlock_semaphore_permits(const dlock_semaphore *s)
{
    return s->permits;
}

void dlock_permit_free(dlock_permit *p)
{
    if (p == NULL)
        return;
    dlock__pattern_lease_destroy(&p->lease);
    dlock__free(p);
}

dlock_err dlock_permit_on_lost(dlock_permit *p, dlock_permit_lost_fn fn,
                               void *arg)
{
    const dlock__pattern_callback cb = {.kind = DLOCK__LOST_PERMIT,
                                        .fn.permit = fn,
                                        .object = p,
                                        .arg = arg};

    if (p == NULL)
        return DLOCK_INVALID;
    return dlock__pattern_lease_on_lost(&p->lease, &cb,
                                        dlock__client_begin(p->sem->client));
}

int64_t dlock_permit_valid_ms(const dlock_permit *p)
{
    return dlock__pattern_lease_valid_ms(&p->lease);
}

uint64_t dlock_permit_fence(const dlock_permit *p)
{
    return dlock__pattern_lease_fence(&p->lease);
}

int dlock_permit_lost(const dlock_permit *p)
{
    return dlock__pattern_lease_lost(&p->lease);
}

const char *dlock_permit_token(const dlock_permit *p)
{
    return p->lease.token;
}
