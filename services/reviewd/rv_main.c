/*
 * rv_main.c: reviewd's entry point and its sub-commands.
 *
 *   reviewd [serve]     run the HTTP service (the default)
 *   reviewd migrate     apply the SQL migrations and exit
 *   reviewd token --sub S --role R [--ttl SECONDS]
 *                       print a JWT signed with JWT_SECRET (development)
 *   reviewd version
 *
 * Process state lives here and is passed down (rv_app).  Signals are
 * blocked in every thread and taken by main with sigwait, so no handler
 * runs in async-signal context: SIGTERM and SIGINT drain and stop, SIGHUP
 * reopens the log file.  Start-up order is the order of dependence:
 * configuration, log, database and migrations (the schema must be right
 * before the first request), locks, health monitor, sweep, the outbox
 * relay when AMQP_URL is set (it connects to the broker on its own
 * thread, so a broker that is down delays nothing), then the listening
 * socket last, so a client never reaches a half-built service.
 */
#include <dlock/dlock.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "core/rv_app.h"
#include "api/rv_auth.h"
#include "tx/rv_admit.h"
#include "tx/rv_content.h"
#include "bg/rv_content_orphans.h"
#include "http/rv_http.h"
#include "db/rv_migrate.h"
#include "db/rv_query.h"
#include "bg/rv_notifier.h"
#include "bg/rv_relay.h"
#include "bg/rv_sweeper.h"

#define RV_VERSION "0.1.0"

static int usage(FILE *out, int rc)
{
    fprintf(out,
            "usage: reviewd [serve]\n"
            "       reviewd migrate\n"
            "       reviewd token --sub SUB --role author|reviewer|admin "
            "[--ttl SECONDS]\n"
            "       reviewd content-orphans [--delete]\n"
            "       reviewd version\n"
            "Configuration comes from the environment: LISTEN_ADDR, "
            "DATABASE_URL,\nREDIS_URL, AMQP_URL, JWT_SECRET, CONTENT_STORE "
            "and the REVIEWD_* tuning\nvariables (see "
            "services/reviewd/core/rv_config.h).\n");
    return rc;
}

static int die(const char *msg)
{
    fprintf(stderr, "reviewd: %s\n", msg);
    return 1;
}

/* Runs the migrations on a connection of its own. */
static int migrate(rv_db *db, svc_log *log, char *err, size_t errlen)
{
    rv_db_conn *c = rv_db_conn_open(db, 0);
    int applied = 0, version = 0, rc;

    if (c == NULL) {
        snprintf(err, errlen, "DATABASE_URL: cannot connect to PostgreSQL");
        return -1;
    }
    rc = rv_migrate_run(c, log, &applied, &version, err, errlen);
    rv_db_conn_close(c);
    if (rc == 0) {
        svc_log_write(log, SVC_LOG_INFO, "schema_ready",
                      json_pack("{s:i,s:i}", "version", version, "applied",
                                applied));
    }
    return rc;
}

static int cmd_migrate(void)
{
    char err[512];
    rv_config cfg;
    svc_log *log;
    rv_db *db;
    int rc;

    if (rv_config_load(&cfg, RV_NEED_DATABASE, err, sizeof(err)) != 0)
        return die(err);
    log = svc_log_new(cfg.log_file, (svc_log_level)cfg.log_level, err,
                      sizeof(err));
    db = log != NULL ? rv_db_new(cfg.database_url, rv_query_stmts,
                                 RV_QUERY_COUNT, cfg.pg_timeout_s, log)
                     : NULL;
    rc = db != NULL ? migrate(db, log, err, sizeof(err)) : -1;
    if (rc != 0)
        die(log == NULL || db != NULL ? err : "out of memory");
    rv_db_free(db);
    svc_log_free(log);
    rv_config_clear(&cfg);
    return rc == 0 ? 0 : 1;
}

/* Lists MongoDB content records no row points at (rv_content_orphans.h)
 * and, with --delete, deletes those older than REVIEWD_ORPHAN_GRACE_S;
 * exits 0 whether or not any were found. */
static int cmd_content_orphans(int do_delete)
{
    char err[512];
    rv_config cfg;
    rv_orphans_result res;
    int rc;

    if (rv_config_load(&cfg, RV_NEED_DATABASE, err, sizeof(err)) != 0)
        return die(err);
    rc = rv_content_orphans_run(&cfg, do_delete, stdout, &res, err,
                                sizeof(err));
    rv_config_clear(&cfg);
    if (rc != 0)
        return die(err);
    fprintf(stderr,
            "reviewd: %ld orphaned content record(s), %ld "
            "deleted\n",
            res.listed, res.deleted);
    return 0;
}

