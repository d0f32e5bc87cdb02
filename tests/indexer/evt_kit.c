/*
 * evt_kit.c: the event pipeline test kit (see evt_kit.h).
 *
 * The consumer thread owns its AMQP connection outright; the test thread
 * only reads the record under the mutex, so rabbitmq-c (which is not
 * thread-safe per connection) is only ever called from one thread.  A
 * delivery is recorded before it is acknowledged: a crash of the broker
 * between the two makes it come again (redelivered), which is the
 * at-least-once the tests want to observe, never a silent loss.
 */
#include "evt_kit.h"

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kh_chunk.h"
#include "svc_amqp_conn.h"
#include "testkit.h"

#define EVT_EXCHANGE "kh.documents"
#define EVT_CHANNEL 1
#define EVT_POLL_MS 100
#define EVT_CONNECT_TIMEOUT_MS 2000
#define EVT_START_TIMEOUT_MS 30000
#define EVT_STOP_TIMEOUT_MS 15000

/* ---- the test consumer --------------------------------------------------- */

struct evt_consumer {
    char *url_copy; /* amqp_parse_url writes into it */
    struct amqp_connection_info info;
    char exchange[128];
    char queue[128]; /* "" until bound when server-named */
    int durable;
    amqp_connection_state_t conn; /* the thread's; NULL while down */
    pthread_t thread;
    atomic_int stopping;
    pthread_mutex_t mu;
    evt_event *events;
    size_t n, cap;
    int connects;
    char err[300];
};

static void consumer_set_err(evt_consumer *c, const char *what,
                             amqp_rpc_reply_t r)
{
    const char *why = r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
                          ? amqp_error_string2(r.library_error)
                          : "refused by the broker";

    pthread_mutex_lock(&c->mu);
    snprintf(c->err, sizeof(c->err), "amqp %s:%d: %s: %s", c->info.host,
             c->info.port, what, why);
    pthread_mutex_unlock(&c->mu);
}

static int rpc_ok(evt_consumer *c, const char *what)
{
    const amqp_rpc_reply_t r = amqp_get_rpc_reply(c->conn);

    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return 1;
    consumer_set_err(c, what, r);
    return 0;
}

static int login_ok(evt_consumer *c)
{
    const amqp_rpc_reply_t r = amqp_login(c->conn, c->info.vhost, 1, 131072, 0,
                                          AMQP_SASL_METHOD_PLAIN, c->info.user,
                                          c->info.password);

    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return 1;
    consumer_set_err(c, "login", r);
    return 0;
}

/* The exchange exactly as reviewd and kh-indexer declare it, by their
 * own code (svc_amqp_declare_events_exchange_on): its alternate exchange
 * "<exchange>.unrouted" and that queue, then the topic exchange with
 * alternate-exchange; one that exists without the argument is taken as
 * it is.  Returns 1 when declared. */
static int declare_exchange(evt_consumer *c)
{
    const char *what = NULL;
    amqp_rpc_reply_t r;

    if (svc_amqp_declare_events_exchange_on(c->conn, EVT_CHANNEL, c->exchange,
                                            &what, &r)
        >= 0)
        return 1;
    consumer_set_err(c, what, r);
    return 0;
}

/* The queue (durable and named, or server-named and exclusive), bound to
 * every routing key of the exchange.  Returns 1 when bound. */
static int declare_queue(evt_consumer *c)
{
    amqp_queue_declare_ok_t *ok;

    if (!declare_exchange(c))
        return 0;
    ok = amqp_queue_declare(c->conn, EVT_CHANNEL,
                            c->durable ? amqp_cstring_bytes(c->queue)
                                       : amqp_empty_bytes,
                            0, c->durable, !c->durable, !c->durable,
                            amqp_empty_table);
    if (ok == NULL || !rpc_ok(c, "queue.declare"))
        return 0;
    if (!c->durable) {
        pthread_mutex_lock(&c->mu);
        snprintf(c->queue, sizeof(c->queue), "%.*s", (int)ok->queue.len,
                 (const char *)ok->queue.bytes);
        pthread_mutex_unlock(&c->mu);
    }
    amqp_queue_bind(c->conn, EVT_CHANNEL, amqp_cstring_bytes(c->queue),
                    amqp_cstring_bytes(c->exchange), amqp_cstring_bytes("#"),
                    amqp_empty_table);
    return rpc_ok(c, "queue.bind");
}

static void consumer_drop(evt_consumer *c)
{
    if (c->conn != NULL) {
        amqp_destroy_connection(c->conn);
        c->conn = NULL;
    }
}

/* Connects, declares and starts consuming.  Returns 1 on success. */
/* Connects, logs in and opens the channel.  Returns 1 on success. */
static int open_channel(evt_consumer *c)
{
    struct timeval tv = {EVT_CONNECT_TIMEOUT_MS / 1000,
                         (EVT_CONNECT_TIMEOUT_MS % 1000) * 1000};
    amqp_socket_t *sock;
    int st;

    c->conn = amqp_new_connection();
    sock = c->conn != NULL ? amqp_tcp_socket_new(c->conn) : NULL;
    if (sock == NULL) {
        consumer_drop(c);
        return 0;
    }
    amqp_set_handshake_timeout(c->conn, &tv);
    amqp_set_rpc_timeout(c->conn, &tv);
    st = amqp_socket_open_noblock(sock, c->info.host, c->info.port, &tv);
    if (st != AMQP_STATUS_OK) {
        amqp_rpc_reply_t r = {AMQP_RESPONSE_LIBRARY_EXCEPTION, {0, NULL}, st};

        consumer_set_err(c, "connect", r);
        consumer_drop(c);
        return 0;
    }
    if (!login_ok(c) || amqp_channel_open(c->conn, EVT_CHANNEL) == NULL
        || !rpc_ok(c, "channel.open")) {
        consumer_drop(c);
        return 0;
    }
    return 1;
}

