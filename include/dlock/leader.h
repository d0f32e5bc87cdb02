/*
 * dlock/leader.h: leader election, so a scheduled job runs on one node.
 *
 * Candidates campaign for a named role.  The leader holds a lease (a TTL)
 * and renews it; when it stops renewing (it crashed, hung or lost the
 * network) the lease runs out and another candidate takes over, within one
 * TTL plus a poll interval (at most 200 ms, and just past the lease's end
 * when it has less than that to run).  Each new leadership gets a term
 * number that is larger than every earlier one: pass it to the resources
 * the leader writes so they can refuse a deposed leader that woke up late
 * (fencing, as with dlock_lock_fence).
 *
 * Two ways to drive it:
 *
 *  - Background (callbacks or polling): dlock_leader_start runs one thread
 *    per dlock_leader that campaigns, renews every ttl/3 and calls
 *    on_gained / on_lost; other threads poll dlock_leader_is_leader or
 *    block in dlock_leader_wait.
 *
 *        dlock_leader_opts o;
 *        dlock_leader_opts_init(&o);
 *        o.ttl_ms = 10000;
 *        o.on_gained = start_work;  o.on_lost = stop_work;  o.arg = &app;
 *        dlock_leader_new(c, "billing-scheduler", &o, &ld);
 *        dlock_leader_start(ld);
 *        ...
 *        dlock_leader_stop(ld);     // resigns, so another takes over now
 *        dlock_leader_free(ld);
 *
 *  - Driven by the caller: dlock_leader_campaign (optionally waiting),
 *    then dlock_leader_renew at least every ttl/3 while working, and
 *    dlock_leader_resign when done.  No thread, no callbacks.
 *
 * Scheduled jobs: dlock_leader_tick(leader, period_ms, &t) says whether
 * the tick of the server's clock we are in (floor(server ms / period)) is
 * this leader's to run.  It answers yes once per tick across all leaders
 * and terms (the last tick run is stored beside the lease), and only to
 * the current leader, so a tick is never run twice, also across a
 * fail-over; ticks that fall into a fail-over gap are skipped, and the
 * answer says how many.  It also says how long until the next tick, by the
 * server's clock, so every node sleeps to the same boundaries.
 *
 * Redis keys, for a role named R (one cluster slot):
 *   {leader:R}        the lease: a hash (token, term, id, since) with the
 *                     TTL; gone when nobody leads.
 *   {leader:R}:term   the last term granted; it expires 30 days after the
 *                     TTL of the last term, when the server's clock is
 *                     past it.  The next term is max(last + 1, server time
 *                     in microseconds), as for lock fences, and granted
 *                     only above every term, fence and server time this
 *                     client has seen (its floor), so a term is never
 *                     lower than one seen before, even after a Redis
 *                     restart that lost the counter with the server's
 *                     clock behind: then the campaign waits for the clock
 *                     (within its wait) or answers DLOCK_UNPROVEN.
 *   {leader:R}:tick   the last tick run (hash: n, period, by).
 * A resignation publishes on "dlock:leader:R" so a waiting candidate takes
 * over at once.
 *
 * On a redlock:// client (N independent masters) the same calls work, as
 * majority rounds (docs/deployments.md): the lease {leader:R} is a Redlock
 * lock (a token string, no hash), granted, renewed every ttl/3 and
 * resigned on a majority like dlock_acquire's, and valid_until is the
 * Redlock validity (TTL - the round's time - drift).  The term is the
 * majority fence of {leader:R}:term (the highest counter a majority
 * reports, plus one, written back to a majority): unique and growing with
 * each leadership in real-time order as long as no master loses its data,
 * but a small counter, not server time, and never DLOCK_UNPROVEN.  A
 * tick is claimed on {leader:R}:tick of every master and runs only when a
 * majority took it from the lease's holder, so it still runs at most
 * once; the tick number and next_in_ms come from this process's clock
 * (the masters share none), and a claim that only a minority took skips
 * that tick.  dlock_leader_inspect gives held, ttl_ms and last_term from
 * a majority, but no id and term 0 (the masters keep only tokens).
 *
 * Choosing the TTL: a leader that cannot renew stops leading when its own
 * conservative view of the lease ends (valid_until: the send time of the
 * last successful campaign or renewal, on CLOCK_BOOTTIME, plus the TTL,
 * minus 1% + 2 ms, before the server's), whether or not Redis ever answers:
 * is_leader reads 0 from then on, and on_lost runs then (a renewal waits
 * for its answer only until valid_until, never for the whole io timeout).
 * Takeover after a crash takes up to one TTL: shorter TTLs fail over
 * faster and cost more renewals (one round trip every ttl/3).
 *
 * Lifetime: dlock_leader_new creates a candidate (no round trip) and
 * dlock_leader_free destroys it.  free stops the background thread if it
 * runs, without resigning and without callbacks, so the lease runs out by
 * its TTL as if the process had died; call dlock_leader_stop (background)
 * or dlock_leader_resign (driven) first to hand over at once.  Free every
 * dlock_leader before its client.  dlock_leader_free(NULL) does nothing.
 *
 * Buffers: the name and the options (id included) are copied.  Strings
 * returned are borrowed for the candidate's life.
 *
 * Threads: dlock_leader_is_leader, dlock_leader_term, dlock_leader_valid_ms,
 * dlock_leader_wait, dlock_leader_tick and the accessors may be called from
 * any thread at any time (before free).  dlock_leader_start, _stop,
 * _campaign, _renew and _resign belong to one controlling thread; while
 * the background thread runs, _campaign, _renew and _resign answer
 * DLOCK_STATE.  on_gained and on_lost run on the candidate's own thread,
 * one at a time, in order (gained, lost, gained, ...): they may call the
 * any-thread functions above and use the client, but should return
 * quickly (renewal waits for them) and must not call dlock_leader_stop or
 * dlock_leader_free on their own candidate.
 */
