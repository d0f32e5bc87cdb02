/*
 * rv_relay.c: the outbox relay thread (see rv_relay.h).
 *
 * One round, in one PostgreSQL transaction on the relay's own connection:
 *   1. pg_try_advisory_xact_lock on the relay key; if another reviewd
 *      instance holds it, this one does nothing this round;
 *   2. claim up to REVIEWD_RELAY_BATCH unsent rows in id order, FOR
 *      UPDATE SKIP LOCKED;
 *   3. publish each document's first claimed row (pipelined; a
 *      document's later rows wait for a later round), then wait for the
 *      publisher confirms;
 *   4. set sent_at on the rows the broker acked (and did not return as
 *      unroutable), and commit.
 * Rounds repeat while they come back full or left rows for later, then
 * the thread sleeps in
 * poll(2) on its PostgreSQL socket (LISTEN kh_outbox: reviewd's notifier
 * NOTIFYs right after a request's commit, rv_notifier.h, and the insert
 * trigger at the commit of any other session's insert, so an event
 * leaves within milliseconds), on the
 * broker's socket (to see a close at once), and on a pipe that
 * rv_relay_stop writes to; at the latest it wakes after
 * REVIEWD_RELAY_SWEEP_MS, the fallback for a notification that came
 * while this instance could not act on it.
 *
 * Why one relay at a time (the advisory lock) rather than claims spread
 * over instances: with SKIP LOCKED alone, instance A may claim rows 1-100
 * while B claims 101-200, and if a document has events in both batches,
 * B can publish the later one first.  Claiming only each document's
 * oldest unsent row would also keep the order, but costs a correlated
 * sub-query per row and a round per event of a busy document.  The
 * advisory lock is transaction-scoped, so a relay that dies (crash, kill,
 * lost connection) drops it with its session, and another instance takes
 * over on its next NOTIFY (every instance LISTENs, the holder included, so
 * a NOTIFY that arrives while another instance holds the lock is acted on
 * by the holder once its round ends) or sweep.  SKIP LOCKED stays as a
 * second guard, against a claim run by hand.  One publisher with
 * pipelined confirms moves thousands of events a second
 * (docs/benchmarks.md), far above the rate of human approvals.
 *
 * Id order is commit order per document (sql/0004_outbox.sql), so
 * publishing in id order keeps each document's events in commit order.
 * Delivery is at-least-once, and exactly once without faults: a row is
 * marked only after its confirm, so a failure between publish and commit
 * publishes it again (consumers deduplicate by event_id).  A round
 * publishes at most one row per document, so a nack, a return or a
 * confirm timeout can only hold back a document's oldest unsent event,
 * never one published after it: if E1 fails, E2 has not been sent, and
 * the next round sends E1 again before E2 is ever published.  A consumer
 * therefore never sees E2 before the last copy of E1.  Rows of other
 * documents that were acked are marked sent whatever happened to E1 (the
 * old rule, "the acked prefix", sent E2 of another document again, and
 * after a nack in the middle re-sent E2 of the same document behind a
 * retried E1).  A document with several unsent events costs one round
 * per event, which only a burst on one document ever meets.
 *
 * Every event is published mandatory, to an exchange whose alternate
 * exchange keeps what no binding covers (queue "<exchange>.unrouted",
 * rv_amqp.c), so a row is marked sent only once some queue holds its
 * event.  A returned (unroutable) event is a failure like a nack: its
 * row stays unsent, event_unroutable is logged, and the relay closes the
 * connection and reconnects after the backoff, which declares the
 * configured queues and the unrouted one again (rv_amqp.h); per-document
 * order holds as for a nack.  An exchange declared before it had an
 * alternate exchange cannot be given one by redeclaring it (RabbitMQ
 * answers 406): the relay logs amqp_exchange_without_ae once, saying how
 * to fix it (delete the exchange, or a policy alternate-exchange), and
 * goes on; events no queue binds are then returned and retried, stuck
 * in the outbox (visible) but never lost.
 *
 * The broker is connected by this thread, never by start-up, so requests
 * are unaffected when RabbitMQ is down; after a failure the next attempt
 * waits 100 ms, doubling up to REVIEWD_RELAY_BACKOFF_MAX_MS.  An outage is
 * logged when it starts and when it ends (dependency_down/_up); in between,
 * relay_amqp_retrying gives a failed attempt's error when it changes and
 * every 30 s, so a relay that cannot connect says why, and one whose
 * thread has stopped trying stands out by its silence.  Sent rows older than
 * REVIEWD_OUTBOX_RETENTION_S are deleted once a minute.
 */
