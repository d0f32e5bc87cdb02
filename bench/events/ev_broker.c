/*
 * ev_broker.c: bench_events' test consumer and its limit publisher (see
 * ev_broker.h).
 *
 * Every rabbitmq-c call that waits is bounded (the connect, the handshake
 * and each RPC by EV_AMQP_TIMEOUT_MS, the consumer's wait by 200 ms so
 * that it sees the stop flag), so a silent broker makes the benchmark
 * report an error instead of hanging.  A connection that failed once is
 * never used again: the consumer records its error and stops, and the
 * limit gives up, because a benchmark that papers over a broken connection
 * prints figures of a different workload.
 */
#include "ev_broker.h"

#include "bench_clock.h"
#include "ev_parse.h"

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EV_CHANNEL 1
#define EV_AMQP_TIMEOUT_MS 10000
#define EV_CONFIRM_TIMEOUT_MS 30000

struct ev_consumer {
    amqp_connection_state_t conn;
    pthread_t thread;
    int started;
    atomic_int stop;
    ev_receipt *v;
    size_t cap;
    atomic_size_t n;
    atomic_size_t dropped;
    atomic_size_t unparsed;
    atomic_int failed; /* set (release) once err is written */
    char err[400];
};

static int64_t realtime_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void ms_to_tv(int ms, struct timeval *tv)
{
    tv->tv_sec = ms / 1000;
    tv->tv_usec = (ms % 1000) * 1000;
}

/* Turns an RPC reply into 0, or -1 with what failed in err. */
static int rpc_ok(const char *what, amqp_rpc_reply_t r, char *err,
                  size_t errlen)
{
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return 0;
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
        snprintf(err, errlen, "amqp %s: %s", what,
                 amqp_error_string2(r.library_error));
    } else {
        snprintf(err, errlen,
                 "amqp %s: refused by the broker (method "
                 "0x%08x)",
                 what, (unsigned)r.reply.id);
    }
    return -1;
}

/* A connection to url with channel 1 open, or NULL with err set. */
static amqp_connection_state_t open_conn(const char *url, char *err,
                                         size_t errlen)
{
    struct amqp_connection_info info;
    struct timeval tv;
    amqp_connection_state_t conn;
    amqp_socket_t *sock;
    char *copy = strdup(url);
    int st;

    if (copy == NULL || amqp_parse_url(copy, &info) != AMQP_STATUS_OK) {
        snprintf(err, errlen, "AMQP URL does not parse: %.200s", url);
        free(copy);
        return NULL;
    }
    ms_to_tv(EV_AMQP_TIMEOUT_MS, &tv);
    conn = amqp_new_connection();
    sock = conn != NULL ? amqp_tcp_socket_new(conn) : NULL;
    if (sock == NULL) {
        snprintf(err, errlen, "amqp: out of memory");
        goto fail;
    }
    amqp_set_handshake_timeout(conn, &tv);
    amqp_set_rpc_timeout(conn, &tv);
    st = amqp_socket_open_noblock(sock, info.host, info.port, &tv);
    if (st != AMQP_STATUS_OK) {
        snprintf(err, errlen, "amqp connect %s:%d: %s", info.host, info.port,
                 amqp_error_string2(st));
        goto fail;
    }
    if (rpc_ok("login",
               amqp_login(conn, info.vhost, 1, 131072, 0,
                          AMQP_SASL_METHOD_PLAIN, info.user, info.password),
               err, errlen)
        != 0)
        goto fail;
    amqp_channel_open(conn, EV_CHANNEL);
    if (rpc_ok("channel.open", amqp_get_rpc_reply(conn), err, errlen) != 0)
        goto fail;
    free(copy);
    return conn;
fail:
    if (conn != NULL)
        amqp_destroy_connection(conn);
    free(copy);
    return NULL;
}

static void close_conn(amqp_connection_state_t conn)
{
    if (conn == NULL)
        return;
    amqp_channel_close(conn, EV_CHANNEL, AMQP_REPLY_SUCCESS);
    amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(conn);
}

