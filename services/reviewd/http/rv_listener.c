/*
 * rv_listener.c: the accept loop (rv_listener.h says why reviewd owns
 * its listening socket).
 *
 * The thread sleeps in poll(2) on the listening socket and on a pipe
 * that rv_listener_stop writes to, so a stop is seen at once and the
 * socket is closed only after the thread is gone: no accept(2) ever
 * runs on a closed (or reused) descriptor.  Each wake-up accepts until
 * the backlog is empty (EAGAIN), the room runs out, or a stop is asked
 * for.  Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM),
 * it waits RV_LISTENER_FULL_MS before trying again rather than spinning
 * on a backlog it cannot take.
 */
#include "http/rv_listener.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "svc_stop.h"

#define RV_LISTENER_FULL_MS 10

struct rv_listener {
    int fd;
    svc_stop stop; /* rv_listener_stop's request */
    pthread_t thread;
    rv_listener_hand_fn hand;
    rv_listener_room_fn room;
    void *cls;
};

/* 1 if accept(2) failed for want of a resource that frees up later. */
static int out_of_resources(int err)
{
    return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

/* Accepts until the backlog is empty; 0 if it should wait before the
 * next try (no room, or no resources). */
static int accept_all(rv_listener *l)
{
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd;

        if (svc_stop_requested(&l->stop) || !l->room(l->cls))
            return 0;
        fd = accept4(l->fd, (struct sockaddr *)&ss, &len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            l->hand(l->cls, fd, (struct sockaddr *)&ss, len);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        /* EAGAIN: the backlog is empty; anything else is the client's
         * (reset before we took it) and leaves the socket usable. */
        return !out_of_resources(errno);
    }
}

static void *listener_main(void *arg)
{
    rv_listener *l = arg;
    int wait_ms = -1;

    while (!svc_stop_requested(&l->stop)) {
        struct pollfd p[2] = {{svc_stop_fd(&l->stop), POLLIN, 0},
                              {l->fd, POLLIN, 0}};

        /* Full: only the stop pipe, and a look again after the wait. */
        if (poll(p, wait_ms < 0 ? 2 : 1, wait_ms) < 0 && errno != EINTR)
            break;
        wait_ms = accept_all(l) ? -1 : RV_LISTENER_FULL_MS;
    }
    return NULL;
}

/* The socket bound and listening, or -1 with a message in errbuf. */
static int open_socket(const struct sockaddr *addr, socklen_t addrlen,
                       int backlog, char *errbuf, size_t errlen)
{
    const int on = 1;
    int fd = socket(addr->sa_family,
                    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        snprintf(errbuf, errlen, "http: cannot make a socket: %s",
                 strerror(errno));
        return -1;
    }
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (addr->sa_family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
    if (bind(fd, addr, addrlen) != 0 || listen(fd, backlog) != 0) {
        snprintf(errbuf, errlen, "%s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* The port fd is bound to (0 if it cannot be read). */
static uint16_t bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

rv_listener *rv_listener_start(const struct sockaddr *addr, socklen_t addrlen,
                               int backlog, rv_listener_hand_fn hand,
                               rv_listener_room_fn room, void *cls,
                               uint16_t *port, char *errbuf, size_t errlen)
{
    rv_listener *l = calloc(1, sizeof(*l));
    int rc;

    if (l == NULL) {
        snprintf(errbuf, errlen, "http: out of memory");
        return NULL;
    }
    l->hand = hand;
    l->room = room;
    l->cls = cls;
    l->fd = open_socket(addr, addrlen, backlog, errbuf, errlen);
    if (l->fd < 0) {
        free(l);
        return NULL;
    }
    if (svc_stop_init(&l->stop) != 0) {
        snprintf(errbuf, errlen, "http: cannot make a pipe: %s",
                 strerror(errno));
        close(l->fd);
        free(l);
        return NULL;
    }
    rc = pthread_create(&l->thread, NULL, listener_main, l);
    if (rc != 0) {
        snprintf(errbuf, errlen, "http: cannot start the listener: %s",
                 strerror(rc));
        svc_stop_destroy(&l->stop);
        close(l->fd);
        free(l);
        return NULL;
    }
    *port = bound_port(l->fd);
    return l;
}

void rv_listener_stop(rv_listener *l)
{
    if (l == NULL)
        return;
    svc_stop_request(&l->stop);
    pthread_join(l->thread, NULL);
    close(l->fd);
    svc_stop_destroy(&l->stop);
    free(l);
}
