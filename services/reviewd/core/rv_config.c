/*
 * rv_config.c: reading and checking reviewd's environment.
 *
 * Each variable is read by one small function that either stores a
 * checked value or writes "NAME: what is wrong" and fails; rv_config_load
 * runs them in order and stops at the first failure.  URLs are checked
 * for form here (DATABASE_URL by libpq's own parser, REDIS_URL by scheme
 * here and fully by dlock_client_new at start-up, AMQP_URL by hand since
 * its client arrives with issue 5), so a typo stops the service before it
 * listens.
 */
#include "core/rv_config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "svc_content_env.h"
#include "svc_log.h"

#define RV_JWT_SECRET_MIN 32

/* The environment value of name, or NULL when unset or empty. */
static const char *env_value(const char *name)
{
    const char *v = getenv(name);

    return (v != NULL && v[0] != '\0') ? v : NULL;
}

static int dup_into(char **dst, const char *value, const char *name,
                    char *errbuf, size_t errlen)
{
    *dst = strdup(value);
    if (*dst == NULL) {
        snprintf(errbuf, errlen, "%s: out of memory", name);
        return -1;
    }
    return 0;
}

/* Parses a decimal integer in [lo, hi] from name, or keeps *out (the
 * default) when the variable is unset. */
static int env_int(const char *name, long long lo, long long hi,
                   long long *out, char *errbuf, size_t errlen)
{
    const char *v = env_value(name);
    char *end = NULL;
    long long n;

    if (v == NULL)
        return 0;
    errno = 0;
    n = strtoll(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || !isdigit((unsigned char)v[0])
        || n < lo || n > hi) {
        snprintf(errbuf, errlen,
                 "%s: expected an integer in %lld..%lld, "
                 "got \"%.64s\"",
                 name, lo, hi, v);
        return -1;
    }
    *out = n;
    return 0;
}

static int env_int_into(const char *name, long long lo, long long hi,
                        int *field, char *errbuf, size_t errlen)
{
    long long v = *field;

    if (env_int(name, lo, hi, &v, errbuf, errlen) != 0)
        return -1;
    *field = (int)v;
    return 0;
}

static int env_i64_into(const char *name, long long lo, long long hi,
                        int64_t *field, char *errbuf, size_t errlen)
{
    long long v = *field;

    if (env_int(name, lo, hi, &v, errbuf, errlen) != 0)
        return -1;
    *field = v;
    return 0;
}

int rv_config_parse_listen(const char *text, char *host, size_t hostlen,
                           uint16_t *port)
{
    const char *colon;
    const char *h = text;
    size_t hlen;
    char *end = NULL;
    long p;

    if (text[0] == '[') {
        const char *close = strchr(text, ']');

        if (close == NULL || close[1] != ':')
            return -1;
        h = text + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(text, ':');
        if (colon == NULL || memchr(text, ':', (size_t)(colon - text)))
            return -1;
        hlen = (size_t)(colon - text);
    }
    if (hlen == 0 || hlen >= hostlen || !isdigit((unsigned char)colon[1]))
        return -1;
    errno = 0;
    p = strtol(colon + 1, &end, 10);
    if (errno != 0 || *end != '\0' || p < 0 || p > 65535)
        return -1;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (uint16_t)p;
    return 0;
}

static int load_listen(rv_config *cfg, char *errbuf, size_t errlen)
{
    const char *v = env_value("LISTEN_ADDR");

    if (v == NULL)
        v = "127.0.0.1:8080";
    if (rv_config_parse_listen(v, cfg->listen_host, sizeof(cfg->listen_host),
                               &cfg->listen_port)
        != 0) {
        snprintf(errbuf, errlen,
                 "LISTEN_ADDR: expected host:port or "
                 "[ipv6]:port, got \"%.64s\"",
                 v);
        return -1;
    }
    return 0;
}

