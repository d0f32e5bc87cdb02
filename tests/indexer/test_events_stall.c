/*
 * test_events_stall.c: the relay thread never stops trying.  In full
 * runs, events.faults saw the relaying reviewd log dependency_down
 * ("publish: a socket error occurred") when the broker was killed, then
 * nothing for minutes, not even relay_amqp_retrying.
 *
 *   first_publish_fails  the broker's socket is shut down just before a
 *                        batch is published (REVIEWD_TEST_BREAK_BATCH=1,
 *                        as a broker that died between batches leaves it),
 *                        so the batch's very first publish fails.  The
 *                        relay counted "0 of 0 published were acked" as a
 *                        full success and claimed and failed the next
 *                        batch at once, for ever, never reconnecting: the
 *                        outbox must drain through a new connection.
 *   silent_broker        the broker's port accepts and says nothing (a
 *                        broker booting, or dying with its listener still
 *                        open): a loopback listener in front of the
 *                        stack's RabbitMQ.  After a first good connection
 *                        the listener goes silent and drops it; every
 *                        reconnect attempt must give up within its bound
 *                        (so the listener sees attempt after attempt) and
 *                        say so (relay_amqp_retrying); when the listener
 *                        forwards again, the relay is back.
 *
 * The stack's RabbitMQ, PostgreSQL and Redis; each case runs its own
 * reviewd (test build) with a 400 ms AMQP timeout.  The listener and its
 * thread live in static storage and are stopped by the group teardown,
 * pass or fail.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "evt_kit.h"
#include "testkit.h"

#define AMQP_TIMEOUT_MS 400
#define WAIT_MS 30000 /* only catches a hang */
#define MAX_LINKS 32

/* ---- the listener: silent, or a pipe to the stack's broker ------------- */

typedef struct pipe_link {
    int client; /* the relay's side, -1: free */
    int broker; /* the stack broker's side, -1 while silent */
} pipe_link;

typedef struct listener {
    int fd;
    int port;
    int wake[2]; /* a byte: look at the mode again; EOF: stop */
    struct sockaddr_in broker;
    atomic_int forward;  /* 0: accept and say nothing */
    atomic_int accepted; /* connections accepted */
    pipe_link links[MAX_LINKS];
    pthread_t thread;
    int running;
} listener;

static listener lsn = {.fd = -1, .wake = {-1, -1}};

static void link_close(pipe_link *l)
{
    if (l->client >= 0)
        close(l->client);
    if (l->broker >= 0)
        close(l->broker);
    l->client = l->broker = -1;
}

/* Copies what is waiting on from to to; 0, or -1 when either side ended. */
static int pump(int from, int to)
{
    char buf[16384];
    const ssize_t n = read(from, buf, sizeof(buf));
    ssize_t off = 0;

    if (n <= 0)
        return -1;
    while (off < n) {
        const ssize_t w = write(to, buf + off, (size_t)(n - off));

        if (w <= 0)
            return -1;
        off += w;
    }
    return 0;
}

static void accept_one(listener *L)
{
    const int c = accept(L->fd, NULL, NULL);
    int i;

    if (c < 0)
        return;
    atomic_fetch_add(&L->accepted, 1);
    for (i = 0; i < MAX_LINKS && L->links[i].client >= 0; i++) {
    }
    if (i == MAX_LINKS) {
        close(c);
        return;
    }
    L->links[i].client = c;
    if (atomic_load(&L->forward)) {
        L->links[i].broker = socket(AF_INET, SOCK_STREAM, 0);
        if (L->links[i].broker < 0
            || connect(L->links[i].broker, (struct sockaddr *)&L->broker,
                       sizeof(L->broker))
                   != 0)
            link_close(&L->links[i]);
    }
}

