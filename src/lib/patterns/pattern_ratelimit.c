/*
 * pattern_ratelimit.c: GCRA rate limiting on the server's clock (see
 * dlock/ratelimit.h for the algorithm and what it guarantees).
 *
 * One script decides, and may reserve:
 *   gcra  KEYS[1] the TAT key; ARGV interval T (us), burst B, cost n, and
 *         the longest wait the caller accepts (us; 0 for take, < 0 for
 *         any).  From the server's TIME: tat = max(stored, now); the
 *         request's slot is tat + n*T - B*T (or now, if that is earlier).
 *         If the slot is within the accepted wait, the TAT advances and
 *         the answer is {1, wait, remaining, now}; otherwise nothing
 *         changes and the answer is {0, wait, remaining, now}.
 * Integers in Lua are doubles: server microseconds (about 2^51 today) and
 * B*T (bounded to a year of microseconds by dlock_ratelimit_new) stay
 * exact, below 2^53.
 *
 * A rate limiter is asked on every request it guards, so the script is
 * written for what redis-server spends on it, as the fragments of
 * pattern_common.h are (docs/benchmarks.md, "Session 18: the patterns'
 * scripts"): no tonumber calls, no closure made per call, the numbers
 * handed to SET printed by string.format('%d'), and only the time it
 * needs (DLOCK__LUA_NOW_MS's milliseconds would cost 0.7k instructions
 * a decision, 1 %).  The answer stays a
 * table: its four numbers go to the client as integers, where an answer
 * in words would make Lua print each of them (the lock's scripts answer
 * in words because their numbers are strings already).
 *
 * The script is not retry_safe: run twice it takes twice.  A call whose
 * connection died mid-way is reported to the caller instead, who may ask
 * again; at worst a slot is wasted, never granted twice.
 */
#include "dlock/ratelimit.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/decimal.h"
#include "patterns/pattern_common.h"

static const dlock__script gcra_script = {
    "ratelimit.gcra",
    "local call = redis.call\n"
    "local t = call('TIME')\n"
    "local now_us = t[1] * 1000000 + t[2]\n"
    "local T = ARGV[1] + 0\n"
    "local BT = ARGV[2] * T\n"
    "local tat = call('GET', KEYS[1])\n"
    "tat = tat and tat + 0 or 0\n"
    "if tat < now_us then tat = now_us end\n"
    "local new_tat = tat + ARGV[3] * T\n"
    "local wait = new_tat - now_us - BT\n"
    "if wait < 0 then wait = 0 end\n"
    "local allowed, at = 1, new_tat\n"
    "local max_wait = ARGV[4] + 0\n"
    "if max_wait >= 0 and wait > max_wait then\n"
    "  allowed, at = 0, tat\n"
    "else\n"
    "  call('SET', KEYS[1], string.format('%d', new_tat), 'PX',\n"
    "       string.format('%d', math.floor((new_tat - now_us) / 1000) + 1))\n"
    "end\n"
    "local remaining = math.floor((BT - (at - now_us)) / T)\n"
    "if remaining < 0 then remaining = 0 end\n"
    "return {allowed, wait, remaining, now_us}\n",
    0,
};

struct dlock_ratelimit {
    dlock_client *client;
    char *name;
    char *key;
    int64_t interval_us;
    int64_t burst;
};

void dlock_ratelimit_free(dlock_ratelimit *rl)
{
    if (rl == NULL)
        return;
    dlock__free(rl->name);
    dlock__free(rl->key);
    dlock__free(rl);
}

static dlock_err check_rate(const char *name, int64_t rate, int64_t period_ms,
                            int64_t burst, dlock__msg *m)
{
    int64_t interval;

    if (rate < 1 || period_ms < 1 || period_ms > DLOCK__PATTERN_MAX_MS)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "rate limiter %.64s: %lld "
                              "per %lld ms needs rate >= 1 and a period of "
                              "1 ms..1 year",
                              name, (long long)rate, (long long)period_ms);
    interval = period_ms * 1000 / rate;
    if (interval < 1)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "rate limiter %.64s: %lld "
                              "per %lld ms is more than one per "
                              "microsecond",
                              name, (long long)rate, (long long)period_ms);
    if (burst < 1 || burst > DLOCK__PATTERN_MAX_MS * 1000 / interval)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "rate limiter %.64s: burst "
                              "%lld is not 1..%lld (a year of intervals)",
                              name, (long long)burst,
                              (long long)(DLOCK__PATTERN_MAX_MS * 1000
                                          / interval));
    return DLOCK_OK;
}

dlock_err dlock_ratelimit_new(dlock_client *c, const char *name, int64_t rate,
                              int64_t period_ms, int64_t burst,
                              dlock_ratelimit **out)
{
    dlock_ratelimit *rl;
    dlock__msg *m;
    dlock_err err;

    if (out != NULL)
        *out = NULL;
    err = dlock__pattern_open(c, out != NULL, "rate limiter", name, &m);
    if (err == DLOCK_OK)
        err = check_rate(name, rate, period_ms, burst, m);
    if (err != DLOCK_OK)
        return err;
    rl = dlock__calloc(1, sizeof(*rl));
    if (rl == NULL)
        goto nomem;
    rl->client = c;
    rl->interval_us = period_ms * 1000 / rate;
    rl->burst = burst;
    rl->name = dlock__strdup(name);
    rl->key = dlock__pattern_key("rl", name, "");
    if (rl->name == NULL || rl->key == NULL)
        goto nomem;
    *out = rl;
    return DLOCK_OK;
nomem:
    dlock_ratelimit_free(rl);
    return dlock__msg_set(m, DLOCK_NOMEM, "allocating rate limiter %.64s",
                          name);
}

