/*
 * rv_db_async.c: a non-blocking, pipelined libpq connection for an event
 * loop (see rv_db_async.h).
 *
 * States: DOWN (no connection; connecting starts once a statement is
 * wanted and RV_DBA_RETRY_MS have passed since the last failure),
 * CONNECTING (PQconnectPoll under way), SETUP (connected; the session's
 * statements are in flight as one pipeline, the "setup" entry at the
 * head of the queue) and READY.  The queue holds what was sent, oldest
 * first, and libpq answers in that order: a statement's result, the
 * NULL that ends it, then its sync.  The entry at the head ends when its
 * sync arrives.
 */
#include "db/rv_db_async.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "svc_deadline.h"
#include "svc_log.h"

/* The least time between two connects that failed. */
#define RV_DBA_RETRY_MS 250

typedef enum dba_state {
    DBA_DOWN = 0,
    DBA_CONNECTING,
    DBA_SETUP,
    DBA_READY
} dba_state;

struct rv_dba {
    rv_db *db;
    PGconn *pg;
    dba_state state;
    PostgresPollingStatusType polling; /* CONNECTING: what it waits for */
    int gated;                         /* the connect holds the bulkhead */
    int wanted;       /* a statement was refused for want of a connection */
    int want_write;   /* output pending (PQflush said 1) */
    int64_t retry_at; /* DOWN: no connect before */
    int64_t connect_deadline;
    rv_dba_query *head, *tail;
    int in_flight; /* callers' statements in the queue */
    int unsynced;  /* of them, queued since the last sync (rv_dba_flush) */
    rv_dba_query setup;
    char errmsg[512];
};

/* Keeps what happened, with any password libpq quoted cut out. */
static void set_error(rv_dba *a, const char *what, const char *msg)
{
    const int k = snprintf(a->errmsg, sizeof(a->errmsg), "%s: ", what);
    size_t n;

    if (k > 0 && (size_t)k < sizeof(a->errmsg)) {
        svc_log_redact_secrets(rv_db_url(a->db),
                               msg != NULL ? msg : "unknown error",
                               a->errmsg + k, sizeof(a->errmsg) - (size_t)k);
    }
    n = strlen(a->errmsg);
    while (n > 0 && (a->errmsg[n - 1] == '\n' || a->errmsg[n - 1] == ' '))
        a->errmsg[--n] = '\0';
}

/* reached: 1 answered, 0 not reachable, -1 no verdict (cut short). */
static void gate_leave(rv_dba *a, int reached)
{
    svc_bulkhead *b = rv_db_bulkhead(a->db);

    if (b != NULL && reached < 0)
        svc_bulkhead_release(b);
    else if (b != NULL)
        svc_bulkhead_leave(b, reached);
}

static int gate_enter(rv_dba *a)
{
    svc_bulkhead *b = rv_db_bulkhead(a->db);

    return b == NULL || svc_bulkhead_enter(b) == SVC_BULKHEAD_OK;
}

rv_dba *rv_dba_new(rv_db *db)
{
    rv_dba *a = calloc(1, sizeof(*a));

    if (a == NULL)
        return NULL;
    a->db = db;
    a->setup.setup = 1;
    return a;
}

static rv_dba_query *pop(rv_dba *a)
{
    rv_dba_query *q = a->head;

    a->head = q->next;
    if (a->head == NULL)
        a->tail = NULL;
    q->next = NULL;
    if (!q->setup)
        a->in_flight--;
    return q;
}

static void push(rv_dba *a, rv_dba_query *q)
{
    q->next = NULL;
    q->res = NULL;
    if (a->tail != NULL)
        a->tail->next = q;
    else
        a->head = q;
    a->tail = q;
    if (!q->setup)
        a->in_flight++;
}

