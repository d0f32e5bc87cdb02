/*
 * rv_idem.h: Idempotency-Key for POST requests, kept in PostgreSQL.
 *
 * API.md: a retry with the same key, user, method and path within 24 h
 * gets the first response replayed and has no second effect; the same key
 * with a different body is 422 IDEMPOTENCY_MISMATCH; while the first is
 * still running, 409 LOCK_BUSY.
 *
 * How: the record (status, body, SHA-256 of the request body) is written
 * in the same transaction as the request's effect, so either both commit
 * or neither does, and a crash can never leave an effect without its
 * record or a record claiming an effect that rolled back.  Inside that
 * transaction pg_try_advisory_xact_lock on the key's scope makes a
 * concurrent twin fail fast (409) instead of waiting, and it is released
 * by the commit that makes the record visible.  A cheap look-up before
 * the Redis lock answers replays without taking the lock at all.
 *
 * What is recorded: every answer the handler reached inside the
 * transaction (2xx, and 403, 404, 409 INVALID_STATE, which a retry would
 * get again); not validation errors (400, 401, 413, 415: the request never
 * ran), not 409 LOCK_BUSY and not 5xx (both are "try again").
 *
 * Threads: as rv_db_conn; all state is in the request and the database.
 */
#ifndef RV_IDEM_H
#define RV_IDEM_H

#include "db/rv_db.h"
#include "api/rv_request.h"

/* 1 if key is 1..255 visible ASCII characters (0x21..0x7E). */
int rv_idem_key_valid(const char *key);

/* 1 if the request carries a key that applies (a POST with the header). */
int rv_idem_applies(const rv_request *req);

/*
 * Outside a transaction: answers from a stored record if there is one.
 * Returns 1 with reply set (replay, or 422), 0 to go on, or -1 with the
 * database status in *st.
 */
int rv_idem_lookup(rv_request *req, rv_db_conn *c, rv_reply *reply,
                   rv_db_status *st);

/*
 * Inside the transaction, before any write: takes the key's advisory lock
 * (409 LOCK_BUSY if a twin holds it) and looks again.  Same returns as
 * rv_idem_lookup.
 */
int rv_idem_claim(rv_request *req, rv_db_conn *c, rv_reply *reply,
                  rv_db_status *st);

/* Inside the transaction, after the handler: records reply if it is
 * recordable (see above). */
rv_db_status rv_idem_store(rv_request *req, rv_db_conn *c,
                           const rv_reply *reply);

#endif /* RV_IDEM_H */
