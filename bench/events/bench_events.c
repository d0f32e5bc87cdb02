/*
 * bench_events.c: the event pipeline under an open-loop load of approvals:
 * commit-to-publish and commit-to-indexed latency, and the relay's
 * events/s, against a plain rabbitmq-c publisher with confirms on the same
 * broker in the same run.
 *
 *   bench_events --reviewd BIN --indexer BIN --pg URL --amqp URL
 *                [--redis URL] [--workdir DIR] [--rate N] [--duration S]
 *                [--burst N] [--threads N] [--limit-each N]
 *                [--limit-batch N]
 *
 * It starts its own services (ev_proc.h): reviewd A with its relay
 * (AMQP_URL set), reviewd B on the same database without one, and
 * kh-indexer; and a test consumer bound to kh.documents with
 * document.approved (ev_broker.h).  Then, in order:
 *
 *   prepare  rate * duration + burst documents created and submitted
 *            through A, and the outbox drained (not timed);
 *   limit    ev_limit_measure: --limit-each messages of an event's body
 *            published one at a time, each awaiting its confirm, then
 *            --limit-batch in batches of 100 (REVIEWD_RELAY_BATCH's
 *            default), awaiting each batch's confirms;
 *   open     OPEN LOOP: approval i is scheduled at t0 + i / rate and sent
 *            at that time by one of --threads senders with keep-alive
 *            connections to A, whether or not earlier ones have returned,
 *            for --duration seconds; latencies are measured from the
 *            outbox row's created_at (the approving transaction's start,
 *            ev_times.h) and, separately, from the scheduled time, so a
 *            sender that fell behind shows up instead of hiding the wait;
 *   burst    A stopped (SIGTERM, so its relay is gone), --burst approvals
 *            through B (closed loop, not timed: they only fill the
 *            outbox), then A started again and the drain timed: the
 *            relay's events/s from the consumer's receipts and from the
 *            outbox's sent_at, and kh-indexer's from its log.
 *
 * Figures (JSON lines on stdout, a table on stderr): open.commit_to_publish
 * p50/p99 (created_at to the consumer's receipt) and open.commit_to_sent
 * p50/p99 (created_at to sent_at, the relay's own record after the
 * confirm) against the limit's publish-to-confirm p50/p99;
 * open.schedule_to_publish p50/p99 against the same; open.approve p50/p99
 * (the HTTP request from its scheduled time, no limit); open.events_per_s
 * against the offered rate; open.commit_to_indexed p50/p99 (no limit: no
 * other program does kh-indexer's work); burst.relay.events_per_s against
 * the batched limit; open.indexer.events_per_s (kh-indexer's rate over the
 * open loop's events) against the offered rate; burst.indexer.events_per_s
 * against the relay's drain.  Every figure's errors field counts approvals that failed or
 * whose event was missing at that point; duplicates are reported in the
 * run lines.  A benchmark never fails on a slow machine: the exit status
 * is 0 when every phase ran.
 *
 * run_bench_events.sh starts the servers (PostgreSQL, a private RabbitMQ
 * and Redis) and runs this.
 */
#include <errno.h>
#include <getopt.h>
#include <libpq-fe.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_clock.h"
#include "bench_cpu.h"
#include "bench_figure.h"
#include "bench_http.h"
#include "bench_json.h"
#include "bench_run.h"
#include "bench_samples.h"
#include "ev_broker.h"
#include "ev_proc.h"
#include "ev_times.h"
#include "api/rv_auth.h"

#define WHO "bench_events"
#define PREP_THREADS 8
#define HTTP_TIMEOUT_MS 30000
#define DRAIN_TIMEOUT_MS 180000
#define STALL_TIMEOUT_MS 60000
#define START_TIMEOUT_MS 60000

typedef struct options {
    const char *reviewd;
    const char *indexer;
    const char *pg;
    const char *amqp;
    const char *redis;
    const char *workdir;
    int rate;
    int duration_s;
    int burst;
    int threads;
    int limit_each;
    int limit_batch;
} options;

static options opt = {NULL, NULL, NULL, NULL, "",   "var/bench",
                      200,  15,   2000, 32,   2000, 20000};