/* One decision; max_wait_us 0 for take, < 0 for any wait. */
static dlock_err decide(dlock_ratelimit *rl, int64_t cost, int64_t max_wait_us,
                        dlock_ratelimit_result *res, dlock__msg *m)
{
    char interval[24], burst[24], n[24], max_wait[24];
    const char *argv[] = {rl->key, interval, burst, n, max_wait};
    long long v[4];
    redisReply *r;
    dlock_err err;

    dlock__decimal_i64(interval, rl->interval_us);
    dlock__decimal_i64(burst, rl->burst);
    dlock__decimal_i64(n, cost);
    dlock__decimal_i64(max_wait, max_wait_us);
    err = dlock__client_eval(rl->client, &gcra_script, 1, 5, argv, NULL, &r,
                             m);
    if (err != DLOCK_OK)
        return dlock__msg_wrap(m, err, "rate limiter %.64s", rl->name);
    if (!dlock__pattern_ints(r, 4, v)) {
        err = dlock__pattern_bad_reply(rl->client, "ratelimit.gcra",
                                       "{allowed, wait, remaining, now}", r,
                                       m);
        freeReplyObject(r);
        return err;
    }
    freeReplyObject(r);
    res->allowed = v[0] == 1;
    res->wait_us = v[1];
    res->remaining = v[2];
    res->server_time_us = v[3];
    return DLOCK_OK;
}

static dlock_err check_cost(const dlock_ratelimit *rl, int64_t cost,
                            dlock__msg *m)
{
    if (cost < 1 || cost > rl->burst)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "rate limiter %.64s: cost "
                              "%lld is not 1..%lld (the burst)",
                              rl->name, (long long)cost, (long long)rl->burst);
    return DLOCK_OK;
}

/* The opening of take and wait: the result (*res, or local when NULL)
 * zeroed, the call's message begun (*m), the cost checked. */
static dlock_err open_call(dlock_ratelimit *rl, int64_t cost,
                           dlock_ratelimit_result **res,
                           dlock_ratelimit_result *local, dlock__msg **m)
{
    *m = NULL;
    if (*res == NULL)
        *res = local;
    memset(*res, 0, sizeof(**res));
    if (rl == NULL)
        return DLOCK_INVALID;
    *m = dlock__client_begin(rl->client);
    return check_cost(rl, cost, *m);
}

dlock_err dlock_ratelimit_take(dlock_ratelimit *rl, int64_t cost,
                               dlock_ratelimit_result *res)
{
    dlock_ratelimit_result local;
    dlock__msg *m;
    dlock_err err = open_call(rl, cost, &res, &local, &m);

    if (err == DLOCK_OK)
        err = decide(rl, cost, 0, res, m);
    if (err != DLOCK_OK || res->allowed)
        return err;
    dlock__pattern_set_busy_ttl(rl->client, (res->wait_us + 999) / 1000);
    return dlock__msg_set(m, DLOCK_BUSY,
                          "rate limiter %.64s on %s: %lld "
                          "per %lld us with a burst of %lld is used up; the "
                          "next slot is in %lld us",
                          rl->name, dlock_client_endpoint(rl->client),
                          (long long)cost, (long long)rl->interval_us,
                          (long long)rl->burst, (long long)res->wait_us);
}

dlock_err dlock_ratelimit_wait(dlock_ratelimit *rl, int64_t cost,
                               int64_t max_wait_ms,
                               dlock_ratelimit_result *res)
{
    dlock_ratelimit_result local;
    int64_t max_wait_us, answered;
    dlock__msg *m;
    dlock_err err = open_call(rl, cost, &res, &local, &m);

    if (err != DLOCK_OK)
        return err;
    if (max_wait_ms > DLOCK__PATTERN_MAX_MS)
        max_wait_ms = DLOCK__PATTERN_MAX_MS;
    max_wait_us = max_wait_ms < 0 ? -1 : max_wait_ms * 1000;
    err = decide(rl, cost, max_wait_us, res, m);
    answered = dlock__now_us();
    if (err != DLOCK_OK)
        return err;
    if (!res->allowed)
        return dlock__msg_set(m, DLOCK_TIMEOUT,
                              "rate limiter %.64s on %s: "
                              "the next slot is in %lld us, beyond the %lld "
                              "ms allowed",
                              rl->name, dlock_client_endpoint(rl->client),
                              (long long)res->wait_us, (long long)max_wait_ms);
    /* The slot is wait_us after the server decided, and the answer came
     * after that: sleeping from its arrival never ends before the slot. */
    if (res->wait_us > 0)
        dlock__wait_sleep_until(answered + res->wait_us);
    return DLOCK_OK;
}

int64_t dlock_ratelimit_interval_us(const dlock_ratelimit *rl)
{
    return rl->interval_us;
}
