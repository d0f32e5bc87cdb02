/*
 * test_fail_open.c: a fail-open acquire degrades only when Redis could not
 * be reached or did not answer in time (dlock/lock.h).
 *
 * An answer that refuses the command is an error, never a degraded grant:
 * a user whose ACL lacks EVALSHA (NOPERM), a script error (the lock's key
 * holds a hash: WRONGTYPE inside the script), a server out of memory
 * (maxmemory with noeviction: OOM) and a replica (READONLY) each come back
 * as an error with no lock.  A server busy with a long script (BUSY: up,
 * but unable to run anything) and a stopped server degrade.  One private
 * server, with an ACL user made for the test.
 */
#include "itkit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int setup(void **state)
{
    testkit_redis_opts so = {.name = "fail_open"};

    return itkit_fixture_setup(state, &so);
}

/* Runs a command on the private server behind the library's back; it
 * must not fail. */
#define ADMIN(fx, ...)                                                  \
    admin_done(testkit_redis_cmd((fx)->server->admin_url, __VA_ARGS__), \
               #__VA_ARGS__)

static void admin_done(redisReply *r, const char *command)
{
    TK_EXPECT(r != NULL && r->type != REDIS_REPLY_ERROR, "%s: %s", command,
              r != NULL && r->str != NULL ? r->str : "no reply");
    freeReplyObject(r);
}

/* A fail-open acquire that must fail with want, handing out nothing. */
static void expect_error_not_degraded(dlock_client *c, const char *key,
                                      dlock_err want, const char *what)
{
    dlock_acquire_opts o = itkit_acquire_opts(5000, 0);
    dlock_lock *l = NULL;

    o.policy = DLOCK_FAIL_OPEN;
    TK_EXPECT_ERR(dlock_acquire(c, key, &o, &l), want, c, what);
    TK_EXPECT(l == NULL, "%s: no lock, degraded or not, is handed out", what);
}

static void noperm_is_an_error(void **state)
{
    itkit_fixture *fx = *state;
    char url[800], key[TESTKIT_KEY_MAX];
    dlock_client *c;

    ADMIN(fx, "ACL SETUSER noeval on >noevalpw ~* &* +@all -evalsha -eval");
    snprintf(url, sizeof(url), "redis://noeval:noevalpw@127.0.0.1:%d/0",
             fx->server->port);
    c = itkit_client(url, NULL);
    expect_error_not_degraded(c, testkit_key(key, "fo_noperm"), DLOCK_AUTH,
                              "a user without EVALSHA (NOPERM)");
    TK_EXPECT(strstr(dlock_client_errmsg(c), "NOPERM") != NULL,
              "the message "
              "quotes the server: %s",
              dlock_client_errmsg(c));
    dlock_client_free(c);
}

static void script_error_is_an_error(void **state)
{
    itkit_fixture *fx = *state;
    dlock_client *c = itkit_client(fx->server->url, NULL);
    char key[TESTKIT_KEY_MAX];

    ADMIN(fx, "HSET %s field value", testkit_key(key, "fo_wrongtype"));
    expect_error_not_degraded(c, key, DLOCK_SERVER,
                              "a script error "
                              "(WRONGTYPE)");
    dlock_client_free(c);
}

static void out_of_memory_is_an_error(void **state)
{
    itkit_fixture *fx = *state;
    dlock_client *c = itkit_client(fx->server->url, NULL);
    char key[TESTKIT_KEY_MAX];

    ADMIN(fx, "CONFIG SET maxmemory-policy noeviction");
    ADMIN(fx, "CONFIG SET maxmemory 1");
    expect_error_not_degraded(c, testkit_key(key, "fo_oom"), DLOCK_SERVER,
                              "a server out of memory (OOM)");
    ADMIN(fx, "CONFIG SET maxmemory 0");
    dlock_client_free(c);
}

static void replica_is_an_error(void **state)
{
    itkit_fixture *fx = *state;
    dlock_client *c = itkit_client(fx->server->url, NULL);
    char key[TESTKIT_KEY_MAX];

    /* A replica of a port where nothing listens: it refuses writes. */
    ADMIN(fx, "REPLICAOF 127.0.0.1 %d", testkit_free_port());
    expect_error_not_degraded(c, testkit_key(key, "fo_replica"), DLOCK_SERVER,
                              "a replica (READONLY)");
    TK_EXPECT(strstr(dlock_client_errmsg(c), "READONLY") != NULL,
              "the "
              "message quotes the server: %s",
              dlock_client_errmsg(c));
    ADMIN(fx, "REPLICAOF NO ONE");
    dlock_client_free(c);
}

/* The busy script's thread, in static storage: a failed expectation
 * leaves busy_server_degrades by longjmp with the script still running,
 * and end_busy, its teardown, kills the script (or restarts the server)
 * and joins the thread. */
static pthread_t looping;
static int looping_running; /* started, not yet joined */
static atomic_int looping_done;

/* Runs a script that never ends, until SCRIPT KILL. */
static void *busy_script(void *arg)
{
    redisReply *r = testkit_redis_cmd(arg, "EVAL %s 0", "while true do end");

    if (r != NULL)
        freeReplyObject(r);
    atomic_store(&looping_done, 1);
    return NULL;
}

/* Kills the script (again: it may have started after the last kill) and
 * says whether its thread has returned. */
static int script_killed(void *arg)
{
    redisReply *r = testkit_redis_cmd(arg, "SCRIPT KILL");

    if (r != NULL)
        freeReplyObject(r);
    return atomic_load(&looping_done);
}

/* Teardown of busy_server_degrades, passed or failed: a script that
 * cannot be killed within the bound ends with a restart of the server.
 * A thread that still does not return is left running (its argument is
 * the fixture's, not the case's) and fails the teardown. */
static int end_busy(void **state)
{
    itkit_fixture *fx = *state;

    if (!looping_running)
        return 0;
    if (!testkit_wait_until(script_killed, fx->server->admin_url, 10000)
        && (testkit_redis_restart(fx->server) != 0
            || !testkit_wait_until(script_killed, fx->server->admin_url,
                                   10000))) {
        fprintf(stderr, "# the busy script's thread did not return\n");
        return -1;
    }
    pthread_join(looping, NULL);
    looping_running = 0;
    return 0;
}

static int server_busy(void *arg)
{
    redisReply *r = testkit_redis_cmd(arg, "PING");
    int busy = r != NULL && r->type == REDIS_REPLY_ERROR
               && strncmp(r->str, "BUSY", 4) == 0;

    if (r != NULL)
        freeReplyObject(r);
    return busy;
}

static void busy_server_degrades(void **state)
{
    itkit_fixture *fx = *state;
    dlock_client *c = itkit_client(fx->server->url, NULL);
    dlock_acquire_opts o = itkit_acquire_opts(5000, 0);
    char key[TESTKIT_KEY_MAX];
    dlock_lock *l = NULL;
    dlock_err err;

    ADMIN(fx, "CONFIG SET busy-reply-threshold 50");
    atomic_store(&looping_done, 0);
    TK_EXPECT(pthread_create(&looping, NULL, busy_script,
                             fx->server->admin_url)
                  == 0,
              "a thread runs a "
              "script that never ends");
    looping_running = 1;
    TK_EXPECT(testkit_wait_until(server_busy, fx->server->admin_url, 10000),
              "the server answers BUSY within 10 s");
    o.policy = DLOCK_FAIL_OPEN;
    err = dlock_acquire(c, testkit_key(key, "fo_busy"), &o, &l);
    ADMIN(fx, "SCRIPT KILL");
    pthread_join(looping, NULL);
    looping_running = 0;
    TK_EXPECT_ERR(err, DLOCK_OK, c,
                  "a fail-open acquire while the server "
                  "is BUSY");
    TK_EXPECT(l != NULL && dlock_lock_degraded(l), "the lock is degraded");
    TK_EXPECT(strstr(dlock_client_errmsg(c), "BUSY") != NULL,
              "the message "
              "says why: %s",
              dlock_client_errmsg(c));
    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, c, "release");
    dlock_client_free(c);
}

