/*
 * pool.c: the bounded connection pool (see pool.h).
 *
 * The pool's mutex guards its tables; each pipe has its own mutex for its
 * commands (pipe.c), so threads on different connections do not contend.
 * A pipe is chosen and joined (its load raised) under the pool's mutex, so
 * a pipe with load 0 seen there can be detached or freed at once.  A
 * broken pipe takes no new calls, and the call that leaves it last (under
 * the pool's mutex too) unlinks and frees it.
 */
#include "transport/pool.h"

#include <errno.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"

dlock_err dlock__pool_init(dlock__pool *p, int max)
{
    pthread_condattr_t attr;

    p->idle = dlock__calloc((size_t)max, sizeof(*p->idle));
    p->pipes = dlock__calloc((size_t)max, sizeof(*p->pipes));
    if (p->idle == NULL || p->pipes == NULL) {
        dlock__free(p->idle);
        dlock__free(p->pipes);
        p->idle = NULL;
        return DLOCK_NOMEM;
    }
    p->nidle = p->npipes = p->open = p->lent = p->dialing = 0;
    p->max = max;
    if (pthread_condattr_init(&attr) != 0)
        goto fail;
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (pthread_cond_init(&p->freed, &attr) != 0) {
        pthread_condattr_destroy(&attr);
        goto fail;
    }
    pthread_condattr_destroy(&attr);
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        pthread_cond_destroy(&p->freed);
        goto fail;
    }
    return DLOCK_OK;
fail:
    dlock__free(p->idle);
    dlock__free(p->pipes);
    p->idle = NULL;
    return DLOCK_SYSTEM;
}

void dlock__pool_destroy(dlock__pool *p)
{
    if (p->idle == NULL)
        return;
    for (int i = 0; i < p->nidle; i++)
        dlock__conn_free(p->idle[i]);
    for (int i = 0; i < p->npipes; i++)
        dlock__pipe_free(p->pipes[i]);
    dlock__free(p->idle);
    dlock__free(p->pipes);
    p->idle = NULL;
    pthread_cond_destroy(&p->freed);
    pthread_mutex_destroy(&p->mu);
}

/* Removes pipe i from the pipe table (its slot stays counted in open). */
static dlock__pipe *unlink_pipe(dlock__pool *p, int i)
{
    dlock__pipe *pipe = p->pipes[i];

    p->pipes[i] = p->pipes[--p->npipes];
    return pipe;
}

/* Turns an idle pipe, if there is one, into an idle connection. */
static void take_idle_pipe(dlock__pool *p)
{
    for (int i = 0; i < p->npipes; i++) {
        if (dlock__pipe_load(p->pipes[i]) == 0
            && !dlock__pipe_broken(p->pipes[i])) {
            p->idle[p->nidle++] = dlock__pipe_detach(unlink_pipe(p, i));
            return;
        }
    }
}

dlock_err dlock__pool_borrow(dlock__pool *p, int64_t deadline_us,
                             dlock__conn **conn)
{
    dlock_err err = DLOCK_OK;

    *conn = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->nidle == 0 && p->open >= p->max)
        take_idle_pipe(p);
    while (p->nidle == 0 && p->open >= p->max) {
        struct timespec ts = dlock__timespec_of(deadline_us);

        if (pthread_cond_timedwait(&p->freed, &p->mu, &ts) == ETIMEDOUT
            && p->nidle == 0 && p->open >= p->max) {
            err = DLOCK_TIMEOUT;
            goto out;
        }
    }
    if (p->nidle > 0)
        *conn = p->idle[--p->nidle];
    else
        p->open++;
    p->lent++;
out:
    pthread_mutex_unlock(&p->mu);
    return err;
}

void dlock__pool_return(dlock__pool *p, dlock__conn *conn)
{
    int drop = conn == NULL || dlock__conn_broken(conn);

    pthread_mutex_lock(&p->mu);
    p->lent--;
    if (drop)
        p->open--;
    else
        p->idle[p->nidle++] = conn;
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->mu);
    if (drop)
        dlock__conn_free(conn);
}

