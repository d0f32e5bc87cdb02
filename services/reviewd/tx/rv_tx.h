/*
 * rv_tx.h: one unit of work in one PostgreSQL transaction.
 *
 * Every handler that reads or writes state runs its work through
 * rv_tx_run, which owns the transaction's shape so the handlers do not
 * repeat it: this thread's connection, BEGIN, the Idempotency-Key claim,
 * the work, the idempotency record, COMMIT; and on failure ROLLBACK and a
 * decision.  Deadlocks and serialization failures are retried (at most
 * three attempts); a connection found broken at BEGIN (a PostgreSQL
 * restart) is made again once; a COMMIT whose outcome is unknown is never
 * retried, since the work may have committed.  What cannot be retried
 * becomes 503 UNAVAILABLE (PostgreSQL unreachable), 409 INVALID_STATE (a
 * constraint refused the write: the database guard won a race) or 500.
 *
 * Threads: runs on the request's thread with that thread's connection.
 */
#ifndef RV_TX_H
#define RV_TX_H

#include "db/rv_db.h"
#include "api/rv_request.h"

/*
 * The work: runs inside the transaction and either sets reply and
 * returns RV_DB_OK (then the transaction commits, also for a 4xx reply
 * that wrote nothing), or returns the failed statement's status (then it
 * rolls back and reply is replaced).
 */
typedef rv_db_status (*rv_tx_work)(rv_request *req, rv_db_conn *c, void *arg,
                                   rv_reply *reply);

/* Runs work(req, conn, arg, reply) as described above, holding one of
 * the write gate's places for the transaction (rv_tx_admit); reply is
 * always set when it returns (503 UNAVAILABLE when no place came within
 * the request's budget). */
void rv_tx_run(rv_request *req, rv_tx_work work, void *arg, rv_reply *reply);

/*
 * The write gate (rv_admit.h), for a write that must wait for its place
 * before it takes something others contend for, such as its Redis lock:
 * rv_tx_admit takes a place (0), or logs, sets 503 UNAVAILABLE on reply
 * and returns -1 when the request's budget ended while it waited;
 * rv_tx_run_admitted then runs the transaction as rv_tx_run does without
 * touching the gate, and rv_tx_dismiss gives the place back.  A place is
 * taken exactly once per write: either rv_tx_run does it, or the caller
 * brackets rv_tx_run_admitted with rv_tx_admit and rv_tx_dismiss.
 */
int rv_tx_admit(rv_request *req, rv_reply *reply);
void rv_tx_run_admitted(rv_request *req, rv_tx_work work, void *arg,
                        rv_reply *reply);
void rv_tx_dismiss(rv_request *req);

/*
 * Runs a read-only look-up outside a transaction with the same error
 * mapping, for GETs and for the checks before a lock.  A connection found
 * broken (a PostgreSQL restart: RV_DB_UNAVAILABLE) is made again and the
 * work runs once more, which is safe because it only reads.  Each
 * statement sees a snapshot of its own.
 */
void rv_tx_read(rv_request *req, rv_tx_work work, void *arg, rv_reply *reply);

/*
 * rv_tx_read, but every statement of the work sees one snapshot: the work
 * runs inside one REPEATABLE READ, READ ONLY transaction, so rows read by
 * two statements belong to the same committed state (a document and its
 * text, never version 3's row with version 4's text).  Costs a BEGIN and
 * a ROLLBACK round trip more than rv_tx_read.
 */
void rv_tx_snapshot(rv_request *req, rv_tx_work work, void *arg,
                    rv_reply *reply);

/* Maps a failed status to its reply (503, 409 or 500) and logs it. */
void rv_tx_fail(rv_request *req, rv_db_conn *c, rv_db_status st,
                rv_reply *reply);

#endif /* RV_TX_H */
