/*
 * test_rv_hparse.c: reviewd's HTTP/1.1 request parser (http/rv_hparse.c)
 * against RFC 9112's rules and its own limits, with no server.
 *
 * Every head is parsed twice, whole and a byte at a time, and both must
 * agree: the parser is fed as the bytes arrive on a socket, in pieces
 * of any size.  The limits (414, 431) must be decided from the bytes
 * received, before the line or the head ends, so that a client cannot
 * make reviewd buffer more than the limits.  The black-box tests of the
 * same rules over a socket are the HTTP edge tests'; these are the
 * parser's own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/rv_hparse.h"

static char buf[64 * 1024];
static char buf2[64 * 1024];
static rv_hhead head;

/* Parses s whole (into buf/head) and byte by byte; checks both agree
 * and returns the result. */
static rv_hp_result parse(const char *s)
{
    const size_t n = strlen(s);
    rv_hhead h2;
    rv_hp_result r, r2 = RV_HP_MORE;
    size_t i;

    assert_true(n < sizeof(buf));
    memcpy(buf, s, n);
    rv_hparse_init(&head);
    r = rv_hparse_head(&head, buf, n);
    memcpy(buf2, s, n);
    rv_hparse_init(&h2);
    for (i = 1; i <= n && r2 == RV_HP_MORE; i++)
        r2 = rv_hparse_head(&h2, buf2, i);
    assert_int_equal(r, r2);
    if (r == RV_HP_ERROR)
        assert_int_equal(head.err.status, h2.err.status);
    if (r == RV_HP_DONE)
        assert_int_equal(head.head_len, h2.head_len);
    return r;
}

static unsigned status_of(const char *s)
{
    return parse(s) == RV_HP_ERROR ? head.err.status : 0;
}

static void a_plain_get(void **state)
{
    static const char req[] = "GET /v1/documents?x=1 HTTP/1.1\r\n"
                              "Host: x\r\nX-Request-Id:  abc \r\n"
                              "Empty:\r\nSpaced:   \r\n\r\nNEXT";

    (void)state;
    assert_int_equal(parse(req), RV_HP_DONE);
    assert_string_equal(head.method, "GET");
    assert_string_equal(head.target, "/v1/documents?x=1");
    assert_int_equal(head.minor, 1);
    assert_int_equal(head.keep_alive, 1);
    assert_int_equal(head.content_length, -1);
    assert_int_equal(head.head_len, sizeof(req) - 1 - 4);
    assert_string_equal(rv_hparse_header(&head, buf, "x-request-id"), "abc");
    assert_string_equal(rv_hparse_header(&head, buf, "HOST"), "x");
    assert_string_equal(rv_hparse_header(&head, buf, "Empty"), "");
    assert_string_equal(rv_hparse_header(&head, buf, "Spaced"), "");
    assert_null(rv_hparse_header(&head, buf, "Authorization"));
}

static void line_ends(void **state)
{
    (void)state;
    /* A bare LF is accepted (RFC 9112 section 2.2), a bare CR is not. */
    assert_int_equal(parse("GET / HTTP/1.1\nHost: x\n\n"), RV_HP_DONE);
    assert_string_equal(rv_hparse_header(&head, buf, "Host"), "x");
    assert_int_equal(status_of("GET / HTTP/1.1\rHost: x\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: x\ry\r\n\r\n"), 400);
    /* An empty line before the request is skipped. */
    assert_int_equal(parse("\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"),
                     RV_HP_DONE);
    assert_string_equal(head.method, "GET");
}

