/*
 * pattern_leader_redlock.h: the steps of leader election (dlock/leader.h)
 * on a redlock:// client, where no one server's script can hold a term
 * and a tick together.
 *
 * A leadership there is a Redlock lock (redlock.h) on the lease key,
 * granted by a majority of the masters and renewed by majority rounds;
 * its term is the majority fence of redlock.h (counters on the term key,
 * unique and growing in the real-time order of grants, as long as no
 * master loses its data).  A tick is a majority register: each master
 * keeps the last tick run and takes a higher one only from the lease's
 * holder there; a claim runs when a majority took it, so two claims of
 * one tick can never both win (any two majorities share a master).  Tick
 * numbers come from the claiming node's clock, since independent masters
 * have no clock in common.
 *
 * The steps run on the candidate's pattern lease (pattern_lease.h), like
 * the one-server scripts: validity from the round's start, the watchdog's
 * timer ending it at valid_until.  Threads: as the caller's (pattern_leader.c).
 */
#ifndef DLOCK_SRC_PATTERN_LEADER_REDLOCK_H
#define DLOCK_SRC_PATTERN_LEADER_REDLOCK_H

#include <stdint.h>

#include "dlock/leader.h"
#include "patterns/pattern_lease.h"

/* A role's keys and names, borrowed from the candidate. */
typedef struct dlock__leader_keys {
    const char *name;
    const char *lease_key;
    const char *term_key;
    const char *tick_key;
    const char *channel;
} dlock__leader_keys;

/* One campaign round: DLOCK_OK (pl->fence is the new term, validity
 * set), DLOCK_BUSY (*hint_ms: when to look again), DLOCK_UNAVAILABLE,
 * DLOCK_TIMEOUT or an error, with what every master said in m. */
dlock_err dlock__leader_redlock_campaign(dlock__pattern_lease *pl,
                                         const dlock__leader_keys *k,
                                         int64_t *hint_ms, dlock__msg *m);

/* Renews the lease on a majority: DLOCK_OK (validity moved on),
 * DLOCK_LOST (marked: a majority no longer holds it for us),
 * DLOCK_STATE (lost already) or a round's failure (the lease then ends at
 * valid_until). */
dlock_err dlock__leader_redlock_renew(dlock__pattern_lease *pl,
                                      const dlock__leader_keys *k,
                                      dlock__msg *m);

/* Deletes the lease where it is ours and publishes the resignation:
 * DLOCK_OK, or DLOCK_UNAVAILABLE naming the masters where it stays until
 * its TTL. */
dlock_err dlock__leader_redlock_resign(dlock__pattern_lease *pl,
                                       const dlock__leader_keys *k,
                                       dlock__msg *m);

/* Claims the tick of period_ms that the local clock is in, for the
 * holder of pl (leading: whether it leads by its own view; a candidate
 * that does not is answered DLOCK_LOST without a round).  Any thread: it
 * reads only pl's client and token; ttl_ms (the leader's lease) sets the
 * per-node timeout.  call is the claim's id.  Returns as
 * dlock_leader_tick; info is filled. */
dlock_err dlock__leader_redlock_tick(dlock__pattern_lease *pl,
                                     const dlock__leader_keys *k, int leading,
                                     int64_t ttl_ms, int64_t period_ms,
                                     const char *call,
                                     dlock_leader_tick_info *info,
                                     dlock__msg *m);

/* dlock_leader_inspect on Redlock: held when a majority hold one token;
 * no id (the masters keep only tokens), term 0 (not provable from a
 * read), last_term the highest counter. */
dlock_err dlock__leader_redlock_inspect(dlock_client *c,
                                        const dlock__leader_keys *k,
                                        dlock_leader_info *info,
                                        dlock__msg *m);

#endif /* DLOCK_SRC_PATTERN_LEADER_REDLOCK_H */
