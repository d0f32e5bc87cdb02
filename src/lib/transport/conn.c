/*
 * conn.c: sockets, TLS and the hiredis reader, under deadlines (conn.h).
 *
 * hiredis 0.14 is used only for redisFormatCommandArgv and its reply reader,
 * the two parts that report out-of-memory instead of aborting; the socket
 * layer is ours, so that every step of a connection (resolve, connect, TLS
 * handshake, AUTH, SELECT, each read and write) has a deadline, and so that
 * TLS works on Debian's hiredis, which has none.
 *
 * Invariant: conn->broken is set by every path that leaves the byte stream
 * in an unknown state; nothing is ever sent on a broken connection.
 */
#include "transport/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/decimal.h"
#include "transport/resolve.h"
#include "transport/tls.h"

struct dlock__conn {
    int fd;
    SSL *ssl;
    redisReader *reader;
    const dlock__endpoint *ep;
    atomic_int broken; /* atomic: a pipe's writer reads it while its reader
                        * may set it */
    int tls_unproven;  /* TLS up, but no reply read through it yet */
    size_t fed;        /* bytes fed since the last complete reply */
    size_t held;       /* bytes of reply objects built since then */
    int over_budget;   /* the reader was refused an object */
    /* 1 from a send until the next read: a reply cannot be there yet, so
     * that read waits with poll before it tries recv, sparing the recv
     * that would only say EAGAIN (one system call per round trip).
     * Atomic: a pipe's writer sets it while its reader may clear it. */
    atomic_int poll_first;
    /* A plain socket is made blocking once open: a read that waits is then
     * one recv under SO_RCVTIMEO instead of poll and recv (every other
     * socket call passes MSG_DONTWAIT).  rcvtimeo_us is the timeout set,
     * 0 for none yet; set once, as deadlines are mostly the same length. */
    int blocking;
    int64_t rcvtimeo_us;
    int64_t last_used_us;
    /* Busy polling (see busy_poll below): the budget, and the back-off
     * after spins that ran out (waits still to skip, the next skip).  Used
     * by the one thread that reads. */
    int busy_poll_us;
    unsigned spin_skip, spin_backoff;
    atomic_ullong *busy_poll_counts; /* the cfg's, or NULL */
};

static dlock_err mark_broken(dlock__conn *c, dlock_err err)
{
    c->broken = 1;
    return err;
}

/*
 * With TLS 1.3 the client's handshake completes before the server has
 * checked the client's certificate; a server that refuses it closes the
 * connection during our first exchange, and whether we read its alert or
 * only a reset is a race.  A close before the first reply on a new TLS
 * connection is therefore reported as the TLS failure it almost always is.
 */
static dlock_err tls_close_is_refusal(dlock__conn *c, dlock_err err,
                                      dlock__msg *m)
{
    if (!c->tls_unproven || err != DLOCK_UNAVAILABLE)
        return err;
    return dlock__msg_wrap(m, DLOCK_TLS,
                           "TLS peer %s closed the connection "
                           "before its first reply (it may require, or have "
                           "refused, our client certificate)",
                           c->ep->desc);
}

/*
 * The reply budget.  hiredis 0.14's reader allocates an array's element
 * vector as soon as it reads the count, 8 bytes an element, before any
 * element has arrived: 13 bytes ("*100000000\r\n") would make it calloc
 * 800 MB, and a reply of many tiny elements costs some 20 times its size
 * on the wire in reply objects.  So the reader builds its objects through
 * these wrappers of its own default functions, which charge every object's
 * structure (not a string's bytes: c->fed bounds those) to the connection
 * (c->held) and refuse one that would take the reply past DLOCK__REPLY_MAX.
 * A reply then holds at most the ceiling in structure plus what was
 * received, whatever lengths its bytes declare.
 */
#define OBJECT_COST (sizeof(redisReply) + 16) /* 16: allocator overhead */

static redisReplyObjectFunctions reply_defaults;
static redisReplyObjectFunctions reply_budgeted;
static pthread_once_t reply_functions_once = PTHREAD_ONCE_INIT;

