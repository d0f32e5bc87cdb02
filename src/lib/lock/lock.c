/*
 * lock.c: acquire, release, extend, waiting and fencing (see dlock/lock.h).
 *
 * Each decision is one Lua script, so it is atomic on the server:
 *   acquire  if the key holds our token (a retried call that had succeeded)
 *            it is ours; if it holds another, answer busy with its PTTL;
 *            else set it with PX ttl and advance the fence to
 *            max(last + 1, server microseconds), in the same step, but
 *            only if that is above the client's floor (fence.h): a fence
 *            is never granted that this client cannot show is higher than
 *            every fence and server time it has seen.
 *   release  delete only if the key still holds our token, then publish on
 *            the key's channel so one waiter per client wakes at once
 *            (the payload names the release: its grant's fence).  A
 *            waiter of the releaser's own client is woken by the
 *            releasing thread when the reply comes, not by the message
 *            (notify.h, dlock__notify_released).
 *   extend   PEXPIRE only if the key still holds our token.
 * Scripts that are retried after a dead connection (see client.c) give the
 * same effect when run twice: acquire by the token check, extend trivially,
 * release by answering "not held" (reported DLOCK_LOST, the safe side).
 *
 * Fences are decimal strings inside the scripts so they stay exact to 2^63.
 *
 * Validity is the lease's (lease.h): from the moment each request left,
 * on CLOCK_BOOTTIME, minus a drift allowance, ordered between an extend and
 * a racing renewal, and shrunk when a round trip shows the server's clock
 * stepped forward.  Once it runs out the lock is LOST, whoever notices
 * first: the watchdog's timer, or dlock_extend, dlock_release or a
 * reentrant acquire on the owner's thread.  Whoever marks it runs on_lost,
 * once.  Nothing is decided locally while validity is not known positive:
 * a reentrant re-entry or inner release of a lock whose validity ran out
 * reports the loss (and re-entry takes the key afresh through Redis).
 *
 * Waiting: a busy acquire waits in the library's one wait loop (wait.h):
 * woken by the key's release channel, with a fallback timer that follows
 * the holder's remaining TTL; an unbounded wait rides out transport errors
 * unless the acquire fails open.
 */
#include "lock/lock_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/decimal.h"
#include "client/fence.h"
#include "client/notify.h"
#include "lock/lock_fair.h"
#include "deploy/redlock.h"
#include "transport/replwait.h"
#include "base/token.h"
#include "client/wait.h"
#include "lock/watchdog.h"

#define DEFAULT_TTL_MS 30000
#define CHANNEL_PREFIX "dlock:released:"
/* Fair locks: a queue entry lives at most this long past the waiter's
 * last try (its fallback tries come at least three times as often), and a
 * grant waits this long at most for the waiter to confirm it. */
#define FAIR_ENTRY_MAX_MS 30000
#define FAIR_CONFIRM_MS 2000
/* A queued fair waiter tries at least once per confirm window, and at
 * most once a second (fair_poll_ms). */
#define FAIR_POLL_MIN_MS 1000
/* The acquire script's busy hint for a free key with fair waiters. */
#define FAIR_QUEUED_HINT (-2)

/*
 * Fences are handled as decimal strings, never as Lua numbers: Lua's
 * numbers are doubles, exact only to 2^53, and a fence must stay exact to
 * 2^63.  Strings without leading zeros compare by length and then digit by
 * digit (gt), and one is added digit-wise where the clock is behind the
 * counter.
 *
 * KEYS: the lock, its fence counter, the legacy counter (read only; see
 * fence.h), the fair queue and its entries (read only; lock_fair.h).
 * ARGV: token, ttl ms, the client's floor, the counter's TTL ms.
 * The next fence is max(last + 1, server microseconds), last being the
 * counter, or the legacy counter while the counter is absent (never
 * written, or expired 30 days after its last grant) or unreadable: every
 * script that writes the counter (this one, the fair ones, and those of
 * every version since the counter moved) writes a fence above the legacy
 * counter it read, and no such version writes the legacy counter, so
 * while the counter exists it is above the legacy one and the larger of
 * the two is the counter (fence.h; only a client of a version before the
 * move, still granting beside this one, could raise the legacy counter,
 * and such a client never read the new counter either, so fences were
 * never ordered across the two versions).  It is granted only if it is
 * above the floor
 * (the highest fence or server time the client has seen), else nothing is
 * written and the answer is "2 now": the server's clock is behind what
 * this client saw and its counter cannot show a higher number.  Every
 * answer carries now, the server's microseconds, for the floor.  A grant
 * is "1 fence now", a busy key {0, pttl, now}: answers in words where the
 * script builds them from strings, for a table costs redis-server about
 * 5,000 instructions to build and answer (acquire_words).
 *
 * A free key with live fair waiters queued (one of the first 16 entries
 * before its deadline) is not taken: a plain acquire does not jump the
 * fair queue.  The answer is then busy with hint FAIR_QUEUED_HINT (-2, a
 * PTTL no held key has), which the caller reports as such.  Redis keeps
 * no empty sorted set, so EXISTS says whether there is a queue at all,
 * for a third of a ZRANGE's cost on the common path (no fair waiter).
 *
 * The script is the one-client pair's server cost (docs/benchmarks.md,
 * "Session 12"): each redis.call costs 0.3-0.9 us, and so does a
 * string.format, so the common path makes only the calls it needs.  It
 * reads and takes the key in one call, SET NX GET (Redis 7.0), and when
 * the grant is then refused (fair waiters, the floor, or a counter that
 * cannot be read) it deletes the key again before it answers: the script
 * runs atomically, so no one sees the key between, and a refused acquire
 * writes nothing, as before.  Every read after the take is a pcall, so an
 * error answers the caller only once the key is gone again (a script's
 * writes are not undone by its error).  Before 7.0, SET refuses NX with
 * GET as a syntax error, before it writes; the script then reads the key
 * with GET and sets it last, one call more.  Likewise the counter: on 7.0
 * it is set to now at once with SET GET, which answers the last fence,
 * and set again only when the next fence is not now (the clock at or
 * behind the counter); a grant refused by the floor puts back what it
 * held (its TTL only ever moves later) or deletes it if it held nothing.
 *
 * Measured in instructions of redis-server per pair under callgrind
 * (docs/benchmarks.md, "Session 15"), the scripts avoid what costs
 * hundreds of them on every call: redis.call and redis.pcall are looked
 * up once into locals, and a pcall's answer is told from an error by its
 * err field (x.err is nil for a string, whose metatable indexes the string
 * library, and x and ... skips false), not with type().  The digit-wise
 * increment is written where it is needed, not as a function: a closure
 * made on every call for a branch that runs only when the clock is behind
 * the counter cost a few hundred instructions a grant ("Session 18").
 */
static const dlock__script acquire_script = {
    "acquire",
    DLOCK__FENCE_LUA_DECIMALS
    "local call, pcall = redis.call, redis.pcall\n"
    "local t = call('TIME')\n"
    "local now = " DLOCK__FENCE_LUA_NOW "\n"
    "local taken = true\n"
    "local holder = pcall('SET', KEYS[1], ARGV[1], 'NX', 'PX', "
    "ARGV[2], 'GET')\n"
    "if holder and holder.err then\n"
    "  taken = false\n"
    "  holder = call('GET', KEYS[1])\n"
    "end\n"
    "if holder == ARGV[1] then\n"
    "  call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  return '1 ' .. (call('GET', KEYS[2]) or '0') .. ' ' .. now\n"
    "end\n"
    "if holder then\n"
    "  return {0, call('PTTL', KEYS[1]), now}\n"
    "end\n"
    "local refused, fence\n"
    "if call('EXISTS', KEYS[4]) == 1 then\n"
    "  local now_ms = tonumber(t[1]) * 1000 + "
    "math.floor(tonumber(t[2]) / 1000)\n"
    "  local queued = pcall('ZRANGE', KEYS[4], 0, 15)\n"
    "  if queued.err then\n"
    "    refused = queued\n"
    "  else\n"
    "    for _, who in ipairs(queued) do\n"
    "      local v = pcall('HGET', KEYS[5], who)\n"
    "      if v and v.err then refused = v break end\n"
    "      if (tonumber(string.match(v or '', '^(%d+)')) or 0) >= now_ms "
    "then\n"
    "        refused = '0 -2 ' .. now\n"
    "        break\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "local counter, wrote\n"
    "if not refused then\n"
    "  if taken then\n"
    "    counter = pcall('SET', KEYS[2], now, 'PX', ARGV[4], 'GET')\n"
    "    wrote = not (counter and counter.err)\n"
    "  else\n"
    "    counter = pcall('GET', KEYS[2])\n"
    "  end\n"
    "  if counter and counter.err then\n"
    "    refused = counter\n"
    "  else\n"
    "    local last = dec(counter) or dec(pcall('GET', KEYS[3]))\n"
    "    fence = now\n"
    "    if last and not gt(now, last) then\n"
    "      local i = #last\n"
    "      while i > 0 and last:sub(i, i) == '9' do i = i - 1 end\n"
    "      if i == 0 then\n"
    "        fence = '1' .. string.rep('0', #last)\n"
    "      else\n"
    "        fence = last:sub(1, i - 1) .. string.char(last:byte(i) + 1) ..\n"
    "                string.rep('0', #last - i)\n"
    "      end\n"
    "    end\n"
    "    if #fence > 19 or not gt(fence, ARGV[3]) then refused = '2 ' .. now "
    "end\n"
    "  end\n"
    "end\n"
    "if refused then\n"
    "  if taken then call('DEL', KEYS[1]) end\n"
    "  if wrote and counter then\n"
    "    call('SET', KEYS[2], counter, 'PX', ARGV[4])\n"
    "  elseif wrote then\n"
    "    call('DEL', KEYS[2])\n"
    "  end\n"
    "  return refused\n"
    "end\n"
    "if fence ~= now or not wrote then\n"
    "  call('SET', KEYS[2], fence, 'PX', ARGV[4])\n"
    "end\n"
    "if not taken then call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end\n"
    "return '1 ' .. fence .. ' ' .. now\n",
    1,
};

