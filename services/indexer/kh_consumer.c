/*
 * kh_consumer.c: the consuming AMQP connection (see kh_consumer.h).
 *
 * The connection itself (URL, bounded connect, login, channel 1, error
 * text with host:port) is svc_amqp_conn.h from svc_common, shared with
 * reviewd's relay publisher; this file adds the queue topology,
 * consuming and acks.  Every rabbitmq-c call that can block is bounded:
 * the connect, the handshake and the RPCs by svc_amqp_conn_open's timeout,
 * and waiting for a message by amqp_consume_message's timeout, so the
 * indexer notices a stop request or a dead broker within a bounded time.
 * rabbitmq-c bounds neither its sends (a broker that stops reading) nor
 * the read of a delivery's header and body once its method frame is in
 * (amqp_read_message), so the declarations, each delivery and each ack
 * also run under svc_amqp_conn's step guard.
 * The exchange is declared exactly as reviewd's relay declares it, with
 * its alternate exchange "<exchange>.unrouted" and that queue
 * (svc_amqp_conn_declare_events_exchange): RabbitMQ refuses a second
 * declaration with other arguments, so whichever starts first, the
 * other's must match.  An exchange that predates the alternate exchange
 * is used as it is (kh_consumer_has_ae says 0; kh-indexer warns).
 * Heartbeats are off (rabbitmq-c sends them only from inside its calls);
 * a broker that stops or is killed closes the socket, and the next read
 * fails.
 *
 * State: the connection is closed until svc_amqp_conn_open, and every
 * failure goes through svc_amqp_conn_fail or _rpc, so a connection in an unknown protocol state
 * is never used again.  The envelope of the last delivery is ours until
 * the next call, whatever happened to the connection meanwhile: its
 * memory is its own, not the connection's.
 */
#include "kh_consumer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "svc_amqp_conn.h"

#define KH_CHANNEL SVC_AMQP_CONN_CHANNEL

struct kh_consumer {
    svc_amqp_conn *ac; /* the connection, owned */
    char *exchange;
    char *queue;
    int prefetch;
    int with_ae;    /* the exchange has its alternate exchange */
    int timeout_ms; /* kh_consumer_connect's: bounds each step */
    amqp_envelope_t env;
    int have_env;
};

kh_consumer *kh_consumer_new(const char *url, const char *exchange,
                             const char *queue, int prefetch,
                             const svc_amqp_tls *tls)
{
    kh_consumer *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return NULL;
    c->exchange = strdup(exchange);
    c->queue = strdup(queue);
    c->ac = svc_amqp_conn_new(url, tls);
    if (c->exchange == NULL || c->queue == NULL || c->ac == NULL) {
        kh_consumer_free(c);
        return NULL;
    }
    c->prefetch = prefetch;
    return c;
}

static void release_envelope(kh_consumer *c)
{
    if (c->have_env) {
        amqp_destroy_envelope(&c->env);
        c->have_env = 0;
    }
}

void kh_consumer_free(kh_consumer *c)
{
    if (c == NULL)
        return;
    kh_consumer_close(c);
    svc_amqp_conn_free(c->ac);
    free(c->exchange);
    free(c->queue);
    free(c);
}

/* Exchange, queue, binding, prefetch, consume: the consumer's topology,
 * declared on every connect (declarations are idempotent). */