void dlock__pool_drop_idle(dlock__pool *p)
{
    for (;;) {
        dlock__conn *victims[64];
        int n = 0;

        pthread_mutex_lock(&p->mu);
        while (p->nidle > 0 && n < (int)(sizeof(victims) / sizeof(*victims))) {
            victims[n++] = p->idle[--p->nidle];
            p->open--;
        }
        for (int i = 0; i < p->npipes && n < 64; i++) {
            if (dlock__pipe_load(p->pipes[i]) == 0
                && !dlock__pipe_broken(p->pipes[i])) {
                victims[n++] = dlock__pipe_detach(unlink_pipe(p, i));
                p->open--;
                i--;
            }
        }
        pthread_cond_broadcast(&p->freed);
        pthread_mutex_unlock(&p->mu);
        if (n == 0)
            return;
        for (int i = 0; i < n; i++)
            dlock__conn_free(victims[i]);
    }
}

void dlock__pool_counts(dlock__pool *p, int *open, int *lent)
{
    pthread_mutex_lock(&p->mu);
    *open = p->open;
    *lent = p->lent;
    for (int i = 0; i < p->npipes; i++)
        *lent += dlock__pipe_load(p->pipes[i]) > 0;
    pthread_mutex_unlock(&p->mu);
}

/*
 * How commands spread over connections.  While fewer than PIPE_SHARE_FROM
 * other commands run, a command takes a connection of its own: an idle
 * one, else a new one while a slot is free.  A thread alone on its
 * connection reads its own reply, with no hand-off and no wake-up by
 * another thread; threads sharing one pay a futex wait and wake per
 * command, which only pays when many commands travel together.  From
 * PIPE_SHARE_FROM on, a command joins the busiest live pipe that carries
 * fewer than PIPE_DEPTH, so that commands gather on as few connections as
 * they can: the server then reads and answers each connection's commands
 * together (one read, one write and one wake-up of the reader for many
 * replies), which saves it more than the hand-offs cost the client.  Once
 * every pipe is PIPE_DEPTH deep the pool opens another connection while a
 * slot is free, and only then fills them beyond (least loaded first), so
 * it never waits for a connection to come free.  Measured on 2 cores
 * (docs/benchmarks.md):
 *   - session 16: gathering at all, at 32 threads client and server CPU
 *     per pair 72 -> 61 us and pairs/s +16-19 %; gathering from 4 on also
 *     made 8 threads cheaper in CPU but slower on a lightly loaded
 *     machine, and two threads per connection cost the most, so up to 8
 *     commands at once kept a connection each;
 *   - session 21: pipes up to 64 deep rather than 8, so that 32 threads
 *     gather on one connection rather than four: in five interleaved
 *     pairs of runs, client and server CPU per pair 61.9 -> 55.8 us,
 *     pairs/s +9 % (ahead in all five), the p99 2.70 -> 2.32 times the
 *     limit's (medians).  64 is also the pipe's parking slots (pipe.c).
 *     And gathering from 6 other commands on rather than 8: a scratch
 *     driver at 7 and 8 threads +10-47 % pairs/s, at 4 to 6 the same path
 *     as before, at 12 to 32 within the noise; in bench_lock's five
 *     interleaved pairs at 8 threads, redis-server's CPU per pair 43.7 ->
 *     29.6 us, client and server together 78.6 -> 69.4, pairs/s +15 %
 *     (ahead in four of five).  From 2 on, 3 and 4 threads lost 27-33 %.
 */
#define PIPE_SHARE_FROM 6
#define PIPE_DEPTH 64

/* The pipe a new command should join, or NULL to open a connection. */
static dlock__pipe *choose_pipe(dlock__pool *p, int may_open)
{
    dlock__pipe *idle = NULL, *least = NULL, *pack = NULL;
    int running = p->dialing; /* their commands will run on new pipes */

    for (int i = 0; i < p->npipes; i++) {
        dlock__pipe *q = p->pipes[i];
        const int load = dlock__pipe_load(q);

        if (dlock__pipe_broken(q))
            continue;
        running += load;
        if (load == 0) {
            if (idle == NULL)
                idle = q;
            continue;
        }
        if (least == NULL || load < dlock__pipe_load(least))
            least = q;
        if (load < PIPE_DEPTH
            && (pack == NULL || load > dlock__pipe_load(pack)))
            pack = q;
    }
    if (running >= PIPE_SHARE_FROM && pack != NULL)
        return pack;
    if (idle != NULL)
        return idle;
    if (may_open
        && (running < PIPE_SHARE_FROM || least == NULL
            || dlock__pipe_load(least) >= PIPE_DEPTH))
        return NULL;
    return least;
}

/* Adds a pipe over conn (an idle or newly opened connection whose slot is
 * counted); on failure the slot is freed and NULL returned. */
