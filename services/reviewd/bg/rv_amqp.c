/*
 * rv_amqp.c: the publishing AMQP connection (see rv_amqp.h).
 *
 * The connection itself (URL, bounded connect, login, channel 1, error
 * text with host:port) is svc_amqp_conn.h's, shared with kh-indexer's
 * consumer; this file adds confirm mode, the exchange, publishing and the
 * confirm wait.  rabbitmq-c's calls block on the socket, so every one is
 * bounded: the connect, the handshake and each RPC (login, channel.open,
 * confirm.select, exchange.declare) by svc_amqp_conn_open's timeout, and
 * the confirm wait by its own deadline.  rabbitmq-c does not bound its
 * sends (a broker that stops reading) nor amqp_read_message (a returned
 * message cut short), so every step here also runs under
 * svc_amqp_conn's step guard with the same timeout: the declarations, each
 * publish, the confirm wait with its returns.  A relay thread stuck on a
 * silent broker would stall the whole outbox, which the bounds prevent.
 * Heartbeats are off: rabbitmq-c sends them only from inside its calls,
 * and the relay instead checks the socket for a close on every round
 * (rv_amqp_alive).
 *
 * Unroutable events: RabbitMQ acks a message that matched no queue, so a
 * confirm alone does not say it reached anyone.  So every event goes out
 * mandatory, and the exchange is declared with an alternate exchange
 * (svc_amqp_conn_declare_events_exchange, the same declaration as
 * kh-indexer's): "<exchange>.unrouted", fanout, with the durable queue
 * "<exchange>.unrouted" bound to it.  An event no binding covers (a
 * document.submitted nobody consumes) is routed there and kept; the
 * queues the relay publishes for (REVIEWD_AMQP_QUEUES) are declared
 * durable and bound on every connect, which keeps events published
 * before the consumer first started in the consumer's own queue.  If a
 * message still reaches no queue (the unrouted queue was deleted too, or
 * the exchange predates the alternate exchange, below) the broker sends
 * basic.return before the ack and the wait reports RV_AMQP_RETURNED: the
 * relay keeps the row unsent and retries it after reconnecting, which
 * declares the queues again.  Nothing is ever acked into nowhere.
 *
 * An exchange that already exists without the alternate-exchange
 * argument (a deployment from before) cannot be redeclared with it
 * (406): the connection then goes on with the exchange as it is
 * (rv_amqp_has_ae says 0, the relay warns once), and events of keys no
 * queue binds are returned and retried, stuck in the outbox and visible
 * rather than lost, until an operator deletes the exchange or gives it a
 * RabbitMQ policy alternate-exchange.

 * State: the connection is closed until svc_amqp_conn_open.  Every
 * failing path goes through svc_amqp_conn_fail or _rpc, which record the message and close, so a
 * connection in an unknown protocol state is never used again.  Delivery
 * tags count publishes on this connection from 1, as confirm mode numbers
 * them.
 */
#include "bg/rv_amqp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "svc_amqp_conn.h"

#define RV_AMQP_CHANNEL SVC_AMQP_CONN_CHANNEL

struct rv_amqp {
    svc_amqp_conn *ac; /* the connection, owned */
    char *exchange;
    char *queue_spec; /* split in place into the two below */
    const char *queue[RV_AMQP_MAX_QUEUES];
    const char *binding[RV_AMQP_MAX_QUEUES];
    int nqueues;
    int with_ae;       /* the exchange has its alternate exchange */
    uint64_t next_tag; /* the tag the next publish gets */
    int timeout_ms;    /* rv_amqp_connect's: bounds each publish */
};

/* The word after the one at s (of length w): past its dot, or the end. */
static const char *next_word(const char *s, size_t w)
{
    return s[w] == '.' ? s + w + 1 : s + w;
}

