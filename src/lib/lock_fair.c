/*
 * lock_fair.c: the fair lock's two scripts (see lock_fair.h for their
 * arguments and answers, dlock/lock.h "Fair locks" for the behaviour).
 *
 * The queue is a sorted set scored by arrival (the last score + 1), so
 * ZRANGE 0 0 is the first waiter; beside it a hash holds each entry's
 * deadline and confirm window in server milliseconds ("deadline:confirm").
 * An entry past its deadline belongs to a waiter that died or gave up and
 * is dropped when it reaches the head.  Both keys expire a minute after
 * the latest deadline written, so an abandoned queue does not stay.
 *
 * The hand-off is done by the release script itself: it grants the key to
 * the first live waiter with a new fence by the core's rule (the next
 * fence is max(last + 1, server microseconds), kept as decimal strings;
 * see lock.c) and a PX of the waiter's confirm window, then publishes on
 * the waiter's own channel.  Only the waiter's confirming acquire sets
 * the full TTL, so a waiter that cannot confirm holds the key for the
 * short window only.  The release also nudges the next waiter (an empty
 * message on its channel): its try then learns the confirm window as the
 * holder's TTL, so if the grant lapses it comes for the key at once
 * rather than at the old holder's TTL.
 */
#include "lock_fair.h"

/* A Lua function: advances the fence counter in KEYS[2] by the core rule
 * and returns the new fence as a string. */
#define NEXT_FENCE_LUA \
    "local function next_fence()\n" \
    "  local t = redis.call('TIME')\n" \
    "  local now = t[1] .. string.format('%06d', tonumber(t[2]))\n" \
    "  local last = redis.call('GET', KEYS[2])\n" \
    "  if not last or #now > #last or (#now == #last and now > last) then\n" \
    "    redis.call('SET', KEYS[2], now)\n" \
    "  else\n" \
    "    redis.call('INCR', KEYS[2])\n" \
    "  end\n" \
    "  return redis.call('GET', KEYS[2])\n" \
    "end\n"

/* Lua: now_ms (server time), and leave(token) that drops an entry. */
#define QUEUE_LUA \
    "local t0 = redis.call('TIME')\n" \
    "local now_ms = tonumber(t0[1]) * 1000 + " \
    "math.floor(tonumber(t0[2]) / 1000)\n" \
    "local function leave(who)\n" \
    "  redis.call('ZREM', KEYS[3], who)\n" \
    "  redis.call('HDEL', KEYS[4], who)\n" \
    "end\n" \
    "local function entry(who)\n" \
    "  local v = redis.call('HGET', KEYS[4], who)\n" \
    "  if not v then return 0, 0 end\n" \
    "  local d, c = string.match(v, '^(%d+):(%d+)$')\n" \
    "  return tonumber(d) or 0, tonumber(c) or 0\n" \
    "end\n"

const dlock__script dlock__fair_acquire_script = {
    "fair.acquire",
    NEXT_FENCE_LUA QUEUE_LUA
    "local me = ARGV[1]\n"
    "local holder = redis.call('GET', KEYS[1])\n"
    "if holder == me then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  leave(me)\n"
    "  return {1, redis.call('GET', KEYS[2]) or '0'}\n"
    "end\n"
    "if not holder then\n"
    "  local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]\n"
    "  while head and head ~= me and entry(head) < now_ms do\n"
    "    leave(head)\n"
    "    head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]\n"
    "  end\n"
    "  if not head or head == me then\n"
    "    local fence = next_fence()\n"
    "    redis.call('SET', KEYS[1], me, 'PX', ARGV[2])\n"
    "    leave(me)\n"
    "    return {1, fence}\n"
    "  end\n"
    "end\n"
    "if ARGV[3] == '1' then\n"
    "  if not redis.call('ZSCORE', KEYS[3], me) then\n"
    "    local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')\n"
    "    local seq = last[2] and tonumber(last[2]) + 1 or 1\n"
    "    redis.call('ZADD', KEYS[3], seq, me)\n"
    "  end\n"
    "  local deadline = now_ms + tonumber(ARGV[4])\n"
    "  redis.call('HSET', KEYS[4], me, deadline .. ':' .. ARGV[5])\n"
    "  local keep = tonumber(ARGV[4]) + 60000\n"
    "  if redis.call('PTTL', KEYS[3]) < keep then\n"
    "    redis.call('PEXPIRE', KEYS[3], keep)\n"
    "    redis.call('PEXPIRE', KEYS[4], keep)\n"
    "  end\n"
    "end\n"
    "if holder then\n"
    "  return {0, redis.call('PTTL', KEYS[1])}\n"
    "end\n"
    "return {0, 0}\n",
    1,
};

const dlock__script dlock__fair_release_script = {
    "fair.release",
    NEXT_FENCE_LUA QUEUE_LUA
    "local mine = redis.call('GET', KEYS[1]) == ARGV[1]\n"
    "leave(ARGV[1])\n"
    "if not mine then\n"
    "  return 0\n"
    "end\n"
    "redis.call('DEL', KEYS[1])\n"
    "local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]\n"
    "while head do\n"
    "  local deadline, confirm = entry(head)\n"
    "  leave(head)\n"
    "  if deadline >= now_ms and confirm > 0 then\n"
    "    local fence = next_fence()\n"
    "    redis.call('SET', KEYS[1], head, 'PX', confirm)\n"
    "    redis.call('PUBLISH', ARGV[3] .. head, fence)\n"
    "    local nxt = redis.call('ZRANGE', KEYS[3], 0, 0)[1]\n"
    "    if nxt then redis.call('PUBLISH', ARGV[3] .. nxt, '') end\n"
    "    return 1\n"
    "  end\n"
    "  head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]\n"
    "end\n"
    "redis.call('PUBLISH', ARGV[2], '')\n"
    "return 1\n",
    1,
};
