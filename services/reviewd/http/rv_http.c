/*
 * rv_http.c: libmicrohttpd glue: request state, body, responses, access
 * log and metrics, and the connection hygiene MHD does not give us.
 *
 * libmicrohttpd calls the access handler several times per request:
 *   1. first call (headers complete, *con_cls NULL): we build the request
 *      state, match the route and run the checks that need only headers
 *      (our own URL and header-size limits, then rv_dispatch_early);
 *   2. zero or more calls with body data: appended under the 1 MiB cap
 *      and the process-wide body budget (REVIEWD_BODY_BUFFER_MB); past
 *      the cap, or once a check of step 1 has failed, the rest is read
 *      and discarded (0.9.75 cannot queue a response mid-upload);
 *   3. a last call with no data: the request is dispatched and answered.
 *      A handler that may wait on a server runs on the worker pool
 *      (rv_jobs.h) with the connection suspended, and MHD calls us once
 *      more when the worker resumes it, to send the reply; only those
 *      that answer from memory (/healthz) run on the event loop, so no
 *      blocked request can hold them up.  The one exception is a
 *      document read (rv_doc_loop.h): its statement is sent without
 *      waiting on the loop's own PostgreSQL connection, the connection
 *      suspended, and the loop that reads the answer sets the reply and
 *      resumes it, never leaving the thread; when that connection
 *      cannot take it, or loses it, the read goes to the workers.
 *
 * The event loops are ours (rv_loop.h), each running one daemon in
 * external epoll mode; the listener hands each new connection to the
 * next loop in turn.  The per-address limit is counted across them
 * (rv_peers.h).
 * An answer decided in step 1 is sent in step 3, after the body: MHD
 * closes a connection it answered with request bytes still unread, and
 * the kernel turns that close into a reset that destroys the answer
 * before the client reads it (a client writing a 1 MiB + 1 body never
 * saw its 413).  Reading the rest keeps the connection, and the answer,
 * intact.  Only a body declared over RV_DISCARD_MAX is answered at once
 * (and may be reset), as is one the client holds back until "100
 * Continue" (Expect), and one that keeps coming past it is cut off.
 *
 * Deadlines (rv_conns.h): a request's line and headers are due
 * REVIEWD_HEADER_TIMEOUT_S after the connection opens or its request
 * line arrives; its body REVIEWD_BODY_TIMEOUT_S after the headers; the
 * next request on a kept-alive connection within the idle timeout plus
 * the header timeout after the last answer.  No byte moves a deadline.
 * MHD's per-address limit (REVIEWD_MAX_CONNECTIONS_PER_IP) keeps one
 * client from taking every slot.
 *
 * The completion callback then logs the request, records its metrics and
 * frees its state.  A request is counted in app->inflight from 1 to the
 * completion callback, which is what SIGTERM's drain waits on.
 *
 * The request path makes no system call of its own beyond the database's:
 * request ids come from a counter (new_request_id) and the log line is
 * formatted in place (svc_log_line) and written with others in one
 * write(2) (svc_log_buffer, REVIEWD_LOG_FLUSH_MS).
 */
#include "http/rv_http.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "handlers/rv_console.h"
#include "handlers/rv_doc_loop.h"
#include "http/rv_conns.h"
#include "http/rv_dispatch.h"
#include "db/rv_db.h"
#include "http/rv_jobs.h"
#include "http/rv_listener.h"
#include "http/rv_loop.h"
#include "http/rv_peers.h"
#include "svc_deadline.h"
#include "svc_json.h"
#include "api/rv_request.h"

/* A client still sending this far past the cap is not making a mistake. */
#define RV_DISCARD_MAX (8 * RV_BODY_MAX)
/* The per-connection pool bounds the request line and headers; our own
 * limits below sit under it, so a request over them gets our JSON 414 or
 * 431 and only one far over them MHD's own HTML answer. */
