/*
 * rv_metrics.h: reviewd's counters and histograms, rendered as
 * Prometheus text.
 *
 * Request counts and latency histograms are kept per (path shape, method,
 * status) in fixed arrays of atomics: the label sets are known in advance
 * (rv_router.h and the statuses the API uses), so recording a request is
 * a few relaxed atomic adds, with no lock and no allocation on the request
 * path.  Lock outcomes, idempotency outcomes and gauges sampled at render
 * time (breaker, pool use, connections) complete the page.
 *
 * Ownership: rv_metrics_new / rv_metrics_free.  rv_metrics_render returns
 * malloc'd text.  Threads: every function is safe from any thread.
 */
#ifndef RV_METRICS_H
#define RV_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "core/rv_router.h"

typedef struct rv_metrics rv_metrics;

/* Outcomes of taking a lock (reviewd_lock_acquire_total{outcome}). */
typedef enum rv_lock_outcome {
    RV_LOCK_OK = 0,   /* held in Redis, with a fence */
    RV_LOCK_BUSY,     /* someone else holds it: 409 LOCK_BUSY */
    RV_LOCK_DEGRADED, /* Redis unavailable or off: PostgreSQL alone */
    RV_LOCK_ERROR,    /* another Redis error: also proceeds degraded */
    RV_LOCK_OUTCOME_COUNT
} rv_lock_outcome;

/* Outcomes of releasing (reviewd_lock_release_total{outcome}). */
typedef enum rv_release_outcome {
    RV_RELEASE_OK = 0,
    RV_RELEASE_LOST,  /* the TTL ran out first */
    RV_RELEASE_ERROR, /* Redis unreachable: the key expires by TTL */
    RV_RELEASE_OUTCOME_COUNT
} rv_release_outcome;

typedef enum rv_idem_outcome {
    RV_IDEM_STORED = 0,
    RV_IDEM_REPLAYED,
    RV_IDEM_MISMATCH,
    RV_IDEM_BUSY,
    RV_IDEM_OUTCOME_COUNT
} rv_idem_outcome;

/* Values sampled when /metrics is rendered. */
typedef struct rv_metrics_gauges {
    int redis_configured;
    int redis_up;
    int breaker_open;
    uint64_t redis_commands;
    uint64_t redis_transport_errors;
    uint64_t redis_breaker_opens;
    uint64_t redis_fast_fails;
    int64_t pg_open;
    int64_t pg_in_use;
    int64_t pg_loop_ready;
    uint64_t pg_connects;
    uint64_t pg_connect_failures;
    int64_t pg_pool_size;
    int64_t http_connections;
    int64_t http_inflight;
    uint64_t idem_swept;
    uint64_t loop_reads;
    int64_t writes_running; /* tx/rv_admit.h */
    int64_t writes_waiting;
    uint64_t write_admission_timeouts;
    int64_t outbox_backlog;   /* unsent outbox rows (-1: unknown) */
    int64_t outbox_oldest_ms; /* age of the oldest unsent row */
    int amqp_configured;
    int amqp_up;
    uint64_t relay_publishes;
    uint64_t relay_confirms;
    uint64_t relay_nacks;
    uint64_t relay_reconnects;
    int content_mongo;   /* CONTENT_STORE=mongo */
    uint64_t content_ok; /* rv_content_stats */
    uint64_t content_missing;
    uint64_t content_unavailable;
    uint64_t content_errors;
    /* The bulkheads (svc_bulkhead.h): breaker open now (0/1), times it
     * opened, calls refused by the breaker or the cap. */
    int pg_breaker_open;
    uint64_t pg_breaker_opens;
    uint64_t pg_refused;
    int content_breaker_open;
    uint64_t content_breaker_opens;
    uint64_t content_refused;
} rv_metrics_gauges;

rv_metrics *rv_metrics_new(void);
void rv_metrics_free(rv_metrics *m);

/* Records one finished request. */
void rv_metrics_request(rv_metrics *m, rv_path path, rv_method method,
                        unsigned status, double seconds);
void rv_metrics_lock(rv_metrics *m, rv_lock_outcome outcome);
void rv_metrics_release(rv_metrics *m, rv_release_outcome outcome);
void rv_metrics_idem(rv_metrics *m, rv_idem_outcome outcome);

/* The whole page in Prometheus text format 0.0.4, or NULL on allocation
 * failure. */
char *rv_metrics_render(rv_metrics *m, const rv_metrics_gauges *g);

/* The label of a lock outcome ("ok", "busy", "degraded", "error"). */
const char *rv_metrics_lock_label(rv_lock_outcome outcome);

#endif /* RV_METRICS_H */