/* KEYS: the lock, the fair queue (read only).  ARGV: token, the released
 * channel, and the release's id (its grant's fence, or "" or none), the
 * message's payload: the releaser's client tells by it that it woke its
 * own waiter already (release_once).  The fair granted-channel prefix is
 * in the text, not an argument: an argument costs redis-server about
 * 1,000 instructions a release (docs/benchmarks.md, "Session 18").
 * A plain holder's release also nudges the first fair waiter queued
 * behind it (an empty message on its own channel), whose try then takes
 * the free key; EXISTS first, as in acquire, since most keys have no
 * queue. */
static const dlock__script release_script = {
    "release",
    "local call = redis.call\n"
    "if call('GET', KEYS[1]) == ARGV[1] then\n"
    "  call('DEL', KEYS[1])\n"
    "  call('PUBLISH', ARGV[2], ARGV[3] or '')\n"
    "  if call('EXISTS', KEYS[2]) == 1 then\n"
    "    local head = call('ZRANGE', KEYS[2], 0, 0)[1]\n"
    "    if head then call('PUBLISH', '" DLOCK__FAIR_GRANT_PREFIX
    "' .. head, '') end\n"
    "  end\n"
    "  return 1\n"
    "end\n"
    "return 0\n",
    1,
};

/* Answers "1 seconds microseconds" of the server's TIME (for the clock
 * step check, lease.h) or 0: words, not a table, for a table costs
 * redis-server about 5,000 of a renewal's 39,000 instructions (as the
 * acquire's answers, acquire_words). */
static const dlock__script extend_script = {
    "extend",
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  local t = redis.call('TIME')\n"
    "  return '1 ' .. t[1] .. ' ' .. t[2]\n"
    "end\n"
    "return 0\n",
    1,
};

/* KEYS: the lock, its fence counter, the legacy counter, the fair queue
 * and its entries.  Also answers the queue's length and the first entry's
 * deadline in ms from now (-1 without waiters). */
static const dlock__script inspect_script = {
    "inspect",
    DLOCK__FENCE_LUA_DECIMALS
    "local last = dec(redis.call('GET', KEYS[2])) or '0'\n"
    "local legacy = dec(redis.pcall('GET', KEYS[3]))\n"
    "if legacy and gt(legacy, last) then last = legacy end\n"
    "local n = redis.call('ZCARD', KEYS[4])\n"
    "local left = -1\n"
    "local head = redis.call('ZRANGE', KEYS[4], 0, 0)[1]\n"
    "if head then\n"
    "  local v = redis.call('HGET', KEYS[5], head) or '0:0'\n"
    "  local t = redis.call('TIME')\n"
    "  local now_ms = tonumber(t[1]) * 1000 + "
    "math.floor(tonumber(t[2]) / 1000)\n"
    "  left = math.max(0, (tonumber(string.match(v, '^(%d+)')) or 0) - "
    "now_ms)\n"
    "end\n"
    "return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]),\n"
    "        last, n, left}\n",
    1,
};

static const dlock__script *const core_scripts[] = {
    &acquire_script,
    &release_script,
    &extend_script,
    &inspect_script,
    &dlock__fair_acquire_script,
    &dlock__fair_release_script,
    NULL,
};

/* The lock object.  key, fence_key, channel and token are written once
 * before the lock is published to the watchdog, read-only after; key
 * owns one block that holds the six names (dlock__fence_lock_names).  The
 * lease is thread-safe.  holds and rnext belong to the registry's mutex. */
struct dlock_lock {
    dlock_client *client;
    char *key;
    char *fence_key;
    char *legacy_fence_key; /* read only, see fence.h */
    char *channel;
    char *queue_key; /* fair locks: the waiters' queue, entries */
    char *waiters_key;
    char grant_channel[sizeof(DLOCK__FAIR_GRANT_PREFIX) + DLOCK_TOKEN_LEN];
    char token[DLOCK_TOKEN_LEN + 1];
    uint64_t fence;
    int64_t fence_gap_us; /* after DLOCK_UNPROVEN: the server's clock
                               * is this far behind the client's floor */
    dlock__lease lease;
    int degraded;

    int reentrant;
    pthread_t owner;
    int holds;
    struct dlock_lock *rnext;

    dlock_lost_fn on_lost;
    void *on_lost_arg;
    dlock__watch *watch; /* the watchdog's entry, or NULL */

    int fair;
    int64_t confirm_ms;        /* fair: the grant's confirm window */
    int64_t wait_deadline_us;  /* fair: when the wait ends (queue entries) */
    uint64_t tries;            /* fair: tries sent, numbering them */
    dlock__fair_queued queued; /* fair: the latest try that queued us */
    int granted_by_message;    /* fair: held on a grant message, the full
                                * TTL not set yet (the confirm is due) */
    int64_t redlock_held_ms;   /* Redlock: the last busy round's held_ms */
};

/* lock.c's state per client: the reentrant locks it holds, listed
 * through lock->rnext; and the fair key it last waited for. */
struct dlock__reentry {
    pthread_mutex_t mu;
    dlock_lock *head;
    /* key_hash of the key whose latest fair try in this client came back
     * busy, 0 if none or if one found it free since: a fair acquire of
     * it expects to wait, so it subscribes before its first try
     * (fair_expects_busy). */
    atomic_ullong fair_busy_key;
};

dlock_err dlock__lock_load_scripts(dlock_client *c, dlock__msg *m)
{
    dlock_err err = DLOCK_OK;

    for (int i = 0; core_scripts[i] != NULL && err == DLOCK_OK; i++)
        err = dlock__client_script_load(c, core_scripts[i], m);
    return err;
}

dlock_err dlock__reentry_new(dlock__reentry **out, dlock__msg *m)
{
    dlock__reentry *r = dlock__calloc(1, sizeof(*r));

    *out = NULL;
    if (r == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM,
                              "allocating the reentrant "
                              "lock registry");
    if (pthread_mutex_init(&r->mu, NULL) != 0) {
        dlock__free(r);
        return dlock__msg_set(m, DLOCK_SYSTEM, "initialising a mutex");
    }
    *out = r;
    return DLOCK_OK;
}

void dlock__reentry_free(dlock__reentry *r)
{
    if (r == NULL)
        return;
    pthread_mutex_destroy(&r->mu);
    dlock__free(r);
}

const char *dlock__lock_key(const dlock_lock *l)
{
    return l->key;
}

dlock_client *dlock__lock_client(const dlock_lock *l)
{
    return l->client;
}

dlock__lease *dlock__lock_lease(dlock_lock *l)
{
    return &l->lease;
}

int dlock__lock_has_callback(const dlock_lock *l)
{
    return l->on_lost != NULL;
}

void dlock_acquire_opts_init(dlock_acquire_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->ttl_ms = DEFAULT_TTL_MS;
    o->policy = DLOCK_FAIL_CLOSED;
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
    /* The fence key must hash to the lock's slot: "...{K}" does for any K
     * without '}', "...K" does for any K with a hash tag. */
    if (!dlock__fence_has_hash_tag(key) && strchr(key, '}') != NULL)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "lock name \"%.64s\" has a '}' but no "
                              "{hash tag}; its fence counter could not share "
                              "its cluster slot",
                              key);
    /* Derived keys (fence counters, the patterns' keys) are out of reach. */
    if (dlock__fence_name_reserved(key))
        return dlock__msg_set(m, DLOCK_INVALID,
                              "lock name \"%.64s\" begins like a key the "
                              "library derives (\"" DLOCK__RESERVED_PREFIX
                              "\" or a pattern's \"{sem:\", \"{rw:\", "
                              "\"{leader:\", \"{rl:\", \"{once:\", "
                              "\"{idem:\"); choose another",
                              key);
    return DLOCK_OK;
}

static void reentrant_unlink(dlock__reentry *r, dlock_lock *l);

/* Allocates a lock for key with its derived names; token not yet set. */
static dlock_err lock_new(dlock_client *c, const char *key, dlock_lock **out,
                          dlock__msg *m)
{
    dlock_lock *l = dlock__calloc(1, sizeof(*l));
    dlock__lock_names names;

    *out = NULL;
    if (l == NULL)
        goto nomem;
    l->client = c;
    l->holds = 1;
    if (dlock__fence_lock_names(key, CHANNEL_PREFIX, &names) != 0)
        goto nomem;
    l->key = names.key; /* owns the block the others point into */
    l->fence_key = names.fence;
    l->legacy_fence_key = names.legacy_fence;
    l->queue_key = names.queue;
    l->waiters_key = names.waiters;
    l->channel = names.channel;
    dlock__lease_init(&l->lease, DEFAULT_TTL_MS);
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
    /* After unwatch, no watchdog thread touches the lock again. */
    if (l->watch != NULL)
        dlock__watchdog_unwatch(dlock__client_watchdog(l->client), l->watch);
    if (l->reentrant)
        reentrant_unlink(dlock__client_reentry(l->client), l);
    dlock__lease_destroy(&l->lease);
    dlock__free(l->key); /* and the names in its block (lock_new) */
    dlock__free(l);
}

static dlock__skew *skew_of(const dlock_lock *l)
{
    return dlock__client_skew(l->client);
}

/* What a transport error says about whether the request ran. */
static dlock__lease_outcome outcome_of(dlock_err err)
{
    switch (err) {
    case DLOCK_OK: return DLOCK__LEASE_GRANTED;
    case DLOCK_NOMEM:
    case DLOCK_INVALID: return DLOCK__LEASE_NOT_RUN;
    default:
        /* A timeout or a dead connection may have run it. */
        return DLOCK__LEASE_UNKNOWN;
    }
}

/* The words of a script's string answer (a grant, a renewal's time):
 * their number, 1 to 3, with w and len set, or 0 unless the answer is
 * exactly that: words with one space between each, none before the first
 * or after the last, at most three. */