static int charge(const redisReadTask *task, size_t bytes)
{
    dlock__conn *c = task->privdata;

    if (bytes > DLOCK__REPLY_MAX || c->held > DLOCK__REPLY_MAX - bytes) {
        c->over_budget = 1;
        return 0;
    }
    c->held += bytes;
    return 1;
}

static void *budgeted_string(const redisReadTask *task, char *str, size_t len)
{
    /* The string's bytes came on the wire and are bounded by c->fed. */
    (void)len;
    if (!charge(task, OBJECT_COST))
        return NULL;
    return reply_defaults.createString(task, str, len);
}

static void *budgeted_array(const redisReadTask *task, int elements)
{
    size_t n = elements > 0 ? (size_t)elements : 0;

    if (elements < 0) {
        ((dlock__conn *)task->privdata)->over_budget = 1;
        return NULL;
    }
    if (n > (DLOCK__REPLY_MAX - OBJECT_COST) / sizeof(redisReply *)
        || !charge(task, OBJECT_COST + n * sizeof(redisReply *) + 16))
        return NULL;
    return reply_defaults.createArray(task, elements);
}

static void *budgeted_integer(const redisReadTask *task, long long value)
{
    if (!charge(task, OBJECT_COST))
        return NULL;
    return reply_defaults.createInteger(task, value);
}

static void *budgeted_nil(const redisReadTask *task)
{
    if (!charge(task, OBJECT_COST))
        return NULL;
    return reply_defaults.createNil(task);
}

static void reply_functions_init(void)
{
    redisReader *probe = redisReaderCreate();

    /* The defaults are static in hiredis; a reader points at them. */
    if (probe == NULL)
        return;
    reply_defaults = *probe->fn;
    redisReaderFree(probe);
    reply_budgeted = reply_defaults;
    reply_budgeted.createString = budgeted_string;
    reply_budgeted.createArray = budgeted_array;
    reply_budgeted.createInteger = budgeted_integer;
    reply_budgeted.createNil = budgeted_nil;
}

/* A reader whose objects are charged to c; NULL when out of memory. */
static redisReader *budgeted_reader(dlock__conn *c)
{
    redisReader *r;

    pthread_once(&reply_functions_once, reply_functions_init);
    if (reply_budgeted.createArray == NULL)
        return NULL;
    r = redisReaderCreateWithFunctions(&reply_budgeted);
    if (r != NULL)
        r->privdata = c;
    return r;
}

/* Waits for events on fd until deadline; 1 ready, 0 timed out, -1 error.
 * A deadline already past still looks once (poll with no wait): a caller
 * that was paused (SIGSTOP, a stalled VM, a busy CPU) past its deadline
 * while the reply arrived must read that reply, not call it missing and
 * break the connection. */
static int wait_fd(int fd, short events, int64_t deadline_us)
{
    struct pollfd pfd = {.fd = fd, .events = events};

    for (;;) {
        int left = dlock__ms_left(deadline_us);
        int rc = poll(&pfd, 1, left);

        if (rc < 0 && errno == EINTR)
            continue;
        return rc < 0 ? -1 : rc;
    }
}

static void set_tcp_options(int fd, int keepalive_s)
{
    int one = 1;

    /* Lock traffic is small request/reply pairs: Nagle would add delay. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (keepalive_s <= 0)
        return;
    {
        int idle = keepalive_s, intvl = keepalive_s / 3 ? keepalive_s / 3 : 1;
        int cnt = 3;

        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    }
}

/* Starts a non-blocking connect of a new socket to addr and waits for it;
 * returns the socket or -1 with *err and m set. */
static int connect_addr(const struct sockaddr *addr, socklen_t alen,
                        int family, int64_t deadline_us, const char *desc,
                        dlock_err *err, dlock__msg *m)
{
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int soerr = 0, rc;
    socklen_t slen = sizeof(soerr);
    int64_t started = dlock__now_us();

    if (fd < 0) {
        *err = dlock__msg_set(m, DLOCK_SYSTEM, "socket() for %s: %s", desc,
                              strerror(errno));
        return -1;
    }
    do {
        rc = connect(fd, addr, alen);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0 && errno != EINPROGRESS && errno != EAGAIN) {
        *err = dlock__msg_set(m, DLOCK_UNAVAILABLE, "connect to %s: %s", desc,
                              strerror(errno));
        close(fd);
        return -1;
    }
    if (rc < 0) {
        rc = wait_fd(fd, POLLOUT, deadline_us);
        if (rc <= 0) {
            *err = dlock__msg_set(m, rc == 0 ? DLOCK_TIMEOUT : DLOCK_SYSTEM,
                                  "connect to %s: no answer after %lld ms",
                                  desc,
                                  (long long)((dlock__now_us() - started)
                                              / 1000));
            close(fd);
            return -1;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &slen) != 0) {
            *err = dlock__msg_set(m, DLOCK_SYSTEM,
                                  "connect to %s: reading "
                                  "its outcome (SO_ERROR): %s",
                                  desc, strerror(errno));
            close(fd);
            return -1;
        }
        if (soerr != 0) {
            *err = dlock__msg_set(m, DLOCK_UNAVAILABLE, "connect to %s: %s",
                                  desc, strerror(soerr));
            close(fd);
            return -1;
        }
    }
    return fd;
}

