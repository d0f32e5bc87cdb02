/*
 * rv_loop.h: an event-loop thread of reviewd's own: the HTTP connections
 * it was handed (rv_http.c reads, parses and writes them) and up to
 * RV_LOOP_PG non-blocking PostgreSQL connections (db/rv_db_async.h), in
 * one epoll set.
 *
 * A request that needs PostgreSQL would otherwise leave its event loop
 * for a worker and come back (rv_jobs.h): two context switches, a futex
 * wake, an eventfd, a second pass of the loop, and the worker's blocking
 * poll, about 40 % of a GET's CPU.  Here the loop that reads a request
 * can also send its statement and read the answer (rv_doc_loop.h: GET
 * /v1/documents/{id}), so such a request never leaves the thread;
 * everything else still goes to the workers.  The loop never blocks.
 *
 * Each HTTP socket is registered once, edge-triggered, for reading and
 * writing (rv_loop_watch): a request handed to a worker and back costs
 * no epoll_ctl.  What other threads give the loop (new connections,
 * rv_loop_hand; a worker's finished request, rv_loop_post) goes through
 * a queue and the loop's eventfd, and is taken on the loop's thread.
 *
 * Why several PostgreSQL connections: one pipelined connection carries
 * every read of the loop, but its one backend then runs them one after
 * the other, and on a busy machine a backend that waits for a CPU holds
 * them all up.  The loop makes its first connection when it starts; a
 * pass's first read goes to the ready connection with the fewest in
 * flight, and the pass's other reads join it (one sync for them all);
 * another connection is made only when every ready one has a read in
 * flight, so a quiet service keeps one.
 *
 * Ownership: rv_loop_start / rv_loop_free.  Threads: rv_loop_hand and
 * rv_loop_post from any thread; every callback of rv_loop_ops runs on the
 * loop's thread (adopt also on the stopping thread, with l NULL); start,
 * stop and free from one thread.
 */
#ifndef RV_LOOP_H
#define RV_LOOP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "db/rv_db.h"
#include "db/rv_db_async.h"

/* PostgreSQL connections per loop, at most. */
#define RV_LOOP_PG 4

typedef struct rv_loop rv_loop;

/* Work for the loop's thread (intrusive: the poster owns the item). */
typedef struct rv_loop_item {
    struct rv_loop_item *next; /* the queue's */
    void (*run)(struct rv_loop_item *item);
} rv_loop_item;

typedef struct rv_loop_ops {
    /* A connection given by rv_loop_hand (fd is the callee's); l is
     * NULL for one dropped at stop: close it. */
    void (*adopt)(void *cls, rv_loop *l, int fd, const struct sockaddr *addr,
                  socklen_t addrlen);
    /* Events (EPOLLIN, EPOLLOUT, ...) on a socket of rv_loop_watch. */
    void (*io)(void *cls, void *ptr, uint32_t events);
    /* After each pass's events: the ms until it wants to run again even
     * if nothing happens (its timers), -1 for never. */
    int (*tick)(void *cls);
    /* Once, after the last pass: what is still open is closed. */
    void (*stopped)(void *cls);
} rv_loop_ops;

/* Starts the thread, with a connection to db (NULL: none).  NULL with
 * errbuf set. */
rv_loop *rv_loop_start(rv_db *db, const rv_loop_ops *ops, void *cls,
                       char *errbuf, size_t errlen);

/* Queues fd for the loop to adopt.  0, or -1 (stopping, or out of
 * memory): fd stays the caller's. */
int rv_loop_hand(rv_loop *l, int fd, const struct sockaddr *addr,
                 socklen_t addrlen);

/* Registers fd, edge-triggered for input and output, with ptr for
 * rv_loop_ops.io; once per socket (closing it unregisters it).  0, or
 * -1 with errno.  On l's thread. */
int rv_loop_watch(rv_loop *l, int fd, void *ptr);

/* Runs item->run on the loop's thread soon, from any thread (from the
 * loop's own, after the current event, without a system call).  Items
 * posted before rv_loop_stop returns are run. */
void rv_loop_post(rv_loop *l, rv_loop_item *item);

/* The loop running on the calling thread, NULL on any other thread. */
rv_loop *rv_loop_current(void);

/* The connection a new read should go to: the one already holding reads
 * queued in this pass (they share one sync), else the ready one with the
 * fewest in flight (a down one is asked to connect when all are busy);
 * NULL when none is ready, or without a database.  On l's thread only. */
rv_dba *rv_loop_db(rv_loop *l);

/* Ends the loop's statements in flight (their callbacks run), runs what
 * was posted, calls ops->stopped and joins the thread; connections still
 * queued are given to adopt with l NULL.  NULL does nothing. */
void rv_loop_stop(rv_loop *l);

/* Stops the loop if that was not done, and frees it.  NULL is fine. */
void rv_loop_free(rv_loop *l);

#endif /* RV_LOOP_H */