#define RV_CONN_MEMORY (32 * 1024)
#define RV_URL_MAX (8 * 1024)
#define RV_HEADERS_MAX (16 * 1024)
/* Connections the kernel holds for us while reviewd is busy or full. */
#define RV_LISTEN_BACKLOG 1024

/* The most event loops (one per CPU, at most the workers). */
#define RV_LOOPS_MAX 16

struct rv_http {
    rv_app *app;
    unsigned nloops;
    struct MHD_Daemon *daemons[RV_LOOPS_MAX]; /* no socket of their own */
    rv_loop *loops[RV_LOOPS_MAX];             /* each runs one daemon */
    atomic_uint next_loop;        /* the loop the next connection gets */
    rv_peers *peers;              /* connections per address */
    rv_listener *listener;        /* accepts for them (rv_listener.h) */
    atomic_long admitted;         /* handed to MHD and not closed yet */
    unsigned char id_prefix[9];   /* random, drawn once at start */
    uint64_t id_key;              /* random: keys the permutation */
    atomic_uint_fast64_t id_next; /* requests numbered from 1 */
    rv_conns *conns;              /* open connections, their deadlines */
    rv_jobs *jobs;                /* the handlers' threads (rv_jobs.h) */
    int64_t header_ms;            /* REVIEWD_HEADER_TIMEOUT_S */
    int64_t body_ms;              /* REVIEWD_BODY_TIMEOUT_S */
    int64_t idle_ms;              /* REVIEWD_CONNECTION_TIMEOUT_S */
    size_t body_budget;           /* REVIEWD_BODY_BUFFER_MB, in bytes */
    atomic_size_t body_reserved;  /* body buffers' capacity, all requests */
};

/* Per-request state behind MHD's con_cls. */
typedef struct http_req {
    rv_http *http;
    rv_conn *conn; /* the connection's deadline (NULL: none kept) */
    rv_request req;
    rv_reply reply;
    char *body;
    size_t len;
    size_t cap; /* reserved from http->body_budget */
    int too_large;
    int no_room;       /* the body budget is spent */
    int decided;       /* reply set before the body: discard, then send */
    rv_job job;        /* the handler's run on the worker pool */
    rv_dba_query read; /* or its statement on the loop's connection */
    rv_loop *loop;     /* the event loop serving the connection */
    int64_t due_ms;    /* read sent: the budget's end (else 0) */
    struct MHD_Connection *mhd; /* suspended while the job runs */
    int handed_over;            /* the job was queued, or read sent */
    atomic_int ran;             /* the job has set the reply */
    size_t discarded;
    struct timespec start;
} http_req;

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

static const char *header(struct MHD_Connection *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

/* Collects query arguments into req->query (NULL if one is not UTF-8). */
static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind,
                                   const char *key, const char *value)
{
    rv_request *req = cls;
    json_t *v;

    (void)kind;
    if (req->query == NULL)
        return MHD_NO;
    if (value == NULL)
        value = "";
    if (json_object_get(req->query, key) != NULL) {
        req->query_dup = key;
        return MHD_YES;
    }
    v = json_string(value);
    if (v == NULL || json_object_set_new(req->query, key, v) != 0) {
        /* Not UTF-8 (or no memory): rv_dispatch answers 400. */
        json_decref(req->query);
        req->query = NULL;
        return MHD_NO;
    }
    return MHD_YES;
}

/* Content-Length as a number, -1 when absent or unparsable (MHD itself
 * refuses a malformed one before calling us). */
static int64_t declared_length(struct MHD_Connection *conn)
{
    const char *v = header(conn, MHD_HTTP_HEADER_CONTENT_LENGTH);
    char *end = NULL;
    long long n;

    if (v == NULL)
        return -1;
    errno = 0;
    n = strtoll(v, &end, 10);
    return (errno != 0 || end == v || n < 0) ? INT64_MAX : (int64_t)n;
}

/* Our record of an MHD connection (NULL if it could not be made). */
static rv_conn *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(
        conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return info != NULL ? info->socket_context : NULL;
}

