/*
 * lock.c: acquire, release, extend, waiting and fencing (see dlock/lock.h).
 *
 * Each decision is one Lua script, so it is atomic on the server:
 *   acquire  if the key holds our token (a retried call that had succeeded)
 *            it is ours; if it holds another, answer busy with its PTTL;
 *            else set it with PX ttl and advance the fence to
 *            max(last + 1, server microseconds), in the same step.
 *   release  delete only if the key still holds our token, then publish on
 *            the key's channel so one waiter per client wakes at once.
 *   extend   PEXPIRE only if the key still holds our token.
 * Scripts that are retried after a dead connection (see client.c) give the
 * same effect when run twice: acquire by the token check, extend trivially,
 * release by answering "not held" (reported DLOCK_LOST, the safe side).
 *
 * Fences are decimal strings inside the scripts so they stay exact to 2^63.
 *
 * Validity is tracked on the local monotonic clock from the moment each
 * request left, minus a drift allowance (1% of the TTL + 2 ms, as Redlock
 * does), so dlock_lock_valid_ms never claims more time than the server
 * grants.
 *
 * Waiting: a busy acquire waits in the library's one wait loop (wait.h):
 * woken by the key's release channel, with a fallback timer that follows
 * the holder's remaining TTL; an unbounded wait rides out transport errors
 * unless the acquire fails open.
 */
#include "lock_internal.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "token.h"
#include "wait.h"
#include "watchdog.h"

#define DEFAULT_TTL_MS 30000
#define CHANNEL_PREFIX "dlock:released:"

/*
 * Fences are handled as decimal strings, never as Lua numbers: Lua's
 * numbers are doubles, exact only to 2^53, and a fence must stay exact to
 * 2^63.  Server time in microseconds is built as a string, compared with the
 * stored counter by length and then digit by digit (both have no leading
 * zeros), and INCR does the +1 in Redis's 64-bit integers.
 */
static const dlock__script acquire_script = {
    "acquire",
    "local holder = redis.call('GET', KEYS[1])\n"
    "if holder == ARGV[1] then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  return {1, redis.call('GET', KEYS[2]) or '0'}\n"
    "end\n"
    "if holder then\n"
    "  return {0, redis.call('PTTL', KEYS[1])}\n"
    "end\n"
    "local t = redis.call('TIME')\n"
    "local now = t[1] .. string.format('%06d', tonumber(t[2]))\n"
    "local last = redis.call('GET', KEYS[2])\n"
    "if not last or #now > #last or (#now == #last and now > last) then\n"
    "  redis.call('SET', KEYS[2], now)\n"
    "else\n"
    "  redis.call('INCR', KEYS[2])\n"
    "end\n"
    "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
    "return {1, redis.call('GET', KEYS[2])}\n",
    1,
};

static const dlock__script release_script = {
    "release",
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "  redis.call('PUBLISH', ARGV[2], '')\n"
    "  return 1\n"
    "end\n"
    "return 0\n",
    1,
};

static const dlock__script extend_script = {
    "extend",
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  return 1\n"
    "end\n"
    "return 0\n",
    1,
};

static const dlock__script inspect_script = {
    "inspect",
    "return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]),\n"
    "        redis.call('GET', KEYS[2]) or '0'}\n",
    1,
};

const dlock__script *const dlock__core_scripts[] = {
    &acquire_script, &release_script, &extend_script, &inspect_script, NULL,
};

void dlock_acquire_opts_init(dlock_acquire_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->ttl_ms = DEFAULT_TTL_MS;
    o->policy = DLOCK_FAIL_CLOSED;
}

/* 1 if key has a non-empty cluster hash tag ({...}), as Redis Cluster
 * defines it: the text between the first '{' and the first '}' after it. */
static int has_hash_tag(const char *key)
{
    const char *open = strchr(key, '{');
    const char *close = open != NULL ? strchr(open + 1, '}') : NULL;

    return close != NULL && close > open + 1;
}

