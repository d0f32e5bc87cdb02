/*
 * test_reviewd_conn.c: what reviewd's own HTTP/1.1 server does with a
 * connection (http/rv_http.c), over raw sockets:
 *   - pipelined requests are answered in order, a HEAD without a body,
 *     and the last, with Connection: close, ends the connection;
 *   - HTTP/1.0 is kept alive only when it asks (Connection: keep-alive);
 *   - Expect: 100-continue gets "100 Continue" when the body will be
 *     read, and none, with the answer at once and the connection closed,
 *     when the headers decide it;
 *   - a request that cannot be parsed, followed by 1 MiB more, gets a JSON
 *     400 with an X-Request-Id that the client reads after writing it all
 *     (lingering close: no reset destroys the answer); libmicrohttpd
 *     answered such requests in HTML.
 * The parser's own rules are test_rv_hparse.c's; every wait is bounded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rvt_kit.h"
#include "testkit.h"

static rvt_db db;
static rvt_server srv;
static char *author;
static const rvt_person people[] = {{&author, "ann", "author"},
                                    {NULL, NULL, NULL}};

static int setup(void **state)
{
    const char *const env[] = {"REVIEWD_LOG_FILE=@log", NULL};

    (void)state;
    if (rvt_fixture_start(&db, &srv, "conn", NULL, env, 1) != 0)
        return -1;
    return rvt_people_mint(people);
}

static int teardown(void **state)
{
    (void)state;
    return rvt_fixture_end(&db, &srv, people);
}

static int dial(void)
{
    struct sockaddr_in a;
    const int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)srv.port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads until EOF, a reset, or timeout_ms; returns the bytes (in a
 * static buffer, NUL-terminated) and sets *how: 0 timeout, 1 EOF, 2
 * reset or error. */
static const char *read_until_end(int fd, int timeout_ms, size_t *len,
                                  int *how)
{
    static char buf[64 * 1024];
    const int64_t until = testkit_now_ms() + timeout_ms;
    size_t got = 0;

    *how = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        const int64_t left = until - testkit_now_ms();
        ssize_t r;

        if (left <= 0 || poll(&p, 1, (int)left) != 1)
            break;
        r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
        if (r == 0) {
            *how = 1;
            break;
        }
        if (r < 0) {
            *how = 2;
            break;
        }
        got += (size_t)r;
        if (got + 1 >= sizeof(buf))
            break;
    }
    buf[got] = '\0';
    *len = got;
    return buf;
}

/* The number of times s occurs in text. */
static int count(const char *text, const char *s)
{
    int n = 0;

    for (const char *p = strstr(text, s); p != NULL; p = strstr(p + 1, s))
        n++;
    return n;
}