/* Closes the connection and ends what was in flight: past its deadline
 * TIMEOUT, else LOST.  failed: the connection failed (counted, logged),
 * rather than being closed.  For the bulkhead, each statement past its
 * deadline is a call that did not reach the server, as a worker's would
 * be; a statement whose connection the server closed leaves without a
 * verdict, as a worker's does (rv_db.c): a restart must not open the
 * breaker with the connections it closed, and the reconnect that follows
 * says whether the server can be reached.  A connect is a call that did
 * not reach the server only while it is still connecting; one lost while
 * it prepares its session (SETUP) had reached it, and leaves without a
 * verdict: a restart just after reviewd started, with each loop's first
 * connection still preparing, must not count one failure per loop towards
 * the breaker (the likely cause of a 503 that reviewd.recovery's keyed
 * submit right after a restart got once, on a loaded machine). */
static void shut(rv_dba *a, int failed)
{
    const int64_t now = svc_deadline_now_ms();
    rv_dba_query *q;

    if (failed) {
        svc_log_write(rv_db_log(a->db), SVC_LOG_WARN, "postgres_loop_lost",
                      json_pack("{s:s,s:i}", "error", a->errmsg, "in_flight",
                                a->in_flight));
    }
    if (a->pg != NULL) {
        PQfinish(a->pg);
        a->pg = NULL;
        rv_db_count(a->db, -1, 0, a->state != DBA_READY && failed);
        if (a->state == DBA_READY)
            rv_db_count_loop_ready(a->db, -1);
    }
    if (a->gated) {
        a->gated = 0;
        gate_leave(a, failed && a->state == DBA_CONNECTING ? 0 : -1);
    }
    a->state = DBA_DOWN;
    a->want_write = 0;
    a->unsynced = 0;
    a->retry_at = now + (failed ? RV_DBA_RETRY_MS : 0);
    while (a->head != NULL) {
        q = pop(a);
        PQclear(q->res);
        q->res = NULL;
        if (q->setup)
            continue;
        if (q->deadline_ms <= now) {
            gate_leave(a, 0);
            q->done(q, RV_DBA_TIMEOUT, NULL);
            continue;
        }
        gate_leave(a, -1);
        q->done(q, RV_DBA_LOST, NULL);
    }
}

void rv_dba_close(rv_dba *a)
{
    if (a != NULL)
        shut(a, 0);
}

void rv_dba_free(rv_dba *a)
{
    if (a == NULL)
        return;
    shut(a, 0);
    free(a);
}

/* Sends what libpq holds; 0, or -1 with the connection failed. */
static int flush_out(rv_dba *a)
{
    const int rc = PQflush(a->pg);

    if (rc < 0) {
        set_error(a, "send", PQerrorMessage(a->pg));
        return -1;
    }
    a->want_write = rc == 1;
    return 0;
}

/* Starts a connect (DOWN to CONNECTING), through the bulkhead. */
static void start_connect(rv_dba *a)
{
    char timeout[16];
    const char *keys[] = {"connect_timeout", "application_name", "dbname",
                          NULL};
    const char *vals[] = {timeout, "reviewd", rv_db_url(a->db), NULL};
    const int64_t now = svc_deadline_now_ms();

    a->wanted = 0;
    if (!gate_enter(a)) {
        a->retry_at = now + RV_DBA_RETRY_MS;
        return;
    }
    a->gated = 1;
    snprintf(timeout, sizeof(timeout), "%d", rv_db_timeout_s(a->db));
    /* dbname comes last: the URL's own settings override our defaults. */
    a->pg = PQconnectStartParams(keys, vals, 1);
    if (a->pg == NULL) {
        set_error(a, "connect", "out of memory");
        rv_db_count(a->db, 0, 0, 1);
        shut(a, 1);
        return;
    }
    rv_db_count(a->db, 1, 0, 0);
    a->state = DBA_CONNECTING;
    a->polling = PGRES_POLLING_WRITING;
    a->connect_deadline = now + (int64_t)rv_db_timeout_s(a->db) * 1000;
    if (PQstatus(a->pg) == CONNECTION_BAD) {
        set_error(a, "connect", PQerrorMessage(a->pg));
        shut(a, 1);
    }
}