static dlock_err check_key(const char *key, dlock__msg *m)
{
    size_t len;

    if (key == NULL || key[0] == '\0')
        return dlock__msg_set(m, DLOCK_INVALID, "the lock name is empty");
    len = strnlen(key, DLOCK_KEY_MAX + 1);
    if (len > DLOCK_KEY_MAX)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "the lock name is longer than %d bytes",
                              DLOCK_KEY_MAX);
    /* The fence key must hash to the lock's slot: "{K}:fence" does for any
     * K without '}', "K:fence" does for any K with a hash tag. */
    if (!has_hash_tag(key) && strchr(key, '}') != NULL)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "lock name \"%.64s\" has a '}' but no "
                              "{hash tag}; its fence counter could not share "
                              "its cluster slot", key);
    return DLOCK_OK;
}

static void reentrant_unlink(dlock_client *c, dlock_lock *l);

/* Allocates a lock for key with its derived names; token not yet set. */
static dlock_err lock_new(dlock_client *c, const char *key, dlock_lock **out,
                          dlock__msg *m)
{
    size_t len = strlen(key);
    dlock_lock *l = dlock__calloc(1, sizeof(*l));

    *out = NULL;
    if (l == NULL)
        goto nomem;
    l->client = c;
    l->holds = 1;
    l->key = dlock__strdup(key);
    l->fence_key = dlock__malloc(len + sizeof("{}:fence"));
    l->channel = dlock__malloc(len + sizeof(CHANNEL_PREFIX));
    if (l->key == NULL || l->fence_key == NULL || l->channel == NULL)
        goto nomem;
    if (has_hash_tag(key))
        sprintf(l->fence_key, "%s:fence", key);
    else
        sprintf(l->fence_key, "{%s}:fence", key);
    sprintf(l->channel, "%s%s", CHANNEL_PREFIX, key);
    atomic_init(&l->valid_until_us, 0);
    atomic_init(&l->lost, 0);
    *out = l;
    return DLOCK_OK;
nomem:
    dlock_lock_free(l);
    return dlock__msg_set(m, DLOCK_NOMEM, "allocating lock %.64s", key);
}

void dlock_lock_free(dlock_lock *l)
{
    if (l == NULL)
        return;
    /* watched belongs to the watchdog's mutex: unwatch checks it there. */
    if (l->watchdog)
        dlock__watchdog_unwatch(l->client->bg, l);
    if (l->reentrant)
        reentrant_unlink(l->client, l);
    dlock__free(l->key);
    dlock__free(l->fence_key);
    dlock__free(l->channel);
    dlock__free(l);
}

static int64_t drift_us(int64_t ttl_ms)
{
    return ttl_ms * 10 + 2000;   /* 1% of the TTL, plus 2 ms */
}

static void set_valid_from(dlock_lock *l, int64_t sent_us, int64_t ttl_ms)
{
    int64_t until = sent_us + ttl_ms * 1000 - drift_us(ttl_ms);

    atomic_store(&l->valid_until_us, until > sent_us ? until : sent_us);
}

/* Parses a fence given as a decimal string; 0 if it is not one. */
static uint64_t parse_fence(const char *s, size_t len)
{
    uint64_t value = 0;

    if (len == 0 || len > 19)
        return 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        value = value * 10 + (uint64_t)(s[i] - '0');
    }
    return value;
}

/* Reads the acquire script's {1, "fence"} or {0, pttl}. */
static int acquire_reply(const redisReply *r, int *granted, uint64_t *fence,
                         long long *pttl)
{
    const redisReply *flag, *value;

    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2)
        return 0;
    flag = r->element[0];
    value = r->element[1];
    if (flag->type != REDIS_REPLY_INTEGER)
        return 0;
    *granted = flag->integer == 1;
    if (*granted) {
        if (value->type != REDIS_REPLY_STRING)
            return 0;
        *fence = parse_fence(value->str, value->len);
        return *fence > 0;
    }
    if (value->type != REDIS_REPLY_INTEGER)
        return 0;
    *pttl = value->integer;
    return 1;
}

/* One acquire attempt: DLOCK_OK (held; fence and validity set),
 * DLOCK_BUSY (*holder_ttl_ms set) or an error. */
