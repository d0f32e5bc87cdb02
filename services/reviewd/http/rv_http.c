/*
 * rv_http.c: reviewd's HTTP/1.1 server: connections on the event loops
 * (rv_loop.h), requests parsed by rv_hparse.h, the request state, body,
 * responses, access log and metrics, and connection hygiene.
 *
 * Why our own and not a library's: every answer reviewd sends is JSON
 * {"code","detail"} with an X-Request-Id, gets an access-log line and is
 * counted, including the refusals of requests that cannot be parsed
 * (libmicrohttpd answered those itself, in HTML, unseen); and handing a
 * request to a worker and back costs no epoll_ctl here (each socket is
 * registered once, edge-triggered; the worker's finished request comes
 * back through the loop's queue, rv_loop_post).
 *
 * A connection lives on one loop, which alone reads, writes and closes
 * it, and walks it through these states:
 *   C_HEAD   reading the request's head; the parser decides as the bytes
 *            arrive (a refusal is answered at once);
 *   C_BODY   the head is in: rv_dispatch_early ran, and the body is
 *            read, appended under the 1 MiB cap and the process-wide
 *            budget (REVIEWD_BODY_BUFFER_MB), or discarded past them or
 *            after an answer decided on the headers;
 *   C_RUN    the handler runs: on the worker pool (rv_jobs.h), or as a
 *            document read on the loop's own PostgreSQL connection
 *            (rv_doc_loop.h); nothing is read meanwhile, so pipelined
 *            requests wait in the kernel, in order;
 *   C_WRITE  the answer is written (one sendmsg of the head and body;
 *            the rest on EPOLLOUT); then the next request, or the close;
 *   C_LINGER the server closes while the client may still be sending:
 *            its write side is shut once the answer is out, and what
 *            arrives is read and dropped until the client closes, or
 *            RV_DISCARD_MAX bytes, or RV_LINGER_IDLE_MS without a byte,
 *            or RV_LINGER_MS in all, before close, so that the client's
 *            writes never meet a reset that destroys the answer before
 *            it is read (nginx's lingering close: a client that keeps
 *            sending is not cut off by a slow machine, one that stalls
 *            does not hold its slot).
 *
 * An answer decided on the headers is sent after the body, which is
 * read and dropped, keeping the connection; only a body declared over
 * RV_DISCARD_MAX, or held back until "100 Continue" (Expect), is
 * answered at once, and the connection closed (lingering).  "100
 * Continue" is sent only when the body will be read.
 *
 * Deadlines, kept by each loop's scan every RV_SCAN_MS: a request's line
 * and headers are due REVIEWD_HEADER_TIMEOUT_S after the connection
 * opens or the request's first byte arrives; its body
 * REVIEWD_BODY_TIMEOUT_S after the headers; the next request on a
 * kept-alive connection within the idle timeout plus the header timeout
 * after the last answer.  No byte moves a deadline; one missed is
 * answered 408.  A connection that moves no byte for
 * REVIEWD_CONNECTION_TIMEOUT_S (while no handler runs) is closed without
 * an answer.
 *
 * A request is counted in app->inflight from its head to the end of its
 * answer, which is what SIGTERM's drain waits on.
 *
 * The request path makes no system call of its own beyond reading,
 * writing and the database's: request ids come from a counter
 * (new_request_id), the Date header is formatted once a second per
 * thread, and the log line is formatted in place (svc_log_line) and
 * written with others in one write(2) (svc_log_buffer,
 * REVIEWD_LOG_FLUSH_MS).
 */
#include "http/rv_http.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "handlers/rv_console.h"
#include "handlers/rv_doc_loop.h"
#include "http/rv_dispatch.h"
#include "db/rv_db.h"
#include "http/rv_hparse.h"
#include "http/rv_jobs.h"
#include "http/rv_listener.h"
#include "http/rv_loop.h"
#include "http/rv_peers.h"
#include "svc_deadline.h"
#include "svc_json.h"
#include "api/rv_request.h"

/* A client still sending this far past the cap is not making a mistake. */
#define RV_DISCARD_MAX (8 * RV_BODY_MAX)
/* A connection's read buffer: a whole head at its limits, and room
 * after it to read the body. */
#define RV_BUF_SIZE (RV_HP_HEAD_MAX + 8 * 1024)
/* The response's status line and headers, at most. */
#define RV_HDR_MAX 2048
/* Lingering close: how long in all, and how long without a byte,
 * what the client still sends is read and dropped (how much: at most
 * RV_DISCARD_MAX). */
#define RV_LINGER_MS 30000
#define RV_LINGER_IDLE_MS 5000
/* Each loop looks at its connections' deadlines this often. */
#define RV_SCAN_MS 100
/* Connections the kernel holds for us while reviewd is busy or full. */
#define RV_LISTEN_BACKLOG 1024

/* The most event loops (one per CPU, at most the workers). */
#define RV_LOOPS_MAX 16

typedef struct http_conn http_conn;

/* One event loop's share: its connections, for the deadline scan. */
typedef struct http_loop {
    rv_http *http;
    rv_loop *loop;
    http_conn *conns; /* open connections, a list */
    int64_t next_scan;
} http_loop;

struct rv_http {
    rv_app *app;
    unsigned nloops;
    http_loop loops[RV_LOOPS_MAX];
    atomic_uint next_loop;        /* the loop the next connection gets */
    rv_peers *peers;              /* connections per address */
    rv_listener *listener;        /* accepts for them (rv_listener.h) */
    atomic_long admitted;         /* handed to a loop and not closed yet */
    unsigned char id_prefix[9];   /* random, drawn once at start */
    uint64_t id_key;              /* random: keys the permutation */
    atomic_uint_fast64_t id_next; /* requests numbered from 1 */
    rv_jobs *jobs;                /* the handlers' threads (rv_jobs.h) */
    int64_t header_ms;            /* REVIEWD_HEADER_TIMEOUT_S */
    int64_t body_ms;              /* REVIEWD_BODY_TIMEOUT_S */
    int64_t idle_ms;              /* REVIEWD_CONNECTION_TIMEOUT_S */
    size_t body_budget;           /* REVIEWD_BODY_BUFFER_MB, in bytes */
    atomic_size_t body_reserved;  /* body buffers' capacity, all requests */
};

