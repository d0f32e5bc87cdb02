/*
 * pattern_lease.c: validity, loss and fences of a pattern's grant (see
 * pattern_lease.h).
 *
 * Built on the core's parts, not beside them: the validity is lease.c's,
 * the deadline that acts by itself is the watchdog's timer (watchdog.h,
 * timer-only registration), the floor is fence.c's, the waiting wait.c's.
 * What this file adds is the glue each pattern would otherwise repeat:
 * one request = one ticket, one round trip capped at valid_until, one way
 * to read {granted, fence} and to report a lost grant.
 */
#include "patterns/pattern_lease.h"

#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/decimal.h"
#include "client/fence.h"
#include "patterns/pattern_common.h"
#include "lock/watchdog.h"

#define ARGV_MAX 16

static dlock__skew *skew_of(const dlock__pattern_lease *pl)
{
    return dlock__client_skew(pl->client);
}

dlock_err dlock__pattern_lease_init(dlock__pattern_lease *pl, dlock_client *c,
                                    int64_t ttl_ms, const char *what,
                                    const char *name, dlock__msg *m)
{
    memset(pl, 0, sizeof(*pl));
    pl->client = c;
    pl->what = what;
    pl->name = name;
    dlock__lease_init(&pl->lease, ttl_ms);
    return dlock__token_new(pl->token, m);
}

void dlock__pattern_lease_leave_timer(dlock__pattern_lease *pl)
{
    if (pl->watch != NULL) {
        dlock__watchdog_unwatch(dlock__client_watchdog(pl->client), pl->watch);
        pl->watch = NULL;
    }
}

void dlock__pattern_lease_destroy(dlock__pattern_lease *pl)
{
    dlock__pattern_lease_leave_timer(pl);
    dlock__lease_destroy(&pl->lease);
}

void dlock__pattern_lease_reset(dlock__pattern_lease *pl, int64_t ttl_ms)
{
    dlock__pattern_lease_leave_timer(pl);
    dlock__lease_destroy(&pl->lease);
    dlock__lease_init(&pl->lease, ttl_ms);
    pl->fence = 0;
}

/* ---- the timer's view ------------------------------------------------ */

static dlock__lease *timer_lease(void *owner)
{
    return &((dlock__pattern_lease *)owner)->lease;
}

static int timer_mark_lost(void *owner)
{
    return dlock__lease_mark_lost(timer_lease(owner));
}

static void timer_fire(void *owner)
{
    const dlock__pattern_callback *cb = &((dlock__pattern_lease *)owner)
                                             ->on_lost;

    switch (cb->kind) {
    case DLOCK__LOST_NONE: break;
    case DLOCK__LOST_PERMIT: cb->fn.permit(cb->object, cb->arg); break;
    case DLOCK__LOST_HOLD: cb->fn.hold(cb->object, cb->arg); break;
    case DLOCK__LOST_INTERNAL: cb->fn.internal(cb->arg); break;
    }
}

static const dlock__watch_ops timer_ops = {timer_lease, timer_mark_lost,
                                           timer_fire};

dlock_err dlock__pattern_lease_on_lost(dlock__pattern_lease *pl,
                                       const dlock__pattern_callback *cb,
                                       dlock__msg *m)
{
    dlock__pattern_lease_leave_timer(pl);
    pl->on_lost.kind = DLOCK__LOST_NONE;
    if (dlock__pattern_lease_lost(pl))
        return dlock__msg_set(m, DLOCK_STATE,
                              "%s %.64s: the grant is lost already", pl->what,
                              pl->name);
    /* Every member of the union is a function pointer: one test serves. */
    if (cb->kind == DLOCK__LOST_NONE || cb->fn.internal == NULL)
        return DLOCK_OK;
    pl->on_lost = *cb;
    return dlock__watchdog_watch_lease(dlock__client_watchdog(pl->client),
                                       &timer_ops, pl, &pl->watch, m);
}

void dlock__pattern_lease_found_lost(dlock__pattern_lease *pl)
{
    if (dlock__lease_mark_lost(&pl->lease))
        timer_fire(pl);
}

/* ---- requests -------------------------------------------------------- */

/* The monotonic time (clock.h) of a CLOCK_BOOTTIME instant. */
static int64_t mono_of_boot(int64_t boot_us)
{
    int64_t left = boot_us - dlock__boot_us();

    return dlock__now_us() + (left > 0 ? left : 0);
}

static void set_io_cap(dlock__pattern_lease *pl, int64_t until_mono_us)
{
    dlock__tstate *t = dlock__client_tstate(pl->client);

    if (t != NULL)
        t->io_until_us = until_mono_us;
}

