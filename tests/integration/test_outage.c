/*
 * test_outage.c: what callers get while Redis is down, and after.
 *
 * Degradation is a policy (docs/design.md): a fail-closed acquire answers
 * DLOCK_UNAVAILABLE, and fast (within the connect timeout); a fail-open
 * acquire answers DLOCK_OK with a degraded lock (fence 0) for callers with
 * a stronger guard below.  After a few consecutive failures the circuit
 * breaker opens and calls fail without touching the network at all (1,000
 * of them, and the server, back up, sees no command and no connection of
 * theirs: counted there, not timed); when the server is back, the background probe
 * closes the breaker and locks work again.  A hung server (SIGSTOP) is
 * bounded by the I/O timeout, and a client may start while Redis is down.
 *
 * All cases share one private server that the tests stop and start; each
 * test first puts the server in the state it needs, so the order of the
 * tests is the story but not a dependency.
 */
#include "itkit.h"

#include <stdlib.h>
#include <string.h>

#define CONNECT_TIMEOUT_MS 300
#define IO_TIMEOUT_MS 500
#define MARGIN_MS 250
#define THRESHOLD 3

typedef struct fixture {
    testkit_redis *server;
    dlock_client *client;
} fixture;

static dlock_client_opts outage_opts(void)
{
    dlock_client_opts o = itkit_client_opts();

    o.connect_timeout_ms = CONNECT_TIMEOUT_MS;
    o.io_timeout_ms = IO_TIMEOUT_MS;
    o.breaker_threshold = THRESHOLD;
    o.breaker_probe_ms = 100;
    return o;
}

static int setup(void **state)
{
    testkit_redis_opts so = {.name = "outage"};
    fixture *fx = calloc(1, sizeof(*fx));
    dlock_client_opts co = outage_opts();
    char errbuf[DLOCK_ERRMSG_MAX] = "";

    if (fx == NULL)
        return -1;
    *state = fx;
    fx->server = testkit_redis_start(&so);
    if (fx->server == NULL)
        return -1;
    if (dlock_client_new(fx->server->url, &co, &fx->client, errbuf,
                         sizeof(errbuf))
        != DLOCK_OK) {
        fprintf(stderr, "client for %s: %s\n", fx->server->url, errbuf);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;

    if (fx != NULL) {
        dlock_client_free(fx->client);
        testkit_redis_free(fx->server);
        free(fx);
    }
    return 0;
}

static void server_down(fixture *fx)
{
    TK_EXPECT(testkit_redis_stop(fx->server) == 0, "the private server "
                                                   "stops");
}

static void server_up(fixture *fx)
{
    if (fx->server->pid == 0)
        TK_EXPECT(testkit_redis_restart(fx->server) == 0,
                  "the private "
                  "server starts again on port %d",
                  fx->server->port);
}

static int breaker_closed(void *arg)
{
    return dlock_client_breaker(arg) == DLOCK_BREAKER_CLOSED;
}

static int breaker_open(void *arg)
{
    return dlock_client_breaker(arg) == DLOCK_BREAKER_OPEN;
}

static int validity_ran_out(void *lock)
{
    return dlock_lock_lost(lock);
}

/* Waits until the client's probe has closed its breaker. */
static void wait_for_recovery(dlock_client *c)
{
    TK_EXPECT(testkit_wait_until(breaker_closed, c, 3000),
              "the breaker "
              "closes within 3 s of the server's return (probe every "
              "100 ms)");
}

static void fail_closed_acquire_is_unavailable_within_connect_timeout(
    void **state)
{
    fixture *fx = *state;
    dlock_acquire_opts o = itkit_acquire_opts(5000, 0);
    char key[TESTKIT_KEY_MAX], port[16];
    dlock_lock *l = NULL;
    int64_t started, took;
    dlock_err err;

    server_up(fx);
    wait_for_recovery(fx->client);
    server_down(fx);
    started = testkit_now_ms();
    err = dlock_acquire(fx->client, testkit_key(key, "outage_closed"), &o, &l);
    took = testkit_now_ms() - started;
    TK_EXPECT_ERR(err, DLOCK_UNAVAILABLE, fx->client,
                  "a fail-closed "
                  "acquire while Redis is down");
    TK_EXPECT(l == NULL, "no lock is handed out");
    TK_EXPECT(took < CONNECT_TIMEOUT_MS + MARGIN_MS,
              "the answer comes "
              "within the %d ms connect timeout (+%d ms), took %lld ms",
              CONNECT_TIMEOUT_MS, MARGIN_MS, (long long)took);
    snprintf(port, sizeof(port), "%d", fx->server->port);
    TK_EXPECT(strstr(dlock_client_errmsg(fx->client), port) != NULL,
              "the message names the server (port %s): %s", port,
              dlock_client_errmsg(fx->client));
}

static void client_for_a_closed_port_is_unavailable_quickly(void **state)
{
    dlock_client_opts co = outage_opts();
    char url[64], errbuf[DLOCK_ERRMSG_MAX] = "";
    dlock_client *c = NULL;
    int64_t started, took;
    dlock_err err;

    (void)state;
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", testkit_free_port());
    started = testkit_now_ms();
    err = dlock_client_new(url, &co, &c, errbuf, sizeof(errbuf));
    took = testkit_now_ms() - started;
    TK_EXPECT(err == DLOCK_UNAVAILABLE,
              "a client for a closed port (%s) is "
              "DLOCK_UNAVAILABLE, got %s: %s",
              url, dlock_errname(err), errbuf);
    TK_EXPECT(c == NULL, "no client is handed out");
    TK_EXPECT(errbuf[0] != '\0' && strstr(errbuf, url + 8) != NULL,
              "errbuf names the endpoint %s: %s", url + 8, errbuf);
    TK_EXPECT(took < CONNECT_TIMEOUT_MS + MARGIN_MS,
              "it fails within the "
              "connect timeout, took %lld ms",
              (long long)took);
}

static void fail_open_acquire_gives_a_degraded_lock(void **state)
{
    fixture *fx = *state;
    dlock_acquire_opts o = itkit_acquire_opts(5000, 0);
    char key[TESTKIT_KEY_MAX];
    dlock_lock *l = NULL;
    dlock_err err;

    server_down(fx);
    o.policy = DLOCK_FAIL_OPEN;
    err = dlock_acquire(fx->client, testkit_key(key, "outage_open"), &o, &l);
    TK_EXPECT_ERR(err, DLOCK_OK, fx->client,
                  "a fail-open acquire while "
                  "Redis is down");
    TK_EXPECT(l != NULL && dlock_lock_degraded(l) == 1, "the lock is "
                                                        "degraded");
    TK_EXPECT(dlock_lock_fence(l) == 0,
              "a degraded lock has fence 0, got "
              "%llu",
              (unsigned long long)dlock_lock_fence(l));
    TK_EXPECT(dlock_lock_valid_ms(l) == INT64_MAX, "a degraded lock does not "
                                                   "expire on its own");
    TK_EXPECT(dlock_client_errmsg(fx->client)[0] != '\0',
              "the message says "
              "why Redis could not be used");
    TK_EXPECT_ERR(dlock_extend(l, 1000), DLOCK_STATE, fx->client,
                  "extending a degraded lock");
    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, fx->client,
                  "releasing a "
                  "degraded lock");
}

