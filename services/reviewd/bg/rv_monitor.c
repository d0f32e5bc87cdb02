/*
 * rv_monitor.c: the periodic Redis check with transition logging.
 *
 * The check runs on a ticker (rv_ticker.h), so rv_monitor_stop wakes it
 * at once instead of waiting out the interval.
 * There is no AMQP probe: the outbox relay holds the real connection and
 * reports its state itself (rv_relay_state), which says more than a TCP
 * connect could (a broker that accepts the socket but refuses the login
 * or the channel is down for the relay too).
 */
#include "bg/rv_monitor.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "bg/rv_ticker.h"

struct rv_monitor {
    rv_locks *locks;
    svc_log *log;
    int interval_ms;
    atomic_int redis;
    rv_ticker *ticker;
};

const char *rv_dep_state_name(rv_dep_state state)
{
    switch (state) {
    case RV_DEP_OFF: return "off";
    case RV_DEP_OK: return "ok";
    case RV_DEP_DOWN: break;
    }
    return "down";
}

/* Stores a new state and logs the transition, if it is one. */
static void set_state(rv_monitor *mon, atomic_int *slot, const char *dep,
                      const char *target, rv_dep_state now)
{
    const int before = atomic_exchange(slot, (int)now);

    if (before == (int)now)
        return;
    svc_log_write(mon->log, now == RV_DEP_OK ? SVC_LOG_INFO : SVC_LOG_WARN,
                  now == RV_DEP_OK ? "dependency_up" : "dependency_down",
                  json_pack("{s:s,s:s,s:s}", "dependency", dep, "target",
                            target, "mode",
                            now == RV_DEP_OK ? "normal" : "degraded"));
}

static void check_once(rv_monitor *mon)
{
    if (rv_locks_configured(mon->locks)) {
        set_state(mon, &mon->redis, "redis", rv_locks_endpoint(mon->locks),
                  rv_locks_ping(mon->locks) ? RV_DEP_OK : RV_DEP_DOWN);
    }
}

static void monitor_tick(rv_ticker *t, void *arg)
{
    (void)t;
    check_once(arg);
}

rv_monitor *rv_monitor_start(const rv_config *cfg, rv_locks *locks,
                             svc_log *log)
{
    rv_monitor *mon = calloc(1, sizeof(*mon));

    if (mon == NULL)
        return NULL;
    mon->locks = locks;
    mon->log = log;
    mon->interval_ms = cfg->redis_check_ms;
    /* Start from "unknown" so the first check logs the state it finds. */
    atomic_init(&mon->redis, -1);
    if (!rv_locks_configured(locks))
        atomic_store(&mon->redis, RV_DEP_OFF);
    check_once(mon);
    mon->ticker = rv_ticker_start(mon->interval_ms, monitor_tick, mon);
    if (mon->ticker == NULL) {
        free(mon);
        return NULL;
    }
    return mon;
}

void rv_monitor_stop(rv_monitor *mon)
{
    if (mon == NULL)
        return;
    rv_ticker_stop(mon->ticker);
    free(mon);
}

rv_dep_state rv_monitor_redis(rv_monitor *mon)
{
    const int s = atomic_load(&mon->redis);

    return s < 0 ? RV_DEP_DOWN : (rv_dep_state)s;
}