#ifndef DLOCK_LEADER_H
#define DLOCK_LEADER_H

#include <stdint.h>

#include "dlock/client.h"
#include "dlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_leader dlock_leader;

/* Longest candidate id, in bytes. */
#define DLOCK_LEADER_ID_MAX 255

/* A gained or lost callback: term is the leadership's term. */
typedef void (*dlock_leader_fn)(dlock_leader *leader, uint64_t term,
                                void *arg);

typedef struct dlock_leader_opts {
    /* The lease in milliseconds (1 ms..1 year).  Default 10000; renewed
     * every ttl/3. */
    int64_t ttl_ms;
    /* How this candidate shows in dlock_leader_inspect (at most
     * DLOCK_LEADER_ID_MAX bytes).  NULL: "hostname:pid". */
    const char *id;
    /* Background mode: called on the candidate's thread when it becomes
     * the leader and when it stops being the leader.  Either may be NULL. */
    dlock_leader_fn on_gained;
    dlock_leader_fn on_lost;
    void *arg;
} dlock_leader_opts;

/* Fills opts with the defaults: 10 s lease, default id, no callbacks. */
DLOCK_API void dlock_leader_opts_init(dlock_leader_opts *opts);

/*
 * Makes a candidate for the role named name (1..DLOCK_KEY_MAX bytes); opts
 * may be NULL for the defaults.  No round trip.  Returns DLOCK_OK,
 * DLOCK_INVALID, DLOCK_NOMEM or DLOCK_SYSTEM; *out is NULL unless DLOCK_OK.
 */
DLOCK_API dlock_err dlock_leader_new(dlock_client *client, const char *name,
                                     const dlock_leader_opts *opts,
                                     dlock_leader **out);

/* Stops the background thread if it runs (without resigning or calling
 * back) and frees the candidate.  NULL is fine. */
DLOCK_API void dlock_leader_free(dlock_leader *leader);

/*
 * Starts the candidate's background thread: it campaigns (woken when the
 * leader resigns, polling otherwise), renews while leading, and calls the
 * callbacks.  Returns DLOCK_OK, DLOCK_STATE (already started, or leading
 * by dlock_leader_campaign: resign first) or DLOCK_SYSTEM.
 */
DLOCK_API dlock_err dlock_leader_start(dlock_leader *leader);

/*
 * Stops the background thread: if it leads, it resigns (so another
 * candidate takes over at once) and calls on_lost; returns when the thread
 * has exited, within about 200 ms plus one round trip.  Returns DLOCK_OK,
 * DLOCK_STATE (not started) or the resignation's transport error (the
 * lease then runs out by its TTL).
 */
DLOCK_API dlock_err dlock_leader_stop(dlock_leader *leader);

