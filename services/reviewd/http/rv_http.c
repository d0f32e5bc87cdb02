/*
 * rv_http.c: libmicrohttpd glue: request state, body, responses, access
 * log and metrics.
 *
 * libmicrohttpd calls the access handler several times per request:
 *   1. first call (headers complete, *con_cls NULL): we build the request
 *      state, match the route and run the checks that need only headers
 *      (rv_dispatch_early); a failed check is answered at once, before
 *      any body is read (MHD then closes the connection);
 *   2. zero or more calls with body data: appended under the 1 MiB cap;
 *      past the cap the rest is discarded (0.9.75 cannot queue a response
 *      mid-upload) and the answer is 413, and a client that keeps sending
 *      far beyond the cap is cut off;
 *   3. a last call with no data: the request is dispatched and answered.
 * The completion callback then logs the request, records its metrics and
 * frees its state.  A request is counted in app->inflight from 1 to the
 * completion callback, which is what SIGTERM's drain waits on.
 *
 * The request path makes no system call of its own beyond the database's
 * and the one write(2) of its log line: request ids come from a counter
 * (new_request_id) and the log line is formatted in place (svc_log_line).
 */
#include "http/rv_http.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/rv_dispatch.h"
#include "svc_json.h"
#include "api/rv_request.h"

/* A client still sending this far past the cap is not making a mistake. */
#define RV_DISCARD_MAX (8 * RV_BODY_MAX)
/* The per-connection pool bounds the request line and headers. */
#define RV_CONN_MEMORY (32 * 1024)

struct rv_http {
    rv_app *app;
    struct MHD_Daemon *daemon;
    unsigned char id_prefix[9];     /* random, drawn once at start */
    uint64_t id_key;                /* random: keys the permutation */
    atomic_uint_fast64_t id_next;   /* requests numbered from 1 */
};

/* Per-request state behind MHD's con_cls. */
typedef struct http_req {
    rv_request req;
    rv_reply reply;
    char *body;
    size_t len;
    size_t cap;
    int too_large;
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

    for (n = 0; id[n] != '\0'; n++) {
        if ((unsigned char)id[n] < 0x20 || (unsigned char)id[n] > 0x7E) {
            return 0;
        }
    }
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
    for (int i = 0; i < 7; i++) {
        b[9 + i] = (unsigned char)(n >> (48 - 8 * i));
    }
    b[6] = (unsigned char)((b[6] & 0x0F) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3F) | 0x80);
    snprintf(out, outlen,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
             b[10], b[11], b[12], b[13], b[14], b[15]);
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
    if (req->query == NULL) {
        return MHD_NO;
    }
    if (value == NULL) {
        value = "";
    }
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

    if (v == NULL) {
        return -1;
    }
    errno = 0;
    n = strtoll(v, &end, 10);
    return (errno != 0 || end == v || n < 0) ? INT64_MAX : (int64_t)n;
}

static http_req *http_req_new(rv_http *http, struct MHD_Connection *conn,
                              const char *url, const char *method)
{
    rv_app *app = http->app;
    http_req *h = calloc(1, sizeof(*h));
    const char *rid;

    if (h == NULL) {
        return NULL;
    }
    clock_gettime(CLOCK_MONOTONIC, &h->start);
    h->req.app = app;
    h->req.method = method;
    h->req.path = url;
    h->req.method_kind = rv_router_method(method);
    h->req.lock_outcome = "";
    rid = header(conn, "X-Request-Id");
    if (rid != NULL && request_id_ok(rid)) {
        snprintf(h->req.request_id, sizeof(h->req.request_id), "%s", rid);
    } else {
        new_request_id(http, h->req.request_id, sizeof(h->req.request_id));
    }
    h->req.authorization = header(conn, MHD_HTTP_HEADER_AUTHORIZATION);
    h->req.content_type = header(conn, MHD_HTTP_HEADER_CONTENT_TYPE);
    h->req.idempotency_key = header(conn, "Idempotency-Key");
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
    json_decref(h->req.query);
    rv_reply_clear(&h->reply);
    free(h->body);
    free(h);
}

