/*
 * test_rv_loop_pg.c: an event loop (http/rv_loop.h) whose PostgreSQL
 * connection is lost keeps serving the sockets it watches, even one that
 * was given the lost socket's number.
 *
 * When libpq closes a connection's socket, closing takes it out of the
 * loop's epoll set and frees its number; the next socket any thread
 * opens (the listener's accept4 of a new client) may get that number.
 * The loop must not pass the old number to epoll_ctl again: an
 * EPOLL_CTL_DEL on it removed the new client's registration, and that
 * client was never served again (ThreadSanitizer saw it in
 * reviewd.loopreads as a race between watch_pg and accept4).
 *
 * The case, without timing: a statement makes the connection's backend
 * terminate itself; the owner's tick, which the loop calls on its thread
 * before it reconciles its PostgreSQL sockets, sees the connection's
 * socket gone and puts a socket of its own on the freed number, watched
 * by the loop.  A byte written to the other end must then reach ops->io.
 * State lives in static storage; the loop is stopped in the teardown.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "db/rv_db.h"
#include "db/rv_db_async.h"
#include "http/rv_loop.h"
#include "svc_log.h"
#include "testkit.h"

/* Bound on anything that should happen at once (a loaded machine). */
#define SOON_MS 10000

enum { STMT_QUIT };

static const rv_stmt_def stmts[] = {
    {"t_quit", "SELECT pg_terminate_backend(pg_backend_pid())", 0},
};

static svc_log *log_;
static rv_db *db;
static rv_loop *loop;
static rv_dba_query quit_q;
static rv_loop_item send_item;
static rv_dba *sent_on;        /* loop thread: the connection quit went to */
static int old_fd = -1;        /* loop thread: its socket's number then */
static int pair[2] = {-1, -1}; /* pair[0] put on old_fd by the tick */
static atomic_int sent;        /* 1 sent, -1 no connection ready yet */
static atomic_int planted;     /* pair[0] is on old_fd and watched */
static atomic_int readable;    /* ops->io saw EPOLLIN on pair[0] */
static char marker;            /* pair[0]'s pointer for ops->io */

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {0, (long)ms * 1000000};

    nanosleep(&ts, NULL);
}

static void on_adopt(void *cls, rv_loop *l, int fd, const struct sockaddr *a,
                     socklen_t n)
{
    (void)cls;
    (void)l;
    (void)a;
    (void)n;
    close(fd);
}

static void on_io(void *cls, void *ptr, uint32_t events)
{
    (void)cls;
    if (ptr == &marker && (events & EPOLLIN))
        atomic_store(&readable, 1);
}

/* Once the quit connection's socket is closed: a socket of ours on its
 * number, in the loop's epoll set, before the loop's next watch_pg. */
static int on_tick(void *cls)
{
    int fd;
    uint32_t events;

    (void)cls;
    if (sent_on == NULL || atomic_load(&planted))
        return sent_on != NULL ? -1 : 50;
    rv_dba_watch(sent_on, &fd, &events);
    if (fd == old_fd)
        return 10; /* not closed yet */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                   pair)
        != 0)
        fail_msg("socketpair: %s", strerror(errno));
    /* The number is free (libpq closed it); take it for pair[0]. */
    if (pair[0] != old_fd) {
        if (dup2(pair[0], old_fd) < 0)
            fail_msg("dup2 onto %d: %s", old_fd, strerror(errno));
        close(pair[0]);
        pair[0] = old_fd;
    }
    if (rv_loop_watch(rv_loop_current(), pair[0], &marker) != 0)
        fail_msg("rv_loop_watch: %s", strerror(errno));
    atomic_store(&planted, 1);
    return -1;
}

static void on_stopped(void *cls)
{
    (void)cls;
}

static const rv_loop_ops ops = {on_adopt, on_io, on_tick, on_stopped};

static void quit_done(rv_dba_query *q, rv_dba_outcome outcome, PGresult *res)
{
    (void)q;
    (void)outcome;
    PQclear(res);
}

/* On the loop's thread: the quit statement on the ready connection. */
static void send_quit(rv_loop_item *item)
{
    rv_dba *a = rv_loop_db(rv_loop_current());
    uint32_t events;

    (void)item;
    if (a == NULL) {
        atomic_store(&sent, -1);
        return;
    }
    rv_dba_watch(a, &old_fd, &events);
    memset(&quit_q, 0, sizeof(quit_q));
    quit_q.done = quit_done;
    if (old_fd < 0 || rv_dba_send(a, &quit_q, STMT_QUIT, NULL, SOON_MS) != 0) {
        atomic_store(&sent, -1);
        return;
    }
    sent_on = a;
    atomic_store(&sent, 1);
}

static int setup(void **state)
{
    char err[256];

    (void)state;
    log_ = svc_log_new(NULL, SVC_LOG_WARN, err, sizeof(err));
    if (log_ == NULL)
        fail_msg("log: %s", err);
    db = rv_db_new(testkit_database_url(), stmts,
                   sizeof(stmts) / sizeof(stmts[0]), 5, log_);
    assert_non_null(db);
    loop = rv_loop_start(db, &ops, NULL, err, sizeof(err));
    if (loop == NULL)
        fail_msg("rv_loop_start: %s", err);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    rv_loop_free(loop); /* joins the thread; then the sockets are ours */
    loop = NULL;
    for (int i = 0; i < 2; i++) {
        if (pair[i] >= 0)
            close(pair[i]);
        pair[i] = -1;
    }
    rv_db_free(db);
    db = NULL;
    svc_log_free(log_);
    log_ = NULL;
    return 0;
}

static void a_socket_on_a_lost_connections_number_is_still_served(void **s)
{
    int64_t until = now_ms() + SOON_MS;

    (void)s;
    /* The loop connects at start; ask until its connection is ready. */
    do {
        atomic_store(&sent, 0);
        send_item.run = send_quit;
        rv_loop_post(loop, &send_item);
        while (atomic_load(&sent) == 0 && now_ms() < until)
            sleep_ms(5);
        if (atomic_load(&sent) < 0)
            sleep_ms(50);
    } while (atomic_load(&sent) != 1 && now_ms() < until);
    assert_int_equal(atomic_load(&sent), 1);
    until = now_ms() + SOON_MS;
    while (!atomic_load(&planted) && now_ms() < until)
        sleep_ms(5);
    if (!atomic_load(&planted))
        fail_msg("the connection's socket was not closed within %d ms",
                 SOON_MS);
    assert_int_equal(write(pair[1], "x", 1), 1);
    until = now_ms() + SOON_MS;
    while (!atomic_load(&readable) && now_ms() < until)
        sleep_ms(5);
    if (!atomic_load(&readable))
        fail_msg("a socket on the lost connection's number (%d) was not "
                 "served within %d ms: the loop unregistered it",
                 old_fd, SOON_MS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            a_socket_on_a_lost_connections_number_is_still_served),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