static int split_words(const redisReply *r, const char *w[3], size_t len[3])
{
    const char *at = r->str, *end = r->str + r->len;
    int n = 0;

    if (r->len == 0 || r->str[r->len - 1] == ' ')
        return 0;
    while (at < end && n < 3) {
        const char *sp = memchr(at, ' ', (size_t)(end - at));

        w[n] = at;
        len[n] = (size_t)((sp != NULL ? sp : end) - at);
        if (len[n] == 0)
            return 0;
        n++;
        at = sp != NULL ? sp + 1 : end;
    }
    return at == end ? n : 0;
}

/* Reads the plain acquire script's answers in words (lock_internal.h): a
 * string costs redis-server about 5,000 instructions less to build and
 * answer than a table (docs/benchmarks.md, "Session 17"). */
static int acquire_words(const redisReply *r, dlock__acquire_answer *a)
{
    const char *w[3];
    size_t len[3];
    const int n = split_words(r, w, len);

    if (n < 2 || len[0] != 1)
        return 0;
    if (!dlock__fence_parse(w[n - 1], len[n - 1], &a->now_us)
        || a->now_us == 0)
        return 0;
    a->status = w[0][0] - '0';
    switch (a->status) {
    case 1:
        return n == 3 && dlock__fence_parse(w[1], len[1], &a->fence)
               && a->fence > 0;
    case 0:
        /* The only busy answer in words is the fair queue's. */
        if (n != 3 || len[1] != 2 || memcmp(w[1], "-2", 2) != 0)
            return 0;
        a->pttl = FAIR_QUEUED_HINT;
        return 1;
    case 2: return n == 2;
    }
    return 0;
}

int dlock__lock_acquire_answer(const redisReply *r, dlock__acquire_answer *a)
{
    const redisReply *flag, *value, *now;

    if (r->type == REDIS_REPLY_STRING)
        return acquire_words(r, a);
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->elements > 3)
        return 0;
    flag = r->element[0];
    value = r->element[1];
    now = r->element[r->elements - 1];
    if (flag->type != REDIS_REPLY_INTEGER || now->type != REDIS_REPLY_STRING)
        return 0;
    a->status = (int)flag->integer;
    if (!dlock__fence_parse(now->str, now->len, &a->now_us) || a->now_us == 0)
        return 0;
    switch (a->status) {
    case 1:
        if (r->elements != 3 || value->type != REDIS_REPLY_STRING)
            return 0;
        return dlock__fence_of_reply(value, &a->fence) && a->fence > 0;
    case 0:
        if (r->elements != 3 || value->type != REDIS_REPLY_INTEGER)
            return 0;
        a->pttl = value->integer;
        return 1;
    case 2: return r->elements == 2;
    }
    return 0;
}

/* How long a fair waiter's queue entry should live from now: until its
 * wait ends (plus a second for the round trip), at most
 * FAIR_ENTRY_MAX_MS. */
static int64_t fair_entry_ms(const dlock_lock *l)
{
    int64_t left;

    if (l->wait_deadline_us == DLOCK__FOREVER)
        return FAIR_ENTRY_MAX_MS;
    left = (l->wait_deadline_us - dlock__now_us()) / 1000 + 1000;
    return left < FAIR_ENTRY_MAX_MS ? (left > 0 ? left : 1)
                                    : FAIR_ENTRY_MAX_MS;
}

/*
 * Redlock (redlock:// URLs, src/lib/deploy/redlock.c).  Acquire, extend and
 * release run as rounds on every master at once, each master bounded by a
 * per-node timeout of a tenth of the TTL (at least 5 ms, at most the I/O
 * timeout); the fence is the majority fence of redlock.h.  The lease
 * records each round like a single request: begun before the round,
 * granted when a majority granted it, so validity is measured from the
 * round's start.  The watchdog renews a Redlock lock with the same
 * rounds (watchdog.h: one round at a time, each needing a majority), the
 * reentrant registry is local and works as for one server, and a waiter
 * is woken by the release's PUBLISH on any master (the notifier
 * subscribes to the first it reaches) or by its poll.  Fair locks are
 * refused: the queue and its hand-off are one server's atomic script.
 */
static dlock__redlock *redlock_of(const dlock_lock *l)
{
    return dlock__client_redlock(l->client);
}

static int64_t redlock_node_timeout_ms(const dlock_lock *l, int64_t ttl_ms)
{
    return dlock__redlock_node_timeout_ms(
        ttl_ms, 5, dlock__client_opts(l->client)->io_timeout_ms);
}

static dlock_err redlock_try_once(dlock_lock *l, int64_t *holder_ttl_ms,
                                  dlock__msg *m)
{
    int64_t ttl_ms = dlock__lease_ttl_ms(&l->lease), validity = 0;
    dlock__lease_ticket t = dlock__lease_begin(&l->lease, ttl_ms, NULL);
    dlock__redlock_busy busy = {0};
    uint64_t fence = 0;
    dlock_err err;

    err = dlock__redlock_acquire(redlock_of(l), l->key, l->fence_key, l->token,
                                 ttl_ms, redlock_node_timeout_ms(l, ttl_ms),
                                 &validity, &fence, &busy, m);
    /* A failed round deleted what it set, on every master. */
    dlock__lease_end(&l->lease, &t,
                     err == DLOCK_OK ? DLOCK__LEASE_GRANTED
                                     : DLOCK__LEASE_NOT_RUN);
    /* The wake-up of a release comes from the one master the notifier
     * listens to, which may have deleted the key before the others: a
     * round that found it free somewhere tries again within
     * DLOCK__REDLOCK_SPLIT_RETRY_MS, for no other wake-up is coming.
     * Otherwise it looks again at a tenth of the TTL, unless woken. */
    if (err == DLOCK_BUSY) {
        l->redlock_held_ms = busy.held_ms;
        *holder_ttl_ms = busy.free_somewhere ? dlock__redlock_retry_delay_ms(
                             DLOCK__REDLOCK_SPLIT_RETRY_MS)
                                             : ttl_ms / 10;
        if (*holder_ttl_ms < 1)
            *holder_ttl_ms = 1;
    }
    if (err != DLOCK_OK)
        return err;
    l->fence = fence;
    return DLOCK_OK;
}

static dlock_err redlock_renew(dlock_lock *l, int64_t ttl_ms, int *marked,
                               dlock__msg *m)
{
    dlock__lease_ticket t = dlock__lease_begin(&l->lease, ttl_ms, NULL);
    int64_t validity = 0;
    dlock_err err;

    err = dlock__redlock_extend(redlock_of(l), l->key, l->token, ttl_ms,
                                redlock_node_timeout_ms(l, ttl_ms), &validity,
                                m);
    dlock__lease_end(&l->lease, &t,
                     err == DLOCK_OK ? DLOCK__LEASE_GRANTED
                                     : DLOCK__LEASE_NOT_RUN);
    if (err == DLOCK_LOST)
        *marked = dlock__lock_mark_lost(l);
    return err;
}

static dlock_err release_call(dlock_lock *l, redisReply **r, dlock__msg *m);
static void leave_no_orphan(dlock_lock *l, dlock_err err);

/* DLOCK_UNREPLICATED for what (a grant or renewal of l) that acked of
 * the replicas asked for acknowledged in time, and what was done. */
static dlock_err unreplicated(dlock_lock *l, const char *what, int acked,
                              const char *done, dlock__msg *m)
{
    const dlock_client_opts *o = dlock__client_opts(l->client);

    return dlock__msg_set(m, DLOCK_UNREPLICATED,
                          "%s lock %.64s on %s: %d of the %d replicas asked "
                          "for acknowledged it within %d ms (WAIT); %s",
                          what, l->key, dlock_client_endpoint(l->client),
                          acked, o->wait_replicas, o->wait_timeout_ms, done);
}

/* A grant that too few replicas acknowledged: a failover to one that
 * lacks it would grant the lock again, so it is released at once (a fair
 * lock's release hands it on) and reported, never held. */
static dlock_err release_unreplicated(dlock_lock *l, int acked, dlock__msg *m)
{
    dlock__msg scratch;
    redisReply *r = NULL;

    if (release_call(l, &r, &scratch) == DLOCK_OK)
        freeReplyObject(r);
    else
        leave_no_orphan(l, DLOCK_TIMEOUT);
    return unreplicated(l, "acquiring", acked,
                        "released again, since a failover could lose it", m);
}

/* FNV-1a of key, never 0 (fair_busy_key's "none"). */
static uint64_t key_hash(const char *key)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (; *key != '\0'; key++)
        h = (h ^ (unsigned char)*key) * 0x100000001b3ull;
    return h != 0 ? h : 1;
}

/* Records what a fair try found: busy (the key is contended in this
 * client: its next fair acquire subscribes first), or free (forgets it,
 * if it was this key). */
static void fair_note_busy(const dlock_lock *l, int busy)
{
    dlock__reentry *r = dlock__client_reentry(l->client);
    unsigned long long h = key_hash(l->key);

    if (r == NULL)
        return;
    if (busy)
        atomic_store(&r->fair_busy_key, h);
    else
        atomic_compare_exchange_strong(&r->fair_busy_key, &h, 0);
}

/* 1 if the latest fair try on this key in this client came back busy: a
 * fair acquire of it then joins its channel before the first try (wait.h
 * subscribe_first).  The releaser of a fair key with waiters, looping
 * back for it, finds it granted to the next waiter: it would otherwise
 * send its try, a SUBSCRIBE and the try its confirmation calls for, all
 * in the moments the granted waiter needs the CPUs; subscribed first, it
 * sends the SUBSCRIBE and one try. */
static int fair_expects_busy(const dlock_lock *l)
{
    dlock__reentry *r = dlock__client_reentry(l->client);

    return r != NULL && atomic_load(&r->fair_busy_key) == key_hash(l->key);
}