int rv_amqp_topic_match(const char *p, const char *k)
{
    const size_t pw = strcspn(p, "."), kw = strcspn(k, ".");

    if (p[0] == '\0')
        return k[0] == '\0';
    if (pw == 1 && p[0] == '#') {
        /* '#' takes no word, or one word and stays. */
        return rv_amqp_topic_match(next_word(p, pw), k)
               || (k[0] != '\0' && rv_amqp_topic_match(p, next_word(k, kw)));
    }
    if (k[0] == '\0')
        return 0;
    if (!(pw == 1 && p[0] == '*') && (pw != kw || memcmp(p, k, pw) != 0))
        return 0;
    return rv_amqp_topic_match(next_word(p, pw), next_word(k, kw));
}

/* Splits spec ("q:key,q:key", written into) into a's queue list.  0, or
 * -1 if an entry lacks its queue or key, or there are too many. */
static int split_queues(rv_amqp *a, char *spec)
{
    char *save = NULL, *item;

    for (item = strtok_r(spec, ",", &save); item != NULL;
         item = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(item, ':');

        if (colon == NULL || colon == item || colon[1] == '\0'
            || a->nqueues == RV_AMQP_MAX_QUEUES)
            return -1;
        *colon = '\0';
        a->queue[a->nqueues] = item;
        a->binding[a->nqueues++] = colon + 1;
    }
    return 0;
}

int rv_amqp_queues_check(const char *queues)
{
    rv_amqp probe;
    char *copy;
    int rc;

    if (queues == NULL || queues[0] == '\0')
        return 0;
    copy = strdup(queues);
    if (copy == NULL)
        return -1;
    memset(&probe, 0, sizeof(probe));
    rc = split_queues(&probe, copy);
    free(copy);
    return rc;
}

rv_amqp *rv_amqp_new(const char *url, const char *exchange,
                     const svc_amqp_tls *tls, const char *queues)
{
    rv_amqp *a = calloc(1, sizeof(*a));

    if (a == NULL)
        return NULL;
    a->exchange = strdup(exchange);
    a->queue_spec = strdup(queues != NULL ? queues : "");
    a->ac = svc_amqp_conn_new(url, tls);
    if (a->exchange == NULL || a->queue_spec == NULL || a->ac == NULL
        || split_queues(a, a->queue_spec) != 0) {
        rv_amqp_free(a);
        return NULL;
    }
    return a;
}

void rv_amqp_free(rv_amqp *a)
{
    if (a == NULL)
        return;
    svc_amqp_conn_free(a->ac);
    free(a->exchange);
    free(a->queue_spec);
    free(a);
}

/* The configured durable queues, each bound to the exchange with its key
 * (the same declaration as kh-indexer's, so either may come first). */
static int declare_queues(rv_amqp *a)
{
    amqp_connection_state_t k = svc_amqp_conn_state(a->ac);
    int i;

    for (i = 0; i < a->nqueues; i++) {
        amqp_queue_declare(k, RV_AMQP_CHANNEL, amqp_cstring_bytes(a->queue[i]),
                           0, 1, 0, 0, amqp_empty_table);
        if (svc_amqp_conn_rpc(a->ac, "queue.declare") != 0)
            return -1;
        amqp_queue_bind(k, RV_AMQP_CHANNEL, amqp_cstring_bytes(a->queue[i]),
                        amqp_cstring_bytes(a->exchange),
                        amqp_cstring_bytes(a->binding[i]), amqp_empty_table);
        if (svc_amqp_conn_rpc(a->ac, "queue.bind") != 0)
            return -1;
    }
    return 0;
}

/* The durable topic exchange with its alternate exchange (first: a 406
 * there reopens the channel), confirm mode on channel 1, the queues. */
static int confirm_and_declare(rv_amqp *a)
{
    if (svc_amqp_conn_declare_events_exchange(a->ac, a->exchange, &a->with_ae)
        != 0)
        return -1;
    amqp_confirm_select(svc_amqp_conn_state(a->ac), RV_AMQP_CHANNEL);
    if (svc_amqp_conn_rpc(a->ac, "confirm.select") != 0)
        return -1;
    return declare_queues(a);
}