dlock__lease_ticket dlock__pattern_lease_begin(dlock__pattern_lease *pl,
                                               int64_t ttl_ms)
{
    dlock__lease_ticket t = dlock__lease_begin(&pl->lease, ttl_ms,
                                               skew_of(pl));
    int64_t until = dlock__lease_until(&pl->lease, skew_of(pl));

    /* A held grant's request is worth an answer only until it ends;
     * before the first grant there is nothing to outlive. */
    if (until != 0)
        set_io_cap(pl, mono_of_boot(until));
    if (pl->watch != NULL)
        dlock__watchdog_recheck(dlock__client_watchdog(pl->client));
    return t;
}

dlock_err dlock__pattern_lease_end(dlock__pattern_lease *pl,
                                   const dlock__lease_ticket *t, dlock_err err)
{
    /* A timeout or a dead connection may have run it; an answer that
     * refused it, or a request never sent, did not. */
    dlock__lease_outcome outcome = err == DLOCK_OK ? DLOCK__LEASE_GRANTED
                                   : err == DLOCK_NOMEM || err == DLOCK_INVALID
                                           || err == DLOCK_BUSY
                                           || err == DLOCK_LOST
                                           || err == DLOCK_UNPROVEN
                                       ? DLOCK__LEASE_NOT_RUN
                                       : DLOCK__LEASE_UNKNOWN;

    set_io_cap(pl, 0);
    dlock__lease_end(&pl->lease, t, outcome);
    if (pl->watch != NULL)
        dlock__watchdog_recheck(dlock__client_watchdog(pl->client));
    return err;
}

/* Reads {1, fence} | {0, pttl} | {2, now}: *value the fence or now,
 * *pttl the holder's PTTL (as Redis says it, -1 included). */
static int read_grant(const redisReply *r, long long *status, uint64_t *value,
                      int64_t *pttl)
{
    if (!dlock__pattern_ints(r, 1, status) || r->elements != 2)
        return 0;
    if (*status == 0) {
        if (r->element[1]->type != REDIS_REPLY_INTEGER)
            return 0;
        *pttl = r->element[1]->integer;
        return 1;
    }
    return (*status == 1 || *status == 2)
           && dlock__fence_of_reply(r->element[1], value);
}

/* The answer {2, now}: the server's clock is behind the floor. */
static dlock_err unproven(dlock__pattern_lease *pl, uint64_t floor,
                          uint64_t now, dlock__msg *m)
{
    pl->fence_gap_us = floor > now ? (int64_t)(floor - now) + 1 : 1;
    return dlock__msg_set(m, DLOCK_UNPROVEN,
                          "%s %.64s on %s: its fence counter is gone or "
                          "behind and the server's clock (%llu us) is %lld "
                          "ms behind the highest fence or time this client "
                          "has seen (%llu); no fence above it can be shown "
                          "(a restart without persistence, a failover to a "
                          "lagging replica, or a clock stepped back?)",
                          pl->what, pl->name,
                          dlock_client_endpoint(pl->client),
                          (unsigned long long)now,
                          (long long)(pl->fence_gap_us / 1000),
                          (unsigned long long)floor);
}

dlock_err dlock__pattern_lease_try(dlock__pattern_lease *pl,
                                   const dlock__script *s, int nkeys, int argc,
                                   const char **argv, int64_t *hint_ms,
                                   dlock__msg *m)
{
    const char *av[ARGV_MAX];
    char floor_arg[24];
    const uint64_t floor = dlock__fence_floor(pl->client);
    dlock__lease_ticket t;
    long long status = 0;
    uint64_t value = 0;
    int64_t pttl = 0;
    redisReply *r;
    dlock_err err;

    if (argc + 1 > ARGV_MAX)
        return dlock__msg_set(m, DLOCK_INVALID, "%s: %d arguments", s->name,
                              argc);
    memcpy(av, argv, sizeof(*av) * (size_t)argc);
    dlock__decimal_u64(floor_arg, floor);
    av[argc] = floor_arg;
    t = dlock__pattern_lease_begin(pl, dlock__lease_ttl_ms(&pl->lease));
    err = dlock__client_eval(pl->client, s, nkeys, argc + 1, av, NULL, &r, m);
    if (err != DLOCK_OK)
        return dlock__pattern_lease_end(pl, &t, err);
    if (!read_grant(r, &status, &value, &pttl)) {
        err = dlock__pattern_bad_reply(pl->client, s->name,
                                       "{1, fence}, {0, pttl} or {2, now}", r,
                                       m);
        freeReplyObject(r);
        return dlock__pattern_lease_end(pl, &t, err);
    }
    freeReplyObject(r);
    if (status == 0) {
        *hint_ms = pttl;
        return dlock__pattern_lease_end(pl, &t, DLOCK_BUSY);
    }
    dlock__fence_floor_raise(pl->client, value);
    if (status == 2)
        return dlock__pattern_lease_end(pl, &t, unproven(pl, floor, value, m));
    pl->fence = value;
    return dlock__pattern_lease_end(pl, &t, DLOCK_OK);
}

