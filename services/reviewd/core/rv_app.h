/*
 * rv_app.h: the state one reviewd process shares between its threads.
 *
 * main() builds an rv_app from the configuration and passes it down; no
 * module keeps process state of its own (STYLE.md: the services keep
 * process state in main).  Everything reachable from here is either
 * read-only after start-up (cfg) or thread-safe by its own header (log,
 * metrics, db, locks, monitor, relay).  It lives in core/, the bottom
 * layer, so it names the upper layers' objects only as incomplete
 * structs: including their headers would point an arrow upwards.
 */
#ifndef RV_APP_H
#define RV_APP_H

#include <stdatomic.h>

#include "core/rv_config.h"
#include "core/rv_locks.h"
#include "core/rv_metrics.h"
#include "svc_log.h"

typedef struct rv_app {
    const rv_config *cfg;
    svc_log *log;
    rv_metrics *metrics;
    /* The layers above core/ own these types: the connection factory
     * (db/rv_db.h) and the Redis monitor (bg/rv_monitor.h). */
    struct rv_db *db;
    /* How many write transactions run at once (rv_admit.h). */
    struct rv_admit *writes;
    rv_locks *locks;
    struct rv_monitor *monitor;
    /* The outbox's NOTIFY after the commit (rv_notifier.h); NULL only
     * outside `reviewd serve` (then the trigger notifies). */
    struct rv_notifier *notifier;
    /* The outbox relay (rv_relay.h); NULL when AMQP_URL is unset. */
    struct rv_relay *relay;
    /* The MongoDB orphan sweep (rv_content_orphans.h); NULL unless
     * CONTENT_STORE=mongo and REVIEWD_ORPHAN_SWEEP_S > 0. */
    struct rv_orphan_sweeper *orphans;
    /* Where document text lives (rv_content.h), chosen by CONTENT_STORE. */
    struct rv_content *content;
    /* Requests between their first byte and their completion callback;
     * SIGTERM waits for this to reach 0. */
    atomic_long inflight;
    /* Open HTTP connections (rv_http.c, from adoption to close). */
    atomic_long connections;
    /* Expired idempotency records the sweep has deleted. */
    atomic_ulong idem_swept;
    /* Document reads answered on an event loop (rv_doc_loop.h). */
    atomic_ulong loop_reads;
} rv_app;

#endif /* RV_APP_H */