/* The run's state, kept here and passed to nothing else: main owns it. */
static char secret[65];
static char *author_token, *reviewer_token;
static ev_proc svc_a, svc_b, svc_ix;
static int port_a, port_b;
static ev_slot *slots;
static size_t n_open, n_all;
static ev_consumer *consumer;
static PGconn *pg;
static bench_table table;
static int64_t mono_to_real_us;

static int64_t realtime_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t now_us(void)
{
    return bench_clock_ns() / 1000 + mono_to_real_us;
}

/* ---- services ------------------------------------------------------------ */

/* The "port" of reviewd's listening line. */
static int listening_port(const char *line)
{
    const char *p = strstr(line, "\"port\":");

    return p != NULL ? atoi(p + strlen("\"port\":")) : 0;
}

/* Starts reviewd `tag` (A with the relay, B without) and sets *port. */
static int start_reviewd(ev_proc *p, const char *tag, int relay, int *port)
{
    static char env[6][1024];
    const char *envp[7];
    char log[512], out[512], line[4096], err[600];
    char *argv[] = {(char *)opt.reviewd, "serve", NULL};

    snprintf(log, sizeof(log), "%s/reviewd-%s.log", opt.workdir, tag);
    snprintf(out, sizeof(out), "%s/reviewd-%s.out", opt.workdir, tag);
    snprintf(env[0], sizeof(env[0]), "LISTEN_ADDR=127.0.0.1:0");
    snprintf(env[1], sizeof(env[1]), "DATABASE_URL=%s", opt.pg);
    snprintf(env[2], sizeof(env[2]), "JWT_SECRET=%s", secret);
    snprintf(env[3], sizeof(env[3]), "REDIS_URL=%s", opt.redis);
    snprintf(env[4], sizeof(env[4]), "AMQP_URL=%s", relay ? opt.amqp : "");
    snprintf(env[5], sizeof(env[5]), "REVIEWD_LOG_FILE=%s", log);
    for (int i = 0; i < 6; i++)
        envp[i] = env[i];
    envp[6] = NULL;
    if (ev_proc_start(p, relay ? "reviewd (relay)" : "reviewd (no relay)",
                      argv, envp, log, out, err, sizeof(err))
            != 0
        || ev_proc_wait_log(p, "\"msg\":\"listening\"", START_TIMEOUT_MS, line,
                            sizeof(line), err, sizeof(err))
               != 0) {
        bench_progress(WHO, "%s", err);
        return -1;
    }
    *port = listening_port(line);
    bench_progress(WHO, "reviewd %s pid %ld on port %d%s", tag, (long)p->pid,
                   *port, relay ? " with its relay" : "");
    return *port > 0 ? 0 : -1;
}

static int start_indexer(void)
{
    static char env[3][1024];
    const char *envp[] = {env[0], env[1], env[2], NULL};
    char log[512], out[512], line[4096], err[600];
    char *argv[] = {(char *)opt.indexer, NULL};

    snprintf(log, sizeof(log), "%s/kh-indexer.log", opt.workdir);
    snprintf(out, sizeof(out), "%s/kh-indexer.out", opt.workdir);
    snprintf(env[0], sizeof(env[0]), "DATABASE_URL=%s", opt.pg);
    snprintf(env[1], sizeof(env[1]), "AMQP_URL=%s", opt.amqp);
    snprintf(env[2], sizeof(env[2]), "KH_LOG_FILE=%s", log);
    if (ev_proc_start(&svc_ix, "kh-indexer", argv, envp, log, out, err,
                      sizeof(err))
            != 0
        || ev_proc_wait_log(&svc_ix, "\"msg\":\"consuming\"", START_TIMEOUT_MS,
                            line, sizeof(line), err, sizeof(err))
               != 0) {
        bench_progress(WHO, "%s", err);
        return -1;
    }
    bench_progress(WHO, "kh-indexer pid %ld consumes", (long)svc_ix.pid);
    return 0;
}

/* ---- database ------------------------------------------------------------ */

/* The single number a query returns, or -1 (said on stderr). */
static long long pg_number(const char *sql)
{
    PGresult *res = PQexec(pg, sql);
    long long v = -1;

    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
        v = atoll(PQgetvalue(res, 0, 0));
    else
        bench_progress(WHO, "query failed: %s: %s", sql, PQerrorMessage(pg));
    PQclear(res);
    return v;
}