#include "bg/rv_relay.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bg/rv_amqp.h"
#include "svc_stop.h"
#include "db/rv_query.h"

#define RV_RELAY_BACKOFF_MIN_MS 100
#define RV_RELAY_PRUNE_EVERY_MS 60000
/* While the broker stays unreachable, a failed attempt is logged when its
 * error differs from the last one logged, or this long after it: an
 * operator (or a failed test) sees why the relay does not connect, and
 * that its thread still tries. */
#define RV_RELAY_DOWN_LOG_EVERY_MS 30000

struct rv_relay {
    rv_app *app;
    rv_amqp *amqp;
    rv_db_conn *conn; /* LISTENing; NULL until connected */
    svc_stop stop;    /* rv_relay_stop's request */
    pthread_t thread;
    atomic_int state; /* rv_dep_state */
    int ever_connected;
    int ae_warned; /* amqp_exchange_without_ae was logged */
    /* The wait before reconnecting after a return: doubles up to
     * REVIEWD_RELAY_BACKOFF_MAX_MS while batches keep being returned (an
     * exchange without its alternate exchange returns the same stuck
     * event every round), back to the minimum after a batch without. */
    int return_backoff_ms;
    int pg_failing;
    int backoff_ms;
    int64_t next_attempt_ms;
    int64_t down_logged_ms;     /* when a failed attempt was last logged */
    unsigned long failed_tries; /* attempts failed since the last connect */
    char down_error[160];       /* the error last logged */
    int64_t next_prune_ms;
    atomic_ulong publishes;
    atomic_ulong confirms;
    atomic_ulong nacks;
    atomic_ulong returns;
    atomic_ulong reconnects;
#ifdef REVIEWD_TESTING
    /* REVIEWD_TEST_NACK_PUBLISH=N: the Nth publish of this process counts
     * as nacked whatever the broker said (a broker nack on demand). */
    uint64_t test_nack_publish;
    /* REVIEWD_TEST_BREAK_BATCH=N: the broker's socket is shut down just
     * before the Nth batch of this process is published, so the batch's
     * first publish fails (a broker that died between batches, unseen). */
    unsigned long test_break_batch;
    unsigned long batches;
#endif
};

/* One claimed batch: n rows, of which `published` went out (the first
 * row of each document), row[k] being the claimed row of the kth
 * publish, ids[k] its event id and states[k] its settlement. */
typedef struct batch {
    PGresult *rows;
    int n;
    int published;
    uint64_t first_tag;
    int *row;
    const char **ids;
    rv_amqp_confirm *states;
} batch;

/* The claim's columns (RV_QUERY_OUTBOX_CLAIM). */
enum { COL_ID, COL_EVENT_ID, COL_ROUTING_KEY, COL_PAYLOAD, COL_DOCUMENT };

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void set_state(rv_relay *r, rv_dep_state now, const char *error)
{
    const int before = atomic_exchange(&r->state, (int)now);

    if (before == (int)now)
        return;
    svc_log_write(r->app->log, now == RV_DEP_OK ? SVC_LOG_INFO : SVC_LOG_WARN,
                  now == RV_DEP_OK ? "dependency_up" : "dependency_down",
                  json_pack("{s:s,s:s,s:s?}", "dependency", "amqp", "target",
                            rv_amqp_endpoint(r->amqp), "error", error));
}

