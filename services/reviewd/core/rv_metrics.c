/*
 * rv_metrics.c: lock-free request metrics and their Prometheus page.
 *
 * A request lands in cell [path][method][status], where status is an
 * index into the fixed list of codes the service answers (docs/api.md's
 * tables, the HTTP parser's refusals 408, 414, 431, 501 and 505
 * included); a code not listed counts as "other", which reviewd never
 * answers today.  Each cell holds a count, a sum of
 * microseconds and cumulative-by-render histogram buckets.  Rendering
 * reads the atomics without stopping writers, so a page may be off by the
 * requests that finished while it was written; Prometheus tolerates that.
 */
#include "core/rv_metrics.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const unsigned status_codes[] = {200, 201, 400, 401, 403, 404, 405,
                                        408, 409, 413, 414, 415, 422, 431,
                                        500, 501, 503, 505, 0};
#define STATUS_COUNT (sizeof(status_codes) / sizeof(status_codes[0]))

/* Bucket upper bounds in seconds; +Inf is the count. */
static const double bucket_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                       0.1,   0.25,   0.5,   1,    2.5,   10};
#define BUCKET_COUNT (sizeof(bucket_bounds) / sizeof(bucket_bounds[0]))

typedef struct cell {
    atomic_uint_fast64_t count;
    atomic_uint_fast64_t sum_us;
    atomic_uint_fast64_t buckets[BUCKET_COUNT]; /* not cumulative */
} cell;

struct rv_metrics {
    cell cells[RV_PATH_COUNT][RV_METHOD_COUNT][STATUS_COUNT];
    atomic_uint_fast64_t lock[RV_LOCK_OUTCOME_COUNT];
    atomic_uint_fast64_t release[RV_RELEASE_OUTCOME_COUNT];
    atomic_uint_fast64_t idem[RV_IDEM_OUTCOME_COUNT];
};

static const char *const lock_labels[RV_LOCK_OUTCOME_COUNT] = {"ok", "busy",
                                                               "degraded",
                                                               "error"};
static const char *const release_labels[RV_RELEASE_OUTCOME_COUNT] = {"ok",
                                                                     "lost",
                                                                     "error"};
static const char *const idem_labels[RV_IDEM_OUTCOME_COUNT] = {"stored",
                                                               "replayed",
                                                               "mismatch",
                                                               "busy"};

rv_metrics *rv_metrics_new(void)
{
    /* calloc zeroes the atomics, which is a valid initial state for the
     * lock-free atomic integer types used here. */
    return calloc(1, sizeof(rv_metrics));
}

void rv_metrics_free(rv_metrics *m)
{
    free(m);
}

static size_t status_index(unsigned status)
{
    size_t i;

    for (i = 0; i + 1 < STATUS_COUNT; i++)
        if (status_codes[i] == status)
            return i;
    return STATUS_COUNT - 1;
}

void rv_metrics_request(rv_metrics *m, rv_path path, rv_method method,
                        unsigned status, double seconds)
{
    cell *c = &m->cells[path][method][status_index(status)];
    size_t b;

    atomic_fetch_add_explicit(&c->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->sum_us, (uint64_t)(seconds * 1e6),
                              memory_order_relaxed);
    for (b = 0; b < BUCKET_COUNT; b++) {
        if (seconds <= bucket_bounds[b]) {
            atomic_fetch_add_explicit(&c->buckets[b], 1, memory_order_relaxed);
            break;
        }
    }
}

void rv_metrics_lock(rv_metrics *m, rv_lock_outcome outcome)
{
    atomic_fetch_add_explicit(&m->lock[outcome], 1, memory_order_relaxed);
}

void rv_metrics_release(rv_metrics *m, rv_release_outcome outcome)
{
    atomic_fetch_add_explicit(&m->release[outcome], 1, memory_order_relaxed);
}

void rv_metrics_idem(rv_metrics *m, rv_idem_outcome outcome)
{
    atomic_fetch_add_explicit(&m->idem[outcome], 1, memory_order_relaxed);
}

const char *rv_metrics_lock_label(rv_lock_outcome outcome)
{
    return lock_labels[outcome];
}

/* A growing text buffer; a failed append sets failed and stops. */
typedef struct textbuf {
    char *data;
    size_t len;
    size_t cap;
    int failed;
} textbuf;

