/*
 * lease.h: how long a grant is known to be ours, in one place.
 *
 * A lease is the local view of a time-limited grant in Redis (a lock, a
 * semaphore permit, a leadership term).  Its one number is valid_until: the
 * send time of the request that granted or renewed it, plus the TTL, minus a
 * drift allowance (1% of the TTL + 2 ms, as Redlock does).  Times are on
 * CLOCK_BOOTTIME (dlock__boot_us), which keeps counting while the host is
 * suspended, so a sleeping laptop wakes up with its leases already run out
 * rather than resumed.
 *
 * Requests that may overlap (an extend from the owner racing a renewal
 * from the watchdog, on different connections) can execute in Redis in
 * either order, and the last one executed sets the key's expiry.  So:
 *   - dlock__lease_begin lowers valid_until at once to what the new
 *     request would give if it ran last (an extend to a shorter TTL counts
 *     from the moment it is sent);
 *   - a request R that succeeded sets valid_until to the smallest
 *     candidate among R and every request that may have run after it:
 *     those still in flight, and those that ended (succeeded or unknown)
 *     after R was sent.  A request that ended before R was sent ran before
 *     R and no longer matters.
 * A stale reply therefore never raises validity past what a newer request
 * allows, and a steady stream of overlapping requests (an extend loop
 * beside the watchdog) still moves validity on with each answer.  Every
 * ticket from dlock__lease_begin must be ended exactly once.
 *
 * Redis expires keys by its own wall clock.  A forward step of that clock
 * shortens every lease at once, and no client can see it before its next
 * round trip.  The client's dlock__skew keeps the offset between server
 * TIME and our clock as seen by the latest round trip that read TIME; each
 * lease remembers the offset when it was granted, and a later offset that
 * is larger by more than the round trips explain shrinks the lease by the
 * difference (see dlock__lease_until).
 *
 * LOST is terminal: once dlock__lease_mark_lost has run, or valid_until has
 * passed, dlock__lease_lost is 1 for good.
 *
 * Threads: every function is thread-safe; a lease's mutex orders updates.
 */
#ifndef DLOCK_SRC_LEASE_H
#define DLOCK_SRC_LEASE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

/* The offset of the server's clock from ours, from the latest round trip
 * that read server TIME. */
typedef struct dlock__skew {
    pthread_mutex_t mu;
    int have;
    int64_t sent_us; /* send time of the sample kept */
    int64_t lo_us;   /* server time - our receive time */
    int64_t hi_us;   /* server time - our send time */
} dlock__skew;

/* Requests of one lease tracked at once (the owner's and the renewer's). */
#define DLOCK__LEASE_SLOTS 8

typedef struct dlock__lease {
    pthread_mutex_t mu;
    int granted;        /* 0 until the first successful grant */
    int64_t until_us;   /* CLOCK_BOOTTIME; valid while now < until */
    int64_t base_hi_us; /* skew hi when granted; INT64_MIN: unknown */
    int64_t granted_at_us;
    /* Candidates of the requests in flight (slot used when cand != 0);
     * untracked counts those that found no free slot (then no answer
     * raises validity until they end). */
    int64_t open_cand[DLOCK__LEASE_SLOTS];
    int untracked;
    /* The last requests that ended and may have run: when (in events),
     * and their candidates (a ring). */
    uint64_t events; /* begins and ends, counted: the order */
    uint64_t ended_at[DLOCK__LEASE_SLOTS];
    int64_t ended_cand[DLOCK__LEASE_SLOTS];
    int ended_next;
    atomic_llong ttl_ms; /* the TTL renewals ask for */
    atomic_int lost;
} dlock__lease;

/* One request's claim on a lease: when it left and what it asked for. */
typedef struct dlock__lease_ticket {
    int64_t sent_us;
    int64_t ttl_ms;
    int64_t base_hi_us;
    int slot;     /* in open_cand, or -1 untracked */
    uint64_t seq; /* the lease's event count at the begin */
} dlock__lease_ticket;

