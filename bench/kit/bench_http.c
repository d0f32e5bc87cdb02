/*
 * bench_http.c: the keep-alive HTTP/1.1 client of reviewd's load programs
 * (see bench_http.h).
 *
 * Why hand-written rather than libcurl: a load generator must not spend
 * its CPU (on a 2-core machine it shares with the server) on a general
 * client, and it must never allocate in the timed loop.  reviewd's
 * responses are simple (always Content-Length, never chunked), so a
 * header scan and a byte count are the whole parser.
 *
 * Invariant: h->fd is -1 or an open, connected socket; every failure that
 * leaves the connection in an unknown state (a partial response, a
 * timeout) closes it in bench_http_request, so the next request never
 * reads the tail of an earlier one.
 */
#include "bench_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

void bench_http_init(bench_http *h, int port, int timeout_ms)
{
    h->fd = -1;
    h->port = port;
    h->timeout_ms = timeout_ms;
    h->len = 0;
    h->buf[0] = '\0';
}

static void set_timeouts(int fd, int timeout_ms)
{
    const struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};

    if (timeout_ms > 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    }
}

int bench_http_connect(bench_http *h)
{
    struct sockaddr_in a;
    const int one = 1;

    bench_http_close(h);
    h->len = 0;
    h->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (h->fd < 0)
        return -1;
    setsockopt(h->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    set_timeouts(h->fd, h->timeout_ms);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)h->port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(h->fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        const int saved = errno;

        close(h->fd);
        h->fd = -1;
        errno = saved;
        return -1;
    }
    return 0;
}

void bench_http_close(bench_http *h)
{
    if (h->fd >= 0)
        close(h->fd);
    h->fd = -1;
}

int bench_http_send(bench_http *h, const char *p, size_t n)
{
    h->len = 0;
    if (h->fd < 0)
        return -1;
    while (n > 0) {
        const ssize_t w = send(h->fd, p, n, MSG_NOSIGNAL);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The status of a complete response in h->buf (setting *body), or 0 when
 * more bytes are needed. */
static int complete_response(bench_http *h, const char **body)
{
    const char *end = strstr(h->buf, "\r\n\r\n");
    const char *cl;
    long clen;

    if (end == NULL)
        return 0;
    cl = strcasestr(h->buf, "\r\nContent-Length:");
    clen = cl != NULL && cl < end ? atol(cl + 17) : 0;
    if ((size_t)(end + 4 - h->buf) + (size_t)clen > h->len)
        return 0;
    *body = end + 4;
    return h->len > 12 ? atoi(h->buf + 9) : -1;
}

/* Closes our side when the server said it closes its own, so the next
 * request connects afresh instead of failing on a dead socket. */
static void close_if_asked(bench_http *h, const char *body)
{
    const char *c = strcasestr(h->buf, "\r\nConnection: close");

    if (c != NULL && c < body)
        bench_http_close(h);
}

int bench_http_read(bench_http *h, const char **body)
{
    h->len = 0;
    if (h->fd < 0)
        return -1;
    for (;;) {
        ssize_t got;
        int status;

        h->buf[h->len] = '\0';
        status = complete_response(h, body);
        if (status != 0) {
            close_if_asked(h, *body);
            return status;
        }
        if (h->len + 1 >= sizeof(h->buf))
            return -1;
        got = recv(h->fd, h->buf + h->len, sizeof(h->buf) - h->len - 1, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        h->len += (size_t)got;
    }
}

int bench_http_read_some(bench_http *h, const char **body)
{
    ssize_t got;
    int status;

    if (h->fd < 0 || h->len + 1 >= sizeof(h->buf))
        return -1;
    got = recv(h->fd, h->buf + h->len, sizeof(h->buf) - h->len - 1,
               MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (got <= 0)
        return -1;
    h->len += (size_t)got;
    h->buf[h->len] = '\0';
    status = complete_response(h, body);
    if (status != 0)
        close_if_asked(h, *body);
    return status;
}

int bench_http_format(char *out, size_t outlen, const char *method,
                      const char *path, const char *token, const char *body)
{
    const int n = snprintf(
        out, outlen,
        "%s %s HTTP/1.1\r\nHost: bench\r\n"
        "%s%s%s%sContent-Length: %zu\r\n\r\n%s",
        method, path, token != NULL ? "Authorization: Bearer " : "",
        token != NULL ? token : "", token != NULL ? "\r\n" : "",
        body != NULL ? "Content-Type: application/json\r\n" : "",
        body != NULL ? strlen(body) : 0, body != NULL ? body : "");

    return n < 0 || (size_t)n >= outlen ? -1 : n;
}

int bench_http_request(bench_http *h, const char *method, const char *path,
                       const char *token, const char *body,
                       const char **resp_body)
{
    char req[8192];
    int attempt, status = -1;
    const int n = bench_http_format(req, sizeof(req), method, path, token,
                                    body);

    if (n < 0)
        return -1;
    for (attempt = 0; attempt < 2 && status < 0; attempt++) {
        if (h->fd < 0 && bench_http_connect(h) != 0)
            return -1;
        if (bench_http_send(h, req, (size_t)n) == 0)
            status = bench_http_read(h, resp_body);
        if (status < 0)
            bench_http_close(h);
    }
    return status;
}