/* Connected: prepares the session in one pipeline (CONNECTING to
 * SETUP).  0, or -1 with the connection failed. */
static int send_setup(rv_dba *a)
{
    size_t n, i;
    const rv_stmt_def *stmts = rv_db_stmts(a->db, &n);
    char sql[64];
    int ok;

    snprintf(sql, sizeof(sql), "SET statement_timeout = %d",
             rv_db_timeout_s(a->db) * 1000);
    ok = PQsetnonblocking(a->pg, 1) == 0 && PQenterPipelineMode(a->pg) == 1
         && PQsendQueryParams(a->pg, sql, 0, NULL, NULL, NULL, NULL, 0) == 1;
    for (i = 0; ok && i < n; i++) {
        ok = PQsendPrepare(a->pg, stmts[i].name, stmts[i].sql,
                           stmts[i].nparams, NULL)
             == 1;
    }
    if (!ok || PQpipelineSync(a->pg) != 1) {
        set_error(a, "prepare", PQerrorMessage(a->pg));
        return -1;
    }
    a->setup.failed = 0;
    a->setup.deadline_ms = a->connect_deadline;
    push(a, &a->setup);
    a->state = DBA_SETUP;
    return flush_out(a);
}

/* Moves a connect on after its socket was ready. */
static void poll_connect(rv_dba *a)
{
    a->polling = PQconnectPoll(a->pg);
    if (a->polling == PGRES_POLLING_FAILED) {
        set_error(a, "connect", PQerrorMessage(a->pg));
        shut(a, 1);
    } else if (a->polling == PGRES_POLLING_OK && send_setup(a) != 0) {
        shut(a, 1);
    }
}

/* The head is done: a caller's statement at the end of its result, the
 * session's preparation at its sync. */
static void finish_head(rv_dba *a)
{
    rv_dba_query *q = pop(a);
    PGresult *res = q->res;

    q->res = NULL;
    if (!q->setup) {
        gate_leave(a, 1);
        q->done(q, RV_DBA_DONE, res);
        return;
    }
    PQclear(res);
    if (q->failed) {
        shut(a, 1);
        return;
    }
    a->state = DBA_READY;
    a->gated = 0;
    gate_leave(a, 1);
    rv_db_count(a->db, 0, 1, 0);
    rv_db_count_loop_ready(a->db, 1);
}

/* Reads every result that has arrived, ending each caller's statement
 * when its result is complete (libpq's NULL after it) and the session's
 * preparation, several statements, at its sync; a caller's batch's sync
 * only closes the batch.  0, or -1 with the connection failed. */
static int drain(rv_dba *a)
{
    int nulls = 0;

    /* A batch's last sync may stay unread with nothing in flight: the
     * next batch's first read takes it (and leaves it). */
    while (a->head != NULL && a->pg != NULL && !PQisBusy(a->pg)) {
        PGresult *r = PQgetResult(a->pg);
        ExecStatusType st;

        if (r == NULL) {
            /* Ends one statement's results; two in a row would mean
             * libpq has nothing more for us (never expected).  Every
             * statement has a result before its NULL (rows, an error,
             * or PGRES_PIPELINE_ABORTED), so a NULL before the head's
             * result is not the end of the head's. */
            if (++nulls > 1)
                break;
            if (!a->head->setup && a->head->res != NULL)
                finish_head(a);
            continue;
        }
        nulls = 0;
        st = PQresultStatus(r);
        if (st == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            if (a->head != NULL && a->head->setup)
                finish_head(a);
            continue;
        }
        if (a->head->setup) {
            if (st != PGRES_COMMAND_OK) {
                a->head->failed = 1;
                set_error(a, "prepare", PQresultErrorMessage(r));
            }
            PQclear(r);
        } else if (a->head->res == NULL) {
            a->head->res = r;
        } else {
            PQclear(r);
        }
    }
    if (a->pg != NULL && PQstatus(a->pg) != CONNECTION_OK) {
        set_error(a, "recv", PQerrorMessage(a->pg));
        return -1;
    }
    return 0;
}