static int declare_and_consume(kh_consumer *c)
{
    amqp_connection_state_t k;

    if (svc_amqp_conn_declare_events_exchange(c->ac, c->exchange, &c->with_ae)
        != 0)
        return -1;
    k = svc_amqp_conn_state(c->ac);
    amqp_queue_declare(k, KH_CHANNEL, amqp_cstring_bytes(c->queue), 0, 1, 0, 0,
                       amqp_empty_table);
    if (svc_amqp_conn_rpc(c->ac, "queue.declare") != 0)
        return -1;
    amqp_queue_bind(k, KH_CHANNEL, amqp_cstring_bytes(c->queue),
                    amqp_cstring_bytes(c->exchange),
                    amqp_cstring_bytes(KH_BINDING), amqp_empty_table);
    if (svc_amqp_conn_rpc(c->ac, "queue.bind") != 0)
        return -1;
    amqp_basic_qos(k, KH_CHANNEL, 0, (uint16_t)c->prefetch, 0);
    if (svc_amqp_conn_rpc(c->ac, "basic.qos") != 0)
        return -1;
    amqp_basic_consume(k, KH_CHANNEL, amqp_cstring_bytes(c->queue),
                       amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
    return svc_amqp_conn_rpc(c->ac, "basic.consume");
}

int kh_consumer_connect(kh_consumer *c, int timeout_ms)
{
    kh_consumer_close(c);
    if (svc_amqp_conn_open(c->ac, timeout_ms) != 0)
        return -1;
    c->timeout_ms = timeout_ms;
    /* Up to ten RPCs; a failure drops the connection, which ends the
     * step. */
    svc_amqp_conn_step_begin(c->ac, 10 * timeout_ms);
    if (declare_and_consume(c) != 0)
        return -1;
    svc_amqp_conn_step_end(c->ac);
    return 0;
}

void kh_consumer_close(kh_consumer *c)
{
    release_envelope(c);
    svc_amqp_conn_close(c->ac);
}

int kh_consumer_has_ae(const kh_consumer *c)
{
    return c->with_ae;
}

int kh_consumer_connected(const kh_consumer *c)
{
    return svc_amqp_conn_is_open(c->ac);
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
    release_envelope(c);
    if (!svc_amqp_conn_is_open(c->ac)) {
        svc_amqp_conn_set_err(c->ac, "consume: not connected");
        return -1;
    }
    amqp_maybe_release_buffers(svc_amqp_conn_state(c->ac));
    svc_amqp_conn_timeval(timeout_ms, &tv);
    /* The wait for a delivery ends at timeout_ms; reading the rest of one
     * that began, only by the guard. */
    svc_amqp_conn_step_begin(c->ac, timeout_ms + c->timeout_ms);
    r = amqp_consume_message(svc_amqp_conn_state(c->ac), &c->env, &tv, 0);
    if (r.reply_type == AMQP_RESPONSE_NORMAL) {
        svc_amqp_conn_step_end(c->ac);
        c->have_env = 1;
        fill_delivery(&c->env, d);
        return 1;
    }
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
        && r.library_error == AMQP_STATUS_TIMEOUT) {
        svc_amqp_conn_step_end(c->ac);
        return 0;
    }
    /* Anything else (a channel or connection close from the broker, a
     * dead socket, an unexpected frame) ends this connection. */
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION)
        return svc_amqp_conn_fail(c->ac, "consume", r.library_error);
    svc_amqp_conn_set_err(c->ac,
                          "consume: closed by the broker (method "
                          "0x%08x)",
                          (unsigned)r.reply.id);
    svc_amqp_conn_drop(c->ac);
    return -1;
}

/* ack: 0 reject with requeue, 1 ack this one, 2 ack through tag. */
static int settle(kh_consumer *c, uint64_t tag, int ack)
{
    const char *what = ack ? "ack" : "reject";
    amqp_connection_state_t k;
    int st;

    if (!svc_amqp_conn_is_open(c->ac)) {
        svc_amqp_conn_set_err(c->ac, "%s: not connected", what);
        return -1;
    }
    k = svc_amqp_conn_state(c->ac);
    svc_amqp_conn_step_begin(c->ac, c->timeout_ms);
    st = ack ? amqp_basic_ack(k, KH_CHANNEL, tag, ack == 2)
             : amqp_basic_reject(k, KH_CHANNEL, tag, 1);
    if (st != AMQP_STATUS_OK)
        return svc_amqp_conn_fail(c->ac, what, st);
    svc_amqp_conn_step_end(c->ac);
    return 0;
}

int kh_consumer_ack(kh_consumer *c, uint64_t tag)
{
    return settle(c, tag, 1);
}

int kh_consumer_ack_through(kh_consumer *c, uint64_t tag)
{
    return settle(c, tag, 2);
}

int kh_consumer_requeue(kh_consumer *c, uint64_t tag)
{
    return settle(c, tag, 0);
}

#ifdef KH_TESTING
void kh_consumer_drop_channel(kh_consumer *c)
{
    kh_consumer_close(c);
    svc_amqp_conn_set_err(c->ac, "channel closed before the ack (test "
                                 "hook)");
}
#endif

const char *kh_consumer_errmsg(const kh_consumer *c)
{
    return svc_amqp_conn_errmsg(c->ac);
}
