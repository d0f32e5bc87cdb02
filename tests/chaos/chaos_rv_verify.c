/*
 * chaos_rv_verify.c: the reviewd checker's verdict on one phase
 * (chaos_rv.h).
 *
 * It trusts neither reviewd's answers nor its own clients alone; it sets
 * three histories against each other:
 *   - the database's final state: every review of the phase's documents,
 *     its status, reviewer and fence, and its document's status;
 *   - the database's history: chaos_review_audit, one row per insert and
 *     per update of a review row (chaos_rv_stack.c), and kh_outbox, one
 *     row per event reviewd wrote;
 *   - the clients' log: every attempt and its answer.
 * The columns, per phase:
 *   double    reviews decided more than once: the audit shows a second
 *             move out of "pending" or any change of a decided row, or
 *             two different requests were both answered 200;
 *   lost      2xx answers the database contradicts: a decision answered
 *             200 whose review does not hold that decision, reviewer and
 *             fence, or a submit answered 201 whose review is not there;
 *   phantom   decided reviews that no request could have decided: no 200,
 *             and no request for that decision by that reviewer whose
 *             answer was lost;
 *   unacked   decided reviews whose deciding answer was lost (a 5xx or no
 *             answer to a request without Idempotency-Key): allowed, the
 *             price of a connection that breaks at COMMIT;
 *   doc       documents whose status is not their current review's, a
 *             pending review that is not its document's current one, or
 *             a review whose audit history disagrees with its status;
 *   ev-miss / ev-extra  per review and event type, events short of or
 *             beyond the transitions the audit recorded (one submitted
 *             per review, one approved or rejected per decision);
 *   dupid     event ids that occur twice in kh_outbox;
 *   avail     the share of 250 ms windows of the phase in which some
 *             request was answered 2xx; gap_ms the longest run without.
 */
#include "chaos_rv.h"

#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW_US 250000

typedef struct review_row {
    int64_t id, doc_id, current_id;
    char status[16], reviewer[16], fence[24], doc_status[24];
    int history_decisions; /* audit: pending -> decided */
    int history_after;     /* audit: updates of a decided row */
    int history_approved, history_rejected, history_inserts;
    int ev_submitted, ev_approved, ev_rejected;
    int acked;        /* logical requests answered 200 */
    int lost_answers; /* decisions with a lost answer */
} review_row;

typedef struct reviews {
    review_row *r;
    size_t n;
} reviews;

static int cmp_id(const void *a, const void *b)
{
    const int64_t x = ((const review_row *)a)->id;
    const int64_t y = ((const review_row *)b)->id;

    return (x > y) - (x < y);
}

static review_row *find(const reviews *rs, int64_t id)
{
    review_row key;

    key.id = id;
    return rs->n > 0 ? bsearch(&key, rs->r, rs->n, sizeof(key), cmp_id) : NULL;
}

/* Runs a query with the phase's title pattern as $1. */
static PGresult *query(PGconn *c, const char *sql, const char *pattern)
{
    const char *params[1] = {pattern};
    PGresult *res = PQexecParams(c, sql, pattern != NULL ? 1 : 0, NULL, params,
                                 NULL, NULL, 0);

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        fprintf(stderr, "chaos-rv: %s: %s", sql, PQerrorMessage(c));
        PQclear(res);
        return NULL;
    }
    return res;
}

static void copy(char *dst, size_t len, const PGresult *res, int row, int col)
{
    snprintf(dst, len, "%s", PQgetvalue(res, row, col));
}

static int load_reviews(PGconn *c, const char *pattern, reviews *rs)
{
    PGresult *res = query(
        c,
        "SELECT r.id, r.document_id, coalesce(d.current_review_id, 0),"
        " r.status, coalesce(r.reviewer, ''), coalesce(r.fence::text, ''),"
        " d.status FROM kh_document_review r JOIN kh_document d"
        " ON d.id = r.document_id WHERE d.title LIKE $1",
        pattern);

    if (res == NULL)
        return -1;
    rs->n = (size_t)PQntuples(res);
    rs->r = calloc(rs->n + 1, sizeof(rs->r[0]));
    if (rs->r == NULL) {
        PQclear(res);
        return -1;
    }
    for (size_t i = 0; i < rs->n; i++) {
        review_row *r = &rs->r[i];

        r->id = atoll(PQgetvalue(res, (int)i, 0));
        r->doc_id = atoll(PQgetvalue(res, (int)i, 1));
        r->current_id = atoll(PQgetvalue(res, (int)i, 2));
        copy(r->status, sizeof(r->status), res, (int)i, 3);
        copy(r->reviewer, sizeof(r->reviewer), res, (int)i, 4);
        copy(r->fence, sizeof(r->fence), res, (int)i, 5);
        copy(r->doc_status, sizeof(r->doc_status), res, (int)i, 6);
    }
    PQclear(res);
    qsort(rs->r, rs->n, sizeof(rs->r[0]), cmp_id);
    return 0;
}

