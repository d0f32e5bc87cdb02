/*
 * test_replica_wait.c: a write followed by WAIT (src/lib/transport/replwait.c) on
 * the master of scripts/stack's sentinel group (two replicas).
 *
 *   - with both replicas up, a SET is acknowledged by 2 replicas at once;
 *   - with one replica SIGSTOPped, WAIT 2 gives 1 after its timeout, and
 *     WAIT 1 still gives 1 at once;
 *   - a server error in the write comes back as the write's reply, and
 *     the WAIT is still read (the connection stays in step).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "transport/replwait.h"
#include "scalekit.h"
#include "deploy/sentinel.h"
#include "testkit.h"

static dlock__deployment deployment;
static dlock__conn_cfg cfg;
static dlock__endpoint master;
static dlock__conn *conn;

static int setup(void **state)
{
    dlock__sentinel s;
    dlock__msg m;
    dlock_err err;

    (void)state;
    scalekit_deployment(scalekit_group_url("sentinel"), &deployment);
    dlock__msg_clear(&m);
    err = dlock__sentinel_init(&s, &deployment, &cfg, &m);
    if (err == DLOCK_OK)
        err = dlock__sentinel_discover(&s, dlock__deadline_after_ms(5000),
                                       &master, &m);
    dlock__sentinel_destroy(&s);
    if (err == DLOCK_OK)
        err = dlock__conn_open(&master, &cfg, dlock__deadline_after_ms(5000),
                               &conn, &m);
    if (err != DLOCK_OK)
        fprintf(stderr, "setup: %s\n", m.text);
    return err == DLOCK_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    dlock__conn_free(conn);
    dlock__endpoint_clear(&master);
    dlock__deployment_clear(&deployment);
    scalekit_group_done();
    return 0;
}

/* SET t:wait v, then WAIT replicas timeout_ms; returns the count. */
static int set_and_wait(int replicas, int timeout_ms, int64_t *took_ms)
{
    const char *argv[] = {"SET", "t:wait", "v"};
    redisReply *r;
    int acked = -1;
    int64_t start = testkit_now_ms();
    dlock__msg m;

    dlock__msg_clear(&m);
    TK_EXPECT(dlock__call_with_wait(conn, 3, argv, NULL, replicas, timeout_ms,
                                    dlock__deadline_after_ms(timeout_ms
                                                             + 5000),
                                    &r, &acked, &m)
                  == DLOCK_OK,
              "SET with WAIT: %s", m.text);
    *took_ms = testkit_now_ms() - start;
    TK_EXPECT(r->type == REDIS_REPLY_STATUS, "SET answered +OK");
    freeReplyObject(r);
    return acked;
}

static void both_replicas_acknowledge_at_once(void **state)
{
    int64_t took;

    (void)state;
    TK_EXPECT(set_and_wait(2, 5000, &took) == 2, "2 replicas acknowledge");
    TK_EXPECT(took < 2500, "at once, not after the timeout (%" PRId64 " ms)",
              took);
}

/* A replica of the master, from the master's ROLE: ["master", offset,
 * [[ip, port, offset], ...]]. */
static int replica_port(void)
{
    char url[64];
    redisReply *r = testkit_redis_cmd(scalekit_node_url(master.port, url,
                                                        sizeof(url)),
                                      "ROLE");
    int port = -1;

    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 3
        && r->element[2]->type == REDIS_REPLY_ARRAY
        && r->element[2]->elements > 0
        && r->element[2]->element[0]->elements >= 2)
        port = atoi(r->element[2]->element[0]->element[1]->str);
    freeReplyObject(r);
    return port;
}

static void a_stopped_replica_is_not_counted(void **state)
{
    int64_t took;
    int port = replica_port(), acked;

    (void)state;
    TK_EXPECT(port > 0, "a replica next to the master");
    TK_EXPECT(scalekit_signal_node("sentinel", port, SIGSTOP) > 0,
              "replica %d is stopped", port);
    acked = set_and_wait(2, 300, &took);
    printf("# replwait: WAIT 2 300 with one replica stopped: %d after %" PRId64
           " ms\n",
           acked, took);
    TK_EXPECT(acked == 1, "only the running replica acknowledges, got %d",
              acked);
    TK_EXPECT(took >= 290, "WAIT used its timeout (%" PRId64 " ms)", took);
    TK_EXPECT(set_and_wait(1, 5000, &took) == 1 && took < 2500,
              "WAIT 1 is met at once (%" PRId64 " ms)", took);
    TK_EXPECT(scalekit_signal_node("sentinel", port, SIGCONT) > 0,
              "replica %d continues", port);
}

static void a_refused_write_keeps_the_connection_in_step(void **state)
{
    const char *argv[] = {"INCR", "t:wait"};
    redisReply *r;
    int acked = -1;
    dlock__msg m;
    int64_t took;

    (void)state;
    TK_EXPECT(dlock__call_with_wait(conn, 2, argv, NULL, 0, 100,
                                    dlock__deadline_after_ms(5000), &r, &acked,
                                    &m)
                  == DLOCK_OK,
              "INCR of a string with WAIT: %s", m.text);
    TK_EXPECT(r->type == REDIS_REPLY_ERROR, "the error is the reply");
    freeReplyObject(r);
    TK_EXPECT(set_and_wait(2, 5000, &took) == 2, "the next call reads its "
                                                 "own replies");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(both_replicas_acknowledge_at_once),
        cmocka_unit_test(a_stopped_replica_is_not_counted),
        cmocka_unit_test(a_refused_write_keeps_the_connection_in_step),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
