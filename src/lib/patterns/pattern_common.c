/*
 * pattern_common.c: names and replies for the pattern modules
 * (see pattern_common.h).  Waiting is wait.c's, shared with the core lock.
 */
#include "patterns/pattern_common.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

dlock_err dlock__pattern_check_name(const char *what, const char *name,
                                    dlock__msg *m)
{
    if (name == NULL || name[0] == '\0')
        return dlock__msg_set(m, DLOCK_INVALID, "the %s name is empty", what);
    if (strnlen(name, DLOCK_KEY_MAX + 1) > DLOCK_KEY_MAX)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "the %s name is longer than "
                              "%d bytes",
                              what, DLOCK_KEY_MAX);
    return DLOCK_OK;
}

const dlock__script dlock__pattern_zset_extend = {
    "pattern.zset_extend",
    DLOCK__LUA_NOW_MS DLOCK__LUA_KEEP_ZSET
    "local s = call('ZSCORE', KEYS[1], ARGV[1])\n"
    "if not s then return 0 end\n"
    "if s + 0 <= now then\n"
    "  call('ZREM', KEYS[1], ARGV[1])\n"
    "  return 0\n"
    "end\n"
    "call('ZADD', KEYS[1], string.format('%d', now + ARGV[2]), ARGV[1])\n"
    "keep_zset(ARGV[2])\n"
    "return 1\n",
    1,
};

dlock_err dlock__pattern_open(dlock_client *c, int out_ok, const char *what,
                              const char *name, dlock__msg **m)
{
    *m = NULL;
    if (c == NULL || !out_ok)
        return DLOCK_INVALID;
    *m = dlock__client_begin(c);
    return what != NULL ? dlock__pattern_check_name(what, name, *m) : DLOCK_OK;
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

dlock_err dlock__pattern_check_ms(const char *what, int64_t ms, dlock__msg *m)
{
    if (ms < 1 || ms > DLOCK__PATTERN_MAX_MS)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "%s %lld ms is not 1 ms..1 "
                              "year",
                              what, (long long)ms);
    return DLOCK_OK;
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