void dlock__lock_acquire_prepare(dlock_lock *l, dlock__acquire_req *q)
{
    const int64_t ttl_ms = dlock__lease_ttl_ms(&l->lease);

    q->floor_us = dlock__fence_floor(l->client);
    dlock__decimal_i64(q->ttl, ttl_ms);
    dlock__decimal_u64(q->floor, q->floor_us);
    dlock__decimal_i64(q->keep, ttl_ms + DLOCK__FENCE_KEEP_MS);
    q->argv[0] = l->key;
    q->argv[1] = l->fence_key;
    q->argv[2] = l->legacy_fence_key;
    q->argv[3] = l->queue_key;
    q->argv[4] = l->waiters_key;
    q->argv[5] = l->token;
    q->argv[6] = q->ttl;
    q->argv[7] = q->floor;
    q->argv[8] = q->keep;
    l->tries++;
    q->ticket = dlock__lease_begin(&l->lease, ttl_ms, skew_of(l));
}

const dlock__script *dlock__lock_acquire_script(void)
{
    return &acquire_script;
}

/* The message of an acquire the script refused for want of a fence
 * above the client's floor (status 2); l->fence_gap_us is set. */
static dlock_err unproven(dlock_lock *l, uint64_t floor_us, uint64_t now_us,
                          dlock__msg *m)
{
    l->fence_gap_us = (int64_t)(floor_us - now_us) + 1;
    return dlock__msg_set(m, DLOCK_UNPROVEN,
                          "acquiring lock %.64s on %s: "
                          "its fence counter is gone or behind and the "
                          "server's clock (%llu us) is %lld ms behind the "
                          "highest fence or time this client has seen "
                          "(%llu); no fence above it can be shown (a "
                          "restart without persistence, a failover to a "
                          "lagging replica, or a clock stepped back?)",
                          l->key, dlock_client_endpoint(l->client),
                          (unsigned long long)now_us,
                          (long long)(l->fence_gap_us / 1000),
                          (unsigned long long)floor_us);
}

dlock_err dlock__lock_acquire_finish(dlock_lock *l, dlock__acquire_req *q,
                                     dlock_err err, redisReply *r, int acked,
                                     int waiting, int64_t *holder_ttl_ms,
                                     dlock__msg *m)
{
    dlock__lease_ticket *t = &q->ticket;
    dlock__acquire_answer a = {0};

    if (err != DLOCK_OK) {
        dlock__lease_end(&l->lease, t, outcome_of(err));
        return dlock__msg_wrap(m, err, "acquiring lock %.64s", l->key);
    }
    if (!dlock__lock_acquire_answer(r, &a)) {
        dlock__lease_end(&l->lease, t, DLOCK__LEASE_UNKNOWN);
        err = dlock__msg_set(m, DLOCK_PROTOCOL,
                             "acquiring lock %.64s on %s: "
                             "expected a grant (1 fence now), busy (0 pttl "
                             "now) or unprovable (2 now), got %s",
                             l->key, dlock_client_endpoint(l->client),
                             dlock__reply_type_name(r));
        freeReplyObject(r);
        return err;
    }
    freeReplyObject(r);
    if (a.status == 1
        && dlock__replwait_short(dlock__client_opts(l->client), acked)) {
        dlock__lease_end(&l->lease, t, DLOCK__LEASE_NOT_RUN);
        dlock__fence_floor_raise(l->client, a.fence);
        return release_unreplicated(l, acked, m);
    }
    dlock__lease_end(&l->lease, t,
                     a.status == 1 ? DLOCK__LEASE_GRANTED
                                   : DLOCK__LEASE_NOT_RUN);
    dlock__fence_floor_raise(l->client, a.now_us);
    if (l->fair && a.status != 2)
        fair_note_busy(l, a.status == 0);
    if (a.status == 0) {
        if (l->fair && waiting)
            l->queued = (dlock__fair_queued){l->tries, t->sent_us,
                                             q->floor_us > a.now_us
                                                 ? q->floor_us
                                                 : a.now_us,
                                             t->base_hi_us};
        *holder_ttl_ms = a.pttl;
        return DLOCK_BUSY;
    }
    if (a.status == 2)
        return unproven(l, q->floor_us, a.now_us, m);
    dlock__fence_floor_raise(l->client, a.fence);
    l->fence = a.fence;
    return DLOCK_OK;
}

/* The fair acquire's request: dlock__lock_acquire_prepare's arguments,
 * and the fair script's own after them, into fair (which points into q
 * and the strings it is given, so they must outlive it). */
static void fair_acquire_args(dlock_lock *l, int waiting,
                              dlock__acquire_req *q, char entry[24],
                              char confirm[24], char seq[24],
                              const char *fair[14])
{
    memcpy(fair, q->argv, sizeof(q->argv));
    fair[9] = waiting ? "1" : "0";
    fair[10] = entry;
    fair[11] = confirm;
    fair[12] = seq;
    fair[13] = DLOCK__FAIR_GRANT_PREFIX;
    dlock__decimal_i64(entry, fair_entry_ms(l));
    dlock__decimal_i64(confirm, l->confirm_ms);
    dlock__decimal_u64(seq, l->tries);
}

/* One acquire attempt: DLOCK_OK (held; fence and validity set),
 * DLOCK_BUSY (*holder_ttl_ms set), DLOCK_UNPROVEN (l->fence_gap_us set)
 * or an error.  A fair lock runs the fair script (waiting: queue up if
 * busy).  The lease counts from the send time of this very request, which
 * set the TTL it counts (for a fair grant: the confirming request, never
 * the earlier hand-off).  The request and the meaning of its answer are
 * dlock__lock_acquire_prepare's and _finish's, which the asynchronous
 * acquire (async.c) shares. */
static dlock_err try_once(dlock_lock *l, int waiting, int64_t *holder_ttl_ms,
                          dlock__msg *m)
{
    char entry[24], confirm[24], seq[24];
    const char *fair[14];
    dlock__acquire_req q;
    redisReply *r = NULL;
    int acked = 0;
    dlock_err err;

    if (redlock_of(l) != NULL)
        return redlock_try_once(l, holder_ttl_ms, m);
    dlock__lock_acquire_prepare(l, &q);
    if (l->fair) {
        fair_acquire_args(l, waiting, &q, entry, confirm, seq, fair);
        err = dlock__client_eval_acked(l->client, &dlock__fair_acquire_script,
                                       5, 14, fair, NULL, &r, &acked, m);
    } else {
        err = dlock__client_eval_acked(l->client, &acquire_script, 5, 9,
                                       q.argv, NULL, &r, &acked, m);
    }
    return dlock__lock_acquire_finish(l, &q, err, r, acked, waiting,
                                      holder_ttl_ms, m);
}

/* try_once as a dlock__wait_try_fn. */
static dlock_err acquire_try(void *arg, int waiting, int64_t *holder_ttl_ms,
                             dlock__msg *m)
{
    return try_once(arg, waiting, holder_ttl_ms, m);
}

/* A grant message on a fair waiter's channel (lock_fair.c says when it
 * is taken, and why its validity is safe): DLOCK__MSG_TAKEN if the lock
 * is now held; DLOCK__MSG_BUSY for a nudge with the holder's time. */
static int fair_take_grant(void *arg, const char *msg, size_t len,
                           int64_t *hint_ms)
{
    dlock_lock *l = arg;
    dlock__fair_grant g;
    dlock__lease_ticket t;
    int64_t until;

    if (dlock__fair_nudge_parse(msg, len, hint_ms))
        return DLOCK__MSG_BUSY;
    if (!dlock__fair_grant_parse(msg, len, &g)
        || !dlock__fair_grant_check(&g, &l->queued, dlock__boot_us(), &until))
        return 0;
    /* A request that set the key to ours for confirm_ms, sent when the
     * granted try was: the lease counts from that send time, and a step
     * of the server's clock is measured from the offset known then.  The
     * offset known now may already include a step made after the grant
     * (seen by another thread's round trip while the message was on its
     * way), which would hide that step from the lease for good. */
    t = dlock__lease_begin(&l->lease, g.confirm_ms, skew_of(l));
    t.sent_us = l->queued.sent_us;
    t.base_hi_us = l->queued.base_hi_us;
    dlock__lease_end(&l->lease, &t, DLOCK__LEASE_GRANTED);
    /* A step of the server's clock seen since the try can leave less than
     * the grant check saw, or nothing (the key may be gone): a try
     * decides, as for a grant too late to take; its answer sets the lease
     * anew. */
    if (dlock__lease_left_us(&l->lease, skew_of(l))
        <= DLOCK__FAIR_GRANT_MIN_LEFT_US)
        return 0;
    dlock__fence_floor_raise(l->client, g.fence);
    l->fence = g.fence;
    l->granted_by_message = g.confirm_ms < dlock__lease_ttl_ms(&l->lease);
    return DLOCK__MSG_TAKEN;
}

/*
 * The longest a queued fair waiter sleeps without a message: its confirm
 * window (at least FAIR_POLL_MIN_MS, at most a third of an entry's life,
 * which the try refreshes).  A granted waiter that never confirms holds
 * the key for at most the confirm window, and no release comes after it:
 * the next waiter's fallback try then takes the free key (or grants it
 * to the head, lock_fair.c), so the queue moves on within about two
 * windows without the release waking the next waiter at every grant.
 */
static int64_t fair_poll_ms(const dlock_lock *l)
{
    int64_t ms = l->confirm_ms;

    if (ms < FAIR_POLL_MIN_MS)
        ms = FAIR_POLL_MIN_MS;
    return ms < FAIR_ENTRY_MAX_MS / 3 ? ms : FAIR_ENTRY_MAX_MS / 3;
}

/* Tries, and while busy waits (wait.h) until deadline_us. */
static dlock_err acquire_waiting(dlock_lock *l, int64_t deadline_us,
                                 dlock_policy policy, int64_t *holder_ttl_ms,
                                 dlock__msg *m)
{
    const dlock__wait w = {
        .client = l->client,
        .channel = l->fair ? l->grant_channel : l->channel,
        .deadline_us = deadline_us,
        .seed = l->token,
        .fail_fast = policy == DLOCK_FAIL_OPEN,
        .poll_max_ms = l->fair ? fair_poll_ms(l) : 0,
        .take_message = l->fair ? fair_take_grant : NULL,
        .fifo = !l->fair,
        .direct = l->fair,
        .subscribe_first = l->fair && fair_expects_busy(l),
    };

    for (;;) {
        dlock_err err = dlock__wait_run(&w, acquire_try, l, holder_ttl_ms, m);
        int64_t now = dlock__now_us();

        /* No fence above the floor yet: the server's clock passes the
         * floor in fence_gap_us; wait for that if the budget allows. */
        if (err != DLOCK_UNPROVEN || now + l->fence_gap_us >= deadline_us)
            return err;
        dlock__wait_sleep_until(now + l->fence_gap_us);
    }
}

