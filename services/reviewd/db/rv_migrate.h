/*
 * rv_migrate.h: applying sql/NNNN_*.sql to the database.
 *
 * The migrations are compiled into the binary (rv_embed_sql.cmake turns
 * sql/ into rv_migrations_data.c at build time), so a reviewd binary
 * always carries exactly the schema it was written for and needs no path
 * to the source tree.  They run at start-up and by `reviewd migrate`, in
 * one transaction under pg_advisory_xact_lock: instances starting
 * together serialise on the lock, and the second finds nothing to do.
 * kh_schema_migration records each applied version with an md5 of its
 * text; an applied migration whose text changed is an error (migrations
 * are append-only), and versions the binary does not know (a newer
 * binary ran first) are tolerated with a warning, so a rolling upgrade
 * can run old and new side by side.
 *
 * Threads: run on one connection by one thread.
 */
#ifndef RV_MIGRATE_H
#define RV_MIGRATE_H

#include <stddef.h>

#include "db/rv_db.h"
#include "svc_log.h"

typedef struct rv_migration {
    int version;
    const char *name;
    const char *sql;
} rv_migration;

/* Generated from sql/ in version order. */
extern const rv_migration rv_migrations[];
extern const size_t rv_migrations_count;

/*
 * Applies every missing migration in one transaction.  applied receives
 * how many were new, version the highest version now in the database.
 * Returns 0, or -1 with a message in errbuf (nothing was applied).
 */
int rv_migrate_run(rv_db_conn *c, svc_log *log, int *applied, int *version,
                   char *errbuf, size_t errlen);

#endif /* RV_MIGRATE_H */