static http_req *http_req_new(rv_http *http, struct MHD_Connection *conn,
                              const char *url, const char *method)
{
    rv_app *app = http->app;
    http_req *h = calloc(1, sizeof(*h));
    const char *rid;

    if (h == NULL)
        return NULL;
    clock_gettime(CLOCK_MONOTONIC, &h->start);
    h->http = http;
    h->loop = rv_loop_current();
    h->conn = conn_of(conn);
    h->req.app = app;
    h->req.method = method;
    h->req.path = url;
    h->req.method_kind = rv_router_method(method);
    h->req.lock_outcome = "";
    rid = header(conn, "X-Request-Id");
    if (rid != NULL && request_id_ok(rid))
        snprintf(h->req.request_id, sizeof(h->req.request_id), "%s", rid);
    else
        new_request_id(http, h->req.request_id, sizeof(h->req.request_id));
    h->req.authorization = header(conn, MHD_HTTP_HEADER_AUTHORIZATION);
    h->req.content_type = header(conn, MHD_HTTP_HEADER_CONTENT_TYPE);
    h->req.idempotency_key = header(conn, "Idempotency-Key");
    h->req.if_none_match = header(conn, MHD_HTTP_HEADER_IF_NONE_MATCH);
#ifdef REVIEWD_TESTING
    h->req.hook_pause = header(conn, "X-Test-Pause-Ms");
    h->req.hook_fail = header(conn, "X-Test-Fail");
#endif
    h->req.query = json_object();
    if (h->req.query != NULL) {
        MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, collect_arg,
                                  &h->req);
    }
    rv_router_match(url, h->req.method_kind, &h->req.match);
    atomic_fetch_add(&app->inflight, 1);
    return h;
}

static void http_req_free(http_req *h)
{
    atomic_fetch_sub(&h->http->body_reserved, h->cap);
    json_decref(h->req.query);
    rv_reply_clear(&h->reply);
    free(h->body);
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

static enum MHD_Result add_header(struct MHD_Response *r, const char *name,
                                  const char *value)
{
    return MHD_add_response_header(r, name, value);
}

/* The console's headers (rv_console.c says why each). */
static void add_console_headers(struct MHD_Response *r, const rv_reply *reply)
{
    add_header(r, "Content-Security-Policy", RV_CONSOLE_CSP);
    add_header(r, "X-Content-Type-Options", "nosniff");
    add_header(r, "Referrer-Policy", "no-referrer");
    add_header(r, "X-Frame-Options", "DENY");
    if (reply->etag != NULL)
        add_header(r, MHD_HTTP_HEADER_ETAG, reply->etag);
}

/* Queues h->reply; the body moves to MHD. */
static enum MHD_Result respond(struct MHD_Connection *conn, http_req *h)
{
    rv_reply *reply = &h->reply;
    struct MHD_Response *r;
    enum MHD_Result rc;

    if (reply->status == 0)
        rv_reply_error(reply, 500, "INTERNAL", "no reply was produced");
    if (reply->body != NULL) {
        r = MHD_create_response_from_buffer(strlen(reply->body), reply->body,
                                            MHD_RESPMEM_MUST_FREE);
    } else if (reply->static_body != NULL) {
        r = MHD_create_response_from_buffer(reply->static_len,
                                            (void *)reply->static_body,
                                            MHD_RESPMEM_PERSISTENT);
    } else {
        r = MHD_create_response_from_buffer(0, (char *)"",
                                            MHD_RESPMEM_PERSISTENT);
    }
    if (r == NULL)
        return MHD_NO;
    reply->body = NULL;
    add_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
               reply->content_type != NULL ? reply->content_type
                                           : "application/json");
    add_header(r, "X-Request-Id", h->req.request_id);
    add_header(r, MHD_HTTP_HEADER_CACHE_CONTROL,
               reply->cache_control != NULL ? reply->cache_control
                                            : "no-store");
    if (reply->console_headers)
        add_console_headers(r, reply);
    if (reply->allow != NULL)
        add_header(r, MHD_HTTP_HEADER_ALLOW, reply->allow);
    if (reply->location[0] != '\0')
        add_header(r, MHD_HTTP_HEADER_LOCATION, reply->location);
    rc = MHD_queue_response(conn, reply->status, r);
    MHD_destroy_response(r);
    return rc;
}