static void request_lines(void **state)
{
    (void)state;
    assert_int_equal(status_of("GET  / HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1 \r\nHost: x\r\n\r\n"), 400);
    assert_int_equal(status_of("G(T / HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
    assert_int_equal(status_of("GET x HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
    assert_int_equal(status_of("GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n"),
                     400);
    assert_int_equal(status_of("GET /a\x7f HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
    assert_int_equal(status_of("GET * HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
    assert_int_equal(parse("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"),
                     RV_HP_DONE);
    assert_int_equal(status_of("GET / HTTX/1.1\r\nHost: x\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.10\r\nHost: x\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/2.0\r\nHost: x\r\n\r\n"), 505);
    assert_int_equal(status_of("GET / HTTP/1.2\r\nHost: x\r\n\r\n"), 505);
    assert_string_equal(head.err.code, "HTTP_VERSION_NOT_SUPPORTED");
    assert_int_equal(status_of("GETGETGETGETGETGETGETGETGETGETGETGET"), 400);
    /* A method of made-up letters is a token: routing decides. */
    assert_int_equal(parse("BREW / HTTP/1.0\r\n\r\n"), RV_HP_DONE);
    assert_int_equal(head.minor, 0);
    assert_int_equal(head.keep_alive, 0);
}

static void limits_are_decided_early(void **state)
{
    static char big[40 * 1024];
    size_t n;

    (void)state;
    /* A target over 8 KiB: 414 before its line ends. */
    n = (size_t)snprintf(big, sizeof(big), "GET /");
    memset(big + n, 'a', RV_HP_TARGET_MAX);
    big[n + RV_HP_TARGET_MAX] = '\0';
    assert_int_equal(status_of(big), 414);
    assert_string_equal(head.err.code, "URI_TOO_LONG");
    /* The same when the line ends without a version. */
    n = (size_t)snprintf(big, sizeof(big), "GET /");
    memset(big + n, 'a', RV_HP_TARGET_MAX);
    snprintf(big + n + RV_HP_TARGET_MAX, 8, "\r\n\r\n");
    assert_int_equal(status_of(big), 414);
    /* Exactly 8 KiB is fine. */
    n = (size_t)snprintf(big, sizeof(big), "GET /");
    memset(big + n, 'a', RV_HP_TARGET_MAX - 1);
    snprintf(big + n + RV_HP_TARGET_MAX - 1, 40,
             " HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_int_equal(parse(big), RV_HP_DONE);
    /* One header line longer than 16 KiB, not yet ended: 431. */
    n = (size_t)snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nX: ");
    memset(big + n, 'v', RV_HP_HEADERS_MAX);
    big[n + RV_HP_HEADERS_MAX] = '\0';
    assert_int_equal(status_of(big), 431);
    assert_string_equal(head.err.code, "HEADERS_TOO_LARGE");
    /* A limit is decided before a bare CR in the same bytes, whole or
     * not. */
    n = (size_t)snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nX: a\rb");
    memset(big + n, 'v', RV_HP_HEADERS_MAX);
    snprintf(big + n + RV_HP_HEADERS_MAX, 8, "\r\n\r\n");
    assert_int_equal(status_of(big), 431);
    /* Many short lines over 16 KiB together: 431. */
    n = (size_t)snprintf(big, sizeof(big), "GET / HTTP/1.1\r\n");
    while (n < RV_HP_HEADERS_MAX + 100)
        n += (size_t)snprintf(big + n, sizeof(big) - n, "X-A: b\r\n");
    assert_int_equal(status_of(big), 431);
    /* Never more than the limits are needed for a decision. */
    assert_true(head.pos <= RV_HP_HEAD_MAX);
}

static void header_lines(void **state)
{
    (void)state;
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: x\r\nA : b\r\n\r\n"),
                     400);
    assert_int_equal(status_of(
                         "GET / HTTP/1.1\r\nHost: x\r\nA: b\r\n c\r\n\r\n"),
                     400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: x\r\n: b\r\n\r\n"),
                     400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: x\r\nAb\r\n\r\n"),
                     400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: x\r\nA(: b\r\n\r\n"),
                     400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: x\r\nA: \x01\r\n\r\n"),
                     400);
    /* obs-text in a value is accepted. */
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: x\r\nA: \xc3\xa9\r\n\r\n"),
                     RV_HP_DONE);
    /* Host: HTTP/1.1 needs exactly one, HTTP/1.0 none. */
    assert_int_equal(status_of("GET / HTTP/1.1\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
                     400);
    assert_int_equal(parse("GET / HTTP/1.0\r\n\r\n"), RV_HP_DONE);
    /* A Host value is a host and an optional port, nothing else. */
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), 400);
    assert_int_equal(status_of("GET / HTTP/1.1\r\nHost: u@a\r\n\r\n"), 400);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"),
                     RV_HP_DONE);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n"),
                     RV_HP_DONE);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost:\r\n\r\n"), RV_HP_DONE);
}

static void framing(void **state)
{
    (void)state;
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: x\r\n"
                           "Content-Length: 12\r\nContent-Length: 12\r\n\r\n"),
                     RV_HP_DONE);
    assert_int_equal(head.content_length, 12);
    assert_int_equal(status_of(
                         "POST / HTTP/1.1\r\nHost: x\r\n"
                         "Content-Length: 12\r\nContent-Length: 13\r\n\r\n"),
                     400);
    assert_int_equal(status_of("POST / HTTP/1.1\r\nHost: x\r\n"
                               "Content-Length: 1a\r\n\r\n"),
                     400);
    assert_int_equal(status_of("POST / HTTP/1.1\r\nHost: x\r\n"
                               "Content-Length: +1\r\n\r\n"),
                     400);
    assert_int_equal(status_of("POST / HTTP/1.1\r\nHost: x\r\n"
                               "Content-Length: 5, 5\r\n\r\n"),
                     400);
    assert_int_equal(status_of("POST / HTTP/1.1\r\nHost: x\r\n"
                               "Content-Length:\r\n\r\n"),
                     400);
    assert_int_equal(status_of("POST / HTTP/1.1\r\nHost: x\r\n"
                               "Content-Length: 99999999999999999999\r\n\r\n"),
                     400);
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: x\r\n"
                           "Content-Length: 922337203685477580\r\n\r\n"),
                     RV_HP_DONE);
    assert_int_equal(status_of("POST / HTTP/1.1\r\nHost: x\r\n"
                               "Content-Length: 3\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n"),
                     400);
    /* Without a final chunked the body's end is unknown: 400, not 501
     * (RFC 9112 section 6.3); a coding before a final chunked is 501. */
    assert_int_equal(status_of("POST / HTTP/1.1\r\nHost: x\r\n"
                               "Transfer-Encoding: gzip\r\n\r\n"),
                     400);
    assert_int_equal(status_of("POST / HTTP/1.1\r\nHost: x\r\n"
                               "Transfer-Encoding: chunked, gzip\r\n\r\n"),
                     400);
    assert_int_equal(status_of("POST / HTTP/1.1\r\nHost: x\r\n"
                               "Transfer-Encoding: chunked\r\n"
                               "Transfer-Encoding: gzip\r\n\r\n"),
                     400);
    assert_int_equal(status_of("POST / HTTP/1.1\r\nHost: x\r\n"
                               "Transfer-Encoding: gzip, chunked\r\n\r\n"),
                     501);
    assert_string_equal(head.err.code, "NOT_IMPLEMENTED");
    assert_int_equal(status_of("POST / HTTP/1.1\r\nHost: x\r\n"
                               "Transfer-Encoding: chunked, chunked\r\n\r\n"),
                     400);
    assert_int_equal(status_of("POST / HTTP/1.1\r\nHost: x\r\n"
                               "Transfer-Encoding: \r\n\r\n"),
                     400);
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: x\r\n"
                           "Transfer-Encoding: Chunked\r\n\r\n"),
                     RV_HP_DONE);
    assert_int_equal(head.chunked, 1);
}