int rv_amqp_connect(rv_amqp *a, int timeout_ms)
{
    if (svc_amqp_conn_open(a->ac, timeout_ms) != 0)
        return -1;
    a->timeout_ms = timeout_ms;
    /* Up to six RPCs for the exchange, confirm.select, two per queue. */
    svc_amqp_conn_step_begin(a->ac, timeout_ms * (7 + 2 * a->nqueues));
    if (confirm_and_declare(a) != 0)
        return -1;
    svc_amqp_conn_step_end(a->ac);
    a->next_tag = 1;
    return 0;
}

void rv_amqp_close(rv_amqp *a)
{
    svc_amqp_conn_close(a->ac);
}

int rv_amqp_has_ae(const rv_amqp *a)
{
    return a->with_ae;
}

int rv_amqp_connected(const rv_amqp *a)
{
    return svc_amqp_conn_is_open(a->ac);
}

int rv_amqp_publish(rv_amqp *a, const char *routing_key,
                    const char *message_id, const char *body, size_t len,
                    uint64_t *tag)
{
    amqp_basic_properties_t props;
    amqp_bytes_t bytes;
    int st;

    *tag = 0;
    if (!svc_amqp_conn_is_open(a->ac)) {
        svc_amqp_conn_set_err(a->ac, "publish: not connected");
        return -1;
    }
    memset(&props, 0, sizeof(props));
    props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG
                   | AMQP_BASIC_MESSAGE_ID_FLAG;
    props.content_type = amqp_cstring_bytes("application/json");
    props.delivery_mode = 2; /* persistent */
    props.message_id = amqp_cstring_bytes(message_id);
    bytes.bytes = (void *)body;
    bytes.len = len;
    svc_amqp_conn_step_begin(a->ac, a->timeout_ms);
    st = amqp_basic_publish(svc_amqp_conn_state(a->ac), RV_AMQP_CHANNEL,
                            amqp_cstring_bytes(a->exchange),
                            amqp_cstring_bytes(routing_key), 1, 0, &props,
                            bytes);
    if (st != AMQP_STATUS_OK)
        return svc_amqp_conn_fail(a->ac, "publish", st);
    svc_amqp_conn_step_end(a->ac);
    *tag = a->next_tag++;
    return 0;
}

/* Marks tags settled by one ack or nack (multiple: every tag up to it). */
static void settle(rv_amqp_confirm *states, uint64_t first, uint64_t last,
                   uint64_t tag, int multiple, rv_amqp_confirm how)
{
    uint64_t t;
    const uint64_t from = multiple ? first : tag;

    for (t = from; t <= tag && t <= last; t++)
        if (t >= first && states[t - first] == RV_AMQP_PENDING)
            states[t - first] = how;
}