static dlock__pipe *add_pipe(dlock__pool *p, dlock__conn *conn)
{
    dlock__pipe *pipe = dlock__pipe_new(conn);

    if (pipe == NULL) {
        p->open--;
        pthread_cond_broadcast(&p->freed);
        return NULL;
    }
    p->pipes[p->npipes++] = pipe;
    /* Callers waiting for a slot may join it. */
    pthread_cond_broadcast(&p->freed);
    return pipe;
}

/* Opens a connection in a reserved slot, with the mutex dropped meanwhile,
 * and makes it a pipe. */
static dlock_err open_pipe(dlock__pool *p, dlock__pool_dial dial, void *arg,
                           int64_t deadline_us, dlock__pipe **out,
                           dlock__msg *m)
{
    dlock__conn *conn = NULL;
    dlock_err err;

    p->open++;
    p->dialing++;
    pthread_mutex_unlock(&p->mu);
    err = dial(arg, deadline_us, &conn, m);
    pthread_mutex_lock(&p->mu);
    p->dialing--;
    if (err != DLOCK_OK) {
        p->open--;
        pthread_cond_broadcast(&p->freed);
        return err;
    }
    *out = add_pipe(p, conn);
    if (*out == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "allocating a pipeline");
    return DLOCK_OK;
}

/* Finds or makes the pipe for one command, waiting only while every slot
 * is lent out alone or being connected. */
static dlock_err pipe_for_call(dlock__pool *p, dlock__pool_dial dial,
                               void *arg, int64_t deadline_us,
                               dlock__pipe **out, dlock__pool_outcome *oc,
                               dlock__msg *m)
{
    for (;;) {
        struct timespec ts;
        dlock_err err;

        *out = choose_pipe(p, p->nidle == 0 && p->open < p->max);
        if (*out != NULL)
            return DLOCK_OK;
        if (p->nidle > 0) {
            *out = add_pipe(p, p->idle[--p->nidle]);
            if (*out == NULL)
                return dlock__msg_set(m, DLOCK_NOMEM, "allocating a pipeline");
            return DLOCK_OK;
        }
        if (p->open < p->max) {
            err = open_pipe(p, dial, arg, deadline_us, out, m);
            oc->dial_failed = err != DLOCK_OK;
            oc->opened = err == DLOCK_OK;
            return err;
        }
        ts = dlock__timespec_of(deadline_us);
        if (pthread_cond_timedwait(&p->freed, &p->mu, &ts) == ETIMEDOUT)
            return dlock__msg_set(m, DLOCK_TIMEOUT,
                                  "waiting for one of %d pooled "
                                  "connections",
                                  p->max);
    }
}

/* Counts a call out of pipe; returns pipe, unlinked, if it broke and this
 * was its last call, else NULL. */
static dlock__pipe *leave_pipe(dlock__pool *p, dlock__pipe *pipe)
{
    if (!dlock__pipe_leave(pipe))
        return NULL;
    for (int i = 0; i < p->npipes; i++) {
        if (p->pipes[i] == pipe) {
            unlink_pipe(p, i);
            p->open--;
            pthread_cond_broadcast(&p->freed);
            return pipe;
        }
    }
    return NULL;
}

dlock_err dlock__pool_call(dlock__pool *p, dlock__pool_dial dial, void *arg,
                           const char *cmd, size_t len, int64_t deadline_us,
                           redisReply **reply, dlock__pool_outcome *out,
                           dlock__msg *m)
{
    dlock__call call = {.cmd = cmd,
                        .len = len,
                        .deadline_us = deadline_us,
                        .m = m};
    dlock__pipe *pipe = NULL, *dead;
    dlock_err err;

    *reply = NULL;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&p->mu);
    err = pipe_for_call(p, dial, arg, deadline_us, &pipe, out, m);
    if (err == DLOCK_OK)
        dlock__pipe_join(pipe);
    pthread_mutex_unlock(&p->mu);
    if (err != DLOCK_OK)
        return err;
    dlock__pipe_run(pipe, &call);
    pthread_mutex_lock(&p->mu);
    dead = leave_pipe(p, pipe);
    pthread_mutex_unlock(&p->mu);
    dlock__pipe_free(dead);
    out->broken = call.broke;
    out->sent = call.sent;
    /* Only the command that opened the connection counts it fresh: one
     * that joined it found it open, as it would have found an idle one. */
    out->reused = call.reused || !out->opened;
    out->report = call.report;
    *reply = call.reply;
    return call.err;
}