static dlock_err try_once(dlock_lock *l, int64_t *holder_ttl_ms,
                          dlock__msg *m)
{
    char ttl[24];
    const char *argv[] = {l->key, l->fence_key, l->token, ttl};
    int64_t sent = dlock__now_us();
    redisReply *r;
    int granted = 0;
    uint64_t fence = 0;
    long long pttl = 0;
    dlock_err err;

    snprintf(ttl, sizeof(ttl), "%lld", (long long)l->ttl_ms);
    err = dlock__client_eval(l->client, &acquire_script, 2, 4, argv, NULL,
                             &r, m);
    if (err != DLOCK_OK)
        return dlock__msg_wrap(m, err, "acquiring lock %.64s", l->key);
    if (!acquire_reply(r, &granted, &fence, &pttl)) {
        err = dlock__msg_set(m, DLOCK_PROTOCOL, "acquiring lock %.64s on %s: "
                             "expected {1, fence} or {0, pttl}, got %s",
                             l->key, l->client->ep.desc,
                             dlock__reply_type_name(r));
        freeReplyObject(r);
        return err;
    }
    freeReplyObject(r);
    if (!granted) {
        *holder_ttl_ms = pttl;
        return DLOCK_BUSY;
    }
    l->fence = fence;
    set_valid_from(l, sent, l->ttl_ms);
    return DLOCK_OK;
}

/* try_once as a dlock__wait_try_fn. */
static dlock_err acquire_try(void *arg, int waiting, int64_t *holder_ttl_ms,
                             dlock__msg *m)
{
    (void)waiting;
    return try_once(arg, holder_ttl_ms, m);
}

/* Tries, and while busy waits (wait.h) until deadline_us. */
static dlock_err acquire_waiting(dlock_lock *l, int64_t deadline_us,
                                 dlock_policy policy, int64_t *holder_ttl_ms,
                                 dlock__msg *m)
{
    const dlock__wait w = {
        .client = l->client,
        .channel = l->channel,
        .deadline_us = deadline_us,
        .seed = l->token,
        .fail_fast = policy == DLOCK_FAIL_OPEN,
    };

    return dlock__wait_run(&w, acquire_try, l, holder_ttl_ms, m);
}

/* Transport and server failures that a fail-open acquire degrades on. */
static int redis_failed(dlock_err err)
{
    return err == DLOCK_UNAVAILABLE || err == DLOCK_TIMEOUT ||
           err == DLOCK_PROTOCOL || err == DLOCK_TLS || err == DLOCK_SERVER ||
           err == DLOCK_AUTH;
}

/* The reentrant lock this thread already holds on key, with its hold count
 * raised, or NULL. */
static dlock_lock *reenter(dlock_client *c, const char *key)
{
    dlock_lock *found = NULL;

    pthread_mutex_lock(&c->reentrant_mu);
    for (dlock_lock *l = c->reentrant; l != NULL; l = l->rnext) {
        if (pthread_equal(l->owner, pthread_self()) &&
            strcmp(l->key, key) == 0 && !atomic_load(&l->lost)) {
            l->holds++;
            found = l;
            break;
        }
    }
    pthread_mutex_unlock(&c->reentrant_mu);
    return found;
}

static void reentrant_add(dlock_client *c, dlock_lock *l)
{
    pthread_mutex_lock(&c->reentrant_mu);
    l->reentrant = 1;
    l->owner = pthread_self();
    l->rnext = c->reentrant;
    c->reentrant = l;
    pthread_mutex_unlock(&c->reentrant_mu);
}

/* Takes l off the client's list of reentrant locks (if it is there). */
static void reentrant_unlink(dlock_client *c, dlock_lock *l)
{
    dlock_lock **link;

    pthread_mutex_lock(&c->reentrant_mu);
    link = &c->reentrant;
    while (*link != NULL && *link != l)
        link = &(*link)->rnext;
    if (*link == l)
        *link = l->rnext;
    pthread_mutex_unlock(&c->reentrant_mu);
}

