/*
 * pattern_record.c: the claimable record behind idempotency and
 * single-flight (see pattern_record.h for its fields and states).
 *
 * Each step is one Lua script on the record's hash:
 *   claim     no record: create it in state "run" with our token and the
 *             lease as TTL (FIRST); "done": answer the stored value; "run"
 *             with our token (a retried claim): renew, FIRST again; "run"
 *             with another token: busy with its PTTL, and count us as a
 *             waiter when we are about to wait.
 *   complete  our token in "run": store the value, set the keep time and
 *             publish once per registered waiter (a message wakes one
 *             waiter per client, and every follower wants the value).
 *   abort     our token in "run": delete and publish likewise, so that one
 *             waiter claims at once and the rest see it busy again.
 *   extend    our token in "run": PEXPIRE.
 */
#include "patterns/pattern_record.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "patterns/pattern_common.h"
#include "base/decimal.h"
#include "base/token.h"

static const dlock__script claim_script = {
    "record.claim",
    "local s = redis.call('HMGET', KEYS[1], 'state', 'token', 'value')\n"
    "if not s[1] then\n"
    "  redis.call('HSET', KEYS[1], 'state', 'run', 'token', ARGV[1])\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  return {1}\n"
    "end\n"
    "if s[1] == 'done' then\n"
    "  return {2, s[3] or ''}\n"
    "end\n"
    "if s[2] == ARGV[1] then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  return {1}\n"
    "end\n"
    "if ARGV[3] == '1' then\n"
    "  redis.call('HINCRBY', KEYS[1], 'waiters', 1)\n"
    "end\n"
    "return {0, redis.call('PTTL', KEYS[1])}\n",
    1,
};

#define LUA_WAKE_RECORD_WAITERS         \
    "local n = tonumber(s[3] or '0')\n" \
    "if n < 1 then n = 1 end\n"         \
    "if n > 256 then n = 256 end\n"     \
    "for i = 1, n do redis.call('PUBLISH', ARGV[#ARGV], '') end\n"

static const dlock__script complete_script = {
    "record.complete",
    "local s = redis.call('HMGET', KEYS[1], 'state', 'token', 'waiters')\n"
    "if s[2] ~= ARGV[1] then return 0 end\n"
    "if s[1] == 'run' then\n"
    "  redis.call('HSET', KEYS[1], 'state', 'done', 'value', ARGV[2])\n"
    "  redis.call('HDEL', KEYS[1], 'waiters')\n"
    "  if tonumber(ARGV[3]) > 0 then\n"
    "    redis.call('PEXPIRE', KEYS[1], ARGV[3])\n"
    "  else\n"
    "    redis.call('PERSIST', KEYS[1])\n"
    "  end\n" LUA_WAKE_RECORD_WAITERS "end\n"
    "return 1\n",
    1,
};

static const dlock__script abort_script = {
    "record.abort",
    "local s = redis.call('HMGET', KEYS[1], 'state', 'token', 'waiters')\n"
    "if s[1] ~= 'run' or s[2] ~= ARGV[1] then return 0 end\n"
    "redis.call('DEL', KEYS[1])\n" LUA_WAKE_RECORD_WAITERS "return 1\n",
    1,
};

static const dlock__script extend_script = {
    "record.extend",
    "local s = redis.call('HMGET', KEYS[1], 'state', 'token')\n"
    "if s[1] ~= 'run' or s[2] ~= ARGV[1] then return 0 end\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "return 1\n",
    1,
};

dlock_err dlock__record_new(dlock_client *c, const char *kind,
                            const char *what, const char *name,
                            dlock__record **out, dlock__msg *m)
{
    dlock__record *r;
    dlock_err err = dlock__pattern_check_name(what, name, m);

    *out = NULL;
    if (err != DLOCK_OK)
        return err;
    r = dlock__calloc(1, sizeof(*r));
    if (r == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "allocating %s %.64s", what,
                              name);
    r->client = c;
    r->what = what;
    r->name = dlock__strdup(name);
    r->key = dlock__pattern_key(kind, name, "");
    r->channel = dlock__pattern_channel(kind, name);
    /* Made whatever happened above, so that free can destroy it. */
    err = dlock__pattern_lease_init(&r->lease, c, 1, what,
                                    r->name != NULL ? r->name : "", m);
    if (r->name == NULL || r->key == NULL || r->channel == NULL)
        err = dlock__msg_set(m, DLOCK_NOMEM, "allocating %s %.64s", what,
                             name);
    if (err != DLOCK_OK) {
        dlock__record_free(r);
        return err;
    }
    *out = r;
    return DLOCK_OK;
}

