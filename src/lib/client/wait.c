/*
 * wait.c: the one wait loop (see wait.h for the rules it follows).
 *
 * Every sleep goes through nap(), which returns early for the three
 * things that make a new try worth its round trip: a notification (a
 * release, a SUBSCRIBE confirmation, a lost subscriber connection), the
 * breaker closing after an outage, and cancel.  Everything else waits for
 * the fallback timer, whose interval grows while nothing happens: Redis
 * sees a few tries per waiter, not a poll per waiter.
 *
 * Jitter comes from a per-call xorshift generator seeded with the
 * caller's token: no shared state, and contenders spread apart.
 */
#include "client/wait.h"

#include <time.h>

#include "base/clock.h"
#include "client/notify.h"

/* Busy, holder's time known: never sooner than this, doubled per timer
 * wake-up that found it still busy, up to FLOOR_MAX_US. */
#define FLOOR_FIRST_US 10000
#define FLOOR_MAX_US 1000000
/* Busy, nothing known: first interval, doubled per timer wake-up. */
#define BACKOFF_FIRST_US 50000
/* The longest sleep while subscribed, and without a notifier. */
#define POLL_MAX_US 10000000
#define UNSUBSCRIBED_MAX_US 200000
/* Queued behind the client's waiters (wait.h, "Barging"): the fallback
 * when no release wakes us, 150-200 ms. */
#define BEHIND_MAX_US 200000
/* Transport errors: first interval and cap of their backoff. */
#define ERROR_FIRST_US 50000
#define ERROR_MAX_US 2000000
/* How often a sleeper looks at cancel and at an open breaker. */
#define SLICE_US 50000

typedef struct wait_state {
    const dlock__wait *spec;
    dlock__notifier *n;
    dlock__waiter *w;
    uint64_t rng;
    int idle_wakes; /* timer wake-ups in a row that found it busy */
    int errors;     /* transport errors in a row */
} wait_state;

static uint64_t jitter_next(uint64_t *state)
{
    uint64_t x = *state;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return x;
}

/* A random number of microseconds in [0, span]. */
static int64_t jitter(wait_state *s, int64_t span)
{
    if (span <= 0)
        return 0;
    return (int64_t)(jitter_next(&s->rng) % (uint64_t)(span + 1));
}

static uint64_t jitter_seed(const char *seed)
{
    uint64_t rng = 0x9e3779b97f4a7c15ull;

    for (size_t i = 0; seed != NULL && seed[i] != '\0' && i < 16; i++)
        rng = rng * 31 + (unsigned char)seed[i];
    return rng != 0 ? rng : 1;
}

/* first << doublings, capped at max. */
static int64_t doubled(int64_t first, int doublings, int64_t max)
{
    int64_t v = first;

    for (int i = 0; i < doublings && v < max; i++)
        v *= 2;
    return v < max ? v : max;
}

/* How long to sleep after a busy answer when no notification comes. */
static int64_t busy_interval_us(wait_state *s, int64_t hint_ms)
{
    int64_t cap = s->w != NULL ? POLL_MAX_US : UNSUBSCRIBED_MAX_US;
    int64_t base;

    if (s->spec->poll_max_ms > 0 && s->spec->poll_max_ms * 1000 < cap)
        cap = s->spec->poll_max_ms * 1000;

    if (hint_ms > 0 && hint_ms < cap / 1000) {
        int64_t floor = doubled(FLOOR_FIRST_US, s->idle_wakes, FLOOR_MAX_US);

        /* Just past the holder's expiry, spread by up to 1/16 of it. */
        base = hint_ms * 1000 + 1000;
        base += jitter(s, base / 16 + 1000);
        if (base < floor)
            base = floor + jitter(s, floor / 4);
    } else if (hint_ms > 0) {
        base = cap;
    } else {
        base = doubled(BACKOFF_FIRST_US, s->idle_wakes, cap);
        base = base / 2 + jitter(s, base / 2);
    }
    if (base >= cap)
        base = cap - jitter(s, cap / 4);
    return base;
}

/* How long to back off after a transport error the wait rides out. */
static int64_t error_interval_us(wait_state *s)
{
    int64_t base = doubled(ERROR_FIRST_US, s->errors - 1, ERROR_MAX_US);

    return base / 2 + jitter(s, base / 2);
}

static int cancelled(const wait_state *s)
{
    return s->spec->cancel != NULL && atomic_load(s->spec->cancel) != 0;
}

/* 1 if err is a transport error that this wait rides out. */
static int rides_out(const wait_state *s, dlock_err err)
{
    return (err == DLOCK_UNAVAILABLE || err == DLOCK_TIMEOUT)
           && s->spec->deadline_us == DLOCK__FOREVER && !s->spec->fail_fast;
}

void dlock__wait_sleep_until(int64_t deadline_us)
{
    struct timespec ts = dlock__timespec_of(deadline_us);

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        if (dlock__now_us() >= deadline_us)
            break;
}

/*
 * Sleeps until wake_at.  Returns 1 early when a new try is worth it now:
 * a notification, or (watch_breaker) the client's breaker letting calls
 * through again; 0 at wake_at or when cancelled.
 */
