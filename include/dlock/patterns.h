/*
 * dlock/patterns.h: libdlock's patterns for services, in one include.
 *
 * Each pattern is built on the same client (dlock/client.h) and decides
 * every step in one Lua script on the server, so it is atomic however many
 * processes share it:
 *   dlock/idem.h       idempotency records: do the work once, replay the
 *                      stored result to every retry;
 *   dlock/semaphore.h  N permits, each a lease that a crashed holder gives
 *                      back by its TTL;
 *   dlock/leader.h     leader election with growing terms, and jobs that
 *                      run once per tick across many nodes;
 *   dlock/ratelimit.h  a GCRA rate limiter on the server's clock;
 *   dlock/once.h       single-flight: one caller refreshes, the others
 *                      wait for its stored result;
 *   dlock/rwlock.h     many readers or one writer.
 * The resource mutex (no oversell) is the core lock with its fencing
 * token: dlock/lock.h, and the recipe in docs/patterns.md.  See each header
 * for ownership and thread rules.
 */
#ifndef DLOCK_PATTERNS_H
#define DLOCK_PATTERNS_H

#include "dlock/dlock.h"
#include "dlock/idem.h"
#include "dlock/leader.h"
#include "dlock/once.h"
#include "dlock/ratelimit.h"
#include "dlock/rwlock.h"
#include "dlock/semaphore.h"

#endif /* DLOCK_PATTERNS_H */