static int connect_unix(const dlock__endpoint *ep, int64_t deadline_us,
                        dlock_err *err, dlock__msg *m)
{
    struct sockaddr_un sun;

    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    if (strlen(ep->path) >= sizeof(sun.sun_path)) {
        *err = dlock__msg_set(m, DLOCK_INVALID,
                              "socket path %s is longer "
                              "than %zu bytes",
                              ep->path, sizeof(sun.sun_path) - 1);
        return -1;
    }
    memcpy(sun.sun_path, ep->path, strlen(ep->path) + 1);
    return connect_addr((const struct sockaddr *)&sun, sizeof(sun), AF_UNIX,
                        deadline_us, ep->desc, err, m);
}

/* Resolves the host (resolve.c: by the deadline) and tries each address
 * in turn until one connects. */
static int connect_tcp(const dlock__endpoint *ep, const dlock__conn_cfg *cfg,
                       int64_t deadline_us, dlock_err *err, dlock__msg *m)
{
    struct addrinfo *res = NULL, *ai;
    int fd = -1;

    *err = dlock__resolve(ep->host, ep->port, deadline_us, &res, m);
    if (*err != DLOCK_OK)
        return -1;
    for (ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = connect_addr(ai->ai_addr, ai->ai_addrlen, ai->ai_family,
                          deadline_us, ep->desc, err, m);
        if (*err == DLOCK_TIMEOUT)
            break;
    }
    freeaddrinfo(res);
    if (fd >= 0)
        set_tcp_options(fd, cfg->keepalive_s);
    return fd;
}

dlock_err dlock__conn_send(dlock__conn *c, const char *buf, size_t len,
                           int64_t deadline_us, dlock__msg *m)
{
    size_t done = 0;

    if (c->broken)
        return dlock__msg_set(m, DLOCK_UNAVAILABLE,
                              "send to %s on a broken connection",
                              c->ep->desc);
    while (done < len) {
        ssize_t n;
        short want = POLLOUT;
        dlock_err err = DLOCK_OK;

        if (c->ssl != NULL) {
            n = dlock__tls_write(c->ssl, buf + done, len - done, &want, &err,
                                 m);
            if (n < 0)
                return mark_broken(c, tls_close_is_refusal(
                                          c,
                                          dlock__msg_wrap(m, err, "send to %s",
                                                          c->ep->desc),
                                          m));
        } else {
            n = send(c->fd, buf + done, len - done,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno != EAGAIN)
                return mark_broken(c, dlock__msg_set(m, DLOCK_UNAVAILABLE,
                                                     "send to %s: %s",
                                                     c->ep->desc,
                                                     strerror(errno)));
            if (n < 0)
                n = 0;
        }
        done += (size_t)n;
        c->poll_first = 1;
        if (n == 0 && wait_fd(c->fd, want, deadline_us) <= 0)
            return mark_broken(c, dlock__msg_set(m, DLOCK_TIMEOUT,
                                                 "send to %s: socket not "
                                                 "writable in time",
                                                 c->ep->desc));
    }
    return DLOCK_OK;
}

