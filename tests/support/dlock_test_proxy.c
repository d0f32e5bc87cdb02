/*
 * dlock_test_proxy.c: dlock-test-proxy, a pausable TCP proxy for fault
 * tests (issue 13).
 *
 * A lock is only as safe as what it does when the network goes silent, is
 * slow, is cut, or moves.  Pausing redis-server (SIGSTOP) shows only one of
 * those; this proxy sits between a client and its server and is told, while
 * it runs, to:
 *
 *   pause          blackhole: stop reading and writing in both directions;
 *                  bytes already read stay held, nothing is reset, new
 *                  connections are accepted but not forwarded (the client
 *                  sees a silent peer, as behind a dead switch)
 *   resume         forward again, held bytes first
 *   reset          close every connection with RST (SO_LINGER 0), both sides
 *   delay MS       each chunk read from now on is forwarded MS ms later
 *   target H:P     new connections go to H:P (a failover)
 *   stats          "ok conns=N paused=0|1 delay=MS target=H:P"
 *
 * Usage:
 *   dlock-test-proxy serve --listen PORT --target HOST:PORT --control SOCK
 *                          [--pid-file F] [--port-file F]
 *     PORT 0 picks a free port; the port is printed on stdout and written
 *     to --port-file (atomically, after the control socket is ready, so
 *     the file's existence means "ready").  Exits on SIGTERM or SIGINT,
 *     removing the control socket and the pid file.
 *   dlock-test-proxy ctl SOCK COMMAND [ARG]
 *     Sends one command line, prints the answer, exits 0 on "ok".  The
 *     command has taken effect when the answer arrives.
 *
 * Built as one poll loop in one thread: no busy loop (poll sleeps until a
 * socket is ready, a delayed chunk is due, or a signal arrives: ppoll with
 * SIGTERM unblocked only inside it), bounded memory (at most MAX_CONNS
 * connections, QUEUE_CAP bytes held per direction; a full queue stops
 * reading from its source, which is TCP's own back-pressure).
 * Targets are resolved with getaddrinfo, which may block: tests use
 * numeric loopback addresses.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 64
#define MAX_CTLS 8
#define CHUNK_MAX 16384
#define QUEUE_CAP (256 * 1024)
#define LINE_MAX_LEN 256

typedef struct chunk {
    struct chunk *next;
    int64_t due_ms; /* not forwarded before this (CLOCK_MONOTONIC) */
    size_t len, off;
    char data[];
} chunk;

/* One direction of a connection: bytes read from src, waiting for dst. */
typedef struct flow {
    chunk *head, *tail;
    size_t queued;
    int eof; /* src said EOF; shut dst's write side once drained */
    int shut;
} flow;

enum conn_state { CONN_FREE, CONN_PENDING, CONN_CONNECTING, CONN_OPEN };

typedef struct conn {
    enum conn_state state;
    int cfd, sfd;  /* client side, server side (-1 while pending) */
    flow up, down; /* up: client -> server; down: server -> client */
} conn;

typedef struct ctl {
    int fd;
    size_t len;
    char line[LINE_MAX_LEN];
} ctl;