/* What a server has seen: every command a lock call could send (its
 * scripts, and what a script-cache miss or a connection's set-up sends),
 * and every connection it accepted. */
typedef struct server_counts {
    long long commands;
    long long connections;
} server_counts;

/* The number after field in info, or 0 when info has no such field. */
static long long info_number(const char *info, const char *field)
{
    const char *at = strstr(info, field);

    return at != NULL ? strtoll(at + strlen(field), NULL, 10) : 0;
}

/* Reads both counts with one INFO (one connection, which the connection
 * count includes).  Returns 0, or -1 when the server does not answer. */
static int server_counts_read(const testkit_redis *server, server_counts *out)
{
    static const char *const kinds[] = {
        "cmdstat_evalsha:calls=",     "cmdstat_eval:calls=",
        "cmdstat_script|load:calls=", "cmdstat_hello:calls=",
        "cmdstat_ping:calls=",        "cmdstat_time:calls="};
    redisReply *r = testkit_redis_cmd(server->admin_url, "INFO all");

    if (r == NULL || r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        return -1;
    }
    out->commands = 0;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        out->commands += info_number(r->str, kinds[i]);
    out->connections = info_number(r->str, "total_connections_received:");
    freeReplyObject(r);
    return 0;
}

/*
 * With the breaker open, calls fail without touching the network.  Counted
 * at the server, not timed: the breaker is opened while the server is
 * down, with a probe interval far longer than the test, then the server
 * comes back and 1,000 acquires are made.  Had any of them gone out, the
 * server would have seen a connection or a command; it must see none but
 * the test's own INFO connections.  The server is this test's alone (the
 * fixture's client would reconnect to the shared one).
 */
