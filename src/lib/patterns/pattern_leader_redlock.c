/*
 * pattern_leader_redlock.c: leader election on a redlock:// client (see
 * pattern_leader_redlock.h for the design, dlock/leader.h for the API).
 *
 * Why not the one-server scripts on each master: a campaign script there
 * makes the term and the lease in one atomic step on one server, which N
 * independent masters cannot share; a term counted on each master would
 * differ from master to master, and the lease of a majority is what
 * Redlock grants.  So the campaign is dlock__redlock_acquire with the term
 * key as its fence key (the majority fence: the term is the fence), the
 * renewal dlock__redlock_extend, the resignation dlock__redlock_release
 * with the role's channel; all three are the core lock's rounds, so the
 * leader inherits their per-node timeout, validity (TTL - elapsed -
 * drift) and fail-closed rule.
 *
 * The tick claim is the one step of its own: a script on every master that
 * answers {1, last} (taken: the lease there holds our token and the tick
 * is above the last one run there, which it then becomes), {0, last} (run
 * already) or {2, -1} (the lease there is not ours).  A claim runs only
 * when a majority took it: two claims of one tick cannot both reach a
 * majority, because the master they share takes a tick once, and a tick
 * below one already run anywhere on a majority is never taken again.  So
 * a tick runs at most once, and ticks run in increasing order, whatever
 * the timing; what needs the masters to keep their data (appendonly with
 * fsync) is the same as for the fence.  A claim that fails halfway leaves
 * the tick taken on a minority: that tick is skipped, never doubled.
 */
#include "patterns/pattern_leader_redlock.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "client/client_internal.h"
#include "base/clock.h"
#include "base/decimal.h"
#include "deploy/redlock.h"

/* KEYS: lease, tick.  ARGV: token, period, call id, tick. */
static const char tick_lua[] =
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {2, -1} end\n"
    "local t = redis.call('HMGET', KEYS[2], 'n', 'period', 'by')\n"
    "local last = -1\n"
    "if t[1] and t[2] == ARGV[2] then last = tonumber(t[1]) end\n"
    "local n = tonumber(ARGV[4])\n"
    "if n == last and t[3] == ARGV[3] then return {1, -1} end\n"
    "if n <= last then return {0, last} end\n"
    "redis.call('HSET', KEYS[2], 'n', ARGV[4], 'period', ARGV[2], 'by',\n"
    "           ARGV[3])\n"
    "return {1, last}\n";

static dlock__redlock *redlock_of(const dlock__pattern_lease *pl)
{
    return dlock__client_redlock(pl->client);
}

/* As the core lock's: a tenth of the TTL, 5 ms .. the I/O timeout. */
static int64_t node_timeout_ms(dlock_client *c, int64_t ttl_ms)
{
    return dlock__redlock_node_timeout_ms(
        ttl_ms, 5, dlock__client_opts(c)->io_timeout_ms);
}

dlock_err dlock__leader_redlock_campaign(dlock__pattern_lease *pl,
                                         const dlock__leader_keys *k,
                                         int64_t *hint_ms, dlock__msg *m)
{
    const int64_t ttl_ms = dlock__pattern_lease_ttl_ms(pl);
    dlock__lease_ticket t = dlock__pattern_lease_begin(pl, ttl_ms);
    dlock__redlock_busy busy = {0};
    int64_t validity = 0;
    uint64_t term = 0;
    dlock_err err;

    err = dlock__redlock_acquire(redlock_of(pl), k->lease_key, k->term_key,
                                 pl->token, ttl_ms,
                                 node_timeout_ms(pl->client, ttl_ms),
                                 &validity, &term, &busy, m);
    if (err == DLOCK_OK)
        pl->fence = term;
    /* As the core lock's waiting does on Redlock (lock.c): soon after a
     * round that found the lease free somewhere, else at a tenth of the
     * TTL unless woken. */
    if (err == DLOCK_BUSY)
        *hint_ms = busy.free_somewhere ? dlock__redlock_retry_delay_ms(
                       DLOCK__REDLOCK_SPLIT_RETRY_MS)
                                       : ttl_ms / 10;
    if (err == DLOCK_BUSY && *hint_ms < 1)
        *hint_ms = 1;
    return dlock__pattern_lease_end(pl, &t, err);
}