/* The relay's own PostgreSQL connection, LISTENing on kh_outbox. */
static int ensure_pg(rv_relay *r)
{
    if (r->conn != NULL)
        return 0;
    r->conn = rv_db_conn_open(r->app->db, 1);
    if (r->conn != NULL
        && rv_db_conn_exec_sql(r->conn, "LISTEN kh_outbox") != RV_DB_OK) {
        rv_db_conn_close(r->conn);
        r->conn = NULL;
    }
    if (r->conn == NULL) {
        if (!r->pg_failing) {
            svc_log_write(r->app->log, SVC_LOG_WARN, "relay_postgres_down",
                          NULL);
        }
        r->pg_failing = 1;
        return -1;
    }
    r->pg_failing = 0;
    return 0;
}

static void drop_pg(rv_relay *r)
{
    svc_log_write(r->app->log, SVC_LOG_WARN, "relay_postgres_error",
                  json_pack("{s:s}", "error", rv_db_conn_errmsg(r->conn)));
    rv_db_conn_close(r->conn);
    r->conn = NULL;
}

/* Logs a failed connect attempt when its error is new or the last one
 * logged is RV_RELAY_DOWN_LOG_EVERY_MS old. */
static void note_failed_try(rv_relay *r)
{
    const char *err = rv_amqp_errmsg(r->amqp);
    const int64_t now = now_ms();

    r->failed_tries++;
    if (strncmp(err, r->down_error, sizeof(r->down_error) - 1) == 0
        && now - r->down_logged_ms < RV_RELAY_DOWN_LOG_EVERY_MS)
        return;
    snprintf(r->down_error, sizeof(r->down_error), "%s", err);
    r->down_logged_ms = now;
    if (r->failed_tries == 1 && !r->ever_connected)
        return; /* the first dependency_down has just said it */
    svc_log_write(r->app->log, SVC_LOG_WARN, "relay_amqp_retrying",
                  json_pack("{s:s,s:s,s:I}", "target",
                            rv_amqp_endpoint(r->amqp), "error", err, "tries",
                            (json_int_t)r->failed_tries));
}

/* Connects to the broker when it is time to try.  Returns 1 if connected. */
static int ensure_amqp(rv_relay *r)
{
    const rv_config *cfg = r->app->cfg;

    if (rv_amqp_connected(r->amqp))
        return 1;
    if (now_ms() < r->next_attempt_ms)
        return 0;
    if (rv_amqp_connect(r->amqp, cfg->amqp_timeout_ms) != 0) {
        set_state(r, RV_DEP_DOWN, rv_amqp_errmsg(r->amqp));
        note_failed_try(r);
        r->next_attempt_ms = now_ms() + r->backoff_ms;
        r->backoff_ms = r->backoff_ms * 2 > cfg->relay_backoff_max_ms
                            ? cfg->relay_backoff_max_ms
                            : r->backoff_ms * 2;
        return 0;
    }
    if (r->ever_connected)
        atomic_fetch_add(&r->reconnects, 1);
    r->ever_connected = 1;
    if (!rv_amqp_has_ae(r->amqp) && !r->ae_warned) {
        r->ae_warned = 1;
        svc_log_write(
            r->app->log, SVC_LOG_WARN, "amqp_exchange_without_ae",
            json_pack("{s:s,s:s,s:s}", "exchange", cfg->amqp_exchange,
                      "detail",
                      "the exchange exists without an alternate exchange "
                      "(RabbitMQ refused to redeclare it with one, 406): "
                      "events no queue binds are returned and stay "
                      "unsent, retried",
                      "fix",
                      "delete the exchange (reviewd declares it again "
                      "with alternate-exchange <exchange>.unrouted), or "
                      "give it a RabbitMQ policy alternate-exchange = "
                      "<exchange>.unrouted"));
    }
    r->backoff_ms = RV_RELAY_BACKOFF_MIN_MS;
    r->failed_tries = 0;
    r->down_error[0] = '\0';
    set_state(r, RV_DEP_OK, NULL);
    return 1;
}

