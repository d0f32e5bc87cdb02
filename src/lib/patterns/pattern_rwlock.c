/*
 * pattern_rwlock.c: many readers or one writer (see dlock/rwlock.h for
 * the keys).
 *
 * Every acquire first drops expired readers by the server's clock, then:
 *   read   our token among the readers (a retried call): renew; a writer
 *          holds it, or a waiting writer's intent exists: busy (counted as
 *          a waiter), hint = that key's PTTL; else join the readers.
 *   write  the writer key holds our token (retry): renew; another writer:
 *          busy; another writer's intent: busy (it queued first); readers
 *          present: busy, and when we are going to wait set our intent for
 *          a second so no new reader is admitted meanwhile; else take the
 *          writer key with a new fence and drop our intent.
 * Releases wake everyone they were blocking: the writer's release, and the
 * last reader's, publish once per registered waiter (DLOCK__LUA_WAKE).
 *
 * Invariant: after any script, either the writer key exists and no reader
 * has a running lease, or there is no writer key; a reader is admitted
 * only when there is no writer key, and a writer only when there are no
 * running readers.
 */
#include "dlock/rwlock.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/decimal.h"
#include "patterns/pattern_common.h"
#include "patterns/pattern_lease.h"

#define INTENT_MS "1000"
/* A waiting writer tries again at least this often, renewing its intent
 * well before INTENT_MS runs out. */
#define INTENT_RENEW_MS 300

/* KEYS: readers, writer, intent, fence, waiters.  ARGV: token, ttl,
 * waiting, the client's fence floor.  Reads and writes draw their fences
 * from one counter by the one rule (next_fence), so a read hold's fence is
 * above every write's granted before it and below every write's after
 * it, and never lower than a fence this client saw: a counter that
 * expired, or was lost or left behind, cannot make a reader report an
 * older generation.  A retried read (our token already a reader) answers
 * the counter as it stands, as a retried write does. */
static const dlock__script read_script = {
    "rwlock.read",
    DLOCK__LUA_NOW_MS DLOCK__LUA_FENCE DLOCK__LUA_WAKE DLOCK__LUA_KEEP_ZSET
    "call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))\n"
    "local expiry = string.format('%d', now + ARGV[2])\n"
    "local reader = call('ZSCORE', KEYS[1], ARGV[1])\n"
    "if not reader then\n"
    "  local blocked = call('PTTL', KEYS[2])\n"
    "  if blocked == -2 then blocked = call('PTTL', KEYS[3]) end\n"
    "  if blocked ~= -2 then\n"
    "    if ARGV[3] == '1' then register_waiter(KEYS[5]) end\n"
    "    return {0, blocked}\n"
    "  end\n"
    "end\n"
    "local fence = reader and call('GET', KEYS[4])\n"
    "if not fence then\n"
    "  fence = next_fence(KEYS[4], ARGV[4], ARGV[2])\n"
    "  if not fence then return {2, now_str} end\n"
    "end\n"
    "call('ZADD', KEYS[1], expiry, ARGV[1])\n"
    "keep_zset(ARGV[2])\n"
    "return {1, fence}\n",
    1,
};

static const dlock__script write_script = {
    "rwlock.write",
    DLOCK__LUA_NOW_MS DLOCK__LUA_FENCE DLOCK__LUA_WAKE
    "call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))\n"
    "local holder = call('GET', KEYS[2])\n"
    "if holder == ARGV[1] then\n"
    "  call('PEXPIRE', KEYS[2], ARGV[2])\n"
    "  return {1, call('GET', KEYS[4]) or '0'}\n"
    "end\n"
    "local function busy(hint)\n"
    "  if ARGV[3] == '1' then register_waiter(KEYS[5]) end\n"
    "  return {0, hint}\n"
    "end\n"
    "if holder then return busy(call('PTTL', KEYS[2])) end\n"
    "local intent = call('GET', KEYS[3])\n"
    "if intent and intent ~= ARGV[1] then\n"
    "  return busy(call('PTTL', KEYS[3]))\n"
    "end\n"
    "local first = call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')\n"
    "if first[2] then\n"
    "  if ARGV[3] == '1' then\n"
    "    call('SET', KEYS[3], ARGV[1], 'PX', " INTENT_MS ")\n"
    "  end\n"
    "  return busy(first[2] - now)\n"
    "end\n"
    "local fence = next_fence(KEYS[4], ARGV[4], ARGV[2])\n"
    "if not fence then return {2, now_str} end\n"
    "call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])\n"
    "if intent then call('DEL', KEYS[3]) end\n"
    "return {1, fence}\n",
    1,
};

