/*
 * kh_store_conn.c: the store object and its PostgreSQL connection (see
 * kh_store_conn.h).
 *
 * Statements go with text parameters (no client-side quoting; the chunks
 * go as array literals, kh_array_text.h).  Every statement is prepared
 * once per connection (kh_store_connect) and executed by name with the
 * session's generic plan: parsing, analysing and planning the claim and
 * the replace again for each event was half of the backend's CPU per
 * event (perf, docs/benchmarks.md), more than running them.
 *
 * Statements go out in pipelines (kh_store_run_steps): the steps of one
 * round trip are sent together with one sync, and a step that fails
 * makes PostgreSQL skip the rest, so a step never runs after a failed
 * one.  Any failure leaves the connection either known good (the
 * caller's transaction is then rolled back) or dropped.
 */
#include "kh_store_conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "svc_log.h"

kh_store *kh_store_new(const char *url, const kh_store_opts *opts, char *err,
                       size_t errlen)
{
    kh_store *s = calloc(1, sizeof(*s));

    if (s != NULL)
        s->url = strdup(url);
    if (s == NULL || s->url == NULL) {
        snprintf(err, errlen, "store: out of memory");
        free(s);
        return NULL;
    }
    s->opts = *opts;
    s->opts.mongo_url = NULL; /* borrowed only during this call */
    if (opts->content_store == SVC_CONTENT_MONGO) {
        s->mongo = svc_mongo_store_new(opts->mongo_url, "kh-indexer", err,
                                       errlen);
        if (s->mongo == NULL) {
            kh_store_free(s);
            return NULL;
        }
    }
    return s;
}

void kh_store_free(kh_store *s)
{
    if (s == NULL)
        return;
    PQfinish(s->pg);
    svc_mongo_store_free(s->mongo);
    free(s->url);
    free(s);
}

const char *kh_store_content_where(const kh_store *s)
{
    return s->mongo != NULL ? svc_mongo_store_endpoint(s->mongo)
                            : "kh_document_content";
}

void kh_store_set_err(const kh_store *s, char *err, size_t errlen,
                      const char *what, const char *msg)
{
    char clean[1024];
    size_t n;

    /* libpq's messages can quote the connection string, or the piece of
     * it it could not use (a password with a '/' read as a port): the
     * password goes before the message reaches err, hence every log
     * line that carries it (finding 7 of issue 15, as in reviewd). */
    svc_log_redact_secrets(s->url, msg != NULL ? msg : "?", clean,
                           sizeof(clean));
    snprintf(err, errlen, "%s: %s", what, clean);
    n = strlen(err);
    while (n > 0 && (err[n - 1] == '\n' || err[n - 1] == ' '))
        err[--n] = '\0';
}

/* A connection whose pipeline is in an unknown state is never used
 * again: the next batch connects afresh. */
void kh_store_drop_connection(kh_store *s)
{
    PQfinish(s->pg);
    s->pg = NULL;
}

/* Prepares one table of statements.  Returns 0, or -1 with err set. */
static int prepare_table(kh_store *s, const kh_stmt *stmts, size_t n,
                         char *err, size_t errlen)
{
    size_t i;

    for (i = 0; i < n; i++) {
        const char *sql = s->mongo != NULL && stmts[i].mongo_sql != NULL
                              ? stmts[i].mongo_sql
                              : stmts[i].sql;
        PGresult *res = PQprepare(s->pg, stmts[i].name, sql, stmts[i].nparams,
                                  NULL);

        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            char what[64];

            snprintf(what, sizeof(what), "prepare %s", stmts[i].name);
            kh_store_set_err(s, err, errlen, what,
                             res != NULL ? PQresultErrorMessage(res)
                                         : PQerrorMessage(s->pg));
            PQclear(res);
            return -1;
        }
        PQclear(res);
    }
    return 0;
}

/* Prepares every statement of both paths on a new connection.  Returns
 * 0, or -1 with err set and the connection dropped (it is made again,
 * and the statements prepared again, on the next call). */
static int prepare_all(kh_store *s, char *err, size_t errlen)
{
    static const kh_stmt ends[] = {
        {KH_STMT_BEGIN, "BEGIN", NULL, 0},
        {KH_STMT_COMMIT, "COMMIT", NULL, 0},
    };

    if (prepare_table(s, ends, sizeof(ends) / sizeof(ends[0]), err, errlen)
            != 0
        || prepare_table(s, kh_store_tx_stmts, kh_store_tx_nstmts, err, errlen)
               != 0
        || prepare_table(s, kh_store_many_stmts, kh_store_many_nstmts, err,
                         errlen)
               != 0) {
        kh_store_drop_connection(s);
        return -1;
    }
    return 0;
}

/* Connects when there is no usable connection, and prepares the
 * statements on a new one.  Returns 0 or -1. */
