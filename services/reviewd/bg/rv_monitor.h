/*
 * rv_monitor.h: the background health checks behind /readyz.
 *
 * One thread checks Redis (a PING through the lock client, which also
 * feeds libdlock's breaker) every REVIEWD_REDIS_CHECK_MS.  /readyz reads
 * the last result instead of probing inline, so a readiness probe never
 * waits on a stopped server, and a state change is logged once, when it
 * happens, never per request.  AMQP is not checked here: /readyz takes
 * it from the outbox relay's own connection (rv_relay_state), which logs
 * its transitions the same way.  rv_dep_state is shared by both.
 *
 * Ownership: rv_monitor_start / rv_monitor_stop (joins the thread).
 * Threads: the getters are safe from any thread.
 */
#ifndef RV_MONITOR_H
#define RV_MONITOR_H

#include "core/rv_config.h"
#include "core/rv_locks.h"
#include "svc_log.h"

typedef struct rv_monitor rv_monitor;

/* A dependency's state as /readyz names it. */
typedef enum rv_dep_state {
    RV_DEP_OFF = 0, /* not configured */
    RV_DEP_OK,
    RV_DEP_DOWN
} rv_dep_state;

/* Checks once synchronously (so /readyz is right from the first
 * request), then starts the thread.  Returns NULL on failure. */
rv_monitor *rv_monitor_start(const rv_config *cfg, rv_locks *locks,
                             svc_log *log);
void rv_monitor_stop(rv_monitor *mon);

rv_dep_state rv_monitor_redis(rv_monitor *mon);

/* "off", "ok" or "down". */
const char *rv_dep_state_name(rv_dep_state state);

#endif /* RV_MONITOR_H */
