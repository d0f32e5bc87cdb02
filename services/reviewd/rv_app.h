/*
 * rv_app.h: the state one reviewd process shares between its threads.
 *
 * main() builds an rv_app from the configuration and passes it down; no
 * module keeps process state of its own (STYLE.md: the services keep
 * process state in main).  Everything reachable from here is either
 * read-only after start-up (cfg) or thread-safe by its own header (log,
 * metrics, db, locks, monitor, relay).
 */
#ifndef RV_APP_H
#define RV_APP_H

#include <stdatomic.h>

#include "rv_config.h"
#include "rv_db.h"
#include "rv_locks.h"
#include "svc_log.h"
#include "rv_metrics.h"
#include "rv_monitor.h"

typedef struct rv_app {
    const rv_config *cfg;
    svc_log *log;
    rv_metrics *metrics;
    rv_db *db;
    rv_locks *locks;
    rv_monitor *monitor;
    /* The outbox relay (rv_relay.h); NULL when AMQP_URL is unset. */
    struct rv_relay *relay;
    /* Where document text lives (rv_content.h), chosen by CONTENT_STORE. */
    struct rv_content *content;
    /* Requests between their first byte and their completion callback;
     * SIGTERM waits for this to reach 0. */
    atomic_long inflight;
    /* Open HTTP connections (MHD's notify-connection callback). */
    atomic_long connections;
    /* Expired idempotency records the sweep has deleted. */
    atomic_ulong idem_swept;
} rv_app;

#endif /* RV_APP_H */
