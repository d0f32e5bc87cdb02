/*
 * kh_consumer.c: the consuming AMQP connection (see kh_consumer.h).
 *
 * Every rabbitmq-c call that can block is bounded: the socket connect by
 * amqp_socket_open_noblock's timeout, the handshake and the RPCs by
 * amqp_set_handshake_timeout / amqp_set_rpc_timeout, and waiting for a
 * message by amqp_consume_message's timeout, so the indexer notices a
 * stop request or a dead broker within a bounded time.  Heartbeats are
 * off (rabbitmq-c sends them only from inside its calls); a broker that
 * stops or is killed closes the socket, and the next read fails.
 *
 * State: conn == NULL means closed, and every failure goes through
 * fail_close, so a connection in an unknown protocol state is never used
 * again.
 */
#include "kh_consumer.h"

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KH_CHANNEL 1

struct kh_consumer {
    char *url_copy;                 /* amqp_parse_url writes into it */
    struct amqp_connection_info info;
    char *exchange;
    char *queue;
    int prefetch;
    amqp_connection_state_t conn;   /* NULL: closed */
    amqp_envelope_t env;
    int have_env;
    char endpoint[300];
    char err[520];
};

kh_consumer *kh_consumer_new(const char *url, const char *exchange,
                             const char *queue, int prefetch)
{
    kh_consumer *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        return NULL;
    }
    c->url_copy = strdup(url);
    c->exchange = strdup(exchange);
    c->queue = strdup(queue);
    if (c->url_copy == NULL || c->exchange == NULL || c->queue == NULL) {
        kh_consumer_free(c);
        return NULL;
    }
    amqp_default_connection_info(&c->info);
    if (amqp_parse_url(c->url_copy, &c->info) != AMQP_STATUS_OK) {
        kh_consumer_free(c);
        return NULL;
    }
    c->prefetch = prefetch;
    snprintf(c->endpoint, sizeof(c->endpoint), "%s:%d", c->info.host,
             c->info.port);
    return c;
}

static void release_envelope(kh_consumer *c)
{
    if (c->have_env) {
        amqp_destroy_envelope(&c->env);
        c->have_env = 0;
    }
}

/* Drops the connection without talking to the broker. */
static void drop(kh_consumer *c)
{
    release_envelope(c);
    if (c->conn != NULL) {
        amqp_destroy_connection(c->conn);
        c->conn = NULL;
    }
}

void kh_consumer_free(kh_consumer *c)
{
    if (c == NULL) {
        return;
    }
    kh_consumer_close(c);
    free(c->url_copy);
    free(c->exchange);
    free(c->queue);
    free(c);
}

__attribute__((format(printf, 2, 3)))
static void set_err(kh_consumer *c, const char *fmt, ...)
{
    char what[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(c->err, sizeof(c->err), "amqp %.100s: %.400s", c->endpoint,
             what);
}

static int fail_close(kh_consumer *c, const char *what, int status)
{
    set_err(c, "%s: %s", what, amqp_error_string2(status));
    drop(c);
    return -1;
}

static int rpc_ok(kh_consumer *c, const char *what, amqp_rpc_reply_t r)
{
    if (r.reply_type == AMQP_RESPONSE_NORMAL) {
        return 0;
    }
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
        return fail_close(c, what, r.library_error);
    }
    set_err(c, "%s: refused by the broker (method 0x%08x)", what,
            (unsigned)r.reply.id);
    drop(c);
    return -1;
}

/* Exchange, queue, binding, prefetch, consume: the consumer's topology,
 * declared on every connect (declarations are idempotent). */
