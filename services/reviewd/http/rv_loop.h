/*
 * rv_loop.h: an event-loop thread of reviewd's own, running one
 * libmicrohttpd daemon (external epoll mode) and up to RV_LOOP_PG
 * non-blocking PostgreSQL connections (db/rv_db_async.h) in the same
 * epoll set.
 *
 * With MHD's internal threads, a request that needs PostgreSQL had to
 * leave its event loop for a worker and come back (rv_jobs.h): two
 * context switches, a futex wake, an eventfd, a second pass of the loop,
 * and the worker's blocking poll, about 40 % of a GET's CPU.  Here the
 * loop that reads a request can also send its statement and read the
 * answer (rv_doc_loop.h: GET /v1/documents/{id}), so such a request
 * never leaves the thread; everything else still goes to the workers.
 * The loop never blocks: MHD is run without waiting (MHD_run) when its
 * epoll descriptor is ready or its timeout is due, and PostgreSQL is
 * read only when its socket is readable.
 *
 * Why several connections: one pipelined connection carries every read
 * of the loop, but its one backend then runs them one after the other,
 * and on a busy machine a backend that waits for a CPU holds them all
 * up.  The loop makes its first connection when it starts; a pass's
 * first read goes to the ready connection with the fewest in flight, and
 * the pass's other reads join it (one sync for them all); another
 * connection is made only when every ready one has a read in flight, so
 * a quiet service keeps one.
 *
 * New connections come from the listener thread (rv_loop_hand) through
 * a queue and an eventfd, and are added to the daemon on the loop's own
 * thread (adopt), since an externally run daemon is not thread-safe.
 *
 * Ownership: rv_loop_start / rv_loop_free; the daemon is the caller's
 * (stopped by it after rv_loop_stop).  Threads: rv_loop_hand from any
 * thread; adopt and every MHD callback of the daemon run on the loop's
 * thread (MHD_stop_daemon's, on the caller's); start, stop and free from
 * one thread.
 */
#ifndef RV_LOOP_H
#define RV_LOOP_H

#include <microhttpd.h>
#include <stddef.h>
#include <sys/socket.h>

#include "db/rv_db.h"
#include "db/rv_db_async.h"

/* PostgreSQL connections per loop, at most. */
#define RV_LOOP_PG 4

typedef struct rv_loop rv_loop;

/* Gives fd (from addr) to d, on the loop's thread; fd is the callee's.
 * d is NULL for a connection dropped at stop: close it. */
typedef void (*rv_loop_adopt_fn)(void *cls, struct MHD_Daemon *d, int fd,
                                 const struct sockaddr *addr,
                                 socklen_t addrlen);

/* Starts the thread running d (MHD_USE_EPOLL, no internal thread, with
 * MHD_USE_ITC) and a connection to db.  NULL with errbuf set. */
rv_loop *rv_loop_start(struct MHD_Daemon *d, rv_db *db, rv_loop_adopt_fn adopt,
                       void *cls, char *errbuf, size_t errlen);

/* Queues fd for the loop to adopt.  0, or -1 (stopping, or out of
 * memory): fd stays the caller's. */
int rv_loop_hand(rv_loop *l, int fd, const struct sockaddr *addr,
                 socklen_t addrlen);

/* The loop running on the calling thread, NULL on any other thread. */
rv_loop *rv_loop_current(void);

/* The connection a new read should go to: the one already holding reads
 * queued in this pass (they share one sync), else the ready one with the
 * fewest in flight (a down one is asked to connect when all are busy);
 * NULL when none is ready, or without a database.  On l's thread only. */
rv_dba *rv_loop_db(rv_loop *l);

/* Makes l run its daemon soon, from any thread: after
 * MHD_resume_connection on another thread (an externally run daemon in
 * 0.9.75 is not woken by its own ITC). */
void rv_loop_wake(rv_loop *l);

/* Ends the loop's statements in flight (their callbacks run, and
 * resume their connections), runs the daemon once more and joins the
 * thread; connections still queued are closed.  NULL does nothing. */
void rv_loop_stop(rv_loop *l);

/* Stops the loop if that was not done, and frees it.  NULL is fine. */
void rv_loop_free(rv_loop *l);

#endif /* RV_LOOP_H */
