/*
 * rv_lifecycle.c: submit, approve and reject, the review lifecycle.
 *
 * Defence in depth, as API.md's concurrency contract says:
 *   0. before any lock, who may act is decided from the JWT and a plain
 *      read (rv_load.h): a caller who is not the document's author
 *      (submit) or who wrote or submitted it (four eyes, approve and
 *      reject) gets 403 at once and never holds the Redis lock or a row
 *      lock, so repeating someone else's request cannot turn the rightful
 *      caller away with 409;
 *   1. the Redis lock (lock:doc:submit:{document_id}, TTL 8 s, or
 *      lock:doc:review:{review_id}, TTL 10 s), taken without waiting,
 *      turns a concurrent duplicate away at once with 409 LOCK_BUSY; it
 *      is taken once the request has its place at the write gate
 *      (tx/rv_admit.h), so waiting for a place holds no lock;
 *   2. under it, one PostgreSQL transaction locks the rows (review first,
 *      then document), checks again who may act and the state, and
 *      writes (submit does all three in one statement); a request that
 *      lost the race sees the new state and gets 409 INVALID_STATE;
 *   3. the schema's constraints (one pending review per document, one
 *      decision per review, four eyes) refuse whatever slipped past both.
 * The lock is an optimisation and a fast refusal; correctness rests on 2
 * and 3, which is why a lock that Redis cannot grant (down, off, or an
 * expired TTL under a paused holder) never makes a second decision
 * possible: the decided review's status is checked under the row lock.
 * Step 0 reads outside the transaction, so it can only refuse early,
 * never allow: what it saw is checked again under the row lock.
 *
 * The document's state machine, moved only here:
 *   draft | rejected --submit--> pending_review (a new pending review)
 *   pending_review --approve--> approved   (the review: approved)
 *   pending_review --reject---> rejected   (the review: rejected)
 * Each transition inserts its outbox row (document.submitted / .approved
 * / .rejected) in the same transaction: see emit_event().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handlers/rv_handlers.h"
#include "handlers/rv_load.h"
#include "bg/rv_notifier.h"
#include "tx/rv_hooks.h"
#include "tx/rv_idem.h"
#include "svc_json.h"
#include "core/rv_locks.h"
#include "db/rv_query.h"
#include "tx/rv_tx.h"
#include "api/rv_views.h"

#define RV_COMMENT_MAX 2000

typedef struct decide_args {
    const char *decision; /* "approved" or "rejected" */
    const char *comment;  /* NULL: none */
    const rv_held *held;  /* the lock: its fence, 0 when degraded */
} decide_args;

/*
 * The outbox: inserts the event row on c, inside the transaction that
 * made the change, so an event exists exactly when the change committed
 * (API.md, Events; the relay in rv_relay.c publishes it).  occurred_at is
 * the document's updated_at, which this transaction's now() just set.
 * In test builds, "X-Test-Fail: after-event" fails the work right after
 * the insert (rv_hooks.h), so tests can check that a rolled-back change
 * emits nothing.  The request's session does not NOTIFY (rv_notifier.h):
 * run_locked asks the notifier once the transaction is over.
 */
static rv_db_status emit_event(rv_request *req, rv_db_conn *c,
                               const char *type, const rv_doc *d,
                               const rv_review *r)
{
    const rv_db_status st = rv_query_outbox_insert(c, type, d->id, r->id,
                                                   r->document_version,
                                                   req->who.sub,
                                                   d->updated_at);

    req->outbox_rows++;
    if (st == RV_DB_OK && rv_hook_fail_after_event(req))
        return RV_DB_ERROR;
    return st;
}

/* The end of a transition that wrote its rows: the outbox row, then the
 * reply (status, the document and its review); clears r, whose result d
 * borrows (rv_query_review_doc_get). */
static rv_db_status emit_and_reply(rv_request *req, rv_db_conn *c,
                                   const char *type, int status,
                                   const rv_doc *d, rv_review *r,
                                   rv_reply *reply)
{
    const rv_db_status st = emit_event(req, c, type, d, r);

    if (st == RV_DB_OK)
        rv_reply_json(reply, status, rv_view_decision(d, r));
    rv_query_review_clear(r);
    return st;
}

/* One locked operation: its Redis lock, the check before the lock and
 * the work under it. */
typedef struct locked_op {
    const char *key; /* the Redis lock's name */
    int64_t ttl_ms;
    rv_tx_work allowed; /* plain reads: sets reply to refuse (403, 404) */
    void *allowed_arg;
    rv_tx_work work; /* in the transaction, under both locks */
    void *arg;
} locked_op;

/*
 * Before any lock, on plain reads: a stored Idempotency-Key answer first
 * (a replay needs no lock; the claim inside the transaction is the
 * authoritative check), then op->allowed.  Run by rv_tx_read, so a
 * connection that a PostgreSQL restart broke is made again and the reads
 * run once more.
 */
