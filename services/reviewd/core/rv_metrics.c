/*
 * rv_metrics.c: lock-free request metrics and their Prometheus page.
 *
 * A request lands in cell [path][method][status], where status is an
 * index into the fixed list of codes the service answers (anything else,
 * such as MHD's own 400 for a malformed request line, never reaches us;
 * an unlisted code counts as "other").  Each cell holds a count, a sum of
 * microseconds and cumulative-by-render histogram buckets.  Rendering
 * reads the atomics without stopping writers, so a page may be off by the
 * requests that finished while it was written; Prometheus tolerates that.
 */
#include "core/rv_metrics.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const unsigned status_codes[] = {200, 201, 400, 401, 403, 404, 405,
                                        409, 413, 415, 422, 500, 503, 0};
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

static void render_gauge(textbuf *tb, const char *name, const char *type,
                         const char *help, long long value)
{
    tb_printf(tb, "# HELP %s %s\n# TYPE %s %s\n%s %lld\n", name, help, name,
              type, name, value);
}

/* The outbox and its relay (rv_relay.c). */
static void render_outbox(textbuf *tb, const rv_metrics_gauges *g)
{
    render_gauge(tb, "reviewd_outbox_backlog", "gauge",
                 "Outbox events not yet confirmed by RabbitMQ (-1: the "
                 "database could not be read).",
                 g->outbox_backlog);
    tb_printf(tb,
              "# HELP reviewd_outbox_oldest_age_seconds Age of the "
              "oldest unsent outbox event (0 when none).\n"
              "# TYPE reviewd_outbox_oldest_age_seconds gauge\n"
              "reviewd_outbox_oldest_age_seconds %.3f\n",
              g->outbox_oldest_ms < 0 ? -1.0
                                      : (double)g->outbox_oldest_ms / 1e3);
    render_gauge(tb, "reviewd_amqp_configured", "gauge",
                 "1 if AMQP_URL is set (the relay runs).", g->amqp_configured);
    render_gauge(tb, "reviewd_amqp_up", "gauge",
                 "1 while the relay is connected to RabbitMQ.", g->amqp_up);
    render_gauge(tb, "reviewd_relay_publishes_total", "counter",
                 "Events handed to RabbitMQ (republishes included).",
                 (long long)g->relay_publishes);
    render_gauge(tb, "reviewd_relay_confirms_total", "counter",
                 "Publishes acknowledged by publisher confirms.",
                 (long long)g->relay_confirms);
    render_gauge(tb, "reviewd_relay_nacks_total", "counter",
                 "Publishes refused (nacked) by RabbitMQ; sent again.",
                 (long long)g->relay_nacks);
    render_gauge(tb, "reviewd_relay_reconnects_total", "counter",
                 "Connections to RabbitMQ made after the first.",
                 (long long)g->relay_reconnects);
}

static void render_content(textbuf *tb, const rv_metrics_gauges *g)
{
    render_gauge(tb, "reviewd_content_mongo", "gauge",
                 "1 if document text is kept in MongoDB.", g->content_mongo);
    render_gauge(tb, "reviewd_content_mongo_ok_total", "counter",
                 "MongoDB content records written or read.",
                 (long long)g->content_ok);
    render_gauge(tb, "reviewd_content_mongo_missing_total", "counter",
                 "Reads of a committed version that found no record.",
                 (long long)g->content_missing);
    render_gauge(tb, "reviewd_content_mongo_unavailable_total", "counter",
                 "MongoDB calls that could not reach the server.",
                 (long long)g->content_unavailable);
    render_gauge(tb, "reviewd_content_mongo_errors_total", "counter",
                 "MongoDB calls the server refused.",
                 (long long)g->content_errors);
}

static void render_bulkheads(textbuf *tb, const rv_metrics_gauges *g)
{
    render_gauge(tb, "reviewd_pg_breaker_open", "gauge",
                 "1 while PostgreSQL's circuit breaker is open.",
                 g->pg_breaker_open);
    render_gauge(tb, "reviewd_pg_breaker_opens_total", "counter",
                 "Times PostgreSQL's breaker opened.",
                 (long long)g->pg_breaker_opens);
    render_gauge(tb, "reviewd_pg_refused_total", "counter",
                 "PostgreSQL calls refused at once by the breaker or the "
                 "concurrency cap.",
                 (long long)g->pg_refused);
    render_gauge(tb, "reviewd_content_mongo_breaker_open", "gauge",
                 "1 while MongoDB's circuit breaker is open.",
                 g->content_breaker_open);
    render_gauge(tb, "reviewd_content_mongo_breaker_opens_total", "counter",
                 "Times MongoDB's breaker opened.",
                 (long long)g->content_breaker_opens);
    render_gauge(tb, "reviewd_content_mongo_refused_total", "counter",
                 "MongoDB calls refused at once by the breaker or the "
                 "concurrency cap.",
                 (long long)g->content_refused);
}

static void render_gauges(textbuf *tb, const rv_metrics_gauges *g)
{
    render_gauge(tb, "reviewd_redis_configured", "gauge",
                 "1 if REDIS_URL is set.", g->redis_configured);
    render_gauge(tb, "reviewd_redis_up", "gauge",
                 "1 if the last Redis health check succeeded.", g->redis_up);
    render_gauge(tb, "reviewd_redis_breaker_open", "gauge",
                 "1 while libdlock's circuit breaker is open.",
                 g->breaker_open);
    render_gauge(tb, "reviewd_redis_commands_total", "counter",
                 "Redis round trips sent by libdlock.",
                 (long long)g->redis_commands);
    render_gauge(tb, "reviewd_redis_transport_errors_total", "counter",
                 "Redis connects or round trips that failed.",
                 (long long)g->redis_transport_errors);
    render_gauge(tb, "reviewd_redis_breaker_opens_total", "counter",
                 "Times the breaker opened.",
                 (long long)g->redis_breaker_opens);
    render_gauge(tb, "reviewd_redis_fast_fails_total", "counter",
                 "Lock calls refused at once by the open breaker.",
                 (long long)g->redis_fast_fails);
    render_gauge(tb, "reviewd_pg_pool_size", "gauge",
                 "PostgreSQL connections the pool may open (one per HTTP "
                 "worker thread).",
                 g->pg_pool_size);
    render_gauge(tb, "reviewd_pg_connections_open", "gauge",
                 "PostgreSQL connections open now.", g->pg_open);
    render_gauge(tb, "reviewd_pg_connections_in_use", "gauge",
                 "PostgreSQL connections running a request now.",
                 g->pg_in_use);
    render_gauge(tb, "reviewd_pg_connects_total", "counter",
                 "Successful PostgreSQL connects.", (long long)g->pg_connects);
    render_gauge(tb, "reviewd_pg_connect_failures_total", "counter",
                 "Failed PostgreSQL connects.",
                 (long long)g->pg_connect_failures);
    render_gauge(tb, "reviewd_http_connections", "gauge",
                 "Open HTTP connections.", g->http_connections);
    render_gauge(tb, "reviewd_http_inflight_requests", "gauge",
                 "Requests being answered now.", g->http_inflight);
    render_gauge(tb, "reviewd_idempotency_swept_total", "counter",
                 "Expired idempotency records deleted by the sweep.",
                 (long long)g->idem_swept);
    render_outbox(tb, g);
    render_content(tb, g);
    render_bulkheads(tb, g);
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
