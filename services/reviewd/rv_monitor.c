/*
 * rv_monitor.c: periodic Redis and AMQP checks with transition logging.
 *
 * The thread sleeps on a condition variable with a deadline, so
 * rv_monitor_stop wakes it at once instead of waiting out the interval.
 * The AMQP probe is a non-blocking TCP connect bounded by poll(2): enough
 * to say "the broker is down" until issue 5's relay has a real AMQP
 * connection to report on.
 */
#include "rv_monitor.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct rv_monitor {
    rv_locks *locks;
    rv_log *log;
    int interval_ms;
    char amqp_host[256];
    char amqp_port[8];
    int amqp_configured;
    atomic_int redis;
    atomic_int amqp;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping;
};

const char *rv_dep_state_name(rv_dep_state state)
{
    switch (state) {
    case RV_DEP_OFF:
        return "off";
    case RV_DEP_OK:
        return "ok";
    case RV_DEP_DOWN:
        break;
    }
    return "down";
}

/* Splits amqp://[user[:pass]@]host[:port][/vhost] into host and port. */
static void parse_amqp_target(const char *url, char *host, size_t hostlen,
                              char *port, size_t portlen)
{
    const char *p = strstr(url, "://");
    const char *end;
    const char *at;
    const char *colon;
    int tls = strncmp(url, "amqps", 5) == 0;

    p = p != NULL ? p + 3 : url;
    end = p + strcspn(p, "/?");
    at = memchr(p, '@', (size_t)(end - p));
    if (at != NULL) {
        p = at + 1;
    }
    if (*p == '[') {
        const char *close = memchr(p, ']', (size_t)(end - p));

        p++;
        colon = close != NULL && close[1] == ':' ? close + 1 : NULL;
        end = close != NULL ? close : end;
    } else {
        colon = memchr(p, ':', (size_t)(end - p));
    }
    snprintf(host, hostlen, "%.*s",
             (int)((colon != NULL && colon < end ? colon : end) - p), p);
    if (host[0] == '\0') {
        snprintf(host, hostlen, "localhost");
    }
    if (colon != NULL && colon[1] != '\0' && colon[1] != '/') {
        snprintf(port, portlen, "%.*s", (int)strcspn(colon + 1, "/?"),
                 colon + 1);
    } else {
        snprintf(port, portlen, "%s", tls ? "5671" : "5672");
    }
}

/* 1 if host:port accepts a TCP connection within timeout_ms. */
static int tcp_reachable(const char *host, const char *port, int timeout_ms)
{
    struct addrinfo hints, *res = NULL;
    struct pollfd pfd;
    int fd, ok = 0, err = 0;
    socklen_t len = sizeof(err);

    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res) != 0 || res == NULL) {
        return 0;
    }
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                0);
    if (fd >= 0) {
        if (connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
            ok = 1;
        } else if (errno == EINPROGRESS) {
            pfd.fd = fd;
            pfd.events = POLLOUT;
            ok = poll(&pfd, 1, timeout_ms) == 1
                 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0
                 && err == 0;
        }
        close(fd);
    }
    freeaddrinfo(res);
    return ok;
}

/* Stores a new state and logs the transition, if it is one. */
static void set_state(rv_monitor *mon, atomic_int *slot, const char *dep,
                      const char *target, rv_dep_state now)
{
    const int before = atomic_exchange(slot, (int)now);

    if (before == (int)now) {
        return;
    }
    rv_log_write(mon->log, now == RV_DEP_OK ? RV_LOG_INFO : RV_LOG_WARN,
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
    if (mon->amqp_configured) {
        char target[300];

        snprintf(target, sizeof(target), "%s:%s", mon->amqp_host,
                 mon->amqp_port);
        set_state(mon, &mon->amqp, "amqp", target,
                  tcp_reachable(mon->amqp_host, mon->amqp_port, 500)
                      ? RV_DEP_OK : RV_DEP_DOWN);
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
        if (mon->stopping) {
            break;
        }
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

    if (pthread_condattr_init(&attr) != 0) {
        return -1;
    }
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init(&mon->cv, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0) {
        return -1;
    }
    pthread_mutex_init(&mon->mu, NULL);
    return 0;
}

rv_monitor *rv_monitor_start(const rv_config *cfg, rv_locks *locks,
                             rv_log *log)
{
    rv_monitor *mon = calloc(1, sizeof(*mon));

    if (mon == NULL) {
        return NULL;
    }
    if (init_sync(mon) != 0) {
        free(mon);
        return NULL;
    }
    mon->locks = locks;
    mon->log = log;
    mon->interval_ms = cfg->redis_check_ms;
    /* Start from "unknown" so the first check logs the state it finds. */
    atomic_init(&mon->redis, -1);
    atomic_init(&mon->amqp, cfg->amqp_url != NULL ? -1 : RV_DEP_OFF);
    if (!rv_locks_configured(locks)) {
        atomic_store(&mon->redis, RV_DEP_OFF);
    }
    if (cfg->amqp_url != NULL) {
        mon->amqp_configured = 1;
        parse_amqp_target(cfg->amqp_url, mon->amqp_host,
                          sizeof(mon->amqp_host), mon->amqp_port,
                          sizeof(mon->amqp_port));
    }
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
    if (mon == NULL) {
        return;
    }
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

rv_dep_state rv_monitor_amqp(rv_monitor *mon)
{
    const int s = atomic_load(&mon->amqp);

    return s < 0 ? RV_DEP_DOWN : (rv_dep_state)s;
}