/* Appends body data, or counts it as discarded past the cap. */
static void absorb(http_req *h, const char *data, size_t n)
{
    size_t cap;
    char *p;

    if (h->too_large || n > RV_BODY_MAX - h->len) {
        h->too_large = 1;
        h->discarded += n;
        return;
    }
    if (h->len + n + 1 > h->cap) {
        cap = h->cap == 0 ? 4096 : h->cap;
        while (cap < h->len + n + 1) {
            cap *= 2;
        }
        p = realloc(h->body, cap);
        if (p == NULL) {
            /* Treat like an oversized body: answered 413, never crashed. */
            h->too_large = 1;
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

/* Queues h->reply; the body moves to MHD. */
static enum MHD_Result respond(struct MHD_Connection *conn, http_req *h)
{
    rv_reply *reply = &h->reply;
    struct MHD_Response *r;
    enum MHD_Result rc;

    if (reply->status == 0) {
        rv_reply_error(reply, 500, "INTERNAL", "no reply was produced");
    }
    if (reply->body != NULL) {
        r = MHD_create_response_from_buffer(strlen(reply->body), reply->body,
                                            MHD_RESPMEM_MUST_FREE);
    } else {
        r = MHD_create_response_from_buffer(0, (char *)"",
                                            MHD_RESPMEM_PERSISTENT);
    }
    if (r == NULL) {
        return MHD_NO;
    }
    reply->body = NULL;
    add_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
               reply->content_type != NULL ? reply->content_type
                                           : "application/json");
    add_header(r, "X-Request-Id", h->req.request_id);
    add_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (reply->allow != NULL) {
        add_header(r, MHD_HTTP_HEADER_ALLOW, reply->allow);
    }
    if (reply->location[0] != '\0') {
        add_header(r, MHD_HTTP_HEADER_LOCATION, reply->location);
    }
    rc = MHD_queue_response(conn, reply->status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version,
                                  const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    http_req *h = *con_cls;

    (void)version;
    if (h == NULL) {
        h = http_req_new(cls, conn, url, method);
        if (h == NULL) {
            return MHD_NO; /* out of memory: drop this connection only */
        }
        *con_cls = h;
        if (rv_dispatch_early(&h->req, declared_length(conn), &h->reply)) {
            return respond(conn, h);
        }
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        absorb(h, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return h->discarded > RV_DISCARD_MAX ? MHD_NO : MHD_YES;
    }
    if (h->too_large) {
        rv_reply_error(&h->reply, 413, "PAYLOAD_TOO_LARGE",
                       "the request body is over 1 MiB");
    } else {
        h->req.body = h->body != NULL ? h->body : "";
        h->req.body_len = h->len;
        rv_dispatch(&h->req, &h->reply);
    }
    return respond(conn, h);
}

static const char *termination_name(enum MHD_RequestTerminationCode toe)
{
    switch (toe) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK:
        return "ok";
    case MHD_REQUEST_TERMINATED_WITH_ERROR:
        return "error";
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED:
        return "timeout";
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN:
        return "shutdown";
    case MHD_REQUEST_TERMINATED_READ_ERROR:
        return "read_error";
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT:
        return "client_abort";
    }
    return "unknown";
}

/* The request's line in the access log, built field by field
 * (svc_log_line): a path that is not UTF-8 is left out of it. */
static void log_request(http_req *h, double secs,
                        enum MHD_RequestTerminationCode toe)
{
    svc_log_line line;

    if (!svc_log_line_begin(h->req.app->log, SVC_LOG_INFO, "request", &line)) {
        return;
    }
    svc_log_line_str(&line, "request_id", h->req.request_id);
    svc_log_line_str(&line, "method", h->req.method);
    svc_log_line_str(&line, "path", h->req.path);
    svc_log_line_str(&line, "route", rv_router_path_label(h->req.match.path));
    svc_log_line_int(&line, "status", (long long)h->reply.status);
    svc_log_line_fixed3(&line, "duration_ms", secs * 1e3);
    if (h->req.authenticated) {
        svc_log_line_str(&line, "user", h->req.who.sub);
    }
    if (h->req.lock_outcome[0] != '\0') {
        svc_log_line_str(&line, "lock", h->req.lock_outcome);
    }
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
        svc_log_line_str(&line, "terminated", termination_name(toe));
    }
    svc_log_line_end(&line);
}

static void on_completed(void *cls, struct MHD_Connection *conn,
                         void **con_cls, enum MHD_RequestTerminationCode toe)
{
    rv_app *app = cls;
    http_req *h = *con_cls;
    double secs;

    (void)conn;
    if (h == NULL) {
        return;
    }
    *con_cls = NULL;
    secs = elapsed_s(&h->start);
    if (h->reply.status != 0) {
        rv_metrics_request(app->metrics, h->req.match.path,
                           h->req.method_kind, h->reply.status, secs);
    }
    log_request(h, secs, toe);
    http_req_free(h);
    atomic_fetch_sub(&app->inflight, 1);
}

static void on_connection(void *cls, struct MHD_Connection *conn,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    rv_app *app = cls;

    (void)conn;
    (void)socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        atomic_fetch_add(&app->connections, 1);
    } else {
        atomic_fetch_sub(&app->connections, 1);
    }
}

/* MHD's own diagnostics (bad requests, limits) into our log. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    rv_app *app = cls;
    char msg[256];
    size_t n;

    vsnprintf(msg, sizeof(msg), fmt, ap);
    n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n') {
        msg[--n] = '\0';
    }
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

rv_http *rv_http_start(rv_app *app, uint16_t *port, char *errbuf,
                       size_t errlen)
{
    const rv_config *cfg = app->cfg;
    struct sockaddr_storage ss;
    socklen_t sslen = 0;
    const union MHD_DaemonInfo *info;
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC
                     | MHD_USE_ERROR_LOG;
    rv_http *http;

    if (resolve_listen(cfg, &ss, &sslen, errbuf, errlen) != 0) {
        return NULL;
    }
    if (ss.ss_family == AF_INET6) {
        flags |= MHD_USE_IPv6;
    }
    http = calloc(1, sizeof(*http));
    if (http == NULL) {
        snprintf(errbuf, errlen, "http: out of memory");
        return NULL;
    }
    http->app = app;
    draw_id_prefix(http);
    http->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, http,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->threads,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->connection_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)RV_CONN_MEMORY,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, app,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, app,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, app,
        MHD_OPTION_END);
    if (http->daemon == NULL) {
        snprintf(errbuf, errlen, "LISTEN_ADDR: cannot listen on %s:%u "
                 "(in use, or not a local address)", cfg->listen_host,
                 (unsigned)cfg->listen_port);
        free(http);
        return NULL;
    }
    info = MHD_get_daemon_info(http->daemon, MHD_DAEMON_INFO_BIND_PORT);
    *port = info != NULL ? info->port : cfg->listen_port;
    return http;
}

void rv_http_stop(rv_http *http, int drain_s)
{
    struct timespec start, pause = {0, 10 * 1000 * 1000};
    MHD_socket listen_fd;

    if (http == NULL) {
        return;
    }
    listen_fd = MHD_quiesce_daemon(http->daemon);
    if (listen_fd != MHD_INVALID_SOCKET) {
        close(listen_fd);
    }
    clock_gettime(CLOCK_MONOTONIC, &start);
    /* Polling a counter at 10 ms is fine here: this runs once, at exit,
     * and the bound is the drain timeout. */
    while (atomic_load(&http->app->inflight) > 0
           && elapsed_s(&start) < (double)drain_s) {
        nanosleep(&pause, NULL);
    }
    MHD_stop_daemon(http->daemon);
    free(http);
}
