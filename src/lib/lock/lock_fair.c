/*
 * lock_fair.c: the fair lock's two scripts and the grant message (see
 * lock_fair.h for their arguments and answers, dlock/lock.h "Fair locks"
 * for the behaviour).
 *
 * The queue is a sorted set scored by arrival (the last score + 1), so
 * ZRANGE 0 0 is the first waiter; beside it a hash holds each entry's
 * deadline and confirm window in server milliseconds, and the number of
 * the waiter's try that wrote it ("deadline:confirm:try").  An entry past
 * its deadline belongs to a waiter that died or gave up and is dropped
 * when it reaches the head.  One within its deadline may belong to such
 * a waiter too (killed, or whose leave could not reach Redis), so a
 * fair try that finds the key free with another waiter at the head does
 * what a release would: it grants the key to that waiter for its confirm
 * window and tells it, and answers busy with that window.  A live head
 * holds the key at once; a dead one's grant lapses, and the next
 * waiter's try then takes the key in its turn: each such entry costs the
 * confirm window, never the rest of its deadline (without this, a free
 * key behind a dead head stayed unused until the head's deadline: in
 * tests/chaos's restart-aof with --fair, for seconds after a restart).
 * Both keys expire a minute after the latest deadline written, so an
 * abandoned queue does not stay.
 *
 * The hand-off is done by the release script itself: it grants the key to
 * the first live waiter with a new fence by the core's rule (the next
 * fence is max(last + 1, server microseconds), kept as decimal strings;
 * see lock.c) and a PX of the waiter's confirm window, then publishes
 * "try:fence:confirm" on the waiter's own channel, and wakes nobody
 * else.  If the grant lapses (a waiter that never confirms), the key is
 * free after the confirm window and the next waiter's fallback try takes
 * it: a queued waiter tries at least once per confirm window (at least
 * every second; lock.c, fair_poll_ms), so it comes for the key within
 * about two windows, never at the old holder's TTL.  An older release
 * nudged the next waiter with the window instead ("confirm" alone on its
 * channel, still understood: dlock__fair_nudge_parse), which woke a
 * second thread in the very microseconds the granted waiter needed the
 * CPUs, on every hand-off (20-40 us of the hand-off gap's median on 2
 * CPUs, docs/benchmarks.md), to cover a waiter that died.  Other nudges (a
 * plain holder's release, a grant that could not be made) are empty: the
 * key is free and the nudged waiter's try takes it.
 *
 * The waiter holds the lock when that message arrives, with no round trip
 * (dlock__fair_grant_check).  What it may claim:
 *   - The message names the try whose queue entry was granted.  The
 *     waiter keeps the number and send time of its latest try that came
 *     back busy with an entry written.  Only a grant of that very try is
 *     taken: that try was sent, then ran on the server and wrote the
 *     entry, then the release read the entry and set the key.  So the
 *     try's send time is no later than the grant, by causality alone, with
 *     no clock compared across machines.  A grant of an older try (a
 *     message that lagged behind a lapse and a re-queue) is not taken.
 *   - The key was set with PX confirm at the grant, so it lives at least
 *     until (try sent) + confirm on our clock, less the lease's drift
 *     allowance: the validity counts from the try's send time, never from
 *     the message's arrival, and is short by however long the waiter sat
 *     in the queue.  If that leaves nothing (queued longer than the
 *     confirm window), the message is not taken and the waiter confirms
 *     with a try, as before.
 *   - Redis expires the key by its own wall clock, so a forward step of
 *     it after the grant shortens the grant (lease.h).  The step is
 *     measured from the offset the client knew when the granted try was
 *     sent (dlock__fair_queued.base_hi_us), never from the one known when
 *     the message is taken, which may already include the step; if what
 *     is left is under DLOCK__FAIR_GRANT_MIN_LEFT_US the message is not
 *     taken either (lock.c, fair_take_grant).
 *   - The fence must be above the floor (fence.h) the granted try proves:
 *     the client's floor when it was sent and the server time in its
 *     reply, all seen before the grant, as an acquire's floor is what the
 *     client saw before sending it.  Server times that other threads of
 *     the client saw after the grant may be higher than its fence and
 *     prove nothing against it (checking them declined four grants in ten
 *     in a 16-thread loop).  A fence not above it: a try decides.
 * Then the full TTL is set by the first renewal, sent 200 us after the
 * grant was taken by the watchdog's renewer (lock.c, watchdog.c): the
 * "confirm".  Until it lands the lock is
 * valid for what is left of the confirm window; a waiter that never
 * confirms (paused, dead) loses the key when the window runs out, and the
 * next waiter's try takes the free key in its turn.
 */
