/*
 * testkit_threads.c: a case's threads, joined in its teardown (see
 * testkit_threads.h).
 */
#include "testkit_threads.h"

int testkit_threads_start(testkit_threads *ts, void *(*fn)(void *), void *arg)
{
    if (ts->started >= TESTKIT_THREADS_MAX
        || pthread_create(&ts->t[ts->started], NULL, fn, arg) != 0)
        return -1;
    ts->started++;
    return 0;
}

void testkit_threads_join_next(testkit_threads *ts)
{
    if (ts->joined >= ts->started)
        return;
    pthread_join(ts->t[ts->joined], NULL);
    ts->joined++;
}

void testkit_threads_join_all(testkit_threads *ts)
{
    while (ts->joined < ts->started)
        testkit_threads_join_next(ts);
    ts->started = 0;
    ts->joined = 0;
}