static int load_database(rv_config *cfg, int need, char *errbuf, size_t errlen)
{
    const char *v = env_value("DATABASE_URL");
    char *pqerr = NULL;
    PQconninfoOption *opts;

    if (v == NULL) {
        if (need & (RV_NEED_DATABASE | RV_NEED_SERVE)) {
            snprintf(errbuf, errlen,
                     "DATABASE_URL: required (a libpq "
                     "connection URI, postgresql://user:pass@host:port/db)");
            return -1;
        }
        return 0;
    }
    opts = PQconninfoParse(v, &pqerr);
    if (opts == NULL) {
        char shown[160];
        char msg[512];

        /* libpq's message may quote the whole URL or a piece of the
         * password, and the shown URL may still hold a password that
         * svc_log_redact_url did not recognise: both are scrubbed. */
        svc_log_redact_url(v, shown, sizeof(shown));
        snprintf(msg, sizeof(msg), "DATABASE_URL: malformed (%s): %s", shown,
                 pqerr != NULL ? strtok(pqerr, "\n") : "out of memory");
        svc_log_redact_secrets(v, msg, errbuf, errlen);
        PQfreemem(pqerr);
        return -1;
    }
    PQconninfoFree(opts);
    return dup_into(&cfg->database_url, v, "DATABASE_URL", errbuf, errlen);
}

static int load_redis(rv_config *cfg, char *errbuf, size_t errlen)
{
    const char *v = env_value("REDIS_URL");

    if (v == NULL)
        return 0;
    if (strncmp(v, "redis://", 8) != 0 && strncmp(v, "rediss://", 9) != 0
        && strncmp(v, "unix://", 7) != 0
        && strncmp(v, "redis+sentinel://", 17) != 0
        && strncmp(v, "rediss+sentinel://", 18) != 0) {
        char shown[160];

        svc_log_redact_url(v, shown, sizeof(shown));
        snprintf(errbuf, errlen,
                 "REDIS_URL: expected redis://, rediss://, "
                 "unix:// or redis+sentinel://, got \"%s\"",
                 shown);
        return -1;
    }
    return dup_into(&cfg->redis_url, v, "REDIS_URL", errbuf, errlen);
}