/* Waits, bounded, until sql returns at least want; 0 when it did. */
static int wait_count(const char *what, const char *sql, long long want)
{
    const int64_t deadline = bench_clock_ns() + DRAIN_TIMEOUT_MS * 1000000LL;
    long long have = -1;

    while (bench_clock_ns() < deadline) {
        have = pg_number(sql);
        if (have >= want)
            return 0;
        bench_sleep_ns(50 * 1000000LL);
    }
    bench_progress(WHO, "%s: %lld of %lld after %d s", what, have, want,
                   DRAIN_TIMEOUT_MS / 1000);
    return -1;
}

static const char backlog_sql[] =
    "SELECT count(*) FROM kh_outbox WHERE sent_at IS NULL";

/* Waits until the outbox is empty (every event confirmed). */
static int wait_outbox_empty(void)
{
    const int64_t deadline = bench_clock_ns() + DRAIN_TIMEOUT_MS * 1000000LL;

    while (bench_clock_ns() < deadline) {
        if (pg_number(backlog_sql) == 0)
            return 0;
        bench_sleep_ns(50 * 1000000LL);
    }
    bench_progress(WHO, "the outbox did not drain in %d s",
                   DRAIN_TIMEOUT_MS / 1000);
    return -1;
}

/* Waits until the consumer holds want receipts; gives up after
 * DRAIN_TIMEOUT_MS, or after STALL_TIMEOUT_MS without a new one. */
static int wait_receipts(size_t want)
{
    const int64_t deadline = bench_clock_ns() + DRAIN_TIMEOUT_MS * 1000000LL;
    int64_t stall = bench_clock_ns() + STALL_TIMEOUT_MS * 1000000LL;
    size_t n = 0, last = 0;

    while (bench_clock_ns() < deadline && bench_clock_ns() < stall) {
        ev_consumer_receipts(consumer, &n);
        if (n >= want)
            return 0;
        if (n != last) {
            last = n;
            stall = bench_clock_ns() + STALL_TIMEOUT_MS * 1000000LL;
        }
        bench_sleep_ns(20 * 1000000LL);
    }
    bench_progress(WHO,
                   "received %zu of %zu events (%zu bodies without a "
                   "document id) before giving up%s%s",
                   n, want, ev_consumer_unparsed(consumer),
                   ev_consumer_errmsg(consumer)[0] != '\0' ? "; consumer: "
                                                           : "",
                   ev_consumer_errmsg(consumer));
    return -1;
}

/* ---- HTTP work ----------------------------------------------------------- */

/* The digits after key in body; -1 when there are none. */
static long long json_id(const char *body, const char *key)
{
    const char *p = body != NULL ? strstr(body, key) : NULL;

    return p != NULL && p[strlen(key)] >= '0' && p[strlen(key)] <= '9'
               ? atoll(p + strlen(key))
               : -1;
}

/* Creates and submits the document of slot s. */
static int prepare_slot(bench_http *h, ev_slot *s, size_t i)
{
    char body[512], path[96];
    const char *resp = NULL;

    snprintf(body, sizeof(body),
             "{\"title\":\"Event benchmark %zu\",\"content\":\"Document %zu "
             "of the event benchmark. Its approval travels from the outbox "
             "through the relay and RabbitMQ to kh-indexer, which splits "
             "it into chunks and indexes them for search.\\n\\nA second "
             "paragraph, so that the chunker has a boundary to find.\"}",
             i, i);
    if (bench_http_request(h, "POST", "/v1/documents", author_token, body,
                           &resp)
            != 201
        || (s->doc_id = json_id(resp, "\"id\":\"")) < 0)
        return -1;
    snprintf(path, sizeof(path), "/v1/documents/%lld/submit", s->doc_id);
    if (bench_http_request(h, "POST", path, author_token, NULL, &resp) != 201
        || (s->review_id = json_id(resp, "\"review\":{\"id\":\"")) < 0)
        return -1;
    return 0;
}

/*
 * prepare_slot, tried again after a refusal: preparing is the run's set-up,
 * not a figure, and on a loaded machine reviewd's request budget may turn
 * a slow create or submit into a 503.  A retried slot may leave an unused
 * draft behind, which nothing counts.  At most PREP_TRIES tries, 20 ms
 * apart; -1 when every one failed.
 */
