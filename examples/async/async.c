/*
 * async: one thread's epoll loop drives 64 jobs through one dlock_async
 * handle (dlock/async.h), 16 keys, without blocking.
 *
 * A service on an event loop holds many locks at once from one thread.
 * Each job here tries the lock of its key (dlock_async_acquire: no
 * waiting; a busy key is tried again on a later turn of the loop), "works"
 * while holding it (it marks the key in use and checks nobody else had
 * it, and that the fence grew), then releases it (dlock_async_release).
 * The loop is the whole of the library's I/O: epoll_wait on the handle's
 * socket for what dlock_async_events asks, at most dlock_async_timeout_ms,
 * then dlock_async_process.
 *
 * Checked: every job ran --rounds times, no key was ever held by two jobs
 * at once, each key's fences grew, and no call failed.
 *
 *   async [--redis URL] [--jobs 64] [--keys 16] [--rounds 50]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "dlock/async.h"
#include "example_kit.h"

#define MAX_JOBS 256
#define MAX_KEYS 64

typedef struct job {
    int key;
    int rounds_left;
    int retry; /* busy: try again on the next turn */
} job;

typedef struct state {
    dlock_async *a;
    job jobs[MAX_JOBS];
    int njobs;
    char keys[MAX_KEYS][64];
    int in_use[MAX_KEYS];
    unsigned long long last_fence[MAX_KEYS];
    long done, busy, overlaps, errors;
} state;

static state st;

static void try_job(job *j);

static void released(dlock_async *a, dlock_err err, const char *msg, void *arg)
{
    job *j = arg;

    (void)a;
    st.in_use[j->key] = 0;
    if (err != DLOCK_OK) {
        fprintf(stderr, "release: %s\n", msg);
        st.errors++;
    }
    if (--j->rounds_left > 0)
        try_job(j);
    else
        st.done++;
}

static void acquired(dlock_async *a, dlock_err err, dlock_lock *lock,
                     const char *msg, void *arg)
{
    job *j = arg;

    if (err == DLOCK_BUSY) {
        st.busy++;
        j->retry = 1;
        return;
    }
    if (err != DLOCK_OK) {
        fprintf(stderr, "acquire: %s\n", msg);
        st.errors++;
        st.done++;
        return;
    }
    /* The work: the key is ours alone, and its fence is the newest. */
    if (st.in_use[j->key]++ > 0
        || dlock_lock_fence(lock) <= st.last_fence[j->key])
        st.overlaps++;
    st.last_fence[j->key] = dlock_lock_fence(lock);
    if (dlock_async_release(a, lock, released, j) != DLOCK_OK) {
        fprintf(stderr, "release: %s\n", dlock_async_errmsg(a));
        dlock_lock_free(lock);
        st.errors++;
        st.done++;
    }
}

static void try_job(job *j)
{
    j->retry = 0;
    if (dlock_async_acquire(st.a, st.keys[j->key], NULL, acquired, j)
        != DLOCK_OK) {
        fprintf(stderr, "acquire: %s\n", dlock_async_errmsg(st.a));
        st.errors++;
        st.done++;
    }
}

/* One turn: wait for what the handle wants, let it work, retry the busy. */
static int turn(int ep)
{
    struct epoll_event ev = {0};
    int timeout = dlock_async_timeout_ms(st.a), revents = 0, n;

    ev.events = EPOLLIN;
    if (dlock_async_events(st.a) & DLOCK_ASYNC_WRITE)
        ev.events |= EPOLLOUT;
    if (epoll_ctl(ep, EPOLL_CTL_MOD, dlock_async_fd(st.a), &ev) != 0)
        return -1;
    n = epoll_wait(ep, &ev, 1, timeout < 0 || timeout > 100 ? 100 : timeout);
    if (n > 0 && (ev.events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        revents |= DLOCK_ASYNC_READ;
    if (n > 0 && (ev.events & EPOLLOUT))
        revents |= DLOCK_ASYNC_WRITE;
    if (dlock_async_process(st.a, revents) != DLOCK_OK) {
        fprintf(stderr, "connection: %s\n", dlock_async_errmsg(st.a));
        return -1;
    }
    for (int i = 0; i < st.njobs; i++)
        if (st.jobs[i].retry)
            try_job(&st.jobs[i]);
    return 0;
}

int main(int argc, char **argv)
{
    dlock_client *c = ex_client(ex_redis_url(argc, argv));
    const long keys = ex_opt_long(argc, argv, "--keys", 16);
    const long rounds = ex_opt_long(argc, argv, "--rounds", 50);
    struct epoll_event ev = {.events = EPOLLIN};
    int ep;

    st.njobs = (int)ex_opt_long(argc, argv, "--jobs", 64);
    if (st.njobs < 1 || st.njobs > MAX_JOBS || keys < 1 || keys > MAX_KEYS
        || rounds < 1)
        return ex_fail("--jobs 1..%d, --keys 1..%d, --rounds >= 1", MAX_JOBS,
                       MAX_KEYS);
    if (dlock_async_new(c, &st.a) != DLOCK_OK)
        return ex_fail("dlock_async_new: %s", dlock_client_errmsg(c));
    ep = epoll_create1(0);
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, dlock_async_fd(st.a), &ev) != 0)
        return ex_fail("epoll");
    for (long k = 0; k < keys; k++)
        snprintf(st.keys[k], sizeof(st.keys[k]), "example:async:%d:%ld",
                 (int)getpid(), k);
    for (int i = 0; i < st.njobs; i++) {
        st.jobs[i].key = (int)(i % keys);
        st.jobs[i].rounds_left = (int)rounds;
        try_job(&st.jobs[i]);
    }
    while (st.done < st.njobs)
        if (turn(ep) != 0)
            break;
    close(ep);
    dlock_async_free(st.a);
    dlock_client_free(c);
    printf("jobs %d x %ld rounds on %ld keys: %ld done, %ld busy tries, "
           "%ld overlaps, %ld errors\n",
           st.njobs, rounds, keys, st.done, st.busy, st.overlaps, st.errors);
    if (st.done != st.njobs || st.overlaps != 0 || st.errors != 0)
        return ex_fail("every job done, no overlap, no error");
    printf("PASS\n");
    return 0;
}
