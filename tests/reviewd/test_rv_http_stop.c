/*
 * test_rv_http_stop.c: reviewd's HTTP server stops cleanly while its
 * event loops are busy, hundreds of times in a row.
 *
 * It guards stopping while connections are busy: rv_http_stop stops
 * the listener's thread and closes its socket (rv_listener.h), waits
 * for the requests in flight, then stops the event loops with
 * connections still open, being read or written.  A race there shows
 * only when a loop is running at the moment of the stop, perhaps one
 * stop in hundreds, and a whole reviewd process takes too long to start
 * for that many, so this runs the server in-process (rv_http_start with
 * a configuration and a log, no database: /healthz is answered from
 * memory) and cycles start, load, stop for about 4 s (60 s with
 * DLOCK_TEST_LONG=1) while client threads ask /healthz on fresh
 * connections as fast as they can.  Every cycle must see its probes
 * answered, and once they are all done no request is in flight and no
 * connection open; a crash or a hang of this program (or, in the ASan
 * build, a sanitizer's report) is the failure.
 * test_reviewd_shutdown.c does the same to the real binary with requests
 * parked in its workers.
 *
 * The clients, the server and what it runs on live in static storage
 * (the_case), and end_case, the teardown, stops and joins them whether
 * the case passed or failed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/rv_app.h"
#include "core/rv_config.h"
#include "http/rv_http.h"
#include "svc_log.h"
#include "testkit_threads.h"

#define CLIENTS 6
#define SHORT_MS 4000
#define LONG_MS 60000
/* Probes answered in a cycle before its stop: the loops are busy. */
#define PROBES_PER_CYCLE 4

static atomic_int port;    /* the running server's, 0 between cycles */
static atomic_int answers; /* /healthz answered 200, all cycles */
static atomic_int done;

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One GET /healthz on a fresh connection; 1 if answered 200. */
static int probe(int p)
{
    static const char req[] =
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    struct sockaddr_in a;
    struct timeval tv = {0, 200 * 1000};
    char buf[512];
    ssize_t n;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok = 0;

    if (fd < 0)
        return 0;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)p);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0
        && send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) > 0) {
        n = recv(fd, buf, sizeof(buf) - 1, 0);
        if (n > 12) {
            buf[n] = '\0';
            ok = strncmp(buf, "HTTP/1.1 200", 12) == 0;
        }
    }
    close(fd);
    return ok;
}

static void *client_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&done)) {
        const int p = atomic_load(&port);

        if (p == 0) {
            sched_yield();
            continue;
        }
        if (probe(p))
            atomic_fetch_add(&answers, 1);
    }
    return NULL;
}

static void set_env(void)
{
    setenv("DATABASE_URL", "postgresql://u:p@127.0.0.1:1/none", 1);
    setenv("JWT_SECRET", "rvt-secret-0123456789abcdefghijk", 1);
    setenv("LISTEN_ADDR", "127.0.0.1:0", 1);
    setenv("REVIEWD_THREADS", "2", 1);
    unsetenv("REDIS_URL");
    unsetenv("AMQP_URL");
}

/* The case's server, configuration and client threads, in static
 * storage: a failed assertion leaves the case by longjmp while the
 * clients still probe and a server may run, and end_case stops them. */
typedef struct stop_case {
    testkit_threads clients;
    rv_config cfg;
    int cfg_loaded;
    rv_app app;
    rv_http *http; /* the running cycle's server, or NULL */
} stop_case;

static stop_case the_case;

/* Teardown, passed or failed: ends the clients, joins them, stops a
 * server left running and frees the rest. */
static int end_case(void **state)
{
    stop_case *sc = &the_case;

    (void)state;
    atomic_store(&done, 1);
    testkit_threads_join_all(&sc->clients);
    if (sc->http != NULL)
        rv_http_stop(sc->http, 1);
    rv_metrics_free(sc->app.metrics);
    svc_log_free(sc->app.log);
    if (sc->cfg_loaded)
        rv_config_clear(&sc->cfg);
    memset(sc, 0, sizeof(*sc));
    return 0;
}

static void http_stops_cleanly_while_its_loops_are_busy(void **state)
{
    const char *long_run = getenv("DLOCK_TEST_LONG");
    const int64_t budget_ms = long_run != NULL && strcmp(long_run, "1") == 0
                                  ? LONG_MS
                                  : SHORT_MS;
    const int64_t start = now_ms();
    stop_case *const sc = &the_case;
    rv_app *const app = &sc->app;
    char err[512];
    int i, cycles = 0;

    (void)state;
    set_env();
    assert_int_equal(rv_config_load(&sc->cfg, RV_NEED_SERVE, err, sizeof(err)),
                     0);
    sc->cfg_loaded = 1;
    app->cfg = &sc->cfg;
    app->log = svc_log_new(NULL, SVC_LOG_WARN, err, sizeof(err));
    app->metrics = rv_metrics_new();
    assert_non_null(app->log);
    assert_non_null(app->metrics);
    for (i = 0; i < CLIENTS; i++)
        assert_int_equal(testkit_threads_start(&sc->clients, client_main,
                                               NULL),
                         0);
    do {
        uint16_t p = 0;
        const int before = atomic_load(&answers);
        const int64_t until = now_ms() + 5000;

        sc->http = rv_http_start(app, &p, err, sizeof(err));
        if (sc->http == NULL)
            fail_msg("rv_http_start: %s", err);
        atomic_store(&port, p);
        while (atomic_load(&answers) - before < PROBES_PER_CYCLE
               && now_ms() < until)
            usleep(200);
        if (atomic_load(&answers) - before < PROBES_PER_CYCLE)
            fail_msg("cycle %d: %d probes answered in 5 s, want %d", cycles,
                     atomic_load(&answers) - before, PROBES_PER_CYCLE);
        rv_http_stop(sc->http, 1);
        sc->http = NULL;
        atomic_store(&port, 0);
        cycles++;
    } while (now_ms() - start < budget_ms);
    atomic_store(&done, 1);
    testkit_threads_join_all(&sc->clients);
    fprintf(stderr, "rv_http stopped %d times under load, %d probes\n", cycles,
            atomic_load(&answers));
    assert_int_equal(atomic_load(&app->inflight), 0);
    assert_int_equal(atomic_load(&app->connections), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(http_stops_cleanly_while_its_loops_are_busy,
                                  end_case),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
