/*
 * testkit_threads.h: the threads of one test case, started one by one
 * and joined in the case's teardown whether the case passed or failed.
 *
 * A failed cmocka assertion leaves the case by longjmp while its threads
 * may still run and use the case's state, so that state and the threads'
 * handles live in static storage, and the teardown (after waking whatever
 * the threads wait for) joins every thread the case started.  The same
 * few lines did this in many tests; this is them once:
 *
 *     static testkit_threads threads;        (zeroed: no thread yet)
 *     testkit_threads_start(&threads, fn, arg);   in the case
 *     testkit_threads_join_next(&threads);        in the case, in order
 *     testkit_threads_join_all(&threads);         in the teardown
 *
 * A thread that could not be created is not counted, so the teardown
 * never joins a handle that names no thread.
 *
 * Ownership: the caller owns the testkit_threads (static storage) and
 * what the threads' arguments point at.  Threads: a testkit_threads
 * belongs to the thread that runs the case and its teardown.
 */
#ifndef DLOCK_TESTKIT_THREADS_H
#define DLOCK_TESTKIT_THREADS_H

#include <pthread.h>

/* The most threads one case starts. */
#define TESTKIT_THREADS_MAX 32

typedef struct testkit_threads {
    pthread_t t[TESTKIT_THREADS_MAX];
    int started; /* threads created, t[0..started) */
    int joined;  /* threads joined, in start order: t[0..joined) */
} testkit_threads;

/* Starts fn(arg) as the next thread.  Returns 0, or -1 (and counts no
 * thread) when there is no room or pthread_create fails. */
int testkit_threads_start(testkit_threads *ts, void *(*fn)(void *), void *arg);

/* Joins the next thread not yet joined, in start order; does nothing
 * when every started thread is joined. */
void testkit_threads_join_next(testkit_threads *ts);

/* Joins every thread started and not yet joined, then forgets them all
 * (started = joined = 0): for teardowns, and for a case's own wait. */
void testkit_threads_join_all(testkit_threads *ts);

#endif /* DLOCK_TESTKIT_THREADS_H */
