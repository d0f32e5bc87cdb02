/*
 * svc_amqp_conn.c: the AMQP connection shared by the relay's publisher and
 * kh-indexer's consumer (see svc_amqp_conn.h).
 *
 * svc_amqp_conn_open does the steps in the order AMQP requires (socket,
 * protocol header and handshake inside amqp_login, channel.open), and
 * stops at the first failure with that step's name in err, so the person
 * on call reads "amqp 127.0.0.1:5672: login: ..." rather than a bare
 * status.
 *
 * For amqps:// the socket is rabbitmq-c's OpenSSL one, and everything
 * about trust is set before the connect: the CA file (or the system's
 * default store, which rabbitmq-c would otherwise leave empty), peer and
 * hostname verification always on, and the client certificate when one
 * is configured.  A failed verification ends the connect before the
 * login, so credentials never reach a broker we could not verify.
 *
 * The step guard: rabbitmq-c 0.11.0 bounds the connect, the handshake and
 * the wait for an RPC's reply, but not every wait.  Every send
 * (amqp_send_method, amqp_basic_publish) polls for POLLOUT with
 * amqp_time_infinite(), and amqp_read_message waits through
 * amqp_simple_wait_frame_on_channel, again with amqp_time_infinite(): a
 * broker that stops reading, or stops writing half way through a message,
 * stalls the caller for good.  So each blocking step of the owner runs
 * between svc_amqp_conn_step_begin and _end, and a thread of this module
 * (started with the connection object, one per owner) shuts the socket
 * down when a step outlives its bound.  shutdown(2) makes the blocked
 * poll or recv return at once, rabbitmq-c reports a socket error, and the
 * owner's failure path records "no answer within N ms" and drops the
 * connection.  The bound is the step's own timeout plus a little slack,
 * so a timeout rabbitmq-c does enforce is reported as its own.
 */
#include "svc_amqp_conn.h"

#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "svc_env.h"

/* Added to a step's bound, so that rabbitmq-c's own timeouts (when it has
 * them) fire first and keep their exact message. */
#define SVC_AMQP_GUARD_SLACK_MS 250

/* The watchdog of one connection (see the top of the file). */
typedef struct step_guard {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    pthread_t thread;
    int fd;           /* the socket of the step in progress, -1: none */
    int64_t deadline; /* ms, CLOCK_MONOTONIC */
    int bound_ms;     /* the step's bound, for the message */
    int fired;        /* the current or last step was cut short */
    int idle;         /* the thread waits with no deadline: signal it */
    int64_t waking;   /* ms: when the thread wakes by itself, if not idle */
    int quit;
} step_guard;

struct svc_amqp_conn {
    char *url_copy; /* amqp_parse_url writes into it */
    struct amqp_connection_info info;
    svc_amqp_tls tls;             /* used when info.ssl */
    amqp_connection_state_t conn; /* NULL: closed */
    char endpoint[300];           /* "host:port" */
    char err[520];                /* the last failure, "" after success */
    int timeout_ms;               /* svc_amqp_conn_open's */
    step_guard guard;
};

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The watchdog thread: sleeps until the armed step's deadline, and shuts
 * its socket down if the step is still running then.  The fd cannot be
 * closed meanwhile: the owner disarms (under mu) before any close. */