/* KEYS: readers, waiters.  ARGV: token, channel. */
static const dlock__script read_release_script = {
    "rwlock.read_release",
    DLOCK__LUA_NOW_MS DLOCK__LUA_WAKE
    "local s = call('ZSCORE', KEYS[1], ARGV[1])\n"
    "if not s then return 0 end\n"
    "call('ZREM', KEYS[1], ARGV[1])\n"
    "call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))\n"
    "if call('ZCARD', KEYS[1]) == 0 then wake(KEYS[2], ARGV[2]) end\n"
    "if s + 0 <= now then return 0 end\n"
    "return 1\n",
    1,
};

/* KEYS: writer, waiters.  ARGV: token, channel. */
static const dlock__script write_release_script = {
    "rwlock.write_release",
    DLOCK__LUA_WAKE
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "redis.call('DEL', KEYS[1])\n"
    "wake(KEYS[2], ARGV[2])\n"
    "return 1\n",
    1,
};

/* KEYS: writer.  ARGV: token, ttl. */
static const dlock__script write_extend_script = {
    "rwlock.write_extend",
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "return 1\n",
    1,
};

enum { K_READERS, K_WRITER, K_INTENT, K_FENCE, K_WAITERS, NKEYS };

static const char *const key_suffixes[NKEYS] = {
    ":readers", ":writer", ":intent", ":fence", ":waiters",
};

struct dlock_rwlock {
    dlock_client *client;
    dlock_rwlock_mode mode;
    char *name;
    char *keys[NKEYS];
    char *channel;
    dlock__pattern_lease lease;
};

void dlock_rwlock_free(dlock_rwlock *l)
{
    if (l == NULL)
        return;
    dlock__pattern_lease_destroy(&l->lease);
    for (int i = 0; i < NKEYS; i++)
        dlock__free(l->keys[i]);
    dlock__free(l->name);
    dlock__free(l->channel);
    dlock__free(l);
}

static dlock_err rwlock_new(dlock_client *c, const char *name,
                            dlock_rwlock_mode mode, int64_t ttl_ms,
                            dlock_rwlock **out, dlock__msg *m)
{
    dlock_rwlock *l = dlock__calloc(1, sizeof(*l));
    dlock_err err;
    int ok;

    *out = NULL;
    if (l == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "allocating rwlock %.64s", name);
    l->client = c;
    l->mode = mode;
    l->name = dlock__strdup(name);
    l->channel = dlock__pattern_channel("rw", name);
    ok = l->name != NULL && l->channel != NULL;
    for (int i = 0; i < NKEYS && ok; i++) {
        l->keys[i] = dlock__pattern_key("rw", name, key_suffixes[i]);
        ok = l->keys[i] != NULL;
    }
    /* Made whatever happened above, so that free can destroy it. */
    err = dlock__pattern_lease_init(&l->lease, c, ttl_ms, "rwlock",
                                    ok ? l->name : "", m);
    if (!ok)
        err = dlock__msg_set(m, DLOCK_NOMEM, "allocating rwlock %.64s", name);
    if (err != DLOCK_OK) {
        dlock_rwlock_free(l);
        return err;
    }
    *out = l;
    return DLOCK_OK;
}

/* One acquire attempt (a dlock__wait_try_fn). */
static dlock_err acquire_once(void *arg, int waiting, int64_t *hint_ms,
                              dlock__msg *m)
{
    dlock_rwlock *l = arg;
    const dlock__script *s = l->mode == DLOCK_RWLOCK_WRITE ? &write_script
                                                           : &read_script;
    char ttl[24];
    const char *argv[NKEYS + 3];

    dlock__decimal_i64(ttl, dlock__pattern_lease_ttl_ms(&l->lease));
    for (int i = 0; i < NKEYS; i++)
        argv[i] = l->keys[i];
    argv[NKEYS] = l->lease.token;
    argv[NKEYS + 1] = ttl;
    argv[NKEYS + 2] = waiting ? "1" : "0";
    return dlock__pattern_lease_try(&l->lease, s, NKEYS, NKEYS + 3, argv,
                                    hint_ms, m);
}

static const char *mode_name(dlock_rwlock_mode mode)
{
    return mode == DLOCK_RWLOCK_WRITE ? "write" : "read";
}