#define PREP_TRIES 5
static int prepare_with_retries(bench_http *h, ev_slot *s, size_t i)
{
    const struct timespec pause = {0, 20 * 1000000L};

    for (int attempt = 1;; attempt++) {
        if (prepare_slot(h, s, i) == 0)
            return 0;
        if (attempt == PREP_TRIES)
            return -1;
        nanosleep(&pause, NULL);
    }
}

static int approve(bench_http *h, ev_slot *s)
{
    char path[96];
    const char *resp = NULL;

    snprintf(path, sizeof(path), "/v1/reviews/%lld/approve", s->review_id);
    s->status = bench_http_request(h, "POST", path, reviewer_token,
                                   "{\"comment\":\"ok\"}", &resp);
    return s->status == 200 ? 0 : -1;
}

typedef struct sender {
    pthread_t thread;
    int index;
    int stride;
    size_t from, to; /* the slots [from, to) */
    int port;
    int mode;      /* 0 prepare, 1 open loop, 2 closed loop */
    int64_t t0_ns; /* open loop: the schedule's start */
    int64_t period_ns;
    long long errors;
    bench_http h;
} sender;

/* Slot i's scheduled time; sleeps until it and records it. */
static void wait_schedule(const sender *w, ev_slot *s, size_t i)
{
    const int64_t at = w->t0_ns + (int64_t)(i - w->from) * w->period_ns;
    struct timespec ts = {at / 1000000000, at % 1000000000};

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)
           == EINTR) {
    }
    s->sched_us = at / 1000 + mono_to_real_us;
}

static void *sender_main(void *arg)
{
    sender *w = arg;
    size_t i;
    int rc;

    for (i = w->from + (size_t)w->index; i < w->to; i += (size_t)w->stride) {
        ev_slot *s = &slots[i];

        if (w->mode == 0) {
            rc = prepare_with_retries(&w->h, s, i);
        } else {
            if (w->mode == 1)
                wait_schedule(w, s, i);
            s->sent_us = now_us();
            rc = approve(&w->h, s);
            s->resp_us = now_us();
        }
        if (rc != 0)
            w->errors++;
    }
    bench_http_close(&w->h);
    return NULL;
}

/* Runs n senders over slots [from, to) in mode; returns the errors, or
 * -1 when a thread could not start. */
static long long run_senders(int n, int port, int mode, size_t from, size_t to)
{
    sender *w = calloc((size_t)n, sizeof(*w));
    const int64_t t0 = bench_clock_ns() + 300 * 1000000LL;
    long long errors = 0;
    int i, started = 0;

    if (w == NULL)
        return -1;
    for (i = 0; i < n; i++) {
        w[i].index = i;
        w[i].stride = n;
        w[i].from = from;
        w[i].to = to;
        w[i].mode = mode;
        w[i].t0_ns = t0;
        w[i].period_ns = 1000000000LL / opt.rate;
        bench_http_init(&w[i].h, port, HTTP_TIMEOUT_MS);
        bench_http_connect(&w[i].h); /* a failure retries on first use */
        if (pthread_create(&w[i].thread, NULL, sender_main, &w[i]) != 0)
            break;
        started++;
    }
    for (i = 0; i < started; i++) {
        pthread_join(w[i].thread, NULL);
        errors += w[i].errors;
    }
    free(w);
    return started == n ? errors : -1;
}

/* ---- figures ------------------------------------------------------------- */

static void print_run(const char *when)
{
    bench_print_run_start("events", when);
    printf(",\"rate\":%d,\"duration_s\":%d,\"burst\":%d,\"threads\":%d,"
           "\"time\":%lld}\n",
           opt.rate, opt.duration_s, opt.burst, opt.threads,
           (long long)time(NULL));
    fflush(stdout);
}

static void print_limit(const ev_limit *l)
{
    printf("{\"kind\":\"limit\",\"tool\":\"rabbitmq-c publisher, "
           "persistent, confirms\",\"each_n\":%lld,\"each_per_s\":",
           l->each_n);
    bench_json_number(stdout, l->each_per_s);
    printf(",\"each_confirm_p50_us\":");
    bench_json_number(stdout, bench_samples_quantile_us(&l->each_lat, 0.50));
    printf(",\"each_confirm_p99_us\":");
    bench_json_number(stdout, bench_samples_quantile_us(&l->each_lat, 0.99));
    printf(",\"batch\":%d,\"batch_n\":%lld,\"batch_per_s\":", l->batch,
           l->batch_n);
    bench_json_number(stdout, l->batch_per_s);
    printf("}\n");
    fflush(stdout);
}