/*
 * Driven mode: campaigns once, waiting up to wait_ms (0: one try; < 0:
 * forever) while another candidate leads.  Returns DLOCK_OK (this
 * candidate leads: dlock_leader_term says in which term; also when it led
 * already, which renews the lease), DLOCK_BUSY (another leads;
 * dlock_client_busy_ttl_ms says how long its lease still runs),
 * DLOCK_UNPROVEN (no term above the ones seen can be shown: see the term
 * key above),
 * DLOCK_STATE (the background thread runs) or a transport error.
 */
DLOCK_API dlock_err dlock_leader_campaign(dlock_leader *leader,
                                          int64_t wait_ms);

/*
 * Driven mode: renews the lease for another ttl_ms.  Returns DLOCK_OK,
 * DLOCK_LOST (the lease is gone or another's: stop leading now),
 * DLOCK_STATE (not leading, or the background thread runs) or a transport
 * error (still the leader until dlock_leader_valid_ms reaches 0).
 */
DLOCK_API dlock_err dlock_leader_renew(dlock_leader *leader);

/*
 * Driven mode: gives up the lease if it is still ours and wakes the
 * waiting candidates.  Returns DLOCK_OK, DLOCK_LOST (it was not ours any
 * more), DLOCK_STATE (the background thread runs) or a transport error.
 */
DLOCK_API dlock_err dlock_leader_resign(dlock_leader *leader);

/* 1 while this candidate leads and its lease is known valid (before its
 * valid_until, see "Choosing the TTL"); else 0.  Any thread. */
DLOCK_API int dlock_leader_is_leader(const dlock_leader *leader);

/* The term of the current leadership, or of the last one (0 if it never
 * led).  Any thread. */
DLOCK_API uint64_t dlock_leader_term(const dlock_leader *leader);

/* Milliseconds the lease is still known valid (0 when not leading). */
DLOCK_API int64_t dlock_leader_valid_ms(const dlock_leader *leader);

/*
 * Blocks until dlock_leader_is_leader(leader) == leading (1 or 0) or
 * timeout_ms runs out (< 0: forever).  Returns DLOCK_OK or DLOCK_TIMEOUT.
 * Any thread; for polling callers of the background mode.
 */
DLOCK_API dlock_err dlock_leader_wait(dlock_leader *leader, int leading,
                                      int64_t timeout_ms);

/* What dlock_leader_tick said. */
typedef struct dlock_leader_tick_info {
    /* The tick we are in: floor(server ms / period_ms). */
    int64_t tick;
    /* How many ticks since the last one run were skipped (0 normally; > 0
     * after a fail-over gap or a pause; 0 for the very first tick). */
    int64_t skipped;
    /* Milliseconds until the next tick begins, by the server's clock. */
    int64_t next_in_ms;
} dlock_leader_tick_info;

/*
 * For a job that runs every period_ms (1 ms..1 year): claims the current
 * tick for this candidate if it leads and the tick has not been run.  One
 * round trip.  Returns DLOCK_OK (run the job for info->tick now),
 * DLOCK_BUSY (this tick was run already), DLOCK_LOST (this candidate does
 * not lead), DLOCK_INVALID or a transport error.  info (may be NULL) is
 * filled for DLOCK_OK, DLOCK_BUSY and DLOCK_LOST.  Any thread.
 */
DLOCK_API dlock_err dlock_leader_tick(dlock_leader *leader, int64_t period_ms,
                                      dlock_leader_tick_info *info);

/* What Redis says about a role, for inspection (`dlock leader --status`). */
typedef struct dlock_leader_info {
    int held;                         /* 1 if someone leads */
    char id[DLOCK_LEADER_ID_MAX + 1]; /* the leader's id, "" if none */
    uint64_t term;                    /* the leader's term, 0 if none */
    int64_t ttl_ms;                   /* its lease's remaining TTL */
    uint64_t last_term; /* last term granted (0 once its counter expired) */
} dlock_leader_info;

/* Reads the role named name in one round trip. */
DLOCK_API dlock_err dlock_leader_inspect(dlock_client *client,
                                         const char *name,
                                         dlock_leader_info *info);

/* The role's name and this candidate's id, borrowed. */
DLOCK_API const char *dlock_leader_name(const dlock_leader *leader);
DLOCK_API const char *dlock_leader_id(const dlock_leader *leader);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_LEADER_H */