static int load_history(PGconn *c, const char *pattern, reviews *rs)
{
    PGresult *res = query(
        c,
        "SELECT a.review_id,"
        " count(*) FILTER (WHERE a.old_status = 'pending'"
        "  AND a.new_status <> 'pending'),"
        " count(*) FILTER (WHERE a.old_status <> 'pending'),"
        " count(*) FILTER (WHERE a.old_status = 'pending'"
        "  AND a.new_status = 'approved'),"
        " count(*) FILTER (WHERE a.old_status = 'pending'"
        "  AND a.new_status = 'rejected'),"
        " count(*) FILTER (WHERE a.old_status IS NULL)"
        " FROM chaos_review_audit a JOIN kh_document_review r"
        " ON r.id = a.review_id JOIN kh_document d ON d.id = r.document_id"
        " WHERE d.title LIKE $1 GROUP BY a.review_id",
        pattern);

    if (res == NULL)
        return -1;
    for (int i = 0; i < PQntuples(res); i++) {
        review_row *r = find(rs, atoll(PQgetvalue(res, i, 0)));

        if (r == NULL)
            continue;
        r->history_decisions = atoi(PQgetvalue(res, i, 1));
        r->history_after = atoi(PQgetvalue(res, i, 2));
        r->history_approved = atoi(PQgetvalue(res, i, 3));
        r->history_rejected = atoi(PQgetvalue(res, i, 4));
        r->history_inserts = atoi(PQgetvalue(res, i, 5));
    }
    PQclear(res);
    return 0;
}

/* Events of the phase's documents per review; events naming a review
 * that is not one of the phase's count as extra. */
static int load_events(PGconn *c, const char *pattern, reviews *rs,
                       chaos_rv_result *res_out)
{
    PGresult *res = query(
        c,
        "SELECT coalesce((o.payload->>'review_id')::bigint, 0),"
        " o.routing_key, count(*) FROM kh_outbox o JOIN kh_document d"
        " ON d.id = o.document_id WHERE d.title LIKE $1 GROUP BY 1, 2",
        pattern);

    if (res == NULL)
        return -1;
    for (int i = 0; i < PQntuples(res); i++) {
        review_row *r = find(rs, atoll(PQgetvalue(res, i, 0)));
        const char *type = PQgetvalue(res, i, 1);
        const int n = atoi(PQgetvalue(res, i, 2));

        if (r == NULL)
            res_out->events_extra += n;
        else if (strcmp(type, "document.submitted") == 0)
            r->ev_submitted += n;
        else if (strcmp(type, "document.approved") == 0)
            r->ev_approved += n;
        else
            r->ev_rejected += n;
    }
    PQclear(res);
    return 0;
}

static long long scalar(PGconn *c, const char *sql, const char *pattern)
{
    PGresult *res = query(c, sql, pattern);
    long long v = -1;

    if (res != NULL && PQntuples(res) == 1)
        v = atoll(PQgetvalue(res, 0, 0));
    PQclear(res);
    return v;
}

/* Documents whose status disagrees with their current review. */
static long long doc_mismatches(PGconn *c, const char *pattern)
{
    return scalar(
        c,
        "SELECT count(*) FROM kh_document d LEFT JOIN kh_document_review r"
        " ON r.id = d.current_review_id WHERE d.title LIKE $1 AND NOT"
        " coalesce((d.status = 'draft' AND r.id IS NULL)"
        "  OR (r.status = 'pending' AND d.status = 'pending_review')"
        "  OR (r.status IN ('approved', 'rejected') AND r.status = d.status),"
        "  false)",
        pattern);
}

/* Adds how far have is below or above want. */
static void count_off(int have, int want, int *missing, int *extra)
{
    if (have < want)
        *missing += want - have;
    else if (have > want)
        *extra += have - want;
}

/* The database's own invariants, review by review. */
static void judge_database(const reviews *rs, chaos_rv_result *res)
{
    for (size_t i = 0; i < rs->n; i++) {
        const review_row *r = &rs->r[i];
        const int decided = strcmp(r->status, "pending") != 0;

        res->reviews++;
        res->decided += decided;
        res->no_fence += decided && r->fence[0] == '\0';
        if (r->history_decisions > 1 || r->history_after > 0)
            res->double_decisions++;
        if (!decided && r->current_id != r->id)
            res->doc_mismatch++;
        count_off(r->ev_submitted, r->history_inserts, &res->events_missing,
                  &res->events_extra);
        count_off(r->ev_approved, r->history_approved, &res->events_missing,
                  &res->events_extra);
        count_off(r->ev_rejected, r->history_rejected, &res->events_missing,
                  &res->events_extra);
        /* The history must agree with the final state, too. */
        if (decided != (r->history_decisions > 0))
            res->doc_mismatch++;
    }
}

