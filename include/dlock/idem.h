/*
 * dlock/idem.h: idempotency records, so a retried request does its work once.
 *
 * A service that must not do something twice (charge a card, send an
 * e-mail, create an order) names the work with an idempotency key, such
 * as the client's request id or "pay:ORDER", and asks before doing it:
 *
 *     dlock_idem *st;
 *     dlock_err err = dlock_idem_begin_wait(c, "pay:order-42", 10000, 15000,
 *                                           &st);
 *     if (err == DLOCK_OK && dlock_idem_status(st) == DLOCK_IDEM_FIRST) {
 *         char receipt[64];
 *         size_t n = charge_card(receipt, sizeof receipt);   // the work
 *         err = dlock_idem_complete(st, receipt, n, 86400000);
 *     }
 *     if (err == DLOCK_OK) {
 *         size_t len;
 *         const void *receipt = dlock_idem_result(st, &len);
 *         reply_to_client(receipt, len);   // the same bytes for everyone
 *     }
 *     dlock_idem_free(st);
 *
 * Each call is one atomic Lua step on the record "{idem:KEY}" (a hash: the
 * state "run" or "done", the first caller's token, the result bytes):
 *   FIRST        no record existed: one is made in state "run" with a TTL
 *                of ttl_ms (the lease).  You do the work, then complete it
 *                (store the result) or abort it (let a later caller retry).
 *   in progress  another caller holds the lease: DLOCK_BUSY, or with
 *                dlock_idem_begin_wait a wait until it completes or aborts.
 *   DONE         the work was done: the stored result bytes are replayed.
 * A holder that dies leaves the record in progress only until its lease
 * runs out; then the next caller is FIRST.  So choose ttl_ms longer than
 * the work can take (or extend it), and make the work itself safe to redo
 * if a holder can die after doing it but before completing: for payments,
 * pass the idempotency key on to the payment provider too.
 *
 * Lifetime: dlock_idem_begin and dlock_idem_begin_wait create a dlock_idem
 * (on DLOCK_OK only); dlock_idem_free frees it, whatever its state, without
 * talking to Redis (a FIRST record that was neither completed nor aborted
 * then stays in progress until its lease runs out).  dlock_idem_free(NULL)
 * does nothing.
 *
 * Buffers: the key and the result given to dlock_idem_complete are copied.
 * dlock_idem_result and dlock_idem_key return borrowed pointers, valid
 * until the dlock_idem is freed.  Results are binary-safe bytes, at most
 * DLOCK_IDEM_RESULT_MAX.
 *
 * Threads: a dlock_idem belongs to the thread that began it and must not
 * be used by two threads at once; any number of threads may begin on the
 * same key through one shared client.  A waiting begin is woken by the
 * client's subscriber thread; no callback runs.
 */
#ifndef DLOCK_IDEM_H
#define DLOCK_IDEM_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/client.h"
#include "dlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_idem dlock_idem;

/* Largest result a record stores, in bytes. */
#define DLOCK_IDEM_RESULT_MAX ((size_t)16 * 1024 * 1024)

/* What dlock_idem_begin found (in progress is the DLOCK_BUSY return). */
typedef enum dlock_idem_outcome {
    /* You are the first: do the work, then complete or abort. */
    DLOCK_IDEM_FIRST = 1,
    /* The work is done: dlock_idem_result has its result. */
    DLOCK_IDEM_DONE = 2
} dlock_idem_outcome;

/*
 * Asks about key (1..DLOCK_KEY_MAX bytes) in one round trip, without
 * waiting.  ttl_ms (1 ms..1 year) is the lease of a FIRST caller.
 * Returns DLOCK_OK with *out FIRST or DONE; DLOCK_BUSY when another caller
 * holds the lease (in progress; dlock_client_busy_ttl_ms says how much
 * longer at most); DLOCK_INVALID, DLOCK_NOMEM, DLOCK_UNAVAILABLE or another
 * transport error.  *out is NULL unless DLOCK_OK.
 */
DLOCK_API dlock_err dlock_idem_begin(dlock_client *client, const char *key,
                                     int64_t ttl_ms, dlock_idem **out);

/*
 * The same, but while the work is in progress waits up to wait_ms (< 0:
 * forever) for it to be completed (then DONE) or aborted or expired (then
 * possibly FIRST), woken by the completing caller.  Returns DLOCK_BUSY if
 * it is still in progress when the wait runs out.
 */
DLOCK_API dlock_err dlock_idem_begin_wait(dlock_client *client,
                                          const char *key, int64_t ttl_ms,
                                          int64_t wait_ms, dlock_idem **out);

/* FIRST or DONE. */
DLOCK_API dlock_idem_outcome dlock_idem_status(const dlock_idem *idem);

/*
 * Stores result (len bytes, copied; result may be NULL when len is 0) as
 * the outcome of the work and keeps the record keep_ms more (0: without
 * expiry; the key then stays until deleted), waking every waiting caller.
 * Only on a FIRST dlock_idem, once.  Returns DLOCK_OK (now DONE, and
 * dlock_idem_result gives these bytes), DLOCK_LOST (the lease ran out
 * first: another caller may be doing the work again), DLOCK_STATE (not
 * FIRST, or finished), DLOCK_INVALID, DLOCK_NOMEM or a transport error
 * (then the outcome is unknown: the record completes or expires).
 */
DLOCK_API dlock_err dlock_idem_complete(dlock_idem *idem, const void *result,
                                        size_t len, int64_t keep_ms);

/*
 * Gives up a FIRST record because the work failed and may be retried: the
 * record is deleted and waiting callers are woken, one of whom is FIRST.
 * Returns DLOCK_OK, DLOCK_LOST (the lease had run out already), DLOCK_STATE
 * or a transport error (the record then expires by its lease).
 */
DLOCK_API dlock_err dlock_idem_abort(dlock_idem *idem);

/* Sets a FIRST record's lease to ttl_ms from now (0: the lease it began
 * with), for work that takes longer than planned.  Returns DLOCK_OK,
 * DLOCK_LOST, DLOCK_STATE, DLOCK_INVALID or a transport error. */
DLOCK_API dlock_err dlock_idem_extend(dlock_idem *idem, int64_t ttl_ms);

/* A DONE record's result and its length (NUL-terminated after len bytes
 * for convenience); NULL with *len 0 for a FIRST record.  len may be
 * NULL.  Borrowed until dlock_idem_free. */
DLOCK_API const void *dlock_idem_result(const dlock_idem *idem, size_t *len);

/* Milliseconds a FIRST record's lease is still known to run: from the
 * send time of the claim or last extend, on CLOCK_BOOTTIME, plus the TTL,
 * minus 1% + 2 ms (before the server's); 0 otherwise.  An extend waits for
 * its answer only until then, and one after it answers DLOCK_LOST without
 * a round trip (DLOCK_STATE once lost). */
DLOCK_API int64_t dlock_idem_valid_ms(const dlock_idem *idem);

/* The key, borrowed until dlock_idem_free. */
DLOCK_API const char *dlock_idem_key(const dlock_idem *idem);

/* Frees idem without talking to Redis.  NULL is fine. */
DLOCK_API void dlock_idem_free(dlock_idem *idem);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_IDEM_H */