dlock_err dlock__conn_send_some(dlock__conn *c, const char *buf, size_t len,
                                size_t *sent, dlock__msg *m)
{
    ssize_t n;

    *sent = 0;
    if (c->broken)
        return dlock__msg_set(m, DLOCK_UNAVAILABLE,
                              "send to %s on a broken connection",
                              c->ep->desc);
    if (c->ssl != NULL)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "send to %s: a TLS connection cannot be "
                              "written without waiting",
                              c->ep->desc);
    do {
        n = send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        return mark_broken(c, dlock__msg_set(m, DLOCK_UNAVAILABLE,
                                             "send to %s: %s", c->ep->desc,
                                             strerror(errno)));
    *sent = n > 0 ? (size_t)n : 0;
    return DLOCK_OK;
}

void dlock__conn_shut(dlock__conn *c, dlock_err err)
{
    shutdown(c->fd, SHUT_RDWR);
    mark_broken(c, err);
}

/* Reads what the socket has into the reader (with wait, on a blocking
 * socket, waiting up to its SO_RCVTIMEO).  Returns DLOCK_OK with *got the
 * byte count (0: nothing now, *want says which event to wait for). */
static dlock_err fill_reader(dlock__conn *c, int wait, size_t *got,
                             short *want, dlock__msg *m)
{
    char buf[16384];
    ssize_t n;
    dlock_err err = DLOCK_OK;

    *got = 0;
    *want = POLLIN;
    if (c->ssl != NULL) {
        n = dlock__tls_read(c->ssl, buf, sizeof(buf), want, &err, m);
        if (n < 0)
            return mark_broken(
                c, tls_close_is_refusal(c,
                                        dlock__msg_wrap(m, err, "read from %s",
                                                        c->ep->desc),
                                        m));
    } else {
        /* A blocking read cut short by a signal returns to the caller's
         * loop, which weighs the time left again. */
        do {
            n = recv(c->fd, buf, sizeof(buf), wait ? 0 : MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR && !wait);
        if (n == 0)
            return mark_broken(c, dlock__msg_set(m, DLOCK_UNAVAILABLE,
                                                 "read from %s: connection "
                                                 "closed by server",
                                                 c->ep->desc));
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return mark_broken(c,
                               dlock__msg_set(m, DLOCK_UNAVAILABLE,
                                              "read from %s: %s", c->ep->desc,
                                              strerror(errno)));
        if (n < 0)
            n = 0;
    }
    if (n == 0)
        return DLOCK_OK;
    c->fed += (size_t)n;
    if (c->fed > DLOCK__REPLY_MAX)
        return mark_broken(c, dlock__msg_set(m, DLOCK_PROTOCOL,
                                             "reply from %s exceeds %u bytes",
                                             c->ep->desc, DLOCK__REPLY_MAX));
    if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK)
        return mark_broken(c, dlock__msg_set(m, DLOCK_NOMEM,
                                             "buffering a reply from %s",
                                             c->ep->desc));
    *got = (size_t)n;
    return DLOCK_OK;
}

/* Takes a complete reply out of the reader, if there is one. */
static dlock_err take_reply(dlock__conn *c, redisReply **reply, dlock__msg *m)
{
    void *r = NULL;

    if (redisReaderGetReply(c->reader, &r) != REDIS_OK) {
        dlock_err err = c->reader->err == REDIS_ERR_OOM ? DLOCK_NOMEM
                                                        : DLOCK_PROTOCOL;

        if (c->over_budget)
            return mark_broken(c,
                               dlock__msg_set(m, DLOCK_PROTOCOL,
                                              "reply from %s refused: its "
                                              "objects would exceed %u "
                                              "bytes, or it declares a "
                                              "negative count",
                                              c->ep->desc, DLOCK__REPLY_MAX));
        return mark_broken(c, dlock__msg_set(m, err,
                                             "parsing a reply from "
                                             "%s: %s",
                                             c->ep->desc, c->reader->errstr));
    }
    if (r != NULL) {
        c->tls_unproven = 0;
        c->fed = 0;
        c->held = 0;
        c->last_used_us = dlock__now_us();
    }
    *reply = r;
    return DLOCK_OK;
}