void dlock__record_free(dlock__record *r)
{
    if (r == NULL)
        return;
    dlock__pattern_lease_destroy(&r->lease);
    dlock__free(r->name);
    dlock__free(r->key);
    dlock__free(r->channel);
    dlock__free(r->value);
    dlock__free(r);
}

/* Keeps a copy of the stored value from a {2, value} answer. */
static dlock_err take_value(dlock__record *r, const redisReply *v,
                            dlock__msg *m)
{
    char *copy = dlock__malloc(v->len + 1);

    if (copy == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM,
                              "copying the %zu-byte result "
                              "of %s %.64s",
                              v->len, r->what, r->name);
    memcpy(copy, v->str, v->len);
    copy[v->len] = '\0';
    dlock__free(r->value);
    r->value = copy;
    r->len = v->len;
    r->status = DLOCK__RECORD_DONE;
    return DLOCK_OK;
}

/* Reads the claim script's {1} | {2, value} | {0, pttl}. */
static dlock_err read_claim(dlock__record *r, const redisReply *rep,
                            int64_t *hint_ms, dlock__msg *m)
{
    long long kind;

    if (!dlock__pattern_ints(rep, 1, &kind)
        || (kind != 1 && rep->elements != 2)
        || (kind == 2 && rep->element[1]->type != REDIS_REPLY_STRING)
        || (kind == 0 && rep->element[1]->type != REDIS_REPLY_INTEGER))
        return dlock__pattern_bad_reply(r->client, "claiming a record",
                                        "{1} | {2, value} | {0, pttl}", rep,
                                        m);
    if (kind == 1) {
        r->status = DLOCK__RECORD_FIRST;
        return DLOCK_OK;
    }
    if (kind == 2)
        return take_value(r, rep->element[1], m);
    *hint_ms = rep->element[1]->integer;
    return DLOCK_BUSY;
}

static dlock_err claim_once(void *arg, int waiting, int64_t *hint_ms,
                            dlock__msg *m)
{
    dlock__record *r = arg;
    char ttl[24];
    const char *argv[] = {r->key, r->lease.token, ttl, waiting ? "1" : "0"};
    const int64_t ttl_ms = dlock__pattern_lease_ttl_ms(&r->lease);
    dlock__lease_ticket t;
    redisReply *rep;
    dlock_err err;

    dlock__decimal_i64(ttl, ttl_ms);
    t = dlock__pattern_lease_begin(&r->lease, ttl_ms);
    err = dlock__client_eval(r->client, &claim_script, 1, 4, argv, NULL, &rep,
                             m);
    if (err != DLOCK_OK)
        return dlock__pattern_lease_end(&r->lease, &t, err);
    err = read_claim(r, rep, hint_ms, m);
    freeReplyObject(rep);
    /* Only a FIRST answer set our lease; DONE and busy set nothing. */
    dlock__pattern_lease_end(&r->lease, &t,
                             r->status == DLOCK__RECORD_FIRST
                                     || err != DLOCK_OK
                                 ? err
                                 : DLOCK_BUSY);
    return err;
}