/* How a request that began with a ticket ended. */
typedef enum dlock__lease_outcome {
    DLOCK__LEASE_GRANTED, /* Redis set our TTL */
    DLOCK__LEASE_UNKNOWN, /* no answer: it may or may not have run */
    DLOCK__LEASE_NOT_RUN  /* it surely did not change the key */
} dlock__lease_outcome;

/* Microseconds on CLOCK_BOOTTIME (does not stop in suspend). */
int64_t dlock__boot_us(void);

/* sent + ttl - drift, never before sent. */
int64_t dlock__lease_until_of(int64_t sent_us, int64_t ttl_ms);

/* A lease with no grant yet, renewing for ttl_ms. */
void dlock__lease_init(dlock__lease *lease, int64_t ttl_ms);
void dlock__lease_destroy(dlock__lease *lease);

/* Starts a request asking for ttl_ms now; see the top of this file.
 * skew may be NULL (then a step of the server clock is not tracked). */
dlock__lease_ticket dlock__lease_begin(dlock__lease *lease, int64_t ttl_ms,
                                       const dlock__skew *skew);

/* Records the server TIME its reply carried (wall-clock microseconds), so
 * the grant's clock offset is this round trip's own. */
void dlock__lease_ticket_server_time(dlock__lease_ticket *ticket,
                                     int64_t server_us);

/* Ends the request of ticket.  Returns 1 if valid_until changed. */
int dlock__lease_end(dlock__lease *lease, const dlock__lease_ticket *ticket,
                     dlock__lease_outcome outcome);

/* valid_until (CLOCK_BOOTTIME) after what skew shows of a step of the
 * server's clock; 0 if never granted or lost. */
int64_t dlock__lease_until(dlock__lease *lease, const dlock__skew *skew);

/* Microseconds left (0 when none); INT64_MAX never. */
int64_t dlock__lease_left_us(dlock__lease *lease, const dlock__skew *skew);

/* 1 if marked lost, or granted once and valid_until has passed. */
int dlock__lease_lost(dlock__lease *lease, const dlock__skew *skew);

/* 1 if granted at least once. */
int dlock__lease_granted(dlock__lease *lease);

/* Marks the lease lost; returns 1 for the one call that did it. */
int dlock__lease_mark_lost(dlock__lease *lease);

/* 1 once dlock__lease_mark_lost has run. */
int dlock__lease_marked(const dlock__lease *lease);

int64_t dlock__lease_ttl_ms(const dlock__lease *lease);
void dlock__lease_set_ttl_ms(dlock__lease *lease, int64_t ttl_ms);

void dlock__skew_init(dlock__skew *skew);
void dlock__skew_destroy(dlock__skew *skew);

/*
 * Records a round trip sent at sent_us and answered at recv_us (both
 * dlock__boot_us) whose server TIME read server_us (wall-clock
 * microseconds).  A sample older than the kept one is ignored.  Returns 1
 * if the server clock moved forward against ours by more than 1 ms since
 * the kept sample (leases may have shrunk).
 */
int dlock__skew_sample(dlock__skew *skew, int64_t sent_us, int64_t recv_us,
                       int64_t server_us);

/* Server microseconds from a TIME-shaped pair {seconds, microseconds}
 * (strings or integers) at r->element[first]; 0 if r has no such pair. */
int64_t dlock__server_time_us(const redisReply *r, size_t first);

/*
 * The one rule for a fence (or term) on the wire: an integer >= 0, or a
 * decimal string of 1..20 digits that fits in 64 bits.  Returns 1 with
 * *out set, else 0.
 */
int dlock__fence_parse(const char *s, size_t len, uint64_t *out);
int dlock__fence_of_reply(const redisReply *e, uint64_t *out);

#endif /* DLOCK_SRC_LEASE_H */