/* The batch's per-publish arrays.  0, or -1 out of memory. */
static int batch_alloc(batch *b)
{
    b->row = calloc((size_t)b->n, sizeof(*b->row));
    b->ids = calloc((size_t)b->n, sizeof(*b->ids));
    b->states = calloc((size_t)b->n, sizeof(*b->states));
    return b->row != NULL && b->ids != NULL && b->states != NULL ? 0 : -1;
}

static void batch_free(batch *b)
{
    PQclear(b->rows);
    free(b->row);
    free(b->ids);
    free(b->states);
}

/* 1 if an earlier row of the batch (before row i) is of i's document. */
static int document_taken(const batch *b, int i, long long *seen, size_t mask)
{
    const long long doc = atoll(PQgetvalue(b->rows, i, COL_DOCUMENT));
    size_t h = (size_t)doc * 0x9E3779B97F4A7C15ull & mask;

    /* Open addressing; ids are positive, 0 marks a free slot. */
    while (seen[h] != 0) {
        if (seen[h] == doc)
            return 1;
        h = (h + 1) & mask;
    }
    seen[h] = doc;
    return 0;
}

/* Publishes the first claimed row of each document; 0, or -1 when the
 * connection failed (or out of memory). */
static int publish_batch(rv_relay *r, batch *b)
{
    size_t slots = 16;
    long long *seen;
    uint64_t tag = 0;
    int i, rc = 0;

    while (slots < (size_t)b->n * 2)
        slots *= 2;
    seen = calloc(slots, sizeof(*seen));
    if (seen == NULL)
        return -1;
    for (i = 0; i < b->n && rc == 0; i++) {
        if (document_taken(b, i, seen, slots - 1))
            continue;
        rc = rv_amqp_publish(r->amqp, PQgetvalue(b->rows, i, COL_ROUTING_KEY),
                             PQgetvalue(b->rows, i, COL_EVENT_ID),
                             PQgetvalue(b->rows, i, COL_PAYLOAD),
                             (size_t)PQgetlength(b->rows, i, COL_PAYLOAD),
                             &tag);
        if (rc == 0) {
            b->first_tag = b->published == 0 ? tag : b->first_tag;
            b->row[b->published] = i;
            b->ids[b->published++] = PQgetvalue(b->rows, i, COL_EVENT_ID);
            atomic_fetch_add(&r->publishes, 1);
        }
    }
    free(seen);
    return rc;
}

/* "{id,id,...}" of the acked publishes, the parameter of
 * outbox_mark_sent; *n receives how many. */
static char *acked_ids(const batch *b, int *n)
{
    size_t cap = (size_t)b->published * 21 + 3, len = 0;
    char *s = malloc(cap);
    int k;

    *n = 0;
    if (s == NULL)
        return NULL;
    s[len++] = '{';
    for (k = 0; k < b->published; k++) {
        if (b->states[k] == RV_AMQP_ACKED) {
            len += (size_t)snprintf(s + len, cap - len, "%s%s", *n ? "," : "",
                                    PQgetvalue(b->rows, b->row[k], COL_ID));
            (*n)++;
        }
    }
    s[len++] = '}';
    s[len] = '\0';
    return s;
}

/* Counts the settlements; returns how many publishes were returned. */
static int count_settlements(rv_relay *r, const batch *b)
{
    int k, returned = 0;

    for (k = 0; k < b->published; k++) {
        if (b->states[k] == RV_AMQP_ACKED) {
            atomic_fetch_add(&r->confirms, 1);
        } else if (b->states[k] == RV_AMQP_NACKED) {
            atomic_fetch_add(&r->nacks, 1);
        } else if (b->states[k] == RV_AMQP_RETURNED) {
            atomic_fetch_add(&r->returns, 1);
            returned++;
        }
    }
    return returned;
}

/* Marks the acked rows sent; *n receives how many.  Returns the status
 * of the UPDATE. */
