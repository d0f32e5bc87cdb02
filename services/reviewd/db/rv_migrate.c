/*
 * rv_migrate.c: the migration runner (see rv_migrate.h).
 *
 * Order inside the one transaction: the advisory lock first (so the
 * bookkeeping table itself is created by one instance only), then the
 * table, then the list of applied versions, then each missing migration
 * followed by its bookkeeping row.  Any error rolls everything back.
 */
#include "db/rv_migrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* pg_advisory_xact_lock key for migrations: "kh_migr" in ASCII. */
#define RV_MIGRATE_LOCK "30232581574846322"

static const char create_table[] =
    "CREATE TABLE IF NOT EXISTS kh_schema_migration ("
    " version integer PRIMARY KEY,"
    " name text NOT NULL,"
    " checksum text NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now())";

static int fail(rv_db_conn *c, const char *what, char *errbuf, size_t errlen)
{
    snprintf(errbuf, errlen, "migrate: %s: %s", what, rv_db_conn_errmsg(c));
    rv_db_conn_rollback(c);
    return -1;
}

/* Returns the applied (version, checksum) rows. */
static PGresult *applied_versions(rv_db_conn *c)
{
    PGresult *res = NULL;

    if (rv_db_conn_exec_params(c,
                               "SELECT version, checksum FROM "
                               "kh_schema_migration ORDER BY version",
                               0, NULL, &res)
        != RV_DB_OK)
        return NULL;
    return res;
}

/* The stored checksum of version v, or NULL when not applied. */
static const char *stored_checksum(PGresult *res, int v)
{
    int i;

    for (i = 0; i < PQntuples(res); i++)
        if (atoi(PQgetvalue(res, i, 0)) == v)
            return PQgetvalue(res, i, 1);
    return NULL;
}

/* 1 if the stored checksum matches md5(m->sql), 0 if not, -1 on error. */
static int checksum_matches(rv_db_conn *c, const rv_migration *m,
                            const char *stored)
{
    const char *params[] = {m->sql, stored};
    PGresult *res = NULL;
    int same;

    if (rv_db_conn_exec_params(c, "SELECT md5($1) = $2", 2, params, &res)
        != RV_DB_OK)
        return -1;
    same = PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    return same;
}

static int apply_one(rv_db_conn *c, const rv_migration *m, svc_log *log)
{
    char version[16];
    const char *params[] = {version, m->name, m->sql};

    snprintf(version, sizeof(version), "%d", m->version);
    if (rv_db_conn_exec_sql(c, m->sql) != RV_DB_OK)
        return -1;
    if (rv_db_conn_exec_params(c,
                               "INSERT INTO kh_schema_migration (version, "
                               "name, checksum) VALUES ($1::integer, $2, "
                               "md5($3))",
                               3, params, NULL)
        != RV_DB_OK)
        return -1;
    svc_log_write(log, SVC_LOG_INFO, "migration_applied",
                  json_pack("{s:i,s:s}", "version", m->version, "name",
                            m->name));
    return 0;
}

/* Applies what is missing; checks what is there. */
static int apply_missing(rv_db_conn *c, PGresult *done, svc_log *log,
                         int *applied, char *errbuf, size_t errlen)
{
    size_t i;

    for (i = 0; i < rv_migrations_count; i++) {
        const rv_migration *m = &rv_migrations[i];
        const char *stored = stored_checksum(done, m->version);

        if (stored == NULL) {
            if (apply_one(c, m, log) != 0)
                return fail(c, m->name, errbuf, errlen);
            (*applied)++;
        } else if (checksum_matches(c, m, stored) != 1) {
            snprintf(errbuf, errlen,
                     "migrate: %s was changed after it was "
                     "applied (checksum differs); add a new migration "
                     "instead",
                     m->name);
            rv_db_conn_rollback(c);
            return -1;
        }
    }
    return 0;
}

static int highest_version(PGresult *done, int applied_max)
{
    int v = applied_max;
    int i;

    for (i = 0; i < PQntuples(done); i++) {
        const int n = atoi(PQgetvalue(done, i, 0));

        v = n > v ? n : v;
    }
    return v;
}

int rv_migrate_run(rv_db_conn *c, svc_log *log, int *applied, int *version,
                   char *errbuf, size_t errlen)
{
    PGresult *done;
    int known = rv_migrations_count > 0
                    ? rv_migrations[rv_migrations_count - 1].version
                    : 0;

    *applied = 0;
    *version = 0;
    if (rv_db_conn_begin(c) != RV_DB_OK)
        return fail(c, "BEGIN", errbuf, errlen);
    if (rv_db_conn_exec_sql(c, "SELECT pg_advisory_xact_lock(" RV_MIGRATE_LOCK
                               ")")
            != RV_DB_OK
        || rv_db_conn_exec_sql(c, create_table) != RV_DB_OK)
        return fail(c, "lock", errbuf, errlen);
    done = applied_versions(c);
    if (done == NULL)
        return fail(c, "read kh_schema_migration", errbuf, errlen);
    if (apply_missing(c, done, log, applied, errbuf, errlen) != 0) {
        PQclear(done);
        return -1;
    }
    *version = highest_version(done, known);
    if (*version > known) {
        svc_log_write(log, SVC_LOG_WARN, "schema_newer_than_binary",
                      json_pack("{s:i,s:i}", "database", *version, "binary",
                                known));
    }
    PQclear(done);
    if (rv_db_conn_commit(c) != RV_DB_OK)
        return fail(c, "COMMIT", errbuf, errlen);
    return 0;
}