/* Parses the token sub-command's flags. */
static int token_args(int argc, char **argv, const char **sub,
                      const char **role, long long *ttl)
{
    int i;

    for (i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--sub") == 0) {
            *sub = argv[i + 1];
        } else if (strcmp(argv[i], "--role") == 0) {
            *role = argv[i + 1];
        } else if (strcmp(argv[i], "--ttl") == 0) {
            char *end = NULL;

            *ttl = strtoll(argv[i + 1], &end, 10);
            if (*end != '\0' || end == argv[i + 1])
                return -1;
        } else {
            return -1;
        }
    }
    return i == argc && *sub != NULL && (*sub)[0] != '\0' && *role != NULL
               ? 0
               : -1;
}

static int cmd_token(int argc, char **argv)
{
    const char *sub = NULL, *role = NULL;
    long long ttl = 3600;
    char err[512];
    rv_config cfg;
    char *token;

    if (token_args(argc, argv, &sub, &role, &ttl) != 0)
        return usage(stderr, 2);
    if (rv_auth_role_parse(role) == RV_ROLE_NONE)
        return die("--role must be author, reviewer or admin");
    if (strlen(sub) > RV_SUB_MAX)
        return die("--sub is longer than 255 bytes");
    if (rv_config_load(&cfg, RV_NEED_JWT, err, sizeof(err)) != 0)
        return die(err);
    if (ttl > cfg.jwt_max_lifetime_s) {
        snprintf(err, sizeof(err),
                 "--ttl %lld is over "
                 "REVIEWD_JWT_MAX_LIFETIME_S (%lld): reviewd would refuse "
                 "the token",
                 ttl, (long long)cfg.jwt_max_lifetime_s);
        rv_config_clear(&cfg);
        return die(err);
    }
    token = rv_auth_issue((const unsigned char *)cfg.jwt_secret,
                          cfg.jwt_secret_len, sub, role, (int64_t)time(NULL),
                          (int64_t)ttl);
    rv_config_clear(&cfg);
    if (token == NULL)
        return die("token: signing failed");
    printf("%s\n", token);
    free(token);
    return 0;
}

/* A thousand idle keep-alive clients need more descriptors than the
 * common soft limit of 1024. */