/* ---- the clients' side --------------------------------------------------- */

static int cmp_attempt(const void *a, const void *b)
{
    const chaos_rv_attempt *x = a, *y = b;

    if (x->req_no != y->req_no)
        return (x->req_no > y->req_no) - (x->req_no < y->req_no);
    return (x->attempt > y->attempt) - (x->attempt < y->attempt);
}

static void count_answer(const chaos_rv_attempt *a, chaos_rv_result *res)
{
    res->attempts++;
    if (a->status >= 200 && a->status <= 299)
        res->ok++;
    else if (a->status == 409 && strcmp(a->code, "LOCK_BUSY") == 0)
        res->lock_busy++;
    else if (a->status == 409 && strcmp(a->code, "INVALID_STATE") == 0)
        res->state_conflict++;
    else if (a->status == 503)
        res->unavailable++;
    else if (a->status >= 500)
        res->other_5xx++;
    else if (a->status == 0)
        res->conn_errors++;
    else
        res->unexpected++;
}

static const char *decision_of(chaos_rv_kind k)
{
    return k == CHAOS_RV_APPROVE ? "approved" : "rejected";
}

/* A 200 to a decision: the database must hold exactly that. */
static void judge_decision(const chaos_rv_attempt *a, reviews *rs,
                           chaos_rv_result *res)
{
    review_row *r = find(rs, a->review_id);

    if (r == NULL) {
        res->lost_acks++;
        return;
    }
    if (chaos_rv_ambiguous(a->status)) {
        if (strcmp(r->status, decision_of(a->kind)) == 0
            && strcmp(r->reviewer, a->reviewer) == 0)
            r->lost_answers++;
        return;
    }
    if (a->status != 200)
        return;
    r->acked++;
    if (strcmp(a->got_status, decision_of(a->kind)) != 0
        || strcmp(r->status, a->got_status) != 0
        || strcmp(r->reviewer, a->reviewer) != 0
        || strcmp(r->fence, a->got_fence) != 0)
        res->lost_acks++;
}

/* Each logical request's final attempt against the database. */
static void judge_requests(const chaos_rv_attempt *a, size_t n, reviews *rs,
                           chaos_rv_result *res)
{
    for (size_t i = 0; i < n; i++) {
        const int final = i + 1 == n || a[i + 1].req_no != a[i].req_no;

        count_answer(&a[i], res);
        if (!final)
            continue;
        if (a[i].kind == CHAOS_RV_APPROVE || a[i].kind == CHAOS_RV_REJECT) {
            judge_decision(&a[i], rs, res);
        } else if (a[i].kind == CHAOS_RV_SUBMIT && a[i].status == 201) {
            const review_row *r = find(rs, a[i].got_review_id);

            if (r == NULL || r->doc_id != a[i].doc_id)
                res->lost_acks++;
        }
    }
    for (size_t i = 0; i < rs->n; i++) {
        const review_row *r = &rs->r[i];

        if (r->acked > 1)
            res->double_decisions++;
        if (strcmp(r->status, "pending") == 0 || r->acked > 0)
            continue;
        if (r->lost_answers > 0)
            res->unacked++;
        else
            res->phantoms++;
    }
}

