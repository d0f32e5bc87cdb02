/*
 * rv_config.h: reviewd's configuration, read once from the environment.
 *
 * API.md lists the variables clients rely on (LISTEN_ADDR, DATABASE_URL,
 * REDIS_URL, AMQP_URL, JWT_SECRET, CONTENT_STORE, MONGO_URL); the REVIEWD_*
 * variables below are tuning knobs with production defaults, made
 * injectable so tests can use short TTLs and small limits.  A missing
 * required setting, a malformed URL or an out-of-range number stops
 * start-up with one line naming the variable: a service that guesses
 * fails later and further from the cause.
 *
 * Ownership: rv_config_load fills a caller-owned struct whose strings are
 * heap copies; rv_config_clear frees them.  Threads: loaded once in main
 * before any thread starts, read-only afterwards.
 */
#ifndef RV_CONFIG_H
#define RV_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "svc_amqp_conn.h"
#include "svc_content_env.h"

/* Which settings a sub-command needs (bit set). */
enum {
    RV_NEED_DATABASE = 1, /* DATABASE_URL */
    RV_NEED_JWT = 2,      /* JWT_SECRET */
    RV_NEED_SERVE = 4     /* everything the HTTP server reads */
};

#define RV_CONFIG_EXCHANGE "kh.documents"
/* kh-indexer's queue and binding (API.md). */
#define RV_CONFIG_QUEUES "kh.indexer:document.approved"