static void open_breaker_keeps_a_thousand_calls_off_the_server(void **state)
{
    testkit_redis_opts so = {.name = "outage-breaker"};
    fixture own = {testkit_redis_start(&so), NULL}, *fx = &own;
    dlock_client_opts co = outage_opts();
    dlock_acquire_opts o = itkit_acquire_opts(5000, 0);
    dlock_client_stats before, after;
    char key[TESTKIT_KEY_MAX], errbuf[DLOCK_ERRMSG_MAX] = "";
    server_counts at_start, at_end;
    dlock_client *c = NULL;
    int unavailable = 0;

    (void)state;
    TK_EXPECT(fx->server != NULL, "a private server starts");
    server_down(fx);
    co.breaker_probe_ms = 600000;
    co.start_offline = 1;
    TK_EXPECT(dlock_client_new(fx->server->url, &co, &c, errbuf,
                               sizeof(errbuf))
                  == DLOCK_OK,
              "a client made while Redis is down: %s", errbuf);
    testkit_key(key, "outage_breaker");
    for (int i = 0; i < THRESHOLD + 1; i++) {
        dlock_lock *l = NULL;

        dlock_acquire(c, key, &o, &l);
        dlock_lock_free(l);
    }
    TK_EXPECT(dlock_client_breaker(c) == DLOCK_BREAKER_OPEN,
              "%d failed calls leave the breaker open", THRESHOLD + 1);
    server_up(fx);
    TK_EXPECT(server_counts_read(fx->server, &at_start) == 0,
              "the server answers INFO");
    dlock_client_stats_get(c, &before);
    for (int i = 0; i < 1000; i++) {
        dlock_lock *l = NULL;

        if (dlock_acquire(c, key, &o, &l) == DLOCK_UNAVAILABLE)
            unavailable++;
        dlock_lock_free(l);
    }
    dlock_client_stats_get(c, &after);
    TK_EXPECT(server_counts_read(fx->server, &at_end) == 0,
              "the server answers INFO");
    print_message("1000 acquires with the breaker open: %lld commands and "
                  "%lld connections reached the server (of them 1, the "
                  "INFO that counted them, is the test's)\n",
                  at_end.commands - at_start.commands,
                  at_end.connections - at_start.connections);
    TK_EXPECT(at_end.commands == at_start.commands,
              "no command of the 1000 calls reached the server, %lld did",
              at_end.commands - at_start.commands);
    TK_EXPECT(at_end.connections == at_start.connections + 1,
              "no connection but the test's INFO reached the server, %lld "
              "did",
              at_end.connections - at_start.connections);
    TK_EXPECT(unavailable == 1000,
              "all 1000 calls are DLOCK_UNAVAILABLE, %d were", unavailable);
    TK_EXPECT(after.fast_fails - before.fast_fails >= 1000,
              "the stats count 1000 fast fails, got %llu",
              (unsigned long long)(after.fast_fails - before.fast_fails));
    TK_EXPECT(strstr(dlock_client_errmsg(c), "breaker") != NULL,
              "the message says the breaker is open: %s",
              dlock_client_errmsg(c));
    dlock_client_free(c);
    testkit_redis_free(fx->server);
}

static void breaker_closes_and_locks_work_when_redis_returns(void **state)
{
    fixture *fx = *state;
    char key[TESTKIT_KEY_MAX];
    dlock_lock *l;

    server_down(fx);
    TK_EXPECT(testkit_wait_until(breaker_open, fx->client, 1000)
                  || dlock_client_ping(fx->client, NULL) != DLOCK_OK,
              "the client sees the server down");
    server_up(fx);
    wait_for_recovery(fx->client);
    l = itkit_acquire(fx->client, testkit_key(key, "outage_back"), NULL);
    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, fx->client,
                  "release after "
                  "recovery");
}

/* A lock whose validity ran out while Redis was down is released as
 * DLOCK_LOST, not DLOCK_UNAVAILABLE: that its work was not protected to
 * the end is what the caller must hear; the delete Redis could not take
 * is the background's (and the key has expired by then anyway). */