dlock_err dlock__record_claim(dlock__record *r, int64_t ttl_ms,
                              int64_t wait_ms, dlock__msg *m)
{
    int64_t started = dlock__now_us(), hint = 0;
    dlock_err err = dlock__pattern_check_ms("lease", ttl_ms, m);

    if (err != DLOCK_OK)
        return err;
    if (r->status != DLOCK__RECORD_NONE)
        return dlock__msg_set(m, DLOCK_STATE, "%s %.64s was claimed already",
                              r->what, r->name);
    dlock__lease_set_ttl_ms(&r->lease.lease, ttl_ms);
    err = dlock__wait_run(
        &(const dlock__wait){
            .client = r->client,
            .channel = r->channel,
            .deadline_us = dlock__deadline_after_ms(wait_ms),
            .seed = r->lease.token,
        },
        claim_once, r, &hint, m);
    if (err == DLOCK_BUSY) {
        dlock__pattern_set_busy_ttl(r->client, hint);
        return dlock__msg_set(m, DLOCK_BUSY,
                              "%s %.64s on %s is in progress "
                              "by another caller for %lld more ms (waited "
                              "%lld ms)",
                              r->what, r->name,
                              dlock_client_endpoint(r->client),
                              (long long)hint,
                              (long long)((dlock__now_us() - started) / 1000));
    }
    if (err != DLOCK_OK)
        return dlock__msg_wrap(m, err, "claiming %s %.64s", r->what, r->name);
    return DLOCK_OK;
}

/* Refuses a step on a record that is not FIRST or already finished. */
static dlock_err check_first(const dlock__record *r, const char *step,
                             dlock__msg *m)
{
    if (r->status != DLOCK__RECORD_FIRST || r->finished)
        return dlock__msg_set(m, DLOCK_STATE,
                              "%s of %s %.64s: only the "
                              "first caller may %s, once",
                              step, r->what, r->name, step);
    return DLOCK_OK;
}

/* Makes the record DONE with a copy of the value we stored. */
static dlock_err keep_own_value(dlock__record *r, const void *value,
                                size_t len, dlock__msg *m)
{
    char *copy = dlock__malloc(len + 1);

    if (copy == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM,
                              "copying the %zu-byte result "
                              "of %s %.64s",
                              len, r->what, r->name);
    if (len > 0)
        memcpy(copy, value, len);
    copy[len] = '\0';
    dlock__free(r->value);
    r->value = copy;
    r->len = len;
    r->status = DLOCK__RECORD_DONE;
    return DLOCK_OK;
}

dlock_err dlock__record_complete(dlock__record *r, const void *value,
                                 size_t len, int64_t keep_ms, dlock__msg *m)
{
    char keep[24];
    const char *argv[] = {r->key, r->lease.token, value != NULL ? value : "",
                          keep, r->channel};
    size_t lens[5];
    dlock_err err = check_first(r, "complete", m);

    if (err != DLOCK_OK)
        return err;
    if ((value == NULL && len > 0) || len > DLOCK__RECORD_VALUE_MAX)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "result of %s %.64s: %zu "
                              "bytes at %p (at most %zu bytes)",
                              r->what, r->name, len, value,
                              DLOCK__RECORD_VALUE_MAX);
    if (keep_ms < 0 || keep_ms > DLOCK__PATTERN_MAX_MS)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "keep time %lld ms is not "
                              "0..1 year",
                              (long long)keep_ms);
    dlock__decimal_i64(keep, keep_ms);
    for (int i = 0; i < 5; i++)
        lens[i] = strlen(argv[i]);
    lens[2] = len;
    err = dlock__pattern_lease_call(&r->lease, &complete_script, 1, 5, argv,
                                    lens, 0, m);
    if (err == DLOCK_OK)
        err = keep_own_value(r, value, len, m);
    /* A LOST answer finishes the record too: it is no longer ours. */
    if (err == DLOCK_OK || err == DLOCK_LOST)
        r->finished = 1;
    return err;
}

dlock_err dlock__record_abort(dlock__record *r, dlock__msg *m)
{
    const char *argv[] = {r->key, r->lease.token, r->channel};
    dlock_err err = check_first(r, "abort", m);

    if (err != DLOCK_OK)
        return err;
    err = dlock__pattern_lease_call(&r->lease, &abort_script, 1, 3, argv, NULL,
                                    0, m);
    if (err == DLOCK_OK || err == DLOCK_LOST)
        r->finished = 1;
    return err;
}

dlock_err dlock__record_extend(dlock__record *r, int64_t ttl_ms, dlock__msg *m)
{
    char ttl[24];
    const char *argv[] = {r->key, r->lease.token, ttl};
    dlock_err err = check_first(r, "extend", m);

    if (err != DLOCK_OK)
        return err;
    return dlock__pattern_lease_extend(&r->lease, ttl_ms, &extend_script, 1, 3,
                                       argv, ttl, m);
}
