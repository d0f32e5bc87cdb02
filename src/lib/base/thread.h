/*
 * thread.h: how the library starts its own threads.
 *
 * The library runs background threads (the watchdog, the notifier, the
 * prober, resolvers, a deployment's watchers) inside applications that
 * install signal handlers and expect them on their own threads: a
 * handler that ran on a library thread could take a lock the thread
 * holds.  Every library thread therefore starts with every signal
 * blocked, which is done here once rather than at each pthread_create.
 */
#ifndef DLOCK_THREAD_H
#define DLOCK_THREAD_H

#include <pthread.h>

/* Starts fn(arg) on *thread with every signal blocked, so that the
 * application's signal handlers never run on it (the calling thread's
 * mask is restored before returning).  Returns pthread_create's result:
 * 0, or an errno value with *thread unset. */
int dlock__thread_start(pthread_t *thread, void *(*fn)(void *), void *arg);

#endif