typedef struct proxy {
    int listen_fd, ctl_fd;
    char target_host[128], target_port[16];
    int paused;
    int64_t delay_ms;
    conn conns[MAX_CONNS];
    ctl ctls[MAX_CTLS];
    const char *ctl_path, *pid_file;
} proxy;

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int set_nonblock(int fd)
{
    int flags = fcntl(fd, F_GETFL);

    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

/* ---- connections -------------------------------------------------------- */

static void flow_clear(flow *f)
{
    while (f->head != NULL) {
        chunk *next = f->head->next;

        free(f->head);
        f->head = next;
    }
    memset(f, 0, sizeof(*f));
}

/* Closes fd; with rst, with an RST rather than a FIN. */
static void close_fd(int fd, int rst)
{
    if (fd < 0)
        return;
    if (rst) {
        struct linger lg = {.l_onoff = 1, .l_linger = 0};

        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    close(fd);
}

static void conn_close(conn *c, int rst)
{
    close_fd(c->cfd, rst);
    close_fd(c->sfd, rst);
    flow_clear(&c->up);
    flow_clear(&c->down);
    c->cfd = c->sfd = -1;
    c->state = CONN_FREE;
}

static int count_conns(const proxy *p)
{
    int n = 0;

    for (int i = 0; i < MAX_CONNS; i++)
        n += p->conns[i].state != CONN_FREE;
    return n;
}

/* Starts a non-blocking connect to the current target. */
static void conn_dial(proxy *p, conn *c)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    int fd = -1;

    if (getaddrinfo(p->target_host, p->target_port, &hints, &ai) != 0) {
        fprintf(stderr, "dlock-test-proxy: cannot resolve %s:%s\n",
                p->target_host, p->target_port);
        conn_close(c, 1);
        return;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0
        || (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0
            && errno != EINPROGRESS)) {
        close_fd(fd, 0);
        freeaddrinfo(ai);
        conn_close(c, 1); /* as a refused connection looks */
        return;
    }
    freeaddrinfo(ai);
    c->sfd = fd;
    c->state = CONN_CONNECTING;
}

static void accept_conn(proxy *p)
{
    int fd = accept4(p->listen_fd, NULL, NULL, SOCK_NONBLOCK);
    conn *c = NULL;
    int one = 1;

    if (fd < 0)
        return;
    for (int i = 0; i < MAX_CONNS && c == NULL; i++)
        if (p->conns[i].state == CONN_FREE)
            c = &p->conns[i];
    if (c == NULL) {
        fprintf(stderr, "dlock-test-proxy: more than %d connections\n",
                MAX_CONNS);
        close_fd(fd, 1);
        return;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    memset(c, 0, sizeof(*c));
    c->cfd = fd;
    c->sfd = -1;
    c->state = CONN_PENDING;
    if (!p->paused)
        conn_dial(p, c);
}

/* Reads one chunk from fd into f.  Returns -1 when the connection broke. */
static int flow_read(proxy *p, flow *f, int fd)
{
    char buf[CHUNK_MAX];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    chunk *ch;

    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    if (n == 0) {
        f->eof = 1;
        return 0;
    }
    ch = malloc(sizeof(*ch) + (size_t)n);
    if (ch == NULL)
        return -1;
    ch->next = NULL;
    ch->due_ms = now_ms() + p->delay_ms;
    ch->len = (size_t)n;
    ch->off = 0;
    memcpy(ch->data, buf, (size_t)n);
    if (f->tail != NULL)
        f->tail->next = ch;
    else
        f->head = ch;
    f->tail = ch;
    f->queued += (size_t)n;
    return 0;
}

/* Writes what is due from f to fd.  Returns -1 when the connection broke. */
static int flow_write(flow *f, int fd)
{
    int64_t now = now_ms();

    while (f->head != NULL && f->head->due_ms <= now) {
        chunk *ch = f->head;
        ssize_t n = send(fd, ch->data + ch->off, ch->len - ch->off,
                         MSG_NOSIGNAL);

        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        ch->off += (size_t)n;
        f->queued -= (size_t)n;
        if (ch->off < ch->len)
            return 0;
        f->head = ch->next;
        if (f->head == NULL)
            f->tail = NULL;
        free(ch);
    }
    if (f->head == NULL && f->eof && !f->shut) {
        (void)shutdown(fd, SHUT_WR);
        f->shut = 1;
    }
    return 0;
}

static int flow_wants_read(const flow *f)
{
    return !f->eof && f->queued < QUEUE_CAP;
}

static int flow_due(const flow *f, int64_t now)
{
    return f->head != NULL && f->head->due_ms <= now;
}

/* ---- control ------------------------------------------------------------ */

static int set_target(proxy *p, const char *spec)
{
    const char *colon = strrchr(spec, ':');
    size_t hlen;

    if (colon == NULL || colon == spec || colon[1] == '\0')
        return -1;
    hlen = (size_t)(colon - spec);
    if (hlen >= sizeof(p->target_host)
        || strlen(colon + 1) >= sizeof(p->target_port))
        return -1;
    memcpy(p->target_host, spec, hlen);
    p->target_host[hlen] = '\0';
    snprintf(p->target_port, sizeof(p->target_port), "%s", colon + 1);
    return 0;
}

static void do_resume(proxy *p)
{
    p->paused = 0;
    for (int i = 0; i < MAX_CONNS; i++)
        if (p->conns[i].state == CONN_PENDING)
            conn_dial(p, &p->conns[i]);
}

static void do_reset(proxy *p)
{
    for (int i = 0; i < MAX_CONNS; i++)
        if (p->conns[i].state != CONN_FREE)
            conn_close(&p->conns[i], 1);
}

/* Runs one command line; writes the answer (without newline) to out. */
static void run_command(proxy *p, char *line, char *out, size_t outlen)
{
    char *arg = strchr(line, ' ');

    if (arg != NULL)
        *arg++ = '\0';
    if (strcmp(line, "pause") == 0) {
        p->paused = 1;
    } else if (strcmp(line, "resume") == 0) {
        do_resume(p);
    } else if (strcmp(line, "reset") == 0) {
        do_reset(p);
    } else if (strcmp(line, "delay") == 0 && arg != NULL) {
        char *end;
        long long ms = strtoll(arg, &end, 10);

        if (*end != '\0' || ms < 0 || ms > 3600000) {
            snprintf(out, outlen, "err delay wants 0..3600000 ms");
            return;
        }
        p->delay_ms = ms;
    } else if (strcmp(line, "target") == 0 && arg != NULL) {
        if (set_target(p, arg) != 0) {
            snprintf(out, outlen, "err target wants HOST:PORT");
            return;
        }
    } else if (strcmp(line, "stats") != 0) {
        snprintf(out, outlen, "err unknown command %s", line);
        return;
    }
    snprintf(out, outlen, "ok conns=%d paused=%d delay=%lld target=%s:%s",
             count_conns(p), p->paused, (long long)p->delay_ms, p->target_host,
             p->target_port);
}

static void ctl_close(ctl *c)
{
    close(c->fd);
    c->fd = -1;
    c->len = 0;
}

static void ctl_read(proxy *p, ctl *c)
{
    ssize_t n = recv(c->fd, c->line + c->len, sizeof(c->line) - 1 - c->len, 0);
    char *nl;

    if (n <= 0) {
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            ctl_close(c);
        return;
    }
    c->len += (size_t)n;
    c->line[c->len] = '\0';
    while ((nl = strchr(c->line, '\n')) != NULL) {
        char out[LINE_MAX_LEN + 64];
        size_t rest;

        *nl = '\0';
        run_command(p, c->line, out, sizeof(out));
        strcat(out, "\n");
        /* Answers are short and the client waits for each one: a blocking
         * send on a fresh socket cannot fill its buffer. */
        if (send(c->fd, out, strlen(out), MSG_NOSIGNAL) < 0) {
            ctl_close(c);
            return;
        }
        rest = c->len - (size_t)(nl + 1 - c->line);
        memmove(c->line, nl + 1, rest + 1);
        c->len = rest;
    }
    if (c->len == sizeof(c->line) - 1)
        ctl_close(c); /* a line too long: not a client of ours */
}

static void accept_ctl(proxy *p)
{
    int fd = accept4(p->ctl_fd, NULL, NULL, 0);

    if (fd < 0)
        return;
    for (int i = 0; i < MAX_CTLS; i++) {
        if (p->ctls[i].fd < 0) {
            p->ctls[i].fd = fd;
            p->ctls[i].len = 0;
            return;
        }
    }
    close(fd);
}

/* ---- the loop ----------------------------------------------------------- */

enum { KIND_LISTEN, KIND_CTL_LISTEN, KIND_CTL, KIND_CLIENT, KIND_SERVER };

typedef struct pollset {
    struct pollfd fds[2 + MAX_CTLS + 2 * MAX_CONNS];
    int kind[2 + MAX_CTLS + 2 * MAX_CONNS];
    int idx[2 + MAX_CTLS + 2 * MAX_CONNS];
    int n;
} pollset;

static void ps_add(pollset *ps, int fd, short events, int kind, int idx)
{
    /* poll reports POLLHUP and POLLERR even for no events: a socket we do
     * not want to hear from is left out, or a hung-up peer would spin us. */
    ps->fds[ps->n] = (struct pollfd){.fd = events != 0 ? fd : -1,
                                     .events = events};
    ps->kind[ps->n] = kind;
    ps->idx[ps->n] = idx;
    ps->n++;
}

/* The soonest a held chunk falls due, for the poll timeout (-1: none). */
static int64_t next_due(const proxy *p)
{
    int64_t due = -1;

    for (int i = 0; i < MAX_CONNS; i++) {
        const conn *c = &p->conns[i];

        if (c->state == CONN_FREE)
            continue;
        if (c->up.head != NULL && (due < 0 || c->up.head->due_ms < due))
            due = c->up.head->due_ms;
        if (c->down.head != NULL && (due < 0 || c->down.head->due_ms < due))
            due = c->down.head->due_ms;
    }
    return due;
}

static void build_pollset(const proxy *p, pollset *ps, int64_t now)
{
    ps->n = 0;
    ps_add(ps, p->listen_fd, POLLIN, KIND_LISTEN, 0);
    ps_add(ps, p->ctl_fd, POLLIN, KIND_CTL_LISTEN, 0);
    for (int i = 0; i < MAX_CTLS; i++)
        if (p->ctls[i].fd >= 0)
            ps_add(ps, p->ctls[i].fd, POLLIN, KIND_CTL, i);
    if (p->paused)
        return; /* blackhole: nobody is read or written */
    for (int i = 0; i < MAX_CONNS; i++) {
        const conn *c = &p->conns[i];
        short cev = 0, sev = 0;

        if (c->state == CONN_FREE || c->state == CONN_PENDING)
            continue;
        if (flow_wants_read(&c->up))
            cev |= POLLIN;
        if (c->state == CONN_CONNECTING) {
            sev = POLLOUT;
        } else {
            if (flow_wants_read(&c->down))
                sev |= POLLIN;
            if (flow_due(&c->up, now))
                sev |= POLLOUT;
            if (flow_due(&c->down, now))
                cev |= POLLOUT;
        }
        ps_add(ps, c->cfd, cev, KIND_CLIENT, i);
        ps_add(ps, c->sfd, sev, KIND_SERVER, i);
    }
}

static void finish_connect(conn *c)
{
    int err = 0;
    socklen_t len = sizeof(err);
    int one = 1;

    if (getsockopt(c->sfd, SOL_SOCKET, SO_ERROR, &err, &len) != 0
        || err != 0) {
        conn_close(c, 1); /* the target refused: so do we */
        return;
    }
    (void)setsockopt(c->sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->state = CONN_OPEN;
}

/* Moves bytes for one ready socket of connection c. */
static void service_conn(conn *c, int is_server, short rev, proxy *p)
{
    int fd = is_server ? c->sfd : c->cfd;
    flow *in = is_server ? &c->down : &c->up;
    flow *out = is_server ? &c->up : &c->down;

    if (c->state == CONN_FREE)
        return;
    if (is_server && c->state == CONN_CONNECTING) {
        if (rev & (POLLOUT | POLLERR | POLLHUP))
            finish_connect(c);
        return;
    }
    if (rev & POLLERR) {
        conn_close(c, 1);
        return;
    }
    if ((rev & (POLLIN | POLLHUP)) && flow_wants_read(in)
        && flow_read(p, in, fd) != 0) {
        conn_close(c, 1);
        return;
    }
    if (c->state == CONN_OPEN && (rev & POLLOUT) && flow_write(out, fd) != 0) {
        conn_close(c, 1);
        return;
    }
    if (c->up.shut && c->down.shut)
        conn_close(c, 0);
}

/* Flushes chunks that fell due, and EOFs waiting to be passed on. */
static void flush_due(proxy *p)
{
    for (int i = 0; i < MAX_CONNS && !p->paused; i++) {
        conn *c = &p->conns[i];

        if (c->state != CONN_OPEN)
            continue;
        if (flow_write(&c->up, c->sfd) != 0
            || flow_write(&c->down, c->cfd) != 0) {
            conn_close(c, 1);
            continue;
        }
        if (c->up.shut && c->down.shut)
            conn_close(c, 0);
    }
}

static int run_loop(proxy *p, const sigset_t *during_poll)
{
    pollset ps;

    while (!stop_requested) {
        int64_t now = now_ms(), due = next_due(p);
        struct timespec ts, *tsp = NULL;

        build_pollset(p, &ps, now);
        if (due >= 0 && !p->paused) {
            int64_t wait = due > now ? due - now : 0;

            ts.tv_sec = wait / 1000;
            ts.tv_nsec = (wait % 1000) * 1000000;
            tsp = &ts;
        }
        if (ppoll(ps.fds, (nfds_t)ps.n, tsp, during_poll) < 0) {
            if (errno == EINTR)
                continue;
            perror("dlock-test-proxy: ppoll");
            return 1;
        }
        for (int i = 0; i < ps.n; i++) {
            short rev = ps.fds[i].revents;

            if (rev == 0)
                continue;
            if (ps.kind[i] == KIND_LISTEN)
                accept_conn(p);
            else if (ps.kind[i] == KIND_CTL_LISTEN)
                accept_ctl(p);
            else if (ps.kind[i] == KIND_CTL && p->ctls[ps.idx[i]].fd >= 0)
                ctl_read(p, &p->ctls[ps.idx[i]]);
            else if (!p->paused
                     && (ps.kind[i] == KIND_CLIENT
                         || ps.kind[i] == KIND_SERVER))
                service_conn(&p->conns[ps.idx[i]], ps.kind[i] == KIND_SERVER,
                             rev, p);
        }
        flush_due(p);
    }
    return 0;
}

/* ---- setup -------------------------------------------------------------- */

static int listen_tcp(int port, int *bound)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        return -1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 64) != 0
        || getsockname(fd, (struct sockaddr *)&a, &len) != 0
        || set_nonblock(fd) != 0) {
        close(fd);
        return -1;
    }
    *bound = ntohs(a.sin_port);
    return fd;
}