/* Adds one header line's length ("Name: value\r\n") to *cls. */
static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind,
                                    const char *key, const char *value)
{
    size_t *n = cls;

    (void)kind;
    *n += strlen(key) + (value != NULL ? strlen(value) : 0) + 4;
    return MHD_YES;
}

/* Our own transport limits, checked on the headers before the route's:
 * answered in JSON, unlike MHD's answers to requests over its pool. */
static int over_limits(struct MHD_Connection *conn, const char *url,
                       rv_reply *reply)
{
    size_t headers = 0;

    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_header, &headers);
    if (strlen(url) > RV_URL_MAX) {
        rv_reply_error(reply, 414, "URI_TOO_LONG", "the path is over 8 KiB");
        return 1;
    }
    if (headers > RV_HEADERS_MAX) {
        rv_reply_error(reply, 431, "HEADERS_TOO_LARGE",
                       "the headers are over 16 KiB");
        return 1;
    }
    return 0;
}

/* 1 if the client waits for "100 Continue" before sending its body. */
static int expects_continue(struct MHD_Connection *conn)
{
    const char *v = header(conn, MHD_HTTP_HEADER_EXPECT);

    return v != NULL && strcasecmp(v, "100-continue") == 0;
}

/* Step 1: the headers are in. */
static enum MHD_Result on_headers(rv_http *http, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  void **con_cls)
{
    http_req *h = http_req_new(http, conn, url, method);
    int64_t declared;