static void raise_fd_limit(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void block_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Waits for SIGTERM or SIGINT, reopening the log on SIGHUP. */
static int wait_for_stop(const sigset_t *set, svc_log *log)
{
    int sig = 0;

    for (;;) {
        if (sigwait(set, &sig) != 0)
            continue;
        if (sig != SIGHUP)
            return sig;
        if (svc_log_reopen(log) != 0)
            svc_log_write(log, SVC_LOG_ERROR, "log_reopen_failed", NULL);
        else
            svc_log_write(log, SVC_LOG_INFO, "log_reopened", NULL);
    }
}

static void log_listening(rv_app *app, uint16_t port)
{
    const rv_config *cfg = app->cfg;
    char addr[300];

    snprintf(addr, sizeof(addr), "%s:%u", cfg->listen_host, (unsigned)port);
    svc_log_write(app->log, SVC_LOG_INFO, "listening",
                  json_pack("{s:s,s:i,s:i,s:s,s:s,s:s,s:s}", "addr", addr,
                            "port", (int)port, "threads", cfg->threads,
                            "redis",
                            rv_locks_configured(app->locks)
                                ? rv_locks_endpoint(app->locks)
                                : "off",
                            "content_store",
                            cfg->content_store == SVC_CONTENT_PG ? "pg"
                                                                 : "mongo",
                            "version", RV_VERSION, "dlock", dlock_version()));
}

/* Builds everything but the HTTP server; on failure errbuf says why. */
static int app_open(rv_app *app, const rv_config *cfg, char *err,
                    size_t errlen)
{
    memset(app, 0, sizeof(*app));
    app->cfg = cfg;
    app->log = svc_log_new(cfg->log_file, (svc_log_level)cfg->log_level, err,
                           errlen);
    if (app->log == NULL)
        return -1;
    if (cfg->log_flush_ms > 0
        && svc_log_buffer(app->log, cfg->log_flush_ms, err, errlen) != 0)
        return -1;
    app->content = rv_content_new(cfg, app->log, err, errlen);
    if (app->content == NULL)
        return -1;
    app->metrics = rv_metrics_new();
    app->db = rv_db_new(cfg->database_url, rv_query_stmts, RV_QUERY_COUNT,
                        cfg->pg_timeout_s, app->log);
    app->writes = rv_admit_new(cfg->write_concurrency);
    if (app->metrics == NULL || app->db == NULL || app->writes == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (migrate(app->db, app->log, err, errlen) != 0)
        return -1;
    if (rv_db_limit(app->db, cfg->pg_max_concurrent, cfg->breaker_failures,
                    cfg->breaker_open_ms)
        != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* Request sessions leave the outbox's NOTIFY to the notifier, which
     * sends it after their commit (rv_notifier.h). */
    rv_db_session_sql(app->db, RV_NOTIFIER_SESSION_SQL);
    app->notifier = rv_notifier_start(app);
    if (app->notifier == NULL) {
        snprintf(err, errlen, "cannot start the outbox notifier");
        return -1;
    }
    app->locks = rv_locks_new(cfg, app->log, app->metrics, err, errlen);
    if (app->locks == NULL)
        return -1;
    app->monitor = rv_monitor_start(cfg, app->locks, app->log);
    if (app->monitor == NULL) {
        snprintf(err, errlen, "cannot start the health monitor");
        return -1;
    }
    if (cfg->amqp_url != NULL) {
        app->relay = rv_relay_start(app);
        if (app->relay == NULL) {
            snprintf(err, errlen, "cannot start the outbox relay");
            return -1;
        }
    }
    if (cfg->content_store == SVC_CONTENT_MONGO && cfg->orphan_sweep_s > 0) {
        app->orphans = rv_orphan_sweeper_start(app);
        if (app->orphans == NULL) {
            snprintf(err, errlen, "cannot start the content orphan sweep");
            return -1;
        }
    }
    return 0;
}

static void app_close(rv_app *app)
{
    rv_orphan_sweeper_stop(app->orphans);
    rv_relay_stop(app->relay);
    rv_notifier_stop(app->notifier);
    rv_monitor_stop(app->monitor);
    rv_locks_free(app->locks);
    rv_db_free(app->db);
    rv_admit_free(app->writes);
    rv_content_free(app->content);
    rv_metrics_free(app->metrics);
    svc_log_free(app->log);
}

static int cmd_serve(void)
{
    char err[512];
    rv_config cfg;
    rv_app app;
    rv_sweeper *sweeper = NULL;
    rv_http *http = NULL;
    sigset_t set;
    uint16_t port = 0;
    int sig;

    block_signals(&set);
    raise_fd_limit();
    if (rv_config_load(&cfg, RV_NEED_SERVE, err, sizeof(err)) != 0)
        return die(err);
    if (app_open(&app, &cfg, err, sizeof(err)) == 0) {
        sweeper = rv_sweeper_start(&app);
        http = sweeper != NULL ? rv_http_start(&app, &port, err, sizeof(err))
                               : NULL;
    }
    if (http == NULL) {
        die(sweeper == NULL && app.monitor != NULL
                ? "cannot start the idempotency sweep"
                : err);
        rv_sweeper_stop(sweeper);
        app_close(&app);
        rv_config_clear(&cfg);
        return 1;
    }
    log_listening(&app, port);
    sig = wait_for_stop(&set, app.log);
    svc_log_write(app.log, SVC_LOG_INFO, "stopping",
                  json_pack("{s:s,s:i}", "signal", strsignal(sig), "drain_s",
                            cfg.drain_timeout_s));
    rv_http_stop(http, cfg.drain_timeout_s);
    rv_sweeper_stop(sweeper);
    svc_log_write(app.log, SVC_LOG_INFO, "stopped", NULL);
    app_close(&app);
    rv_config_clear(&cfg);
    return 0;
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "serve";

    if (strcmp(cmd, "serve") == 0 && argc <= 2)
        return cmd_serve();
    if (strcmp(cmd, "migrate") == 0 && argc == 2)
        return cmd_migrate();
    if (strcmp(cmd, "content-orphans") == 0 && argc == 2)
        return cmd_content_orphans(0);
    if (strcmp(cmd, "content-orphans") == 0 && argc == 3
        && strcmp(argv[2], "--delete") == 0)
        return cmd_content_orphans(1);
    if (strcmp(cmd, "token") == 0)
        return cmd_token(argc, argv);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("reviewd %s (libdlock %s)\n", RV_VERSION, dlock_version());
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0
        || strcmp(cmd, "-h") == 0)
        return usage(stdout, 0);
    return usage(stderr, 2);
}