static rv_db_status mark_sent(rv_relay *r, const batch *b, int *n)
{
    char *ids;
    const char *params[1];
    rv_db_status st;

    ids = acked_ids(b, n);
    if (ids == NULL)
        return RV_DB_ERROR;
    if (*n == 0) {
        free(ids);
        return RV_DB_OK;
    }
    params[0] = ids;
    st = rv_db_conn_exec(r->conn, RV_QUERY_OUTBOX_MARK_SENT, params, NULL);
    free(ids);
    return st;
}

/* Claims the batch inside the open transaction; b->n = 0 when another
 * relay holds the lock or nothing is unsent. */
static rv_db_status claim(rv_relay *r, batch *b)
{
    char limit[16];
    const char *params[] = {limit};
    PGresult *res = NULL;
    rv_db_status st;
    int locked;

    st = rv_db_conn_exec(r->conn, RV_QUERY_OUTBOX_TRY_LOCK, NULL, &res);
    if (st != RV_DB_OK)
        return st;
    locked = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    if (!locked)
        return RV_DB_OK;
    snprintf(limit, sizeof(limit), "%d", r->app->cfg->relay_batch);
    st = rv_db_conn_exec(r->conn, RV_QUERY_OUTBOX_CLAIM, params, &b->rows);
    if (st == RV_DB_OK)
        b->n = PQntuples(b->rows);
    return st;
}

#ifdef REVIEWD_TESTING
/* REVIEWD_TEST_NACK_PUBLISH: turns the chosen publish's settlement into a
 * nack, as if the broker had sent one. */
static void test_nack(rv_relay *r, batch *b)
{
    const uint64_t before = atomic_load(&r->publishes)
                            - (uint64_t)b->published;
    const uint64_t nth = r->test_nack_publish;

    if (nth > before && nth <= before + (uint64_t)b->published)
        b->states[nth - before - 1] = RV_AMQP_NACKED;
}

/* REVIEWD_TEST_BREAK_BATCH: breaks the connection before the chosen
 * batch's publishes, as a broker's death between batches would. */
static void test_break(rv_relay *r)
{
    if (++r->batches == r->test_break_batch)
        rv_amqp_test_break(r->amqp);
}
#else
static void test_nack(rv_relay *r, batch *b)
{
    (void)r;
    (void)b;
}

static void test_break(rv_relay *r)
{
    (void)r;
}
#endif

/* After a return: the queue the event was meant for is gone, so connect
 * again (which declares it) after the return backoff, and say so. */
static void unroutable(rv_relay *r, int returned)
{
    const int max = r->app->cfg->relay_backoff_max_ms;

    if (r->return_backoff_ms < RV_RELAY_BACKOFF_MIN_MS)
        r->return_backoff_ms = RV_RELAY_BACKOFF_MIN_MS;
    svc_log_write(r->app->log, SVC_LOG_WARN, "event_unroutable",
                  json_pack("{s:i,s:s,s:i}", "events", returned, "action",
                            "kept unsent; reconnecting to declare the "
                            "queues",
                            "retry_ms", r->return_backoff_ms));
    rv_amqp_close(r->amqp);
    r->next_attempt_ms = now_ms() + r->return_backoff_ms;
    r->return_backoff_ms = r->return_backoff_ms * 2 > max
                               ? max
                               : r->return_backoff_ms * 2;
}

/* Publishes the claimed batch and marks what was confirmed.  Returns 1
 * when every publish was acked, else 0; *pg_failed is set when
 * PostgreSQL failed. */