/* The connection waited past its deadline for a reply: it is broken, as
 * a late reply would be taken for the next command's. */
static dlock_err no_reply(dlock__conn *c, int64_t started, dlock__msg *m)
{
    return mark_broken(
        c, dlock__msg_set(m, DLOCK_TIMEOUT, "no reply from %s after %lld ms",
                          c->ep->desc,
                          (long long)((dlock__now_us() - started) / 1000)));
}

/* Shortest SO_RCVTIMEO worth a blocking read; closer to the deadline the
 * read waits with poll, which takes the exact time left. */
#define RCVTIMEO_MIN_US 10000

/* 1 if a blocking recv may wait now: its SO_RCVTIMEO ends before
 * deadline_us (set to half the time left when it would not). */
static int may_block(dlock__conn *c, int64_t deadline_us)
{
    int64_t left = deadline_us - dlock__now_us();
    struct timeval tv;

    if (!c->blocking || deadline_us == 0 || left < 2 * RCVTIMEO_MIN_US)
        return 0;
    if (c->rcvtimeo_us != 0 && c->rcvtimeo_us <= left)
        return 1;
    tv.tv_sec = (time_t)(left / 2 / 1000000);
    tv.tv_usec = (suseconds_t)(left / 2 % 1000000);
    if (setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0)
        return 0;
    c->rcvtimeo_us = left / 2;
    return 1;
}

/*
 * Busy polling (dlock_client_opts.busy_poll_us): before a read sleeps, it
 * reads without sleeping for up to the budget, so that a reply that comes
 * within it is taken while the CPU is still running.  Where an idle CPU
 * halts at once (virtual machines whose vCPUs halt without polling), each
 * sleep costs a wake-up of a halted CPU, about half of a loopback round
 * trip (docs/benchmarks.md, "Session 14").  It spends a CPU for the wait,
 * so it is bounded three ways: by the budget and the deadline; by the
 * number of threads spinning at once in the process, one fewer than the
 * online CPUs (none on one CPU, where spinning would hold off the very
 * server or thread it waits for); and by a back-off: a spin that ran out
 * skips the next 1, 2, 4 ... 64 chances to spin on that connection, until
 * one catches its reply again.  Nothing about what a reply means changes.
 */
#define BUSY_POLL_BACKOFF_MAX 64u

static atomic_int busy_pollers;