/*
 * The failures a fail-open acquire degrades on: Redis could not be reached
 * or did not answer in time.  DLOCK_UNAVAILABLE is a refused, reset or
 * unreachable connection, a failed name lookup, the open breaker, or a
 * server that answered LOADING or BUSY (conn.c, dlock__reply_error: it is
 * up but cannot run anything yet); DLOCK_TIMEOUT is no answer in time.
 * An answer that refuses the command (AUTH, NOPERM, OOM, READONLY, a
 * script error, WRONGTYPE), a reply we cannot read, a TLS failure or an
 * unprovable fence is an error: degrading would hide a fault that waiting
 * does not mend.
 */
static int redis_unreachable(dlock_err err)
{
    return err == DLOCK_UNAVAILABLE || err == DLOCK_TIMEOUT;
}

int dlock__lock_mark_lost(dlock_lock *l)
{
    if (!dlock__lease_mark_lost(&l->lease))
        return 0;
    dlock__client_count_lost(l->client);
    return 1;
}

void dlock__lock_fire_lost(dlock_lock *l)
{
    if (l->on_lost != NULL)
        l->on_lost(l, l->on_lost_arg);
}

int dlock__lock_is_lost(dlock_lock *l)
{
    return dlock__lease_lost(&l->lease, skew_of(l));
}

/* The owner's thread found the loss: mark it and, if it was first, run
 * on_lost here (the lock is still alive: the owner is inside a call). */
static void lost_found(dlock_lock *l)
{
    if (dlock__lock_mark_lost(l))
        dlock__lock_fire_lost(l);
}

/* The reentrant lock this thread already holds on key, with its hold count
 * raised, or NULL.  A lock whose validity ran out is not re-entered: its
 * loss is reported (on_lost) and the caller takes the key afresh. */
static dlock_lock *reenter(dlock_client *c, const char *key)
{
    dlock__reentry *r = dlock__client_reentry(c);
    dlock_lock *found = NULL, *expired = NULL;

    pthread_mutex_lock(&r->mu);
    for (dlock_lock *l = r->head; l != NULL; l = l->rnext) {
        if (!pthread_equal(l->owner, pthread_self())
            || strcmp(l->key, key) != 0)
            continue;
        if (dlock__lock_is_lost(l)) {
            expired = l;
            continue;
        }
        l->holds++;
        found = l;
        break;
    }
    pthread_mutex_unlock(&r->mu);
    if (found == NULL && expired != NULL)
        lost_found(expired);
    return found;
}

static void reentrant_add(dlock_client *c, dlock_lock *l)
{
    dlock__reentry *r = dlock__client_reentry(c);

    pthread_mutex_lock(&r->mu);
    l->reentrant = 1;
    l->owner = pthread_self();
    l->rnext = r->head;
    r->head = l;
    pthread_mutex_unlock(&r->mu);
}

/* Takes l off the registry (if it is there). */
static void reentrant_unlink(dlock__reentry *r, dlock_lock *l)
{
    dlock_lock **link;

    pthread_mutex_lock(&r->mu);
    link = &r->head;
    while (*link != NULL && *link != l)
        link = &(*link)->rnext;
    if (*link == l)
        *link = l->rnext;
    pthread_mutex_unlock(&r->mu);
}

/* Lowers the hold count; returns 1 if the lock is still held after. */
static int reentrant_drop(dlock_lock *l)
{
    dlock__reentry *r = dlock__client_reentry(l->client);
    int still_held;

    pthread_mutex_lock(&r->mu);
    still_held = --l->holds > 0;
    pthread_mutex_unlock(&r->mu);
    if (!still_held)
        reentrant_unlink(r, l);
    return still_held;
}

void dlock__lock_busy_message(const dlock_lock *l, int64_t holder_ttl_ms,
                              int64_t started_us, dlock__msg *m)
{
    dlock_client *c = l->client;

    if (holder_ttl_ms == FAIR_QUEUED_HINT) {
        dlock__msg_set(m, DLOCK_BUSY,
                       "lock %.64s on %s is free but fair waiters are "
                       "queued for it, and a non-fair acquire does not go "
                       "ahead of them: every party on a fair key must "
                       "acquire it fair (opts.fair, --fair) (waited %lld ms)",
                       l->key, dlock_client_endpoint(c),
                       (long long)((dlock__now_us() - started_us) / 1000));
        return;
    }
    if (l->fair && holder_ttl_ms <= 0) {
        dlock__msg_set(m, DLOCK_BUSY,
                       "lock %.64s on %s is another fair waiter's turn "
                       "(first in its queue) (waited %lld ms)",
                       l->key, dlock_client_endpoint(c),
                       (long long)((dlock__now_us() - started_us) / 1000));
        return;
    }
    if (holder_ttl_ms == 0)
        dlock__msg_set(m, DLOCK_BUSY,
                       "lock %.64s on %s is held by another owner, for how "
                       "long is not known (waited %lld ms)",
                       l->key, dlock_client_endpoint(c),
                       (long long)((dlock__now_us() - started_us) / 1000));
    else
        dlock__msg_set(m, DLOCK_BUSY,
                       "lock %.64s on %s is held by another owner "
                       "for %lld more ms (waited %lld ms)",
                       l->key, dlock_client_endpoint(c),
                       (long long)holder_ttl_ms,
                       (long long)((dlock__now_us() - started_us) / 1000));
}

static void set_busy(dlock_client *c, dlock_lock *l, int64_t holder_ttl_ms,
                     int64_t started_us, dlock__msg *m)
{
    dlock__tstate *t = dlock__client_tstate(c);

    if (t != NULL)
        t->busy_ttl_ms = holder_ttl_ms == FAIR_QUEUED_HINT ? 0 : holder_ttl_ms;
    dlock__lock_busy_message(l, holder_ttl_ms, started_us, m);
}

/* A fair grant's confirm window: the caller's, else min(TTL, 2 s). */
static int64_t fair_confirm_ms(const dlock_acquire_opts *o)
{
    const int64_t ttl = o->ttl_ms > 0 ? o->ttl_ms : DEFAULT_TTL_MS;

    if (o->fair_confirm_ms > 0)
        return o->fair_confirm_ms < ttl ? o->fair_confirm_ms : ttl;
    return FAIR_CONFIRM_MS < ttl ? FAIR_CONFIRM_MS : ttl;
}

static dlock_err validate_opts(const dlock_acquire_opts *o, dlock__msg *m)
{
    if (o->fair_confirm_ms < 0)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "fair confirm window %lld ms "
                              "is negative",
                              (long long)o->fair_confirm_ms);
    if (o->ttl_ms < 0 || o->ttl_ms > (int64_t)1000 * 86400 * 365)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "lock TTL %lld ms is not 1 ms..1 year",
                              (long long)o->ttl_ms);
    if (o->policy != DLOCK_FAIL_CLOSED && o->policy != DLOCK_FAIL_OPEN)
        return dlock__msg_set(m, DLOCK_INVALID, "unknown failure policy %d",
                              (int)o->policy);
    return DLOCK_OK;
}

/* A request that timed out was sent and may still run: the watchdog
 * undoes it with the same token (a release).  Other failures were not
 * sent (breaker open, connect refused) or are retried with the same token
 * on a fresh connection by client.c. */
static void leave_no_orphan(dlock_lock *l, dlock_err err);

/* The fair release's KEYS and ARGV into fair: the floor and counter
 * keep are written as decimal strings into floor and keep, which fair
 * points into (so they must outlive it). */
static void fair_release_args(dlock_lock *l, char floor[24], char keep[24],
                              const char *fair[10])
{
    fair[0] = l->key;
    fair[1] = l->fence_key;
    fair[2] = l->legacy_fence_key;
    fair[3] = l->queue_key;
    fair[4] = l->waiters_key;
    fair[5] = l->token;
    fair[6] = l->channel;
    fair[7] = DLOCK__FAIR_GRANT_PREFIX;
    fair[8] = floor;
    fair[9] = keep;
    dlock__decimal_u64(floor, dlock__fence_floor(l->client));
    dlock__decimal_i64(keep,
                       dlock__lease_ttl_ms(&l->lease) + DLOCK__FENCE_KEEP_MS);
}

static void leave_no_orphan(dlock_lock *l, dlock_err err)
{
    const char *argv[] = {l->key, l->queue_key, l->token, l->channel};
    char floor[24], keep[24];
    const char *fair[10];

    /* A Redlock round that failed has deleted its keys already. */
    if (err != DLOCK_TIMEOUT || redlock_of(l) != NULL)
        return;
    fair_release_args(l, floor, keep, fair);
    /* A fair lock's undo also takes its entry out of the queue (see
     * fair_leave): it goes on while the entry or a grant of it may live. */
    if (l->fair)
        dlock__watchdog_cleanup(dlock__client_watchdog(l->client),
                                &dlock__fair_release_script, 5, 10, fair,
                                fair_entry_ms(l) + l->confirm_ms
                                        > dlock__lease_ttl_ms(&l->lease)
                                    ? fair_entry_ms(l) + l->confirm_ms
                                    : dlock__lease_ttl_ms(&l->lease));
    else
        dlock__watchdog_cleanup(dlock__client_watchdog(l->client),
                                &release_script, 2, 4, argv,
                                dlock__lease_ttl_ms(&l->lease));
}

/* The id a plain release publishes (release_script): its grant's fence,
 * unique among the key's grants, or "" when there is none. */
static void release_id(const dlock_lock *l, char id[24])
{
    id[0] = '\0';
    if (l->fence != 0)
        dlock__decimal_u64(id, l->fence);
}

/* Our plain release has just deleted the key: wakes the first waiter of
 * this client for it now, not when the release's message comes through
 * the subscriber thread, one thread wake-up later (notify.h).  Waiters in
 * other processes are woken by the message as before. */
