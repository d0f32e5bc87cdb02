/*
 * rv_conns.h: the open HTTP connections and their absolute deadlines.
 *
 * libmicrohttpd 0.9.75 has only an idle timeout, which every byte
 * restarts: a client that sends one header line a second holds its slot
 * for ever.  This module keeps, for each open connection, one deadline
 * (a CLOCK_MONOTONIC time in ms) that rv_http.c moves as the request
 * advances (headers due, body due, none while the handler runs and the
 * answer is written), and a reaper thread that wakes every 100 ms and
 * hands each connection past its deadline to the expire callback, which
 * answers 408 on the socket and shuts it down (MHD then sees the end of
 * the stream and closes the connection itself).
 *
 * Exactly one side wins a connection at its deadline: the reaper claims
 * it with a compare-and-swap, and rv_conn_arm fails on a claimed
 * connection, so a worker never writes an answer to a socket the reaper
 * has answered.  The reaper calls expire under the registry's lock, and
 * rv_conns_remove (called before MHD closes the socket) takes the same
 * lock, so the descriptor the reaper writes to is still the connection's.
 *
 * Ownership: rv_conns_new / rv_conns_free; rv_conns_add / rv_conns_remove
 * for each connection.  Threads: add, remove and arm from any thread
 * (MHD's workers); new and free from one thread.
 */
#ifndef RV_CONNS_H
#define RV_CONNS_H

#include <stddef.h>
#include <stdint.h>

typedef struct rv_conns rv_conns;
typedef struct rv_conn rv_conn;

/* Called by the reaper thread for a connection past its deadline, with
 * the registry locked: must not block (send with MSG_DONTWAIT). */
typedef void (*rv_conns_expire_fn)(void *cls, int fd);

/* Starts the reaper.  NULL with a message in errbuf on failure. */
rv_conns *rv_conns_new(rv_conns_expire_fn expire, void *cls, char *errbuf,
                       size_t errlen);

/* Stops the reaper and frees the registry (connections must be gone). */
void rv_conns_free(rv_conns *conns);

/* Registers a connection on fd due by deadline_ms; NULL without memory
 * (that connection then has only MHD's idle timeout). */
rv_conn *rv_conns_add(rv_conns *conns, int fd, int64_t deadline_ms);

/* Unregisters and frees conn (NULL: nothing); before fd is closed. */
void rv_conns_remove(rv_conns *conns, rv_conn *conn);

/* Sets conn's deadline (0: none).  Returns 0 if the reaper has already
 * claimed the connection (the caller stops serving it), else 1. */
int rv_conn_arm(rv_conn *conn, int64_t deadline_ms);

/* Like rv_conn_arm, but only moves a deadline earlier (or sets one). */
int rv_conn_arm_by(rv_conn *conn, int64_t deadline_ms);

/* CLOCK_MONOTONIC in ms. */
int64_t rv_conns_now_ms(void);

#endif /* RV_CONNS_H */