/* Succeeds if s[0..n) is a port: 1..5 digits, at most 65535. */
static int is_port(const char *s, size_t n)
{
    size_t i;
    long v = 0;

    if (n == 0 || n > 5)
        return 0;
    for (i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    return v <= 65535;
}

int rv_config_check_amqp_url(const char *url)
{
    const char *rest;
    const char *at;
    const char *hostport;
    const char *slash;
    const char *colon;

    if (strncmp(url, "amqp://", 7) == 0)
        rest = url + 7;
    else if (strncmp(url, "amqps://", 8) == 0)
        rest = url + 8;
    else
        return -1;
    slash = rest + strcspn(rest, "/");
    at = memchr(rest, '@', (size_t)(slash - rest));
    hostport = at != NULL ? at + 1 : rest;
    if (hostport[0] == '[') {
        const char *close = memchr(hostport, ']', (size_t)(slash - hostport));

        if (close == NULL)
            return -1;
        colon = close[1] == ':' ? close + 1 : NULL;
        if (colon == NULL && close + 1 != slash)
            return -1;
    } else {
        colon = memchr(hostport, ':', (size_t)(slash - hostport));
    }
    if (colon != NULL && !is_port(colon + 1, (size_t)(slash - colon - 1)))
        return -1;
    return strpbrk(url, " \t\r\n") == NULL ? 0 : -1;
}

/* REVIEWD_AMQP_EXCHANGE: 1..127 bytes (AMQP's short string allows 255,
 * but no real name comes near). */
static int load_exchange(rv_config *cfg, char *errbuf, size_t errlen)
{
    const char *v = env_value("REVIEWD_AMQP_EXCHANGE");

    if (v == NULL)
        v = RV_CONFIG_EXCHANGE;
    if (strlen(v) >= sizeof(cfg->amqp_exchange)) {
        snprintf(errbuf, errlen,
                 "REVIEWD_AMQP_EXCHANGE: longer than %zu "
                 "bytes",
                 sizeof(cfg->amqp_exchange) - 1);
        return -1;
    }
    snprintf(cfg->amqp_exchange, sizeof(cfg->amqp_exchange), "%s", v);
    return 0;
}

/* REVIEWD_AMQP_QUEUES, defaulting to kh-indexer's queue when the
 * exchange is its default one too. */
static int load_queues(rv_config *cfg, char *errbuf, size_t errlen)
{
    const char *v = getenv("REVIEWD_AMQP_QUEUES");

    if (v == NULL) {
        v = strcmp(cfg->amqp_exchange, RV_CONFIG_EXCHANGE) == 0
                ? RV_CONFIG_QUEUES
                : "";
    }
    if (strlen(v) >= sizeof(cfg->amqp_queues)) {
        snprintf(errbuf, errlen,
                 "REVIEWD_AMQP_QUEUES: longer than %zu "
                 "bytes",
                 sizeof(cfg->amqp_queues) - 1);
        return -1;
    }
    snprintf(cfg->amqp_queues, sizeof(cfg->amqp_queues), "%s", v);
    return 0;
}

static int load_amqp(rv_config *cfg, char *errbuf, size_t errlen)
{
    const char *v = env_value("AMQP_URL");

    if (load_exchange(cfg, errbuf, errlen) != 0
        || load_queues(cfg, errbuf, errlen) != 0
        || svc_amqp_tls_load(&cfg->amqp_tls, errbuf, errlen) != 0)
        return -1;
    if (v == NULL)
        return 0;
    if (rv_config_check_amqp_url(v) != 0) {
        char shown[160];

        svc_log_redact_url(v, shown, sizeof(shown));
        snprintf(errbuf, errlen,
                 "AMQP_URL: malformed, expected "
                 "amqp://user:pass@host:port/vhost, got \"%s\"",
                 shown);
        return -1;
    }
    return dup_into(&cfg->amqp_url, v, "AMQP_URL", errbuf, errlen);
}

static int load_jwt(rv_config *cfg, int need, char *errbuf, size_t errlen)
{
    const char *v = env_value("JWT_SECRET");

    if (v == NULL) {
        if (need & (RV_NEED_JWT | RV_NEED_SERVE)) {
            snprintf(errbuf, errlen,
                     "JWT_SECRET: required (the HS256 "
                     "secret, at least %d bytes)",
                     RV_JWT_SECRET_MIN);
            return -1;
        }
        return 0;
    }
    if (strlen(v) < RV_JWT_SECRET_MIN) {
        /* Never echo the secret, not even a short one. */
        snprintf(errbuf, errlen,
                 "JWT_SECRET: too short (%zu bytes, need at "
                 "least %d)",
                 strlen(v), RV_JWT_SECRET_MIN);
        return -1;
    }
    cfg->jwt_secret_len = strlen(v);
    return dup_into(&cfg->jwt_secret, v, "JWT_SECRET", errbuf, errlen);
}

static int load_content_store(rv_config *cfg, char *errbuf, size_t errlen)
{
    return svc_content_env_load(&cfg->content_store, &cfg->mongo_url, errbuf,
                                errlen);
}

static int load_log(rv_config *cfg, char *errbuf, size_t errlen)
{
    const char *file = env_value("REVIEWD_LOG_FILE");
    const char *level = env_value("REVIEWD_LOG_LEVEL");

    cfg->log_level = SVC_LOG_INFO;
    if (level != NULL) {
        cfg->log_level = svc_log_level_parse(level);
        if (cfg->log_level < 0) {
            snprintf(errbuf, errlen,
                     "REVIEWD_LOG_LEVEL: expected debug, "
                     "info, warn or error, got \"%.32s\"",
                     level);
            return -1;
        }
    }
    return file != NULL ? dup_into(&cfg->log_file, file, "REVIEWD_LOG_FILE",
                                   errbuf, errlen)
                        : 0;
}

static void set_defaults(rv_config *cfg)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    memset(cfg, 0, sizeof(*cfg));
    cfg->threads = (int)(cpus > 4 ? (cpus > 32 ? 256 : 8 * cpus) : 32);
    cfg->request_budget_ms = 2000;
    cfg->readyz_timeout_ms = 1000;
    cfg->breaker_failures = 3;
    cfg->breaker_open_ms = 1000;
    cfg->max_connections = 2048;
    cfg->connection_timeout_s = 30;
    cfg->max_connections_per_ip = 256;
    cfg->header_timeout_s = 10;
    cfg->body_timeout_s = 30;
    cfg->body_buffer_mb = 64;
    cfg->submit_lock_ttl_ms = 8000;
    cfg->review_lock_ttl_ms = 10000;
    cfg->idempotency_ttl_s = 86400;
    cfg->sweep_interval_s = 60;
    cfg->redis_check_ms = 1000;
    cfg->redis_timeout_ms = 1000;
    cfg->pg_timeout_s = 5;
    cfg->jwt_leeway_s = 30;
    cfg->jwt_max_lifetime_s = 86400;
    cfg->drain_timeout_s = 10;
    cfg->relay_batch = 100;
    cfg->relay_sweep_ms = 1000;
    cfg->relay_backoff_max_ms = 5000;
    cfg->amqp_timeout_ms = 5000;
    cfg->outbox_retention_s = 7 * 86400;
    cfg->orphan_grace_s = 3600;
    cfg->orphan_sweep_s = 3600;
}

