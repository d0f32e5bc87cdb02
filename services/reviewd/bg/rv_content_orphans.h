/*
 * rv_content_orphans.h: MongoDB content records that no committed
 * PostgreSQL row points at: `reviewd content-orphans [--delete]`, and the
 * server's periodic sweep of them.
 *
 * rv_content.h explains how they arise (a transaction that failed or
 * died after its MongoDB write) and why they are harmless.  A record
 * (id, v) is an orphan when kh_document has no row id ("no_row") or the
 * row's version is below v ("above_version"); records at or below the
 * row's version are the document's history and are kept.  A record
 * written by a request still in flight looks like an orphan for the few
 * seconds before its commit, so an orphan is deleted only once it is
 * older than the grace period (REVIEWD_ORPHAN_GRACE_S, far above any
 * request's deadline), and the delete itself is conditional on the
 * record's write time (svc_mongo_store_delete_older), so a record that a
 * request rewrote meanwhile is left alone.  A record with no write time
 * is never deleted.
 *
 * One run uses its own PostgreSQL connection and MongoDB client.  The
 * sweeper is a thread of its own, started by the server when
 * CONTENT_STORE=mongo and REVIEWD_ORPHAN_SWEEP_S > 0: it runs a deleting
 * pass every REVIEWD_ORPHAN_SWEEP_S seconds (the first one after one
 * interval) and logs what it did.  rv_orphan_sweeper_stop wakes and joins
 * it.  Threads: a run belongs to its caller's thread.
 */
#ifndef RV_CONTENT_ORPHANS_H
#define RV_CONTENT_ORPHANS_H

#include <stddef.h>
#include <stdio.h>

#include "core/rv_app.h"
#include "core/rv_config.h"

/* What one run found and did. */
typedef struct rv_orphans_result {
    long listed;  /* orphans found, whatever their age */
    long deleted; /* of them, deleted (older than the grace period) */
} rv_orphans_result;

/*
 * Walks every record.  Without do_delete, writes one line
 * "DOCUMENT_ID VERSION REASON" per orphan to out (NULL: none).  With
 * do_delete, deletes each orphan older than cfg->orphan_grace_s and
 * appends " deleted" or " kept" (younger, or of unknown age) to its
 * line.  Returns 0 with *res filled, or -1 with the reason in err
 * (including CONTENT_STORE not being mongo); *res then says what was
 * done before the failure.
 */
int rv_content_orphans_run(const rv_config *cfg, int do_delete, FILE *out,
                           rv_orphans_result *res, char *err, size_t errlen);

typedef struct rv_orphan_sweeper rv_orphan_sweeper;

/* Starts the sweep thread for app (cfg, log).  Returns NULL if it could
 * not start. */
rv_orphan_sweeper *rv_orphan_sweeper_start(rv_app *app);
/* Wakes the thread, waits for its pass to end and frees s; NULL is
 * fine. */
void rv_orphan_sweeper_stop(rv_orphan_sweeper *s);

#endif /* RV_CONTENT_ORPHANS_H */
