/*
 * rv_listener.h: reviewd's listening socket and the thread that accepts
 * on it, handing each new connection to libmicrohttpd.
 *
 * libmicrohttpd could own the socket, but then the only way to stop
 * accepting before a drain is MHD_quiesce_daemon, and in 0.9.75 that
 * races with MHD's own event loops when they run epoll in a pool: the
 * caller and a busy loop both take the listening socket out of that
 * loop's epoll set, and whichever comes second fails (ENOENT) and
 * MHD_PANICs ("Failed to remove listen FD from epoll set"), so SIGTERM
 * aborted reviewd now and then.  Here MHD runs without a listening socket
 * (MHD_USE_NO_LISTEN_SOCKET), this thread accepts and passes each socket
 * to MHD_add_connection, and stopping is ours: the thread is woken and
 * joined, then the socket is closed, after which the kernel refuses new
 * connections while the requests in flight drain.
 *
 * While the connection limit is reached (room returns 0) the thread
 * accepts nothing, so further clients wait in the backlog as they did
 * with MHD's own socket; it looks again every RV_LISTENER_FULL_MS.
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