static void wake_own_waiter(dlock_lock *l)
{
    dlock__notifier *n = dlock__client_notifier_peek(l->client);
    char id[24];

    if (n == NULL || l->fair)
        return;
    release_id(l, id);
    dlock__notify_released(n, l->channel, id);
}

/* Runs the release script (the fair one for a fair lock: it also leaves
 * the queue and hands the key to the next waiter) and returns its
 * reply. */
static dlock_err release_call(dlock_lock *l, redisReply **r, dlock__msg *m)
{
    char id[24];
    const char *argv[5];
    char floor[24], keep[24];
    const char *fair[10];

    if (l->fair) {
        fair_release_args(l, floor, keep, fair);
        return dlock__client_eval(l->client, &dlock__fair_release_script, 5,
                                  10, fair, NULL, r, m);
    }
    dlock__lock_release_args(l, id, argv);
    /* Its 0 is believed from a master only (a demoted Sentinel master
     * answers from its copy). */
    return dlock__client_eval_owned(l->client, &release_script, 2, 5, argv,
                                    NULL, r, NULL, m);
}

/* A fair wait that ended without the lock leaves the queue, and passes on
 * a grant that reached us meanwhile.  When Redis cannot be reached (the
 * wait ended on that very failure, as a server restart does), the leave
 * is handed to the watchdog's cleanup, which runs it again until the
 * entry's deadline and a grant's confirm window have passed: left behind
 * at the head of the queue, a live entry nobody serves keeps a free key
 * from every other waiter until its deadline, up to FAIR_ENTRY_MAX_MS
 * (tests/chaos, restart-aof with --fair: the lock was free and unused
 * for a second after each restart). */
static void fair_leave(dlock_lock *l)
{
    dlock__msg scratch; /* the caller's message says why the wait ended */
    redisReply *r = NULL;
    char floor[24], keep[24];
    const char *fair[10];
    dlock_err err = release_call(l, &r, &scratch);

    if (err == DLOCK_OK) {
        freeReplyObject(r);
        return;
    }
    if (!redis_unreachable(err))
        return;
    fair_release_args(l, floor, keep, fair);
    dlock__watchdog_cleanup(dlock__client_watchdog(l->client),
                            &dlock__fair_release_script, 5, 10, fair,
                            fair_entry_ms(l) + l->confirm_ms);
}

/* Registers a held lock with the watchdog: renewals if asked for, and the
 * timer that marks it lost at valid_until when it has a callback.  A fair
 * lock held on a grant message has its confirm (the first renewal, which
 * sets the full TTL) sent by the renewer 200 us later, after this acquire
 * has returned (watchdog.c). */
static dlock_err watch(dlock_lock *l, int renew, dlock__msg *m)
{
    dlock__watchdog *w = dlock__client_watchdog(l->client);

    if (l->granted_by_message)
        return dlock__watchdog_watch_confirm(w, l, renew, &l->watch, m);
    if (!renew && l->on_lost == NULL)
        return DLOCK_OK;
    return dlock__watchdog_watch(w, l, renew, &l->watch, m);
}

/* A new lock on key for opts (checked), with its token: not yet held. */
static dlock_err lock_setup(dlock_client *c, const char *key,
                            const dlock_acquire_opts *opts, dlock_lock **out,
                            dlock__msg *m)
{
    dlock_lock *l = NULL;
    dlock_err err = lock_new(c, key, &l, m);

    *out = NULL;
    if (err == DLOCK_OK)
        err = dlock__token_new(l->token, m);
    if (err != DLOCK_OK) {
        dlock_lock_free(l);
        return err;
    }
    dlock__lease_set_ttl_ms(&l->lease,
                            opts->ttl_ms > 0 ? opts->ttl_ms : DEFAULT_TTL_MS);
    l->on_lost = opts->on_lost;
    l->on_lost_arg = opts->on_lost_arg;
    l->fair = opts->fair != 0;
    l->confirm_ms = fair_confirm_ms(opts);
    l->wait_deadline_us = dlock__deadline_after_ms(opts->wait_ms);
    if (l->fair)
        snprintf(l->grant_channel, sizeof(l->grant_channel), "%s%s",
                 DLOCK__FAIR_GRANT_PREFIX, l->token);
    *out = l;
    return DLOCK_OK;
}

dlock_err dlock__lock_create(dlock_client *c, const char *key,
                             const dlock_acquire_opts *opts, dlock_lock **out,
                             dlock__msg *m)
{
    dlock_err err = check_key(key, m);

    *out = NULL;
    if (err == DLOCK_OK)
        err = validate_opts(opts, m);
    if (err != DLOCK_OK)
        return err;
    return lock_setup(c, key, opts, out, m);
}

dlock_err dlock__lock_held(dlock_lock *l, const dlock_acquire_opts *opts,
                           dlock__msg *m)
{
    return watch(l, opts->watchdog, m);
}

void dlock__lock_leave_no_orphan(dlock_lock *l)
{
    leave_no_orphan(l, DLOCK_TIMEOUT);
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
    if (err == DLOCK_OK && dlock__client_redlock(c) != NULL && opts->fair)
        err = dlock__msg_set(m, DLOCK_INVALID,
                             "a fair lock on %s is refused: its queue and "
                             "hand-off are one server's atomic script, "
                             "which independent masters cannot share "
                             "(docs/deployments.md)",
                             dlock_client_endpoint(c));
    if (err != DLOCK_OK)
        return err;
    if (opts->reentrant) {
        *out = reenter(c, key);
        if (*out != NULL)
            return DLOCK_OK;
    }
    err = lock_setup(c, key, opts, &l, m);
    if (err != DLOCK_OK)
        return err;
    err = acquire_waiting(l, l->wait_deadline_us, opts->policy, &holder_ttl,
                          m);
    if (l->fair && opts->wait_ms != 0 && err != DLOCK_OK
        && err != DLOCK_TIMEOUT)
        fair_leave(l);
    if (err == DLOCK_BUSY) {
        /* On Redlock the wait's hint is a retry time, not the holder's. */
        set_busy(c, l, redlock_of(l) != NULL ? l->redlock_held_ms : holder_ttl,
                 started, m);
        goto fail;
    }
    if (err != DLOCK_OK)
        leave_no_orphan(l, err);
    if (err != DLOCK_OK && opts->policy == DLOCK_FAIL_OPEN
        && redis_unreachable(err)) {
        /* The message keeps the reason, for the caller's log. */
        l->degraded = 1;
        l->fence = 0;
        *out = l;
        return DLOCK_OK;
    }
    if (err == DLOCK_OK)
        err = watch(l, opts->watchdog, m);
    if (err != DLOCK_OK)
        goto fail;
    if (opts->reentrant)
        reentrant_add(c, l);
    dlock__msg_clear(m);
    *out = l;
    return DLOCK_OK;
fail:
    dlock_lock_free(l);
    return err;
}

/* The server's time in the extend script's words "1 seconds
 * microseconds": exactly those, seconds above 0 and microseconds below a
 * million, else 0. */
static int64_t extend_words_us(const redisReply *r)
{
    const char *w[3];
    size_t len[3];
    uint64_t sec, usec;

    if (split_words(r, w, len) != 3 || len[0] != 1 || w[0][0] != '1'
        || !dlock__fence_parse(w[1], len[1], &sec)
        || !dlock__fence_parse(w[2], len[2], &usec) || sec == 0
        || sec > (uint64_t)(INT64_MAX / 1000000 - 1) || usec >= 1000000)
        return 0;
    return (int64_t)(sec * 1000000 + usec);
}

/* Reads the extend script's "1 seconds microseconds" (or the table
 * {1, seconds, microseconds} it answered before) or 0 into *held and
 * *server_us; 0 if the reply has another shape. */
static int extend_reply(const redisReply *r, int *held, int64_t *server_us)
{
    *server_us = 0;
    if (r->type == REDIS_REPLY_INTEGER) {
        *held = r->integer == 1;
        return 1;
    }
    if (r->type == REDIS_REPLY_STRING) {
        *server_us = extend_words_us(r);
        *held = 1;
        return *server_us > 0;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3
        || r->element[0]->type != REDIS_REPLY_INTEGER
        || r->element[0]->integer != 1)
        return 0;
    *held = 1;
    *server_us = dlock__server_time_us(r, 1);
    return 1;
}

dlock_err dlock__lock_renew_reply(dlock_lock *l, dlock__lease_ticket *t,
                                  const redisReply *r, int64_t recv_us,
                                  int *marked)
{
    int held = 0;
    int64_t server_us;

    *marked = 0;
    if (r == NULL) {
        dlock__lease_end(&l->lease, t, DLOCK__LEASE_UNKNOWN);
        return DLOCK_TIMEOUT;
    }
    if (r->type == REDIS_REPLY_ERROR || !extend_reply(r, &held, &server_us)) {
        dlock__lease_end(&l->lease, t,
                         r->type == REDIS_REPLY_ERROR ? DLOCK__LEASE_NOT_RUN
                                                      : DLOCK__LEASE_UNKNOWN);
        return r->type == REDIS_REPLY_ERROR ? DLOCK_SERVER : DLOCK_PROTOCOL;
    }
    if (!held) {
        dlock__lease_end(&l->lease, t, DLOCK__LEASE_NOT_RUN);
        *marked = dlock__lock_mark_lost(l);
        return DLOCK_LOST;
    }
    if (server_us > 0) {
        dlock__skew_sample(skew_of(l), t->sent_us, recv_us, server_us);
        dlock__lease_ticket_server_time(t, server_us);
    }
    dlock__lease_end(&l->lease, t, DLOCK__LEASE_GRANTED);
    return DLOCK_OK;
}

long long dlock__lock_renew_command(dlock_lock *l, char **cmd,
                                    dlock__lease_ticket *t)
{
    char ttl[24];
    int64_t ttl_ms = dlock__lease_ttl_ms(&l->lease);
    const char *argv[] = {"EVAL", extend_script.body, "1",
                          l->key, l->token,           ttl};
    int len;

    *cmd = NULL;
    dlock__decimal_i64(ttl, ttl_ms);
    len = redisFormatCommandArgv(cmd, 6, argv, NULL);
    if (len < 0 || *cmd == NULL)
        return -1;
    *t = dlock__lease_begin(&l->lease, ttl_ms, skew_of(l));
    return len;
}