/* Which interval of a slot a sample set holds. */
typedef enum span {
    SPAN_COMMIT_TO_PUBLISH,
    SPAN_COMMIT_TO_SENT,
    SPAN_SCHEDULE_TO_PUBLISH,
    SPAN_APPROVE,
    SPAN_COMMIT_TO_INDEXED
} span;

/* The interval's end and start for slot s; 0 when either is unknown. */
static int64_t span_us(const ev_slot *s, span which)
{
    int64_t from = s->created_us, to = 0;

    switch (which) {
    case SPAN_COMMIT_TO_PUBLISH: to = s->recv_us; break;
    case SPAN_COMMIT_TO_SENT: to = s->outbox_sent_us; break;
    case SPAN_SCHEDULE_TO_PUBLISH:
        from = s->sched_us;
        to = s->recv_us;
        break;
    case SPAN_APPROVE:
        from = s->sched_us;
        to = s->resp_us;
        break;
    case SPAN_COMMIT_TO_INDEXED: to = s->indexed_us; break;
    }
    return from > 0 && to > 0 ? to - from : 0;
}

/* p50 and p99 figures of one interval over slots [from, to). */
static void latency_figures(const char *name, span which, size_t from,
                            size_t to, double limit50, double limit99,
                            const char *limit_from)
{
    bench_samples s;
    bench_figure f;
    char fname[96];
    long long missing = 0;
    size_t i;

    if (bench_samples_init(&s, to - from) != 0)
        return;
    for (i = from; i < to; i++) {
        const int64_t us = span_us(&slots[i], which);

        if (us > 0)
            bench_samples_add(&s, us * 1000);
        else
            missing++;
    }
    bench_samples_sort(&s);
    for (int q = 0; q < 2; q++) {
        snprintf(fname, sizeof(fname), "%s.%s", name, q == 0 ? "p50" : "p99");
        bench_figure_init(&f, fname, "us", BENCH_LOWER_IS_BETTER);
        f.value = bench_samples_quantile_us(&s, q == 0 ? 0.50 : 0.99);
        f.limit = q == 0 ? limit50 : limit99;
        f.limit_from = limit_from;
        f.n = (long long)s.n;
        f.errors = missing;
        bench_table_add(&table, stdout, &f);
    }
    bench_samples_free(&s);
}

/* A moment in a slot's timeline that rates are taken over. */
typedef enum moment { AT_RECV, AT_OUTBOX_SENT, AT_INDEXED } moment;

static int64_t moment_us(const ev_slot *s, moment m)
{
    switch (m) {
    case AT_RECV: return s->recv_us;
    case AT_OUTBOX_SENT: return s->outbox_sent_us;
    case AT_INDEXED: return s->indexed_us;
    }
    return 0;
}

/*
 * Events/s over slots [from, to): the events seen at moment m, less the
 * first, over the time from the first to the last.  The first is left
 * out because the clock starts at it.  NAN with fewer than two.
 */
static double spread_rate(size_t from, size_t to, moment m, long long *n)
{
    int64_t lo = INT64_MAX, hi = 0, at;
    size_t i;

    *n = 0;
    for (i = from; i < to; i++) {
        at = moment_us(&slots[i], m);
        if (at <= 0)
            continue;
        lo = at < lo ? at : lo;
        hi = at > hi ? at : hi;
        (*n)++;
    }
    return *n >= 2 && hi > lo ? (double)(*n - 1) * 1e6 / (double)(hi - lo)
                              : NAN;
}

static void rate_figure(const char *name, size_t from, size_t to, moment m,
                        double limit, const char *limit_from,
                        double server_cpu_us)
{
    bench_figure f;
    long long n;

    bench_figure_init(&f, name, "events/s", BENCH_HIGHER_IS_BETTER);
    f.value = spread_rate(from, to, m, &n);
    f.limit = limit;
    f.limit_from = limit_from;
    f.n = n;
    f.errors = (long long)(to - from) - n;
    if (!isnan(server_cpu_us) && n > 0)
        f.server_cpu_us_per_op = server_cpu_us / (double)n;
    if (m == AT_RECV) {
        long long by_sent;

        f.extra_key[0] = "by_outbox_sent_at";
        f.extra_value[0] = spread_rate(from, to, AT_OUTBOX_SENT, &by_sent);
    }
    bench_table_add(&table, stdout, &f);
}