static int consumer_connect(evt_consumer *c)
{
    if (!open_channel(c))
        return 0;
    if (!declare_queue(c)) {
        consumer_drop(c);
        return 0;
    }
    amqp_basic_consume(c->conn, EVT_CHANNEL, amqp_cstring_bytes(c->queue),
                       amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
    if (!rpc_ok(c, "basic.consume")) {
        consumer_drop(c);
        return 0;
    }
    pthread_mutex_lock(&c->mu);
    c->connects++;
    pthread_mutex_unlock(&c->mu);
    return 1;
}

/* The document id of an event body ("" when it has none). */
static void body_document_id(const amqp_bytes_t *body, char *out, size_t len)
{
    json_t *j = json_loadb(body->bytes, body->len, 0, NULL);
    const json_t *v = json_object_get(j, "document_id");

    out[0] = '\0';
    if (json_is_string(v))
        snprintf(out, len, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(out, len, "%lld", (long long)json_integer_value(v));
    json_decref(j);
}

static void record(evt_consumer *c, const amqp_envelope_t *env)
{
    const amqp_basic_properties_t *p = &env->message.properties;
    evt_event e;

    memset(&e, 0, sizeof(e));
    if (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) {
        snprintf(e.message_id, sizeof(e.message_id), "%.*s",
                 (int)p->message_id.len, (const char *)p->message_id.bytes);
    }
    snprintf(e.routing_key, sizeof(e.routing_key), "%.*s",
             (int)env->routing_key.len, (const char *)env->routing_key.bytes);
    body_document_id(&env->message.body, e.document_id, sizeof(e.document_id));
    e.redelivered = env->redelivered != 0;
    pthread_mutex_lock(&c->mu);
    if (c->n == c->cap) {
        const size_t cap = c->cap > 0 ? c->cap * 2 : 1024;
        evt_event *p2 = realloc(c->events, cap * sizeof(*p2));

        if (p2 == NULL) {
            /* Counting would be wrong from here on: fail loudly. */
            fprintf(stderr, "evt: out of memory recording events\n");
            abort();
        }
        c->events = p2;
        c->cap = cap;
    }
    c->events[c->n++] = e;
    pthread_mutex_unlock(&c->mu);
}

/* Takes one delivery (or times out).  Returns 0 when the connection
 * failed and must be made again. */
static int consume_one(evt_consumer *c)
{
    struct timeval tv = {0, EVT_POLL_MS * 1000};
    amqp_envelope_t env;
    amqp_rpc_reply_t r;
    int acked;

    amqp_maybe_release_buffers(c->conn);
    r = amqp_consume_message(c->conn, &env, &tv, 0);
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
        && r.library_error == AMQP_STATUS_TIMEOUT)
        return 1;
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        consumer_set_err(c, "consume", r);
        return 0;
    }
    record(c, &env);
    acked = amqp_basic_ack(c->conn, EVT_CHANNEL, env.delivery_tag, 0)
            == AMQP_STATUS_OK;
    amqp_destroy_envelope(&env);
    return acked;
}

