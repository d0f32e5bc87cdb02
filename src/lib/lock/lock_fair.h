/*
 * lock_fair.h: the scripts of the fair lock (dlock/lock.h, "Fair locks"),
 * used by lock.c in place of the plain acquire and release when
 * opts.fair is set.
 *
 * Both take KEYS = {K, fence key, legacy fence key (read only), queue key,
 * waiters key}:
 *   acquire  ARGV = {token, ttl_ms, floor, fence keep ms, waiting (1/0),
 *            entry_ms, confirm_ms, try number, granted-channel prefix};
 *            answers as the core acquire does (lock_internal.h):
 *            "1 fence now" (held: granted now, or a grant handed over
 *            by a release that this call confirms), {0, hint_ms, now}
 *            (busy; a free key with another live waiter at the head is
 *            granted to it, as a release does, and hint_ms is its confirm
 *            window; hint_ms <= 0 when that grant could not be made) or
 *            "2 now" (no fence above floor can be shown).  With
 *            waiting = 1 a busy answer leaves the caller queued until
 *            entry_ms from now (server time).
 *   release  ARGV = {token, released channel, granted-channel prefix,
 *            floor, fence keep ms}; answers 1 if it released our key (and
 *            handed it on), 0 if the key was not ours (our queue entry, if
 *            any, is dropped either way, so a waiter that gives up runs it
 *            to leave the queue).
 * Both are retry-safe: a second run finds our token already (acquire) or
 * answers 0 (release: reported LOST, the safe side), as the core's do.
 */
#ifndef DLOCK_SRC_LOCK_FAIR_H
#define DLOCK_SRC_LOCK_FAIR_H

#include <stddef.h>
#include <stdint.h>

#include "client/client_internal.h"

extern const dlock__script dlock__fair_acquire_script;
extern const dlock__script dlock__fair_release_script;

/* The prefix of a waiter's own channel; its token follows. */
#define DLOCK__FAIR_GRANT_PREFIX "dlock:granted:"

/* A grant as the release script publishes it on the waiter's channel:
 * "try:fence:confirm_ms", try being the number of the waiter's try whose
 * queue entry was granted. */
typedef struct dlock__fair_grant {
    uint64_t try_seq;
    uint64_t fence;
    int64_t confirm_ms;
} dlock__fair_grant;

/* The waiter's latest try that came back busy with its entry written:
 * its number (0: none yet), send time (dlock__boot_us), and the floor it
 * proves a grant must exceed: the larger of the client's floor when the
 * try was sent and the server time in its reply (fence.h).  Both were
 * seen before the try ran, hence before any grant of it; what other
 * threads of the client see after the grant may be higher and proves
 * nothing against it. */
typedef struct dlock__fair_queued {
    uint64_t try_seq;
    int64_t sent_us;
    uint64_t floor;
    /* The server clock's offset (lease.h, dlock__skew's hi) the client
     * knew when the try was sent: a grant counted from that send time is
     * shrunk by any forward step of the server's clock seen after it,
     * however late the message is taken. */
    int64_t base_hi_us;
} dlock__fair_queued;

/* A grant is taken only with at least this much validity left. */
#define DLOCK__FAIR_GRANT_MIN_LEFT_US 2000

/* Reads a grant message of len bytes (not NUL-terminated); 1 if it is
 * one, 0 if not (an empty nudge, or anything else). */
int dlock__fair_grant_parse(const char *msg, size_t len, dlock__fair_grant *g);

/* Reads a nudge with the holder's remaining time, "ms" (lock_fair.c): 1
 * and *ttl_ms if msg is one, 0 if not (an empty nudge, a grant). */
int dlock__fair_nudge_parse(const char *msg, size_t len, int64_t *ttl_ms);

/*
 * 1 if the waiter whose latest queued try is q may hold the lock on grant
 * g now (dlock__boot_us now_us), with validity until *until_us
 * (CLOCK_BOOTTIME): the grant is of that very try, its fence is above
 * q's floor, and the confirm window counted from the try's send time
 * leaves at least DLOCK__FAIR_GRANT_MIN_LEFT_US.  0: not taken; the
 * waiter tries as it would without the message.  lock_fair.c's top
 * comment says why the try's send time is a safe start.
 */
int dlock__fair_grant_check(const dlock__fair_grant *g,
                            const dlock__fair_queued *q, int64_t now_us,
                            int64_t *until_us);

#endif /* DLOCK_SRC_LOCK_FAIR_H */