#include "lock/lock_fair.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/fence.h"
#include "base/lease.h"

/* Lua: the core's fence rule (lock.c's acquire script, kept in step):
 * next_fence(floor, keep) returns the next fence as a decimal string,
 * max(last + 1, server microseconds) with last the larger of the counter
 * (KEYS[2]) and the legacy counter (KEYS[3], read only), and writes it
 * with PX keep; or nil, writing nothing, when that fence would not be
 * above floor (the server's clock is behind what the client saw).  now is
 * the server's microseconds, for the client's floor. */
#define NEXT_FENCE_LUA                                                        \
    DLOCK__FENCE_LUA_DECIMALS                                                 \
    DLOCK__FENCE_LUA_INC                                                      \
    "local call = redis.call\n"                                               \
    "local t = call('TIME')\n"                                                \
    "local now = " DLOCK__FENCE_LUA_NOW "\n"                                  \
    "local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)\n"                  \
    "local function next_fence(floor, keep)\n"                                \
    "  local last = dec(call('GET', KEYS[2]))\n"                              \
    "  local legacy = dec(redis.pcall('GET', KEYS[3]))\n"                     \
    "  if legacy and (not last or gt(legacy, last)) then last = legacy end\n" \
    "  local fence = now\n"                                                   \
    "  if last and not gt(now, last) then fence = inc(last) end\n"            \
    "  if #fence > 19 or not gt(fence, floor) then return nil end\n"          \
    "  call('SET', KEYS[2], fence, 'PX', keep)\n"                             \
    "  return fence\n"                                                        \
    "end\n"

/* Lua: leave(who) drops a queue entry; entry(who) reads its deadline,
 * confirm window and try number (0, 0, '0' if none). */
#define QUEUE_LUA                                                \
    "local function leave(who)\n"                                \
    "  call('ZREM', KEYS[4], who)\n"                             \
    "  call('HDEL', KEYS[5], who)\n"                             \
    "end\n"                                                      \
    "local function entry(who)\n"                                \
    "  local v = call('HGET', KEYS[5], who)\n"                   \
    "  if not v then return 0, 0, '0' end\n"                     \
    "  local d, c, s = string.match(v, '^(%d+):(%d+):(%d+)$')\n" \
    "  return tonumber(d) or 0, tonumber(c) or 0, s or '0'\n"    \
    "end\n"

/* An acquire that finds the key free and the queue empty takes the key
 * without leaving the queue it is not in: two calls fewer, 2.8 % of the
 * fair pair's redis-server instructions (docs/benchmarks.md, "Session
 * 19"). */
const dlock__script dlock__fair_acquire_script = {
    "fair.acquire",
    NEXT_FENCE_LUA QUEUE_LUA
    "local me = ARGV[1]\n"
    "local holder = call('GET', KEYS[1])\n"
    "if holder == me then\n"
    "  call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  leave(me)\n"
    "  return '1 ' .. (call('GET', KEYS[2]) or '0') .. ' ' .. now\n"
    "end\n"
    "if not holder then\n"
    "  local head = call('ZRANGE', KEYS[4], 0, 0)[1]\n"
    "  while head and head ~= me and entry(head) < now_ms do\n"
    "    leave(head)\n"
    "    head = call('ZRANGE', KEYS[4], 0, 0)[1]\n"
    "  end\n"
    "  if not head or head == me then\n"
    "    local fence = next_fence(ARGV[3], ARGV[4])\n"
    "    if not fence then return '2 ' .. now end\n"
    "    call('SET', KEYS[1], me, 'PX', ARGV[2])\n"
    "    if head then leave(me) end\n"
    "    return '1 ' .. fence .. ' ' .. now\n"
    "  end\n"
    "  local _, confirm, try = entry(head)\n"
    "  local fence = confirm > 0 and next_fence(ARGV[3], ARGV[4])\n"
    "  if fence then\n"
    "    leave(head)\n"
    "    call('SET', KEYS[1], head, 'PX', confirm)\n"
    "    call('PUBLISH', ARGV[9] .. head,\n"
    "               try .. ':' .. fence .. ':' .. confirm)\n"
    "    holder = head\n"
    "  end\n"
    "end\n"
    "if ARGV[5] == '1' then\n"
    "  if not call('ZSCORE', KEYS[4], me) then\n"
    "    local last = call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')\n"
    "    local seq = last[2] and last[2] + 1 or 1\n"
    "    call('ZADD', KEYS[4], seq, me)\n"
    "  end\n"
    "  local deadline = string.format('%d', now_ms + ARGV[6])\n"
    "  call('HSET', KEYS[5], me,\n"
    "             deadline .. ':' .. ARGV[7] .. ':' .. ARGV[8])\n"
    "  local keep = ARGV[6] + 60000\n"
    "  if call('PTTL', KEYS[4]) < keep then\n"
    "    call('PEXPIRE', KEYS[4], keep)\n"
    "    call('PEXPIRE', KEYS[5], keep)\n"
    "  end\n"
    "end\n"
    "if holder then\n"
    "  return {0, call('PTTL', KEYS[1]), now}\n"
    "end\n"
    "return {0, 0, now}\n",
    1,
};