/* One request, from its head (or a refusal) to the end of its answer. */
typedef struct http_req {
    rv_http *http;
    http_conn *c;
    rv_request req;
    rv_reply reply;
    char *body;
    size_t len;
    size_t cap; /* reserved from http->body_budget */
    int too_large;
    int no_room;       /* the body budget is spent */
    int decided;       /* reply set before the body: discard, then send */
    int head_only;     /* HEAD: no body in the answer */
    rv_job job;        /* the handler's run on the worker pool */
    rv_dba_query read; /* or its statement on the loop's connection */
    rv_loop_item done; /* the handler's end, back on the loop */
    rv_loop *loop;     /* the event loop serving the connection */
    int64_t due_ms;    /* read sent: the budget's end (else 0) */
    size_t discarded;
    struct timespec start;
    /* The answer: hdr, then body (out_len bytes, HEAD: none). */
    char hdr[RV_HDR_MAX];
    size_t hdr_len;
    const char *out;
    size_t out_len;
    size_t sent;
} http_req;

enum conn_state { C_HEAD, C_BODY, C_RUN, C_WRITE, C_LINGER };

struct http_conn {
    http_conn *prev;
    http_conn *next;
    http_loop *hl;
    int fd;
    socklen_t addrlen;
    struct sockaddr_storage addr;
    enum conn_state state;
    int readable;    /* edge-triggered: not known to be drained */
    int eof;         /* the client has shut its side */
    int broken;      /* a write failed: the client is gone */
    int busy;        /* advance() is running (no re-entry) */
    int dead;        /* closed while busy: advance() ends it */
    int line_armed;  /* the request's first bytes moved the deadline */
    const char *why; /* ... and what to log */
    int close_after; /* close once the answer is written */
    int linger;      /* ... lingering: the client may still send */
    char *buf;       /* RV_BUF_SIZE bytes */
    size_t len;
    size_t body_off; /* C_BODY: the next body byte in buf */
    size_t req_end;  /* the current request's end in buf */
    rv_hhead head;
    rv_hbody body;
    http_req *h;
    int64_t deadline;    /* headers or body due (0: none) */
    int64_t last_active; /* the last byte moved */
    int64_t linger_until;
    size_t lingered;
};

static int64_t now_ms(void)
{
    return svc_deadline_now_ms();
}

static double elapsed_s(const struct timespec *start)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec)
           + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

/* An X-Request-Id we echo: 1..128 printable ASCII characters. */
static int request_id_ok(const char *id)
{
    size_t n;

    for (n = 0; id[n] != '\0'; n++)
        if ((unsigned char)id[n] < 0x20 || (unsigned char)id[n] > 0x7E)
            return 0;
    return n >= 1 && n <= 128;
}

/*
 * A request id for a request that brought none, a UUID of version 4's
 * form: the first 66 bits (version and variant aside) drawn from the OS
 * once per process, the last 56 a keyed permutation of a counter.  So it
 * is unique within the process (the permutation never repeats before
 * 2^56 requests), unlikely to repeat across processes, and looks random,
 * without a getrandom(2) per request (2 % of a GET's CPU).  Request ids
 * are for tracing, never a secret.
 */
static void new_request_id(rv_http *http, char *out, size_t outlen)
{
    const uint64_t mask = (UINT64_C(1) << 56) - 1;
    uint64_t n = atomic_fetch_add(&http->id_next, 1);
    unsigned char b[16];

    /* Each step is a bijection of 56-bit values. */
    n = (n * UINT64_C(0x9E3779B97F4A7C15)) & mask;
    n ^= http->id_key & mask;
    n ^= n >> 29;
    memcpy(b, http->id_prefix, 9);
    for (int i = 0; i < 7; i++)
        b[9 + i] = (unsigned char)(n >> (48 - 8 * i));
    b[6] = (unsigned char)((b[6] & 0x0F) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3F) | 0x80);
    snprintf(out, outlen,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
             b[11], b[12], b[13], b[14], b[15]);
}

/* The prefix of this process's request ids; the clock stands in if the
 * OS has no randomness to give (ids stay unique within the process). */
static void draw_id_prefix(rv_http *http)
{
    unsigned char r[17];

    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        memset(r, 0, sizeof(r));
        memcpy(r, &ts, sizeof(ts) < sizeof(r) ? sizeof(ts) : sizeof(r));
    }
    memcpy(http->id_prefix, r, 9);
    memcpy(&http->id_key, r + 9, 8);
    atomic_init(&http->id_next, 1);
}

/* Collects one query argument into req->query (NULL if one is not
 * UTF-8); a key given twice is named in query_dup, its value unread. */
static int collect_arg(void *cls, const char *key, const char *value)
{
    rv_request *req = cls;
    json_t *v;

    if (value == NULL)
        value = "";
    if (json_object_get(req->query, key) != NULL) {
        req->query_dup = key;
        return 1;
    }
    v = json_string(value);
    if (v == NULL || json_object_set_new(req->query, key, v) != 0) {
        /* Not UTF-8 (or no memory): rv_dispatch answers 400. */
        json_decref(req->query);
        req->query = NULL;
        return 0;
    }
    return 1;
}

/* A request's state; method and headers are the connection's parsed
 * head when it has one (head), else the request is a refusal of the
 * parser (no route).  NULL without memory. */
