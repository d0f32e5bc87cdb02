/*
 * pattern_common.h: what the pattern modules (pattern_*.c) share.
 *
 * Every pattern (idempotency, semaphore, leader election, rate limiting,
 * single-flight, read-write lock) keeps its state in a few Redis keys that
 * share one cluster hash slot, and decides each step in one Lua script.
 * This header gives them the same key names, the same reply checks and the
 * same way of waiting, and pattern_lease.h the same lease (validity,
 * loss, fences), so each module is only its scripts and its object.
 *
 * Key names: a pattern object of kind KIND named NAME keeps its keys under
 * "{KIND:NAME}" followed by a suffix ("", ":holders", ":fence", ...).
 * Every key of one object starts with the same '{', and the first '}'
 * after it is at the same place in each, so whatever NAME holds (even
 * braces) all of an object's keys hash to one slot.  Its wake-up channel
 * is "dlock:KIND:NAME".
 *
 * Waiting: every pattern that waits runs its attempts through
 * dlock__wait_run (wait.h), the core lock's wait loop, woken on the
 * object's channel with a fallback that follows the holder's remaining
 * time.  Scripts that wake everyone
 * (a finished single-flight, a released write lock) publish one message
 * per registered waiter, because a message wakes one waiter per client;
 * the Lua helper DLOCK__LUA_WAKE does that.
 */
#ifndef DLOCK_SRC_PATTERN_COMMON_H
#define DLOCK_SRC_PATTERN_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "client/client_internal.h"
#include "client/fence.h"
#include "client/wait.h"

/* Longest TTL, lease or wait accepted by the patterns: one year. */
#define DLOCK__PATTERN_MAX_MS ((int64_t)1000 * 86400 * 365)

/* Most messages one wake-everyone publishes (waiters beyond it poll). */
#define DLOCK__WAKE_MAX 256

/*
 * Lua fragments pasted into the scripts.  DLOCK__LUA_NOW_MS defines `now`
 * (server milliseconds) and `now_us` (server microseconds) from TIME.
 * DLOCK__LUA_FENCE defines next_fence(key, floor, ttl): max(last + 1,
 * server microseconds), the rule of the core lock's fences, stored and
 * returned as a decimal string, but only if it is above floor (the
 * client's fence floor, fence.h); else it writes nothing and returns nil,
 * and the script answers {2, now_str} (pattern_lease.h).  The counter
 * expires as the core lock's does: ttl (the grant's, in ms) plus 30 days
 * after its last grant (DLOCK__FENCE_KEEP_MS), when the clock is past it.
 * It works on decimal strings, so it stays exact past 2^53, where Lua's
 * doubles would stop counting.
 * DLOCK__LUA_WAKE defines wake(counter_key, channel): publishes
 * min(max(n, 1), DLOCK__WAKE_MAX) messages for the n waiters registered in
 * counter_key and deletes it; register_waiter(counter_key) counts one
 * more.  DLOCK__LUA_FENCE needs DLOCK__LUA_NOW_MS before it (it reads t
 * and call, redis.call looked up once).
 *
 * The patterns' scripts run on every semaphore permit, rate decision and
 * read lock, so the fragments are written for what redis-server spends on
 * them (docs/benchmarks.md, "Session 18: the patterns' scripts"): TIME's
 * strings and the arguments become numbers by arithmetic, which coerces
 * them, not through calls to tonumber, and each string once (a coercion
 * is a strtod, ~700 instructions); a number handed to a command goes
 * as string.format('%d') (Lua's own conversion prints through '%.14g');
 * no score is read back after it was written (Redis prints each double it
 * answers, and Lua parses it again: keep_zset below).
 */
#define DLOCK__LUA_NOW_MS                    \
    "local call = redis.call\n"              \
    "local t = call('TIME')\n"               \
    "local sec, usec = t[1] + 0, t[2] + 0\n" \
    "local now_us = sec * 1000000 + usec\n"  \
    "local now = sec * 1000 + math.floor(usec / 1000)\n"
#define DLOCK__LUA_FENCE                                      \
    DLOCK__FENCE_LUA_DECIMALS                                 \
    DLOCK__FENCE_LUA_INC                                      \
    "local now_str = " DLOCK__FENCE_LUA_NOW "\n"              \
    "local function next_fence(key, floor, ttl)\n"            \
    "  local fence, last = now_str, dec(call('GET', key))\n"  \
    "  if last and gt(last, fence) or last == fence then\n"   \
    "    fence = inc(last)\n"                                 \
    "  end\n"                                                 \
    "  if #fence <= 19 and gt(fence, floor) then\n"           \
    "    call('SET', key, fence, 'PX', string.format('%d',\n" \
    "         ttl + " DLOCK__FENCE_KEEP_LUA "))\n"            \
    "    return fence\n"                                      \
    "  end\n"                                                 \
    "end\n"