static void connection_and_expect(void **state)
{
    (void)state;
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: x\r\n"
                           "Connection: foo, Close\r\n\r\n"),
                     RV_HP_DONE);
    assert_int_equal(head.keep_alive, 0);
    assert_int_equal(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
                     RV_HP_DONE);
    assert_int_equal(head.keep_alive, 1);
    assert_int_equal(parse("POST / HTTP/1.0\r\nConnection: keep-alive\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n"),
                     RV_HP_DONE);
    assert_int_equal(head.keep_alive, 0);
    assert_int_equal(parse("POST / HTTP/1.1\r\nHost: x\r\n"
                           "Expect: 100-Continue\r\n\r\n"),
                     RV_HP_DONE);
    assert_int_equal(head.expect_continue, 1);
    assert_int_equal(parse("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n"),
                     RV_HP_DONE);
    assert_int_equal(head.expect_continue, 0);
}

/* Decodes body (after a head that says chunked or cl) whole and byte by
 * byte; returns the result, the data in out and the bytes used. */
static rv_hp_result decode(int chunked, int64_t cl, uint64_t max,
                           const char *body, size_t n, char *out,
                           size_t *outlen, size_t *used_total, unsigned *st)
{
    rv_hp_result result[2];
    size_t olen[2], tot[2];
    int pass;

    for (pass = 0; pass < 2; pass++) {
        rv_hhead h;
        rv_hbody b;
        size_t off = 0, end, o = 0;
        rv_hp_result r = RV_HP_MORE;

        rv_hparse_init(&h);
        h.chunked = chunked;
        h.content_length = cl;
        rv_hbody_init(&b, &h, max);
        for (end = pass == 0 ? n : 1; end <= n && r == RV_HP_MORE; end++) {
            while (off < end && r == RV_HP_MORE) {
                const char *d;
                size_t dl, used;

                r = rv_hbody_feed(&b, body + off, end - off, &used, &d, &dl);
                assert_true(used <= end - off);
                memcpy(out + o, d != NULL ? d : "", dl);
                o += dl;
                off += used;
            }
            if (pass == 0)
                break;
        }
        result[pass] = r;
        olen[pass] = o;
        tot[pass] = off;
        *st = r == RV_HP_ERROR ? b.err.status : 0;
    }
    assert_int_equal(result[0], result[1]);
    assert_int_equal(olen[0], olen[1]);
    if (result[0] != RV_HP_ERROR)
        assert_int_equal(tot[0], tot[1]);
    *outlen = olen[0];
    *used_total = tot[0];
    return result[0];
}