/* Receipts above one per event, and events never received, in a range. */
static void print_delivery(const char *phase, size_t from, size_t to)
{
    long long dup = 0, lost = 0, failed = 0;
    size_t i;

    for (i = from; i < to; i++) {
        dup += slots[i].recv_count > 1 ? slots[i].recv_count - 1 : 0;
        lost += slots[i].status == 200 && slots[i].recv_count == 0;
        failed += slots[i].status != 200;
    }
    printf("{\"kind\":\"delivery\",\"phase\":\"%s\",\"approvals\":%zu,"
           "\"failed\":%lld,\"duplicates\":%lld,\"never_received\":%lld,"
           "\"consumer_dropped\":%zu,\"consumer_unparsed\":%zu}\n",
           phase, to - from, failed, dup, lost, ev_consumer_dropped(consumer),
           ev_consumer_unparsed(consumer));
    fflush(stdout);
}

/* The open phase's lateness: how far behind the schedule requests left. */
static double lateness_p99_us(void)
{
    bench_samples s;
    double v = NAN;
    size_t i;

    if (bench_samples_init(&s, n_open) != 0)
        return NAN;
    for (i = 0; i < n_open; i++) {
        if (slots[i].sent_us > 0 && slots[i].sched_us > 0) {
            bench_samples_add(&s,
                              (slots[i].sent_us - slots[i].sched_us) * 1000);
        }
    }
    bench_samples_sort(&s);
    v = bench_samples_quantile_us(&s, 0.99);
    bench_samples_free(&s);
    return v;
}

/* ---- phases -------------------------------------------------------------- */

static const char indexed_sql[] =
    "SELECT count(*) FROM kh_processed_event WHERE outcome = 'indexed'";

static int phase_prepare(void)
{
    long long errors;

    bench_progress(WHO, "preparing %zu submitted documents", n_all);
    errors = run_senders(PREP_THREADS, port_a, 0, 0, n_all);
    if (errors != 0) {
        bench_progress(WHO, "preparing: %lld documents failed", errors);
        return -1;
    }
    return wait_outbox_empty();
}

/* An event body of the run, for the limit to publish. */
static char *sample_body(void)
{
    PGresult *res = PQexec(pg, "SELECT payload::text FROM kh_outbox "
                               "ORDER BY id DESC LIMIT 1");
    char *body = NULL;

    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
        body = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    return body;
}

static int phase_limit(ev_limit *l)
{
    char err[600];
    char *body = sample_body();
    int rc;

    if (body == NULL) {
        bench_progress(WHO, "no outbox payload to publish as the limit");
        return -1;
    }
    bench_progress(WHO, "limit: %d confirmed one by one, %d in batches",
                   opt.limit_each, opt.limit_batch);
    rc = ev_limit_measure(opt.amqp, body, opt.limit_each, opt.limit_batch, 100,
                          l, err, sizeof(err));
    free(body);
    if (rc != 0) {
        bench_progress(WHO, "limit: %s", err);
        return -1;
    }
    bench_samples_sort(&l->each_lat);
    print_limit(l);
    return 0;
}

static int phase_open(void)
{
    long long errors;

    bench_progress(WHO, "open loop: %zu approvals at %d/s", n_open, opt.rate);
    errors = run_senders(opt.threads, port_a, 1, 0, n_open);
    if (errors != 0)
        bench_progress(WHO, "open loop: %lld approvals failed", errors);
    if (errors < 0 || wait_receipts(n_open - (size_t)errors) != 0
        || wait_count("indexed", indexed_sql, (long long)n_open - errors) != 0)
        return -1;
    return 0;
}

/* Approvals through B while A (and so the relay) is stopped, then A
 * again; sets *relay_cpu_us to A's CPU until the drain ended. */
