/*
 * rvt_wire.c: the raw keep-alive HTTP client of reviewd's wire tests (see
 * rvt_wire.h).
 *
 * Answers are parsed only as far as the tests look at them: the status,
 * the headers they name, and the body (by Content-Length, chunked, or
 * until EOF when neither is given).  Whatever arrives after one answer
 * stays in the buffer for the next, which is what pipelining needs.
 */
#include "rvt_wire.h"

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
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testkit.h"

/* Enough for any answer reviewd writes (a document is at most 1 MiB of
 * text, escaped in JSON). */
#define WIRE_BUF (8 * 1024 * 1024)

void rvt_wire_dial(rvt_wire *w, int port, const char *src)
{
    struct sockaddr_in a;
    const int one = 1;

    memset(w, 0, sizeof(*w));
    w->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(w->fd >= 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    assert_int_equal(inet_pton(AF_INET, src, &a.sin_addr), 1);
    if (bind(w->fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        fail_msg("bind to %s: %s", src, strerror(errno));
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(w->fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        fail_msg("connect to 127.0.0.1:%d from %s: %s", port, src,
                 strerror(errno));
    /* A head and its body go out as two writes: no delayed-ACK stall. */
    (void)setsockopt(w->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    w->cap = WIRE_BUF;
    w->buf = malloc(w->cap);
    assert_non_null(w->buf);
}

void rvt_wire_close(rvt_wire *w)
{
    if (w->fd >= 0 && w->buf != NULL)
        close(w->fd);
    free(w->buf);
    memset(w, 0, sizeof(*w));
    w->fd = -1;
}

int rvt_wire_send(rvt_wire *w, const char *p, size_t n)
{
    while (n > 0) {
        const ssize_t s = send(w->fd, p, n, MSG_NOSIGNAL);

        if (s < 0 && errno == EINTR)
            continue;
        if (s <= 0)
            return -1;
        p += s;
        n -= (size_t)s;
    }
    return 0;
}

/* Reads more into the buffer before until_ms; 0 on EOF, error, timeout
 * or a full buffer, with the reason in a->why. */
static int fill(rvt_wire *w, int64_t until_ms, rvt_answer *a)
{
    struct pollfd p = {w->fd, POLLIN, 0};
    const int64_t left = until_ms - testkit_now_ms();
    ssize_t r;

    if (w->got + 1 >= w->cap) {
        snprintf(a->why, sizeof(a->why), "answer over %d bytes", WIRE_BUF);
        return 0;
    }
    if (left <= 0 || poll(&p, 1, (int)left) != 1) {
        snprintf(a->why, sizeof(a->why), "timeout");
        return 0;
    }
    do
        r = recv(w->fd, w->buf + w->got, w->cap - w->got - 1, 0);
    while (r < 0 && errno == EINTR);
    if (r <= 0) {
        snprintf(a->why, sizeof(a->why), "%s",
                 r == 0 ? "EOF" : strerror(errno));
        return 0;
    }
    w->got += (size_t)r;
    w->buf[w->got] = '\0';
    return 1;
}

/* The offset just past the first "\r\n" (or "\r\n\r\n" when blank) at or
 * after from, reading more as needed; 0 when none came. */
static size_t find_end(rvt_wire *w, size_t from, int blank, int64_t until,
                       rvt_answer *a)
{
    const char *sep = blank ? "\r\n\r\n" : "\r\n";
    const size_t n = blank ? 4 : 2;

    for (;;) {
        const char *e = w->got > from
                            ? memmem(w->buf + from, w->got - from, sep, n)
                            : NULL;

        if (e != NULL)
            return (size_t)(e - w->buf) + n;
        if (!fill(w, until, a))
            return 0;
    }
}

/* The value of header name in the block hdr (NUL-terminated). */
static void header_value(const char *hdr, const char *name, char *out,
                         size_t len)
{
    const size_t n = strlen(name);
    const char *p = hdr;

    out[0] = '\0';
    while ((p = strstr(p, "\r\n")) != NULL) {
        p += 2;
        if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
            const char *v = p + n + 1;
            size_t k = strcspn(v, "\r\n");

            while (*v == ' ' && k > 0) {
                v++;
                k--;
            }
            snprintf(out, len, "%.*s", (int)k, v);
            return;
        }
    }
}

/* Decodes a chunked body that starts at pos into out (malloc'd); returns
 * the offset past its end (trailers included), or 0. */
static size_t read_chunked(rvt_wire *w, size_t pos, int64_t until,
                           rvt_answer *a, char **out, size_t *out_len)
{
    size_t len = 0;

    *out = NULL;
    for (;;) {
        const size_t line = find_end(w, pos, 0, until, a);
        unsigned long size;
        char *grown;

        if (line == 0)
            return 0;
        size = strtoul(w->buf + pos, NULL, 16);
        pos = line;
        if (size == 0)
            break;
        while (w->got < pos + size + 2)
            if (!fill(w, until, a))
                return 0;
        grown = realloc(*out, len + size + 1);
        assert_non_null(grown);
        *out = grown;
        memcpy(*out + len, w->buf + pos, size);
        len += size;
        pos += size + 2;
    }
    /* Trailer lines, then the blank line. */
    for (;;) {
        const size_t line = find_end(w, pos, 0, until, a);

        if (line == 0)
            return 0;
        if (line == pos + 2)
            break;
        pos = line;
    }
    *out_len = len;
    return pos + 2;
}

void rvt_wire_read(rvt_wire *w, int head, int timeout_ms, rvt_answer *a)
{
    const int64_t until = testkit_now_ms() + timeout_ms;
    char hdr[16384], v[64];
    size_t hlen, end = 0, blen = 0;
    char *chunked = NULL;
    const char *body;
    int no_body;

    memset(a, 0, sizeof(*a));
    hlen = find_end(w, 0, 1, until, a);
    if (hlen == 0)
        return;
    if (strncmp(w->buf, "HTTP/1.", 7) != 0 || hlen < 12) {
        snprintf(a->why, sizeof(a->why), "not HTTP: %.40s", w->buf);
        return;
    }
    snprintf(hdr, sizeof(hdr), "%.*s", (int)(hlen - 2), w->buf);
    const int status = atoi(w->buf + 9);
    no_body = head || status / 100 == 1 || status == 204 || status == 304;
    header_value(hdr, "Transfer-Encoding", v, sizeof(v));
    if (no_body) {
        end = hlen;
    } else if (strcasecmp(v, "chunked") == 0) {
        end = read_chunked(w, hlen, until, a, &chunked, &blen);
        if (end == 0) {
            free(chunked);
            return;
        }
    } else {
        header_value(hdr, "Content-Length", v, sizeof(v));
        if (v[0] != '\0') {
            blen = (size_t)strtoull(v, NULL, 10);
            while (w->got < hlen + blen)
                if (!fill(w, until, a))
                    return;
        } else {
            /* Neither: the body ends at EOF. */
            while (fill(w, until, a))
                ;
            if (strcmp(a->why, "EOF") != 0)
                return;
            blen = w->got - hlen;
        }
        end = hlen + blen;
    }
    body = chunked != NULL ? chunked : w->buf + hlen;
    snprintf(a->status_line, sizeof(a->status_line), "%.*s",
             (int)strcspn(hdr, "\r\n"), hdr);
    /* Each field line ends in a CRLF, after the status line's own. */
    const char *line_end = strstr(hdr, "\r\n");
    while (line_end != NULL
           && (line_end = strstr(line_end + 2, "\r\n")) != NULL)
        a->fields++;
    header_value(hdr, "X-Request-Id", a->request_id, sizeof(a->request_id));
    header_value(hdr, "Content-Type", a->content_type,
                 sizeof(a->content_type));
    header_value(hdr, "Connection", a->connection, sizeof(a->connection));
    a->closes = strcasecmp(a->connection, "close") == 0;
    snprintf(a->body, sizeof(a->body), "%.*s", (int)blen, body);
    a->body_len = blen;
    if (blen > 0)
        a->json = json_loadb(body, blen, 0, NULL);
    a->status = status;
    a->why[0] = '\0';
    free(chunked);
    memmove(w->buf, w->buf + end, w->got - end);
    w->got -= end;
    w->buf[w->got] = '\0';
}

int rvt_wire_ended(rvt_wire *w, int ms)
{
    const int64_t until = testkit_now_ms() + ms;
    struct pollfd p = {w->fd, POLLIN, 0};
    char buf[4096];

    w->got = 0;
    do {
        const int64_t left = until - testkit_now_ms();

        if (poll(&p, 1, left > 0 ? (int)left : 0) == 1) {
            const ssize_t r = recv(w->fd, buf, sizeof(buf), 0);

            if (r == 0)
                return RVT_WIRE_EOF;
            if (r < 0 && errno != EINTR && errno != EAGAIN)
                return RVT_WIRE_RESET;
        }
    } while (testkit_now_ms() < until);
    return RVT_WIRE_OPEN;
}

void rvt_answer_clear(rvt_answer *a)
{
    json_decref(a->json);
    memset(a, 0, sizeof(*a));
}

int rvt_answer_is_json_error(const rvt_answer *a, int head)
{
    if (a->request_id[0] == '\0'
        || strncmp(a->content_type, "application/json", 16) != 0)
        return 0;
    return head
           || (json_is_string(json_object_get(a->json, "code"))
               && json_is_string(json_object_get(a->json, "detail")));
}
