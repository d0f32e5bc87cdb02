/*
 * lock_fair.h: the scripts of the fair lock (dlock/lock.h, "Fair locks"),
 * used by lock.c in place of the plain acquire and release when
 * opts.fair is set.
 *
 * Both take KEYS = {K, fence key, legacy fence key (read only), queue key,
 * waiters key}:
 *   acquire  ARGV = {token, ttl_ms, floor, fence keep ms, waiting (1/0),
 *            entry_ms, confirm_ms}; answers as the core acquire does:
 *            {1, "fence", now} (held: granted now, or a grant handed over
 *            by a release that this call confirms), {0, hint_ms, now}
 *            (busy; hint_ms <= 0 when the key is free but another waiter's
 *            turn) or {2, now} (no fence above floor can be shown).  With
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

#include "client_internal.h"

extern const dlock__script dlock__fair_acquire_script;
extern const dlock__script dlock__fair_release_script;

/* The prefix of a waiter's own channel; its token follows. */
#define DLOCK__FAIR_GRANT_PREFIX "dlock:granted:"

#endif /* DLOCK_SRC_LOCK_FAIR_H */