/* Lowers the hold count; returns 1 if the lock is still held after. */
static int reentrant_drop(dlock_client *c, dlock_lock *l)
{
    int still_held;

    pthread_mutex_lock(&c->reentrant_mu);
    still_held = --l->holds > 0;
    pthread_mutex_unlock(&c->reentrant_mu);
    if (!still_held)
        reentrant_unlink(c, l);
    return still_held;
}

static void set_busy(dlock_client *c, dlock_lock *l, int64_t holder_ttl_ms,
                     int64_t started_us, dlock__msg *m)
{
    dlock__tstate *t = dlock__client_tstate(c);

    if (t != NULL)
        t->busy_ttl_ms = holder_ttl_ms;
    dlock__msg_set(m, DLOCK_BUSY, "lock %.64s on %s is held by another owner "
                   "for %lld more ms (waited %lld ms)", l->key,
                   c->ep.desc, (long long)holder_ttl_ms,
                   (long long)((dlock__now_us() - started_us) / 1000));
}

static dlock_err validate_opts(const dlock_acquire_opts *o, dlock__msg *m)
{
    if (o->ttl_ms < 0 || o->ttl_ms > (int64_t)1000 * 86400 * 365)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "lock TTL %lld ms is not 1 ms..1 year",
                              (long long)o->ttl_ms);
    if (o->policy != DLOCK_FAIL_CLOSED && o->policy != DLOCK_FAIL_OPEN)
        return dlock__msg_set(m, DLOCK_INVALID, "unknown failure policy %d",
                              (int)o->policy);
    return DLOCK_OK;
}

dlock_err dlock_acquire(dlock_client *c, const char *key,
                        const dlock_acquire_opts *opts, dlock_lock **out)
{
    dlock_acquire_opts defaults;
    dlock__msg *m;
    dlock_lock *l = NULL;
    int64_t started = dlock__now_us(), holder_ttl = 0;
    dlock_err err;

    if (out == NULL || c == NULL)
        return DLOCK_INVALID;
    *out = NULL;
    m = dlock__client_begin(c);
    if (opts == NULL) {
        dlock_acquire_opts_init(&defaults);
        opts = &defaults;
    }
    err = check_key(key, m);
    if (err == DLOCK_OK)
        err = validate_opts(opts, m);
    if (err != DLOCK_OK)
        return err;
    if (opts->reentrant) {
        *out = reenter(c, key);
        if (*out != NULL)
            return DLOCK_OK;
    }
    err = lock_new(c, key, &l, m);
    if (err == DLOCK_OK)
        err = dlock__token_new(l->token, m);
    if (err != DLOCK_OK)
        goto fail;
    l->ttl_ms = opts->ttl_ms > 0 ? opts->ttl_ms : DEFAULT_TTL_MS;
    l->on_lost = opts->on_lost;
    l->on_lost_arg = opts->on_lost_arg;
    l->watchdog = opts->watchdog;
    err = acquire_waiting(l, dlock__deadline_after_ms(opts->wait_ms),
                          opts->policy, &holder_ttl, m);
    if (err == DLOCK_BUSY) {
        set_busy(c, l, holder_ttl, started, m);
        goto fail;
    }
    if (err != DLOCK_OK && opts->policy == DLOCK_FAIL_OPEN &&
        redis_failed(err)) {
        /* The message keeps the reason, for the caller's log. */
        l->degraded = 1;
        l->fence = 0;
        *out = l;
        return DLOCK_OK;
    }
    if (err != DLOCK_OK)
        goto fail;
    if (opts->reentrant)
        reentrant_add(c, l);
    if (opts->watchdog)
        dlock__watchdog_watch(c->bg, l);
    dlock__msg_clear(m);
    *out = l;
    return DLOCK_OK;
fail:
    dlock_lock_free(l);
    return err;
}

int dlock__lock_mark_lost(dlock_lock *l)
{
    int was = 0;

    if (!atomic_compare_exchange_strong(&l->lost, &was, 1))
        return 0;
    atomic_store(&l->valid_until_us, 0);
    atomic_fetch_add(&l->client->n_locks_lost, 1);
    return 1;
}