static void pipelined_requests_are_answered_in_order(void **state)
{
    static const char reqs[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n"
                               "X-Request-Id: one\r\n\r\n"
                               "HEAD /healthz HTTP/1.1\r\nHost: x\r\n"
                               "X-Request-Id: two\r\n\r\n"
                               "GET /nope HTTP/1.1\r\nHost: x\r\n"
                               "X-Request-Id: three\r\n"
                               "Connection: close\r\n\r\n";
    int fd = dial(), how;
    size_t len;
    const char *out, *one, *two, *three;

    (void)state;
    assert_int_equal(write_all(fd, reqs, sizeof(reqs) - 1), 0);
    out = read_until_end(fd, 5000, &len, &how);
    close(fd);
    one = strstr(out, "X-Request-Id: one");
    two = strstr(out, "X-Request-Id: two");
    three = strstr(out, "X-Request-Id: three");
    TK_EXPECT(how == 1, "the connection ends after the third (%d)", how);
    TK_EXPECT(one != NULL && two != NULL && three != NULL && one < two
                  && two < three,
              "three answers, in order: %s", out);
    TK_EXPECT(count(out, "{\"status\":\"ok\"}") == 1,
              "the HEAD's answer has no body: %s", out);
    TK_EXPECT(count(out, "HTTP/1.1 200 ") == 2
                  && count(out, "HTTP/1.1 404 ") == 1,
              "200, 200, 404: %s", out);
}

static void http10_is_kept_alive_only_when_it_asks(void **state)
{
    static const char ka[] =
        "GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    static const char plain[] = "GET /healthz HTTP/1.0\r\n\r\n";
    int fd = dial(), how;
    size_t len;
    const char *out;

    (void)state;
    assert_int_equal(write_all(fd, ka, sizeof(ka) - 1), 0);
    out = read_until_end(fd, 500, &len, &how);
    TK_EXPECT(how == 0 && strstr(out, "HTTP/1.1 200 ") != NULL
                  && strstr(out, "Connection: keep-alive") != NULL,
              "kept alive when asked (%d): %s", how, out);
    assert_int_equal(write_all(fd, plain, sizeof(plain) - 1), 0);
    out = read_until_end(fd, 5000, &len, &how);
    close(fd);
    TK_EXPECT(how == 1 && strstr(out, "HTTP/1.1 200 ") != NULL
                  && strstr(out, "Connection: close") != NULL,
              "closed after a plain HTTP/1.0 request (%d): %s", how, out);
}

static void expect_continue_only_when_the_body_is_read(void **state)
{
    static const char body[] = "{\"title\":\"t\",\"content\":\"c\"}";
    char head[2048];
    int fd = dial(), how;
    size_t len;
    const char *out;

    (void)state;
    snprintf(head, sizeof(head),
             "POST /v1/documents HTTP/1.1\r\nHost: x\r\n"
             "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\nExpect: 100-continue\r\n\r\n",
             author, sizeof(body) - 1);
    assert_int_equal(write_all(fd, head, strlen(head)), 0);
    out = read_until_end(fd, 1000, &len, &how);
    /* read_until_end waits for the end: the 100 is all there is. */
    TK_EXPECT(strcmp(out, "HTTP/1.1 100 Continue\r\n\r\n") == 0,
              "100 Continue before the body: %s", out);
    assert_int_equal(write_all(fd, body, sizeof(body) - 1), 0);
    out = read_until_end(fd, 1000, &len, &how);
    close(fd);
    TK_EXPECT(strstr(out, "HTTP/1.1 201 ") != NULL,
              "then the body is read and answered: %s", out);
    /* Decided on the headers (no token): 401 at once, no 100, closed. */
    fd = dial();
    snprintf(head, sizeof(head),
             "POST /v1/documents HTTP/1.1\r\nHost: x\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\n"
             "Expect: 100-continue\r\n\r\n",
             sizeof(body) - 1);
    assert_int_equal(write_all(fd, head, strlen(head)), 0);
    out = read_until_end(fd, 5000, &len, &how);
    close(fd);
    TK_EXPECT(how == 1 && strncmp(out, "HTTP/1.1 401 ", 13) == 0
                  && strstr(out, "100 Continue") == NULL
                  && strstr(out, "Connection: close") != NULL,
              "401 at once without 100 Continue, then closed (%d): %s", how,
              out);
}

static void a_refusal_survives_what_the_client_still_sends(void **state)
{
    static const char bad[] = "GARBAGE / HTTP/1.1 extra\r\n";
    const size_t n = 1024 * 1024;
    const int small = 16 * 1024;
    char *junk = malloc(n);
    int fd = dial(), how;
    size_t len;
    const char *out;

    (void)state;
    assert_non_null(junk);
    memset(junk, 'j', n);
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    assert_int_equal(write_all(fd, bad, sizeof(bad) - 1), 0);
    /* The server answers and closes while this is still being written. */
    (void)write_all(fd, junk, n);
    free(junk);
    out = read_until_end(fd, 5000, &len, &how);
    close(fd);
    TK_EXPECT(strncmp(out, "HTTP/1.1 400 ", 13) == 0
                  && strstr(out, "X-Request-Id: ") != NULL
                  && strstr(out, "Content-Type: application/json") != NULL
                  && strstr(out, "\"code\":\"BAD_REQUEST\"") != NULL,
              "a JSON 400 with a request id is read (%d): %s", how, out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pipelined_requests_are_answered_in_order),
        cmocka_unit_test(http10_is_kept_alive_only_when_it_asks),
        cmocka_unit_test(expect_continue_only_when_the_body_is_read),
        cmocka_unit_test(a_refusal_survives_what_the_client_still_sends),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