static http_req *http_req_new(http_conn *c, int head)
{
    rv_http *http = c->hl->http;
    http_req *h = calloc(1, sizeof(*h));
    const char *rid = NULL;

    if (h == NULL)
        return NULL;
    clock_gettime(CLOCK_MONOTONIC, &h->start);
    h->http = http;
    h->c = c;
    h->loop = c->hl->loop;
    h->req.app = http->app;
    h->req.lock_outcome = "";
    if (c->head.line_done)
        rid = rv_hparse_header(&c->head, c->buf, "X-Request-Id");
    if (rid != NULL && request_id_ok(rid))
        snprintf(h->req.request_id, sizeof(h->req.request_id), "%s", rid);
    else
        new_request_id(http, h->req.request_id, sizeof(h->req.request_id));
    if (head) {
        char *target = (char *)c->head.target, *q = strchr(target, '?');

        h->req.method = c->head.method;
        h->req.method_kind = rv_router_method(c->head.method);
        h->head_only = h->req.method_kind == RV_METHOD_HEAD;
        h->req.authorization = rv_hparse_header(&c->head, c->buf,
                                                "Authorization");
        h->req.content_type = rv_hparse_header(&c->head, c->buf,
                                               "Content-Type");
        h->req.idempotency_key = rv_hparse_header(&c->head, c->buf,
                                                  "Idempotency-Key");
        h->req.if_none_match = rv_hparse_header(&c->head, c->buf,
                                                "If-None-Match");
#ifdef REVIEWD_TESTING
        h->req.hook_pause = rv_hparse_header(&c->head, c->buf,
                                             "X-Test-Pause-Ms");
        h->req.hook_fail = rv_hparse_header(&c->head, c->buf, "X-Test-Fail");
#endif
        /* The target is decoded in place: the path, then the query. */
        if (q != NULL)
            *q++ = '\0';
        rv_hparse_unescape(target);
        h->req.path = target;
        h->req.query = json_object();
        if (h->req.query != NULL && q != NULL)
            (void)rv_hparse_query(q, collect_arg, &h->req);
        rv_router_match(target, h->req.method_kind, &h->req.match);
    } else {
        h->req.method_kind = RV_METHOD_OTHER;
    }
    atomic_fetch_add(&http->app->inflight, 1);
    return h;
}

static void http_req_free(http_req *h)
{
    atomic_fetch_sub(&h->http->body_reserved, h->cap);
    json_decref(h->req.query);
    rv_reply_clear(&h->reply);
    free(h->body);
    atomic_fetch_sub(&h->http->app->inflight, 1);
    free(h);
}

/* Takes n bytes of the process's body budget; 0 if it is spent. */
static int reserve(rv_http *http, size_t n)
{
    const size_t before = atomic_fetch_add(&http->body_reserved, n);

    if (before + n > http->body_budget) {
        atomic_fetch_sub(&http->body_reserved, n);
        return 0;
    }
    return 1;
}

/* Appends body data, or counts it as discarded: past the cap, past the
 * budget, or after an answer decided on the headers. */
static void absorb(http_req *h, const char *data, size_t n)
{
    size_t cap;
    char *p;

    if (h->decided || h->too_large || h->no_room) {
        h->discarded += n;
        return;
    }
    if (n > RV_BODY_MAX - h->len) {
        h->too_large = 1;
        h->discarded += n;
        return;
    }
    if (h->len + n + 1 > h->cap) {
        cap = h->cap == 0 ? 4096 : h->cap;
        while (cap < h->len + n + 1)
            cap *= 2;
        if (!reserve(h->http, cap - h->cap)) {
            h->no_room = 1;
            h->discarded += n;
            return;
        }
        p = realloc(h->body, cap);
        if (p == NULL) {
            /* Answered like a spent budget (503), never crashed. */
            atomic_fetch_sub(&h->http->body_reserved, cap - h->cap);
            h->no_room = 1;
            h->discarded += n;
            return;
        }
        h->body = p;
        h->cap = cap;
    }
    memcpy(h->body + h->len, data, n);
    h->len += n;
    h->body[h->len] = '\0';
}

/* Runs the matched handler under the request's budget: every dependency
 * call of the request shares one (svc_deadline.h). */
static void run_handler(http_req *h)
{
    int budget = h->req.app->cfg->request_budget_ms;

    if (h->due_ms != 0) {
        /* A read the loop gave up: what is left of its budget. */
        const int64_t left = h->due_ms - svc_deadline_now_ms();

        budget = left < 1 ? 1 : left < budget ? (int)left : budget;
    }
    h->req.body = h->body != NULL ? h->body : "";
    h->req.body_len = h->len;
    svc_deadline_start(budget);
    rv_dispatch(&h->req, &h->reply);
    svc_deadline_clear();
}

/* The body is done with: its share of the budget is free now, not when
 * the answer has been written. */
static void release_body(http_req *h)
{
    h->req.body = NULL;
    h->req.body_len = 0;
    free(h->body);
    h->body = NULL;
    atomic_fetch_sub(&h->http->body_reserved, h->cap);
    h->cap = 0;
    h->len = 0;
}

static const char *reason_phrase(unsigned status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    }
    return "Unknown";
}