static int phase_burst(double *relay_cpu_us)
{
    long long errors;
    int64_t cpu;

    *relay_cpu_us = NAN;
    bench_progress(WHO, "burst: stopping reviewd A, %d approvals through B",
                   opt.burst);
    ev_proc_stop(&svc_a, 15000);
    errors = run_senders(PREP_THREADS, port_b, 2, n_open, n_all);
    if (errors != 0) {
        bench_progress(WHO, "burst: %lld approvals failed", errors);
        return -1;
    }
    bench_progress(WHO, "burst: %lld events wait; starting reviewd A",
                   pg_number(backlog_sql));
    if (start_reviewd(&svc_a, "a", 1, &port_a) != 0
        || wait_receipts(n_all) != 0)
        return -1;
    cpu = bench_cpu_pid_us(svc_a.pid);
    *relay_cpu_us = cpu >= 0 ? (double)cpu : NAN;
    return wait_count("indexed", indexed_sql, (long long)n_all);
}

static void figures(const ev_limit *l, double relay_cpu_us)
{
    const double l50 = bench_samples_quantile_us(&l->each_lat, 0.50);
    const double l99 = bench_samples_quantile_us(&l->each_lat, 0.99);
    static const char confirm[] =
        "rabbitmq-c: one persistent publish to its confirm, same broker";
    char offered[64];
    long long n;

    latency_figures("open.commit_to_publish", SPAN_COMMIT_TO_PUBLISH, 0,
                    n_open, l50, l99, confirm);
    latency_figures("open.commit_to_sent", SPAN_COMMIT_TO_SENT, 0, n_open, l50,
                    l99, confirm);
    latency_figures("open.schedule_to_publish", SPAN_SCHEDULE_TO_PUBLISH, 0,
                    n_open, l50, l99, confirm);
    latency_figures("open.approve", SPAN_APPROVE, 0, n_open, NAN, NAN, NULL);
    latency_figures("open.commit_to_indexed", SPAN_COMMIT_TO_INDEXED, 0,
                    n_open, NAN, NAN, NULL);
    snprintf(offered, sizeof(offered), "the offered load, %d/s", opt.rate);
    rate_figure("open.events_per_s", 0, n_open, AT_RECV, opt.rate, offered,
                NAN);
    rate_figure("open.indexer.events_per_s", 0, n_open, AT_INDEXED, opt.rate,
                offered, NAN);
    rate_figure("burst.relay.events_per_s", n_open, n_all, AT_RECV,
                l->batch_per_s,
                "rabbitmq-c: persistent publishes, confirms per batch of 100",
                relay_cpu_us);
    rate_figure("burst.indexer.events_per_s", n_open, n_all, AT_INDEXED,
                spread_rate(n_open, n_all, AT_RECV, &n),
                "the relay's drain in the same burst", NAN);
    printf("{\"kind\":\"schedule\",\"late_p99_us\":");
    bench_json_number(stdout, lateness_p99_us());
    printf("}\n");
    print_delivery("open", 0, n_open);
    print_delivery("burst", n_open, n_all);
}

/* ---- set-up -------------------------------------------------------------- */

static int int_arg(const char *name, long min, long max)
{
    return (int)bench_parse_long(WHO, name, optarg, min, max);
}

static int parse_args(int argc, char **argv)
{
    static const struct option longs[] = {{"reviewd", 1, 0, 'r'},
                                          {"indexer", 1, 0, 'x'},
                                          {"pg", 1, 0, 'g'},
                                          {"amqp", 1, 0, 'a'},
                                          {"redis", 1, 0, 'R'},
                                          {"workdir", 1, 0, 'w'},
                                          {"rate", 1, 0, 'q'},
                                          {"duration", 1, 0, 'd'},
                                          {"burst", 1, 0, 'b'},
                                          {"threads", 1, 0, 't'},
                                          {"limit-each", 1, 0, 'e'},
                                          {"limit-batch", 1, 0, 'B'},
                                          {0, 0, 0, 0}};
    int c;

    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'r': opt.reviewd = optarg; break;
        case 'x': opt.indexer = optarg; break;
        case 'g': opt.pg = optarg; break;
        case 'a': opt.amqp = optarg; break;
        case 'R': opt.redis = optarg; break;
        case 'w': opt.workdir = optarg; break;
        case 'q': opt.rate = int_arg("--rate", 1, 100000); break;
        case 'd': opt.duration_s = int_arg("--duration", 1, 3600); break;
        case 'b': opt.burst = int_arg("--burst", 2, 1000000); break;
        case 't': opt.threads = int_arg("--threads", 1, 1024); break;
        case 'e': opt.limit_each = int_arg("--limit-each", 1, 10000000); break;
        case 'B':
            opt.limit_batch = int_arg("--limit-batch", 1, 10000000);
            break;
        default: return -1;
        }
    }
    return opt.reviewd != NULL && opt.indexer != NULL && opt.pg != NULL
                   && opt.amqp != NULL
               ? 0
               : -1;
}