static int declare_and_consume(kh_consumer *c)
{
    amqp_connection_state_t k = c->conn;

    amqp_exchange_declare(k, KH_CHANNEL, amqp_cstring_bytes(c->exchange),
                          amqp_cstring_bytes("topic"), 0, 1, 0, 0,
                          amqp_empty_table);
    if (rpc_ok(c, "exchange.declare", amqp_get_rpc_reply(k)) != 0) {
        return -1;
    }
    amqp_queue_declare(k, KH_CHANNEL, amqp_cstring_bytes(c->queue), 0, 1, 0,
                       0, amqp_empty_table);
    if (rpc_ok(c, "queue.declare", amqp_get_rpc_reply(k)) != 0) {
        return -1;
    }
    amqp_queue_bind(k, KH_CHANNEL, amqp_cstring_bytes(c->queue),
                    amqp_cstring_bytes(c->exchange),
                    amqp_cstring_bytes(KH_BINDING), amqp_empty_table);
    if (rpc_ok(c, "queue.bind", amqp_get_rpc_reply(k)) != 0) {
        return -1;
    }
    amqp_basic_qos(k, KH_CHANNEL, 0, (uint16_t)c->prefetch, 0);
    if (rpc_ok(c, "basic.qos", amqp_get_rpc_reply(k)) != 0) {
        return -1;
    }
    amqp_basic_consume(k, KH_CHANNEL, amqp_cstring_bytes(c->queue),
                       amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
    return rpc_ok(c, "basic.consume", amqp_get_rpc_reply(k));
}

int kh_consumer_connect(kh_consumer *c, int timeout_ms)
{
    struct timeval tv;
    amqp_socket_t *sock;
    int st;

    kh_consumer_close(c);
    tv.tv_sec = timeout_ms / 1000;
    tv.tv_usec = (timeout_ms % 1000) * 1000;
    c->conn = amqp_new_connection();
    sock = c->conn != NULL ? amqp_tcp_socket_new(c->conn) : NULL;
    if (sock == NULL) {
        set_err(c, "out of memory");
        drop(c);
        return -1;
    }
    amqp_set_handshake_timeout(c->conn, &tv);
    amqp_set_rpc_timeout(c->conn, &tv);
    st = amqp_socket_open_noblock(sock, c->info.host, c->info.port, &tv);
    if (st != AMQP_STATUS_OK) {
        return fail_close(c, "connect", st);
    }
    if (rpc_ok(c, "login", amqp_login(c->conn, c->info.vhost, 1, 131072, 0,
                                      AMQP_SASL_METHOD_PLAIN, c->info.user,
                                      c->info.password)) != 0) {
        return -1;
    }
    amqp_channel_open(c->conn, KH_CHANNEL);
    if (rpc_ok(c, "channel.open", amqp_get_rpc_reply(c->conn)) != 0
        || declare_and_consume(c) != 0) {
        return -1;
    }
    c->err[0] = '\0';
    return 0;
}

void kh_consumer_close(kh_consumer *c)
{
    if (c->conn == NULL) {
        return;
    }
    release_envelope(c);
    /* Best effort, bounded by the RPC timeout; the socket goes anyway. */
    amqp_channel_close(c->conn, KH_CHANNEL, AMQP_REPLY_SUCCESS);
    amqp_connection_close(c->conn, AMQP_REPLY_SUCCESS);
    drop(c);
}

int kh_consumer_connected(const kh_consumer *c)
{
    return c->conn != NULL;
}

static void fill_delivery(const amqp_envelope_t *env, kh_delivery *d)
{
    const amqp_basic_properties_t *p = &env->message.properties;

    d->tag = env->delivery_tag;
    d->redelivered = env->redelivered != 0;
    d->body = env->message.body.bytes;
    d->len = env->message.body.len;
    d->message_id[0] = '\0';
    if (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) {
        snprintf(d->message_id, sizeof(d->message_id), "%.*s",
                 (int)p->message_id.len, (const char *)p->message_id.bytes);
    }
}

int kh_consumer_next(kh_consumer *c, int timeout_ms, kh_delivery *d)
{
    struct timeval tv;
    amqp_rpc_reply_t r;

    memset(d, 0, sizeof(*d));
    if (c->conn == NULL) {
        set_err(c, "consume: not connected");
        return -1;
    }
    release_envelope(c);
    amqp_maybe_release_buffers(c->conn);
    tv.tv_sec = timeout_ms / 1000;
    tv.tv_usec = (timeout_ms % 1000) * 1000;
    r = amqp_consume_message(c->conn, &c->env, &tv, 0);
    if (r.reply_type == AMQP_RESPONSE_NORMAL) {
        c->have_env = 1;
        fill_delivery(&c->env, d);
        return 1;
    }
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
        && r.library_error == AMQP_STATUS_TIMEOUT) {
        return 0;
    }
    /* Anything else (a channel or connection close from the broker, a
     * dead socket, an unexpected frame) ends this connection. */
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
        return fail_close(c, "consume", r.library_error);
    }
    set_err(c, "consume: closed by the broker (method 0x%08x)",
            (unsigned)r.reply.id);
    drop(c);
    return -1;
}

static int settle(kh_consumer *c, uint64_t tag, int ack)
{
    int st;

    if (c->conn == NULL) {
        set_err(c, "%s: not connected", ack ? "ack" : "reject");
        return -1;
    }
    st = ack ? amqp_basic_ack(c->conn, KH_CHANNEL, tag, 0)
             : amqp_basic_reject(c->conn, KH_CHANNEL, tag, 1);
    return st == AMQP_STATUS_OK ? 0 : fail_close(c, ack ? "ack" : "reject",
                                                 st);
}

int kh_consumer_ack(kh_consumer *c, uint64_t tag)
{
    return settle(c, tag, 1);
}

int kh_consumer_requeue(kh_consumer *c, uint64_t tag)
{
    return settle(c, tag, 0);
}

void kh_consumer_drop_channel(kh_consumer *c)
{
    kh_consumer_close(c);
    set_err(c, "channel closed before the ack (test hook)");
}

const char *kh_consumer_errmsg(const kh_consumer *c)
{
    return c->err;
}