static void sleep_ms(int ms)
{
    const struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* A durable queue outlives the consumer unless deleted: leave no trace. */
static void delete_durable_queue(evt_consumer *c)
{
    if (!c->durable || (c->conn == NULL && !consumer_connect(c)))
        return;
    amqp_queue_delete(c->conn, EVT_CHANNEL, amqp_cstring_bytes(c->queue), 0,
                      0);
    rpc_ok(c, "queue.delete");
}

static void *consumer_main(void *arg)
{
    evt_consumer *c = arg;

    while (!atomic_load(&c->stopping)) {
        if (c->conn == NULL && !consumer_connect(c)) {
            sleep_ms(EVT_POLL_MS);
            continue;
        }
        if (!consume_one(c))
            consumer_drop(c);
    }
    delete_durable_queue(c);
    if (c->conn != NULL) {
        amqp_connection_close(c->conn, AMQP_REPLY_SUCCESS);
        consumer_drop(c);
    }
    return NULL;
}

static int consumer_bound(void *arg)
{
    evt_consumer *c = arg;
    int n;

    pthread_mutex_lock(&c->mu);
    n = c->connects;
    pthread_mutex_unlock(&c->mu);
    return n > 0;
}

evt_consumer *evt_consumer_start(const char *url, const char *exchange,
                                 const char *durable_queue)
{
    evt_consumer *c = calloc(1, sizeof(*c));

    if (c == NULL || (c->url_copy = strdup(url)) == NULL) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    amqp_default_connection_info(&c->info);
    if (amqp_parse_url(c->url_copy, &c->info) != AMQP_STATUS_OK) {
        fprintf(stderr, "evt: AMQP URL does not parse: %s\n", url);
        free(c->url_copy);
        free(c);
        return NULL;
    }
    snprintf(c->exchange, sizeof(c->exchange), "%s",
             exchange != NULL ? exchange : EVT_EXCHANGE);
    c->durable = durable_queue != NULL;
    snprintf(c->queue, sizeof(c->queue), "%s",
             durable_queue != NULL ? durable_queue : "");
    if (pthread_create(&c->thread, NULL, consumer_main, c) != 0) {
        free(c->url_copy);
        free(c);
        return NULL;
    }
    if (!testkit_wait_until(consumer_bound, c, EVT_START_TIMEOUT_MS)) {
        fprintf(stderr, "evt: test consumer not bound within %d ms: %s\n",
                EVT_START_TIMEOUT_MS, c->err);
        evt_consumer_free(c);
        return NULL;
    }
    return c;
}

void evt_consumer_free(evt_consumer *c)
{
    if (c == NULL)
        return;
    atomic_store(&c->stopping, 1);
    pthread_join(c->thread, NULL);
    pthread_mutex_destroy(&c->mu);
    free(c->events);
    free(c->url_copy);
    free(c);
}

size_t evt_consumer_total(evt_consumer *c)
{
    size_t n;

    pthread_mutex_lock(&c->mu);
    n = c->n;
    pthread_mutex_unlock(&c->mu);
    return n;
}

int evt_consumer_count(evt_consumer *c, const char *message_id)
{
    size_t i;
    int n = 0;

    pthread_mutex_lock(&c->mu);
    for (i = 0; i < c->n; i++)
        n += strcmp(c->events[i].message_id, message_id) == 0;
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* What evt_consumer_wait_all and evt_db_wait_indexed poll: a set of
 * event ids and where to look for them. */
typedef struct ids_wait {
    evt_consumer *consumer;
    rvt_db *db;
    char (*ids)[64];
    int n;
} ids_wait;

static int all_arrived(void *arg)
{
    const ids_wait *w = arg;

    for (int i = 0; i < w->n; i++)
        if (evt_consumer_count(w->consumer, w->ids[i]) < 1)
            return 0;
    return 1;
}

int evt_consumer_wait_all(evt_consumer *c, char (*ids)[64], int n,
                          int64_t timeout_ms)
{
    ids_wait w = {.consumer = c, .ids = ids, .n = n};

    return testkit_wait_until(all_arrived, &w, timeout_ms);
}

evt_event *evt_consumer_events(evt_consumer *c, size_t *n)
{
    evt_event *copy = NULL;

    pthread_mutex_lock(&c->mu);
    *n = 0;
    if (c->n > 0 && (copy = malloc(c->n * sizeof(*copy))) != NULL) {
        memcpy(copy, c->events, c->n * sizeof(*copy));
        *n = c->n;
    }
    pthread_mutex_unlock(&c->mu);
    return copy;
}

int evt_fixture_close(rvt_server *s, evt_consumer *c, rvt_db *db)
{
    const int clean = rvt_server_terminate(s);

    evt_consumer_free(c);
    rvt_db_drop(db);
    if (clean)
        rvt_server_remove_dir(s);
    rvt_server_expect_clean(s);
    return clean;
}

int evt_group_setup(void **state, size_t size, evt_fixture_fn open_fn,
                    evt_fixture_fn close_fn)
{
    void *f = calloc(1, size);

    *state = NULL;
    if (f == NULL)
        return -1;
    if (open_fn(f) != 0) {
        close_fn(f);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

int evt_group_teardown(void **state, evt_fixture_fn close_fn)
{
    int clean;

    if (*state == NULL) /* the setup failed before it had a fixture */
        return 0;
    clean = close_fn(*state);
    free(*state);
    *state = NULL;
    return clean ? 0 : -1;
}

/* 1 when who has written both lines of a TLS handshake refused for the
 * broker's certificate, as has(who, line) finds them. */
static int says_ca_refused(int (*has)(const void *who, const char *line),
                           const void *who)
{
    return has(who, "tls handshake refused (CA ")
           && has(who, "SSL peer cert verification failed");
}

static int server_log_has(const void *s, const char *line)
{
    return rvt_server_log_has(s, line);
}

static int indexer_output_has(const void *ix, const char *line)
{
    return evt_indexer_output_has(ix, line);
}

int evt_server_refused_ca(void *server)
{
    return says_ca_refused(server_log_has, server);
}

int evt_indexer_refused_ca(void *indexer)
{
    return says_ca_refused(indexer_output_has, indexer);
}

evt_consumer *evt_consumer_start_shared(void)
{
    char cmd[700];
    evt_consumer *c = evt_consumer_start(testkit_amqp_url(), NULL, NULL);

    if (c != NULL)
        return c;
    snprintf(cmd, sizeof(cmd), "'%s/scripts/stack' up rabbitmq >&2",
             testkit_source_dir());
    if (system(cmd) != 0) {
        fprintf(stderr, "evt: scripts/stack up rabbitmq failed\n");
        return NULL;
    }
    return evt_consumer_start(testkit_amqp_url(), NULL, NULL);
}

int evt_amqp_forget(const char *url, const char *exchange, const char *queue)
{
    evt_consumer c;
    int ok;

    /* A consumer that never starts its thread: its connect declares (or
     * finds) both, and the deletes follow on the same channel. */
    memset(&c, 0, sizeof(c));
    pthread_mutex_init(&c.mu, NULL);
    c.url_copy = strdup(url);
    amqp_default_connection_info(&c.info);
    snprintf(c.exchange, sizeof(c.exchange), "%s", exchange);
    snprintf(c.queue, sizeof(c.queue), "%s", queue);
    c.durable = 1;
    ok = c.url_copy != NULL
         && amqp_parse_url(c.url_copy, &c.info) == AMQP_STATUS_OK
         && consumer_connect(&c);
    if (ok) {
        amqp_queue_delete(c.conn, EVT_CHANNEL, amqp_cstring_bytes(queue), 0,
                          0);
        ok = rpc_ok(&c, "queue.delete");
        amqp_exchange_delete(c.conn, EVT_CHANNEL, amqp_cstring_bytes(exchange),
                             0);
        ok = rpc_ok(&c, "exchange.delete") && ok;
        if (ok) {
            char ae[300];

            snprintf(ae, sizeof(ae), "%s.unrouted", exchange);
            amqp_queue_delete(c.conn, EVT_CHANNEL, amqp_cstring_bytes(ae), 0,
                              0);
            ok = rpc_ok(&c, "queue.delete (unrouted)");
            amqp_exchange_delete(c.conn, EVT_CHANNEL, amqp_cstring_bytes(ae),
                                 0);
            ok = rpc_ok(&c, "exchange.delete (unrouted)") && ok;
        }
        amqp_connection_close(c.conn, AMQP_REPLY_SUCCESS);
        consumer_drop(&c);
    }
    if (!ok) {
        fprintf(stderr, "evt: could not delete %s and %s: %s\n", queue,
                exchange, c.err);
    }
    free(c.url_copy);
    pthread_mutex_destroy(&c.mu);
    return ok ? 0 : -1;
}

/* A connection with its channel open and nothing declared, for the
 * helpers below; c is the caller's, freed with bare_end. */
static int bare_begin(evt_consumer *c, const char *url)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->mu, NULL);
    c->url_copy = strdup(url);
    amqp_default_connection_info(&c->info);
    if (c->url_copy == NULL
        || amqp_parse_url(c->url_copy, &c->info) != AMQP_STATUS_OK
        || !open_channel(c)) {
        fprintf(stderr, "evt: cannot connect to %s: %s\n", url, c->err);
        free(c->url_copy);
        pthread_mutex_destroy(&c->mu);
        return -1;
    }
    return 0;
}

static void bare_end(evt_consumer *c)
{
    if (c->conn != NULL)
        amqp_connection_close(c->conn, AMQP_REPLY_SUCCESS);
    consumer_drop(c);
    free(c->url_copy);
    pthread_mutex_destroy(&c->mu);
}

int evt_amqp_plain_exchange(const char *url, const char *exchange)
{
    evt_consumer c;
    int ok;

    if (bare_begin(&c, url) != 0)
        return -1;
    amqp_exchange_declare(c.conn, EVT_CHANNEL, amqp_cstring_bytes(exchange),
                          amqp_cstring_bytes("topic"), 0, 1, 0, 0,
                          amqp_empty_table);
    ok = rpc_ok(&c, "exchange.declare (plain)");
    if (!ok)
        fprintf(stderr, "evt: %s\n", c.err);
    bare_end(&c);
    return ok ? 0 : -1;
}

int evt_amqp_delete_queue(const char *url, const char *queue)
{
    evt_consumer c;
    int ok;

    if (bare_begin(&c, url) != 0)
        return -1;
    amqp_queue_delete(c.conn, EVT_CHANNEL, amqp_cstring_bytes(queue), 0, 0);
    ok = rpc_ok(&c, "queue.delete");
    if (!ok)
        fprintf(stderr, "evt: %s\n", c.err);
    bare_end(&c);
    return ok ? 0 : -1;
}

int evt_amqp_take(const char *url, const char *queue, char (*keys)[40],
                  int max)
{
    evt_consumer c;
    int n = 0, ok = 1;

    if (bare_begin(&c, url) != 0)
        return -1;
    while (ok && n < max) {
        amqp_rpc_reply_t r = amqp_basic_get(c.conn, EVT_CHANNEL,
                                            amqp_cstring_bytes(queue), 1);
        amqp_message_t msg;

        if (r.reply_type != AMQP_RESPONSE_NORMAL) {
            consumer_set_err(&c, "basic.get", r);
            ok = 0;
            break;
        }
        if (r.reply.id != AMQP_BASIC_GET_OK_METHOD)
            break; /* basic.get-empty */
        {
            const amqp_basic_get_ok_t *g = r.reply.decoded;

            snprintf(keys[n], 40, "%.*s", (int)g->routing_key.len,
                     (const char *)g->routing_key.bytes);
        }
        r = amqp_read_message(c.conn, EVT_CHANNEL, &msg, 0);
        if (r.reply_type != AMQP_RESPONSE_NORMAL) {
            consumer_set_err(&c, "reading a got message", r);
            ok = 0;
            break;
        }
        amqp_destroy_message(&msg);
        n++;
    }
    if (!ok)
        fprintf(stderr, "evt: taking from %s: %s\n", queue, c.err);
    bare_end(&c);
    return ok ? n : -1;
}

int evt_tokens_make(evt_tokens *t)
{
    t->author = rvt_token("evt-author", "author", 3600);
    t->reviewer = rvt_token("evt-reviewer", "reviewer", 3600);
    if (t->author == NULL || t->reviewer == NULL) {
        evt_tokens_free(t);
        return -1;
    }
    return 0;
}

void evt_tokens_free(evt_tokens *t)
{
    free(t->author);
    free(t->reviewer);
    t->author = t->reviewer = NULL;
}

/* ---- concurrent clients -------------------------------------------------- */

typedef struct pool {
    void (*fn)(int item, void *arg);
    void *arg;
    int items;
    atomic_int next;
} pool;

static void *pool_main(void *p)
{
    pool *pl = p;
    int item;

    while ((item = atomic_fetch_add(&pl->next, 1)) < pl->items)
        pl->fn(item, pl->arg);
    return NULL;
}

int evt_parallel(int clients, int items, void (*fn)(int item, void *arg),
                 void *arg)
{
    pthread_t threads[64];
    pool pl;
    int i, started = 0;

    assert(clients > 0 && clients <= 64);
    pl.fn = fn;
    pl.arg = arg;
    pl.items = items;
    atomic_init(&pl.next, 0);
    for (i = 0; i < clients; i++) {
        if (pthread_create(&threads[i], NULL, pool_main, &pl) != 0) {
            fprintf(stderr, "evt: cannot start client thread %d\n", i);
            break;
        }
        started++;
    }
    for (i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    return started == clients ? 0 : -1;
}

/* ---- documents through reviewd's API ------------------------------------- */

/* Copies a string field of the answer into out (24 bytes); 0 or -1. */
static int answer_field(rvt_resp *r, int want, const char *field, char *out,
                        const char *what)
{
    const char *v = r->status == want ? rvt_field(r, field) : NULL;

    if (v == NULL) {
        fprintf(stderr, "evt: %s gave %d %s\n", what, r->status,
                r->body != NULL ? r->body : "");
        rvt_resp_free(r);
        return -1;
    }
    if (out != NULL)
        snprintf(out, 24, "%s", v);
    rvt_resp_free(r);
    return 0;
}

int evt_create_doc(int port, const char *token, const char *title,
                   const char *content, char *id)
{
    json_t *j = json_pack("{s:s,s:s}", "title", title, "content", content);
    char *body = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
    rvt_resp r;
    int rc;

    json_decref(j);
    if (body == NULL)
        return -1;
    rc = rvt_call(port, "POST", "/v1/documents", token, body, NULL, &r);
    free(body);
    if (rc != 0) {
        rvt_resp_free(&r);
        fprintf(stderr, "evt: create: no answer from port %d\n", port);
        return -1;
    }
    return answer_field(&r, 201, "id", id, "create");
}

int evt_submit(int port, const char *token, const char *doc_id,
               char *review_id)
{
    char path[96];
    rvt_resp r;

    snprintf(path, sizeof(path), "/v1/documents/%s/submit", doc_id);
    rvt_call(port, "POST", path, token, NULL, NULL, &r);
    return answer_field(&r, 201, "review.id", review_id, "submit");
}

int evt_decide(int port, const char *token, const char *review_id, int approve)
{
    char path[96];
    rvt_resp r;

    snprintf(path, sizeof(path), "/v1/reviews/%s/%s", review_id,
             approve ? "approve" : "reject");
    rvt_call(port, "POST", path, token,
             approve ? "{}" : "{\"comment\":\"not yet\"}", NULL, &r);
    return answer_field(&r, 200, "review.id", NULL, "decision");
}

/* ---- a private RabbitMQ node --------------------------------------------- */

/* Runs rabbit_private.sh with its arguments; 0 if it exited 0. */
static int rabbit_script(const evt_rabbit *r, const char *verb, int ports)
{
    char cmd[1400];
    int rc;

    if (ports) {
        snprintf(cmd, sizeof(cmd), "'%s' %s '%s' %d %d %d >&2", r->script,
                 verb, r->dir, r->amqp_port, r->dist_port, r->epmd_port);
    } else {
        snprintf(cmd, sizeof(cmd), "'%s' %s '%s' >&2", r->script, verb,
                 r->dir);
    }
    rc = system(cmd);
    if (rc != 0) {
        fprintf(stderr, "evt: rabbit_private.sh %s %s failed (status %d)\n",
                verb, r->dir, rc);
        return -1;
    }
    return 0;
}

/* A process that stops the node once the test is gone: it waits for EOF
 * on a pipe only the test holds (close-on-exec, so no child of the test
 * keeps it open), in a session of its own so that a kill of the test's
 * process group does not take it along, and as a grandchild whose parent
 * has exited, because CTest's timeout kills the test's whole process
 * tree (found through parent pids), which took the guardian along and
 * left the node and its epmd running.  The intermediate child is reaped
 * here; the guardian, reparented, is nobody's to wait for. */
static int start_guardian(evt_rabbit *r)
{
    int fds[2], status = 0;
    pid_t mid;

    if (pipe2(fds, O_CLOEXEC) != 0) {
        fprintf(stderr, "evt: pipe: %s\n", strerror(errno));
        return -1;
    }
    mid = fork();
    if (mid < 0) {
        fprintf(stderr, "evt: fork: %s\n", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (mid == 0) {
        char byte;
        pid_t g;

        setsid();
        close(fds[1]);
        g = fork();
        if (g != 0)
            _exit(g < 0 ? 1 : 0);
        while (read(fds[0], &byte, 1) < 0 && errno == EINTR) {
        }
        execl(r->script, "rabbit_private.sh", "stop", r->dir, (char *)NULL);
        _exit(127);
    }
    close(fds[0]);
    r->guard_fd = fds[1];
    while (waitpid(mid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "evt: the guardian did not start\n");
        close(r->guard_fd);
        r->guard_fd = -1;
        return -1;
    }
    return 0;
}

/* Three distinct ports that are free right now. */
static int pick_ports(evt_rabbit *r)
{
    int i;

    for (i = 0; i < 20; i++) {
        r->amqp_port = testkit_free_port();
        r->dist_port = testkit_free_port();
        r->epmd_port = testkit_free_port();
        if (r->amqp_port > 0 && r->dist_port > 0 && r->epmd_port > 0
            && r->amqp_port != r->dist_port && r->dist_port != r->epmd_port
            && r->amqp_port != r->epmd_port)
            return 0;
    }
    fprintf(stderr, "evt: no three free loopback ports\n");
    return -1;
}

/* Runs "rabbit_private.sh start" in the background (its output on our
 * stderr); evt_rabbit_wait_booted reaps it. */
static int spawn_boot(evt_rabbit *r)
{
    char ports[3][16];

    snprintf(ports[0], sizeof(ports[0]), "%d", r->amqp_port);
    snprintf(ports[1], sizeof(ports[1]), "%d", r->dist_port);
    snprintf(ports[2], sizeof(ports[2]), "%d", r->epmd_port);
    r->booting = fork();
    if (r->booting < 0) {
        fprintf(stderr, "evt: fork: %s\n", strerror(errno));
        return -1;
    }
    if (r->booting == 0) {
        dup2(STDERR_FILENO, STDOUT_FILENO);
        execl(r->script, "rabbit_private.sh", "start", r->dir, ports[0],
              ports[1], ports[2], (char *)NULL);
        _exit(127);
    }
    return 0;
}

/* The node's TLS listener: a fourth free port and the test PKI
 * (tls_certs.sh) beside the node's folder, passed to rabbit_private.sh
 * through the environment (so a restart keeps the listener). */
static int prepare_tls(evt_rabbit *r, const char *base)
{
    char cmd[1400], port[16];
    int i;

    for (i = 0; i < 20 && r->tls_port <= 0; i++) {
        const int p = testkit_free_port();

        if (p > 0 && p != r->amqp_port && p != r->dist_port
            && p != r->epmd_port)
            r->tls_port = p;
    }
    snprintf(r->tls_dir, sizeof(r->tls_dir), "%s/tls", base);
    snprintf(cmd, sizeof(cmd), "'%s/tests/indexer/tls_certs.sh' '%s' >&2",
             testkit_source_dir(), r->tls_dir);
    if (r->tls_port <= 0 || system(cmd) != 0) {
        fprintf(stderr, "evt: no TLS port, or tls_certs.sh %s failed\n",
                r->tls_dir);
        return -1;
    }
    snprintf(r->tls_url, sizeof(r->tls_url),
             "amqps://dlock:dlock@localhost:%d/%%2f", r->tls_port);
    snprintf(port, sizeof(port), "%d", r->tls_port);
    return setenv("RABBIT_TLS_PORT", port, 1) != 0
                   || setenv("RABBIT_TLS_DIR", r->tls_dir, 1) != 0
               ? -1
               : 0;
}

static int rabbit_begin(evt_rabbit *r, const char *name, int tls)
{
    char base[400], own[128];

    memset(r, 0, sizeof(*r));
    r->guard_fd = -1;
    /* A folder of its own: the test's reviewd and indexers remove theirs
     * (var/test/<name>-<pid>) while the node may still need its pid
     * files to be stopped. */
    snprintf(own, sizeof(own), "%s-rabbit", name);
    if (testkit_scratch_dir(base, sizeof(base), own) == NULL
        || pick_ports(r) != 0)
        return -1;
    snprintf(r->dir, sizeof(r->dir), "%s/rabbit", base);
    snprintf(r->script, sizeof(r->script),
             "%s/tests/indexer/rabbit_private.sh", testkit_source_dir());
    snprintf(r->url, sizeof(r->url), "amqp://dlock:dlock@127.0.0.1:%d/%%2f",
             r->amqp_port);
    if (mkdir(r->dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "evt: mkdir %s: %s\n", r->dir, strerror(errno));
        return -1;
    }
    if (tls && prepare_tls(r, base) != 0)
        return -1;
    return start_guardian(r) != 0 ? -1 : spawn_boot(r);
}

int evt_rabbit_begin(evt_rabbit *r, const char *name)
{
    return rabbit_begin(r, name, 0);
}

int evt_rabbit_begin_tls(evt_rabbit *r, const char *name)
{
    return rabbit_begin(r, name, 1);
}

int evt_rabbit_wait_booted(evt_rabbit *r)
{
    int status = 0;

    if (r->booting <= 0)
        return r->running ? 0 : -1;
    /* rabbit_private.sh bounds its own wait (60 s). */
    while (waitpid(r->booting, &status, 0) < 0 && errno == EINTR) {
    }
    r->booting = 0;
    r->running = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!r->running) {
        fprintf(stderr,
                "evt: rabbit_private.sh start %s failed (status "
                "0x%x)\n",
                r->dir, status);
    }
    return r->running ? 0 : -1;
}

int evt_rabbit_start(evt_rabbit *r, const char *name)
{
    return evt_rabbit_begin(r, name) != 0 ? -1 : evt_rabbit_wait_booted(r);
}

int evt_rabbit_stop(evt_rabbit *r)
{
    const int rc = rabbit_script(r, "stop", 0);

    r->running = rc != 0;
    return rc;
}

int evt_rabbit_restart(evt_rabbit *r)
{
    const int rc = rabbit_script(r, "start", 1);

    r->running = rc == 0;
    return rc;
}

/* The node's pid from its pid file, if that process is a beam.smp. */
static pid_t rabbit_pid(const evt_rabbit *r)
{
    char path[600], comm[64] = "";
    long pid = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/rabbitmq.pid", r->dir);
    f = fopen(path, "r");
    if (f == NULL || fscanf(f, "%ld", &pid) != 1) {
        if (f != NULL)
            fclose(f);
        return 0;
    }
    fclose(f);
    snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
    f = fopen(path, "r");
    if (f == NULL || fgets(comm, sizeof(comm), f) == NULL)
        comm[0] = '\0';
    if (f != NULL)
        fclose(f);
    return strncmp(comm, "beam.smp", 8) == 0 ? (pid_t)pid : 0;
}

int evt_pid_gone(void *arg)
{
    const pid_t pid = *(const pid_t *)arg;
    char path[64], stat[512];
    const char *state;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return 1;
    if (fgets(stat, sizeof(stat), f) == NULL)
        stat[0] = '\0';
    fclose(f);
    state = strrchr(stat, ')');
    return state != NULL && (state[2] == 'Z' || state[2] == 'X');
}

int evt_rabbit_kill(evt_rabbit *r)
{
    char path[600];
    pid_t pid = rabbit_pid(r);

    if (pid <= 0) {
        fprintf(stderr, "evt: no running node in %s\n", r->dir);
        return -1;
    }
    if (kill(pid, SIGKILL) != 0
        || !testkit_wait_until(evt_pid_gone, &pid, 10000)) {
        fprintf(stderr, "evt: node pid %d survived SIGKILL\n", (int)pid);
        return -1;
    }
    snprintf(path, sizeof(path), "%s/rabbitmq.pid", r->dir);
    unlink(path);
    r->running = 0;
    return 0;
}

void evt_rabbit_free(evt_rabbit *r)
{
    char base[520];
    char *slash;

    if (r->dir[0] == '\0')
        return;
    if (r->booting > 0)
        evt_rabbit_wait_booted(r);
    rabbit_script(r, "stop", 0);
    if (r->guard_fd >= 0) {
        close(r->guard_fd); /* the guardian's stop finds nothing to do */
        r->guard_fd = -1;
    }
    snprintf(base, sizeof(base), "%s", r->dir);
    slash = strrchr(base, '/');
    if (slash != NULL) {
        *slash = '\0';
        testkit_scratch_remove(base);
    }
    r->dir[0] = '\0';
}

/* ---- kh-indexer processes ------------------------------------------------ */

const char *evt_indexer_bin(void)
{
    static char path[600];
    const char *v = getenv("KH_INDEXER_BIN");

    if (v != NULL && v[0] != '\0')
        return v;
    snprintf(path, sizeof(path), "%s/services/indexer/kh-indexer",
             testkit_build_dir());
    return path;
}

typedef struct indexer_wait {
    evt_indexer *ix;
    int exited;
} indexer_wait;

static int indexer_reaped(evt_indexer *ix)
{
    int status;

    if (ix->pid > 0 && waitpid(ix->pid, &status, WNOHANG) == ix->pid) {
        ix->exit_status = status;
        ix->pid = 0;
        return 1;
    }
    return 0;
}

static int indexer_consuming(void *arg)
{
    indexer_wait *w = arg;

    if (indexer_reaped(w->ix)) {
        w->exited = 1;
        return 1;
    }
    return evt_log_count(w->ix->log, "consuming", NULL) > 0;
}

static void indexer_log_tail(const evt_indexer *ix)
{
    char cmd[1400];

    snprintf(cmd, sizeof(cmd), "tail -n 20 '%s' '%s.out' >&2", ix->log,
             ix->log);
    if (system(cmd) != 0)
        fprintf(stderr, "evt: no log at %s\n", ix->log);
}

int evt_indexer_spawn(evt_indexer *ix, const rvt_db *db, const char *amqp_url,
                      const char *const *extra_env, const char *name)
{
    static int counter;
    char e_db[600], e_amqp[300], e_log[700], out[700];
    const char *env[40];
    const char *const argv[] = {"kh-indexer", NULL};
    int n = 0, i;

    memset(ix, 0, sizeof(*ix));
    if (testkit_scratch_dir(ix->dir, sizeof(ix->dir), name) == NULL)
        return -1;
    snprintf(ix->log, sizeof(ix->log), "%s/kh-indexer-%d.log", ix->dir,
             ++counter);
    snprintf(out, sizeof(out), "%s.out", ix->log);
    snprintf(e_db, sizeof(e_db), "DATABASE_URL=%s", db->url);
    snprintf(e_amqp, sizeof(e_amqp), "AMQP_URL=%s", amqp_url);
    snprintf(e_log, sizeof(e_log), "KH_LOG_FILE=%s", ix->log);
    env[n++] = e_db;
    env[n++] = e_amqp;
    env[n++] = e_log;
    env[n++] = "KH_RETRY_MS=100";
    env[n++] = "KH_BACKOFF_MAX_MS=500";
    for (i = 0; extra_env != NULL && extra_env[i] != NULL && n < 39; i++)
        env[n++] = extra_env[i];
    env[n] = NULL;
    ix->pid = rvt_spawn(evt_indexer_bin(), argv, env, out);
    if (ix->pid < 0) {
        fprintf(stderr, "evt: kh-indexer did not spawn\n");
        ix->pid = 0;
        return -1;
    }
    return 0;
}

int evt_indexer_start(evt_indexer *ix, const rvt_db *db, const char *amqp_url,
                      const char *const *extra_env, const char *name)
{
    indexer_wait w = {ix, 0};

    if (evt_indexer_spawn(ix, db, amqp_url, extra_env, name) != 0)
        return -1;
    if (!testkit_wait_until(indexer_consuming, &w, EVT_START_TIMEOUT_MS)
        || w.exited) {
        fprintf(stderr, "evt: kh-indexer did not start consuming (%s)\n",
                w.exited ? "it exited" : "no consuming line");
        indexer_log_tail(ix);
        evt_indexer_stop(ix);
        return -1;
    }
    return 0;
}

/* 1 if the file at path contains text (0 if not, or unreadable). */
static int file_has(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len;
    int found = 0;

    if (f == NULL)
        return 0;
    /* Lines are short JSON objects or plain messages: text never spans
     * two, and a line is read whole whatever its length. */
    while (!found && (len = getline(&buf, &cap, f)) > 0)
        found = memmem(buf, (size_t)len, text, strlen(text)) != NULL;
    free(buf);
    fclose(f);
    return found;
}

int evt_indexer_output_has(const evt_indexer *ix, const char *text)
{
    char out[700];

    snprintf(out, sizeof(out), "%s.out", ix->log);
    return file_has(ix->log, text) || file_has(out, text);
}

typedef struct logged_wait {
    const evt_indexer *ix;
    const char *event_id; /* NULL: any event */
    int n;
} logged_wait;

static int indexed_logged(void *arg)
{
    const logged_wait *w = arg;

    if (w->event_id != NULL)
        return evt_log_count(w->ix->log, "event_done", "event_id", w->event_id,
                             "outcome", "indexed", NULL)
               >= w->n;
    return evt_log_count(w->ix->log, "event_done", "outcome", "indexed", NULL)
           >= w->n;
}

int evt_indexer_wait_logged(const evt_indexer *ix, const char *event_id,
                            int timeout_ms)
{
    logged_wait w = {ix, event_id, 1};

    return testkit_wait_until(indexed_logged, &w, timeout_ms);
}

int evt_indexer_wait_indexed_lines(const evt_indexer *ix, int n,
                                   int timeout_ms)
{
    logged_wait w = {ix, NULL, n};

    return testkit_wait_until(indexed_logged, &w, timeout_ms);
}

static int indexer_gone(void *arg)
{
    return indexer_reaped(arg);
}

int evt_indexer_stop(evt_indexer *ix)
{
    if (ix->pid > 0) {
        kill(ix->pid, SIGTERM);
        if (!testkit_wait_until(indexer_gone, ix, EVT_STOP_TIMEOUT_MS)) {
            fprintf(stderr, "evt: kh-indexer pid %d ignored SIGTERM\n",
                    (int)ix->pid);
            kill(ix->pid, SIGKILL);
            waitpid(ix->pid, NULL, 0);
            ix->pid = 0;
            return 0;
        }
    }
    if (!WIFEXITED(ix->exit_status) || WEXITSTATUS(ix->exit_status) != 0) {
        fprintf(stderr, "evt: kh-indexer exited with status 0x%x\n",
                ix->exit_status);
        indexer_log_tail(ix);
        return 0;
    }
    return 1;
}

/* 1 if the log line's field has the text value (see evt_log_count). */
static int field_is(const json_t *line, const char *name, const char *value)
{
    const json_t *v = json_object_get(line, name);
    char num[32];

    if (json_is_string(v))
        return strcmp(json_string_value(v), value) == 0;
    if (json_is_boolean(v))
        return strcmp(json_is_true(v) ? "true" : "false", value) == 0;
    if (json_is_integer(v)) {
        snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
        return strcmp(num, value) == 0;
    }
    return 0;
}

static int line_matches(const json_t *line, const char *msg, va_list ap)
{
    const char *name;

    if (!field_is(line, "msg", msg))
        return 0;
    while ((name = va_arg(ap, const char *)) != NULL)
        if (!field_is(line, name, va_arg(ap, const char *)))
            return 0;
    return 1;
}

int evt_log_count(const char *path, const char *msg, ...)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t cap = 0;
    int n = 0;

    if (f == NULL)
        return -1;
    while (getline(&buf, &cap, f) > 0) {
        json_t *line = json_loads(buf, 0, NULL);
        va_list ap;

        va_start(ap, msg);
        n += line != NULL && line_matches(line, msg, ap);
        va_end(ap);
        json_decref(line);
    }
    free(buf);
    fclose(f);
    return n;
}

/* ---- the pipeline's effect in PostgreSQL --------------------------------- */

/* Runs a parameterised query on the kit's cached connection (made by
 * rvt_sql).  Returns the result (PQclear it) or NULL, error on stderr. */
static PGresult *query(rvt_db *db, const char *sql, int nparams,
                       const char *const *params)
{
    PGresult *res;

    if (db->conn == NULL && rvt_sql(db, "SELECT 1", NULL, 0) != 0)
        return NULL;
    res = PQexecParams(db->conn, sql, nparams, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        fprintf(stderr, "evt: %s: %s", sql, PQerrorMessage(db->conn));
        PQclear(res);
        return NULL;
    }
    return res;
}

/* The first value of a count query with nparams parameters, or -1. */
static long long count_of(rvt_db *db, const char *sql, int nparams,
                          const char *const *params)
{
    PGresult *res = query(db, sql, nparams, params);
    long long n = -1;

    if (res != NULL && PQntuples(res) == 1)
        n = atoll(PQgetvalue(res, 0, 0));
    PQclear(res);
    return n;
}

/* count_of with one parameter. */
static long long count_by(rvt_db *db, const char *sql, const char *param)
{
    const char *const params[] = {param};

    return count_of(db, sql, 1, params);
}

long long evt_db_chunks(rvt_db *db, const char *doc_id)
{
    return count_by(db,
                    "SELECT count(*) FROM kh_chunk "
                    "WHERE document_id = $1::bigint",
                    doc_id);
}

long long evt_db_unsent(rvt_db *db, const char *routing_key)
{
    return count_by(db,
                    "SELECT count(*) FROM kh_outbox "
                    "WHERE sent_at IS NULL AND routing_key = $1",
                    routing_key);
}

long long evt_db_processed(rvt_db *db, const char *outcome)
{
    return count_by(db,
                    "SELECT count(*) FROM kh_processed_event "
                    "WHERE outcome = $1",
                    outcome);
}

typedef struct docs_wait {
    rvt_db *db;
    char (*docs)[24];
    int n;
} docs_wait;

static int docs_indexed(void *arg)
{
    const docs_wait *w = arg;
    int i;

    for (i = 0; i < w->n; i++)
        if (evt_db_chunks(w->db, w->docs[i]) <= 0)
            return 0;
    return 1;
}

int evt_db_wait_docs_indexed(rvt_db *db, char (*docs)[24], int n,
                             int timeout_ms)
{
    docs_wait w = {db, docs, n};

    return testkit_wait_until(docs_indexed, &w, timeout_ms);
}

/* Compares one stored chunk (row i of res) with the span it should be. */
static int chunk_row_is(const PGresult *res, int i, const char *text,
                        const kh_chunk_span *span, const char *version,
                        const char *event_id, const char *doc_id)
{
    const char *content = PQgetvalue(res, i, 2);
    const size_t len = (size_t)PQgetlength(res, i, 2);

    if (atoi(PQgetvalue(res, i, 0)) != i
        || (size_t)atoll(PQgetvalue(res, i, 1)) != span->offset
        || len != span->length
        || memcmp(content, text + span->offset, len) != 0
        || strcmp(PQgetvalue(res, i, 3), version) != 0
        || strcmp(PQgetvalue(res, i, 4), event_id) != 0) {
        fprintf(stderr,
                "evt: document %s chunk %d is (index %s, offset %s, "
                "%zu bytes, version %s, event %s); expected (%d, %zu, %zu, "
                "%s, %s)\n",
                doc_id, i, PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), len,
                PQgetvalue(res, i, 3), PQgetvalue(res, i, 4), i, span->offset,
                span->length, version, event_id);
        return 0;
    }
    return 1;
}

int evt_db_chunks_match(rvt_db *db, const char *doc_id, size_t target,
                        size_t overlap, const char *event_id)
{
    const char *const params[] = {doc_id};
    const kh_chunk_opts opts = {target, overlap};
    PGresult *doc = query(db,
                          "SELECT c.content, d.version::text "
                          "FROM kh_document d JOIN kh_document_content c "
                          "ON c.document_id = d.id "
                          "WHERE d.id = $1::bigint",
                          1, params);
    PGresult *rows = query(db,
                           "SELECT chunk_index, byte_offset, content, "
                           "document_version::text, event_id::text "
                           "FROM kh_chunk WHERE document_id = $1::bigint "
                           "ORDER BY chunk_index",
                           1, params);
    kh_chunk_span *spans = NULL;
    size_t count = 0, i;
    int ok = 0;

    if (doc == NULL || rows == NULL || PQntuples(doc) != 1
        || kh_chunk_split(PQgetvalue(doc, 0, 0),
                          (size_t)PQgetlength(doc, 0, 0), &opts, &spans,
                          &count)
               != 0) {
        fprintf(stderr, "evt: document %s: no content to chunk\n", doc_id);
        goto done;
    }
    if ((size_t)PQntuples(rows) != count) {
        fprintf(stderr, "evt: document %s has %d chunks, one run gives %zu\n",
                doc_id, PQntuples(rows), count);
        goto done;
    }
    ok = 1;
    for (i = 0; i < count && ok; i++) {
        ok = chunk_row_is(rows, (int)i, PQgetvalue(doc, 0, 0), &spans[i],
                          PQgetvalue(doc, 0, 1), event_id, doc_id);
    }
done:
    free(spans);
    PQclear(doc);
    PQclear(rows);
    return ok;
}

char *evt_db_outbox_ids(rvt_db *db, const char *routing_key, size_t *n)
{
    const char *const params[] = {routing_key};
    PGresult *res = query(db,
                          "SELECT count(*), coalesce(string_agg("
                          "event_id::text, ',' ORDER BY id), '') "
                          "FROM kh_outbox WHERE $1::text IS NULL "
                          "OR routing_key = $1",
                          1, params);
    char *ids = NULL;

    *n = 0;
    if (res != NULL && PQntuples(res) == 1) {
        ids = strdup(PQgetvalue(res, 0, 1));
        *n = ids != NULL ? (size_t)atoll(PQgetvalue(res, 0, 0)) : 0;
    }
    PQclear(res);
    return ids;
}

int evt_db_event_id(rvt_db *db, const char *doc_id, const char *routing_key,
                    char *out)
{
    const char *const params[] = {doc_id, routing_key};
    PGresult *res = query(db,
                          "SELECT event_id::text FROM kh_outbox "
                          "WHERE document_id = $1::bigint "
                          "AND routing_key = $2 ORDER BY id DESC LIMIT 1",
                          2, params);
    int rc = -1;

    out[0] = '\0';
    if (res != NULL && PQntuples(res) == 1) {
        snprintf(out, 64, "%s", PQgetvalue(res, 0, 0));
        rc = 0;
    }
    PQclear(res);
    return rc;
}

long long evt_db_event_processed(rvt_db *db, const char *event_id,
                                 const char *outcome)
{
    const char *const params[] = {event_id, outcome};

    return count_of(db,
                    "SELECT count(*) FROM kh_processed_event "
                    "WHERE event_id = $1 AND outcome = $2",
                    2, params);
}

static int all_indexed(void *arg)
{
    const ids_wait *w = arg;

    for (int i = 0; i < w->n; i++)
        if (evt_db_event_processed(w->db, w->ids[i], "indexed") != 1)
            return 0;
    return 1;
}

int evt_db_wait_indexed(rvt_db *db, char (*ids)[64], int n, int64_t timeout_ms)
{
    ids_wait w = {.db = db, .ids = ids, .n = n};

    return testkit_wait_until(all_indexed, &w, timeout_ms);
}

static int outbox_empty(void *arg)
{
    return rvt_sql_int(arg, "SELECT count(*) FROM kh_outbox "
                            "WHERE sent_at IS NULL")
           == 0;
}

int evt_db_wait_outbox_empty(rvt_db *db, int64_t timeout_ms)
{
    return testkit_wait_until(outbox_empty, db, timeout_ms);
}
