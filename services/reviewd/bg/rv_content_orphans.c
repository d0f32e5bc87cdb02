/*
 * rv_content_orphans.c: list MongoDB records no row points at (see
 * rv_content_orphans.h).
 *
 * It walks every record once and asks PostgreSQL for that document's
 * version with one parameterised query per record: simple, and bounded by
 * the number of records, which is what an operator's check can afford.
 * libpq is used directly (not rv_db) because this runs outside the
 * server, on one connection with no pool.
 */
#include "bg/rv_content_orphans.h"

#include <stdlib.h>

#include <libpq-fe.h>

#include "svc_content_mongo.h"

typedef struct walk {
    PGconn *pg;
    FILE *out;
    long listed;
    int failed;
    char *err;
    size_t errlen;
} walk;

/* Lists record (id, version) if no row points at it; 1 stops the walk. */
static int check_record(long long id, int version, void *arg)
{
    walk *w = arg;
    char idtext[24];
    const char *params[] = {idtext};
    PGresult *res;
    const char *reason = NULL;

    snprintf(idtext, sizeof(idtext), "%lld", id);
    res = PQexecParams(w->pg, "SELECT version FROM kh_document "
                       "WHERE id = $1::bigint", 1, NULL, params, NULL, NULL,
                       0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        snprintf(w->err, w->errlen, "content-orphans: reading document "
                 "%lld: %s", id, PQerrorMessage(w->pg));
        PQclear(res);
        w->failed = 1;
        return 1;
    }
    if (PQntuples(res) == 0) {
        reason = "no_row";
    } else if (atoi(PQgetvalue(res, 0, 0)) < version) {
        reason = "above_version";
    }
    PQclear(res);
    if (reason != NULL) {
        fprintf(w->out, "%lld %d %s\n", id, version, reason);
        w->listed++;
    }
    return 0;
}

long rv_content_orphans_list(const rv_config *cfg, FILE *out, char *err,
                             size_t errlen)
{
    walk w = {NULL, out, 0, 0, err, errlen};
    svc_mongo_store *m;
    svc_store_rc rc;

    if (cfg->content_store != SVC_CONTENT_MONGO) {
        snprintf(err, errlen, "content-orphans: CONTENT_STORE is not mongo");
        return -1;
    }
    m = svc_mongo_store_new(cfg->mongo_url, "reviewd", err, errlen);
    if (m == NULL) {
        return -1;
    }
    w.pg = PQconnectdb(cfg->database_url);
    if (PQstatus(w.pg) != CONNECTION_OK) {
        snprintf(err, errlen, "content-orphans: DATABASE_URL: %s",
                 PQerrorMessage(w.pg));
        PQfinish(w.pg);
        svc_mongo_store_free(m);
        return -1;
    }
    rc = svc_mongo_store_each(m, check_record, &w, err, errlen);
    PQfinish(w.pg);
    svc_mongo_store_free(m);
    return rc != SVC_STORE_OK || w.failed ? -1 : w.listed;
}
