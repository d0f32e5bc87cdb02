/*
 * test_proxy_faults.c: dlock-test-proxy does what the fault tests need,
 * seen from a raw socket in front of it and private redis-servers behind:
 *
 *   pause   a request gets no answer and no reset (a silent network), and
 *           the held request is answered after resume; a connection made
 *           while paused is accepted but not forwarded until then
 *   delay   each answer comes at least the delay late
 *   reset   the client sees its connection reset
 *   target  new connections reach the new server, old ones stay
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testkit.h"

static int dial(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Waits up to timeout_ms for bytes on fd: >0 bytes read into buf, 0 on
 * timeout, -1 on EOF or error (errno kept, ECONNRESET for a reset). */
static int answer(int fd, char *buf, size_t len, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ssize_t n;

    if (poll(&p, 1, timeout_ms) == 0)
        return 0;
    n = recv(fd, buf, len - 1, 0);
    if (n <= 0) {
        if (n == 0)
            errno = 0;
        return -1;
    }
    buf[n] = '\0';
    return (int)n;
}

static int ask(int fd, const char *req)
{
    return send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req)
               ? 0
               : -1;
}

typedef struct world {
    testkit_redis *a, *b;
    testkit_proxy *p;
} world;

static int setup(void **state)
{
    static world w;
    testkit_redis_opts oa = {.name = "proxy-a"}, ob = {.name = "proxy-b"};

    w.a = testkit_redis_start(&oa);
    w.b = testkit_redis_start(&ob);
    if (w.a == NULL || w.b == NULL)
        return -1;
    w.p = testkit_proxy_for("proxy", w.a->port);
    *state = &w;
    return w.p != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    world *w = *state;

    testkit_proxy_free(w->p);
    testkit_redis_free(w->a);
    testkit_redis_free(w->b);
    return 0;
}

static void pause_holds_bytes_without_reset(void **state)
{
    world *w = *state;
    char buf[256];
    int fd = dial(w->p->port), late;

    TK_EXPECT(fd >= 0, "connect through the proxy");
    TK_EXPECT(ask(fd, "PING\r\n") == 0
                  && answer(fd, buf, sizeof(buf), 5000) > 0
                  && strcmp(buf, "+PONG\r\n") == 0,
              "PING answered: %s", buf);
    TK_EXPECT(testkit_proxy_ctl(w->p, "pause") == 0, "pause");
    TK_EXPECT(ask(fd, "PING\r\n") == 0, "send while paused");
    TK_EXPECT(answer(fd, buf, sizeof(buf), 500) == 0,
              "no answer and no reset while paused");
    late = dial(w->p->port);
    TK_EXPECT(late >= 0, "a new connection is accepted while paused");
    TK_EXPECT(ask(late, "PING\r\n") == 0
                  && answer(late, buf, sizeof(buf), 300) == 0,
              "the new connection is not forwarded while paused");
    TK_EXPECT(testkit_proxy_ctl(w->p, "resume") == 0, "resume");
    TK_EXPECT(answer(fd, buf, sizeof(buf), 5000) > 0
                  && strcmp(buf, "+PONG\r\n") == 0,
              "the held PING is answered after resume");
    TK_EXPECT(answer(late, buf, sizeof(buf), 5000) > 0
                  && strcmp(buf, "+PONG\r\n") == 0,
              "the connection made while paused is forwarded after resume");
    close(late);
    close(fd);
}

static void delay_slows_each_answer(void **state)
{
    world *w = *state;
    char buf[256];
    int fd = dial(w->p->port);
    int64_t t0;

    TK_EXPECT(fd >= 0, "connect through the proxy");
    TK_EXPECT(testkit_proxy_ctl(w->p, "delay 300") == 0, "delay 300");
    t0 = testkit_now_ms();
    TK_EXPECT(ask(fd, "PING\r\n") == 0
                  && answer(fd, buf, sizeof(buf), 5000) > 0,
              "PING answered under delay");
    TK_EXPECT(testkit_now_ms() - t0 >= 300,
              "the answer took >= 300 ms, "
              "took %lld",
              (long long)(testkit_now_ms() - t0));
    TK_EXPECT(testkit_proxy_ctl(w->p, "delay 0") == 0, "delay 0");
    close(fd);
}

static void reset_resets_the_client(void **state)
{
    world *w = *state;
    char buf[256];
    int fd = dial(w->p->port);

    TK_EXPECT(fd >= 0, "connect through the proxy");
    TK_EXPECT(ask(fd, "PING\r\n") == 0
                  && answer(fd, buf, sizeof(buf), 5000) > 0,
              "PING answered");
    TK_EXPECT(testkit_proxy_ctl(w->p, "reset") == 0, "reset");
    TK_EXPECT(answer(fd, buf, sizeof(buf), 5000) == -1 && errno == ECONNRESET,
              "the client's connection is reset (errno %d)", errno);
    close(fd);
}

static void target_moves_new_connections(void **state)
{
    world *w = *state;
    char buf[256], cmd[64];
    int old = dial(w->p->port), fresh;

    TK_EXPECT(old >= 0, "connect through the proxy");
    TK_EXPECT(ask(old, "SET who a\r\n") == 0
                  && answer(old, buf, sizeof(buf), 5000) > 0,
              "SET on A");
    snprintf(cmd, sizeof(cmd), "target 127.0.0.1:%d", w->b->port);
    TK_EXPECT(testkit_proxy_ctl(w->p, cmd) == 0, "%s", cmd);
    fresh = dial(w->p->port);
    TK_EXPECT(fresh >= 0, "connect after the retarget");
    TK_EXPECT(ask(fresh, "EXISTS who\r\n") == 0
                  && answer(fresh, buf, sizeof(buf), 5000) > 0
                  && strcmp(buf, ":0\r\n") == 0,
              "the new connection reaches B, where who is unset: %s", buf);
    TK_EXPECT(ask(old, "EXISTS who\r\n") == 0
                  && answer(old, buf, sizeof(buf), 5000) > 0
                  && strcmp(buf, ":1\r\n") == 0,
              "the old connection still reaches A: %s", buf);
    close(fresh);
    close(old);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pause_holds_bytes_without_reset),
        cmocka_unit_test(delay_slows_each_answer),
        cmocka_unit_test(reset_resets_the_client),
        cmocka_unit_test(target_moves_new_connections),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