static int send_batch(rv_relay *r, batch *b, int *pg_failed)
{
    int returned, marked = 0;

    if (batch_alloc(b) != 0)
        return 0;
    test_break(r);
    if (publish_batch(r, b) == 0 && b->published > 0) {
        rv_amqp_wait_confirms(r->amqp, b->first_tag,
                              b->first_tag + (uint64_t)b->published - 1,
                              b->ids, b->states, r->app->cfg->amqp_timeout_ms);
    }
    test_nack(r, b);
    if (!rv_amqp_connected(r->amqp))
        set_state(r, RV_DEP_DOWN, rv_amqp_errmsg(r->amqp));
    returned = count_settlements(r, b);
    if (returned > 0)
        unroutable(r, returned);
    else if (b->published > 0)
        r->return_backoff_ms = RV_RELAY_BACKOFF_MIN_MS;
    if (mark_sent(r, b, &marked) != RV_DB_OK
        || rv_db_conn_commit(r->conn) != RV_DB_OK) {
        *pg_failed = 1;
        return 0;
    }
    /* Nothing published is not "all acked": when the batch's first
     * publish failed (a broker that died between batches), 0 == 0 made
     * relay_main claim and fail the next batch at once, for ever, without
     * ever returning to ensure_amqp to reconnect, and silently, the
     * outage having been logged already. */
    return b->published > 0 && marked == b->published
           && rv_amqp_connected(r->amqp);
}

/* One round.  Returns 1 when a full batch went out (more may wait), 0
 * when there is nothing more to do now, -1 after a PostgreSQL failure. */
static int relay_round(rv_relay *r)
{
    batch b;
    int pg_failed = 0, all_acked = 0;
    rv_db_status st;

    memset(&b, 0, sizeof(b));
    st = rv_db_conn_begin(r->conn);
    if (st == RV_DB_OK)
        st = claim(r, &b);
    if (st != RV_DB_OK) {
        rv_db_conn_rollback(r->conn);
        batch_free(&b);
        return -1;
    }
    if (b.n > 0)
        all_acked = send_batch(r, &b, &pg_failed);
    rv_db_conn_rollback(r->conn); /* ends an empty round; no-op after COMMIT */
    batch_free(&b);
    if (pg_failed)
        return -1;
    /* More may wait: a full claim, or rows held back behind their
     * document's earlier row, which is now sent. */
    return all_acked && (b.n == r->app->cfg->relay_batch || b.published < b.n)
               ? 1
               : 0;
}

static void prune(rv_relay *r)
{
    char secs[16];
    const char *params[] = {secs};
    PGresult *res = NULL;

    if (now_ms() < r->next_prune_ms)
        return;
    r->next_prune_ms = now_ms() + RV_RELAY_PRUNE_EVERY_MS;
    snprintf(secs, sizeof(secs), "%d", r->app->cfg->outbox_retention_s);
    if (rv_db_conn_exec(r->conn, RV_QUERY_OUTBOX_PRUNE, params, &res)
        != RV_DB_OK) {
        drop_pg(r);
        return;
    }
    if (strcmp(PQcmdTuples(res), "0") != 0) {
        svc_log_write(r->app->log, SVC_LOG_INFO, "outbox_pruned",
                      json_pack("{s:s}", "rows", PQcmdTuples(res)));
    }
    PQclear(res);
}

/* Reads what woke us: notifications (consumed; any of them means "look
 * again", which the next round does anyway) and a broker close. */
static void absorb_wakeups(rv_relay *r, const struct pollfd *p, int n)
{
    PGnotify *note;

    if (p[0].revents & POLLIN)
        svc_stop_drain(&r->stop);
    if (r->conn != NULL && (p[1].revents & (POLLIN | POLLERR | POLLHUP))) {
        PGconn *pg = rv_db_conn_pg(r->conn);

        if (!PQconsumeInput(pg))
            drop_pg(r);
        else
            while ((note = PQnotifies(pg)) != NULL)
                PQfreemem(note);
    }
    if (n > 2 && (p[2].revents & (POLLIN | POLLERR | POLLHUP))
        && !rv_amqp_alive(r->amqp))
        set_state(r, RV_DEP_DOWN, rv_amqp_errmsg(r->amqp));
}

/* Sleeps until a notification, the broker's socket, a stop request, the
 * next reconnect attempt or the sweep interval, whichever comes first. */