/* Silent links are not read: their peer hears nothing at all. */
static void *listener_main(void *arg)
{
    listener *L = arg;

    for (;;) {
        struct pollfd p[2 + 2 * MAX_LINKS];
        int n = 2, i;

        p[0].fd = L->wake[0];
        p[1].fd = L->fd;
        p[0].events = p[1].events = POLLIN;
        for (i = 0; i < MAX_LINKS; i++) {
            const int live = L->links[i].broker >= 0;

            p[n].fd = live ? L->links[i].client : -1;
            p[n + 1].fd = live ? L->links[i].broker : -1;
            p[n].events = p[n + 1].events = POLLIN;
            n += 2;
        }
        if (poll(p, (nfds_t)n, -1) < 0) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        if (p[0].revents) {
            char byte;

            if (read(L->wake[0], &byte, 1) <= 0)
                return NULL; /* stop */
            /* A change of mode drops every pipe_link: going silent, the
             * broker "dies"; going back, the silent links go. */
            for (i = 0; i < MAX_LINKS; i++)
                link_close(&L->links[i]);
        }
        if (p[1].revents & POLLIN)
            accept_one(L);
        for (i = 0; i < MAX_LINKS; i++) {
            const struct pollfd *c = &p[2 + 2 * i], *b = &p[3 + 2 * i];

            if (c->fd < 0 || L->links[i].broker < 0)
                continue;
            if (((c->revents & (POLLIN | POLLHUP | POLLERR))
                 && pump(c->fd, b->fd) != 0)
                || ((b->revents & (POLLIN | POLLHUP | POLLERR))
                    && pump(b->fd, c->fd) != 0))
                link_close(&L->links[i]);
        }
    }
}

/* Listens on a free loopback port in front of the broker on 127.0.0.1
 * at broker_port (which may be set later, before forwarding). */
static int listener_start(listener *L, int broker_port)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int i;

    for (i = 0; i < MAX_LINKS; i++)
        L->links[i].client = L->links[i].broker = -1;
    memset(&L->broker, 0, sizeof(L->broker));
    L->broker.sin_family = AF_INET;
    L->broker.sin_port = htons((uint16_t)broker_port);
    L->broker.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    L->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (L->fd < 0 || bind(L->fd, (struct sockaddr *)&a, sizeof(a)) != 0
        || listen(L->fd, 64) != 0
        || getsockname(L->fd, (struct sockaddr *)&a, &len) != 0
        || pipe2(L->wake, O_CLOEXEC) != 0) {
        fprintf(stderr, "listener: %s\n", strerror(errno));
        return -1;
    }
    L->port = ntohs(a.sin_port);
    if (pthread_create(&L->thread, NULL, listener_main, L) != 0)
        return -1;
    L->running = 1;
    return 0;
}

static void listener_mode(listener *L, int forward)
{
    const char byte = 'm';

    atomic_store(&L->forward, forward);
    if (write(L->wake[1], &byte, 1) != 1)
        fprintf(stderr, "listener: wake: %s\n", strerror(errno));
}

static void listener_stop(listener *L)
{
    int i;

    if (L->running) {
        close(L->wake[1]);
        L->wake[1] = -1;
        pthread_join(L->thread, NULL);
        L->running = 0;
    }
    for (i = 0; i < MAX_LINKS; i++)
        link_close(&L->links[i]);
    if (L->fd >= 0)
        close(L->fd);
    if (L->wake[0] >= 0)
        close(L->wake[0]);
    if (L->wake[1] >= 0)
        close(L->wake[1]);
    L->fd = L->wake[0] = L->wake[1] = -1;
}

/* ---- fixture ----------------------------------------------------------- */

typedef struct fixture {
    rvt_db db;
    rvt_server relay; /* the case's reviewd */
    evt_tokens tok;
    char e_direct[300]; /* AMQP_URL=<the stack's broker> */
    char e_listen[300]; /* AMQP_URL=<the listener> */
} fixture;

/* "AMQP_URL=" and url with its host:port replaced by 127.0.0.1:port;
 * writes the original port to *orig.  0 or -1. */
static int url_via(const char *url, int port, char *out, size_t len, int *orig)
{
    const char *at = strchr(url, '@');
    const char *colon, *slash;

    if (at == NULL || (colon = strchr(at, ':')) == NULL
        || (slash = strchr(colon, '/')) == NULL)
        return -1;
    *orig = atoi(colon + 1);
    snprintf(out, len, "AMQP_URL=%.*s127.0.0.1:%d%s", (int)(at + 1 - url), url,
             port, slash);
    return 0;
}