static int nap(wait_state *s, int64_t wake_at, int watch_breaker)
{
    dlock_client *c = s->spec->client;
    int sliced = watch_breaker || s->spec->cancel != NULL;

    for (;;) {
        int64_t now = dlock__now_us(), until = wake_at;

        if (now >= wake_at || cancelled(s))
            return 0;
        if (sliced && wake_at - now > SLICE_US)
            until = now + SLICE_US;
        if (s->w != NULL) {
            if (dlock__notify_wait(s->n, s->w, until))
                return 1;
        } else {
            dlock__wait_sleep_until(until);
        }
        if (watch_breaker && dlock__breaker_allows(dlock__client_breaker(c)))
            return 1;
    }
}

/* Joins the release channel; returns 1 if the caller should try again at
 * once (the channel was already subscribed; see wait.h). */
static int join(wait_state *s)
{
    int subscribed = 0;

    if (s->spec->channel == NULL)
        return 0;
    s->n = dlock__client_notifier(s->spec->client);
    if (s->n == NULL)
        return 0;
    /* Not subscribed yet either way: the confirmation wakes it. */
    if (s->spec->direct
        && dlock__notify_join_direct(s->n, s->spec->channel,
                                     s->spec->deadline_us, &s->w)
               == DLOCK_OK)
        return 0;
    if (dlock__notify_join(s->n, s->spec->channel, &s->w, &subscribed)
        != DLOCK_OK)
        return 0;
    if (s->spec->fifo)
        dlock__notify_set_fifo(s->n, s->w);
    return subscribed;
}

/* What take_message made of the message that woke the wait (wait.h),
 * 0 if none or not offered. */
static int message_taken(wait_state *s, void *arg, int64_t *hint_ms)
{
    char msg[DLOCK__NOTIFY_MSG_MAX];
    size_t len;

    if (s->spec->take_message == NULL || s->w == NULL)
        return 0;
    len = dlock__notify_take_message(s->n, s->w, msg, sizeof(msg));
    return len > 0 ? s->spec->take_message(arg, msg, len, hint_ms) : 0;
}

/* With fifo: if this client already has waiters on the channel, joins
 * behind them and sleeps until a release wakes this waiter (or the short
 * fallback); returns 1 if it joined. */
static int queue_behind(wait_state *s)
{
    dlock__notifier *n;
    int subscribed = 0;

    if (!s->spec->fifo || s->spec->channel == NULL
        || dlock__now_us() >= s->spec->deadline_us)
        return 0;
    n = dlock__client_notifier_peek(s->spec->client);
    if (n == NULL || !dlock__notify_has_waiters(n, s->spec->channel))
        return 0;
    s->n = n;
    if (dlock__notify_join(n, s->spec->channel, &s->w, &subscribed)
        != DLOCK_OK)
        return 0;
    dlock__notify_set_fifo(n, s->w);
    if (subscribed) {
        int64_t wake_at = dlock__now_us() + BEHIND_MAX_US
                          - jitter(s, BEHIND_MAX_US / 4);

        nap(s, wake_at < s->spec->deadline_us ? wake_at : s->spec->deadline_us,
            0);
    }
    return 1;
}

dlock_err dlock__wait_run(const dlock__wait *w, dlock__wait_try_fn try_fn,
                          void *arg, int64_t *hint_ms, dlock__msg *m)
{
    wait_state s = {.spec = w, .rng = jitter_seed(w->seed)};
    int joined = queue_behind(&s);
    int told_busy = 0; /* a message said what a busy try would have */
    dlock_err err = DLOCK_BUSY;

    if (!joined && w->subscribe_first && w->direct
        && dlock__now_us() < w->deadline_us) {
        /* Unconfirmed (or joined the shared way), the confirmation wakes
         * the wait after the try and another try follows, as when joined
         * after a busy answer. */
        joined = 1;
        join(&s);
        dlock__notify_direct_confirmed(s.n, s.w, w->deadline_us);
    }

    for (;;) {
        int64_t now = dlock__now_us(), wake_at;
        int will_wait = now < w->deadline_us && !cancelled(&s);
        int watch_breaker = 0;

        if (!told_busy) {
            *hint_ms = 0;
            err = try_fn(arg, will_wait, hint_ms, m);
        }
        told_busy = 0;
        if (dlock__now_us() >= w->deadline_us || cancelled(&s))
            break;
        if (err == DLOCK_BUSY) {
            s.errors = 0;
            if (!joined) {
                joined = 1;
                if (join(&s))
                    continue;
            }
            wake_at = dlock__now_us() + busy_interval_us(&s, *hint_ms);
        } else if (rides_out(&s, err)) {
            s.errors++;
            watch_breaker = !dlock__breaker_allows(
                dlock__client_breaker(w->client));
            wake_at = dlock__now_us()
                      + (watch_breaker ? ERROR_MAX_US : error_interval_us(&s));
        } else {
            break;
        }
        if (wake_at > w->deadline_us)
            wake_at = w->deadline_us;
        if (nap(&s, wake_at, watch_breaker)) {
            int64_t told_hint = 0;
            int taken = message_taken(&s, arg, &told_hint);

            s.idle_wakes = 0;
            if (taken == DLOCK__MSG_TAKEN) {
                err = DLOCK_OK;
                break;
            }
            if (taken == DLOCK__MSG_BUSY && err == DLOCK_BUSY) {
                told_busy = 1;
                *hint_ms = told_hint;
            }
        } else if (err == DLOCK_BUSY)
            s.idle_wakes++;
        if (cancelled(&s))
            break;
    }
    dlock__notify_leave(s.n, s.w);
    return err;
}
