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
 * After every change the set's key TTL is set to its latest expiry, so
 * an idle semaphore leaves nothing behind but its grant counter.
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

#include "alloc.h"
#include "clock.h"
#include "pattern_common.h"
#include "token.h"

#define LUA_KEEP_KEY                                                       \
    "local function keep_key()\n"                                          \
    "  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')\n" \
    "  if last[2] then\n"                                                  \
    "    local ttl = tonumber(last[2]) - now\n"                            \
    "    if ttl < 1 then ttl = 1 end\n"                                    \
    "    redis.call('PEXPIRE', KEYS[1], ttl)\n"                            \
    "  end\n"                                                              \
    "end\n"

static const dlock__script acquire_script = {
    "semaphore.acquire",
    DLOCK__LUA_NOW_MS DLOCK__LUA_FENCE LUA_KEEP_KEY
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\n"
    "local expiry = now + tonumber(ARGV[3])\n"
    "if redis.call('ZSCORE', KEYS[1], ARGV[1]) then\n"
    "  redis.call('ZADD', KEYS[1], expiry, ARGV[1])\n"
    "  keep_key()\n"
    "  return {1, redis.call('GET', KEYS[2]) or '0'}\n"
    "end\n"
    "if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then\n"
    "  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')\n"
    "  return {0, tonumber(first[2]) - now}\n"
    "end\n"
    "redis.call('ZADD', KEYS[1], expiry, ARGV[1])\n"
    "keep_key()\n"
    "return {1, next_fence(KEYS[2])}\n",
    1,
};

static const dlock__script release_script = {
    "semaphore.release",
    DLOCK__LUA_NOW_MS "local s = redis.call('ZSCORE', KEYS[1], ARGV[1])\n"
                      "if not s then return 0 end\n"
                      "redis.call('ZREM', KEYS[1], ARGV[1])\n"
                      "if tonumber(s) <= now then return 0 end\n"
                      "redis.call('PUBLISH', ARGV[2], '')\n"
                      "return 1\n",
    1,
};

static const dlock__script extend_script = {
    "semaphore.extend",
    DLOCK__LUA_NOW_MS LUA_KEEP_KEY
    "local s = redis.call('ZSCORE', KEYS[1], ARGV[1])\n"
    "if not s then return 0 end\n"
    "if tonumber(s) <= now then\n"
    "  redis.call('ZREM', KEYS[1], ARGV[1])\n"
    "  return 0\n"
    "end\n"
    "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])\n"
    "keep_key()\n"
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
    char token[DLOCK_TOKEN_LEN + 1];
    int64_t ttl_ms;
    uint64_t fence;
    int64_t valid_until_us;
    int lost;
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

    if (c == NULL || out == NULL)
        return DLOCK_INVALID;
    *out = NULL;
    m = dlock__client_begin(c);
    err = dlock__pattern_check_name("semaphore", name, m);
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
    char permits[16], ttl[24];
    const char *argv[] = {s->holders_key, s->fence_key, p->token, permits,
                          ttl};
    int64_t sent = dlock__now_us();
    int granted = 0;
    uint64_t fence = 0;
    int64_t pttl = 0;
    redisReply *r;
    dlock_err err;

    (void)waiting;
    snprintf(permits, sizeof(permits), "%d", s->permits);
    snprintf(ttl, sizeof(ttl), "%lld", (long long)p->ttl_ms);
    err = dlock__client_eval(s->client, &acquire_script, 2, 5, argv, NULL, &r,
                             m);
    if (err != DLOCK_OK)
        return err;
    if (!dlock__pattern_grant(r, &granted, &fence, &pttl)) {
        err = dlock__pattern_bad_reply(s->client, "semaphore.acquire",
                                       "{granted, fence|ms}", r, m);
    } else if (granted) {
        p->fence = fence;
        p->valid_until_us = dlock__pattern_valid_until(sent, p->ttl_ms);
    } else {
        *hint_ms = pttl;
        err = DLOCK_BUSY;
    }
    freeReplyObject(r);
    return err;
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
    p->ttl_ms = ttl_ms;
    err = dlock__token_new(p->token, m);
    if (err == DLOCK_OK)
        err = dlock__wait_run(
            &(const dlock__wait){
                .client = s->client,
                .channel = s->channel,
                .deadline_us = dlock__deadline_after_ms(wait_ms),
                .seed = p->token,
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

/* Runs a permit script answering 1 (held) or 0 (lease gone). */
static dlock_err permit_script(dlock_permit *p, const dlock__script *script,
                               const char *arg, dlock__msg *m)
{
    dlock_semaphore *s = p->sem;
    const char *argv[] = {s->holders_key, p->token, arg};
    redisReply *r;
    dlock_err err = dlock__client_eval(s->client, script, 1, 3, argv, NULL, &r,
                                       m);

    if (err != DLOCK_OK)
        return dlock__msg_wrap(m, err, "%s of semaphore %.64s", script->name,
                               s->name);
    if (r->type != REDIS_REPLY_INTEGER)
        err = dlock__pattern_bad_reply(s->client, script->name, "an integer",
                                       r, m);
    else if (r->integer != 1)
        err = dlock__msg_set(m, DLOCK_LOST,
                             "%s of semaphore %.64s on %s: "
                             "the permit's lease had run out",
                             script->name, s->name,
                             dlock_client_endpoint(s->client));
    freeReplyObject(r);
    return err;
}

dlock_err dlock_semaphore_release(dlock_permit *p)
{
    dlock_err err;

    if (p == NULL)
        return DLOCK_OK;
    err = permit_script(p, &release_script, p->sem->channel,
                        dlock__client_begin(p->sem->client));
    dlock_permit_free(p);
    return err;
}

dlock_err dlock_semaphore_extend(dlock_permit *p, int64_t ttl_ms)
{
    char ttl[24];
    dlock__msg *m;
    int64_t sent = dlock__now_us();
    dlock_err err;

    if (p == NULL)
        return DLOCK_INVALID;
    m = dlock__client_begin(p->sem->client);
    if (p->lost)
        return dlock__msg_set(m, DLOCK_STATE,
                              "extend of a permit of "
                              "semaphore %.64s: it is lost",
                              p->sem->name);
    if (ttl_ms == 0)
        ttl_ms = p->ttl_ms;
    err = dlock__pattern_check_ms("permit TTL", ttl_ms, m);
    if (err != DLOCK_OK)
        return err;
    snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
    err = permit_script(p, &extend_script, ttl, m);
    if (err == DLOCK_OK) {
        p->ttl_ms = ttl_ms;
        p->valid_until_us = dlock__pattern_valid_until(sent, ttl_ms);
    } else if (err == DLOCK_LOST) {
        p->lost = 1;
        p->valid_until_us = 0;
    }
    return err;
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
    dlock__free(p);
}

int64_t dlock_permit_valid_ms(const dlock_permit *p)
{
    return p->lost ? 0 : dlock__pattern_left_ms(p->valid_until_us);
}

uint64_t dlock_permit_fence(const dlock_permit *p)
{
    return p->fence;
}

int dlock_permit_lost(const dlock_permit *p)
{
    return p->lost;
}

const char *dlock_permit_token(const dlock_permit *p)
{
    return p->token;
}