/* Threads that may spin at once: online CPUs - 1. */
static int busy_poll_slots(void)
{
    static atomic_int slots = -1;
    int n = atomic_load_explicit(&slots, memory_order_relaxed);

    if (n < 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);

        n = cpus > 1 ? (int)(cpus > 1024 ? 1023 : cpus - 1) : 0;
        atomic_store_explicit(&slots, n, memory_order_relaxed);
    }
    return n;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Reads without sleeping until bytes come, the budget or the deadline
 * ends, or the connection fails (fill_reader's result).  *got > 0 when
 * bytes came. */
static dlock_err busy_poll(dlock__conn *c, int64_t deadline_us, size_t *got,
                           short *want, dlock__msg *m)
{
    dlock_err err = DLOCK_OK;
    int64_t until;

    *got = 0;
    if (c->busy_poll_us <= 0 || deadline_us == 0)
        return DLOCK_OK;
    if (c->spin_skip > 0) {
        c->spin_skip--;
        return DLOCK_OK;
    }
    if (atomic_fetch_add(&busy_pollers, 1) >= busy_poll_slots()) {
        atomic_fetch_sub(&busy_pollers, 1);
        return DLOCK_OK;
    }
    if (c->busy_poll_counts != NULL)
        atomic_fetch_add_explicit(&c->busy_poll_counts[0], 1,
                                  memory_order_relaxed);
    until = dlock__now_us() + c->busy_poll_us;
    if (until > deadline_us)
        until = deadline_us;
    do {
        err = fill_reader(c, 0, got, want, m);
        if (err != DLOCK_OK || *got > 0 || *want != POLLIN)
            break;
        cpu_relax();
    } while (dlock__now_us() < until);
    atomic_fetch_sub(&busy_pollers, 1);
    if (err == DLOCK_OK && *got == 0) {
        c->spin_backoff = c->spin_backoff == 0 ? 1
                          : c->spin_backoff >= BUSY_POLL_BACKOFF_MAX
                              ? BUSY_POLL_BACKOFF_MAX
                              : c->spin_backoff * 2;
        c->spin_skip = c->spin_backoff;
    } else {
        c->spin_backoff = 0;
        if (err == DLOCK_OK && c->busy_poll_counts != NULL)
            atomic_fetch_add_explicit(&c->busy_poll_counts[1], 1,
                                      memory_order_relaxed);
    }
    return err;
}

dlock_err dlock__conn_recv(dlock__conn *c, int64_t deadline_us,
                           redisReply **reply, dlock__msg *m)
{
    int64_t started = dlock__now_us();

    *reply = NULL;
    if (c->broken)
        return dlock__msg_set(m, DLOCK_UNAVAILABLE,
                              "read from %s on a broken connection",
                              c->ep->desc);
    for (;;) {
        size_t got;
        short want;
        dlock_err err = take_reply(c, reply, m);
        int wait;

        if (err != DLOCK_OK || *reply != NULL)
            return err;
        err = busy_poll(c, deadline_us, &got, &want, m);
        if (err != DLOCK_OK)
            return err;
        if (got > 0) {
            atomic_store(&c->poll_first, 0);
            continue;
        }
        wait = may_block(c, deadline_us);
        if (atomic_exchange(&c->poll_first, 0) && !wait && c->ssl == NULL
            && deadline_us != 0 && wait_fd(c->fd, POLLIN, deadline_us) <= 0)
            return no_reply(c, started, m);
        err = fill_reader(c, wait, &got, &want, m);
        if (err != DLOCK_OK)
            return err;
        if (got > 0)
            continue;
        if (deadline_us == 0)
            return DLOCK_OK;
        if (wait_fd(c->fd, want, deadline_us) <= 0)
            return no_reply(c, started, m);
    }
}

dlock_err dlock__conn_take(dlock__conn *c, redisReply **reply, dlock__msg *m)
{
    *reply = NULL;
    if (c->broken)
        return dlock__msg_set(m, DLOCK_UNAVAILABLE,
                              "read from %s on a broken connection",
                              c->ep->desc);
    return take_reply(c, reply, m);
}

/* Appends "<prefix><n>\r\n" at buf + at when it fits; returns the new
 * length either way. */
static size_t put_count(char *buf, size_t cap, size_t at, char prefix,
                        size_t n)
{
    const size_t nd = dlock__decimal_len(n);

    if (at + nd + 3 <= cap) {
        buf[at] = prefix;
        dlock__decimal_put(buf + at + 1, n, nd); /* its NUL: where '\r' goes */
        buf[at + 1 + nd] = '\r';
        buf[at + 2 + nd] = '\n';
    }
    return at + nd + 3;
}

size_t dlock__resp_format(char *buf, size_t cap, int argc, const char **argv,
                          const size_t *lens)
{
    size_t at = put_count(buf, cap, 0, '*', (size_t)argc);

    for (int i = 0; i < argc; i++) {
        size_t len = lens != NULL ? lens[i] : strlen(argv[i]);

        at = put_count(buf, cap, at, '$', len);
        if (at + len + 2 <= cap) {
            memcpy(buf + at, argv[i], len);
            buf[at + len] = '\r';
            buf[at + len + 1] = '\n';
        }
        at += len + 2;
    }
    return at;
}

char *dlock__resp_format_pair(int argc, const char **argv, const size_t *lens,
                              int nthen, const char **then, size_t *len)
{
    /* Measured first with no room, then written where they fit. */
    const size_t first = dlock__resp_format(NULL, 0, argc, argv, lens);
    const size_t second = dlock__resp_format(NULL, 0, nthen, then, NULL);
    char *both = dlock__malloc(first + second);

    if (both == NULL)
        return NULL;
    dlock__resp_format(both, first, argc, argv, lens);
    dlock__resp_format(both + first, second, nthen, then, NULL);
    *len = first + second;
    return both;
}

dlock_err dlock__conn_call_pair(dlock__conn *c, const char *buf, size_t len,
                                int64_t deadline_us, redisReply **first,
                                redisReply **second, dlock__msg *m)
{
    dlock_err err;

    *first = NULL;
    *second = NULL;
    err = dlock__conn_send(c, buf, len, deadline_us, m);
    if (err == DLOCK_OK)
        err = dlock__conn_recv(c, deadline_us, first, m);
    if (err == DLOCK_OK)
        err = dlock__conn_recv(c, deadline_us, second, m);
    if (err != DLOCK_OK) {
        freeReplyObject(*first);
        *first = NULL;
    }
    return err;
}

dlock_err dlock__conn_call(dlock__conn *c, int argc, const char **argv,
                           const size_t *lens, int64_t deadline_us,
                           redisReply **reply, dlock__msg *m)
{
    char *cmd = NULL;
    int len;
    dlock_err err;

    *reply = NULL;
    len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (len < 0)
        return dlock__msg_set(m, DLOCK_NOMEM, "formatting %s for %s",
                              argc > 0 ? argv[0] : "a command", c->ep->desc);
    err = dlock__conn_send(c, cmd, (size_t)len, deadline_us, m);
    free(cmd); /* allocated by hiredis with malloc */
    if (err != DLOCK_OK)
        return err;
    return dlock__conn_recv(c, deadline_us, reply, m);
}

/* Sends one handshake command; a server error maps through
 * dlock__reply_error. */
static dlock_err handshake_call(dlock__conn *c, int argc, const char **argv,
                                const char *what, int64_t deadline_us,
                                dlock__msg *m)
{
    redisReply *r;
    dlock_err err = dlock__conn_call(c, argc, argv, NULL, deadline_us, &r, m);

    if (err != DLOCK_OK)
        return dlock__msg_wrap(m, err, "%s", what);
    if (r->type == REDIS_REPLY_ERROR)
        err = dlock__reply_error(r, what, c->ep->desc, m);
    freeReplyObject(r);
    return err;
}

static dlock_err handshake(dlock__conn *c, const dlock__conn_cfg *cfg,
                           int64_t deadline_us, dlock__msg *m)
{
    char db[16];
    dlock_err err;

    if (cfg->password != NULL) {
        const char *with_user[] = {"AUTH", cfg->user, cfg->password};
        const char *pass_only[] = {"AUTH", cfg->password};

        err = cfg->user != NULL
                  ? handshake_call(c, 3, with_user, "AUTH", deadline_us, m)
                  : handshake_call(c, 2, pass_only, "AUTH", deadline_us, m);
        if (err != DLOCK_OK)
            return err;
    }
    if (c->ep->db != 0) {
        const char *select[] = {"SELECT", db};

        snprintf(db, sizeof(db), "%d", c->ep->db);
        return handshake_call(c, 2, select, "SELECT", deadline_us, m);
    }
    return DLOCK_OK;
}

dlock_err dlock__conn_open(const dlock__endpoint *ep,
                           const dlock__conn_cfg *cfg, int64_t deadline_us,
                           dlock__conn **out, dlock__msg *m)
{
    dlock__conn *c;
    dlock_err err = DLOCK_OK;

    *out = NULL;
    c = dlock__calloc(1, sizeof(*c));
    if (c == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "allocating a connection");
    c->ep = ep;
    c->fd = -1;
    c->reader = budgeted_reader(c);
    if (c->reader == NULL) {
        err = dlock__msg_set(m, DLOCK_NOMEM, "allocating a reply reader");
        goto fail;
    }
    c->fd = ep->transport == DLOCK__UNIX
                ? connect_unix(ep, deadline_us, &err, m)
                : connect_tcp(ep, cfg, deadline_us, &err, m);
    if (c->fd < 0)
        goto fail;
    if (ep->transport == DLOCK__TLS) {
        err = dlock__tls_connect(cfg->tls, c->fd, cfg->tls_name,
                                 cfg->tls_verify, deadline_us, &c->ssl, m);
        if (err != DLOCK_OK)
            goto fail;
        c->tls_unproven = 1;
    }
    err = handshake(c, cfg, deadline_us, m);
    if (err != DLOCK_OK)
        goto fail;
    /* TLS stays non-blocking: OpenSSL reads and writes the socket itself.
     * Should fcntl fail, the socket just stays non-blocking. */
    if (c->ssl == NULL
        && fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) & ~O_NONBLOCK) == 0)
        c->blocking = 1;
    c->busy_poll_us = cfg->busy_poll_us;
    c->busy_poll_counts = cfg->busy_poll_counts;
    c->last_used_us = dlock__now_us();
    *out = c;
    return DLOCK_OK;