/* Secret, tokens, clocks, database and slots. */
static int setup(void)
{
    unsigned char raw[32];
    FILE *f = fopen("/dev/urandom", "rb");
    const int64_t now = (int64_t)time(NULL);

    if (f == NULL || fread(raw, 1, sizeof(raw), f) != sizeof(raw)) {
        bench_progress(WHO, "cannot read /dev/urandom");
        if (f != NULL)
            fclose(f);
        return -1;
    }
    fclose(f);
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(secret + 2 * i, 3, "%02x", raw[i]);
    author_token = rv_auth_issue((const unsigned char *)secret, strlen(secret),
                                 "alice", "author", now, 7200);
    reviewer_token = rv_auth_issue((const unsigned char *)secret,
                                   strlen(secret), "bob", "reviewer", now,
                                   7200);
    mono_to_real_us = realtime_us() - bench_clock_ns() / 1000;
    n_open = (size_t)opt.rate * (size_t)opt.duration_s;
    n_all = n_open + (size_t)opt.burst;
    slots = calloc(n_all, sizeof(*slots));
    pg = PQconnectdb(opt.pg);
    if (PQstatus(pg) != CONNECTION_OK) {
        bench_progress(WHO, "PostgreSQL: %s", PQerrorMessage(pg));
        return -1;
    }
    return author_token != NULL && reviewer_token != NULL && slots != NULL
               ? 0
               : -1;
}

static int start_services(void)
{
    char err[600];

    if (start_reviewd(&svc_a, "a", 1, &port_a) != 0
        || start_reviewd(&svc_b, "b", 0, &port_b) != 0 || start_indexer() != 0)
        return -1;
    consumer = ev_consumer_start(opt.amqp, "kh.documents", "document.approved",
                                 n_all * 2, err, sizeof(err));
    if (consumer == NULL) {
        bench_progress(WHO, "test consumer: %s", err);
        return -1;
    }
    return 0;
}

static int collect(void)
{
    char err[600];
    const ev_receipt *r;
    size_t nr;

    r = ev_consumer_receipts(consumer, &nr);
    if (ev_times_collect(pg, svc_ix.log, slots, n_all, r, nr, err, sizeof(err))
        != 0) {
        bench_progress(WHO, "collecting times: %s", err);
        return -1;
    }
    return 0;
}

static void teardown(void)
{
    ev_consumer_free(consumer);
    ev_proc_stop(&svc_ix, 15000);
    ev_proc_stop(&svc_a, 15000);
    ev_proc_stop(&svc_b, 15000);
    PQfinish(pg);
    free(slots);
    free(author_token);
    free(reviewer_token);
}

int main(int argc, char **argv)
{
    ev_limit limit;
    double relay_cpu_us = NAN;
    int rc = -1;

    memset(&limit, 0, sizeof(limit));
    if (parse_args(argc, argv) != 0) {
        fprintf(stderr, "usage: bench_events --reviewd BIN --indexer BIN "
                        "--pg URL --amqp URL [--redis URL] [--workdir DIR] "
                        "[--rate N] [--duration S] [--burst N] [--threads N] "
                        "[--limit-each N] [--limit-batch N]\n");
        return 2;
    }
    if (setup() == 0 && start_services() == 0) {
        print_run("start");
        if (phase_prepare() == 0 && phase_limit(&limit) == 0
            && phase_open() == 0 && phase_burst(&relay_cpu_us) == 0
            && collect() == 0) {
            figures(&limit, relay_cpu_us);
            rc = 0;
        }
        print_run("end");
    }
    bench_table_print(&table, stderr);
    printf("{\"kind\":\"summary\",\"figures\":%d,\"complete\":%s}\n", table.n,
           rc == 0 ? "true" : "false");
    bench_samples_free(&limit.each_lat);
    teardown();
    return rc == 0 ? 0 : 1;
}
