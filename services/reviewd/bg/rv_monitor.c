/*
 * rv_monitor.c: the periodic Redis check with transition logging.
 *
 * The thread sleeps on a condition variable with a deadline, so
 * rv_monitor_stop wakes it at once instead of waiting out the interval.
 * There is no AMQP probe: the outbox relay holds the real connection and
 * reports its state itself (rv_relay_state), which says more than a TCP
 * connect could (a broker that accepts the socket but refuses the login
 * or the channel is down for the relay too).
 */
#include "bg/rv_monitor.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

struct rv_monitor {
    rv_locks *locks;
    svc_log *log;
    int interval_ms;
    atomic_int redis;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping;
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

static void deadline_after(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static void *monitor_main(void *arg)
{
    rv_monitor *mon = arg;
    struct timespec deadline;

    pthread_mutex_lock(&mon->mu);
    while (!mon->stopping) {
        deadline_after(&deadline, mon->interval_ms);
        while (!mon->stopping
               && pthread_cond_timedwait(&mon->cv, &mon->mu, &deadline)
                      != ETIMEDOUT) {
        }
        if (mon->stopping)
            break;
        pthread_mutex_unlock(&mon->mu);
        check_once(mon);
        pthread_mutex_lock(&mon->mu);
    }
    pthread_mutex_unlock(&mon->mu);
    return NULL;
}

static int init_sync(rv_monitor *mon)
{
    pthread_condattr_t attr;
    int rc;

    if (pthread_condattr_init(&attr) != 0)
        return -1;
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init(&mon->cv, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0)
        return -1;
    pthread_mutex_init(&mon->mu, NULL);
    return 0;
}

rv_monitor *rv_monitor_start(const rv_config *cfg, rv_locks *locks,
                             svc_log *log)
{
    rv_monitor *mon = calloc(1, sizeof(*mon));

    if (mon == NULL)
        return NULL;
    if (init_sync(mon) != 0) {
        free(mon);
        return NULL;
    }
    mon->locks = locks;
    mon->log = log;
    mon->interval_ms = cfg->redis_check_ms;
    /* Start from "unknown" so the first check logs the state it finds. */
    atomic_init(&mon->redis, -1);
    if (!rv_locks_configured(locks))
        atomic_store(&mon->redis, RV_DEP_OFF);
    check_once(mon);
    if (pthread_create(&mon->thread, NULL, monitor_main, mon) != 0) {
        pthread_cond_destroy(&mon->cv);
        pthread_mutex_destroy(&mon->mu);
        free(mon);
        return NULL;
    }
    return mon;
}

void rv_monitor_stop(rv_monitor *mon)
{
    if (mon == NULL)
        return;
    pthread_mutex_lock(&mon->mu);
    mon->stopping = 1;
    pthread_cond_signal(&mon->cv);
    pthread_mutex_unlock(&mon->mu);
    pthread_join(mon->thread, NULL);
    pthread_cond_destroy(&mon->cv);
    pthread_mutex_destroy(&mon->mu);
    free(mon);
}

rv_dep_state rv_monitor_redis(rv_monitor *mon)
{
    const int s = atomic_load(&mon->redis);

    return s < 0 ? RV_DEP_DOWN : (rv_dep_state)s;
}