void rv_dba_handle(rv_dba *a)
{
    if (a->pg == NULL)
        return;
    if (a->state == DBA_CONNECTING) {
        poll_connect(a);
        return;
    }
    if (a->want_write && flush_out(a) != 0) {
        shut(a, 1);
        return;
    }
    if (PQconsumeInput(a->pg) != 1) {
        set_error(a, "recv", PQerrorMessage(a->pg));
        shut(a, 1);
        return;
    }
    if (drain(a) != 0)
        shut(a, 1);
}

int rv_dba_send(rv_dba *a, rv_dba_query *q, int stmt,
                const char *const *params, int budget_ms)
{
    size_t n;
    const rv_stmt_def *s = &rv_db_stmts(a->db, &n)[stmt];

    if (a->state != DBA_READY) {
        a->wanted = 1;
        return -1;
    }
    if (a->in_flight >= RV_DBA_MAX_IN_FLIGHT || !gate_enter(a))
        return -1;
    if (PQsendQueryPrepared(a->pg, s->name, s->nparams, params, NULL, NULL, 0)
        != 1) {
        /* libpq refuses on a connection it found closed: no verdict
         * (shut's comment). */
        set_error(a, "send", PQerrorMessage(a->pg));
        gate_leave(a, -1);
        shut(a, 1);
        return -1;
    }
    q->deadline_ms = svc_deadline_now_ms() + budget_ms;
    push(a, q);
    a->unsynced++;
    return 0;
}

int rv_dba_flush(rv_dba *a)
{
    if (a->unsynced == 0 || a->pg == NULL)
        return 0;
    a->unsynced = 0;
    if (PQpipelineSync(a->pg) != 1) {
        set_error(a, "send", PQerrorMessage(a->pg));
        shut(a, 1);
        return -1;
    }
    if (flush_out(a) != 0) {
        shut(a, 1); /* the batch ends LOST, through its callbacks */
        return -1;
    }
    return 0;
}

int rv_dba_load(const rv_dba *a)
{
    return a->state == DBA_READY ? a->in_flight : -1;
}

int rv_dba_open_batch(const rv_dba *a)
{
    return a->state == DBA_READY && a->in_flight < RV_DBA_MAX_IN_FLIGHT
               ? a->unsynced
               : 0;
}

void rv_dba_want(rv_dba *a)
{
    if (a->state == DBA_DOWN)
        a->wanted = 1;
}

void rv_dba_watch(const rv_dba *a, int *fd, uint32_t *events)
{
    *fd = a->pg != NULL ? PQsocket(a->pg) : -1;
    if (a->state == DBA_CONNECTING)
        *events = a->polling == PGRES_POLLING_READING ? EPOLLIN : EPOLLOUT;
    else
        *events = EPOLLIN | (a->want_write ? EPOLLOUT : 0);
}

int rv_dba_tick(rv_dba *a)
{
    const int64_t now = svc_deadline_now_ms();
    int64_t due;

    if (a->state == DBA_DOWN) {
        if (!a->wanted)
            return -1;
        if (now < a->retry_at)
            return (int)(a->retry_at - now);
        start_connect(a);
        if (a->state == DBA_DOWN)
            return RV_DBA_RETRY_MS;
    }
    if (a->state == DBA_CONNECTING && now >= a->connect_deadline) {
        set_error(a, "connect",
                  "PostgreSQL did not answer within the connect timeout");
        shut(a, 1);
        return RV_DBA_RETRY_MS;
    }
    if (a->head != NULL && now >= a->head->deadline_ms) {
        set_error(a, "deadline",
                  "PostgreSQL did not answer within the request's budget");
        shut(a, 1);
        return RV_DBA_RETRY_MS;
    }
    due = a->state == DBA_CONNECTING ? a->connect_deadline
          : a->head != NULL          ? a->head->deadline_ms
                                     : -1;
    return due < 0 ? -1 : (int)(due - now);
}