    if (h == NULL)
        return MHD_NO; /* out of memory: drop this connection only */
    *con_cls = h;
    if (!rv_conn_arm(h->conn, rv_conns_now_ms() + http->body_ms))
        return MHD_NO; /* the reaper has answered 408 */
    declared = declared_length(conn);
    if (!over_limits(conn, url, &h->reply)
        && !rv_dispatch_early(&h->req, declared, &h->reply))
        return MHD_YES;
    if (declared > (int64_t)RV_DISCARD_MAX || expects_continue(conn)) {
        /* Not worth reading, or not sent until we say so (Expect:
         * 100-continue): answered now, and MHD closes after it. */
        rv_conn_arm(h->conn, 0);
        return respond(conn, h);
    }
    h->decided = 1; /* sent in step 3, once the body is read */
    return MHD_YES;
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
 * MHD calls on_completed (after the client has the answer). */
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

/* A worker's run of one request: the handler, then the connection back
 * to its event loop, which sends the reply (step 3 again). */
static void job_main(rv_job *job)
{
    http_req *h = (http_req *)((char *)job - offsetof(http_req, job));
    struct MHD_Connection *conn = h->mhd;
    rv_loop *loop = h->loop;

    run_handler(h);
    release_body(h);
    /* h may be answered and freed from here on: conn and loop were read
     * before. */
    atomic_store(&h->ran, 1);
    MHD_resume_connection(conn);
    if (loop != NULL)
        rv_loop_wake(loop);
}

/* Queues the handler of a suspended connection on the worker pool. */
static void push_job(http_req *h)
{
    h->job.run = job_main;
    if (rv_jobs_push(h->http->jobs, &h->job) != 0) {
        /* Stopping: no worker will run it. */
        rv_reply_error(&h->reply, 503, "UNAVAILABLE",
                       "the service is shutting down");
        release_body(h);
        atomic_store(&h->ran, 1);
        MHD_resume_connection(h->mhd);
        if (h->loop != NULL)
            rv_loop_wake(h->loop);
    }
}

/* Suspends the connection and queues its handler on the worker pool, so
 * this event-loop thread goes on serving its other connections. */
static enum MHD_Result hand_over(struct MHD_Connection *conn, http_req *h)
{
    h->mhd = conn;
    h->handed_over = 1;
    MHD_suspend_connection(conn);
    push_job(h);
    return MHD_YES;
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
    release_body(h);
    atomic_store(&h->ran, 1);
    MHD_resume_connection(h->mhd);
}

/* A document read sent on this loop's PostgreSQL connection, with the
 * connection suspended until read_done (which may run before this
 * returns, if the connection fails while sending); 0 when the request
 * is not one (the caller hands it over).  A read the connection cannot
 * take goes to the workers. */
static int read_on_loop(struct MHD_Connection *conn, http_req *h)
{
    rv_dba *dba;

    /* rv_doc_loop_fits covers every check of rv_dispatch_late. */
    if (h->loop == NULL || !h->req.app->cfg->loop_reads
        || !rv_doc_loop_fits(&h->req))
        return 0;
    dba = rv_loop_db(h->loop);
    if (dba == NULL)
        return 0; /* none ready (one is being made) */
    h->read.done = read_done;
    h->mhd = conn;
    h->handed_over = 1;
    h->due_ms = svc_deadline_now_ms() + h->req.app->cfg->request_budget_ms;
    MHD_suspend_connection(conn);
    if (rv_doc_loop_send(dba, &h->req, &h->read) != 0) {
        h->due_ms = 0; /* not sent: the whole budget is the worker's */
        push_job(h);
    }
    return 1;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    http_req *h = *con_cls;

    (void)version;
    if (h == NULL)
        return on_headers(cls, conn, url, method, con_cls);
    if (*upload_data_size > 0) {
        absorb(h, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return h->discarded > RV_DISCARD_MAX ? MHD_NO : MHD_YES;
    }
    if (h->handed_over) {
        /* Resumed by the worker (hand_over); anything earlier is a call
         * MHD makes before the suspension took, answered next time. */
        return atomic_load(&h->ran) ? respond(conn, h) : MHD_YES;
    }
    if (!rv_conn_arm(h->conn, 0))
        return MHD_NO; /* the reaper has answered 408 */
    if (h->decided) {
        /* the reply of step 1 */
    } else if (h->too_large) {
        rv_reply_error(&h->reply, 413, "PAYLOAD_TOO_LARGE",
                       "the request body is over 1 MiB");
    } else if (h->no_room) {
        rv_reply_error(&h->reply, 503, "UNAVAILABLE",
                       "too many request "
                       "bodies in flight; retry later");
    } else if (!rv_dispatch_in_memory(&h->req)) {
        return read_on_loop(conn, h) ? MHD_YES : hand_over(conn, h);
    } else {
        run_handler(h);
    }
    release_body(h);
    return respond(conn, h);
}

static const char *termination_name(enum MHD_RequestTerminationCode toe)
{
    switch (toe) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK: return "ok";
    case MHD_REQUEST_TERMINATED_WITH_ERROR: return "error";
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED: return "timeout";
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN: return "shutdown";
    case MHD_REQUEST_TERMINATED_READ_ERROR: return "read_error";
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT: return "client_abort";
    }
    return "unknown";
}

/* The request's line in the access log, built field by field
 * (svc_log_line): a path that is not UTF-8 is left out of it. */
static void log_request(http_req *h, double secs,
                        enum MHD_RequestTerminationCode toe)
{
    svc_log_line line;

