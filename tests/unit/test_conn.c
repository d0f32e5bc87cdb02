/*
 * test_conn.c: a connection's reads under deadlines (transport/conn.h),
 * against the shared stack's Redis.
 *
 * A paused process sees its deadline pass between two instructions: the
 * reply it waited for may have arrived long before it runs again.  Such a
 * reply is the server's answer and must be read; only a reply that is
 * still missing at the deadline is a timeout (which breaks the
 * connection, since a late reply would be taken for the next command's).
 * The pause is made here by the test itself: it sends, waits until the
 * reply is in the socket (poll) and until the deadline has passed, and
 * only then reads, which is what a SIGSTOP between send and read does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "transport/conn.h"
#include "transport/url.h"
#include "testkit.h"

/* Bound on anything that should happen at once (a loaded machine). */
#define SOON_MS 5000

static dlock__endpoint ep;
static dlock__conn *conn;

static int setup(void **state)
{
    static const dlock__conn_cfg cfg = {0};
    dlock__msg m;

    (void)state;
    dlock__msg_clear(&m);
    if (dlock__url_parse(testkit_shared_redis(), &ep, &m) != DLOCK_OK
        || dlock__conn_open(&ep, &cfg, dlock__now_us() + SOON_MS * 1000, &conn,
                            &m)
               != DLOCK_OK)
        fail_msg("connect to the shared Redis: %s", m.text);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dlock__conn_free(conn);
    conn = NULL;
    dlock__endpoint_clear(&ep);
    return 0;
}

static void send_command(int argc, const char **argv)
{
    char buf[256];
    size_t len = dlock__resp_format(buf, sizeof(buf), argc, argv, NULL);
    dlock__msg m;

    assert_true(len <= sizeof(buf));
    dlock__msg_clear(&m);
    if (dlock__conn_send(conn, buf, len, dlock__now_us() + SOON_MS * 1000, &m)
        != DLOCK_OK)
        fail_msg("send: %s", m.text);
}

static void sleep_until_us(int64_t when_us)
{
    while (dlock__now_us() < when_us) {
        struct timespec ts = {0, 1000000};

        nanosleep(&ts, NULL);
    }
}

static void a_reply_that_came_while_paused_past_the_deadline_is_read(
    void **state)
{
    const char *ping[] = {"PING", "paused"};
    struct pollfd pfd = {.fd = dlock__conn_fd(conn), .events = POLLIN};
    int64_t deadline_us;
    redisReply *r = NULL;
    dlock__msg m;
    dlock_err err;

    (void)state;
    send_command(2, ping);
    deadline_us = dlock__now_us() + 20 * 1000;
    /* The "pause": the reply arrives, the deadline passes, nobody reads. */
    assert_int_equal(poll(&pfd, 1, SOON_MS), 1);
    sleep_until_us(deadline_us + 30 * 1000);
    dlock__msg_clear(&m);
    err = dlock__conn_recv(conn, deadline_us, &r, &m);
    if (err != DLOCK_OK)
        fail_msg("the reply waiting in the socket was not read: %s (%s)",
                 dlock_errname(err), m.text);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "paused");
    freeReplyObject(r);
    assert_false(dlock__conn_broken(conn));
}

static void a_reply_still_missing_at_the_deadline_is_a_timeout(void **state)
{
    /* BLPOP on a key nobody pushes to answers only after its 1 s. */
    const char *blpop[] = {"BLPOP", "dlock:test:conn:never", "1"};
    redisReply *r = NULL;
    dlock__msg m;
    dlock_err err;

    (void)state;
    send_command(3, blpop);
    dlock__msg_clear(&m);
    err = dlock__conn_recv(conn, dlock__now_us() + 50 * 1000, &r, &m);
    assert_int_equal(err, DLOCK_TIMEOUT);
    assert_null(r);
    assert_true(dlock__conn_broken(conn));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_reply_that_came_while_paused_past_the_deadline_is_read, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_reply_still_missing_at_the_deadline_is_a_timeout, setup,
            teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