__attribute__((format(printf, 2, 3))) static void tb_printf(textbuf *tb,
                                                            const char *fmt,
                                                            ...)
{
    va_list ap;
    int n;

    while (!tb->failed) {
        va_start(ap, fmt);
        n = vsnprintf(tb->data + tb->len, tb->cap - tb->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            tb->failed = 1;
        } else if ((size_t)n < tb->cap - tb->len) {
            tb->len += (size_t)n;
            return;
        } else {
            const size_t cap = (tb->cap + (size_t)n + 1) * 2;
            char *p = realloc(tb->data, cap);

            if (p == NULL) {
                tb->failed = 1;
            } else {
                tb->data = p;
                tb->cap = cap;
            }
        }
    }
}

static void render_cell(textbuf *tb, const cell *c, const char *labels)
{
    const uint64_t count = atomic_load_explicit(&c->count,
                                                memory_order_relaxed);
    uint64_t cum = 0;
    size_t b;

    for (b = 0; b < BUCKET_COUNT; b++) {
        cum += atomic_load_explicit(&c->buckets[b], memory_order_relaxed);
        tb_printf(tb,
                  "reviewd_http_request_duration_seconds_bucket{%s,"
                  "le=\"%g\"} %llu\n",
                  labels, bucket_bounds[b], (unsigned long long)cum);
    }
    tb_printf(tb,
              "reviewd_http_request_duration_seconds_bucket{%s,"
              "le=\"+Inf\"} %llu\n",
              labels, (unsigned long long)count);
    tb_printf(tb, "reviewd_http_request_duration_seconds_sum{%s} %.6f\n",
              labels,
              (double)atomic_load_explicit(&c->sum_us, memory_order_relaxed)
                  / 1e6);
    tb_printf(tb, "reviewd_http_request_duration_seconds_count{%s} %llu\n",
              labels, (unsigned long long)count);
}

/* Formats the labels of flat cell index i; 0 if the cell is empty. */
static int cell_labels(rv_metrics *m, size_t i, char *labels, size_t len,
                       const cell **out)
{
    const size_t s = i % STATUS_COUNT;
    const size_t me = (i / STATUS_COUNT) % RV_METHOD_COUNT;
    const size_t p = i / (STATUS_COUNT * RV_METHOD_COUNT);
    const cell *c = &m->cells[p][me][s];
    char code[8];

    if (atomic_load_explicit(&c->count, memory_order_relaxed) == 0)
        return 0;
    snprintf(code, sizeof(code), "%u", status_codes[s]);
    snprintf(labels, len, "route=\"%s\",method=\"%s\",status=\"%s\"",
             rv_router_path_label((rv_path)p),
             rv_router_method_label((rv_method)me),
             status_codes[s] != 0 ? code : "other");
    *out = c;
    return 1;
}

#define CELL_COUNT (RV_PATH_COUNT * RV_METHOD_COUNT * STATUS_COUNT)

/* Writes the request counter and histogram families. */
static void render_requests(textbuf *tb, rv_metrics *m)
{
    char labels[160];
    const cell *c;
    size_t i;

    tb_printf(tb, "# HELP reviewd_http_requests_total HTTP requests "
                  "answered, by route, method and status.\n"
                  "# TYPE reviewd_http_requests_total counter\n");
    for (i = 0; i < CELL_COUNT; i++) {
        if (cell_labels(m, i, labels, sizeof(labels), &c)) {
            tb_printf(tb, "reviewd_http_requests_total{%s} %llu\n", labels,
                      (unsigned long long)atomic_load_explicit(
                          &c->count, memory_order_relaxed));
        }
    }
    tb_printf(tb, "# HELP reviewd_http_request_duration_seconds Time from "
                  "the request's headers to its response.\n"
                  "# TYPE reviewd_http_request_duration_seconds histogram\n");
    for (i = 0; i < CELL_COUNT; i++)
        if (cell_labels(m, i, labels, sizeof(labels), &c))
            render_cell(tb, c, labels);
}