    if (!svc_log_line_begin(h->req.app->log, SVC_LOG_INFO, "request", &line))
        return;
    svc_log_line_str(&line, "request_id", h->req.request_id);
    svc_log_line_str(&line, "method", h->req.method);
    svc_log_line_str(&line, "path", h->req.path);
    svc_log_line_str(&line, "route", rv_router_path_label(h->req.match.path));
    svc_log_line_int(&line, "status", (long long)h->reply.status);
    svc_log_line_fixed3(&line, "duration_ms", secs * 1e3);
    if (h->req.authenticated)
        svc_log_line_str(&line, "user", h->req.who.sub);
    if (h->req.lock_outcome[0] != '\0')
        svc_log_line_str(&line, "lock", h->req.lock_outcome);
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
        svc_log_line_str(&line, "terminated", termination_name(toe));
    svc_log_line_end(&line);
}

static void on_completed(void *cls, struct MHD_Connection *conn,
                         void **con_cls, enum MHD_RequestTerminationCode toe)
{
    rv_http *http = cls;
    rv_app *app = http->app;
    http_req *h = *con_cls;
    double secs;

    /* The next request on a kept-alive connection: MHD's idle timeout
     * for its first byte, then the header timeout for the rest. */
    rv_conn_arm(conn_of(conn),
                rv_conns_now_ms() + http->idle_ms + http->header_ms);
    if (h == NULL)
        return;
    *con_cls = NULL;
    secs = elapsed_s(&h->start);
    if (h->reply.status != 0) {
        rv_metrics_request(app->metrics, h->req.match.path, h->req.method_kind,
                           h->reply.status, secs);
    }
    log_request(h, secs, toe);
    http_req_free(h);
    atomic_fetch_sub(&app->inflight, 1);
}

static void on_connection(void *cls, struct MHD_Connection *conn,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    rv_http *http = cls;
    const union MHD_ConnectionInfo *info;

    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        atomic_fetch_add(&http->app->connections, 1);
        info = MHD_get_connection_info(conn,
                                       MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = info == NULL
                              ? NULL
                              : rv_conns_add(http->conns, info->connect_fd,
                                             rv_conns_now_ms()
                                                 + http->header_ms);
    } else {
        /* Called before MHD closes the socket (rv_conns.h). */
        rv_conns_remove(http->conns, *socket_context);
        *socket_context = NULL;
        info = MHD_get_connection_info(conn,
                                       MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (info != NULL && info->client_addr != NULL)
            rv_peers_remove(http->peers, info->client_addr);
        atomic_fetch_sub(&http->app->connections, 1);
        atomic_fetch_sub(&http->admitted, 1);
    }
}

/* The request line is in: its headers are due within the header
 * timeout (sooner if the connection's own deadline is sooner). */
static void *on_request_line(void *cls, const char *uri,
                             struct MHD_Connection *conn)
{
    rv_http *http = cls;

    (void)uri;
    rv_conn_arm_by(conn_of(conn), rv_conns_now_ms() + http->header_ms);
    return NULL;
}

/* The reaper's answer to a client past its deadline: a JSON 408 written
 * straight to the socket (MHD is reading, never writing, in the phases
 * that have a deadline), then both directions shut, which MHD sees as
 * the end of the stream and closes the connection. */
static void on_deadline(void *cls, int fd)
{
    static const char body[] =
        "{\"code\":\"REQUEST_TIMEOUT\",\"detail\":\"the request's headers "
        "or body did not arrive in time\"}";
    rv_http *http = cls;
    char rid[40], msg[512];
    int n;

    new_request_id(http, rid, sizeof(rid));
    n = snprintf(msg, sizeof(msg),
                 "HTTP/1.1 408 Request Timeout\r\n"
                 "Content-Type: application/json\r\n"
                 "X-Request-Id: %s\r\nCache-Control: no-store\r\n"
                 "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
                 rid, sizeof(body) - 1, body);
    if (n > 0 && (size_t)n < sizeof(msg)) {
        /* Best effort: a client that reads nothing never sees it. */
        (void)send(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    shutdown(fd, SHUT_RDWR);
    svc_log_write(http->app->log, SVC_LOG_INFO, "http_deadline",
                  json_pack("{s:s,s:i}", "request_id", rid, "status", 408));
}

/* MHD's own diagnostics (bad requests, limits) into our log. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    rv_app *app = cls;
    char msg[256];
    size_t n;

    vsnprintf(msg, sizeof(msg), fmt, ap);
    n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n')
        msg[--n] = '\0';
    svc_log_write(app->log, SVC_LOG_DEBUG, "http_server",
                  json_pack("{s:s}", "detail", msg));
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

/* The event loops read, write, answer from memory and send reads
 * without waiting: one per CPU is enough, and never more than the
 * workers they feed. */
static unsigned event_loops(const rv_config *cfg)
{
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const long n = cpus < 1 ? 1 : cpus > RV_LOOPS_MAX ? RV_LOOPS_MAX : cpus;

    return (unsigned)(n < cfg->threads ? n : cfg->threads);
}

/* libmicrohttpd's fatal errors (MHD_PANIC: for one, a daemon stopped
 * while a connection is still suspended, or the race of
 * MHD_quiesce_daemon that rv_listener.h avoids) abort the process; the
 * default says so only on stderr.  This puts the reason in reviewd's own log
 * first, then aborts as MHD requires. */
static void on_mhd_panic(void *cls, const char *file, unsigned int line,
                         const char *reason)
{
    rv_app *app = cls;

    svc_log_write(app->log, SVC_LOG_ERROR, "http_panic",
                  json_pack("{s:s, s:i, s:s}", "file", file ? file : "?",
                            "line", (int)line, "reason",
                            reason ? reason : "?"));
    abort();
}

/* A connection no daemon took: its counts are given back. */
static void not_taken(rv_http *http, const struct sockaddr *addr,
                      const char *why)
{
    atomic_fetch_sub(&http->admitted, 1);
    rv_peers_remove(http->peers, addr);
    svc_log_write(http->app->log, SVC_LOG_DEBUG, "http_server",
                  json_pack("{s:s,s:s}", "detail",
                            "a new connection was not taken", "error", why));
}

/* On a loop's thread: the connection to its daemon, which closes fd
 * itself if it cannot take it (its limits, or no memory); d is NULL
 * when the loop stopped first. */
static void on_adopt(void *cls, struct MHD_Daemon *d, int fd,
                     const struct sockaddr *addr, socklen_t addrlen)
{
    rv_http *http = cls;

    if (d == NULL) {
        close(fd);
        not_taken(http, addr, "stopping");
    } else if (MHD_add_connection(d, fd, addr, addrlen) != MHD_YES) {
        not_taken(http, addr, strerror(errno));
    }
}

/* A connection the listener accepted, to the next event loop in turn,
 * unless its address has REVIEWD_MAX_CONNECTIONS_PER_IP already (then it
 * is closed at once, as MHD's own per-address limit did). */
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
    if (rv_loop_hand(http->loops[i], fd, addr, addrlen) != 0) {
        close(fd);
        not_taken(http, addr, "stopping, or out of memory");
    }
}

/*
 * Room for one more connection under REVIEWD_MAX_CONNECTIONS.  The count
 * is ours and exact (admitted: up when handed over, down when MHD says
 * closed or refuses it), because MHD's own limit must never be reached
 * by a connection added from outside: in 0.9.75 an event loop that meets
 * its limit there returns still holding its cleanup mutex and deadlocks
 * on the next lock.  So MHD's limit is set out of reach (rv_http_start)
 * and this is the one that holds.  A connection MHD drops for want of
 * memory before announcing it stays counted (MHD tells us nothing).
 */
static int has_room(void *cls)
{
    rv_http *http = cls;

    return atomic_load(&http->admitted)
           < (long)http->app->cfg->max_connections;
}

/* The listener, once MHD runs; on failure MHD is stopped again and
 * errbuf says why. */
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
 * pool's threads first, while the loops still send what they resume;
 * then the loops (each ends its reads, which the stopped pool refuses
 * with 503, and runs its daemon once more); then the daemons, which
 * must not stop with a connection suspended; then the pool. */
static void teardown(rv_http *http)
{
    unsigned i;

    rv_jobs_stop(http->jobs);
    for (i = 0; i < http->nloops; i++)
        rv_loop_stop(http->loops[i]);
    for (i = 0; i < http->nloops; i++) {
        rv_loop_free(http->loops[i]);
        if (http->daemons[i] != NULL)
            MHD_stop_daemon(http->daemons[i]);
    }
    rv_jobs_free(http->jobs);
    rv_peers_free(http->peers);
    rv_conns_free(http->conns);
    free(http);
}

/* One daemon in external epoll mode, for one of our loops. */
static struct MHD_Daemon *start_daemon(rv_http *http)
{
    const rv_config *cfg = http->app->cfg;
    const unsigned flags = MHD_USE_EPOLL | MHD_USE_ITC | MHD_USE_ERROR_LOG
                           | MHD_ALLOW_SUSPEND_RESUME
                           | MHD_USE_NO_LISTEN_SOCKET;

    /* MHD's own limits are out of reach: has_room and rv_peers count
     * across the loops. */
    return MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, http, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)cfg->max_connections + 1, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)cfg->connection_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)RV_CONN_MEMORY,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, http,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, http,
        MHD_OPTION_URI_LOG_CALLBACK, on_request_line, http,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, http->app, MHD_OPTION_END);
}