fail:
    dlock__conn_free(c);
    return err;
}

dlock_err dlock__conn_from_fd(int fd, const dlock__endpoint *ep,
                              dlock__conn **out, dlock__msg *m)
{
    dlock__conn *c = dlock__calloc(1, sizeof(*c));

    *out = NULL;
    if (c != NULL)
        c->reader = budgeted_reader(c);
    if (c == NULL || c->reader == NULL) {
        dlock__free(c);
        close(fd);
        return dlock__msg_set(m, DLOCK_NOMEM, "allocating a connection");
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    c->fd = fd;
    c->ep = ep;
    c->last_used_us = dlock__now_us();
    *out = c;
    return DLOCK_OK;
}

void dlock__conn_free(dlock__conn *c)
{
    if (c == NULL)
        return;
    dlock__tls_free(c->ssl);
    if (c->fd >= 0)
        close(c->fd);
    if (c->reader != NULL)
        redisReaderFree(c->reader);
    dlock__free(c);
}

int dlock__conn_fd(const dlock__conn *c)
{
    return c->fd;
}

int dlock__conn_buffered(const dlock__conn *c)
{
    return (c->ssl != NULL && dlock__tls_pending(c->ssl))
           || (c->reader->len > c->reader->pos);
}

int dlock__conn_tls(const dlock__conn *c)
{
    return c->ssl != NULL;
}

const char *dlock__conn_desc(const dlock__conn *c)
{
    return c->ep->desc;
}

int dlock__conn_broken(const dlock__conn *c)
{
    return c->broken;
}

int64_t dlock__conn_last_used(const dlock__conn *c)
{
    return c->last_used_us;
}

/* 1 if the error text starts with the word prefix. */
static int error_is(const redisReply *r, const char *prefix)
{
    size_t n = strlen(prefix);

    return r->len >= n && memcmp(r->str, prefix, n) == 0
           && (r->len == n || r->str[n] == ' ');
}

dlock_err dlock__reply_error(const redisReply *r, const char *what,
                             const char *server, dlock__msg *m)
{
    /* Up but unable to run anything yet: loading its data set, or busy
     * with a long script.  Every other error reply (READONLY, MASTERDOWN,
     * OOM, a script error, ...) refuses the command: DLOCK_SERVER, which a
     * fail-open acquire does not degrade on (lock.c, redis_unreachable). */
    static const char *const unavailable[] = {"LOADING", "BUSY"};
    static const char *const auth[] = {"NOAUTH", "WRONGPASS", "NOPERM"};
    dlock_err code = DLOCK_SERVER;
    int shown = r->len > 200 ? 200 : (int)r->len;

    for (size_t i = 0; i < sizeof(unavailable) / sizeof(*unavailable); i++)
        if (error_is(r, unavailable[i]))
            code = DLOCK_UNAVAILABLE;
    for (size_t i = 0; i < sizeof(auth) / sizeof(*auth); i++)
        if (error_is(r, auth[i]))
            code = DLOCK_AUTH;
    return dlock__msg_set(m, code, "%s on %s: server said \"%.*s\"", what,
                          server, shown, r->str);
}

const char *dlock__reply_type_name(const redisReply *r)
{
    switch (r->type) {
    case REDIS_REPLY_STRING: return "bulk string";
    case REDIS_REPLY_ARRAY: return "array";
    case REDIS_REPLY_INTEGER: return "integer";
    case REDIS_REPLY_NIL: return "nil";
    case REDIS_REPLY_STATUS: return "status";
    case REDIS_REPLY_ERROR: return "error";
    default: return "unknown type";
    }
}
