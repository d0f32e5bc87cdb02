/*
 * rv_config.c: reading and checking reviewd's environment.
 *
 * Each variable is read by one small function that either stores a
 * checked value or writes "NAME: what is wrong" and fails; rv_config_load
 * runs them in order and stops at the first failure.  The numeric
 * settings are one table (name, range, default, field) walked by one
 * loop, so a new one is a line, not a function.  URLs are checked
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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "svc_content_env.h"
#include "svc_env.h"
#include "svc_log.h"

#define RV_JWT_SECRET_MIN 32

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
    const char *v = svc_env_str("LISTEN_ADDR");

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
    const char *v = svc_env_str("DATABASE_URL");
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
    const char *v = svc_env_str("REDIS_URL");

    if (v == NULL)
        return 0;
    if (strncmp(v, "redis://", 8) != 0 && strncmp(v, "rediss://", 9) != 0
        && strncmp(v, "unix://", 7) != 0
        && strncmp(v, "redis+sentinel://", 17) != 0
        && strncmp(v, "rediss+sentinel://", 18) != 0
        && strncmp(v, "redis+cluster://", 16) != 0
        && strncmp(v, "rediss+cluster://", 17) != 0) {
        char shown[160];

        svc_log_redact_url(v, shown, sizeof(shown));
        snprintf(errbuf, errlen,
                 "REDIS_URL: expected redis://, rediss://, "
                 "unix://, redis+sentinel:// or redis+cluster://, "
                 "got \"%s\"",
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

/* Copies the value of name into the field dst of size bytes, or says
 * it is too long. */
static int copy_into(char *dst, size_t size, const char *name,
                     const char *value, char *errbuf, size_t errlen)
{
    if (strlen(value) >= size) {
        snprintf(errbuf, errlen, "%s: longer than %zu bytes", name, size - 1);
        return -1;
    }
    snprintf(dst, size, "%s", value);
    return 0;
}

/* REVIEWD_AMQP_EXCHANGE: 1..127 bytes (AMQP's short string allows 255,
 * but no real name comes near). */
static int load_exchange(rv_config *cfg, char *errbuf, size_t errlen)
{
    const char *v = svc_env_str("REVIEWD_AMQP_EXCHANGE");

    return copy_into(cfg->amqp_exchange, sizeof(cfg->amqp_exchange),
                     "REVIEWD_AMQP_EXCHANGE",
                     v != NULL ? v : RV_CONFIG_EXCHANGE, errbuf, errlen);
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
    return copy_into(cfg->amqp_queues, sizeof(cfg->amqp_queues),
                     "REVIEWD_AMQP_QUEUES", v, errbuf, errlen);
}

