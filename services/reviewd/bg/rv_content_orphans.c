/*
 * rv_content_orphans.c: find, and after the grace period delete, MongoDB
 * records no row points at (see rv_content_orphans.h).
 *
 * It walks every record once and asks PostgreSQL for that document's
 * version with one parameterised query per record: simple, and bounded by
 * the number of records, which is what an hourly sweep can afford.
 * libpq is used directly (not rv_db) because a run stands alone, on one
 * connection with no pool.  The age test is done twice on purpose: here,
 * to say "kept" for a young orphan, and in MongoDB's delete filter, so a
 * record rewritten between the walk and the delete survives.
 */
#include "bg/rv_content_orphans.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "svc_content_mongo.h"
#include "svc_log.h"
#include "svc_stop.h"

typedef struct walk {
    PGconn *pg;
    svc_mongo_store *m;
    FILE *out;
    int do_delete;
    long long before_ms; /* deletable if written before this */
    rv_orphans_result *res;
    int failed;
    char *err;
    size_t errlen;
} walk;

/* The reason record (id, version) is an orphan, or NULL if a row points
 * at it; -1 in *failed when PostgreSQL could not say. */
static const char *orphan_reason(walk *w, long long id, int version)
{
    char idtext[24];
    const char *params[] = {idtext};
    const char *reason = NULL;
    PGresult *res;

    snprintf(idtext, sizeof(idtext), "%lld", id);
    res = PQexecParams(w->pg,
                       "SELECT version FROM kh_document "
                       "WHERE id = $1::bigint",
                       1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        snprintf(w->err, w->errlen,
                 "content-orphans: reading document "
                 "%lld: %s",
                 id, PQerrorMessage(w->pg));
        w->failed = 1;
    } else if (PQntuples(res) == 0) {
        reason = "no_row";
    } else if (atoi(PQgetvalue(res, 0, 0)) < version) {
        reason = "above_version";
    }
    PQclear(res);
    return reason;
}

/* Deletes an orphan old enough; returns " deleted", " kept", or NULL
 * (failed, recorded). */
static const char *delete_if_old(walk *w, long long id, int version,
                                 long long written_at)
{
    int deleted = 0;

    if (written_at < 0 || written_at >= w->before_ms)
        return " kept";
    if (svc_mongo_store_delete_older(w->m, id, version, w->before_ms, &deleted,
                                     w->err, w->errlen)
        != SVC_STORE_OK) {
        w->failed = 1;
        return NULL;
    }
    w->res->deleted += deleted;
    return deleted ? " deleted" : " kept";
}

/* Lists, and deletes when asked, record (id, version); 1 stops the walk. */
static int check_record(long long id, int version, long long written_at,
                        void *arg)
{
    walk *w = arg;
    const char *reason = orphan_reason(w, id, version);
    const char *done = "";

    if (reason == NULL)
        return w->failed;
    w->res->listed++;
    if (w->do_delete) {
        done = delete_if_old(w, id, version, written_at);
        if (done == NULL)
            return 1;
    }
    if (w->out != NULL)
        fprintf(w->out, "%lld %d %s%s\n", id, version, reason, done);
    return 0;
}

int rv_content_orphans_run(const rv_config *cfg, int do_delete, FILE *out,
                           rv_orphans_result *res, char *err, size_t errlen)
{
    walk w;
    svc_store_rc rc;

    memset(res, 0, sizeof(*res));
    memset(&w, 0, sizeof(w));
    w.out = out;
    w.do_delete = do_delete;
    w.before_ms = (long long)time(NULL) * 1000
                  - (long long)cfg->orphan_grace_s * 1000;
    w.res = res;
    w.err = err;
    w.errlen = errlen;
    if (cfg->content_store != SVC_CONTENT_MONGO) {
        snprintf(err, errlen, "content-orphans: CONTENT_STORE is not mongo");
        return -1;
    }
    w.m = svc_mongo_store_new(cfg->mongo_url, "reviewd", err, errlen);
    if (w.m == NULL)
        return -1;
    w.pg = PQconnectdb(cfg->database_url);
    if (PQstatus(w.pg) != CONNECTION_OK) {
        char why[512];

        svc_log_redact_secrets(cfg->database_url, PQerrorMessage(w.pg), why,
                               sizeof(why));
        snprintf(err, errlen, "content-orphans: DATABASE_URL: %s", why);
        PQfinish(w.pg);
        svc_mongo_store_free(w.m);
        return -1;
    }
    rc = svc_mongo_store_each(w.m, check_record, &w, err, errlen);
    PQfinish(w.pg);
    svc_mongo_store_free(w.m);
    return rc != SVC_STORE_OK || w.failed ? -1 : 0;
}

/* ---- the periodic sweep ------------------------------------------------ */

struct rv_orphan_sweeper {
    rv_app *app;
    svc_stop stop; /* rv_orphan_sweeper_stop's request */
    pthread_t thread;
};

/* One deleting pass, logged. */
static void sweep_once(rv_orphan_sweeper *s)
{
    char err[512];
    rv_orphans_result res;

    if (rv_content_orphans_run(s->app->cfg, 1, NULL, &res, err, sizeof(err))
        != 0) {
        svc_log_write(s->app->log, SVC_LOG_WARN, "content_orphans_failed",
                      json_pack("{s:s,s:I}", "error", err, "deleted",
                                (json_int_t)res.deleted));
        return;
    }
    if (res.listed > 0) {
        svc_log_write(s->app->log, SVC_LOG_INFO, "content_orphans_swept",
                      json_pack("{s:I,s:I,s:i}", "orphans",
                                (json_int_t)res.listed, "deleted",
                                (json_int_t)res.deleted, "grace_s",
                                s->app->cfg->orphan_grace_s));
    }
}

static void *sweeper_main(void *arg)
{
    rv_orphan_sweeper *s = arg;
    struct pollfd p;

    p.fd = svc_stop_fd(&s->stop);
    p.events = POLLIN;
    while (!svc_stop_requested(&s->stop)) {
        const int n = poll(&p, 1, s->app->cfg->orphan_sweep_s * 1000);

        if (n == 0 && !svc_stop_requested(&s->stop))
            sweep_once(s);
        else if (n < 0 && errno != EINTR)
            break;
    }
    return NULL;
}

rv_orphan_sweeper *rv_orphan_sweeper_start(rv_app *app)
{
    rv_orphan_sweeper *s = calloc(1, sizeof(*s));

    if (s == NULL)
        return NULL;
    s->app = app;
    if (svc_stop_init(&s->stop) != 0) {
        free(s);
        return NULL;
    }
    if (pthread_create(&s->thread, NULL, sweeper_main, s) != 0) {
        svc_stop_destroy(&s->stop);
        free(s);
        return NULL;
    }
    return s;
}

void rv_orphan_sweeper_stop(rv_orphan_sweeper *s)
{
    if (s == NULL)
        return;
    svc_stop_request(&s->stop);
    pthread_join(s->thread, NULL);
    svc_stop_destroy(&s->stop);
    free(s);
}