dlock_err dlock__leader_redlock_renew(dlock__pattern_lease *pl,
                                      const dlock__leader_keys *k,
                                      dlock__msg *m)
{
    const int64_t ttl_ms = dlock__pattern_lease_ttl_ms(pl);
    dlock__lease_ticket t;
    int64_t validity = 0;
    dlock_err err;

    if (dlock__lease_marked(&pl->lease))
        return dlock__msg_set(m, DLOCK_STATE,
                              "renewal of leader %.64s: it is lost", k->name);
    if (dlock__pattern_lease_lost(pl)) {
        dlock__pattern_lease_found_lost(pl);
        return dlock__msg_set(m, DLOCK_LOST,
                              "renewal of leader %.64s: its validity ran out "
                              "(no majority renewed it in time)",
                              k->name);
    }
    t = dlock__pattern_lease_begin(pl, ttl_ms);
    err = dlock__redlock_extend(redlock_of(pl), k->lease_key, pl->token,
                                ttl_ms, node_timeout_ms(pl->client, ttl_ms),
                                &validity, m);
    dlock__pattern_lease_end(pl, &t, err);
    if (err == DLOCK_LOST)
        dlock__pattern_lease_found_lost(pl);
    if (err != DLOCK_OK)
        return dlock__msg_wrap(m, err, "renewal of leader %.64s", k->name);
    return DLOCK_OK;
}

dlock_err dlock__leader_redlock_resign(dlock__pattern_lease *pl,
                                       const dlock__leader_keys *k,
                                       dlock__msg *m)
{
    const int64_t ttl_ms = dlock__pattern_lease_ttl_ms(pl);
    dlock_err err;

    err = dlock__redlock_release(redlock_of(pl), k->lease_key, pl->token,
                                 k->channel,
                                 node_timeout_ms(pl->client, ttl_ms), m);
    if (err != DLOCK_OK)
        return dlock__msg_wrap(m, err, "resignation of leader %.64s", k->name);
    return DLOCK_OK;
}

/* {status, last}: YES for 1, NO otherwise; value the status, value2 the
 * last tick run there. */
static void judge_tick(const redisReply *reply, dlock__node_result *res)
{
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2
        || reply->element[0]->type != REDIS_REPLY_INTEGER
        || reply->element[1]->type != REDIS_REPLY_INTEGER)
        return;
    res->value = reply->element[0]->integer;
    res->value2 = reply->element[1]->integer;
    res->vote = res->value == 1 ? DLOCK__VOTE_YES : DLOCK__VOTE_NO;
}

/* The tick the local wall clock is in, and the time to the next one. */
static void local_tick(int64_t period_ms, dlock_leader_tick_info *info)
{
    struct timespec ts;
    int64_t now;

    clock_gettime(CLOCK_REALTIME, &ts);
    now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    info->tick = now / period_ms;
    info->next_in_ms = (info->tick + 1) * period_ms - now;
    info->skipped = 0;
}

/* How many ticks were skipped before info->tick: from the highest last
 * tick the masters that took it reported. */
static int64_t skipped_before(const dlock__node_result *res, int n,
                              int64_t tick)
{
    int64_t last = -1;

    for (int i = 0; i < n; i++)
        if (res[i].vote == DLOCK__VOTE_YES && res[i].value2 > last)
            last = res[i].value2;
    return last >= 0 && tick - last - 1 > 0 ? tick - last - 1 : 0;
}

/* After a round without a majority: LOST when most refusals were "the
 * lease is not ours", else BUSY (the tick was run already). */
