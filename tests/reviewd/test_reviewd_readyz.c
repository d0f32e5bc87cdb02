/*
 * test_reviewd_readyz.c: /readyz's "amqp" is the outbox relay's real
 * connection state (docs/api.md: ok, down or off; degraded when a configured
 * AMQP is down).
 *
 * Each case starts a real reviewd on this test's own database with a
 * different AMQP_URL and polls /readyz until it shows the expected state
 * (bounded by 30 s; the relay connects on its own thread):
 *   - AMQP_URL empty: "off", and the status is not degraded by it;
 *   - the stack's RabbitMQ (an exchange of this run's own, so nothing
 *     reaches other consumers): "ok";
 *   - a loopback port nothing listens on: "down", status "degraded";
 *   - the stack's RabbitMQ with a wrong password: "down".  The broker
 *     accepts the TCP connection and refuses the login, which the TCP
 *     probe rv_monitor.c used to have would have called "ok".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rvt_kit.h"
#include "testkit.h"

#define WAIT_MS 30000

static rvt_db db;
static const char *redis_url;

static int setup(void **state)
{
    (void)state;
    redis_url = testkit_shared_redis();
    return redis_url != NULL && rvt_db_create(&db, "readyz") == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    rvt_db_drop(&db);
    return 0;
}

typedef struct ready_wait {
    int port;
    const char *amqp;
    char seen[160]; /* the last "amqp/status" */
} ready_wait;

static int amqp_shows(void *arg)
{
    ready_wait *w = arg;
    const char *amqp, *status;
    rvt_resp r;
    int ok = 0;

    if (rvt_call(w->port, "GET", "/readyz", NULL, NULL, NULL, &r) == 0) {
        amqp = rvt_field(&r, "amqp");
        status = rvt_field(&r, "status");
        snprintf(w->seen, sizeof(w->seen), "%s/%s", amqp != NULL ? amqp : "?",
                 status != NULL ? status : "?");
        ok = amqp != NULL && strcmp(amqp, w->amqp) == 0;
    }
    rvt_resp_free(&r);
    return ok;
}

/*
 * Starts reviewd with amqp_env ("AMQP_URL=..."), waits until /readyz says
 * amqp is want_amqp and checks the status, then stops it (exit 0).
 */
static void expect_amqp(const char *amqp_env, const char *want_amqp,
                        const char *want_status)
{
    char exchange[96];
    const char *env[] = {amqp_env, exchange, NULL};
    rvt_server srv;
    ready_wait w;

    snprintf(exchange, sizeof(exchange),
             "REVIEWD_AMQP_EXCHANGE=rvt.readyz.%ld", (long)getpid());
    assert_int_equal(rvt_server_start(&srv, &db, redis_url, env, "readyz"), 0);
    memset(&w, 0, sizeof(w));
    w.port = srv.port;
    w.amqp = want_amqp;
    TK_EXPECT(testkit_wait_until(amqp_shows, &w, WAIT_MS),
              "with %s /readyz says amqp %s within 30 s, last %s", amqp_env,
              want_amqp, w.seen);
    amqp_shows(&w);
    TK_EXPECT(strstr(w.seen, want_status) != NULL,
              "with %s the status is %s, got %s", amqp_env, want_status,
              w.seen);
    TK_EXPECT(rvt_server_stop(&srv), "reviewd exits 0");
    rvt_server_remove_dir(&srv);
}

/* The stack's AMQP URL with its password replaced, for a refused login. */
static void wrong_password_url(char *buf, size_t len)
{
    const char *url = testkit_amqp_url();
    const char *scheme = strstr(url, "://");
    const char *at = strchr(url, '@');
    const char *colon = scheme != NULL ? strchr(scheme + 3, ':') : NULL;

    assert_non_null(at);
    assert_true(colon != NULL && colon < at);
    snprintf(buf, len, "AMQP_URL=%.*s:not-the-password%s", (int)(colon - url),
             url, at);
}

static void no_amqp_url_is_off(void **state)
{
    (void)state;
    expect_amqp("AMQP_URL=", "off", "/ok");
}

static void a_reachable_broker_is_ok(void **state)
{
    char env[400];

    (void)state;
    snprintf(env, sizeof(env), "AMQP_URL=%s", testkit_amqp_url());
    expect_amqp(env, "ok", "/ok");
}

static void a_closed_port_is_down_and_degraded(void **state)
{
    char env[128];

    (void)state;
    snprintf(env, sizeof(env), "AMQP_URL=amqp://u:p@127.0.0.1:%d/",
             testkit_free_port());
    expect_amqp(env, "down", "/degraded");
}

static void a_refused_login_is_down_though_tcp_connects(void **state)
{
    char env[400];

    (void)state;
    wrong_password_url(env, sizeof(env));
    expect_amqp(env, "down", "/degraded");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_amqp_url_is_off),
        cmocka_unit_test(a_reachable_broker_is_ok),
        cmocka_unit_test(a_closed_port_is_down_and_degraded),
        cmocka_unit_test(a_refused_login_is_down_though_tcp_connects),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
