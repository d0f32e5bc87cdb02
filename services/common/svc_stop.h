/*
 * svc_stop.h: a stop request that a thread sleeping in poll(2) wakes on.
 *
 * The services' background threads (reviewd's relay, its listener, the
 * content-orphan sweeper) sleep in poll on their sockets and must also
 * wake at once when asked to stop.  A flag alone cannot wake a poll, so a
 * stop request is a flag and a byte written to a pipe whose read end the
 * thread polls beside its own descriptors.  Written once here instead of
 * in every thread that needs it.
 *
 * Ownership: the struct is the caller's (embedded in its state);
 * svc_stop_init / svc_stop_destroy.  Threads: svc_stop_request from any
 * thread; svc_stop_requested from any; svc_stop_fd and svc_stop_drain by
 * the sleeping thread.
 */
#ifndef SVC_STOP_H
#define SVC_STOP_H

#include <stdatomic.h>

typedef struct svc_stop {
    atomic_int requested;
    int pipe[2]; /* svc_stop_request writes to pipe[1] */
} svc_stop;

/* 0, or -1 with errno set (no pipe could be made). */
int svc_stop_init(svc_stop *s);

/* Sets the flag and wakes the thread polling svc_stop_fd. */
void svc_stop_request(svc_stop *s);

/* 1 once svc_stop_request was called, else 0. */
int svc_stop_requested(svc_stop *s);

/* The descriptor to poll for POLLIN beside the thread's own. */
int svc_stop_fd(const svc_stop *s);

/* Reads what woke the poll, so the next poll sleeps again. */
void svc_stop_drain(svc_stop *s);

/* Closes the pipe.  After the thread has been joined. */
void svc_stop_destroy(svc_stop *s);

#endif