static rv_db_status before_lock(rv_request *req, rv_db_conn *c, void *arg,
                                rv_reply *reply)
{
    const locked_op *op = arg;

    if (rv_idem_applies(req)) {
        rv_db_status st = RV_DB_OK;
        const int r = rv_idem_lookup(req, c, reply, &st);

        if (r != 0)
            return r > 0 ? RV_DB_OK : st;
    }
    return op->allowed(req, c, op->allowed_arg, reply);
}

/*
 * Checks who may act, takes a place at the write gate, takes the lock,
 * runs the work in a transaction, gives the place back and releases the
 * lock.  The place comes first (rv_tx.h): a request waiting for one holds
 * no lock, so it neither turns others on its document away with 409 for
 * a wait that is not theirs nor spends its lock's TTL waiting; and it
 * waits only for the gate, never for a lock while holding a place (the
 * lock is taken without waiting).  The outbox's NOTIFY is asked for
 * after the transaction, whatever its outcome: a rolled-back row wakes
 * the relay for nothing, which is harmless, and a COMMIT whose outcome
 * is unknown may have committed one.
 */
static void run_locked(rv_request *req, const locked_op *op, rv_held *held,
                       rv_reply *reply)
{
    rv_tx_read(req, before_lock, (void *)op, reply);
    if (reply->status != 0)
        return;
    if (rv_tx_admit(req, reply) != 0)
        return;
    if (rv_locks_acquire(req->app->locks, op->key, op->ttl_ms, held)
        == RV_LOCK_BUSY) {
        rv_tx_dismiss(req);
        req->lock_outcome = "busy";
        rv_reply_error(reply, 409, "LOCK_BUSY",
                       "another request is "
                       "changing this right now; retry later");
        return;
    }
    req->lock_outcome = rv_metrics_lock_label(held->outcome);
    rv_tx_run_admitted(req, op->work, op->arg, reply);
    rv_tx_dismiss(req);
    if (req->outbox_rows > 0)
        rv_notifier_poke(req->app->notifier);
    rv_locks_release(req->app->locks, held);
}

/* Why submit_work's statement found no row, from the row locked: 404,
 * 403 or 409 set on reply (*st RV_DB_OK), or 0 when the document may be
 * submitted after all (a change committed in between). */
static int refuse_submit(rv_request *req, rv_db_conn *c, rv_reply *reply,
                         rv_db_status *st)
{
    char id[RV_LOAD_ID_LEN];
    rv_doc d;
    int may;

    if (!rv_load_own_document(req, c, 1, "submit", id, &d, reply, st))
        return 1;
    may = d.state == RV_DOC_DRAFT || d.state == RV_DOC_REJECTED;
    if (!may) {
        rv_reply_error(reply, 409, "INVALID_STATE",
                       "only a draft or "
                       "rejected document can be submitted");
    }
    rv_query_doc_clear(&d);
    return !may;
}

/*
 * Submit: the owner moves a draft or rejected document to review.  The
 * checks (owner, state) and both writes are one statement, one round
 * trip with BEGIN; only when it finds no row is the row read (locked) to
 * answer why, and the statement run once more if nothing stands in the
 * way any longer.
 */
static rv_db_status submit_work(rv_request *req, rv_db_conn *c, void *arg,
                                rv_reply *reply)
{
    char id[RV_LOAD_ID_LEN];
    rv_doc after;
    rv_review r;
    rv_db_status st;
    int found = 0, n;

    (void)arg;
    rv_request_id_text(req, id, sizeof(id));
    for (n = 0; n < 2 && !found; n++) {
        st = rv_query_review_submit(c, id, req->who.sub, &r, &after, &found);
        if (st != RV_DB_OK)
            return st;
        if (!found && refuse_submit(req, c, reply, &st))
            return st;
    }
    if (!found)
        return RV_DB_ERROR; /* allowed under the row lock, yet refused */
    return emit_and_reply(req, c, "document.submitted", 201, &after, &r,
                          reply);
}

void rv_handle_document_submit(rv_request *req, rv_reply *reply)
{
    static const char *const none[] = {NULL};
    char key[64];
    rv_held held;
    locked_op op = {key,
                    req->app->cfg->submit_lock_ttl_ms,
                    rv_load_check_author,
                    (void *)"submit",
                    submit_work,
                    NULL};
    json_t *body = rv_request_body_object(req, 1, none, reply);

    if (body == NULL)
        return;
    json_decref(body);
    snprintf(key, sizeof(key), "lock:doc:submit:%lld",
             (long long)req->match.id);
    run_locked(req, &op, &held, reply);
}

/* The state check of a decision, under both row locks (four eyes was
 * checked by rv_load_decidable): 1 if allowed, else the reply is set. */