static void wait_for_work(rv_relay *r)
{
    struct pollfd p[3];
    int n = 2, timeout = r->app->cfg->relay_sweep_ms;
    const int64_t until_attempt = r->next_attempt_ms - now_ms();

    if (!rv_amqp_connected(r->amqp) && until_attempt < timeout)
        timeout = until_attempt > 0 ? (int)until_attempt : 0;
    memset(p, 0, sizeof(p));
    p[0].fd = svc_stop_fd(&r->stop);
    p[0].events = POLLIN;
    p[1].fd = r->conn != NULL ? PQsocket(rv_db_conn_pg(r->conn)) : -1;
    p[1].events = POLLIN;
    if (rv_amqp_connected(r->amqp)) {
        p[2].fd = rv_amqp_fd(r->amqp);
        p[2].events = POLLIN;
        n = 3;
    }
    if (poll(p, (nfds_t)n, timeout) > 0)
        absorb_wakeups(r, p, n);
}

static void *relay_main(void *arg)
{
    rv_relay *r = arg;
    int rc;

    while (!svc_stop_requested(&r->stop)) {
        if (ensure_pg(r) == 0 && ensure_amqp(r)) {
            do {
                rc = relay_round(r);
            } while (rc == 1 && !svc_stop_requested(&r->stop));
            if (rc < 0)
                drop_pg(r);
        }
        if (r->conn != NULL)
            prune(r);
        wait_for_work(r);
    }
    return NULL;
}

rv_relay *rv_relay_start(rv_app *app)
{
    rv_relay *r = calloc(1, sizeof(*r));

    if (r == NULL)
        return NULL;
    r->app = app;
    r->backoff_ms = RV_RELAY_BACKOFF_MIN_MS;
    /* "Unknown" first, so the first outcome is logged. */
    atomic_init(&r->state, -1);
#ifdef REVIEWD_TESTING
    if (getenv("REVIEWD_TEST_NACK_PUBLISH") != NULL) {
        r->test_nack_publish = strtoull(getenv("REVIEWD_TEST_NACK_PUBLISH"),
                                        NULL, 10);
    }
    if (getenv("REVIEWD_TEST_BREAK_BATCH") != NULL) {
        r->test_break_batch = strtoul(getenv("REVIEWD_TEST_BREAK_BATCH"), NULL,
                                      10);
    }
#endif
    r->amqp = rv_amqp_new(app->cfg->amqp_url, app->cfg->amqp_exchange,
                          &app->cfg->amqp_tls, app->cfg->amqp_queues);
    if (r->amqp == NULL) {
        svc_log_write(app->log, SVC_LOG_ERROR, "relay_config",
                      json_pack("{s:s,s:s}", "error",
                                "AMQP_URL or "
                                "REVIEWD_AMQP_QUEUES malformed, or out of "
                                "memory",
                                "queues", app->cfg->amqp_queues));
    }
    if (r->amqp == NULL || svc_stop_init(&r->stop) != 0) {
        rv_amqp_free(r->amqp);
        free(r);
        return NULL;
    }
    if (pthread_create(&r->thread, NULL, relay_main, r) != 0) {
        svc_stop_destroy(&r->stop);
        rv_amqp_free(r->amqp);
        free(r);
        return NULL;
    }
    return r;
}

void rv_relay_stop(rv_relay *r)
{
    if (r == NULL)
        return;
    svc_stop_request(&r->stop);
    pthread_join(r->thread, NULL);
    rv_db_conn_close(r->conn);
    rv_amqp_free(r->amqp);
    svc_stop_destroy(&r->stop);
    free(r);
}

rv_dep_state rv_relay_state(rv_relay *r)
{
    int s;

    if (r == NULL)
        return RV_DEP_OFF;
    s = atomic_load(&r->state);
    return s < 0 ? RV_DEP_DOWN : (rv_dep_state)s;
}

void rv_relay_stats_get(rv_relay *r, rv_relay_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (r == NULL)
        return;
    out->publishes = atomic_load(&r->publishes);
    out->confirms = atomic_load(&r->confirms);
    out->nacks = atomic_load(&r->nacks);
    out->returns = atomic_load(&r->returns);
    out->reconnects = atomic_load(&r->reconnects);
}