static void unreachable_server_degrades(void **state)
{
    itkit_fixture *fx = *state;
    dlock_client *c = itkit_client(fx->server->url, NULL);
    dlock_acquire_opts o = itkit_acquire_opts(5000, 0);
    char key[TESTKIT_KEY_MAX];
    dlock_lock *l = NULL;

    TK_EXPECT(testkit_redis_stop(fx->server) == 0, "the server stops");
    o.policy = DLOCK_FAIL_OPEN;
    TK_EXPECT_ERR(dlock_acquire(c, testkit_key(key, "fo_down"), &o, &l),
                  DLOCK_OK, c, "a fail-open acquire with Redis down");
    TK_EXPECT(l != NULL && dlock_lock_degraded(l), "the lock is degraded");
    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, c, "release");
    dlock_client_free(c);
    TK_EXPECT(testkit_redis_restart(fx->server) == 0, "the server is back");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(noperm_is_an_error),
        cmocka_unit_test(script_error_is_an_error),
        cmocka_unit_test(out_of_memory_is_an_error),
        cmocka_unit_test(replica_is_an_error),
        cmocka_unit_test_teardown(busy_server_degrades, end_busy),
        cmocka_unit_test(unreachable_server_degrades),
    };

    return cmocka_run_group_tests(tests, setup, itkit_fixture_teardown);
}