static int may_decide(const rv_review *r, const rv_doc *d, rv_reply *reply)
{
    if (r->state != RV_REVIEW_PENDING || d->state != RV_DOC_PENDING_REVIEW
        || d->current_review_id == NULL
        || strcmp(d->current_review_id, r->id) != 0) {
        rv_reply_error(reply, 409, "INVALID_STATE",
                       "this review has already been decided");
        return 0;
    }
    return 1;
}

/* Before the lock: four eyes, on plain reads. */
static rv_db_status decide_allowed(rv_request *req, rv_db_conn *c, void *arg,
                                   rv_reply *reply)
{
    char rid[RV_LOAD_ID_LEN];
    rv_review r;
    rv_doc d;
    rv_db_status st;

    (void)arg;
    if (rv_load_decidable(req, c, 0, rid, &r, &d, reply, &st)) {
        rv_query_doc_clear(&d);
        rv_query_review_clear(&r);
    }
    return st;
}

/* Why decide_work's statement found no row, from both rows locked
 * (review, then document): 404, 403 or 409 set on reply (*st RV_DB_OK),
 * or 0 when the decision may be made after all. */
static int refuse_decision(rv_request *req, rv_db_conn *c, rv_reply *reply,
                           rv_db_status *st)
{
    char rid[RV_LOAD_ID_LEN];
    rv_review r;
    rv_doc d;
    int may;

    if (!rv_load_decidable(req, c, 1, rid, &r, &d, reply, st))
        return 1;
    may = may_decide(&r, &d, reply);
    rv_query_doc_clear(&d);
    rv_query_review_clear(&r);
    return !may;
}

/*
 * A decision: the checks (four eyes, both states), both writes and the
 * locks, review first, then document, in one statement, one round trip
 * with BEGIN; only when it finds no row are the rows read (locked) to
 * answer why, and the statement run once more if nothing stands in the
 * way any longer.  Then the outbox row, sent with the COMMIT.
 */
static rv_db_status decide_work(rv_request *req, rv_db_conn *c, void *arg,
                                rv_reply *reply)
{
    const decide_args *a = arg;
    char rid[RV_LOAD_ID_LEN];
    char fence[24];
    rv_review decided;
    rv_doc after;
    rv_db_status st;
    int found = 0, n;

    rv_request_id_text(req, rid, sizeof(rid));
    snprintf(fence, sizeof(fence), "%llu", (unsigned long long)a->held->fence);
    for (n = 0; n < 2 && !found; n++) {
        st = rv_query_review_decide(c, rid, a->decision, req->who.sub,
                                    a->comment,
                                    a->held->fence > 0 ? fence : NULL,
                                    &decided, &after, &found);
        if (st != RV_DB_OK)
            return st;
        if (!found && refuse_decision(req, c, reply, &st))
            return st;
    }
    if (!found)
        return RV_DB_ERROR; /* allowed under the row locks, yet refused */
    return emit_and_reply(req, c,
                          strcmp(a->decision, "approved") == 0
                              ? "document.approved"
                              : "document.rejected",
                          200, &after, &decided, reply);
}

static void handle_decision(rv_request *req, const char *decision,
                            int comment_required, rv_reply *reply)
{
    static const char *const fields[] = {"comment", NULL};
    char detail[160];
    char key[64];
    decide_args a;
    rv_held held;
    locked_op op = {key,
                    req->app->cfg->review_lock_ttl_ms,
                    decide_allowed,
                    NULL,
                    decide_work,
                    &a};
    json_t *body;
    int rc;

    if (!rv_request_require_role(req, RV_ROLE_REVIEWER | RV_ROLE_ADMIN, reply))
        return;
    body = rv_request_body_object(req, !comment_required, fields, reply);
    if (body == NULL)
        return;
    memset(&a, 0, sizeof(a));
    memset(&held, 0, sizeof(held));
    a.decision = decision;
    a.held = &held;
    rc = svc_json_string_field(body, "comment", comment_required ? 1 : 0,
                               RV_COMMENT_MAX, !comment_required, &a.comment,
                               detail, sizeof(detail));
    if (rc < 0 || (comment_required && rc == 0)) {
        rv_reply_error(reply, 400, "INVALID_ARGUMENT",
                       rc < 0 ? detail : "\"comment\" is required");
        json_decref(body);
        return;
    }
    snprintf(key, sizeof(key), "lock:doc:review:%lld",
             (long long)req->match.id);
    run_locked(req, &op, &held, reply);
    json_decref(body);
}

void rv_handle_review_approve(rv_request *req, rv_reply *reply)
{
    handle_decision(req, "approved", 0, reply);
}

void rv_handle_review_reject(rv_request *req, rv_reply *reply)
{
    handle_decision(req, "rejected", 1, reply);
}
