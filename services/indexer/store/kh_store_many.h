/*
 * kh_store_many.h: applying a batch of approval events in one
 * transaction and two round trips.
 *
 * kh-indexer takes up to a prefetch's worth of deliveries at a time
 * (kh_main.c).  A commit per event costs a WAL flush each, and even in
 * one transaction the event-by-event path (kh_store_batch_*, kh_store.h)
 * costs two round trips per event; under load each round trip is a
 * wake-up of the backend and of the indexer waiting their turn for a
 * CPU.  So a batch goes in two round trips whatever its size, with the
 * same exactly-once effect per event as kh_store_apply (kh_store.h).
 *
 * Ownership: items belong to the caller; the store keeps nothing of them
 * after the call.  Threads: as kh_store.h (one kh_store per thread).
 */
#ifndef KH_STORE_MANY_H
#define KH_STORE_MANY_H

#include <stddef.h>

#include "kh_event.h"
#include "kh_store.h"

/* One event of kh_store_apply_many: ev in; out, chunks and err out. */
typedef struct kh_apply {
    kh_event ev;
    kh_outcome out;
    int chunks;
    char err[400];
} kh_apply;

/*
 * Applies the n events of items in ONE transaction, each exactly as
 * kh_store_apply would, in two round trips whatever n: BEGIN with every
 * event's claim and document read (one statement, in event id order),
 * then every write (chunks, stale marks, and the claims of events that
 * failed before their write undone) with COMMIT (one statement).  When
 * the batch cannot go that way (an event twice in it, a document written
 * twice, or any failed statement: the transaction is rolled back, or a
 * lost COMMIT leaves its claims to decide), it is applied again event by
 * event with savepoints (kh_store_batch_*), so one bad event costs only
 * itself; returns 1 then, with why saying what stopped the batched way,
 * else 0.  Every item's out is set; the caller acknowledges KH_FAILED
 * items' messages never, the others only after this returns.
 */
int kh_store_apply_many(kh_store *s, kh_apply *items, size_t n, char *why,
                        size_t whylen);

#endif /* KH_STORE_MANY_H */