/* Declares name as a durable topic exchange (passive: only checks that
 * it exists, for an exchange the services declare with their own
 * arguments, which a plain redeclaration would conflict with: 406). */
static int declare_exchange(amqp_connection_state_t conn, const char *name,
                            int passive, char *err, size_t errlen)
{
    amqp_exchange_declare(conn, EV_CHANNEL, amqp_cstring_bytes(name),
                          amqp_cstring_bytes("topic"), passive, 1, 0, 0,
                          amqp_empty_table);
    return rpc_ok("exchange.declare", amqp_get_rpc_reply(conn), err, errlen);
}

static void record(ev_consumer *c, const amqp_envelope_t *env, int64_t at)
{
    const size_t i = atomic_load_explicit(&c->n, memory_order_relaxed);
    const long long id = ev_parse_doc_id(env->message.body.bytes,
                                         env->message.body.len);

    if (id < 0) {
        atomic_fetch_add(&c->unparsed, 1);
        return;
    }
    if (i >= c->cap) {
        atomic_fetch_add(&c->dropped, 1);
        return;
    }
    c->v[i].doc_id = id;
    c->v[i].at_us = at;
    atomic_store_explicit(&c->n, i + 1, memory_order_release);
}

static void *consume_main(void *arg)
{
    ev_consumer *c = arg;
    struct timeval tv;
    amqp_envelope_t env;
    amqp_rpc_reply_t r;

    while (!atomic_load(&c->stop)) {
        ms_to_tv(200, &tv);
        amqp_maybe_release_buffers(c->conn);
        r = amqp_consume_message(c->conn, &env, &tv, 0);
        if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
            && r.library_error == AMQP_STATUS_TIMEOUT)
            continue;
        if (r.reply_type != AMQP_RESPONSE_NORMAL) {
            rpc_ok("consume", r, c->err, sizeof(c->err));
            atomic_store_explicit(&c->failed, 1, memory_order_release);
            break;
        }
        record(c, &env, realtime_us());
        amqp_destroy_envelope(&env);
    }
    return NULL;
}

/* An exclusive server-named queue bound to exchange, consumed no_ack. */
static int subscribe(ev_consumer *c, const char *exchange,
                     const char *binding_key)
{
    amqp_queue_declare_ok_t *q;
    amqp_bytes_t name;

    /* The services' exchange: kh-indexer has declared it, with its
     * alternate exchange, before the bench starts this consumer. */
    if (declare_exchange(c->conn, exchange, 1, c->err, sizeof(c->err)) != 0)
        return -1;
    q = amqp_queue_declare(c->conn, EV_CHANNEL, amqp_empty_bytes, 0, 0, 1, 1,
                           amqp_empty_table);
    if (rpc_ok("queue.declare", amqp_get_rpc_reply(c->conn), c->err,
               sizeof(c->err))
        != 0)
        return -1;
    name = amqp_bytes_malloc_dup(q->queue);
    if (name.bytes == NULL) {
        snprintf(c->err, sizeof(c->err), "amqp: out of memory");
        return -1;
    }
    amqp_queue_bind(c->conn, EV_CHANNEL, name, amqp_cstring_bytes(exchange),
                    amqp_cstring_bytes(binding_key), amqp_empty_table);
    if (rpc_ok("queue.bind", amqp_get_rpc_reply(c->conn), c->err,
               sizeof(c->err))
        == 0) {
        amqp_basic_consume(c->conn, EV_CHANNEL, name, amqp_empty_bytes, 0, 1,
                           1, amqp_empty_table);
    }
    amqp_bytes_free(name);
    return c->err[0] == '\0'
               ? rpc_ok("basic.consume", amqp_get_rpc_reply(c->conn), c->err,
                        sizeof(c->err))
               : -1;
}