static int load_amqp(rv_config *cfg, char *errbuf, size_t errlen)
{
    const char *v = svc_env_str("AMQP_URL");

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
    const char *v = svc_env_str("JWT_SECRET");

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
    const char *file = svc_env_str("REVIEWD_LOG_FILE");
    const char *level = svc_env_str("REVIEWD_LOG_LEVEL");

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

/*
 * The numeric settings: name, range, default and the rv_config field it
 * fills, read in this order by one loop (the first bad one is the one
 * reported).  A default outside the range means "derived" (see
 * derive_defaults), and is kept when the variable is unset.
 */
typedef struct int_setting {
    const char *name;
    long long lo, hi;
    long long def;
    size_t offset; /* of the field in rv_config */
    size_t size;   /* sizeof the field: an int or an int64_t */
} int_setting;

#define SETTING(name, lo, hi, def, field)              \
    {                                                  \
        name, lo, hi, def, offsetof(rv_config, field), \
            sizeof(((rv_config *)0)->field)            \
    }

#define DAY_S 86400

static const int_setting int_settings[] = {
    SETTING("REVIEWD_THREADS", 1, 256, 0, threads),
    SETTING("REVIEWD_MAX_CONNECTIONS", 1, 65536, 2048, max_connections),
    SETTING("REVIEWD_CONNECTION_TIMEOUT_S", 1, 3600, 30, connection_timeout_s),
    SETTING("REVIEWD_SUBMIT_LOCK_TTL_MS", 10, 3600000, 8000,
            submit_lock_ttl_ms),
    SETTING("REVIEWD_REVIEW_LOCK_TTL_MS", 10, 3600000, 10000,
            review_lock_ttl_ms),
    SETTING("REVIEWD_IDEMPOTENCY_TTL_S", 1, 30 * DAY_S, DAY_S,
            idempotency_ttl_s),
    SETTING("REVIEWD_SWEEP_INTERVAL_S", 1, DAY_S, 60, sweep_interval_s),
    SETTING("REVIEWD_REDIS_CHECK_MS", 50, 60000, 1000, redis_check_ms),
    SETTING("REVIEWD_REDIS_TIMEOUT_MS", 10, 60000, 1000, redis_timeout_ms),
    SETTING("REVIEWD_PG_TIMEOUT_S", 1, 600, 5, pg_timeout_s),
    SETTING("REVIEWD_DRAIN_TIMEOUT_S", 0, 600, 10, drain_timeout_s),
    SETTING("REVIEWD_LOG_FLUSH_MS", 0, 10000, 20, log_flush_ms),
    SETTING("REVIEWD_LOOP_READS", 0, 1, 1, loop_reads),
    SETTING("REVIEWD_JWT_LEEWAY_S", 0, 300, 30, jwt_leeway_s),
    SETTING("REVIEWD_JWT_MAX_LIFETIME_S", 1, 365 * DAY_S, DAY_S,
            jwt_max_lifetime_s),
    /* the bulkheads; the caps left unset follow the pool size */
    SETTING("REVIEWD_REQUEST_BUDGET_MS", 50, 600000, 2000, request_budget_ms),
    SETTING("REVIEWD_READYZ_TIMEOUT_MS", 10, 60000, 1000, readyz_timeout_ms),
    SETTING("REVIEWD_BREAKER_FAILURES", 1, 1000, 3, breaker_failures),
    SETTING("REVIEWD_BREAKER_OPEN_MS", 10, 600000, 1000, breaker_open_ms),
    SETTING("REVIEWD_PG_MAX_CONCURRENT", 1, 256, 0, pg_max_concurrent),
    SETTING("REVIEWD_MONGO_MAX_CONCURRENT", 1, 256, 0, mongo_max_concurrent),
    SETTING("REVIEWD_WRITE_CONCURRENCY", 1, 1024, 0, write_concurrency),
    /* the outbox relay and the content sweep */
    SETTING("REVIEWD_RELAY_BATCH", 1, 10000, 100, relay_batch),
    SETTING("REVIEWD_RELAY_SWEEP_MS", 10, 600000, 1000, relay_sweep_ms),
    SETTING("REVIEWD_RELAY_BACKOFF_MAX_MS", 10, 600000, 5000,
            relay_backoff_max_ms),
    SETTING("REVIEWD_AMQP_TIMEOUT_MS", 10, 600000, 5000, amqp_timeout_ms),
    SETTING("REVIEWD_OUTBOX_RETENTION_S", 1, 365 * DAY_S, 7 * DAY_S,
            outbox_retention_s),
    SETTING("REVIEWD_ORPHAN_GRACE_S", 0, 365 * DAY_S, 3600, orphan_grace_s),
    SETTING("REVIEWD_ORPHAN_SWEEP_S", 0, 365 * DAY_S, 3600, orphan_sweep_s),
    /* the connections */
    SETTING("REVIEWD_MAX_CONNECTIONS_PER_IP", 1, 65536, 256,
            max_connections_per_ip),
    SETTING("REVIEWD_HEADER_TIMEOUT_S", 1, 3600, 10, header_timeout_s),
    SETTING("REVIEWD_BODY_TIMEOUT_S", 1, 3600, 30, body_timeout_s),
    SETTING("REVIEWD_BODY_BUFFER_MB", 1, 65536, 64, body_buffer_mb),
};

#define INT_SETTING_COUNT (sizeof(int_settings) / sizeof(int_settings[0]))

static void setting_store(rv_config *cfg, const int_setting *s, long long v)
{
    char *field = (char *)cfg + s->offset;

    if (s->size == sizeof(int64_t)) {
        const int64_t wide = v;

        memcpy(field, &wide, sizeof(wide));
    } else {
        const int narrow = (int)v;

        memcpy(field, &narrow, sizeof(narrow));
    }
}

static void set_defaults(rv_config *cfg)
{
    size_t i;

    memset(cfg, 0, sizeof(*cfg));
    for (i = 0; i < INT_SETTING_COUNT; i++)
        setting_store(cfg, &int_settings[i], int_settings[i].def);
}

/* The defaults that follow others: the pool from the CPUs, the caps from
 * the pool (so however the two dependencies fail, workers stay free). */
static void derive_defaults(rv_config *cfg)
{
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    if (cfg->threads == 0)
        cfg->threads = (int)(cpus > 4 ? (cpus > 32 ? 256 : 8 * cpus) : 32);
    if (cfg->write_concurrency == 0)
        cfg->write_concurrency = cpus > 1 ? (int)(3 * cpus) : 4;
    if (cfg->mongo_max_concurrent == 0)
        cfg->mongo_max_concurrent = cfg->threads >= 4 ? cfg->threads / 4 : 1;
    if (cfg->pg_max_concurrent == 0) {
        const int rest = cfg->threads - cfg->mongo_max_concurrent - 2;

        cfg->pg_max_concurrent = rest >= 1 ? rest : 1;
    }
}

static int load_numbers(rv_config *cfg, char *e, size_t n)
{
    size_t i;

    for (i = 0; i < INT_SETTING_COUNT; i++) {
        const int_setting *s = &int_settings[i];
        long long v = s->def;

        if (svc_env_int(s->name, s->lo, s->hi, &v, e, n) != 0)
            return -1;
        setting_store(cfg, s, v);
    }
    derive_defaults(cfg);
#ifdef REVIEWD_TESTING
    {
        long long hooks = 0;

        if (svc_env_int("REVIEWD_TEST_HOOKS", 0, 1, &hooks, e, n))
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

    if (svc_env_int("DEV_LOGIN", 0, 1, &on, errbuf, errlen) != 0)
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
        || load_numbers(cfg, errbuf, errlen) != 0
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
