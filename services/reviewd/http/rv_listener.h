/*
 * rv_listener.h: reviewd's listening socket and the thread that accepts
 * on it, handing each new connection to an event loop (rv_http.c).
 *
 * One thread accepts for all the loops, so stopping is simple and ours:
 * the thread is woken and joined, then the socket is closed, after which
 * the kernel refuses new connections while the requests in flight drain.
 * (When libmicrohttpd owned the socket, the only way to stop accepting
 * was MHD_quiesce_daemon, which raced with its own epoll loops and
 * aborted reviewd on SIGTERM now and then.)
 *
 * While the connection limit is reached (room returns 0) the thread
 * accepts nothing, so further clients wait in the backlog; it looks
 * again every RV_LISTENER_FULL_MS.
 *
 * Ownership: rv_listener_start / rv_listener_stop.  Threads: hand and
 * room run on the listener's thread; start and stop from one thread.
 */
#ifndef RV_LISTENER_H
#define RV_LISTENER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct rv_listener rv_listener;

/* Takes fd, a new connected socket (non-blocking, close-on-exec), from
 * the peer addr; fd is the callee's from then on. */
typedef void (*rv_listener_hand_fn)(void *cls, int fd,
                                    const struct sockaddr *addr,
                                    socklen_t addrlen);

/* 1 if one more connection may be accepted now, else 0. */
typedef int (*rv_listener_room_fn)(void *cls);

/*
 * Binds addr (SO_REUSEADDR; an IPv6 address takes IPv6 only), listens
 * with backlog and starts the thread.  Returns the listener with the
 * bound port in *port, or NULL with a message in errbuf.
 */
rv_listener *rv_listener_start(const struct sockaddr *addr, socklen_t addrlen,
                               int backlog, rv_listener_hand_fn hand,
                               rv_listener_room_fn room, void *cls,
                               uint16_t *port, char *errbuf, size_t errlen);

/* Stops accepting: joins the thread, then closes the socket (new clients
 * are refused from then on).  NULL does nothing. */
void rv_listener_stop(rv_listener *l);

#endif /* RV_LISTENER_H */