static void render_family(textbuf *tb, const char *name, const char *help,
                          const char *label, atomic_uint_fast64_t *values,
                          const char *const *labels, size_t n)
{
    size_t i;

    tb_printf(tb, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    for (i = 0; i < n; i++) {
        tb_printf(tb, "%s{%s=\"%s\"} %llu\n", name, label, labels[i],
                  (unsigned long long)
                      atomic_load_explicit(&values[i], memory_order_relaxed));
    }
}

/* How a sampled value is read and printed. */
typedef enum gauge_kind {
    G_INT,    /* int */
    G_I64,    /* int64_t */
    G_U64,    /* uint64_t */
    G_MS_AS_S /* int64_t milliseconds printed as seconds (-1: unknown) */
} gauge_kind;

/* One sampled metric: its name, type, help and where its value sits in
 * rv_metrics_gauges.  The page lists them in this order. */
typedef struct gauge_entry {
    const char *name;
    const char *type; /* "gauge" or "counter" */
    const char *help;
    size_t offset;
    gauge_kind kind;
} gauge_entry;

#define KIND_OF(field)                            \
    _Generic(((rv_metrics_gauges *)0)->field, int \
             : G_INT, int64_t                     \
             : G_I64, uint64_t                    \
             : G_U64)
#define GAUGE(name, help, field)                                 \
    {                                                            \
        name, "gauge", help, offsetof(rv_metrics_gauges, field), \
            KIND_OF(field)                                       \
    }
#define COUNTER(name, help, field)                                 \
    {                                                              \
        name, "counter", help, offsetof(rv_metrics_gauges, field), \
            KIND_OF(field)                                         \
    }

static const gauge_entry gauge_entries[] = {
    GAUGE("reviewd_redis_configured", "1 if REDIS_URL is set.",
          redis_configured),
    GAUGE("reviewd_redis_up", "1 if the last Redis health check succeeded.",
          redis_up),
    GAUGE("reviewd_redis_breaker_open",
          "1 while libdlock's circuit breaker is open.", breaker_open),
    COUNTER("reviewd_redis_commands_total",
            "Redis round trips sent by libdlock.", redis_commands),
    COUNTER("reviewd_redis_transport_errors_total",
            "Redis connects or round trips that failed.",
            redis_transport_errors),
    COUNTER("reviewd_redis_breaker_opens_total", "Times the breaker opened.",
            redis_breaker_opens),
    COUNTER("reviewd_redis_fast_fails_total",
            "Lock calls refused at once by the open breaker.",
            redis_fast_fails),
    GAUGE("reviewd_pg_pool_size",
          "PostgreSQL connections the pool may open (one per HTTP "
          "worker thread).",
          pg_pool_size),
    GAUGE("reviewd_pg_connections_open",
          "PostgreSQL connections open now: the workers' and the event "
          "loops' (up to 4 each).",
          pg_open),
    GAUGE("reviewd_pg_loop_connections_ready",
          "Of the open PostgreSQL connections, the event loops' that are "
          "ready to send reads (connected and prepared).",
          pg_loop_ready),
    GAUGE("reviewd_pg_connections_in_use",
          "PostgreSQL connections running a request now.", pg_in_use),
    COUNTER("reviewd_pg_connects_total", "Successful PostgreSQL connects.",
            pg_connects),
    COUNTER("reviewd_pg_connect_failures_total", "Failed PostgreSQL connects.",
            pg_connect_failures),
    GAUGE("reviewd_http_connections", "Open HTTP connections.",
          http_connections),
    GAUGE("reviewd_http_inflight_requests", "Requests being answered now.",
          http_inflight),
    COUNTER("reviewd_idempotency_swept_total",
            "Expired idempotency records deleted by the sweep.", idem_swept),
    COUNTER("reviewd_loop_document_reads_total",
            "GET /v1/documents/{id} answered on an HTTP event loop, "
            "without a worker thread.",
            loop_reads),
    GAUGE("reviewd_writes_running",
          "Write transactions running now (at most "
          "REVIEWD_WRITE_CONCURRENCY).",
          writes_running),
    GAUGE("reviewd_writes_waiting",
          "Write requests waiting for one of REVIEWD_WRITE_CONCURRENCY "
          "places.",
          writes_waiting),
    COUNTER("reviewd_write_admission_timeouts_total",
            "Write requests answered 503 because their budget ran out "
            "while they waited for a place.",
            write_admission_timeouts),
    /* the outbox and its relay (rv_relay.c) */
    GAUGE("reviewd_outbox_backlog",
          "Outbox events not yet confirmed by RabbitMQ (-1: the "
          "database could not be read).",
          outbox_backlog),
    {"reviewd_outbox_oldest_age_seconds", "gauge",
     "Age of the oldest unsent outbox event (0 when none).",
     offsetof(rv_metrics_gauges, outbox_oldest_ms), G_MS_AS_S},
    GAUGE("reviewd_amqp_configured", "1 if AMQP_URL is set (the relay runs).",
          amqp_configured),
    GAUGE("reviewd_amqp_up", "1 while the relay is connected to RabbitMQ.",
          amqp_up),
    COUNTER("reviewd_relay_publishes_total",
            "Events handed to RabbitMQ (republishes included).",
            relay_publishes),
    COUNTER("reviewd_relay_confirms_total",
            "Publishes acknowledged by publisher confirms.", relay_confirms),
    COUNTER("reviewd_relay_nacks_total",
            "Publishes refused (nacked) by RabbitMQ; sent again.",
            relay_nacks),
    COUNTER("reviewd_relay_reconnects_total",
            "Connections to RabbitMQ made after the first.", relay_reconnects),
    /* the content store */
    GAUGE("reviewd_content_mongo", "1 if document text is kept in MongoDB.",
          content_mongo),
    COUNTER("reviewd_content_mongo_ok_total",
            "MongoDB content records written or read.", content_ok),
    COUNTER("reviewd_content_mongo_missing_total",
            "Reads of a committed version that found no record.",
            content_missing),
    COUNTER("reviewd_content_mongo_unavailable_total",
            "MongoDB calls that could not reach the server.",
            content_unavailable),
    COUNTER("reviewd_content_mongo_errors_total",
            "MongoDB calls the server refused.", content_errors),
    /* the bulkheads (svc_bulkhead.h) */
    GAUGE("reviewd_pg_breaker_open",
          "1 while PostgreSQL's circuit breaker is open.", pg_breaker_open),
    COUNTER("reviewd_pg_breaker_opens_total",
            "Times PostgreSQL's breaker opened.", pg_breaker_opens),
    COUNTER("reviewd_pg_refused_total",
            "PostgreSQL calls refused at once by the breaker or the "
            "concurrency cap.",
            pg_refused),
    GAUGE("reviewd_content_mongo_breaker_open",
          "1 while MongoDB's circuit breaker is open.", content_breaker_open),
    COUNTER("reviewd_content_mongo_breaker_opens_total",
            "Times MongoDB's breaker opened.", content_breaker_opens),
    COUNTER("reviewd_content_mongo_refused_total",
            "MongoDB calls refused at once by the breaker or the "
            "concurrency cap.",
            content_refused),
};

#define GAUGE_COUNT (sizeof(gauge_entries) / sizeof(gauge_entries[0]))

static void render_gauge(textbuf *tb, const gauge_entry *e,
                         const rv_metrics_gauges *g)
{
    const char *field = (const char *)g + e->offset;
    int i;
    int64_t i64;
    uint64_t u64;

    tb_printf(tb, "# HELP %s %s\n# TYPE %s %s\n", e->name, e->help, e->name,
              e->type);
    switch (e->kind) {
    case G_INT:
        memcpy(&i, field, sizeof(i));
        tb_printf(tb, "%s %d\n", e->name, i);
        break;
    case G_I64:
        memcpy(&i64, field, sizeof(i64));
        tb_printf(tb, "%s %lld\n", e->name, (long long)i64);
        break;
    case G_U64:
        memcpy(&u64, field, sizeof(u64));
        tb_printf(tb, "%s %llu\n", e->name, (unsigned long long)u64);
        break;
    case G_MS_AS_S:
        memcpy(&i64, field, sizeof(i64));
        tb_printf(tb, "%s %.3f\n", e->name,
                  i64 < 0 ? -1.0 : (double)i64 / 1e3);
        break;
    }
}

static void render_gauges(textbuf *tb, const rv_metrics_gauges *g)
{
    size_t i;

    for (i = 0; i < GAUGE_COUNT; i++)
        render_gauge(tb, &gauge_entries[i], g);
}

char *rv_metrics_render(rv_metrics *m, const rv_metrics_gauges *g)
{
    textbuf tb = {NULL, 0, 0, 0};

    tb.data = malloc(16384);
    if (tb.data == NULL)
        return NULL;
    tb.cap = 16384;
    render_requests(&tb, m);
    render_family(&tb, "reviewd_lock_acquire_total",
                  "Distributed lock acquisitions by outcome.", "outcome",
                  m->lock, lock_labels, RV_LOCK_OUTCOME_COUNT);
    render_family(&tb, "reviewd_lock_release_total",
                  "Distributed lock releases by outcome.", "outcome",
                  m->release, release_labels, RV_RELEASE_OUTCOME_COUNT);
    render_family(&tb, "reviewd_idempotency_total",
                  "Idempotency-Key outcomes.", "outcome", m->idem, idem_labels,
                  RV_IDEM_OUTCOME_COUNT);
    render_gauges(&tb, g);
    if (tb.failed) {
        free(tb.data);
        return NULL;
    }
    return tb.data;
}
