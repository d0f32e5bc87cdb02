/*
 * dlock/ratelimit.h: a rate limiter shared by every process that calls a
 * downstream (an SMS gateway's QPS, a partner API's quota).
 *
 * The limiter is GCRA, the generic cell rate algorithm (ATM's leaky bucket
 * as a meter): one Redis key holds the theoretical arrival time (TAT) of
 * the next request, in server microseconds.  With an emission interval
 * T = period / rate and a burst of B, a request of cost n at server time
 * now is allowed when
 *     max(TAT, now) + n*T - now <= B*T
 * and then TAT becomes max(TAT, now) + n*T.  So an idle limiter lets B
 * requests through at once, and over any interval of length W at most
 * W/T + B requests are allowed: rate per period on average, never more
 * than B above it in any window.  When a request is refused, the answer
 * says exactly how long until it would be allowed.
 *
 *     dlock_ratelimit *rl;
 *     dlock_ratelimit_new(c, "sms-gateway", 50, 1000, 5, &rl); // 50/s, 5 burst
 *     if (dlock_ratelimit_wait(rl, 1, 2000, NULL) == DLOCK_OK)
 *         send_sms(...);                 // our turn, within 2 s
 *     dlock_ratelimit_free(rl);
 *
 * Every decision is one Lua call, and the time in it is the Redis server's
 * (TIME), never a client's clock: clients whose clocks disagree by minutes
 * still share one limit.  dlock_ratelimit_wait reserves the earliest slot
 * in the same call and then sleeps on the local monotonic clock until it,
 * so waiting costs no extra round trips and no retry storm; only the
 * length of that sleep is measured locally.
 *
 * What it guarantees: decisions are made at the server in one order, so
 * the allowed count over any window of the server's clock is bounded as
 * above, however many clients share the key.  It does not shape when the
 * downstream sees the requests: network delay after the decision can
 * bunch them (a downstream with a hard per-second cap wants B small and a
 * little headroom in the rate).  A client that crashes after a decision
 * wastes its slot; nothing is refunded.  When Redis is unreachable the
 * calls fail (DLOCK_UNAVAILABLE): fail open or closed is the caller's
 * choice.
 *
 * Redis key: {rl:NAME}, the TAT as decimal microseconds, with a TTL just
 * past the time the limiter is back to idle (an idle limiter leaves no
 * key).
 *
 * Lifetime: dlock_ratelimit_new makes a handle (no round trip);
 * dlock_ratelimit_free frees it.  NULL is fine for free.
 *
 * Buffers: the name is copied; results are written into the caller's
 * dlock_ratelimit_result.
 *
 * Threads: a dlock_ratelimit is read-only after it is made: any number of
 * threads share one.  No callbacks.
 */
#ifndef DLOCK_RATELIMIT_H
#define DLOCK_RATELIMIT_H

#include <stdint.h>

#include "dlock/client.h"
#include "dlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_ratelimit dlock_ratelimit;

/* What one decision said. */
typedef struct dlock_ratelimit_result {
    /* 1 if the request was allowed (now, or after wait_us), else 0. */
    int allowed;
    /* Allowed: how long the caller had to wait for its slot (0 for
     * dlock_ratelimit_take).  Refused: how long until it would be allowed.
     * Microseconds. */
    int64_t wait_us;
    /* Requests of cost 1 that could still go at once after this one. */
    int64_t remaining;
    /* The server's clock at the decision (microseconds since the epoch);
     * an allowed request's slot is server_time_us + wait_us. */
    int64_t server_time_us;
} dlock_ratelimit_result;

/*
 * Makes a handle for the limiter named name (1..DLOCK_KEY_MAX bytes):
 * rate requests per period_ms on average (rate >= 1, period_ms >= 1, and
 * period_ms * 1000 / rate >= 1 microsecond), with a burst of burst (>= 1:
 * how many may go at once on an idle limiter).  Every user of a name must
 * pass the same rate, period and burst.  No round trip.  Returns DLOCK_OK,
 * DLOCK_INVALID or DLOCK_NOMEM; *out is NULL unless DLOCK_OK.
 */
DLOCK_API dlock_err dlock_ratelimit_new(dlock_client *client, const char *name,
                                        int64_t rate, int64_t period_ms,
                                        int64_t burst, dlock_ratelimit **out);

/* Frees the handle.  NULL is fine. */
DLOCK_API void dlock_ratelimit_free(dlock_ratelimit *rl);

/*
 * Asks for cost (1..burst) units now, in one round trip.  res may be NULL.
 * Returns DLOCK_OK (allowed), DLOCK_BUSY (refused: res->wait_us says how
 * long until it would be allowed; dlock_client_busy_ttl_ms the same in
 * ms), DLOCK_INVALID or a transport error.
 */
DLOCK_API dlock_err dlock_ratelimit_take(dlock_ratelimit *rl, int64_t cost,
                                         dlock_ratelimit_result *res);

/*
 * Reserves the earliest slot for cost units if it comes within max_wait_ms
 * (< 0: any), in one round trip, then sleeps until that slot.  Returns
 * DLOCK_OK once the slot has come (res->wait_us says how long it slept);
 * DLOCK_TIMEOUT at once, without reserving anything, when the earliest
 * slot is further away than max_wait_ms (res->wait_us says how far);
 * DLOCK_INVALID or a transport error.
 */
DLOCK_API dlock_err dlock_ratelimit_wait(dlock_ratelimit *rl, int64_t cost,
                                         int64_t max_wait_ms,
                                         dlock_ratelimit_result *res);

/* The emission interval T = period / rate, in microseconds. */
DLOCK_API int64_t dlock_ratelimit_interval_us(const dlock_ratelimit *rl);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_RATELIMIT_H */
