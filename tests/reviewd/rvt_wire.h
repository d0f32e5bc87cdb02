/*
 * rvt_wire.h: a raw HTTP/1.1 client for reviewd's tests of the wire
 * itself: keep-alive connections from a chosen loopback address, bytes
 * written exactly as given (malformed on purpose), and answers read one
 * at a time, so pipelined answers, interim 100 Continue answers and the
 * way a connection ends (EOF or reset) can all be seen.
 *
 * rvt_kit.h's client is the other kind (one request per connection,
 * Connection: close, well-formed): use it for the API; use this one for
 * framing, keep-alive and hostile clients (test_reviewd_edges.c,
 * test_reviewd_http.c).
 *
 * An rvt_wire is created by rvt_wire_dial and freed by rvt_wire_close;
 * it owns its socket and its read buffer (bytes read past one answer are
 * kept for the next).  An rvt_answer owns its parsed JSON until
 * rvt_answer_clear.  One thread per rvt_wire; every wait is bounded.
 */
#ifndef RVT_WIRE_H
#define RVT_WIRE_H

#include <jansson.h>
#include <stddef.h>

typedef struct rvt_wire {
    int fd;    /* -1 once closed */
    char *buf; /* bytes read and not yet consumed by an answer */
    size_t got;
    size_t cap;
} rvt_wire;

/* One parsed answer. */
typedef struct rvt_answer {
    int status;           /* 0: none (EOF, reset, timeout or not HTTP) */
    char why[64];         /* why there was none */
    char status_line[64]; /* as sent, without its CRLF */
    int fields;           /* how many header field lines it had */
    char request_id[160];
    char content_type[80];
    char connection[64]; /* the Connection header's value */
    int closes;          /* Connection: close */
    char body[4096];     /* the first 4 KiB of the body */
    size_t body_len;     /* the whole body's length */
    json_t *json;        /* the body parsed, when it is JSON */
} rvt_answer;

/* How a connection ended (rvt_wire_ended). */
enum { RVT_WIRE_OPEN = 0, RVT_WIRE_EOF = 1, RVT_WIRE_RESET = 2 };

/*
 * Connects to 127.0.0.1:port from source address src (any 127.x.y.z, so
 * per-address limits can be seen on loopback), with TCP_NODELAY.  Fails
 * the running cmocka test if it cannot connect.
 */
void rvt_wire_dial(rvt_wire *w, int port, const char *src);

/* Closes the socket and frees the buffer; does nothing when closed. */
void rvt_wire_close(rvt_wire *w);

/* Writes all of n bytes; -1 (errno kept) if the server reset or closed. */
int rvt_wire_send(rvt_wire *w, const char *p, size_t n);

/*
 * Reads one answer within timeout_ms: a status line, headers, and a body
 * framed by Content-Length or chunked (none after a HEAD, or for 1xx,
 * 204 and 304).  An interim 100 Continue is an answer of its own.  Bytes
 * after it stay in w for the next call.
 */
void rvt_wire_read(rvt_wire *w, int head, int timeout_ms, rvt_answer *a);

/*
 * RVT_WIRE_EOF or RVT_WIRE_RESET if the server ends the connection
 * within ms while we keep still (bytes it sends meanwhile are dropped),
 * else RVT_WIRE_OPEN.
 */
int rvt_wire_ended(rvt_wire *w, int ms);

/* Frees a's JSON and zeroes it. */
void rvt_answer_clear(rvt_answer *a);

/* 1 if a is an error as docs/api.md says every error is: JSON
 * (Content-Type application/json) with an X-Request-Id and, unless it
 * answers a HEAD, a {code, detail} body of strings. */
int rvt_answer_is_json_error(const rvt_answer *a, int head);

#endif /* RVT_WIRE_H */
