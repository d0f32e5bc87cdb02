/*
 * bench_http.h: the HTTP/1.1 client of the programs that load reviewd
 * (bench_reviewd, the soak's soak_load): plain sockets on loopback,
 * keep-alive by default, one request in flight per connection.
 *
 * It is built for load, not for the web: no chunked bodies, no TLS, no
 * redirects.  A response is read up to the end of its headers and then as
 * many body bytes as its Content-Length says, into a fixed buffer inside
 * the connection (a response larger than the buffer is an error), so the
 * timed loop never allocates.  reviewd always sends Content-Length.
 *
 * Ownership: a bench_http is the caller's (on the stack or in an array);
 * bench_http_init prepares it, bench_http_close closes its socket and may
 * be called any number of times.  A response body returned through
 * body points into the connection's buffer and is valid until the next
 * call on that connection.  Threads: a bench_http belongs to one thread;
 * different connections may be used from different threads at once.
 */
#ifndef DLOCK_BENCH_HTTP_H
#define DLOCK_BENCH_HTTP_H

#include <stddef.h>

#define BENCH_HTTP_BUF 65536

typedef struct bench_http {
    int fd;         /* -1 while not connected */
    int port;       /* 127.0.0.1:port */
    int timeout_ms; /* send and receive timeout; 0: none */
    size_t len;     /* bytes of the last response in buf */
    char buf[BENCH_HTTP_BUF];
} bench_http;

/* Prepares h for 127.0.0.1:port, not yet connected.  timeout_ms bounds
 * every send and receive (SO_SNDTIMEO, SO_RCVTIMEO); 0 waits forever. */
void bench_http_init(bench_http *h, int port, int timeout_ms);

/* Connects (closing any previous socket first).  Returns 0, or -1 with
 * errno set and h->fd -1. */
int bench_http_connect(bench_http *h);

/* Closes the socket if open; h can be connected again. */
void bench_http_close(bench_http *h);

/* Sends all n bytes of p on the connection, forgetting the last
 * response.  Returns 0, or -1 (a timeout, a reset, or no connection). */
int bench_http_send(bench_http *h, const char *p, size_t n);

/* Formats a request as bench_http_request sends it into out (size
 * outlen): the method, path, Host, the Bearer token unless NULL, and the
 * JSON body unless NULL.  Returns its length, or -1 if it does not fit. */
int bench_http_format(char *out, size_t outlen, const char *method,
                      const char *path, const char *token, const char *body);

/* For one thread driving many connections (an event loop): after
 * bench_http_send of a request, reads what has arrived without waiting
 * (one recv).  Returns the status of the complete response, with *body as
 * for bench_http_read, 0 when more bytes are needed, or -1 when the
 * connection closed or failed or the response outgrew the buffer.  A
 * response that says "Connection: close" closes h. */
int bench_http_read_some(bench_http *h, const char **body);

/* Reads one response.  Returns its status code, with *body pointing at
 * its NUL-terminated body inside h->buf, or -1 when the connection closed,
 * timed out or sent more than the buffer holds.  A response that says
 * "Connection: close" closes h (the body stays readable in h->buf). */
int bench_http_read(bench_http *h, const char **body);

/*
 * One request on the keep-alive connection h, connecting first when it is
 * not connected, and reconnecting once when the request fails on it (the
 * server may have closed an idle connection).  token: the Bearer token, or
 * NULL for no Authorization header; body: a JSON body sent as
 * application/json, or NULL for none.  Returns the status (the body in
 * *resp_body as for bench_http_read), or -1; after -1, h is closed.
 */
int bench_http_request(bench_http *h, const char *method, const char *path,
                       const char *token, const char *body,
                       const char **resp_body);

#endif /* DLOCK_BENCH_HTTP_H */