/* KEYS: the fence counter, the lock.  ARGV: our fence.  1 when the
 * counter still holds exactly our fence and the key is gone. */
static const dlock__script release_check_script = {
    "release.check",
    "if redis.call('GET', KEYS[1]) == ARGV[1] and "
    "redis.call('EXISTS', KEYS[2]) == 0 then\n"
    "  return 1\n"
    "end\n"
    "return 0\n",
    1,
};

/*
 * 1 if a release that found our token gone had been re-asked after its
 * connection failed with it in flight, and the server proves that the
 * first send ran: our lease was still valid (the key had not expired),
 * and the fence counter still holds exactly our fence, so the server kept
 * its data since our grant (a restart without persistence loses the
 * counter with the key) and granted nobody after us.  0 when it was not
 * re-asked; -1 when it was but nothing proves the first send ran (it may
 * have, and another holder taken the key since; or the server may have
 * lost the lock first): the caller reports a loss, never a release.
 */
static int released_before(dlock_lock *l, int resent)
{
    char fence[24];
    const char *argv[3];
    redisReply *r;
    dlock__msg m;
    int ran;

    if (!resent)
        return 0;
    if (dlock__lock_is_lost(l) || l->fence == 0)
        return -1;
    dlock__decimal_u64(fence, l->fence);
    argv[0] = l->fence_key;
    argv[1] = l->key;
    argv[2] = fence;
    if (dlock__client_eval(l->client, &release_check_script, 2, 3, argv, NULL,
                           &r, &m)
        != DLOCK_OK)
        return -1;
    ran = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return ran ? 1 : -1;
}

dlock_err dlock__lock_release_reply(dlock_lock *l, dlock_err err,
                                    redisReply *r, int resent, dlock__msg *m)
{
    int before;

    if (err != DLOCK_OK)
        return dlock__msg_wrap(m, err, "release of lock %.64s", l->key);
    if (r->type != REDIS_REPLY_INTEGER) {
        err = dlock__msg_set(m, DLOCK_PROTOCOL,
                             "release of lock %.64s on %s: "
                             "expected an integer, got %s",
                             l->key, dlock_client_endpoint(l->client),
                             dlock__reply_type_name(r));
    } else if (r->integer == 1) {
        wake_own_waiter(l);
    } else if ((before = released_before(l, resent)) < 0) {
        err = dlock__msg_set(m, DLOCK_LOST,
                             "release of lock %.64s on %s: re-asked after "
                             "its connection failed, it found our token "
                             "gone; the first send may have released it, "
                             "but nothing proves the lock was still ours "
                             "then (another holder since, or a server that "
                             "restarted empty)",
                             l->key, dlock_client_endpoint(l->client));
    } else if (before == 0) {
        err = dlock__msg_set(m, DLOCK_LOST,
                             "release of lock %.64s on %s: "
                             "the key no longer holds our token (expired or "
                             "taken)",
                             l->key, dlock_client_endpoint(l->client));
    }
    freeReplyObject(r);
    return err;
}

/* Runs the release script; DLOCK_OK, DLOCK_LOST or a transport error. */
static dlock_err release_once(dlock_lock *l, dlock__msg *m)
{
    const dlock__tstate *t;
    redisReply *r = NULL;
    dlock_err err;

    if (redlock_of(l) != NULL)
        return dlock__redlock_release(
            redlock_of(l), l->key, l->token, l->channel,
            redlock_node_timeout_ms(l, dlock__lease_ttl_ms(&l->lease)), m);
    err = release_call(l, &r, m);
    t = dlock__client_tstate(l->client);
    return dlock__lock_release_reply(l, err, r, t != NULL && t->resent, m);
}

/* A renewal that the master ran (the key holds our token) but that too
 * few replicas acknowledged: it does not count. */
static int renewal_unacked(dlock_lock *l, const redisReply *r, int acked)
{
    int held = 0;
    int64_t server_us;

    return dlock__replwait_short(dlock__client_opts(l->client), acked)
           && r->type != REDIS_REPLY_ERROR
           && extend_reply(r, &held, &server_us) && held;
}

/* What an extend request's answer means: err (a transport error) or the
 * extend script's reply r (freed here) ends the ticket t; DLOCK_OK (lease
 * renewed), DLOCK_LOST (marked; *marked says whether by this call) or an
 * error (the lease keeps its old end, or an earlier one). */
static dlock_err renew_answer(dlock_lock *l, dlock__lease_ticket *t,
                              dlock_err err, redisReply *r, int *marked,
                              dlock__msg *m)
{
    *marked = 0;
    if (err != DLOCK_OK) {
        dlock__lease_end(&l->lease, t, outcome_of(err));
        return dlock__msg_wrap(m, err, "extend of lock %.64s", l->key);
    }
    err = dlock__lock_renew_reply(l, t, r, dlock__boot_us(), marked);
    if (err == DLOCK_LOST)
        dlock__msg_set(m, DLOCK_LOST,
                       "extend of lock %.64s on %s: the key "
                       "no longer holds our token (expired or taken)",
                       l->key, dlock_client_endpoint(l->client));
    else if (err != DLOCK_OK)
        dlock__msg_set(m, DLOCK_PROTOCOL,
                       "extend of lock %.64s on %s: "
                       "expected {1, time} or 0, got %s",
                       l->key, dlock_client_endpoint(l->client),
                       dlock__reply_type_name(r));
    freeReplyObject(r);
    return err == DLOCK_SERVER ? DLOCK_PROTOCOL : err;
}

/* Runs the extend script for ttl_ms through the pool (or the Redlock
 * round): DLOCK_OK (lease renewed), DLOCK_LOST (marked; *marked says
 * whether this call marked it, and the caller then runs on_lost),
 * DLOCK_UNREPLICATED (the lease keeps its last acknowledged end) or a
 * transport error (the lease keeps its old end, or an earlier one). */
static dlock_err renew_once(dlock_lock *l, int64_t ttl_ms, int *marked,
                            dlock__msg *m)
{
    char ttl[24];
    const char *argv[3];
    dlock__lease_ticket t;
    redisReply *r = NULL;
    int acked = 0;
    dlock_err err;

    *marked = 0;
    if (redlock_of(l) != NULL)
        return redlock_renew(l, ttl_ms, marked, m);
    t = dlock__lock_extend_prepare(l, ttl_ms, ttl, argv);
    err = dlock__client_eval_owned(l->client, &extend_script, 1, 3, argv, NULL,
                                   &r, &acked, m);
    if (err == DLOCK_OK && renewal_unacked(l, r, acked)) {
        dlock__lease_end(&l->lease, &t, DLOCK__LEASE_NOT_RUN);
        freeReplyObject(r);
        return unreplicated(l, "extend of", acked,
                            "the lease keeps its last acknowledged end", m);
    }
    return renew_answer(l, &t, err, r, marked, m);
}

dlock__lease_ticket dlock__lock_extend_prepare(dlock_lock *l, int64_t ttl_ms,
                                               char ttl[24],
                                               const char *argv[3])
{
    dlock__decimal_i64(ttl, ttl_ms);
    argv[0] = l->key;
    argv[1] = l->token;
    argv[2] = ttl;
    return dlock__lease_begin(&l->lease, ttl_ms, skew_of(l));
}

const dlock__script *dlock__lock_extend_script(void)
{
    return &extend_script;
}

/* renew_once on the owner's thread, which runs on_lost if it marked the
 * loss. */
static dlock_err renew_now(dlock_lock *l, int64_t ttl_ms, dlock__msg *m)
{
    int marked = 0;
    dlock_err err = renew_once(l, ttl_ms, &marked, m);

    if (marked)
        dlock__lock_fire_lost(l);
    if (err == DLOCK_OK)
        dlock__watchdog_recheck(dlock__client_watchdog(l->client));
    return err;
}

int dlock__lock_renews_in_rounds(dlock_client *c)
{
    return dlock__client_redlock(c) != NULL
           || dlock__client_opts(c)->wait_replicas > 0;
}

dlock_err dlock__lock_renew_sync(dlock_lock *l, int *marked)
{
    dlock__msg scratch;

    dlock__msg_clear(&scratch);
    return renew_once(l, dlock__lease_ttl_ms(&l->lease), marked, &scratch);
}

/* The loss as the owner reports it: marks the lock and runs on_lost if
 * this is the first to know. */
static dlock_err report_lost(dlock_lock *l, const char *what, dlock__msg *m)
{
    lost_found(l);
    return dlock__msg_set(m, DLOCK_LOST,
                          "%s of lock %.64s: its validity ran "
                          "out (no renewal reached %s in time)",
                          what, l->key, dlock_client_endpoint(l->client));
}

/* Inner release of a reentrant lock held more than once: local only while
 * validity is known positive, else asked of Redis. */
static dlock_err release_inner(dlock_lock *l, dlock__msg *m)
{
    dlock_err err = DLOCK_OK;

    if (dlock__lease_marked(&l->lease))
        err = dlock__msg_set(m, DLOCK_LOST,
                             "release of lock %.64s: it was "
                             "lost",
                             l->key);
    else if (dlock__lock_is_lost(l))
        err = report_lost(l, "release", m);
    reentrant_drop(l);
    return err;
}

int dlock__lock_release_begin(dlock_lock *l)
{
    if (l->watch != NULL) {
        dlock__watchdog_unwatch(dlock__client_watchdog(l->client), l->watch);
        l->watch = NULL;
    }
    return !l->degraded && dlock__lock_is_lost(l);
}