static void *guard_main(void *arg)
{
    step_guard *g = arg;

    pthread_mutex_lock(&g->mu);
    while (!g->quit) {
        if (g->fd < 0) {
            g->idle = 1;
            pthread_cond_wait(&g->cv, &g->mu);
            g->idle = 0;
        } else if (mono_ms() >= g->deadline) {
            shutdown(g->fd, SHUT_RDWR);
            g->fired = 1;
            g->fd = -1;
        } else {
            struct timespec at;

            at.tv_sec = (time_t)(g->deadline / 1000);
            at.tv_nsec = (long)(g->deadline % 1000) * 1000000L;
            g->waking = g->deadline;
            pthread_cond_timedwait(&g->cv, &g->mu, &at);
        }
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

/* Starts c's watchdog.  0, or -1 (nothing held). */
static int guard_start(step_guard *g)
{
    pthread_condattr_t ca;
    int ok;

    g->fd = -1;
    if (pthread_condattr_init(&ca) != 0)
        return -1;
    ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0
         && pthread_cond_init(&g->cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok)
        return -1;
    if (pthread_mutex_init(&g->mu, NULL) != 0) {
        pthread_cond_destroy(&g->cv);
        return -1;
    }
    if (pthread_create(&g->thread, NULL, guard_main, g) != 0) {
        pthread_mutex_destroy(&g->mu);
        pthread_cond_destroy(&g->cv);
        return -1;
    }
    return 0;
}

static void guard_stop(step_guard *g)
{
    pthread_mutex_lock(&g->mu);
    g->quit = 1;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
}

void svc_amqp_conn_step_begin(svc_amqp_conn *c, int ms)
{
    step_guard *g = &c->guard;
    const int fd = c->conn != NULL ? amqp_get_sockfd(c->conn) : -1;

    pthread_mutex_lock(&g->mu);
    g->fired = 0;
    g->fd = fd;
    g->bound_ms = ms;
    g->deadline = mono_ms() + ms + SVC_AMQP_GUARD_SLACK_MS;
    /* A thread sleeping until an earlier deadline wakes then and sleeps on
     * to this one: only one waiting for no deadline, or for a later one,
     * needs a wake-up, which keeps a step per publish or delivery off the
     * scheduler. */
    if (g->idle || g->deadline < g->waking)
        pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

void svc_amqp_conn_step_end(svc_amqp_conn *c)
{
    step_guard *g = &c->guard;

    pthread_mutex_lock(&g->mu);
    g->fd = -1;
    /* svc_amqp_conn_fail reads it before its drop ends the step. */
    g->fired = 0;
    pthread_mutex_unlock(&g->mu);
}

/* 1 (and the step's bound in *ms) if the last step was cut short. */
static int guard_fired(svc_amqp_conn *c, int *ms)
{
    step_guard *g = &c->guard;
    int fired;

    pthread_mutex_lock(&g->mu);
    fired = g->fired;
    *ms = g->bound_ms;
    pthread_mutex_unlock(&g->mu);
    return fired;
}

/* One setting: the variable's value, which must name a readable file,
 * into out ("" when unset or empty).  0, or -1 with err set. */
static int tls_file(const char *name, char *out, size_t len, char *err,
                    size_t errlen)
{
    const char *v = svc_env_str(name);
    FILE *f;

    out[0] = '\0';
    if (v == NULL)
        return 0;
    if (strlen(v) >= len) {
        snprintf(err, errlen, "%s: longer than %zu bytes", name, len - 1);
        return -1;
    }
    f = fopen(v, "r");
    if (f == NULL) {
        snprintf(err, errlen, "%s: cannot read %s", name, v);
        return -1;
    }
    fclose(f);
    snprintf(out, len, "%s", v);
    return 0;
}

int svc_amqp_tls_load(svc_amqp_tls *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    if (tls_file("AMQP_CACERT", t->cacert, sizeof(t->cacert), err, errlen)
        || tls_file("AMQP_CERT", t->cert, sizeof(t->cert), err, errlen)
        || tls_file("AMQP_KEY", t->key, sizeof(t->key), err, errlen))
        return -1;
    if ((t->cert[0] == '\0') != (t->key[0] == '\0')) {
        snprintf(err, errlen,
                 "AMQP_CERT and AMQP_KEY: give both or "
                 "neither");
        return -1;
    }
    return 0;
}

svc_amqp_conn *svc_amqp_conn_new(const char *url, const svc_amqp_tls *tls)
{
    svc_amqp_conn *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return NULL;
    c->url_copy = strdup(url);
    if (c->url_copy == NULL) {
        free(c);
        return NULL;
    }
    if (guard_start(&c->guard) != 0) {
        free(c->url_copy);
        free(c);
        return NULL;
    }
    if (tls != NULL)
        c->tls = *tls;
    amqp_default_connection_info(&c->info);
    if (amqp_parse_url(c->url_copy, &c->info) != AMQP_STATUS_OK) {
        svc_amqp_conn_free(c);
        return NULL;
    }
    snprintf(c->endpoint, sizeof(c->endpoint), "%s:%d", c->info.host,
             c->info.port);
    return c;
}

void svc_amqp_conn_free(svc_amqp_conn *c)
{
    if (c == NULL)
        return;
    svc_amqp_conn_close(c);
    guard_stop(&c->guard);
    free(c->url_copy);
    free(c);
}

amqp_connection_state_t svc_amqp_conn_state(const svc_amqp_conn *c)
{
    return c->conn;
}

int svc_amqp_conn_is_open(const svc_amqp_conn *c)
{
    return c->conn != NULL;
}

const char *svc_amqp_conn_endpoint(const svc_amqp_conn *c)
{
    return c->endpoint;
}

const char *svc_amqp_conn_errmsg(const svc_amqp_conn *c)
{
    return c->err;
}

void svc_amqp_conn_set_err(svc_amqp_conn *c, const char *fmt, ...)
{
    char what[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(c->err, sizeof(c->err), "amqp %.100s: %.400s", c->endpoint, what);
}

void svc_amqp_conn_drop(svc_amqp_conn *c)
{
    svc_amqp_conn_step_end(c); /* before the close: the fd may be reused */
    if (c->conn != NULL) {
        amqp_destroy_connection(c->conn);
        c->conn = NULL;
    }
}

int svc_amqp_conn_fail(svc_amqp_conn *c, const char *what, int status)
{
    int bound_ms;

    if (guard_fired(c, &bound_ms))
        svc_amqp_conn_set_err(c, "%s: no answer within %d ms", what, bound_ms);
    else
        svc_amqp_conn_set_err(c, "%s: %s", what, amqp_error_string2(status));
    svc_amqp_conn_drop(c);
    return -1;
}

int svc_amqp_conn_reply(svc_amqp_conn *c, const char *what, amqp_rpc_reply_t r)
{
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return 0;
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION)
        return svc_amqp_conn_fail(c, what, r.library_error);
    svc_amqp_conn_set_err(c, "%s: refused by the broker (method 0x%08x)", what,
                          (unsigned)r.reply.id);
    svc_amqp_conn_drop(c);
    return -1;
}

int svc_amqp_conn_rpc(svc_amqp_conn *c, const char *what)
{
    return svc_amqp_conn_reply(c, what, amqp_get_rpc_reply(c->conn));
}

/* 1 if r is the broker closing the channel with 406 PRECONDITION_FAILED
 * (a redeclaration with other arguments). */
static int is_precondition_failed(amqp_rpc_reply_t r)
{
    const amqp_channel_close_t *m = r.reply.decoded;

    return r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION
           && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD && m != NULL
           && m->reply_code == AMQP_PRECONDITION_FAILED;
}

/* The answer of the last RPC on conn: 1 when normal, else 0 with what
 * and the reply kept for the caller. */
static int step_ok(amqp_connection_state_t conn, const char *step,
                   const char **what, amqp_rpc_reply_t *reply)
{
    *reply = amqp_get_rpc_reply(conn);
    *what = step;
    return reply->reply_type == AMQP_RESPONSE_NORMAL;
}

int svc_amqp_declare_events_exchange_on(amqp_connection_state_t conn,
                                        amqp_channel_t ch,
                                        const char *exchange,
                                        const char **what,
                                        amqp_rpc_reply_t *reply)
{
    char ae[300];
    amqp_table_entry_t arg;
    amqp_table_t args;
    amqp_channel_close_ok_t ok;
    int status;

    snprintf(ae, sizeof(ae), "%s%s", exchange, SVC_AMQP_UNROUTED_SUFFIX);
    amqp_exchange_declare(conn, ch, amqp_cstring_bytes(ae),
                          amqp_cstring_bytes("fanout"), 0, 1, 0, 0,
                          amqp_empty_table);
    if (!step_ok(conn, "exchange.declare (alternate exchange)", what, reply))
        return -1;
    amqp_queue_declare(conn, ch, amqp_cstring_bytes(ae), 0, 1, 0, 0,
                       amqp_empty_table);
    if (!step_ok(conn, "queue.declare (unrouted)", what, reply))
        return -1;
    amqp_queue_bind(conn, ch, amqp_cstring_bytes(ae), amqp_cstring_bytes(ae),
                    amqp_empty_bytes, amqp_empty_table);
    if (!step_ok(conn, "queue.bind (unrouted)", what, reply))
        return -1;
    arg.key = amqp_cstring_bytes("alternate-exchange");
    arg.value.kind = AMQP_FIELD_KIND_UTF8;
    arg.value.value.bytes = amqp_cstring_bytes(ae);
    args.num_entries = 1;
    args.entries = &arg;
    amqp_exchange_declare(conn, ch, amqp_cstring_bytes(exchange),
                          amqp_cstring_bytes("topic"), 0, 1, 0, 0, args);
    if (step_ok(conn, "exchange.declare", what, reply))
        return 1;
    if (!is_precondition_failed(*reply))
        return -1;
    /* It exists without the argument: answer the close, reopen, check. */
    memset(&ok, 0, sizeof(ok));
    status = amqp_send_method(conn, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
    if (status != AMQP_STATUS_OK) {
        *what = "exchange.declare: channel.close-ok";
        memset(reply, 0, sizeof(*reply));
        reply->reply_type = AMQP_RESPONSE_LIBRARY_EXCEPTION;
        reply->library_error = status;
        return -1;
    }
    amqp_channel_open(conn, ch);
    if (!step_ok(conn, "channel.open (after 406)", what, reply))
        return -1;
    amqp_exchange_declare(conn, ch, amqp_cstring_bytes(exchange),
                          amqp_cstring_bytes("topic"), 1, 1, 0, 0,
                          amqp_empty_table);
    return step_ok(conn, "exchange.declare (passive)", what, reply) ? 0 : -1;
}

int svc_amqp_conn_declare_events_exchange(svc_amqp_conn *c,
                                          const char *exchange, int *with_ae)
{
    const char *what = NULL;
    amqp_rpc_reply_t r;
    int rc;

    *with_ae = 0;
    if (exchange[0] == '\0') {
        svc_amqp_conn_set_err(c, "exchange.declare: the default exchange "
                                 "(\"\") cannot carry events");
        svc_amqp_conn_drop(c);
        return -1;
    }
    rc = svc_amqp_declare_events_exchange_on(c->conn, SVC_AMQP_CONN_CHANNEL,
                                             exchange, &what, &r);
    if (rc < 0) {
        /* r is not a normal reply: this sets the error and drops. */
        svc_amqp_conn_reply(c, what, r);
        return -1;
    }
    *with_ae = rc;
    return 0;
}

void svc_amqp_conn_timeval(int ms, struct timeval *tv)
{
    tv->tv_sec = ms / 1000;
    tv->tv_usec = (ms % 1000) * 1000;
}

/* Trust for a TLS socket: the CA file or the system's store, peer and
 * hostname verification, the client certificate if any.  0, or -1 with
 * err set (the caller drops the connection). */
static int configure_tls(svc_amqp_conn *c, amqp_socket_t *sock)
{
    const svc_amqp_tls *t = &c->tls;

    if (t->cacert[0] != '\0') {
        if (amqp_ssl_socket_set_cacert(sock, t->cacert) != AMQP_STATUS_OK) {
            svc_amqp_conn_set_err(c,
                                  "tls: CA file %s: not a PEM "
                                  "certificate",
                                  t->cacert);
            return -1;
        }
    } else if (SSL_CTX_set_default_verify_paths(
                   amqp_ssl_socket_get_context(sock))
               != 1) {
        svc_amqp_conn_set_err(c, "tls: no CA file and no system store");
        return -1;
    }
    if (t->cert[0] != '\0'
        && amqp_ssl_socket_set_key(sock, t->cert, t->key) != AMQP_STATUS_OK) {
        svc_amqp_conn_set_err(c,
                              "tls: client certificate %s or key %s "
                              "unusable",
                              t->cert, t->key);
        return -1;
    }
    amqp_ssl_socket_set_verify_peer(sock, 1);
    amqp_ssl_socket_set_verify_hostname(sock, 1);
    return 0;
}

/* A connection with its socket and timeouts, not yet connected: TLS for
 * amqps://.  Returns the socket, or NULL (recorded) with nothing held. */
static amqp_socket_t *new_connection(svc_amqp_conn *c,
                                     const struct timeval *tv)
{
    amqp_socket_t *sock = NULL;

    c->conn = amqp_new_connection();
    if (c->conn != NULL) {
        sock = c->info.ssl ? amqp_ssl_socket_new(c->conn)
                           : amqp_tcp_socket_new(c->conn);
    }
    if (sock == NULL
        || amqp_set_handshake_timeout(c->conn, tv) != AMQP_STATUS_OK
        || amqp_set_rpc_timeout(c->conn, tv) != AMQP_STATUS_OK) {
        svc_amqp_conn_set_err(c, "out of memory");
        svc_amqp_conn_drop(c);
        return NULL;
    }
    if (c->info.ssl && configure_tls(c, sock) != 0) {
        svc_amqp_conn_drop(c);
        return NULL;
    }
    return sock;
}

/* A failed connect: for TLS, what the handshake said (OpenSSL's reason,
 * which says "certificate verify failed" for an unknown CA) and which CA
 * file was used, so the person on call sees why at once. */
static int connect_failed(svc_amqp_conn *c, int status)
{
    char why[256] = "";
    const unsigned long e = ERR_peek_last_error();

    if (!c->info.ssl
        || (status != AMQP_STATUS_SSL_ERROR
            && status != AMQP_STATUS_SSL_CONNECTION_FAILED
            && status != AMQP_STATUS_SSL_PEER_VERIFY_FAILED
            && status != AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED))
        return svc_amqp_conn_fail(c, "connect", status);
    if (e != 0)
        ERR_error_string_n(e, why, sizeof(why));
    ERR_clear_error();
    svc_amqp_conn_set_err(c, "tls handshake refused (CA %s): %s%s%s",
                          c->tls.cacert[0] != '\0' ? c->tls.cacert
                                                   : "system store",
                          amqp_error_string2(status), why[0] ? ": " : "", why);
    svc_amqp_conn_drop(c);
    return -1;
}

int svc_amqp_conn_open(svc_amqp_conn *c, int timeout_ms)
{
    struct timeval tv;
    amqp_socket_t *sock;
    int st;

    svc_amqp_conn_close(c);
    c->timeout_ms = timeout_ms;
    svc_amqp_conn_timeval(timeout_ms, &tv);
    sock = new_connection(c, &tv);
    if (sock == NULL)
        return -1;
    st = amqp_socket_open_noblock(sock, c->info.host, c->info.port, &tv);
    if (st != AMQP_STATUS_OK)
        return connect_failed(c, st);
    /* amqp_login bounds its waits by the handshake timeout, but its
     * sends and channel.open's are unbounded in rabbitmq-c. */
    svc_amqp_conn_step_begin(c, timeout_ms);
    if (svc_amqp_conn_reply(c, "login",
                            amqp_login(c->conn, c->info.vhost, 1, 131072, 0,
                                       AMQP_SASL_METHOD_PLAIN, c->info.user,
                                       c->info.password))
        != 0)
        return -1;
    amqp_channel_open(c->conn, SVC_AMQP_CONN_CHANNEL);
    if (svc_amqp_conn_rpc(c, "channel.open") != 0)
        return -1;
    svc_amqp_conn_step_end(c);
    c->err[0] = '\0';
    return 0;
}

void svc_amqp_conn_close(svc_amqp_conn *c)
{
    if (c->conn == NULL)
        return;
    /* Best effort, bounded by the RPC timeout (the replies) and the guard
     * (the sends); the socket goes anyway. */
    svc_amqp_conn_step_begin(c, 2 * c->timeout_ms);
    amqp_channel_close(c->conn, SVC_AMQP_CONN_CHANNEL, AMQP_REPLY_SUCCESS);
    amqp_connection_close(c->conn, AMQP_REPLY_SUCCESS);
    svc_amqp_conn_drop(c);
}