ev_consumer *ev_consumer_start(const char *url, const char *exchange,
                               const char *binding_key, size_t cap, char *err,
                               size_t errlen)
{
    ev_consumer *c = calloc(1, sizeof(*c));

    if (c == NULL || (c->v = calloc(cap, sizeof(*c->v))) == NULL) {
        snprintf(err, errlen, "consumer: out of memory");
        free(c);
        return NULL;
    }
    c->cap = cap;
    c->conn = open_conn(url, c->err, sizeof(c->err));
    if (c->conn == NULL || subscribe(c, exchange, binding_key) != 0)
        goto fail;
    if (pthread_create(&c->thread, NULL, consume_main, c) != 0) {
        snprintf(c->err, sizeof(c->err), "consumer: pthread_create failed");
        goto fail;
    }
    c->started = 1;
    return c;
fail:
    snprintf(err, errlen, "%s", c->err);
    ev_consumer_free(c);
    return NULL;
}

const ev_receipt *ev_consumer_receipts(ev_consumer *c, size_t *n)
{
    *n = atomic_load_explicit(&c->n, memory_order_acquire);
    return c->v;
}

size_t ev_consumer_dropped(const ev_consumer *c)
{
    return atomic_load(&c->dropped);
}

size_t ev_consumer_unparsed(const ev_consumer *c)
{
    return atomic_load(&c->unparsed);
}

const char *ev_consumer_errmsg(ev_consumer *c)
{
    /* The thread writes err once, as it stops, and then sets failed. */
    return atomic_load_explicit(&c->failed, memory_order_acquire) ? c->err
                                                                  : "";
}

void ev_consumer_free(ev_consumer *c)
{
    if (c == NULL)
        return;
    if (c->started) {
        atomic_store(&c->stop, 1);
        pthread_join(c->thread, NULL);
    }
    close_conn(c->conn);
    free(c->v);
    free(c);
}

/* ---- the limit publisher ------------------------------------------------ */

typedef struct publisher {
    amqp_connection_state_t conn;
    char exchange[64];
    amqp_bytes_t body;
    amqp_basic_properties_t props;
    uint64_t next_tag; /* the tag the next publish gets */
    uint64_t acked;    /* every tag up to this one is confirmed */
    char *err;
    size_t errlen;
} publisher;

static int publish_one(publisher *p)
{
    char id[48];
    int st;

    snprintf(id, sizeof(id), "limit-%llu", (unsigned long long)p->next_tag);
    p->props.message_id = amqp_cstring_bytes(id);
    st = amqp_basic_publish(p->conn, EV_CHANNEL,
                            amqp_cstring_bytes(p->exchange),
                            amqp_cstring_bytes("document.approved"), 0, 0,
                            &p->props, p->body);
    if (st != AMQP_STATUS_OK) {
        snprintf(p->err, p->errlen, "amqp publish: %s",
                 amqp_error_string2(st));
        return -1;
    }
    p->next_tag++;
    return 0;
}

/* Reads frames until every tag below next_tag is confirmed. */
static int await_confirms(publisher *p)
{
    struct timeval tv;
    amqp_frame_t f;
    int st;

    while (p->acked + 1 < p->next_tag) {
        ms_to_tv(EV_CONFIRM_TIMEOUT_MS, &tv);
        st = amqp_simple_wait_frame_noblock(p->conn, &f, &tv);
        if (st != AMQP_STATUS_OK) {
            snprintf(p->err, p->errlen, "amqp waiting for confirms: %s",
                     amqp_error_string2(st));
            return -1;
        }
        if (f.frame_type != AMQP_FRAME_METHOD)
            continue;
        if (f.payload.method.id != AMQP_BASIC_ACK_METHOD) {
            snprintf(p->err, p->errlen,
                     "amqp: expected basic.ack, got "
                     "method 0x%08x",
                     (unsigned)f.payload.method.id);
            return -1;
        }
        const amqp_basic_ack_t *ack = f.payload.method.decoded;
        if (ack->multiple || ack->delivery_tag == p->acked + 1) {
            p->acked = ack->delivery_tag > p->acked ? ack->delivery_tag
                                                    : p->acked;
        }
        amqp_maybe_release_buffers(p->conn);
    }
    return 0;
}