/* Runs a compare-and-act script (release or extend) answering 1 or 0. */
static dlock_err token_script(dlock_lock *l, const dlock__script *s,
                              const char *arg, dlock__msg *m)
{
    const char *argv[] = {l->key, l->token, arg};
    redisReply *r;
    dlock_err err = dlock__client_eval(l->client, s, 1, 3, argv, NULL, &r, m);

    if (err != DLOCK_OK)
        return dlock__msg_wrap(m, err, "%s of lock %.64s", s->name, l->key);
    if (r->type != REDIS_REPLY_INTEGER) {
        err = dlock__msg_set(m, DLOCK_PROTOCOL, "%s of lock %.64s on %s: "
                             "expected an integer, got %s", s->name, l->key,
                             l->client->ep.desc, dlock__reply_type_name(r));
    } else if (r->integer != 1) {
        err = dlock__msg_set(m, DLOCK_LOST, "%s of lock %.64s on %s: the "
                             "key no longer holds our token (expired or "
                             "taken)", s->name, l->key, l->client->ep.desc);
    }
    freeReplyObject(r);
    return err;
}

dlock_err dlock__lock_renew(dlock_lock *l, int64_t ttl_ms, dlock__msg *m)
{
    char ttl[24];
    int64_t sent = dlock__now_us();
    dlock_err err;

    snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
    err = token_script(l, &extend_script, ttl, m);
    if (err == DLOCK_OK)
        set_valid_from(l, sent, ttl_ms);
    return err;
}

dlock_err dlock_release(dlock_lock *l)
{
    dlock_client *c;
    dlock__msg *m;
    dlock_err err = DLOCK_OK;

    if (l == NULL)
        return DLOCK_OK;
    c = l->client;
    m = dlock__client_begin(c);
    if (l->reentrant && reentrant_drop(c, l))
        return DLOCK_OK;
    if (l->watchdog)
        dlock__watchdog_unwatch(c->bg, l);
    if (!l->degraded) {
        err = token_script(l, &release_script, l->channel, m);
        if (err == DLOCK_OK && atomic_load(&l->lost))
            err = DLOCK_OK; /* it came back to us: released all the same */
    }
    dlock_lock_free(l);
    return err;
}

dlock_err dlock_extend(dlock_lock *l, int64_t ttl_ms)
{
    dlock__msg *m;
    dlock_err err;

    if (l == NULL)
        return DLOCK_INVALID;
    m = dlock__client_begin(l->client);
    if (ttl_ms < 0)
        return dlock__msg_set(m, DLOCK_INVALID, "extend by %lld ms",
                              (long long)ttl_ms);
    if (l->degraded || atomic_load(&l->lost))
        return dlock__msg_set(m, DLOCK_STATE, "extend of lock %.64s: it is "
                              "%s", l->key, l->degraded ? "degraded" : "lost");
    if (ttl_ms == 0)
        ttl_ms = l->ttl_ms;
    err = dlock__lock_renew(l, ttl_ms, m);
    if (err == DLOCK_LOST)
        dlock__lock_mark_lost(l);
    else if (err == DLOCK_OK)
        l->ttl_ms = ttl_ms;
    return err;
}

dlock_err dlock_lock_attach(dlock_client *c, const char *key,
                            const char *token, dlock_lock **out)
{
    dlock__msg *m;
    dlock_err err;

    if (out == NULL || c == NULL)
        return DLOCK_INVALID;
    *out = NULL;
    m = dlock__client_begin(c);
    err = check_key(key, m);
    if (err != DLOCK_OK)
        return err;
    if (token == NULL || !dlock__token_valid(token))
        return dlock__msg_set(m, DLOCK_INVALID, "a lock token is %d hex "
                              "digits", DLOCK_TOKEN_LEN);
    err = lock_new(c, key, out, m);
    if (err != DLOCK_OK)
        return err;
    for (int i = 0; i < DLOCK_TOKEN_LEN; i++) {
        char ch = token[i];

        (*out)->token[i] = (ch >= 'A' && ch <= 'F') ? (char)(ch + 32) : ch;
    }
    (*out)->token[DLOCK_TOKEN_LEN] = '\0';
    (*out)->ttl_ms = DEFAULT_TTL_MS;
    return DLOCK_OK;
}