static void availability(const chaos_rv_attempt *a, size_t n, int64_t start_us,
                         int64_t until_us, chaos_rv_result *res)
{
    const size_t windows = (size_t)((until_us - start_us) / WINDOW_US) + 1;
    unsigned char *ok = calloc(windows, 1);
    size_t hit = 0, gap = 0, longest = 0;

    if (ok == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        if (a[i].status >= 200 && a[i].status <= 299 && a[i].t1_us >= start_us
            && a[i].t1_us < until_us)
            ok[(a[i].t1_us - start_us) / WINDOW_US] = 1;
    for (size_t w = 0; w < windows; w++) {
        hit += ok[w];
        gap = ok[w] ? 0 : gap + 1;
        longest = gap > longest ? gap : longest;
    }
    res->availability = (double)hit / (double)windows;
    res->longest_gap_ms = (int64_t)longest * WINDOW_US / 1000;
    free(ok);
}

int chaos_rv_verify(rvt_db *db, const char *phase, const chaos_rv_log *log,
                    int64_t start_us, int64_t until_us, chaos_rv_result *res)
{
    char pattern[64];
    reviews rs = {NULL, 0};
    chaos_rv_attempt *a = NULL;
    PGconn *c = PQconnectdb(db->url);
    int rc = -1;
    long long v;

    snprintf(pattern, sizeof(pattern), "chaos %s %%", phase);
    res->duration_ms = (until_us - start_us) / 1000;
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "chaos-rv: cannot connect to check: %s",
                PQerrorMessage(c));
        goto out;
    }
    if (load_reviews(c, pattern, &rs) != 0
        || load_history(c, pattern, &rs) != 0
        || load_events(c, pattern, &rs, res) != 0)
        goto out;
    v = doc_mismatches(c, pattern);
    res->doc_mismatch += (int)v;
    res->duplicate_event_ids = (int)scalar(
        c, "SELECT count(*) - count(DISTINCT event_id) FROM kh_outbox", NULL);
    if (v < 0 || res->duplicate_event_ids < 0)
        goto out;
    judge_database(&rs, res);
    a = malloc((log->n + 1) * sizeof(*a));
    if (a == NULL)
        goto out;
    memcpy(a, log->a, log->n * sizeof(*a));
    qsort(a, log->n, sizeof(*a), cmp_attempt);
    judge_requests(a, log->n, &rs, res);
    availability(a, log->n, start_us, until_us, res);
    rc = 0;
out:
    free(a);
    free(rs.r);
    PQfinish(c);
    return rc;
}

/* ---- bounds and the table ------------------------------------------------ */

static void problem(chaos_rv_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void problem(chaos_rv_result *r, const char *fmt, ...)
{
    const size_t len = strlen(r->problems);
    va_list ap;

    if (len + 2 >= sizeof(r->problems))
        return;
    if (len > 0)
        snprintf(r->problems + len, sizeof(r->problems) - len, "; ");
    va_start(ap, fmt);
    vsnprintf(r->problems + strlen(r->problems),
              sizeof(r->problems) - strlen(r->problems), fmt, ap);
    va_end(ap);
}

int chaos_rv_ok(chaos_rv_result *r)
{
    r->problems[0] = '\0';
    if (r->double_decisions > 0)
        problem(r, "%d reviews decided twice", r->double_decisions);
    if (r->lost_acks > 0) {
        problem(r, "%d acknowledged changes not in the database",
                r->lost_acks);
    }
    if (r->phantoms > 0)
        problem(r, "%d reviews decided by no request", r->phantoms);
    if (r->doc_mismatch > 0)
        problem(r, "%d documents disagree with their review", r->doc_mismatch);
    if (r->events_missing + r->events_extra + r->duplicate_event_ids > 0) {
        problem(r, "events: %d missing, %d extra, %d duplicate ids",
                r->events_missing, r->events_extra, r->duplicate_event_ids);
    }
    if (r->unexpected > 0) {
        problem(r, "%d answers outside the contract (4xx but 409)",
                r->unexpected);
    }
    if (r->unresolved > 0) {
        problem(r, "%d keyed requests never got a definite answer",
                r->unresolved);
    }
    if (r->decided == 0)
        problem(r, "no review was decided: no progress");
    return r->problems[0] == '\0';
}

void chaos_rv_print_header(void)
{
    printf("%-14s %4s %6s %6s %5s %5s %5s %5s %4s %5s %7s %7s %7s %6s %4s "
           "%7s %3s %7s %4s %6s %6s  %s\n",
           "fault", "secs", "faults", "reqs", "2xx", "busy", "state", "503",
           "5xx", "noans", "decided", "nofence", "unacked", "double", "lost",
           "phantom", "doc", "ev-miss", "+ev", "avail", "gap_ms", "verdict");
}

void chaos_rv_print_row(const chaos_rv_result *r)
{
    printf("%-14s %4.1f %6d %6d %5d %5d %5d %5d %4d %5d %7d %7d %7d %6d %4d "
           "%7d %3d %7d %4d %5.1f%% %6lld  %s\n",
           r->name, (double)r->duration_ms / 1000, r->faults, r->attempts,
           r->ok, r->lock_busy, r->state_conflict, r->unavailable,
           r->other_5xx, r->conn_errors, r->decided, r->no_fence, r->unacked,
           r->double_decisions, r->lost_acks, r->phantoms, r->doc_mismatch,
           r->events_missing, r->events_extra + r->duplicate_event_ids,
           100.0 * r->availability, (long long)r->longest_gap_ms,
           r->problems[0] ? "FAIL" : "ok");
}