/* A grant whose fence cannot be shown above the releaser's floor is not
 * made: the key is left free and the plain channel told, so the waiters'
 * own acquires (each with its own floor) decide. */
const dlock__script dlock__fair_release_script = {
    "fair.release",
    NEXT_FENCE_LUA QUEUE_LUA
    "local mine = call('GET', KEYS[1]) == ARGV[1]\n"
    "leave(ARGV[1])\n"
    "if not mine then\n"
    "  return 0\n"
    "end\n"
    "call('DEL', KEYS[1])\n"
    "local head = call('ZRANGE', KEYS[4], 0, 0)[1]\n"
    "while head do\n"
    "  local deadline, confirm, try = entry(head)\n"
    "  if deadline >= now_ms and confirm > 0 then\n"
    "    local fence = next_fence(ARGV[4], ARGV[5])\n"
    "    if not fence then break end\n"
    "    leave(head)\n"
    "    call('SET', KEYS[1], head, 'PX', confirm)\n"
    "    call('PUBLISH', ARGV[3] .. head,\n"
    "                try .. ':' .. fence .. ':' .. confirm)\n"
    "    return 1\n"
    "  end\n"
    "  leave(head)\n"
    "  head = call('ZRANGE', KEYS[4], 0, 0)[1]\n"
    "end\n"
    "if head then call('PUBLISH', ARGV[3] .. head, '') end\n"
    "call('PUBLISH', ARGV[2], '')\n"
    "return 1\n",
    1,
};

/* Reads one decimal field of a grant message ending at stop; 0 if it is
 * empty, too long or not digits. */
static int grant_field(const char **p, const char *end, char stop,
                       uint64_t *out)
{
    char digits[21];
    size_t n = 0;

    while (*p < end && **p != stop) {
        if (**p < '0' || **p > '9' || n + 1 >= sizeof(digits))
            return 0;
        digits[n++] = *(*p)++;
    }
    if (n == 0)
        return 0;
    digits[n] = '\0';
    errno = 0;
    *out = strtoull(digits, NULL, 10);
    if (errno != 0)
        return 0;
    if (*p < end)
        (*p)++; /* the separator */
    return 1;
}

int dlock__fair_grant_parse(const char *msg, size_t len, dlock__fair_grant *g)
{
    const char *p = msg, *end = msg + len;
    uint64_t confirm = 0;

    memset(g, 0, sizeof(*g));
    if (!grant_field(&p, end, ':', &g->try_seq)
        || !grant_field(&p, end, ':', &g->fence)
        || !grant_field(&p, end, '\0', &confirm) || p != end
        || confirm > INT64_MAX / 1000 || g->fence == 0)
        return 0;
    g->confirm_ms = (int64_t)confirm;
    return 1;
}

int dlock__fair_nudge_parse(const char *msg, size_t len, int64_t *ttl_ms)
{
    const char *p = msg, *end = msg + len;
    uint64_t ms = 0;

    *ttl_ms = 0;
    if (!grant_field(&p, end, '\0', &ms) || p != end || ms > INT64_MAX / 1000)
        return 0;
    *ttl_ms = (int64_t)ms;
    return 1;
}

int dlock__fair_grant_check(const dlock__fair_grant *g,
                            const dlock__fair_queued *q, int64_t now_us,
                            int64_t *until_us)
{
    *until_us = 0;
    if (q->try_seq == 0 || g->try_seq != q->try_seq || g->fence <= q->floor
        || g->confirm_ms <= 0)
        return 0;
    *until_us = dlock__lease_until_of(q->sent_us, g->confirm_ms);
    return *until_us > now_us + DLOCK__FAIR_GRANT_MIN_LEFT_US;
}