static int load_relay(rv_config *cfg, char *e, size_t n)
{
    return env_int_into("REVIEWD_RELAY_BATCH", 1, 10000, &cfg->relay_batch, e,
                        n)
                   || env_int_into("REVIEWD_RELAY_SWEEP_MS", 10, 600000,
                                   &cfg->relay_sweep_ms, e, n)
                   || env_int_into("REVIEWD_RELAY_BACKOFF_MAX_MS", 10, 600000,
                                   &cfg->relay_backoff_max_ms, e, n)
                   || env_int_into("REVIEWD_AMQP_TIMEOUT_MS", 10, 600000,
                                   &cfg->amqp_timeout_ms, e, n)
                   || env_int_into("REVIEWD_OUTBOX_RETENTION_S", 1,
                                   365 * 86400, &cfg->outbox_retention_s, e, n)
                   || env_int_into("REVIEWD_ORPHAN_GRACE_S", 0, 365 * 86400,
                                   &cfg->orphan_grace_s, e, n)
                   || env_int_into("REVIEWD_ORPHAN_SWEEP_S", 0, 365 * 86400,
                                   &cfg->orphan_sweep_s, e, n)
               ? -1
               : 0;
}

/* The bulkheads' settings; the caps left unset follow the pool size. */
static int load_bulkheads(rv_config *cfg, char *e, size_t n)
{
    if (env_int_into("REVIEWD_REQUEST_BUDGET_MS", 50, 600000,
                     &cfg->request_budget_ms, e, n)
        || env_int_into("REVIEWD_READYZ_TIMEOUT_MS", 10, 60000,
                        &cfg->readyz_timeout_ms, e, n)
        || env_int_into("REVIEWD_BREAKER_FAILURES", 1, 1000,
                        &cfg->breaker_failures, e, n)
        || env_int_into("REVIEWD_BREAKER_OPEN_MS", 10, 600000,
                        &cfg->breaker_open_ms, e, n)
        || env_int_into("REVIEWD_PG_MAX_CONCURRENT", 1, 256,
                        &cfg->pg_max_concurrent, e, n)
        || env_int_into("REVIEWD_MONGO_MAX_CONCURRENT", 1, 256,
                        &cfg->mongo_max_concurrent, e, n))
        return -1;
    if (cfg->mongo_max_concurrent == 0)
        cfg->mongo_max_concurrent = cfg->threads >= 4 ? cfg->threads / 4 : 1;
    if (cfg->pg_max_concurrent == 0) {
        const int rest = cfg->threads - cfg->mongo_max_concurrent - 2;

        cfg->pg_max_concurrent = rest >= 1 ? rest : 1;
    }
    return 0;
}

static int load_http(rv_config *cfg, char *e, size_t n)
{
    return env_int_into("REVIEWD_MAX_CONNECTIONS_PER_IP", 1, 65536,
                        &cfg->max_connections_per_ip, e, n)
                   || env_int_into("REVIEWD_HEADER_TIMEOUT_S", 1, 3600,
                                   &cfg->header_timeout_s, e, n)
                   || env_int_into("REVIEWD_BODY_TIMEOUT_S", 1, 3600,
                                   &cfg->body_timeout_s, e, n)
                   || env_int_into("REVIEWD_BODY_BUFFER_MB", 1, 65536,
                                   &cfg->body_buffer_mb, e, n)
               ? -1
               : 0;
}