static int cancelled(const dlock__wait *w)
{
    return w->cancel != NULL && atomic_load(w->cancel);
}

dlock_err dlock__pattern_lease_wait(dlock__pattern_lease *pl,
                                    const dlock__wait *w,
                                    dlock__wait_try_fn fn, void *arg,
                                    int64_t *hint_ms, dlock__msg *m)
{
    for (;;) {
        dlock_err err = dlock__wait_run(w, fn, arg, hint_ms, m);
        int64_t now = dlock__now_us(), until = now + pl->fence_gap_us;

        /* No fence above the floor yet: the server's clock passes the
         * floor in fence_gap_us; wait for that if the budget allows,
         * looking at the cancel flag every 100 ms. */
        if (err != DLOCK_UNPROVEN || until >= w->deadline_us)
            return err;
        while (!cancelled(w) && dlock__now_us() < until)
            dlock__wait_sleep_until(dlock__now_us() + 100000 < until
                                        ? dlock__now_us() + 100000
                                        : until);
        if (cancelled(w))
            return err;
    }
}

dlock_err dlock__pattern_lease_call(dlock__pattern_lease *pl,
                                    const dlock__script *s, int nkeys,
                                    int argc, const char **argv,
                                    const size_t *lens, int64_t renew_ttl_ms,
                                    dlock__msg *m)
{
    dlock__lease_ticket t = {0};
    redisReply *r;
    dlock_err err;

    if (renew_ttl_ms > 0)
        t = dlock__pattern_lease_begin(pl, renew_ttl_ms);
    err = dlock__client_eval(pl->client, s, nkeys, argc, argv, lens, &r, m);
    if (err != DLOCK_OK) {
        dlock__msg_wrap(m, err, "%s of %s %.64s", s->name, pl->what, pl->name);
    } else {
        if (r->type != REDIS_REPLY_INTEGER)
            err = dlock__pattern_bad_reply(pl->client, s->name, "an integer",
                                           r, m);
        else if (r->integer != 1)
            err = dlock__msg_set(m, DLOCK_LOST,
                                 "%s of %s %.64s on %s: the grant's lease had "
                                 "run out or is another's",
                                 s->name, pl->what, pl->name,
                                 dlock_client_endpoint(pl->client));
        freeReplyObject(r);
    }
    if (renew_ttl_ms > 0)
        dlock__pattern_lease_end(pl, &t, err);
    if (err == DLOCK_LOST)
        dlock__pattern_lease_found_lost(pl);
    return err;
}

dlock_err dlock__pattern_lease_extend(dlock__pattern_lease *pl, int64_t ttl_ms,
                                      const dlock__script *s, int nkeys,
                                      int argc, const char **argv,
                                      char ttl_arg[24], dlock__msg *m)
{
    dlock_err err;

    if (dlock__lease_marked(&pl->lease))
        return dlock__msg_set(m, DLOCK_STATE, "extend of %s %.64s: it is lost",
                              pl->what, pl->name);
    if (dlock__pattern_lease_lost(pl)) {
        dlock__pattern_lease_found_lost(pl);
        return dlock__msg_set(m, DLOCK_LOST,
                              "extend of %s %.64s: its validity ran out (no "
                              "renewal reached %s in time)",
                              pl->what, pl->name,
                              dlock_client_endpoint(pl->client));
    }
    if (ttl_ms == 0)
        ttl_ms = dlock__lease_ttl_ms(&pl->lease);
    err = dlock__pattern_check_ms("TTL", ttl_ms, m);
    if (err != DLOCK_OK)
        return err;
    dlock__decimal_i64(ttl_arg, ttl_ms);
    err = dlock__pattern_lease_call(pl, s, nkeys, argc, argv, NULL, ttl_ms, m);
    if (err == DLOCK_OK)
        dlock__lease_set_ttl_ms(&pl->lease, ttl_ms);
    return err;
}

/* The public accessors take their grant const; the lease still locks its
 * mutex to read, so the one cast that allows it is here (every grant is
 * allocated writable). */
static dlock__lease *lease_of(const dlock__pattern_lease *pl)
{
    return (dlock__lease *)&pl->lease;
}

int64_t dlock__pattern_lease_valid_ms(const dlock__pattern_lease *pl)
{
    return dlock__lease_left_us(lease_of(pl), skew_of(pl)) / 1000;
}

int dlock__pattern_lease_lost(const dlock__pattern_lease *pl)
{
    return dlock__lease_lost(lease_of(pl), skew_of(pl));
}

uint64_t dlock__pattern_lease_fence(const dlock__pattern_lease *pl)
{
    return pl->fence;
}

int64_t dlock__pattern_lease_ttl_ms(const dlock__pattern_lease *pl)
{
    return dlock__lease_ttl_ms(&pl->lease);
}