int kh_store_connect(kh_store *s, char *err, size_t errlen)
{
    char timeout[16], stmt[128];
    const char *keys[] = {"connect_timeout", "application_name", "dbname",
                          NULL};
    const char *vals[] = {timeout, "kh-indexer", s->url, NULL};
    PGresult *res;

    if (s->pg != NULL && PQstatus(s->pg) == CONNECTION_OK)
        return 0;
    PQfinish(s->pg);
    snprintf(timeout, sizeof(timeout), "%d", s->opts.pg_timeout_s);
    s->pg = PQconnectdbParams(keys, vals, 1);
    if (s->pg == NULL || PQstatus(s->pg) != CONNECTION_OK) {
        kh_store_set_err(s, err, errlen, "postgres connect",
                         s->pg != NULL ? PQerrorMessage(s->pg)
                                       : "out of memory");
        PQfinish(s->pg);
        s->pg = NULL;
        return -1;
    }
    /* A generic plan for every prepared statement: their plans are the
     * same primary-key lookups whatever the parameters, and the default
     * (auto) would plan the first five executions of each again.  A
     * generic plan is made once and kept while the tables grow, so it
     * must not depend on how big they were then: every row this session
     * touches is found by a key, and without enable_seqscan = off a
     * plan made on a young or just emptied table (no statistics, a few
     * pages) scans kh_chunk sequentially for = ANY (array) for as long
     * as the connection lives (perf: a quarter of the backend's CPU after
     * 20,000 events, and growing). */
    snprintf(stmt, sizeof(stmt),
             "SET statement_timeout = %d; "
             "SET plan_cache_mode = force_generic_plan; "
             "SET enable_seqscan = off",
             s->opts.pg_timeout_s * 1000);
    res = PQexec(s->pg, stmt);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        kh_store_set_err(s, err, errlen, "postgres session",
                         PQresultErrorMessage(res));
        PQclear(res);
        kh_store_drop_connection(s);
        return -1;
    }
    PQclear(res);
    return prepare_all(s, err, errlen);
}

/* The next result of the pipeline, past the NULL that ends each
 * statement's results. */
static PGresult *next_result(PGconn *pg)
{
    PGresult *r = PQgetResult(pg);

    if (r == NULL && PQstatus(pg) == CONNECTION_OK)
        r = PQgetResult(pg);
    return r;
}

/*
 * Sends the n steps in one pipeline (one round trip) and reads every
 * result.  Returns 0 with *kept the result of step keep (-1: none kept;
 * the caller clears it), or -1 with err naming the first step that
 * failed; the steps after a failed one did not run.  *failed_at gets
 * the index of that step (n when none failed).
 */
int kh_store_run_steps(kh_store *s, const kh_step *steps, int n, int keep,
                       PGresult **kept, int *failed_at, char *err,
                       size_t errlen)
{
    int i, sent = s->pg != NULL && PQenterPipelineMode(s->pg) == 1;
    PGresult *r;

    *kept = NULL;
    *failed_at = 0;
    for (i = 0; sent && i < n; i++)
        sent = PQsendQueryPrepared(s->pg, steps[i].name, steps[i].n,
                                   steps[i].params, NULL, NULL, 0)
               == 1;
    if (!sent || PQpipelineSync(s->pg) != 1) {
        kh_store_set_err(s, err, errlen, steps[0].what,
                         s->pg != NULL ? PQerrorMessage(s->pg)
                                       : "not connected");
        kh_store_drop_connection(s);
        return -1;
    }
    *failed_at = n;
    for (i = 0; i < n; i++) {
        ExecStatusType st;

        r = next_result(s->pg);
        st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK
            && *failed_at == n) {
            *failed_at = i;
            kh_store_set_err(s, err, errlen, steps[i].what,
                             r != NULL ? PQresultErrorMessage(r)
                                       : PQerrorMessage(s->pg));
        }
        if (i == keep && *failed_at == n)
            *kept = r;
        else
            PQclear(r);
        if (r == NULL)
            break; /* the connection failed: no sync will come */
    }
    while (PQstatus(s->pg) == CONNECTION_OK
           && (r = next_result(s->pg)) != NULL) {
        const int done = PQresultStatus(r) == PGRES_PIPELINE_SYNC;

        PQclear(r);
        if (done)
            break;
    }
    if (PQstatus(s->pg) != CONNECTION_OK || PQexitPipelineMode(s->pg) != 1)
        kh_store_drop_connection(s);
    if (*failed_at < n || (*kept == NULL && keep >= 0)) {
        if (*failed_at == n)
            kh_store_set_err(s, err, errlen, steps[n - 1].what,
                             "the connection failed");
        PQclear(*kept);
        *kept = NULL;
        return -1;
    }
    return 0;
}

void kh_store_rollback_quietly(kh_store *s)
{
    if (s->pg != NULL)
        PQclear(PQexec(s->pg, "ROLLBACK"));
}