static int load_tuning(rv_config *cfg, char *e, size_t n)
{
    if (env_int_into("REVIEWD_THREADS", 1, 256, &cfg->threads, e, n)
        || env_int_into("REVIEWD_MAX_CONNECTIONS", 1, 65536,
                        &cfg->max_connections, e, n)
        || env_int_into("REVIEWD_CONNECTION_TIMEOUT_S", 1, 3600,
                        &cfg->connection_timeout_s, e, n)
        || env_i64_into("REVIEWD_SUBMIT_LOCK_TTL_MS", 10, 3600000,
                        &cfg->submit_lock_ttl_ms, e, n)
        || env_i64_into("REVIEWD_REVIEW_LOCK_TTL_MS", 10, 3600000,
                        &cfg->review_lock_ttl_ms, e, n)
        || env_int_into("REVIEWD_IDEMPOTENCY_TTL_S", 1, 30 * 86400,
                        &cfg->idempotency_ttl_s, e, n)
        || env_int_into("REVIEWD_SWEEP_INTERVAL_S", 1, 86400,
                        &cfg->sweep_interval_s, e, n)
        || env_int_into("REVIEWD_REDIS_CHECK_MS", 50, 60000,
                        &cfg->redis_check_ms, e, n)
        || env_int_into("REVIEWD_REDIS_TIMEOUT_MS", 10, 60000,
                        &cfg->redis_timeout_ms, e, n)
        || env_int_into("REVIEWD_PG_TIMEOUT_S", 1, 600, &cfg->pg_timeout_s, e,
                        n)
        || env_int_into("REVIEWD_DRAIN_TIMEOUT_S", 0, 600,
                        &cfg->drain_timeout_s, e, n)
        || env_i64_into("REVIEWD_JWT_LEEWAY_S", 0, 300, &cfg->jwt_leeway_s, e,
                        n)
        || env_i64_into("REVIEWD_JWT_MAX_LIFETIME_S", 1, 365 * 86400,
                        &cfg->jwt_max_lifetime_s, e, n))
        return -1;
#ifdef REVIEWD_TESTING
    {
        long long hooks = 0;

        if (env_int("REVIEWD_TEST_HOOKS", 0, 1, &hooks, e, n))
            return -1;
        cfg->test_hooks = (int)hooks;
    }
#endif
    return 0;
}

int rv_config_host_is_loopback(const char *host)
{
    struct in_addr v4;
    struct in6_addr v6;

    if (strcmp(host, "localhost") == 0)
        return 1;
    if (inet_pton(AF_INET, host, &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, host, &v6) == 1
           && memcmp(&v6, &in6addr_loopback, sizeof(v6)) == 0;
}

/* DEV_LOGIN: 0 or 1, and 1 only on a loopback listener (checked when
 * serving: `reviewd token` and `migrate` do not listen). */
static int load_dev_login(rv_config *cfg, int need, char *errbuf,
                          size_t errlen)
{
    long long on = 0;

    if (env_int("DEV_LOGIN", 0, 1, &on, errbuf, errlen) != 0)
        return -1;
    if (on && (need & RV_NEED_SERVE)
        && !rv_config_host_is_loopback(cfg->listen_host)) {
        snprintf(errbuf, errlen,
                 "DEV_LOGIN=1 signs a token for anyone "
                 "who asks, so it is refused unless LISTEN_ADDR is "
                 "loopback (127.0.0.1, ::1, localhost); LISTEN_ADDR "
                 "host is \"%.64s\"",
                 cfg->listen_host);
        return -1;
    }
    cfg->dev_login = (int)on;
    return 0;
}

int rv_config_load(rv_config *cfg, int need, char *errbuf, size_t errlen)
{
    set_defaults(cfg);
    if (load_listen(cfg, errbuf, errlen) != 0
        || load_database(cfg, need, errbuf, errlen) != 0
        || load_redis(cfg, errbuf, errlen) != 0
        || load_amqp(cfg, errbuf, errlen) != 0
        || load_jwt(cfg, need, errbuf, errlen) != 0
        || load_content_store(cfg, errbuf, errlen) != 0
        || load_log(cfg, errbuf, errlen) != 0
        || load_tuning(cfg, errbuf, errlen) != 0
        || load_bulkheads(cfg, errbuf, errlen) != 0
        || load_relay(cfg, errbuf, errlen) != 0
        || load_http(cfg, errbuf, errlen) != 0
        || load_dev_login(cfg, need, errbuf, errlen) != 0) {
        rv_config_clear(cfg);
        return -1;
    }
    return 0;
}

void rv_config_clear(rv_config *cfg)
{
    free(cfg->database_url);
    free(cfg->redis_url);
    free(cfg->amqp_url);
    if (cfg->jwt_secret != NULL) {
        /* Do not leave the secret in freed heap memory. */
        explicit_bzero(cfg->jwt_secret, cfg->jwt_secret_len);
        free(cfg->jwt_secret);
    }
    free(cfg->mongo_url);
    free(cfg->log_file);
    memset(cfg, 0, sizeof(*cfg));
}