typedef struct rv_config {
    /* LISTEN_ADDR, split; port 0 asks the kernel for a free one (tests). */
    char listen_host[256];
    uint16_t listen_port;

    char *database_url; /* required for serve and migrate */
    char *redis_url;    /* NULL: no Redis, PostgreSQL locks only */
    char *amqp_url;     /* NULL: events stay in the outbox (issue 5) */
    /* REVIEWD_AMQP_EXCHANGE: where the relay publishes (RV_CONFIG_EXCHANGE,
     * API.md's kh.documents); another name lets a test use a shared broker
     * without its events reaching anyone else's consumers. */
    char amqp_exchange[128];
    /* AMQP_CACERT, AMQP_CERT, AMQP_KEY: the TLS trust and client
     * certificate of an amqps:// AMQP_URL (svc_amqp_conn.h). */
    svc_amqp_tls amqp_tls;
    /* REVIEWD_AMQP_QUEUES: "queue:binding,...", the durable queues the
     * relay declares and binds on every connect (bg/rv_amqp.h; every
     * event is published mandatory, these or not).
     * Default RV_CONFIG_QUEUES with the default exchange, none with
     * another exchange; "" for none. */
    char amqp_queues[512];
    char *jwt_secret; /* at least 32 bytes */
    size_t jwt_secret_len;
    /* REVIEWD_JWT_LEEWAY_S: the clock skew allowed on a token's exp and
     * nbf (30, at most 300); REVIEWD_JWT_MAX_LIFETIME_S: how far ahead a
     * token's exp may be (86400, a day).  rv_auth.h has the rules. */
    int64_t jwt_leeway_s;
    int64_t jwt_max_lifetime_s;
    svc_content_kind content_store; /* svc_content_env.h */
    char *mongo_url;

    /* REVIEWD_THREADS: HTTP worker threads, each with its own PostgreSQL
     * connection.  Default 8 x online CPUs, at least 32: a worker spends
     * most of a request waiting on PostgreSQL and Redis, not on a CPU, so
     * the pool is sized for waiting (docs/benchmarks.md). */
    int threads;
    /* The bulkheads (svc_bulkhead.h, svc_deadline.h).
     * REVIEWD_REQUEST_BUDGET_MS: the total time a request may wait on its
     * dependencies, every PostgreSQL and MongoDB call of it together
     * (2000).  REVIEWD_READYZ_TIMEOUT_MS: /readyz's own bound on its
     * PostgreSQL probe (1000).  REVIEWD_BREAKER_FAILURES: calls in a row
     * that could not reach a server before its breaker opens (3);
     * REVIEWD_BREAKER_OPEN_MS: how long it stays open before one trial
     * call (1000).  REVIEWD_PG_MAX_CONCURRENT, REVIEWD_MONGO_MAX_CONCURRENT:
     * calls that may wait on each server at once; by default threads / 4
     * for MongoDB and the rest but 2 for PostgreSQL, so however the two
     * fail, two workers stay free. */
    int request_budget_ms;
    int readyz_timeout_ms;
    int breaker_failures;
    int breaker_open_ms;
    int pg_max_concurrent;
    int mongo_max_concurrent;
    /* REVIEWD_WRITE_CONCURRENCY: write transactions running at once, the
     * others waiting within their budget (tx/rv_admit.h); default 3 x
     * online CPUs, at least 4 (docs/benchmarks.md measured 2, 4, 6 and 8
     * on two CPUs). */
    int write_concurrency;
    /* REVIEWD_MAX_CONNECTIONS: open HTTP connections (default 2048). */
    int max_connections;
    /* REVIEWD_CONNECTION_TIMEOUT_S: idle or slow client cut-off (30). */
    int connection_timeout_s;
    /* Connection hygiene (rv_http.c, docs/api.md "Limits"):
     * REVIEWD_MAX_CONNECTIONS_PER_IP (256): open connections per client
     * address; REVIEWD_HEADER_TIMEOUT_S (10) and REVIEWD_BODY_TIMEOUT_S
     * (30): absolute deadlines for a request's line and headers and for
     * its body, which no trickle of bytes extends; REVIEWD_BODY_BUFFER_MB
     * (64): request bodies buffered at once, all connections together. */
    int max_connections_per_ip;
    int header_timeout_s;
    int body_timeout_s;
    int body_buffer_mb;
    /* REVIEWD_SUBMIT_LOCK_TTL_MS (8000), REVIEWD_REVIEW_LOCK_TTL_MS
     * (10000): the Redis lock TTLs of API.md. */
    int64_t submit_lock_ttl_ms;
    int64_t review_lock_ttl_ms;
    /* REVIEWD_IDEMPOTENCY_TTL_S (86400) and REVIEWD_SWEEP_INTERVAL_S (60). */
    int idempotency_ttl_s;
    int sweep_interval_s;
    /* REVIEWD_REDIS_CHECK_MS: how often the health monitor pings Redis
     * (1000).  REVIEWD_REDIS_TIMEOUT_MS: connect and command timeout for
     * the lock client (1000), short because a request waits on it. */
    int redis_check_ms;
    int redis_timeout_ms;
    /* REVIEWD_PG_TIMEOUT_S: the statement timeout, and the bound on each
     * PostgreSQL wait of background work (5); a request waits at most
     * its budget, REVIEWD_REQUEST_BUDGET_MS. */
    int pg_timeout_s;
    /* REVIEWD_DRAIN_TIMEOUT_S: how long SIGTERM waits for in-flight
     * requests (10). */
    int drain_timeout_s;
    /* REVIEWD_LOG_FILE (NULL: stderr), REVIEWD_LOG_LEVEL (info);
     * REVIEWD_LOG_FLUSH_MS, how long an access-log line may wait to be
     * written with others (20; 0: each at once; svc_log_buffer). */
    char *log_file;
    int log_level;
    int log_flush_ms;
    /* REVIEWD_LOOP_READS: 1 (default) answers GET /v1/documents/{id}
     * without ?include=content on the event loop that read it, with a
     * non-blocking PostgreSQL connection of the loop's own
     * (http/rv_loop.h); 0 sends it to the worker pool like the rest. */
    int loop_reads;
    /* The outbox relay (rv_relay.c): REVIEWD_RELAY_BATCH, rows claimed per
     * transaction (100); REVIEWD_RELAY_SWEEP_MS, the fallback sweep when
     * no NOTIFY comes (1000); REVIEWD_RELAY_BACKOFF_MAX_MS, the cap of the
     * broker reconnect backoff (5000); REVIEWD_AMQP_TIMEOUT_MS, the bound
     * on connecting and on waiting for publisher confirms (5000);
     * REVIEWD_OUTBOX_RETENTION_S, how long sent rows are kept (604800, a
     * week). */
    int relay_batch;
    int relay_sweep_ms;
    int relay_backoff_max_ms;
    int amqp_timeout_ms;
    int outbox_retention_s;
    /* MongoDB orphans (bg/rv_content_orphans.h): REVIEWD_ORPHAN_GRACE_S,
     * the age below which an orphaned record is kept, as possibly a
     * request's still in flight (3600); REVIEWD_ORPHAN_SWEEP_S, how often
     * the server deletes the older ones (3600; 0: never). */
    int orphan_grace_s;
    int orphan_sweep_s;
#ifdef REVIEWD_TESTING
    /* REVIEWD_TEST_HOOKS=1 turns on the test hooks (rv_hooks.h); the
     * field and the variable exist only in test builds. */
    int test_hooks;
#endif
    /* DEV_LOGIN=1 adds POST /v1/dev/token, which signs a token for any
     * user and role that asks (the console's development sign-in).  Off
     * by default; rv_config_load refuses it unless LISTEN_ADDR is a
     * loopback address, so it can never be reached from another host. */
    int dev_login;
} rv_config;

/*
 * Reads the environment into cfg.  need: RV_NEED_* bits saying which
 * settings must be present.  Returns 0, or -1 with a one-line message in
 * errbuf naming the variable (cfg is then cleared).
 */
int rv_config_load(rv_config *cfg, int need, char *errbuf, size_t errlen);

/* Frees the strings of cfg and zeroes it. */
void rv_config_clear(rv_config *cfg);

/* 1 if host (as LISTEN_ADDR gives it) is loopback: "localhost", "::1"
 * or an IPv4 address in 127.0.0.0/8.  Exposed for unit tests. */
int rv_config_host_is_loopback(const char *host);

/*
 * Splits "host:port" or "[v6]:port" into host and port.  Returns 0, or -1
 * if the form or the port (0..65535) is wrong.  Exposed for unit tests.
 */
int rv_config_parse_listen(const char *text, char *host, size_t hostlen,
                           uint16_t *port);

/*
 * Checks an amqp:// or amqps:// URL's form (user:pass@host:port/vhost,
 * every part optional as in the AMQP URI spec).  Returns 0 or -1.
 */
int rv_config_check_amqp_url(const char *url);

#endif /* RV_CONFIG_H */