/* The Date header's value, formatted once a second per thread. */
static const char *http_date(void)
{
    static _Thread_local time_t last = (time_t)-1;
    static _Thread_local char text[40];
    const time_t now = time(NULL);
    struct tm tm;

    if (now != last && gmtime_r(&now, &tm) != NULL) {
        strftime(text, sizeof(text), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        last = now;
    }
    return text;
}

/* Appends a formatted piece to h->hdr; 0 if it does not fit. */
static int hdr_add(http_req *h, const char *name, const char *value)
{
    const size_t room = sizeof(h->hdr) - h->hdr_len;
    const int n = snprintf(h->hdr + h->hdr_len, room, "%s: %s\r\n", name,
                           value);

    if (n < 0 || (size_t)n >= room)
        return 0;
    h->hdr_len += (size_t)n;
    return 1;
}

/* The answer's bytes: h->hdr and the body to send.  1, or 0 when the
 * headers do not fit RV_HDR_MAX (never with our own values). */
static int build_answer(http_req *h, int close_after, int keep_alive_10)
{
    rv_reply *reply = &h->reply;
    const unsigned st = reply->status;
    const int no_body = st == 204 || st == 304 || (st >= 100 && st < 200);
    char len[32];
    int ok;

    if (reply->body != NULL) {
        h->out = reply->body;
        h->out_len = strlen(reply->body);
    } else if (reply->static_body != NULL) {
        h->out = reply->static_body;
        h->out_len = reply->static_len;
    } else {
        h->out = "";
        h->out_len = 0;
    }
    h->hdr_len = (size_t)snprintf(h->hdr, sizeof(h->hdr), "HTTP/1.1 %u %s\r\n",
                                  st, reason_phrase(st));
    snprintf(len, sizeof(len), "%zu", h->out_len);
    ok = hdr_add(h, "Date", http_date())
         && hdr_add(h, "Content-Type",
                    reply->content_type != NULL ? reply->content_type
                                                : "application/json")
         && (no_body || hdr_add(h, "Content-Length", len))
         && hdr_add(h, "X-Request-Id", h->req.request_id)
         && hdr_add(h, "Cache-Control",
                    reply->cache_control != NULL ? reply->cache_control
                                                 : "no-store");
    if (ok && reply->console_headers) {
        /* The console's headers (rv_console.c says why each). */
        ok = hdr_add(h, "Content-Security-Policy", RV_CONSOLE_CSP)
             && hdr_add(h, "X-Content-Type-Options", "nosniff")
             && hdr_add(h, "Referrer-Policy", "no-referrer")
             && hdr_add(h, "X-Frame-Options", "DENY")
             && (reply->etag == NULL || hdr_add(h, "ETag", reply->etag));
    }
    if (ok && reply->allow != NULL)
        ok = hdr_add(h, "Allow", reply->allow);
    if (ok && reply->location[0] != '\0')
        ok = hdr_add(h, "Location", reply->location);
    if (ok && close_after)
        ok = hdr_add(h, "Connection", "close");
    else if (ok && keep_alive_10)
        ok = hdr_add(h, "Connection", "keep-alive");
    if (ok && h->hdr_len + 2 < sizeof(h->hdr)) {
        memcpy(h->hdr + h->hdr_len, "\r\n", 2);
        h->hdr_len += 2;
    } else {
        ok = 0;
    }
    if (no_body || h->head_only)
        h->out_len = 0;
    h->sent = 0;
    return ok;
}

/* The request's line in the access log, built field by field
 * (svc_log_line): a path that is not UTF-8 is left out of it; a refusal
 * of a request that could not be parsed says so ("head"). */
static void log_request(http_req *h, double secs, const char *terminated)
{
    svc_log_line line;

    if (!svc_log_line_begin(h->req.app->log, SVC_LOG_INFO, "request", &line))
        return;
    svc_log_line_str(&line, "request_id", h->req.request_id);
    if (h->req.method != NULL) {
        svc_log_line_str(&line, "method", h->req.method);
        svc_log_line_str(&line, "path", h->req.path);
        svc_log_line_str(&line, "route",
                         rv_router_path_label(h->req.match.path));
    } else {
        svc_log_line_str(&line, "head", "unparsed");
    }
    svc_log_line_int(&line, "status", (long long)h->reply.status);
    svc_log_line_fixed3(&line, "duration_ms", secs * 1e3);
    if (h->req.authenticated)
        svc_log_line_str(&line, "user", h->req.who.sub);
    if (h->req.lock_outcome[0] != '\0')
        svc_log_line_str(&line, "lock", h->req.lock_outcome);
    if (terminated != NULL)
        svc_log_line_str(&line, "terminated", terminated);
    svc_log_line_end(&line);
}

/* The request is over (answered, or its connection gone): logged,
 * counted and freed. */
static void finish_request(http_conn *c, const char *terminated)
{
    http_req *h = c->h;
    double secs;

    if (h == NULL)
        return;
    c->h = NULL;
    secs = elapsed_s(&h->start);
    if (h->reply.status != 0) {
        rv_metrics_request(h->req.app->metrics, h->req.match.path,
                           h->req.method_kind, h->reply.status, secs);
    }
    log_request(h, secs, terminated);
    http_req_free(h);
}

/* A connection no loop took: its counts are given back. */
static void not_taken(rv_http *http, const struct sockaddr *addr,
                      const char *why)
{
    atomic_fetch_sub(&http->admitted, 1);
    rv_peers_remove(http->peers, addr);
    svc_log_write(http->app->log, SVC_LOG_DEBUG, "http_server",
                  json_pack("{s:s,s:s}", "detail",
                            "a new connection was not taken", "error", why));
}

/* Resolves the listen address (numeric or a name such as localhost). */
static int resolve_listen(const rv_config *cfg, struct sockaddr_storage *ss,
                          socklen_t *sslen, char *errbuf, size_t errlen)
{
    struct addrinfo hints, *res = NULL;
    char port[8];
    int rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    snprintf(port, sizeof(port), "%u", (unsigned)cfg->listen_port);
    rc = getaddrinfo(cfg->listen_host, port, &hints, &res);
    if (rc != 0 || res == NULL) {
        snprintf(errbuf, errlen, "LISTEN_ADDR: cannot resolve %s: %s",
                 cfg->listen_host, gai_strerror(rc));
        return -1;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *sslen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* ---- connections ------------------------------------------------------ */

static void advance(http_conn *c);

/* Closes c now: its request (if any) is logged as terminated, its slot
 * given back.  Never while a handler has its request (C_RUN). */
static void conn_close(http_conn *c, const char *terminated)
{
    http_loop *hl = c->hl;
    rv_http *http = hl->http;

    if (c->busy) {
        /* Inside advance(), which closes it on its way out. */
        c->dead = 1;
        c->why = terminated;
        return;
    }
    finish_request(c, terminated);
    close(c->fd);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        hl->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    rv_peers_remove(http->peers, (struct sockaddr *)&c->addr);
    atomic_fetch_sub(&http->app->connections, 1);
    atomic_fetch_sub(&http->admitted, 1);
    free(c->buf);
    free(c);
}

/* The rest of the current request has been dealt with: ready for the
 * next one, whose bytes may be in the buffer already (pipelined). */
static void next_request(http_conn *c)
{
    rv_http *http = c->hl->http;
    const int64_t now = now_ms();

    memmove(c->buf, c->buf + c->req_end, c->len - c->req_end);
    c->len -= c->req_end;
    c->req_end = 0;
    rv_hparse_init(&c->head);
    c->line_armed = 0;
    c->state = C_HEAD;
    c->deadline = now + http->idle_ms + http->header_ms;
}

/* Starts writing the answer set in c->h->reply: the connection closes
 * after it when close_after (lingering when the client may still be
 * sending: linger). */
static void answer(http_conn *c, int close_after, int linger)
{
    http_req *h = c->h;

    if (h->reply.status == 0)
        rv_reply_error(&h->reply, 500, "INTERNAL", "no reply was produced");
    release_body(h);
    c->close_after = close_after || !c->head.keep_alive;
    c->linger = linger;
    if (!build_answer(h, c->close_after,
                      c->head.minor == 0 && !c->close_after)) {
        rv_reply_clear(&h->reply);
        rv_reply_error(&h->reply, 500, "INTERNAL",
                       "the reply's headers are too large");
        (void)build_answer(h, c->close_after,
                           c->head.minor == 0 && !c->close_after);
    }
    c->deadline = 0;
    c->state = C_WRITE;
    advance(c);
}

/* A refusal without a request state of its own yet (the head could not
 * be parsed, or its deadline passed): answered, then closed. */
static void refuse(http_conn *c, unsigned status, const char *code,
                   const char *detail)
{
    if (c->h == NULL) {
        c->h = http_req_new(c, 0);
        if (c->h == NULL) {
            conn_close(c, "error");
            return;
        }
        if (c->head.line_done) {
            /* The line was parsed: log what it asked for. */
            c->h->req.method = c->head.method;
            c->h->req.path = c->head.target;
        }
    }
    rv_reply_clear(&c->h->reply);
    rv_reply_error(&c->h->reply, status, code, detail);
    answer(c, 1, 1);
}

/* The end of a handler's run, back on the loop's thread. */
static void job_done(rv_loop_item *item)
{
    http_req *h = (http_req *)((char *)item - offsetof(http_req, done));

    answer(h->c, 0, 0);
}

/* A worker's run of one request: the handler, then the request back to
 * its event loop, which sends the reply. */
static void job_main(rv_job *job)
{
    http_req *h = (http_req *)((char *)job - offsetof(http_req, job));

    run_handler(h);
    release_body(h);
    h->done.run = job_done;
    rv_loop_post(h->loop, &h->done);
}

/* Queues the handler on the worker pool, so this event-loop thread goes
 * on serving its other connections. */
static void push_job(http_req *h)
{
    h->c->state = C_RUN;
    h->job.run = job_main;
    if (rv_jobs_push(h->http->jobs, &h->job) != 0) {
        /* Stopping: no worker will run it. */
        rv_reply_error(&h->reply, 503, "UNAVAILABLE",
                       "the service is shutting down");
        release_body(h);
        h->done.run = job_done;
        rv_loop_post(h->loop, &h->done);
    }
}

/* The end of a document read sent from the loop (rv_doc_loop.h), on the
 * loop's thread: the reply, or the worker path. */
static void read_done(rv_dba_query *q, rv_dba_outcome outcome, PGresult *res)
{
    http_req *h = (http_req *)((char *)q - offsetof(http_req, read));

    if (!rv_doc_loop_finish(&h->req, outcome, res, &h->reply)) {
        push_job(h);
        return;
    }
    atomic_fetch_add(&h->req.app->loop_reads, 1);
    h->done.run = job_done;
    rv_loop_post(h->loop, &h->done);
}

/* A document read sent on this loop's PostgreSQL connection, answered
 * in read_done (which may run before this returns, if the connection
 * fails while sending); 0 when the request is not one (the caller hands
 * it over).  A read the connection cannot take goes to the workers. */
static int read_on_loop(http_req *h)
{
    rv_dba *dba;

    /* rv_doc_loop_fits covers every check of rv_dispatch_late. */
    if (!h->req.app->cfg->loop_reads || !rv_doc_loop_fits(&h->req))
        return 0;
    dba = rv_loop_db(h->loop);
    if (dba == NULL)
        return 0; /* none ready (one is being made) */
    h->c->state = C_RUN;
    h->read.done = read_done;
    h->due_ms = svc_deadline_now_ms() + h->req.app->cfg->request_budget_ms;
    if (rv_doc_loop_send(dba, &h->req, &h->read) != 0) {
        h->due_ms = 0; /* not sent: the whole budget is the worker's */
        push_job(h);
    }
    return 1;
}

/* The whole request is in (its body read or dropped): its answer. */
static void request_ready(http_conn *c)
{
    http_req *h = c->h;

    c->deadline = 0;
    if (h->decided) {
        /* the reply decided on the headers */
    } else if (h->too_large) {
        rv_reply_error(&h->reply, 413, "PAYLOAD_TOO_LARGE",
                       "the request body is over 1 MiB");
    } else if (h->no_room) {
        rv_reply_error(&h->reply, 503, "UNAVAILABLE",
                       "too many request bodies in flight; retry later");
    } else if (!rv_dispatch_in_memory(&h->req)) {
        if (!read_on_loop(h))
            push_job(h);
        return;
    } else {
        run_handler(h);
    }
    answer(c, 0, 0);
}

/* "HTTP/1.1 100 Continue": 1 if it went out whole. */
static int send_continue(http_conn *c)
{
    static const char msg[] = "HTTP/1.1 100 Continue\r\n\r\n";

    return send(c->fd, msg, sizeof(msg) - 1, MSG_NOSIGNAL | MSG_DONTWAIT)
           == (ssize_t)(sizeof(msg) - 1);
}

/* The head is in: the request's state, the checks on the headers, and
 * the body's reading. */
static void head_done(http_conn *c)
{
    rv_http *http = c->hl->http;
    const rv_hhead *hd = &c->head;
    const int has_body = hd->chunked || hd->content_length > 0;
    http_req *h = http_req_new(c, 1);

    if (h == NULL) {
        conn_close(c, "error"); /* out of memory: this connection only */
        return;
    }
    c->h = h;
    c->deadline = now_ms() + http->body_ms;
    c->body_off = hd->head_len;
    c->req_end = hd->head_len;
    rv_hbody_init(&c->body, hd, RV_DISCARD_MAX);
    if (rv_dispatch_early(&h->req, hd->chunked ? -1 : hd->content_length,
                          &h->reply)) {
        if (!has_body) {
            answer(c, 0, 0);
            return;
        }
        if (hd->content_length > (int64_t)RV_DISCARD_MAX
            || (hd->expect_continue && c->len == hd->head_len)) {
            /* Not worth reading, or not sent until we say so: answered
             * now, and the connection closed. */
            answer(c, 1, 1);
            return;
        }
        h->decided = 1; /* sent once the body is read and dropped */
    } else if (has_body && hd->expect_continue && c->len == hd->head_len
               && !send_continue(c)) {
        conn_close(c, "error");
        return;
    }
    if (!has_body) {
        request_ready(c);
        return;
    }
    c->state = C_BODY;
}

/* Body bytes buf[body_off..len): appended or dropped; the request is
 * ready at the body's end.  0 while more is needed. */
static int take_body(http_conn *c)
{
    while (c->body_off < c->len) {
        const char *data;
        size_t used, n;
        const rv_hp_result r = rv_hbody_feed(&c->body, c->buf + c->body_off,
                                             c->len - c->body_off, &used,
                                             &data, &n);

        if (n > 0)
            absorb(c->h, data, n);
        c->body_off += used;
        if (r == RV_HP_DONE) {
            c->req_end = c->body_off;
            request_ready(c);
            return 1;
        }
        if (r == RV_HP_ERROR) {
            if (!(c->h->decided && c->body.err.status == 413)) {
                rv_reply_clear(&c->h->reply);
                rv_reply_error(&c->h->reply, c->body.err.status,
                               c->body.err.code, c->body.err.detail);
            }
            answer(c, 1, 1);
            return 1;
        }
    }
    /* All used: the buffer keeps the head only. */
    c->len = c->body_off = c->head.head_len;
    if (c->body.chunked == 0 && c->body.left == 0) {
        c->req_end = c->body_off;
        request_ready(c);
        return 1;
    }
    return 0;
}

/* Reads what the socket has into the buffer; 1 if bytes came, 0 if
 * none (drained, the client's end, or an error: c->eof). */
static int read_some(http_conn *c)
{
    ssize_t n;

    if (!c->readable || c->eof || c->len >= RV_BUF_SIZE)
        return 0;
    n = recv(c->fd, c->buf + c->len, RV_BUF_SIZE - c->len, 0);
    if (n > 0) {
        c->len += (size_t)n;
        c->last_active = now_ms();
        return 1;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR))
        c->eof = 1;
    if (n < 0 && errno == EAGAIN)
        c->readable = 0;
    return 0;
}

/* Writes what is left of the answer; 1 when all of it is out. */
static int write_some(http_conn *c)
{
    http_req *h = c->h;

    for (;;) {
        const size_t total = h->hdr_len + h->out_len;
        struct iovec iov[2];
        struct msghdr msg;
        int k = 0;
        ssize_t n;

        if (h->sent >= total)
            return 1;
        if (h->sent < h->hdr_len) {
            iov[k].iov_base = h->hdr + h->sent;
            iov[k++].iov_len = h->hdr_len - h->sent;
        }
        if (h->out_len > 0) {
            const size_t off = h->sent > h->hdr_len ? h->sent - h->hdr_len : 0;

            iov[k].iov_base = (char *)h->out + off;
            iov[k++].iov_len = h->out_len - off;
        }
        memset(&msg, 0, sizeof(msg));
        msg.msg_iov = iov;
        msg.msg_iovlen = (size_t)k;
        n = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            if (errno != EAGAIN)
                c->broken = 1; /* gone: closed by the caller */
            return 0;
        }
        h->sent += (size_t)n;
        c->last_active = now_ms();
    }
}

/* The answer is out: the next request, or the close. */
static void answer_sent(http_conn *c)
{
    finish_request(c, NULL);
    if (!c->close_after) {
        next_request(c);
        return;
    }
    if (!c->linger || shutdown(c->fd, SHUT_WR) != 0) {
        conn_close(c, NULL);
        return;
    }
    c->state = C_LINGER;
    c->linger_until = now_ms() + RV_LINGER_MS;
    c->lingered = 0;
}

/* Drives c as far as its bytes allow.  A call made while it runs (an
 * answer set from inside) is folded into the running one. */
static void advance(http_conn *c)
{
    if (c->busy)
        return;
    c->busy = 1;
    for (;;) {
        if (c->dead) {
            c->busy = 0;
            conn_close(c, c->why);
            return;
        }
        switch (c->state) {
        case C_HEAD: {
            const rv_hp_result r = rv_hparse_head(&c->head, c->buf, c->len);

            if (r == RV_HP_DONE) {
                head_done(c);
                continue;
            }
            if (r == RV_HP_ERROR) {
                refuse(c, c->head.err.status, c->head.err.code,
                       c->head.err.detail);
                continue;
            }
            if (c->len >= RV_BUF_SIZE) {
                /* Not reached: the parser decides within its limits. */
                refuse(c, 431, "HEADERS_TOO_LARGE",
                       "the request's head is too large");
                continue;
            }
            if (c->head.started && !c->line_armed) {
                /* The request's first bytes: its head is due within the
                 * header timeout (sooner if the deadline is sooner). */
                const int64_t due = now_ms() + c->hl->http->header_ms;

                c->line_armed = 1;
                if (c->deadline == 0 || due < c->deadline)
                    c->deadline = due;
            }
            if (read_some(c))
                continue;
            if (c->eof) {
                conn_close(c, c->len > 0 ? "client_abort" : NULL);
                continue;
            }
            break;
        }
        case C_BODY:
            if (take_body(c))
                continue;
            if (read_some(c))
                continue;
            if (c->eof) {
                conn_close(c, "client_abort");
                continue;
            }
            break;
        case C_RUN: break;
        case C_WRITE:
            if (write_some(c)) {
                answer_sent(c);
                continue;
            }
            if (c->broken) {
                conn_close(c, "client_abort");
                continue;
            }
            break;
        case C_LINGER:
            while (c->readable && !c->eof && c->lingered < RV_DISCARD_MAX) {
                c->len = 0;
                if (read_some(c))
                    c->lingered += c->len;
            }
            c->len = 0;
            if (c->eof || c->lingered >= RV_DISCARD_MAX) {
                conn_close(c, NULL);
                continue;
            }
            break;
        }
        break;
    }
    c->busy = 0;
}

/* Socket events of c (rv_loop_ops.io). */
static void on_io(void *cls, void *ptr, uint32_t events)
{
    http_conn *c = ptr;

    (void)cls;
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        c->readable = 1;
    if (c->state == C_RUN) {
        /* Nothing is read or written while the handler runs. */
        return;
    }
    advance(c);
}

/* The deadlines and timeouts of c at now (the loop's scan). */
static void check_times(http_conn *c, int64_t now)
{
    rv_http *http = c->hl->http;

    switch (c->state) {
    case C_HEAD:
        if (c->len == 0 && now - c->last_active >= http->idle_ms) {
            conn_close(c, NULL); /* idle between requests */
            return;
        }
        /* fall through */
    case C_BODY:
        if (c->deadline != 0 && now >= c->deadline) {
            refuse(c, 408, "REQUEST_TIMEOUT",
                   "the request's headers or body did not arrive in time");
            return;
        }
        if (now - c->last_active >= http->idle_ms)
            conn_close(c, "timeout");
        return;
    case C_WRITE:
        if (now - c->last_active >= http->idle_ms)
            conn_close(c, "timeout");
        return;
    case C_LINGER:
        if (now >= c->linger_until
            || now - c->last_active >= RV_LINGER_IDLE_MS)
            conn_close(c, NULL);
        return;
    case C_RUN: return;
    }
}

/* Each pass of a loop (rv_loop_ops.tick): the scan of deadlines when due;
 * the ms until the next one (-1: no connection, nothing to scan). */
static int on_tick(void *cls)
{
    http_loop *hl = cls;
    const int64_t now = now_ms();
    http_conn *c, *next;

    if (hl->conns == NULL)
        return -1;
    if (now >= hl->next_scan) {
        hl->next_scan = now + RV_SCAN_MS;
        for (c = hl->conns; c != NULL; c = next) {
            next = c->next;
            check_times(c, now);
        }
    }
    return (int)(hl->next_scan - now);
}

/* A connection the listener accepted, on its loop's thread: l is NULL
 * when the loop stopped first. */
static void on_adopt(void *cls, rv_loop *l, int fd,
                     const struct sockaddr *addr, socklen_t addrlen)
{
    http_loop *hl = cls;
    rv_http *http = hl->http;
    http_conn *c = l != NULL ? calloc(1, sizeof(*c)) : NULL;
    const int on = 1;

    if (c != NULL)
        c->buf = malloc(RV_BUF_SIZE);
    if (c == NULL || c->buf == NULL || addrlen > sizeof(c->addr)
        || rv_loop_watch(l, fd, c) != 0) {
        if (c != NULL)
            free(c->buf);
        free(c);
        close(fd);
        not_taken(http, addr, l == NULL ? "stopping" : "out of memory");
        return;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    c->hl = hl;
    c->fd = fd;
    c->addrlen = addrlen;
    memcpy(&c->addr, addr, addrlen);
    rv_hparse_init(&c->head);
    c->state = C_HEAD;
    c->last_active = now_ms();
    c->deadline = c->last_active + http->header_ms;
    c->next = hl->conns;
    if (hl->conns != NULL)
        hl->conns->prev = c;
    hl->conns = c;
    atomic_fetch_add(&http->app->connections, 1);
    if (hl->next_scan == 0)
        hl->next_scan = c->last_active + RV_SCAN_MS;
    /* The events of bytes that came before the registration are lost
     * to it (edge-triggered): look now. */
    c->readable = 1;
    advance(c);
}

/* The loop stopped (rv_loop_ops.stopped): every connection is closed;
 * none is C_RUN by now (the pool and the reads have ended, their
 * answers run). */
static void on_stopped(void *cls)
{
    http_loop *hl = cls;

    while (hl->conns != NULL) {
        http_conn *c = hl->conns;

        if (c->state == C_RUN) {
            /* Not expected; its request stays with whoever has it. */
            c->h = NULL;
        }
        conn_close(c, "shutdown");
    }
}

static const rv_loop_ops loop_ops = {on_adopt, on_io, on_tick, on_stopped};

/* The event loops read, write, answer from memory and send reads
 * without waiting: one per CPU is enough, and never more than the
 * workers they feed. */
static unsigned event_loops(const rv_config *cfg)
{
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const long n = cpus < 1 ? 1 : cpus > RV_LOOPS_MAX ? RV_LOOPS_MAX : cpus;

    return (unsigned)(n < cfg->threads ? n : cfg->threads);
}

/* A connection the listener accepted, to the next event loop in turn,
 * unless its address has REVIEWD_MAX_CONNECTIONS_PER_IP already (then it
 * is closed at once). */
static void on_accepted(void *cls, int fd, const struct sockaddr *addr,
                        socklen_t addrlen)
{
    rv_http *http = cls;
    const unsigned i = atomic_fetch_add(&http->next_loop, 1) % http->nloops;

    if (!rv_peers_add(http->peers, addr)) {
        close(fd);
        svc_log_write(http->app->log, SVC_LOG_DEBUG, "http_server",
                      json_pack("{s:s}", "detail",
                                "a new connection is over the limit "
                                "per address"));
        return;
    }
    atomic_fetch_add(&http->admitted, 1);
    if (rv_loop_hand(http->loops[i].loop, fd, addr, addrlen) != 0) {
        close(fd);
        not_taken(http, addr, "stopping, or out of memory");
    }
}

/* Room for one more connection under REVIEWD_MAX_CONNECTIONS: admitted
 * is up when a connection is handed to a loop, down when it is closed. */
static int has_room(void *cls)
{
    rv_http *http = cls;

    return atomic_load(&http->admitted)
           < (long)http->app->cfg->max_connections;
}

/* The listener, once the loops run; on failure errbuf says why. */
static int start_listener(rv_http *http, const struct sockaddr_storage *ss,
                          socklen_t sslen, uint16_t *port, char *errbuf,
                          size_t errlen)
{
    const rv_config *cfg = http->app->cfg;
    char why[256];

    http->listener = rv_listener_start((const struct sockaddr *)ss, sslen,
                                       RV_LISTEN_BACKLOG, on_accepted,
                                       has_room, http, port, why, sizeof(why));
    if (http->listener != NULL)
        return 0;
    snprintf(errbuf, errlen,
             "LISTEN_ADDR: cannot listen on %s:%u "
             "(in use, or not a local address: %s)",
             cfg->listen_host, (unsigned)cfg->listen_port, why);
    return -1;
}

/* Stops and frees what rv_http_start made (NULL members are fine): the
 * pool's threads first, while the loops still send what they finish
 * (their requests come back through rv_loop_post); then the loops (each
 * ends its reads, which the stopped pool refuses with 503, answers
 * what came back, and closes its connections); then the pool. */
static void teardown(rv_http *http)
{
    unsigned i;

    rv_jobs_stop(http->jobs);
    for (i = 0; i < http->nloops; i++)
        rv_loop_stop(http->loops[i].loop);
    for (i = 0; i < http->nloops; i++)
        rv_loop_free(http->loops[i].loop);
    rv_jobs_free(http->jobs);
    rv_peers_free(http->peers);
    free(http);
}

/* Each worker's first act: its PostgreSQL connection (rv_db.h), so a
 * burst of first requests does not make them inside its budgets. */
static void warm_worker(void *db)
{
    rv_db_thread_warm(db);
}

/* The event loops; -1 with errbuf set. */
static int start_loops(rv_http *http, char *errbuf, size_t errlen)
{
    const unsigned n = event_loops(http->app->cfg);

    for (http->nloops = 0; http->nloops < n; http->nloops++) {
        http_loop *hl = &http->loops[http->nloops];

        hl->http = http;
        hl->loop = rv_loop_start(http->app->db, &loop_ops, hl, errbuf, errlen);
        if (hl->loop == NULL)
            return -1;
    }
    return 0;
}

rv_http *rv_http_start(rv_app *app, uint16_t *port, char *errbuf,
                       size_t errlen)
{
    const rv_config *cfg = app->cfg;
    struct sockaddr_storage ss;
    socklen_t sslen = 0;
    rv_http *http;

    if (resolve_listen(cfg, &ss, &sslen, errbuf, errlen) != 0)
        return NULL;
    http = calloc(1, sizeof(*http));
    if (http == NULL) {
        snprintf(errbuf, errlen, "http: out of memory");
        return NULL;
    }
    http->app = app;
    draw_id_prefix(http);
    http->header_ms = (int64_t)cfg->header_timeout_s * 1000;
    http->body_ms = (int64_t)cfg->body_timeout_s * 1000;
    http->idle_ms = (int64_t)cfg->connection_timeout_s * 1000;
    http->body_budget = (size_t)cfg->body_buffer_mb * 1024 * 1024;
    atomic_init(&http->body_reserved, 0);
    atomic_init(&http->admitted, 0);
    atomic_init(&http->next_loop, 0);
    http->peers = rv_peers_new((unsigned)cfg->max_connections_per_ip);
    if (http->peers == NULL) {
        snprintf(errbuf, errlen, "http: out of memory");
        teardown(http);
        return NULL;
    }
    http->jobs = rv_jobs_start(cfg->threads,
                               http->app->db != NULL ? warm_worker : NULL,
                               http->app->db, errbuf, errlen);
    if (http->jobs == NULL || start_loops(http, errbuf, errlen) != 0
        || start_listener(http, &ss, sslen, port, errbuf, errlen) != 0) {
        teardown(http);
        return NULL;
    }
    return http;
}

void rv_http_stop(rv_http *http, int drain_s)
{
    struct timespec start, pause = {0, 10 * 1000 * 1000};

    if (http == NULL)
        return;
    /* New clients are refused from here on. */
    rv_listener_stop(http->listener);
    clock_gettime(CLOCK_MONOTONIC, &start);
    /* Polling a counter at 10 ms is fine here: this runs once, at exit,
     * and the bound is the drain timeout. */
    while (atomic_load(&http->app->inflight) > 0
           && elapsed_s(&start) < (double)drain_s)
        nanosleep(&pause, NULL);
    /* Every handler finishes and its answer is sent (teardown); a
     * kept-alive connection may still bring a request until its loop
     * stops, which the stopped pool refuses (503). */
    teardown(http);
}