static dlock_err refused_tick(const dlock__node_result *res, int n,
                              const dlock__leader_keys *k, int64_t tick,
                              dlock__msg *m)
{
    int not_ours = 0, run = 0;

    for (int i = 0; i < n; i++) {
        if (res[i].vote != DLOCK__VOTE_NO)
            continue;
        if (res[i].value == 2)
            not_ours++;
        else
            run++;
    }
    if (not_ours > run)
        return dlock__msg_set(m, DLOCK_LOST,
                              "tick %" PRId64 " of leader %.64s: the lease "
                              "is another's on %d of %d masters",
                              tick, k->name, not_ours, n);
    return dlock__msg_set(m, DLOCK_BUSY,
                          "tick %" PRId64 " of leader %.64s was run "
                          "already (%d of %d masters say so)",
                          tick, k->name, run, n);
}

dlock_err dlock__leader_redlock_tick(dlock__pattern_lease *pl,
                                     const dlock__leader_keys *k, int leading,
                                     int64_t ttl_ms, int64_t period_ms,
                                     const char *call,
                                     dlock_leader_tick_info *info,
                                     dlock__msg *m)
{
    dlock__node_result res[DLOCK__NODES_MAX];
    const char *descs[DLOCK__NODES_MAX];
    dlock__redlock *r = redlock_of(pl);
    char period[24], tick[24], what[128];
    const char *ka[] = {k->lease_key, k->tick_key, pl->token,
                        period,       call,        tick};
    int64_t unused;
    dlock_err err;

    local_tick(period_ms, info);
    if (!leading)
        return dlock__msg_set(m, DLOCK_LOST,
                              "tick %" PRId64 " of leader %.64s: this "
                              "candidate does not lead",
                              info->tick, k->name);
    dlock__decimal_i64(period, period_ms);
    dlock__decimal_i64(tick, info->tick);
    err = dlock__redlock_eval(r, tick_lua, 2, ka, 4,
                              node_timeout_ms(pl->client, ttl_ms), judge_tick,
                              res, m);
    if (err != DLOCK_OK)
        return dlock__msg_wrap(m, err, "tick of leader %.64s", k->name);
    snprintf(what, sizeof(what), "tick %" PRId64 " of leader %.64s",
             info->tick, k->name);
    /* A majority of answers is what counts; no TTL bounds a claim. */
    err = dlock__redlock_decide(res, r->n, dlock__redlock_descs(r, descs),
                                what, INT32_MAX, 0, &unused, m);
    if (err == DLOCK_BUSY)
        return refused_tick(res, r->n, k, info->tick, m);
    if (err != DLOCK_OK)
        return err;
    info->skipped = skipped_before(res, r->n, info->tick);
    dlock__msg_clear(m);
    return DLOCK_OK;
}

/* {token, pttl, counter} from every master: YES for any answer. */
dlock_err dlock__leader_redlock_inspect(dlock_client *c,
                                        const dlock__leader_keys *k,
                                        dlock_leader_info *info, dlock__msg *m)
{
    dlock__node_result res[DLOCK__NODES_MAX];
    const char *descs[DLOCK__NODES_MAX];
    dlock__redlock *r = dlock__client_redlock(c);
    const int64_t io_ms = dlock__client_opts(c)->io_timeout_ms;
    int64_t unused, ttl;
    char what[96];
    dlock_err err;

    err = dlock__redlock_inspect(r, k->lease_key, k->term_key,
                                 node_timeout_ms(c, io_ms * 10), res, m);
    if (err != DLOCK_OK)
        return err;
    snprintf(what, sizeof(what), "inspecting leader %.64s", k->name);
    err = dlock__redlock_decide(res, r->n, dlock__redlock_descs(r, descs),
                                what, INT32_MAX, 0, &unused, m);
    if (err != DLOCK_OK)
        return err;
    for (int i = 0; i < r->n; i++)
        if (res[i].vote == DLOCK__VOTE_YES
            && (uint64_t)res[i].value2 > info->last_term)
            info->last_term = (uint64_t)res[i].value2;
    info->held = dlock__redlock_majority_holder(res, r->n, &ttl) >= 0;
    info->ttl_ms = ttl > 0 ? ttl : 0;
    dlock__msg_clear(m);
    return DLOCK_OK;
}