static void release_after_validity_ran_out_in_an_outage_says_lost(void **state)
{
    fixture *fx = *state;
    dlock_acquire_opts o = itkit_acquire_opts(300, 0);
    char key[TESTKIT_KEY_MAX];
    dlock_lock *l;

    server_up(fx);
    wait_for_recovery(fx->client);
    l = itkit_acquire(fx->client, testkit_key(key, "outage_expired"), &o);
    server_down(fx);
    TK_EXPECT(testkit_wait_until(validity_ran_out, l, 5000),
              "its validity runs out while the server is down");
    TK_EXPECT_ERR(dlock_release(l), DLOCK_LOST, fx->client,
                  "the release says lost, not unavailable");
    TK_EXPECT(strstr(dlock_client_errmsg(fx->client), "validity ran out")
                  != NULL,
              "and why: %s", dlock_client_errmsg(fx->client));
    server_up(fx);
}

static void hung_server_times_out_within_the_io_timeout(void **state)
{
    fixture *fx = *state;
    dlock_acquire_opts o = itkit_acquire_opts(5000, 0);
    char key[TESTKIT_KEY_MAX];
    dlock_lock *l = NULL;
    int64_t started, took;
    dlock_err err;

    server_up(fx);
    wait_for_recovery(fx->client);
    TK_EXPECT(dlock_client_ping(fx->client, NULL) == DLOCK_OK,
              "the server "
              "answers before the pause");
    TK_EXPECT(testkit_redis_pause(fx->server) == 0, "SIGSTOP the server");
    started = testkit_now_ms();
    err = dlock_acquire(fx->client, testkit_key(key, "outage_hung"), &o, &l);
    took = testkit_now_ms() - started;
    TK_EXPECT(testkit_redis_resume(fx->server) == 0, "SIGCONT the server");
    TK_EXPECT(err == DLOCK_TIMEOUT || err == DLOCK_UNAVAILABLE,
              "an acquire "
              "on a hung server fails with TIMEOUT (or UNAVAILABLE), got %s: "
              "%s",
              dlock_errname(err), dlock_client_errmsg(fx->client));
    TK_EXPECT(took < IO_TIMEOUT_MS + CONNECT_TIMEOUT_MS + MARGIN_MS,
              "it "
              "fails within the %d ms I/O timeout (+ a connect, + %d ms), "
              "took %lld ms",
              IO_TIMEOUT_MS, MARGIN_MS, (long long)took);
    wait_for_recovery(fx->client);
    /* The timed-out acquire reached the server once it resumed and may
     * hold its key until the TTL: a caller cannot know, so neither do we.
     * A fresh key shows the client works again. */
    l = itkit_acquire(fx->client, testkit_key(key, "outage_resumed"), NULL);
    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, fx->client,
                  "release after "
                  "the server resumed");
}

static void client_started_offline_connects_when_redis_comes_up(void **state)
{
    fixture *fx = *state;
    dlock_client_opts co = outage_opts();
    dlock_acquire_opts open = itkit_acquire_opts(5000, 0);
    char key[TESTKIT_KEY_MAX], errbuf[DLOCK_ERRMSG_MAX] = "";
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    dlock_err err;

    server_down(fx);
    co.start_offline = 1;
    err = dlock_client_new(fx->server->url, &co, &c, errbuf, sizeof(errbuf));
    TK_EXPECT(err == DLOCK_OK && c != NULL,
              "with start_offline a client is "
              "made while Redis is down, got %s: %s",
              dlock_errname(err), errbuf);
    TK_EXPECT(dlock_client_breaker(c) == DLOCK_BREAKER_OPEN,
              "it starts with "
              "its breaker open");
    open.policy = DLOCK_FAIL_OPEN;
    TK_EXPECT_ERR(dlock_acquire(c, testkit_key(key, "outage_offline"), &open,
                                &l),
                  DLOCK_OK, c,
                  "a fail-open acquire on "
                  "the offline client");
    TK_EXPECT(dlock_lock_degraded(l), "that lock is degraded");
    dlock_release(l);
    server_up(fx);
    wait_for_recovery(c);
    l = itkit_acquire(c, key, NULL);
    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, c, "release once connected");
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            fail_closed_acquire_is_unavailable_within_connect_timeout),
        cmocka_unit_test(client_for_a_closed_port_is_unavailable_quickly),
        cmocka_unit_test(fail_open_acquire_gives_a_degraded_lock),
        cmocka_unit_test(open_breaker_keeps_a_thousand_calls_off_the_server),
        cmocka_unit_test(breaker_closes_and_locks_work_when_redis_returns),
        cmocka_unit_test(
            release_after_validity_ran_out_in_an_outage_says_lost),
        cmocka_unit_test(hung_server_times_out_within_the_io_timeout),
        cmocka_unit_test(client_started_offline_connects_when_redis_comes_up),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