static int all_settled(const rv_amqp_confirm *states, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (states[i] == RV_AMQP_PENDING)
            return 0;
    return 1;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A basic.return's message (header and body follow the method): marks
 * the returned message, found by its message_id, RV_AMQP_RETURNED before
 * its ack arrives.  Returns 0 or -1. */
static int read_return(rv_amqp *a, const char *const *ids,
                       rv_amqp_confirm *states, size_t n)
{
    amqp_message_t msg;
    const amqp_bytes_t *id = &msg.properties.message_id;
    size_t i;

    if (svc_amqp_conn_reply(a->ac, "reading a returned message",
                            amqp_read_message(svc_amqp_conn_state(a->ac),
                                              RV_AMQP_CHANNEL, &msg, 0))
        != 0)
        return -1;
    for (i = 0; i < n && (msg.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG);
         i++) {
        if (strlen(ids[i]) == id->len
            && memcmp(ids[i], id->bytes, id->len) == 0
            && states[i] == RV_AMQP_PENDING) {
            states[i] = RV_AMQP_RETURNED;
            break;
        }
    }
    amqp_destroy_message(&msg);
    return 0;
}

/* Reads one frame before deadline and applies it.  Returns 0 or -1. */
static int read_confirm(rv_amqp *a, uint64_t first, uint64_t last,
                        const char *const *ids, rv_amqp_confirm *states,
                        int64_t deadline)
{
    amqp_frame_t f;
    struct timeval tv;
    int64_t left = deadline - now_ms();
    int st;

    svc_amqp_conn_timeval(left > 0 ? (int)left : 0, &tv);
    st = amqp_simple_wait_frame_noblock(svc_amqp_conn_state(a->ac), &f, &tv);
    if (st != AMQP_STATUS_OK)
        return svc_amqp_conn_fail(a->ac, "waiting for confirms", st);
    if (f.frame_type != AMQP_FRAME_METHOD)
        return 0;
    if (f.payload.method.id == AMQP_BASIC_RETURN_METHOD)
        return read_return(a, ids, states, (size_t)(last - first + 1));
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
        svc_amqp_conn_set_err(a->ac, "waiting for confirms: closed by the "
                                     "broker");
        svc_amqp_conn_drop(a->ac);
        return -1;
    }
    return 0;
}

int rv_amqp_wait_confirms(rv_amqp *a, uint64_t first_tag, uint64_t last_tag,
                          const char *const *ids, rv_amqp_confirm *states,
                          int timeout_ms)
{
    const int64_t deadline = now_ms() + timeout_ms;
    const size_t n = (size_t)(last_tag - first_tag + 1);

    /* The frames' waits end at the deadline; amqp_read_message's (a
     * basic.return's header and body) only by the guard. */
    svc_amqp_conn_step_begin(a->ac, timeout_ms);
    while (!all_settled(states, n)) {
        if (!svc_amqp_conn_is_open(a->ac)) {
            svc_amqp_conn_set_err(a->ac, "waiting for confirms: not "
                                         "connected");
            return -1;
        }
        if (read_confirm(a, first_tag, last_tag, ids, states, deadline) != 0)
            return -1;
        amqp_maybe_release_buffers(svc_amqp_conn_state(a->ac));
    }
    svc_amqp_conn_step_end(a->ac);
    return 0;
}

int rv_amqp_alive(rv_amqp *a)
{
    amqp_frame_t f;
    struct timeval zero = {0, 0};
    int st;

    if (!svc_amqp_conn_is_open(a->ac))
        return 0;
    /* Nothing is expected between batches: a frame here is the broker
     * closing (connection.close), and an error is a dead socket. */
    st = amqp_simple_wait_frame_noblock(svc_amqp_conn_state(a->ac), &f, &zero);
    if (st == AMQP_STATUS_TIMEOUT)
        return 1;
    if (st == AMQP_STATUS_OK) {
        svc_amqp_conn_set_err(a->ac, "closed by the broker between "
                                     "batches");
        svc_amqp_conn_drop(a->ac);
        return 0;
    }
    svc_amqp_conn_fail(a->ac, "idle check", st);
    return 0;
}

#ifdef REVIEWD_TESTING
void rv_amqp_test_break(rv_amqp *a)
{
    const int fd = rv_amqp_fd(a);

    if (fd >= 0)
        shutdown(fd, SHUT_RDWR);
}
#endif

int rv_amqp_fd(const rv_amqp *a)
{
    amqp_connection_state_t k = svc_amqp_conn_state(a->ac);

    return k != NULL ? amqp_get_sockfd(k) : -1;
}

const char *rv_amqp_endpoint(const rv_amqp *a)
{
    return svc_amqp_conn_endpoint(a->ac);
}

const char *rv_amqp_errmsg(const rv_amqp *a)
{
    return svc_amqp_conn_errmsg(a->ac);
}
