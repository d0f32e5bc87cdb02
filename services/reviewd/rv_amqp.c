/*
 * rv_amqp.c: the publishing AMQP connection (see rv_amqp.h).
 *
 * rabbitmq-c's calls block on the socket, so every one is bounded: the
 * socket connect by amqp_socket_open_noblock's timeout, the handshake and
 * each RPC (login, channel.open, confirm.select, exchange.declare) by
 * amqp_set_handshake_timeout / amqp_set_rpc_timeout, and the confirm
 * wait by its own deadline.  A relay thread stuck on a silent broker
 * would stall the whole outbox, which the bounds prevent.  Heartbeats are
 * off: rabbitmq-c sends them only from inside its calls, and the relay
 * instead checks the socket for a close on every round (rv_amqp_alive).
 *
 * State: conn == NULL means closed.  Every failing path goes through
 * fail_close, which records the message and closes, so a connection in
 * an unknown protocol state is never used again.  Delivery tags count
 * publishes on this connection from 1, as confirm mode numbers them.
 */
#include "rv_amqp.h"

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RV_AMQP_CHANNEL 1

struct rv_amqp {
    char *url_copy;                 /* amqp_parse_url writes into it */
    struct amqp_connection_info info;
    char *exchange;
    amqp_connection_state_t conn;   /* NULL: closed */
    uint64_t next_tag;              /* the tag the next publish gets */
    char endpoint[300];
    char err[520];
};

rv_amqp *rv_amqp_new(const char *url, const char *exchange)
{
    rv_amqp *a = calloc(1, sizeof(*a));

    if (a == NULL) {
        return NULL;
    }
    a->url_copy = strdup(url);
    a->exchange = strdup(exchange);
    if (a->url_copy == NULL || a->exchange == NULL) {
        rv_amqp_free(a);
        return NULL;
    }
    amqp_default_connection_info(&a->info);
    if (amqp_parse_url(a->url_copy, &a->info) != AMQP_STATUS_OK) {
        rv_amqp_free(a);
        return NULL;
    }
    snprintf(a->endpoint, sizeof(a->endpoint), "%s:%d", a->info.host,
             a->info.port);
    return a;
}

void rv_amqp_free(rv_amqp *a)
{
    if (a == NULL) {
        return;
    }
    rv_amqp_close(a);
    free(a->url_copy);
    free(a->exchange);
    free(a);
}

__attribute__((format(printf, 2, 3)))
static void set_err(rv_amqp *a, const char *fmt, ...)
{
    char what[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(a->err, sizeof(a->err), "amqp %.100s: %.400s", a->endpoint,
             what);
}

/* Drops the connection without talking to the broker. */
static void drop(rv_amqp *a)
{
    if (a->conn != NULL) {
        amqp_destroy_connection(a->conn);
        a->conn = NULL;
    }
}

static int fail_close(rv_amqp *a, const char *what, int status)
{
    set_err(a, "%s: %s", what, amqp_error_string2(status));
    drop(a);
    return -1;
}

/* Turns an RPC reply into 0 or a recorded failure. */
static int rpc_ok(rv_amqp *a, const char *what, amqp_rpc_reply_t r)
{
    if (r.reply_type == AMQP_RESPONSE_NORMAL) {
        return 0;
    }
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
        return fail_close(a, what, r.library_error);
    }
    set_err(a, "%s: refused by the broker (method 0x%08x)", what,
            (unsigned)r.reply.id);
    drop(a);
    return -1;
}

static void ms_to_tv(int ms, struct timeval *tv)
{
    tv->tv_sec = ms / 1000;
    tv->tv_usec = (ms % 1000) * 1000;
}

/* Channel 1 in confirm mode, with the durable topic exchange. */
static int open_channel(rv_amqp *a)
{
    amqp_channel_open(a->conn, RV_AMQP_CHANNEL);
    if (rpc_ok(a, "channel.open", amqp_get_rpc_reply(a->conn)) != 0) {
        return -1;
    }
    amqp_confirm_select(a->conn, RV_AMQP_CHANNEL);
    if (rpc_ok(a, "confirm.select", amqp_get_rpc_reply(a->conn)) != 0) {
        return -1;
    }
    amqp_exchange_declare(a->conn, RV_AMQP_CHANNEL,
                          amqp_cstring_bytes(a->exchange),
                          amqp_cstring_bytes("topic"), 0, 1, 0, 0,
                          amqp_empty_table);
    return rpc_ok(a, "exchange.declare", amqp_get_rpc_reply(a->conn));
}

int rv_amqp_connect(rv_amqp *a, int timeout_ms)
{
    struct timeval tv;
    amqp_socket_t *sock;
    int st;

    rv_amqp_close(a);
    ms_to_tv(timeout_ms, &tv);
    a->conn = amqp_new_connection();
    sock = a->conn != NULL ? amqp_tcp_socket_new(a->conn) : NULL;
    if (sock == NULL) {
        set_err(a, "out of memory");
        drop(a);
        return -1;
    }
    amqp_set_handshake_timeout(a->conn, &tv);
    amqp_set_rpc_timeout(a->conn, &tv);
    st = amqp_socket_open_noblock(sock, a->info.host, a->info.port, &tv);
    if (st != AMQP_STATUS_OK) {
        return fail_close(a, "connect", st);
    }
    if (rpc_ok(a, "login", amqp_login(a->conn, a->info.vhost, 1, 131072, 0,
                                      AMQP_SASL_METHOD_PLAIN, a->info.user,
                                      a->info.password)) != 0
        || open_channel(a) != 0) {
        return -1;
    }
    a->next_tag = 1;
    a->err[0] = '\0';
    return 0;
}