static int setup(void **state)
{
    static fixture fx;
    fixture *f = &fx;
    evt_consumer *probe;
    int broker_port = 0;

    memset(f, 0, sizeof(*f));
    /* The stack's broker, started if need be. */
    probe = evt_consumer_start_shared();
    if (probe == NULL || testkit_shared_redis() == NULL)
        return -1;
    evt_consumer_free(probe);
    snprintf(f->e_direct, sizeof(f->e_direct), "AMQP_URL=%s",
             testkit_amqp_url());
    if (listener_start(&lsn, 0) != 0
        || url_via(testkit_amqp_url(), lsn.port, f->e_listen,
                   sizeof(f->e_listen), &broker_port)
               != 0) {
        listener_stop(&lsn);
        return -1;
    }
    lsn.broker.sin_port = htons((uint16_t)broker_port);
    if (rvt_db_create(&f->db, "evtstall") != 0
        || evt_tokens_make(&f->tok) != 0) {
        listener_stop(&lsn);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;

    listener_stop(&lsn);
    evt_tokens_free(&f->tok);
    rvt_db_drop(&f->db);
    return 0;
}

static int start_relay(fixture *f, const char *amqp_env, const char *extra)
{
    const char *const env[] = {amqp_env,
                               "REVIEWD_AMQP_TIMEOUT_MS=400",
                               "REVIEWD_RELAY_BACKOFF_MAX_MS=200",
                               "REVIEWD_LOG_FILE=@log",
                               extra,
                               NULL};

    return rvt_server_start(&f->relay, &f->db, testkit_redis_url(), env,
                            "evt-stall");
}

/* A failed case jumps past its own stop: the teardown of each case. */
static int stop_relay(void **state)
{
    fixture *f = *state;

    if (f->relay.pid > 0)
        rvt_server_terminate(&f->relay);
    rvt_server_remove_dir(&f->relay);
    memset(&f->relay, 0, sizeof(f->relay));
    return 0;
}

static long long unsent(fixture *f)
{
    return rvt_sql_int(&f->db,
                       "SELECT count(*) FROM kh_outbox WHERE sent_at IS NULL");
}

/* ---- cases ------------------------------------------------------------- */

static void first_publish_fails(void **state)
{
    fixture *f = *state;
    char doc[24], review[24];

    assert_int_equal(start_relay(f, f->e_direct, "REVIEWD_TEST_BREAK_BATCH=1"),
                     0);
    TK_EXPECT(rvt_wait_ready(f->relay.port, "ok", NULL, WAIT_MS),
              "reviewd is ready with RabbitMQ");
    TK_EXPECT(rvt_create_pending(f->relay.port, f->tok.author, doc, review)
                  == 0,
              "a document is created and submitted");
    TK_EXPECT(rvt_sql_int(&f->db, "SELECT count(*) FROM kh_outbox") > 0,
              "the submit wrote events");
    TK_EXPECT(evt_db_wait_outbox_empty(&f->db, WAIT_MS),
              "the relay reconnects and sends the events after the failed "
              "first publish (%lld unsent)",
              unsent(f));
    TK_EXPECT(evt_log_count(f->relay.log, "dependency_up", "dependency",
                            "amqp", NULL)
                  == 2,
              "connected, then connected again");
    TK_EXPECT(rvt_server_stop(&f->relay), "reviewd exits cleanly");
}

typedef struct attempts {
    int after;
} attempts;

static int attempts_reached(void *arg)
{
    const attempts *a = arg;

    return atomic_load(&lsn.accepted) >= a->after;
}

static int retrying_logged(void *arg)
{
    const fixture *f = arg;

    return evt_log_count(f->relay.log, "relay_amqp_retrying", NULL) >= 1;
}

static void silent_broker(void **state)
{
    fixture *f = *state;
    attempts a;

    listener_mode(&lsn, 1);
    assert_int_equal(start_relay(f, f->e_listen, NULL), 0);
    TK_EXPECT(rvt_wait_ready(f->relay.port, "ok", NULL, WAIT_MS),
              "reviewd is ready with RabbitMQ through the listener");
    /* The broker "dies" and its port answers nothing from now on. */
    a.after = atomic_load(&lsn.accepted) + 3;
    listener_mode(&lsn, 0);
    TK_EXPECT(testkit_wait_until(attempts_reached, &a, WAIT_MS),
              "attempt after attempt reaches the silent port: each gives "
              "up within its bound (%d connections)",
              atomic_load(&lsn.accepted));
    TK_EXPECT(testkit_wait_until(retrying_logged, f, WAIT_MS),
              "relay_amqp_retrying says why the relay does not connect");
    TK_EXPECT(rvt_server_log_has(&f->relay, "no answer within")
                  || rvt_server_log_has(&f->relay, "timed out"),
              "the failed attempts say they timed out");
    listener_mode(&lsn, 1);
    TK_EXPECT(rvt_wait_ready(f->relay.port, "ok", NULL, WAIT_MS),
              "the relay is back once the broker answers");
    TK_EXPECT(evt_log_count(f->relay.log, "dependency_up", "dependency",
                            "amqp", NULL)
                  == 2,
              "connected, then connected again");
    TK_EXPECT(rvt_server_stop(&f->relay), "reviewd exits cleanly");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(first_publish_fails, stop_relay),
        cmocka_unit_test_teardown(silent_broker, stop_relay),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