static int unix_addr(const char *path, struct sockaddr_un *a)
{
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(a->sun_path)) {
        fprintf(stderr, "dlock-test-proxy: socket path too long: %s\n", path);
        return -1;
    }
    strcpy(a->sun_path, path);
    return 0;
}

static int listen_unix(const char *path)
{
    struct sockaddr_un a;
    int fd;

    if (unix_addr(path, &a) != 0)
        return -1;
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    unlink(path);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0
        || listen(fd, 8) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Writes "value\n" to path through a temporary file and rename. */
static int write_file_atomic(const char *path, long value)
{
    char tmp[4096];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "%ld\n", value);
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

static int usage(void)
{
    fprintf(stderr,
            "usage: dlock-test-proxy serve --listen PORT --target HOST:PORT "
            "--control SOCK [--pid-file F] [--port-file F]\n"
            "       dlock-test-proxy ctl SOCK pause|resume|reset|stats|"
            "delay MS|target HOST:PORT\n");
    return 64;
}

static int serve(int argc, char **argv)
{
    static proxy p;
    const char *port_file = NULL, *target = NULL;
    int port = -1, bound = 0, rc;
    sigset_t block, during;
    struct sigaction sa = {.sa_handler = on_stop};

    for (int i = 2; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "--listen") == 0)
            port = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--target") == 0)
            target = argv[i + 1];
        else if (strcmp(argv[i], "--control") == 0)
            p.ctl_path = argv[i + 1];
        else if (strcmp(argv[i], "--pid-file") == 0)
            p.pid_file = argv[i + 1];
        else if (strcmp(argv[i], "--port-file") == 0)
            port_file = argv[i + 1];
        else
            return usage();
    if (port < 0 || target == NULL || p.ctl_path == NULL
        || set_target(&p, target) != 0)
        return usage();
    for (int i = 0; i < MAX_CTLS; i++)
        p.ctls[i].fd = -1;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &during);
    sigdelset(&during, SIGTERM);
    sigdelset(&during, SIGINT);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    p.listen_fd = listen_tcp(port, &bound);
    p.ctl_fd = listen_unix(p.ctl_path);
    if (p.listen_fd < 0 || p.ctl_fd < 0) {
        fprintf(stderr,
                "dlock-test-proxy: cannot listen on 127.0.0.1:%d "
                "or %s: %s\n",
                port, p.ctl_path, strerror(errno));
        return 1;
    }
    if ((p.pid_file != NULL
         && write_file_atomic(p.pid_file, (long)getpid()) != 0)
        || (port_file != NULL && write_file_atomic(port_file, bound) != 0)) {
        fprintf(stderr, "dlock-test-proxy: cannot write pid/port file: %s\n",
                strerror(errno));
        return 1;
    }
    printf("%d\n", bound);
    fflush(stdout);
    rc = run_loop(&p, &during);
    do_reset(&p);
    unlink(p.ctl_path);
    if (p.pid_file != NULL)
        unlink(p.pid_file);
    return rc;
}

static int ctl_main(int argc, char **argv)
{
    struct sockaddr_un a;
    char line[LINE_MAX_LEN + 64], answer[LINE_MAX_LEN + 64];
    size_t got = 0;
    int fd;

    if (argc < 4 || argc > 5)
        return usage();
    snprintf(line, sizeof(line), "%s%s%s\n", argv[3], argc == 5 ? " " : "",
             argc == 5 ? argv[4] : "");
    if (unix_addr(argv[2], &a) != 0)
        return 1;
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0
        || send(fd, line, strlen(line), MSG_NOSIGNAL) < 0) {
        fprintf(stderr, "dlock-test-proxy: control socket %s: %s\n", argv[2],
                strerror(errno));
        return 1;
    }
    while (got < sizeof(answer) - 1 && memchr(answer, '\n', got) == NULL) {
        ssize_t n = recv(fd, answer + got, sizeof(answer) - 1 - got, 0);

        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    answer[got] = '\0';
    fputs(answer, stdout);
    return strncmp(answer, "ok", 2) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "serve") == 0)
        return serve(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "ctl") == 0)
        return ctl_main(argc, argv);
    return usage();
}