dlock_err dlock__lock_release_end(dlock_lock *l, int expired, dlock_err err,
                                  dlock__msg *m)
{
    leave_no_orphan(l, err);
    /* A validity that ran out is a loss whatever Redis says now (the key
     * may have been someone else's in between), and whether the release
     * reached it or not: what it could not delete is left to the
     * background release above, and the caller must hear that its work
     * was not protected to the end, not that Redis is down.  A release
     * that failed while the validity ran out is the same. */
    if (expired
        || (err != DLOCK_OK && err != DLOCK_LOST && dlock__lock_is_lost(l)))
        return report_lost(l, "release", m);
    if (err == DLOCK_LOST)
        lost_found(l);
    return err;
}

void dlock__lock_release_args(dlock_lock *l, char id[24], const char *argv[5])
{
    release_id(l, id);
    argv[0] = l->key;
    argv[1] = l->queue_key;
    argv[2] = l->token;
    argv[3] = l->channel;
    argv[4] = id;
}

const dlock__script *dlock__lock_release_script(void)
{
    return &release_script;
}

int dlock__lock_release_plain(const dlock_lock *l)
{
    return !l->fair && !l->degraded && !(l->reentrant && l->holds > 1)
           && redlock_of(l) == NULL;
}

dlock_err dlock_release(dlock_lock *l)
{
    dlock__msg *m;
    dlock_err err = DLOCK_OK;
    int expired;

    if (l == NULL)
        return DLOCK_OK;
    m = dlock__client_begin(l->client);
    if (l->reentrant && l->holds > 1)
        return release_inner(l, m);
    expired = dlock__lock_release_begin(l);
    if (!l->degraded)
        err = dlock__lock_release_end(l, expired, release_once(l, m), m);
    dlock_lock_free(l);
    return err;
}

dlock_err dlock__lock_extend_check(dlock_lock *l, int64_t *ttl_ms,
                                   dlock__msg *m)
{
    if (*ttl_ms < 0)
        return dlock__msg_set(m, DLOCK_INVALID, "extend by %lld ms",
                              (long long)*ttl_ms);
    if (l->degraded)
        return dlock__msg_set(m, DLOCK_STATE,
                              "extend of lock %.64s: it is "
                              "degraded",
                              l->key);
    if (dlock__lease_marked(&l->lease))
        return dlock__msg_set(m, DLOCK_STATE,
                              "extend of lock %.64s: it is "
                              "lost",
                              l->key);
    if (dlock__lock_is_lost(l))
        return report_lost(l, "extend", m);
    if (*ttl_ms == 0)
        *ttl_ms = dlock__lease_ttl_ms(&l->lease);
    return DLOCK_OK;
}

/* An extend to ttl_ms that succeeded: renewals ask for it from now on. */
static void extended(dlock_lock *l, int64_t ttl_ms)
{
    dlock__lease_set_ttl_ms(&l->lease, ttl_ms);
    if (l->watch != NULL)
        dlock__watchdog_reschedule(dlock__client_watchdog(l->client),
                                   l->watch);
}

dlock_err dlock__lock_extend_finish(dlock_lock *l, dlock__lease_ticket *t,
                                    int64_t ttl_ms, dlock_err err,
                                    redisReply *r, dlock__msg *m)
{
    int marked = 0;

    err = renew_answer(l, t, err, r, &marked, m);
    if (marked)
        dlock__lock_fire_lost(l);
    if (err == DLOCK_OK) {
        dlock__watchdog_recheck(dlock__client_watchdog(l->client));
        extended(l, ttl_ms);
    }
    return err;
}

dlock_err dlock_extend(dlock_lock *l, int64_t ttl_ms)
{
    dlock__msg *m;
    dlock_err err;

    if (l == NULL)
        return DLOCK_INVALID;
    m = dlock__client_begin(l->client);
    err = dlock__lock_extend_check(l, &ttl_ms, m);
    if (err != DLOCK_OK)
        return err;
    err = renew_now(l, ttl_ms, m);
    if (err == DLOCK_OK)
        extended(l, ttl_ms);
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
        return dlock__msg_set(m, DLOCK_INVALID,
                              "a lock token is %d hex "
                              "digits",
                              DLOCK_TOKEN_LEN);
    err = lock_new(c, key, out, m);
    if (err != DLOCK_OK)
        return err;
    for (int i = 0; i < DLOCK_TOKEN_LEN; i++) {
        char ch = token[i];

        (*out)->token[i] = (ch >= 'A' && ch <= 'F') ? (char)(ch + 32) : ch;
    }
    (*out)->token[DLOCK_TOKEN_LEN] = '\0';
    /* Released by the fair rule: it hands the key to the first fair
     * waiter if any are queued, and is the plain release otherwise. */
    (*out)->fair = 1;
    return DLOCK_OK;
}

int64_t dlock_lock_valid_ms(const dlock_lock *cl)
{
    dlock_lock *l = (dlock_lock *)cl; /* the lease's mutex is not const */

    if (l->degraded)
        return INT64_MAX;
    return dlock__lease_left_us(&l->lease, skew_of(l)) / 1000;
}

uint64_t dlock_lock_fence(const dlock_lock *l)
{
    return l->fence;
}

int dlock_lock_lost(const dlock_lock *cl)
{
    dlock_lock *l = (dlock_lock *)cl;

    return !l->degraded && dlock__lock_is_lost(l);
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

    if (r->type != REDIS_REPLY_ARRAY || r->elements != 5
        || r->element[3]->type != REDIS_REPLY_INTEGER
        || r->element[4]->type != REDIS_REPLY_INTEGER)
        return DLOCK_PROTOCOL;
    info->waiters = r->element[3]->integer;
    info->next_waiter_ms = r->element[4]->integer;
    tok = r->element[0];
    ttl = r->element[1];
    fence = r->element[2];
    if (tok->type != REDIS_REPLY_STRING || ttl->type != REDIS_REPLY_INTEGER
        || fence->type != REDIS_REPLY_STRING)
        return DLOCK_PROTOCOL;
    info->held = ttl->integer != -2;
    info->ttl_ms = ttl->integer >= 0 ? ttl->integer
                                     : (ttl->integer == -1 ? -1 : 0);
    if (!dlock__fence_of_reply(fence, &info->last_fence))
        info->last_fence = 0;
    snprintf(info->token, sizeof(info->token), "%.*s",
             (int)(tok->len > DLOCK_TOKEN_LEN ? DLOCK_TOKEN_LEN : tok->len),
             tok->str);
    return DLOCK_OK;
}

/* Reads key on every Redlock master into res (the round's results). */
static dlock_err redlock_inspect_round(dlock_client *c, const char *key,
                                       dlock__node_result *res, dlock__msg *m)
{
    dlock_lock *l = NULL;
    dlock_err err = check_key(key, m);

    if (err == DLOCK_OK)
        err = lock_new(c, key, &l, m);
    if (err == DLOCK_OK)
        err = dlock__redlock_inspect(dlock__client_redlock(c), l->key,
                                     l->fence_key,
                                     dlock__client_opts(c)->io_timeout_ms, res,
                                     m);
    dlock_lock_free(l);
    return err;
}

/* The Redlock view of key: held when a majority holds one token. */
static dlock_err redlock_inspect(dlock_client *c, const char *key,
                                 dlock_lock_info *info, dlock__msg *m)
{
    dlock__node_result res[DLOCK__NODES_MAX];
    dlock__redlock *r = dlock__client_redlock(c);
    dlock_err err = redlock_inspect_round(c, key, res, m);
    int holder;

    info->next_waiter_ms = -1;
    if (err != DLOCK_OK)
        return err;
    for (int i = 0; i < r->n; i++)
        if ((uint64_t)res[i].value2 > info->last_fence
            && res[i].vote == DLOCK__VOTE_YES)
            info->last_fence = (uint64_t)res[i].value2;
    holder = dlock__redlock_majority_holder(res, r->n, &info->ttl_ms);
    if (holder >= 0) {
        info->held = 1;
        snprintf(info->token, sizeof(info->token), "%.*s", DLOCK_TOKEN_LEN,
                 res[holder].text);
    }
    return DLOCK_OK;
}

dlock_err dlock_inspect_nodes(dlock_client *c, const char *key,
                              dlock_node_info *out, int max, int *n)
{
    dlock__node_result res[DLOCK__NODES_MAX];
    const char *descs[DLOCK__NODES_MAX];
    dlock__redlock *r;
    dlock__msg *m;
    dlock_err err;

    if (c == NULL || out == NULL || n == NULL || max < 0)
        return DLOCK_INVALID;
    *n = 0;
    m = dlock__client_begin(c);
    r = dlock__client_redlock(c);
    if (r == NULL)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "%s: one server decides each lock; use "
                              "dlock_inspect",
                              dlock_client_endpoint(c));
    err = redlock_inspect_round(c, key, res, m);
    if (err != DLOCK_OK)
        return err;
    dlock__redlock_descs(r, descs);
    for (int i = 0; i < r->n && i < max; i++, (*n)++) {
        dlock_node_info *o = &out[i];

        memset(o, 0, sizeof(*o));
        snprintf(o->node, sizeof(o->node), "%s", descs[i]);
        o->answered = res[i].vote == DLOCK__VOTE_YES;
        o->held = o->answered && res[i].text[0] != '\0';
        o->ttl_ms = o->held ? res[i].value : 0;
        snprintf(o->token, sizeof(o->token), "%.*s", DLOCK_TOKEN_LEN,
                 res[i].text);
        snprintf(o->why, sizeof(o->why), "%.95s", res[i].why);
    }
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
    if (dlock__client_redlock(c) != NULL)
        return redlock_inspect(c, key, info, m);
    err = check_key(key, m);
    if (err == DLOCK_OK)
        err = lock_new(c, key, &l, m);
    if (err != DLOCK_OK)
        return err;
    {
        const char *argv[] = {l->key, l->fence_key, l->legacy_fence_key,
                              l->queue_key, l->waiters_key};

        err = dlock__client_eval(c, &inspect_script, 5, 5, argv, NULL, &r, m);
    }
    if (err == DLOCK_OK) {
        err = parse_inspect(r, info);
        if (err != DLOCK_OK)
            dlock__msg_set(m, err,
                           "inspecting lock %.64s on %s: expected "
                           "{token, pttl, fence, waiters, next}, got %s",
                           key, dlock_client_endpoint(c),
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