void rv_amqp_close(rv_amqp *a)
{
    if (a->conn == NULL) {
        return;
    }
    /* Best effort and bounded by the RPC timeout; the socket goes anyway. */
    amqp_channel_close(a->conn, RV_AMQP_CHANNEL, AMQP_REPLY_SUCCESS);
    amqp_connection_close(a->conn, AMQP_REPLY_SUCCESS);
    drop(a);
}

int rv_amqp_connected(const rv_amqp *a)
{
    return a->conn != NULL;
}

int rv_amqp_publish(rv_amqp *a, const char *routing_key,
                    const char *message_id, const char *body, size_t len,
                    uint64_t *tag)
{
    amqp_basic_properties_t props;
    amqp_bytes_t bytes;
    int st;

    *tag = 0;
    if (a->conn == NULL) {
        set_err(a, "publish: not connected");
        return -1;
    }
    memset(&props, 0, sizeof(props));
    props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG
                   | AMQP_BASIC_DELIVERY_MODE_FLAG
                   | AMQP_BASIC_MESSAGE_ID_FLAG;
    props.content_type = amqp_cstring_bytes("application/json");
    props.delivery_mode = 2; /* persistent */
    props.message_id = amqp_cstring_bytes(message_id);
    bytes.bytes = (void *)body;
    bytes.len = len;
    st = amqp_basic_publish(a->conn, RV_AMQP_CHANNEL,
                            amqp_cstring_bytes(a->exchange),
                            amqp_cstring_bytes(routing_key), 0, 0, &props,
                            bytes);
    if (st != AMQP_STATUS_OK) {
        return fail_close(a, "publish", st);
    }
    *tag = a->next_tag++;
    return 0;
}

/* Marks tags settled by one ack or nack (multiple: every tag up to it). */
static void settle(rv_amqp_confirm *states, uint64_t first, uint64_t last,
                   uint64_t tag, int multiple, rv_amqp_confirm how)
{
    uint64_t t;
    const uint64_t from = multiple ? first : tag;

    for (t = from; t <= tag && t <= last; t++) {
        if (t >= first && states[t - first] == RV_AMQP_PENDING) {
            states[t - first] = how;
        }
    }
}

static int all_settled(const rv_amqp_confirm *states, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (states[i] == RV_AMQP_PENDING) {
            return 0;
        }
    }
    return 1;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads one frame before deadline and applies it.  Returns 0 or -1. */
static int read_confirm(rv_amqp *a, uint64_t first, uint64_t last,
                        rv_amqp_confirm *states, int64_t deadline)
{
    amqp_frame_t f;
    struct timeval tv;
    int64_t left = deadline - now_ms();
    int st;

    ms_to_tv(left > 0 ? (int)left : 0, &tv);
    st = amqp_simple_wait_frame_noblock(a->conn, &f, &tv);
    if (st != AMQP_STATUS_OK) {
        return fail_close(a, "waiting for confirms", st);
    }
    if (f.frame_type != AMQP_FRAME_METHOD) {
        return 0;
    }
    if (f.payload.method.id == AMQP_BASIC_ACK_METHOD) {
        const amqp_basic_ack_t *ack = f.payload.method.decoded;

        settle(states, first, last, ack->delivery_tag, ack->multiple,
               RV_AMQP_ACKED);
    } else if (f.payload.method.id == AMQP_BASIC_NACK_METHOD) {
        const amqp_basic_nack_t *nack = f.payload.method.decoded;

        settle(states, first, last, nack->delivery_tag, nack->multiple,
               RV_AMQP_NACKED);
    } else if (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD
               || f.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD) {
        set_err(a, "waiting for confirms: closed by the broker");
        drop(a);
        return -1;
    }
    return 0;
}

int rv_amqp_wait_confirms(rv_amqp *a, uint64_t first_tag, uint64_t last_tag,
                          rv_amqp_confirm *states, int timeout_ms)
{
    const int64_t deadline = now_ms() + timeout_ms;
    const size_t n = (size_t)(last_tag - first_tag + 1);

    while (!all_settled(states, n)) {
        if (a->conn == NULL) {
            set_err(a, "waiting for confirms: not connected");
            return -1;
        }
        if (read_confirm(a, first_tag, last_tag, states, deadline) != 0) {
            return -1;
        }
        amqp_maybe_release_buffers(a->conn);
    }
    return 0;
}

int rv_amqp_alive(rv_amqp *a)
{
    amqp_frame_t f;
    struct timeval zero = {0, 0};
    int st;

    if (a->conn == NULL) {
        return 0;
    }
    /* Nothing is expected between batches: a frame here is the broker
     * closing (connection.close), and an error is a dead socket. */
    st = amqp_simple_wait_frame_noblock(a->conn, &f, &zero);
    if (st == AMQP_STATUS_TIMEOUT) {
        return 1;
    }
    if (st == AMQP_STATUS_OK) {
        set_err(a, "closed by the broker between batches");
        drop(a);
        return 0;
    }
    fail_close(a, "idle check", st);
    return 0;
}

int rv_amqp_fd(const rv_amqp *a)
{
    return a->conn != NULL ? amqp_get_sockfd(a->conn) : -1;
}

const char *rv_amqp_endpoint(const rv_amqp *a)
{
    return a->endpoint;
}

const char *rv_amqp_errmsg(const rv_amqp *a)
{
    return a->err;
}
