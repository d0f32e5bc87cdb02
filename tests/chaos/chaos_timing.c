/*
 * chaos_timing.c: the faults that change time rather than processes
 * (chaos_nemesis.h): a holder's network gone silent, the server's wall
 * clock stepped, the server or the network slow.
 *
 * They are the faults of issue 13 under which a lock most easily believes
 * it holds more than it can know.  A silent network holds the holder's
 * renewals (the proxy keeps the bytes and resets nothing, so the client
 * sees no error, only no answer); a clock step moves the moment Redis
 * expires the key; a slow server or network delays every answer.  In each
 * the holder must give up (and `dlock run` stop its command) by its own
 * deadline, before Redis can grant the lock to anyone else.
 *
 * Clock steps inside the promise are backward steps of any size and
 * forward steps smaller than what a renewal leaves of the lease (TTL / 5,
 * renewals run every TTL / 3 at most); a jump forward past the lease is
 * the documented exception (docs/guarantees.md) and has its own phase.
 */
#include <stdio.h>
#include <string.h>

#include "chaos_nemesis.h"

/* Spins the server in a script for ARGV[1] ms of its own clock. */
static const char BUSY_SCRIPT[] =
    "local t = redis.call('TIME') "
    "local stop = t[1] * 1000000 + t[2] + ARGV[1] * 1000 "
    "repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] >= stop "
    "return 1";

int chaos_fault_net_silence(chaos_nemesis *n)
{
    chaos_proc *p = chaos_pick_holder(n);
    int64_t ms = chaos_fault_ms(n, n->cfg.ttl_ms * 3 / 2, n->cfg.ttl_ms * 3);
    testkit_proxy *proxy;

    if (p == NULL)
        return 0;
    proxy = n->proxies[p->id];
    chaos_event(n->events, "fault net_silence %d %lld", p->id, (long long)ms);
    if (testkit_proxy_ctl(proxy, "pause") != 0)
        return -1;
    chaos_sleep_us(ms * 1000);
    if (testkit_proxy_ctl(proxy, "resume") != 0)
        return -1;
    chaos_event(n->events, "fault_end net_silence %d", p->id);
    return 1;
}

/* Sets the server's clock offset and logs the step as kind. */
static int clock_set(chaos_nemesis *n, const char *kind, int64_t offset_ms)
{
    int64_t step = offset_ms - n->clock_ms;

    chaos_event(n->events, "fault %s 0 %lld", kind,
                (long long)(step < 0 ? -step : step));
    if (testkit_redis_clock_step(n->redis, offset_ms) != 0)
        return -1;
    n->clock_ms = offset_ms;
    chaos_event(n->events, "fault_end %s 0", kind);
    return 1;
}

int chaos_fault_clock_step(chaos_nemesis *n)
{
    int64_t ttl = n->cfg.ttl_ms;

    if (chaos_rng_range(&n->rng, 0, 1) == 0)
        return clock_set(n, "clock_back",
                         n->clock_ms
                             - chaos_rng_range(&n->rng, ttl / 2, ttl * 3));
    return clock_set(n, "clock_fwd",
                     n->clock_ms + chaos_rng_range(&n->rng, 1, ttl / 5));
}

int chaos_fault_clock_jump(chaos_nemesis *n)
{
    int64_t ttl = n->cfg.ttl_ms;
    int64_t jump = chaos_rng_range(&n->rng, ttl, ttl * 3);
    int64_t before = n->clock_ms;

    if (clock_set(n, "clock_jump", before + jump) < 0)
        return -1;
    chaos_sleep_us(1000 * chaos_fault_ms(n, ttl, ttl * 2));
    return clock_set(n, "clock_back", before);
}

/* Every proxy delays each chunk by ms (0: no delay). */
static int delay_all(chaos_nemesis *n, int64_t ms)
{
    char cmd[32];

    snprintf(cmd, sizeof(cmd), "delay %lld", (long long)ms);
    for (int i = 0; i < CHAOS_CLIENTS_MAX; i++)
        if (n->proxies[i] != NULL && testkit_proxy_ctl(n->proxies[i], cmd))
            return -1;
    return 0;
}

int chaos_fault_slow(chaos_nemesis *n)
{
    int64_t ttl = n->cfg.ttl_ms;

    if (chaos_rng_range(&n->rng, 0, 1) == 0) {
        int64_t ms = chaos_fault_ms(n, ttl / 10, ttl / 2);
        redisReply *r;
        int ok;

        chaos_event(n->events, "fault slow_lua 0 %lld", (long long)ms);
        r = testkit_redis_cmd(n->redis->admin_url, "EVAL %s 0 %lld",
                              BUSY_SCRIPT, (long long)ms);
        ok = r != NULL && r->type == REDIS_REPLY_INTEGER;
        if (!ok)
            fprintf(stderr, "chaos: the busy script failed: %s\n",
                    r != NULL && r->str != NULL ? r->str : "no reply");
        freeReplyObject(r);
        chaos_event(n->events, "fault_end slow_lua 0");
        return ok ? 1 : -1;
    }
    {
        int64_t ms = chaos_rng_range(&n->rng, ttl / 50, ttl * 15 / 100);
        int64_t lasts = chaos_fault_ms(n, 1000, 2000);

        chaos_event(n->events, "fault slow_net 0 %lld", (long long)ms);
        if (delay_all(n, ms) != 0)
            return -1;
        chaos_sleep_us(lasts * 1000);
        if (delay_all(n, 0) != 0)
            return -1;
        chaos_event(n->events, "fault_end slow_net 0");
        return 1;
    }
}
