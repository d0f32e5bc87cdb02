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

#include "svc_content_env.h"

/* Which settings a sub-command needs (bit set). */
enum {
    RV_NEED_DATABASE = 1, /* DATABASE_URL */
    RV_NEED_JWT = 2,      /* JWT_SECRET */
    RV_NEED_SERVE = 4     /* everything the HTTP server reads */
};

#define RV_CONFIG_EXCHANGE "kh.documents"

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
    char *jwt_secret;   /* at least 32 bytes */
    size_t jwt_secret_len;
    svc_content_kind content_store; /* svc_content_env.h */
    char *mongo_url;

    /* REVIEWD_THREADS: HTTP worker threads, each with its own PostgreSQL
     * connection.  Default 2 x online CPUs. */
    int threads;
    /* REVIEWD_MAX_CONNECTIONS: open HTTP connections (default 2048). */
    int max_connections;
    /* REVIEWD_CONNECTION_TIMEOUT_S: idle or slow client cut-off (30). */
    int connection_timeout_s;
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
    /* REVIEWD_PG_TIMEOUT_S: connect timeout and statement timeout (5). */
    int pg_timeout_s;
    /* REVIEWD_DRAIN_TIMEOUT_S: how long SIGTERM waits for in-flight
     * requests (10). */
    int drain_timeout_s;
    /* REVIEWD_LOG_FILE (NULL: stderr), REVIEWD_LOG_LEVEL (info). */
    char *log_file;
    int log_level;
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
#ifdef REVIEWD_TESTING
    /* REVIEWD_TEST_HOOKS=1 turns on the test hooks (rv_hooks.h); the
     * field and the variable exist only in test builds. */
    int test_hooks;
#endif
} rv_config;

/*
 * Reads the environment into cfg.  need: RV_NEED_* bits saying which
 * settings must be present.  Returns 0, or -1 with a one-line message in
 * errbuf naming the variable (cfg is then cleared).
 */
int rv_config_load(rv_config *cfg, int need, char *errbuf, size_t errlen);

/* Frees the strings of cfg and zeroes it. */
void rv_config_clear(rv_config *cfg);

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