dlock_err dlock_rwlock_acquire(dlock_client *c, const char *name,
                               dlock_rwlock_mode mode, int64_t ttl_ms,
                               int64_t wait_ms, dlock_rwlock **out)
{
    dlock_rwlock *l;
    dlock__msg *m;
    int64_t started = dlock__now_us(), hint = 0;
    dlock_err err;

    if (out != NULL)
        *out = NULL;
    err = dlock__pattern_open(c, out != NULL, "rwlock", name, &m);
    if (err == DLOCK_OK)
        err = dlock__pattern_check_ms("rwlock TTL", ttl_ms, m);
    if (err == DLOCK_OK && mode != DLOCK_RWLOCK_READ
        && mode != DLOCK_RWLOCK_WRITE)
        err = dlock__msg_set(m, DLOCK_INVALID,
                             "rwlock mode %d is neither "
                             "read nor write",
                             (int)mode);
    if (err == DLOCK_OK)
        err = rwlock_new(c, name, mode, ttl_ms, &l, m);
    if (err != DLOCK_OK)
        return err;
    err = dlock__pattern_lease_wait(
        &l->lease,
        &(const dlock__wait){
            .client = c,
            .channel = l->channel,
            .deadline_us = dlock__deadline_after_ms(wait_ms),
            .seed = l->lease.token,
            .poll_max_ms = l->mode == DLOCK_RWLOCK_WRITE ? INTENT_RENEW_MS : 0,
        },
        acquire_once, l, &hint, m);
    if (err == DLOCK_BUSY) {
        dlock__pattern_set_busy_ttl(c, hint);
        dlock__msg_set(m, DLOCK_BUSY,
                       "rwlock %.64s on %s: a %s lock is "
                       "blocked for %lld more ms (waited %lld ms)",
                       name, dlock_client_endpoint(c), mode_name(mode),
                       (long long)hint,
                       (long long)((dlock__now_us() - started) / 1000));
    } else if (err != DLOCK_OK) {
        dlock__msg_wrap(m, err, "%s-locking rwlock %.64s", mode_name(mode),
                        name);
    }
    if (err != DLOCK_OK) {
        dlock_rwlock_free(l);
        return err;
    }
    dlock__msg_clear(m);
    *out = l;
    return DLOCK_OK;
}

/* The key a release or extend acts on: the writer's, or the readers'. */
static const char *hold_key(const dlock_rwlock *l)
{
    return l->mode == DLOCK_RWLOCK_WRITE ? l->keys[K_WRITER]
                                         : l->keys[K_READERS];
}

dlock_err dlock_rwlock_release(dlock_rwlock *l)
{
    const char *argv[4];
    dlock_err err;

    if (l == NULL)
        return DLOCK_OK;
    argv[0] = hold_key(l);
    argv[1] = l->keys[K_WAITERS];
    argv[2] = l->lease.token;
    argv[3] = l->channel;
    err = dlock__pattern_lease_call(&l->lease,
                                    l->mode == DLOCK_RWLOCK_WRITE
                                        ? &write_release_script
                                        : &read_release_script,
                                    2, 4, argv, NULL, 0,
                                    dlock__client_begin(l->client));
    dlock_rwlock_free(l);
    return err;
}

dlock_err dlock_rwlock_extend(dlock_rwlock *l, int64_t ttl_ms)
{
    char ttl[24];
    const char *argv[3];

    if (l == NULL)
        return DLOCK_INVALID;
    argv[0] = hold_key(l);
    argv[1] = l->lease.token;
    argv[2] = ttl;
    return dlock__pattern_lease_extend(&l->lease, ttl_ms,
                                       l->mode == DLOCK_RWLOCK_WRITE
                                           ? &write_extend_script
                                           : &dlock__pattern_zset_extend,
                                       1, 3, argv, ttl,
                                       dlock__client_begin(l->client));
}

dlock_err dlock_rwlock_on_lost(dlock_rwlock *l, dlock_rwlock_lost_fn fn,
                               void *arg)
{
    if (l == NULL)
        return DLOCK_INVALID;
    return dlock__pattern_lease_on_lost(
        &l->lease,
        &(const dlock__pattern_callback){
            .kind = DLOCK__LOST_HOLD, .fn.hold = fn, .object = l, .arg = arg},
        dlock__client_begin(l->client));
}

dlock_rwlock_mode dlock_rwlock_mode_of(const dlock_rwlock *l)
{
    return l->mode;
}

int64_t dlock_rwlock_valid_ms(const dlock_rwlock *l)
{
    return dlock__pattern_lease_valid_ms(&l->lease);
}

uint64_t dlock_rwlock_fence(const dlock_rwlock *l)
{
    return dlock__pattern_lease_fence(&l->lease);
}

int dlock_rwlock_lost(const dlock_rwlock *l)
{
    return dlock__pattern_lease_lost(&l->lease);
}
