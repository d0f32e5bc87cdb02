/*
 * rv_monitor.h: the background health checks behind /readyz.
 *
 * One thread checks Redis (a PING through the lock client, which also
 * feeds libdlock's breaker) and, when AMQP_URL is set, whether the broker
 * accepts TCP connections, every REVIEWD_REDIS_CHECK_MS.  /readyz reads
 * the last result instead of probing inline, so a readiness probe never
 * waits on a stopped server, and a state change is logged once, when it
 * happens, never per request.  The AMQP check is a placeholder seam: the
 * outbox relay of issue 5 will report its own connection state here.
 *
 * Ownership: rv_monitor_start / rv_monitor_stop (joins the thread).
 * Threads: the getters are safe from any thread.
 */
#ifndef RV_MONITOR_H
#define RV_MONITOR_H

#include "rv_config.h"
#include "rv_locks.h"
#include "rv_log.h"

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
                             rv_log *log);
void rv_monitor_stop(rv_monitor *mon);

rv_dep_state rv_monitor_redis(rv_monitor *mon);
rv_dep_state rv_monitor_amqp(rv_monitor *mon);

/* "off", "ok" or "down". */
const char *rv_dep_state_name(rv_dep_state state);

#endif /* RV_MONITOR_H */