/* Each worker's first act: its PostgreSQL connection (rv_db.h), so a
 * burst of first requests does not make them inside its budgets. */
static void warm_worker(void *db)
{
    rv_db_thread_warm(db);
}

/* The daemons and their loops; -1 with errbuf set. */
static int start_loops(rv_http *http, char *errbuf, size_t errlen)
{
    const unsigned n = event_loops(http->app->cfg);

    for (http->nloops = 0; http->nloops < n; http->nloops++) {
        const unsigned i = http->nloops;

        http->daemons[i] = start_daemon(http);
        if (http->daemons[i] == NULL) {
            snprintf(errbuf, errlen, "http: cannot start libmicrohttpd");
            return -1;
        }
        http->loops[i] = rv_loop_start(http->daemons[i], http->app->db,
                                       on_adopt, http, errbuf, errlen);
        if (http->loops[i] == NULL) {
            http->nloops++; /* so that teardown stops its daemon */
            return -1;
        }
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
    MHD_set_panic_func(on_mhd_panic, app);
    draw_id_prefix(http);
    http->header_ms = (int64_t)cfg->header_timeout_s * 1000;
    http->body_ms = (int64_t)cfg->body_timeout_s * 1000;
    http->idle_ms = (int64_t)cfg->connection_timeout_s * 1000;
    http->body_budget = (size_t)cfg->body_buffer_mb * 1024 * 1024;
    atomic_init(&http->body_reserved, 0);
    atomic_init(&http->admitted, 0);
    atomic_init(&http->next_loop, 0);
    http->peers = rv_peers_new((unsigned)cfg->max_connections_per_ip);
    http->conns = rv_conns_new(on_deadline, http, errbuf, errlen);
    if (http->peers == NULL || http->conns == NULL) {
        if (http->peers == NULL)
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
    /* New clients are refused from here on (no MHD_quiesce_daemon:
     * rv_listener.h says why). */
    rv_listener_stop(http->listener);
    clock_gettime(CLOCK_MONOTONIC, &start);
    /* Polling a counter at 10 ms is fine here: this runs once, at exit,
     * and the bound is the drain timeout. */
    while (atomic_load(&http->app->inflight) > 0
           && elapsed_s(&start) < (double)drain_s)
        nanosleep(&pause, NULL);
    /* Every handler finishes and resumes its connection before MHD,
     * which must not stop with a connection suspended, closes them
     * (teardown).  The pool is freed only after MHD: until then a
     * kept-alive connection may still bring a request, which the stopped
     * pool refuses (503). */
    teardown(http);
}