/* Confirm mode, and an exchange and durable queue of the run's own. */
static int publisher_setup(publisher *p)
{
    amqp_bytes_t name = amqp_cstring_bytes(p->exchange);

    amqp_confirm_select(p->conn, EV_CHANNEL);
    if (rpc_ok("confirm.select", amqp_get_rpc_reply(p->conn), p->err,
               p->errlen)
            != 0
        || declare_exchange(p->conn, p->exchange, 0, p->err, p->errlen) != 0)
        return -1;
    amqp_queue_declare(p->conn, EV_CHANNEL, name, 0, 1, 0, 0,
                       amqp_empty_table);
    if (rpc_ok("queue.declare", amqp_get_rpc_reply(p->conn), p->err, p->errlen)
        != 0)
        return -1;
    amqp_queue_bind(p->conn, EV_CHANNEL, name, name, amqp_cstring_bytes("#"),
                    amqp_empty_table);
    return rpc_ok("queue.bind", amqp_get_rpc_reply(p->conn), p->err,
                  p->errlen);
}

static void publisher_teardown(publisher *p)
{
    amqp_bytes_t name = amqp_cstring_bytes(p->exchange);

    amqp_queue_delete(p->conn, EV_CHANNEL, name, 0, 0);
    amqp_get_rpc_reply(p->conn);
    amqp_exchange_delete(p->conn, EV_CHANNEL, name, 0);
    amqp_get_rpc_reply(p->conn);
}

static int run_each(publisher *p, ev_limit *out)
{
    const int64_t start = bench_clock_ns();
    long long i;

    for (i = 0; i < out->each_n; i++) {
        const int64_t t0 = bench_clock_ns();

        if (publish_one(p) != 0 || await_confirms(p) != 0)
            return -1;
        bench_samples_add(&out->each_lat, bench_clock_ns() - t0);
    }
    out->each_per_s = (double)out->each_n * 1e9
                      / (double)(bench_clock_ns() - start);
    return 0;
}

static int run_batches(publisher *p, ev_limit *out)
{
    const int64_t start = bench_clock_ns();
    long long sent = 0;
    int i;

    while (sent < out->batch_n) {
        for (i = 0; i < out->batch && sent < out->batch_n; i++, sent++)
            if (publish_one(p) != 0)
                return -1;
        if (await_confirms(p) != 0)
            return -1;
    }
    out->batch_per_s = (double)out->batch_n * 1e9
                       / (double)(bench_clock_ns() - start);
    return 0;
}

int ev_limit_measure(const char *url, const char *body, long long each_n,
                     long long batch_n, int batch, ev_limit *out, char *err,
                     size_t errlen)
{
    publisher p;
    int rc = -1;

    memset(out, 0, sizeof(*out));
    memset(&p, 0, sizeof(p));
    out->each_n = each_n;
    out->batch_n = batch_n;
    out->batch = batch;
    if (bench_samples_init(&out->each_lat, (size_t)each_n) != 0) {
        snprintf(err, errlen, "limit: out of memory");
        return -1;
    }
    snprintf(p.exchange, sizeof(p.exchange), "bench.limit.%ld",
             (long)getpid());
    p.err = err;
    p.errlen = errlen;
    p.body = amqp_cstring_bytes(body);
    p.props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG
                     | AMQP_BASIC_DELIVERY_MODE_FLAG
                     | AMQP_BASIC_MESSAGE_ID_FLAG;
    p.props.content_type = amqp_cstring_bytes("application/json");
    p.props.delivery_mode = 2; /* persistent, as the relay's */
    p.next_tag = 1;
    p.conn = open_conn(url, err, errlen);
    if (p.conn != NULL && publisher_setup(&p) == 0 && run_each(&p, out) == 0
        && run_batches(&p, out) == 0)
        rc = 0;
    if (p.conn != NULL) {
        publisher_teardown(&p);
        close_conn(p.conn);
    }
    return rc;
}