static void chunked_bodies(void **state)
{
    static const char ok[] = "5;name=v\r\nhello\r\n7\r\n, world\r\n"
                             "0\r\nTrailer: x\r\n\r\nNEXT";
    static const char lf[] = "3\nabc\n0\n\n";
    char out[256];
    size_t n, used;
    unsigned st;

    (void)state;
    assert_int_equal(decode(1, -1, 1024, ok, sizeof(ok) - 1, out, &n, &used,
                            &st),
                     RV_HP_DONE);
    assert_int_equal(n, 12);
    assert_memory_equal(out, "hello, world", 12);
    assert_int_equal(used, sizeof(ok) - 1 - 4);
    assert_int_equal(decode(1, -1, 1024, lf, sizeof(lf) - 1, out, &n, &used,
                            &st),
                     RV_HP_DONE);
    assert_int_equal(n, 3);
#define BAD(s, status)                                                  \
    do {                                                                \
        assert_int_equal(decode(1, -1, 1024, s, sizeof(s) - 1, out, &n, \
                                &used, &st),                            \
                         RV_HP_ERROR);                                  \
        assert_int_equal(st, status);                                   \
    } while (0)
    BAD("zz\r\n", 400);
    BAD(";x\r\n", 400);
    BAD("5 5\r\n", 400);
    BAD("5\rx", 400);
    BAD("5\r\nhelloXX", 400);
    BAD("401\r\n", 413);
    BAD("ffffffffffffffffffffffff\r\n", 413);
    BAD("0\r\nA\rB\r\n\r\n", 400);
    {
        static char longline[2048];

        memset(longline, ' ', sizeof(longline) - 1);
        longline[0] = '5';
        longline[1] = ';';
        assert_int_equal(decode(1, -1, 1024, longline, sizeof(longline) - 1,
                                out, &n, &used, &st),
                         RV_HP_ERROR);
        assert_int_equal(st, 400);
    }
    {
        static char trailers[20000];
        size_t k = (size_t)snprintf(trailers, sizeof(trailers), "0\r\n");

        while (k < RV_HP_TRAILERS_MAX + 100)
            k += (size_t)snprintf(trailers + k, sizeof(trailers) - k,
                                  "T: v\r\n");
        assert_int_equal(decode(1, -1, 1024, trailers, k, out, &n, &used, &st),
                         RV_HP_ERROR);
        assert_int_equal(st, 431);
    }
#undef BAD
}

static void length_bodies(void **state)
{
    static const char body[] = "abcdefNEXT";
    char out[64];
    size_t n, used;
    unsigned st;

    (void)state;
    assert_int_equal(decode(0, 6, 0, body, sizeof(body) - 1, out, &n, &used,
                            &st),
                     RV_HP_DONE);
    assert_int_equal(n, 6);
    assert_int_equal(used, 6);
    assert_int_equal(decode(0, 20, 0, body, sizeof(body) - 1, out, &n, &used,
                            &st),
                     RV_HP_MORE);
    assert_int_equal(n, sizeof(body) - 1);
}

static int collect(void *cls, const char *key, const char *value)
{
    char *out = cls;
    size_t n = strlen(out);

    snprintf(out + n, 256 - n, "[%s=%s]", key, value ? value : "(null)");
    return 1;
}

static void percent_decoding(void **state)
{
    char s[64], out[256] = "";

    (void)state;
    snprintf(s, sizeof(s), "%%41%%zz%%4%%");
    assert_int_equal(rv_hparse_unescape(s), 7);
    assert_string_equal(s, "A%zz%4%");
    snprintf(s, sizeof(s), "a%%00b");
    assert_int_equal(rv_hparse_unescape(s), 3);
    assert_int_equal(s[1], '\0');
    snprintf(s, sizeof(s), "a=1&b&&c=%%20+x&d=&");
    assert_int_equal(rv_hparse_query(s, collect, out), 1);
    assert_string_equal(out, "[a=1][b=(null)][c=  x][d=]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_plain_get),
        cmocka_unit_test(line_ends),
        cmocka_unit_test(request_lines),
        cmocka_unit_test(limits_are_decided_early),
        cmocka_unit_test(header_lines),
        cmocka_unit_test(framing),
        cmocka_unit_test(connection_and_expect),
        cmocka_unit_test(chunked_bodies),
        cmocka_unit_test(length_bodies),
        cmocka_unit_test(percent_decoding),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