int64_t dlock_lock_valid_ms(const dlock_lock *l)
{
    int64_t left;

    if (l->degraded)
        return INT64_MAX;
    if (atomic_load(&l->lost))
        return 0;
    left = atomic_load(&l->valid_until_us) - dlock__now_us();
    return left > 0 ? left / 1000 : 0;
}

uint64_t dlock_lock_fence(const dlock_lock *l)
{
    return l->fence;
}

int dlock_lock_lost(const dlock_lock *l)
{
    return atomic_load(&l->lost);
}

int dlock_lock_degraded(const dlock_lock *l)
{
    return l->degraded;
}

const char *dlock_lock_key(const dlock_lock *l)
{
    return l->key;
}

const char *dlock_lock_token(const dlock_lock *l)
{
    return l->token;
}

int dlock_lock_holds(const dlock_lock *l)
{
    return l->holds;
}

/* Parses the inspect script's {token, pttl, fence} into info. */
static dlock_err parse_inspect(const redisReply *r, dlock_lock_info *info)
{
    const redisReply *tok, *ttl, *fence;

    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3)
        return DLOCK_PROTOCOL;
    tok = r->element[0];
    ttl = r->element[1];
    fence = r->element[2];
    if (tok->type != REDIS_REPLY_STRING || ttl->type != REDIS_REPLY_INTEGER ||
        fence->type != REDIS_REPLY_STRING)
        return DLOCK_PROTOCOL;
    info->held = ttl->integer != -2;
    info->ttl_ms = ttl->integer >= 0 ? ttl->integer
                                     : (ttl->integer == -1 ? -1 : 0);
    info->last_fence = parse_fence(fence->str, fence->len);
    snprintf(info->token, sizeof(info->token), "%.*s",
             (int)(tok->len > DLOCK_TOKEN_LEN ? DLOCK_TOKEN_LEN : tok->len),
             tok->str);
    return DLOCK_OK;
}

dlock_err dlock_inspect(dlock_client *c, const char *key,
                        dlock_lock_info *info)
{
    dlock__msg *m;
    dlock_lock *l = NULL;
    redisReply *r;
    dlock_err err;

    if (c == NULL || info == NULL)
        return DLOCK_INVALID;
    memset(info, 0, sizeof(*info));
    m = dlock__client_begin(c);
    err = check_key(key, m);
    if (err == DLOCK_OK)
        err = lock_new(c, key, &l, m);
    if (err != DLOCK_OK)
        return err;
    {
        const char *argv[] = {l->key, l->fence_key};

        err = dlock__client_eval(c, &inspect_script, 2, 2, argv, NULL, &r, m);
    }
    if (err == DLOCK_OK) {
        err = parse_inspect(r, info);
        if (err != DLOCK_OK)
            dlock__msg_set(m, err, "inspecting lock %.64s on %s: expected "
                           "{token, pttl, fence}, got %s", key, c->ep.desc,
                           dlock__reply_type_name(r));
        freeReplyObject(r);
    }
    dlock_lock_free(l);
    return err;
}

dlock_err dlock_with(dlock_client *c, const char *key,
                     const dlock_acquire_opts *opts,
                     int (*fn)(dlock_lock *lock, void *arg), void *arg,
                     int *fn_result)
{
    dlock_lock *l;
    dlock_err err;
    int result;

    if (fn_result != NULL)
        *fn_result = 0;
    if (fn == NULL)
        return DLOCK_INVALID;
    err = dlock_acquire(c, key, opts, &l);
    if (err != DLOCK_OK)
        return err;
    result = fn(l, arg);
    if (fn_result != NULL)
        *fn_result = result;
    return dlock_release(l);
}

void dlock_guard_release(dlock_lock **slot)
{
    if (slot == NULL || *slot == NULL)
        return;
    dlock_release(*slot);
    *slot = NULL;
}