#define DLOCK__LUA_WAKE                                          \
    "local function wake(counter, channel)\n"                    \
    "  local n = tonumber(redis.call('GET', counter) or '0')\n"  \
    "  if n < 1 then n = 1 end\n"                                \
    "  if n > 256 then n = 256 end\n"                            \
    "  for i = 1, n do redis.call('PUBLISH', channel, '') end\n" \
    "  redis.call('DEL', counter)\n"                             \
    "end\n"                                                      \
    "local function register_waiter(counter)\n"                  \
    "  redis.call('INCR', counter)\n"                            \
    "  redis.call('PEXPIRE', counter, 60000)\n"                  \
    "end\n"

/*
 * Leases kept in a sorted set (semaphore holders, rwlock readers): each
 * member a token scored by its lease's end in server milliseconds.
 * DLOCK__LUA_KEEP_ZSET defines keep_zset(ttl), called right after a
 * member was scored now + ttl: it makes the set's (KEYS[1]) own TTL at
 * least ttl ms, so the set never expires before a live member's end, and
 * an idle set leaves nothing behind.  Every script that scores a member
 * calls it (in every version: earlier ones set the TTL to the latest
 * member's end), and nothing else shortens the TTL, so it is never below
 * the latest live member's end; it may outlast it after a release or a
 * shorter renewal, when the expired members are dropped by score anyway.
 * That costs a PTTL, where reading the latest member's score back cost a
 * ZRANGE and a double printed and parsed.  It needs DLOCK__LUA_NOW_MS
 * before it.  dlock__pattern_zset_extend is the
 * extend of such a lease: KEYS[1] the set, ARGV token and TTL ms; answers
 * 1 (re-scored to now + TTL) or 0 (not a member, or its lease had run out:
 * then removed).
 */
#define DLOCK__LUA_KEEP_ZSET                      \
    "local function keep_zset(ttl)\n"             \
    "  if call('PTTL', KEYS[1]) < ttl + 0 then\n" \
    "    call('PEXPIRE', KEYS[1], ttl)\n"         \
    "  end\n"                                     \
    "end\n"
extern const dlock__script dlock__pattern_zset_extend;

/*
 * Checks a pattern object's name: 1..DLOCK_KEY_MAX bytes.  what names the
 * object in the message ("semaphore", "idempotency key").  Returns
 * DLOCK_OK or DLOCK_INVALID.
 */
dlock_err dlock__pattern_check_name(const char *what, const char *name,
                                    dlock__msg *m);

/*
 * The opening of every pattern call that makes an object: DLOCK_INVALID
 * without a client or without somewhere to put the object (out_ok 0);
 * else begins the call's message (*m, as dlock__client_begin) and, when
 * what is not NULL, checks name as dlock__pattern_check_name does.
 */
dlock_err dlock__pattern_open(dlock_client *c, int out_ok, const char *what,
                              const char *name, dlock__msg **m);

/* "{kind:name}suffix", allocated; NULL when out of memory.  kind is one of
 * dlock__pattern_kinds (fence.h, which keeps the reserved names). */
char *dlock__pattern_key(const char *kind, const char *name,
                         const char *suffix);

/* "dlock:kind:name", allocated; NULL when out of memory. */
char *dlock__pattern_channel(const char *kind, const char *name);

/* Checks a TTL or lease in milliseconds: 1 ms .. one year.  Returns
 * DLOCK_OK or DLOCK_INVALID with "<what> <ms> ms is not 1 ms..1 year". */
dlock_err dlock__pattern_check_ms(const char *what, int64_t ms, dlock__msg *m);

/* 1 if r is an array of at least n elements whose first n are integers;
 * then out[0..n-1] holds them. */
int dlock__pattern_ints(const redisReply *r, size_t n, long long *out);

/* Fills m with DLOCK_PROTOCOL: "<what> on <server>: expected <expected>,
 * got <reply type>", and returns DLOCK_PROTOCOL. */
dlock_err dlock__pattern_bad_reply(dlock_client *c, const char *what,
                                   const char *expected, const redisReply *r,
                                   dlock__msg *m);

/*
 * Makes the calling thread's dlock_client_busy_ttl_ms answer ttl_ms (after
 * a DLOCK_BUSY).
 */
void dlock__pattern_set_busy_ttl(dlock_client *c, int64_t ttl_ms);

#endif /* DLOCK_SRC_PATTERN_COMMON_H */
