/*
 * pipe.c: many threads' commands pipelined on one connection (pipe.h).
 *
 * Flat combining under the pipe's mutex: the lists, the two roles (writer,
 * reader) and every call's done flag change only with the mutex held; the
 * writer and the reader drop it for the socket work itself.
 *
 * Each call has its own state word (call->state), so a reply wakes exactly
 * the thread that waits for it, and only if it sleeps: a thread that has
 * not yet gone to sleep sees the word change and costs no system call.  A
 * thread woken with its reply returns without taking the mutex again (with
 * a condition variable it would queue on the mutex the reader holds: a
 * second wake-up per command, a convoy at 32 threads on 2 cores).
 *
 * Such a thread may return before its waker's wake-up has run (it saw the
 * state change first), and its call lived on its stack.  So a thread does
 * not sleep on its call: it sleeps in one of the pipe's parking slots, a
 * bit of a futex word (a sequence number each wake bumps), which lives as
 * long as the pipe, and the pipe outlives every waker, since a waker is
 * itself a call that has joined it.  A wake therefore never touches a call
 * after settling it.  A read that answers many calls wakes all their
 * threads in one system call (FUTEX_WAKE_BITSET with their slots' bits):
 * at 32 threads a read answers about 15 sleepers, and one call instead of
 * 15 cost the client 2 us less a pair and gave 7 % more pairs/s (session
 * 22, docs/benchmarks.md).  Calls take the slots in turn; two that share
 * one (more than PARK_SLOTS calls at once) are both woken and the wrong
 * one sleeps again, and a thread about to sleep when another slot of its
 * word is woken looks at its state again.
 *
 * Batches.  A thread that queues a command and finds nobody writing
 * writes it at once, so with few commands on a pipe none waits for
 * another.  With HOLD_FROM or more in flight the server has work in hand,
 * and the threads the last reads woke are on their way back with their
 * next commands: a caller then leaves its command queued, and the one that
 * fills a batch (hold_batch), or the last of those threads to come back,
 * writes them all in one write; a reader writes whatever is still queued
 * after each read, so a command held back waits for one read at most.
 * Before, every woken thread wrote its own command (1.04 commands a write
 * at 32 threads) and redis-server read them one by one (sessions 22 and
 * 23, docs/benchmarks.md).
 *
 * TLS: one SSL object must not be read and written at once, so on a TLS
 * connection the roles exclude each other: the writer sends what is queued
 * while nobody reads, and a reader that is done writes what queued up
 * meanwhile before it hands over.  Plain sockets take both at once.
 */
#include "transport/pipe.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"

/* What one write may carry; a single larger command gets a buffer of its
 * own size. */
#define WRITE_BATCH_MAX (64u * 1024)

/* Parking slots per pipe: as many as the calls the pool gathers on one
 * pipe before it opens another (PIPE_DEPTH, pool.c), a power of two.  A
 * slot is one bit of a futex word, so that one system call wakes every
 * thread a read answered (FUTEX_WAKE_BITSET). */
#define PARK_SLOTS 64
#define SLOT_BITS 32
#define PARK_WORDS (PARK_SLOTS / SLOT_BITS)

struct dlock__pipe {
    pthread_mutex_t mu;
    dlock__conn *conn;
    dlock__call *queued, *queued_tail; /* not yet written, in order */
    dlock__call *flight, *flight_tail; /* written, replies due in order */
    int load;          /* calls joined: the pool's, under its mutex */
    atomic_int broken; /* set under mu, read by the pool */
    int writing, reading;
    int duplex; /* 0 on TLS: reading and writing exclude each other */
    unsigned long long answered;
    int in_flight; /* calls on the flight list */
    int nqueued;   /* calls on the queued list */
    int due_back;  /* calls the last read answered, less those queued since */
    int due_older; /* the same for the read before it */
    char *wbuf;    /* the writer's, outside the mutex too */
    size_t wcap;
    unsigned next_park;           /* the next call's slot, under mu */
    atomic_uint park[PARK_WORDS]; /* futex words: bumped by each wake */
};

dlock__pipe *dlock__pipe_new(dlock__conn *conn)
{
    dlock__pipe *p = dlock__calloc(1, sizeof(*p));

    if (p == NULL || pthread_mutex_init(&p->mu, NULL) != 0) {
        dlock__free(p);
        dlock__conn_free(conn);
        return NULL;
    }
    p->conn = conn;
    p->duplex = !dlock__conn_tls(conn);
    return p;
}

void dlock__pipe_free(dlock__pipe *p)
{
    if (p == NULL)
        return;
    assert(p->load == 0);
    pthread_mutex_destroy(&p->mu);
    dlock__conn_free(p->conn);
    dlock__free(p->wbuf);
    dlock__free(p);
}

int dlock__pipe_load(const dlock__pipe *p)
{
    return p->load;
}

int dlock__pipe_broken(dlock__pipe *p)
{
    return atomic_load(&p->broken);
}

void dlock__pipe_join(dlock__pipe *p)
{
    p->load++;
}

int dlock__pipe_leave(dlock__pipe *p)
{
    assert(p->load > 0);
    return --p->load == 0 && atomic_load(&p->broken);
}

dlock__conn *dlock__pipe_detach(dlock__pipe *p)
{
    dlock__conn *conn = p->conn;

    assert(p->load == 0 && !p->broken);
    p->conn = NULL;
    dlock__pipe_free(p);
    return conn;
}

/* call->state: its thread runs (or is about to sleep), sleeps in its
 * parking slot, has its result, or was woken to take a role (read or
 * write). */
enum { CALL_RUNNING, CALL_SLEEPING, CALL_DONE, CALL_TURN };

/* Wakes every thread parked on word w in a slot of mask, after the state
 * changes that are the reason (the bump makes a thread about to park see
 * them, see wait_turn). */
static void wake_slots(dlock__pipe *p, unsigned w, uint32_t mask)
{
    atomic_fetch_add(&p->park[w], 1);
    syscall(SYS_futex, &p->park[w], FUTEX_WAKE_BITSET_PRIVATE, INT_MAX, NULL,
            NULL, mask);
}

/* A slot's word (its index in park) and its bit in that word. */
static unsigned slot_word(unsigned slot)
{
    return slot / SLOT_BITS;
}

static uint32_t slot_bit(unsigned slot)
{
    return 1u << (slot % SLOT_BITS);
}

static void wake_park(dlock__pipe *p, unsigned slot)
{
    wake_slots(p, slot_word(slot), slot_bit(slot));
}

/* Sleeps in slot bit of word while it still reads seq, until
 * deadline_us; returns 0 when it changed (or a spurious wake-up),
 * ETIMEDOUT at the deadline. */
static int sleep_on_word(atomic_uint *word, uint32_t bit, unsigned seq,
                         int64_t deadline_us)
{
    struct timespec ts = dlock__timespec_of(deadline_us);

    /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time. */
    if (syscall(SYS_futex, word, FUTEX_WAIT_BITSET_PRIVATE, seq, &ts, NULL,
                bit)
            != 0
        && errno == ETIMEDOUT)
        return ETIMEDOUT;
    return 0;
}

static int call_done(const dlock__call *c)
{
    return atomic_load(&c->state) == CALL_DONE;
}

/* Wakes c's thread to take a role, unless it is done or already told. */
static void give_turn(dlock__pipe *p, dlock__call *c)
{
    int s = atomic_load(&c->state);

    while (s == CALL_RUNNING || s == CALL_SLEEPING) {
        if (atomic_compare_exchange_weak(&c->state, &s, CALL_TURN)) {
            if (s == CALL_SLEEPING)
                wake_park(p, c->park);
            return;
        }
    }
}

static void append(dlock__call **head, dlock__call **tail, dlock__call *c)
{
    c->next = NULL;
    if (*tail != NULL)
        (*tail)->next = c;
    else
        *head = c;
    *tail = c;
}

/* Marks c done with err; returns c's parking slot if its thread sleeps
 * and must be woken, else -1.  From the store on, c may be gone (its
 * thread returned): only the slot may be used. */
static int settle(dlock__pipe *p, dlock__call *c, dlock_err err)
{
    unsigned park = c->park;

    c->err = err;
    c->reused = p->answered > 0;
    return atomic_exchange(&c->state, CALL_DONE) == CALL_SLEEPING ? (int)park
                                                                  : -1;
}

/* Marks c done with err and wakes its thread if it sleeps. */
static void finish(dlock__pipe *p, dlock__call *c, dlock_err err)
{
    int park = settle(p, c, err);

    if (park >= 0)
        wake_park(p, (unsigned)park);
}

/* The message of a call that failed with the pipe: the pipe's reason, or
 * for a call past its deadline, how long it waited. */
static void explain(const dlock__pipe *p, dlock__call *c, dlock_err err,
                    const dlock__msg *why, int in_flight)
{
    if (c->m == NULL)
        return;
    if (err == DLOCK_TIMEOUT) {
        dlock__msg_set(c->m, err,
                       "no reply from %s by the command's deadline (%d "
                       "commands were in flight on its connection)",
                       dlock__conn_desc(p->conn), in_flight);
        return;
    }
    memcpy(c->m->text, why->text, sizeof(c->m->text));
    dlock__msg_wrap(c->m, err, "%s with %d commands on one connection",
                    c->sent ? "sent" : "not sent", in_flight);
}

/*
 * Breaks p: every call in flight fails (DLOCK_TIMEOUT if its deadline has
 * passed or it is the victim whose wait ended it, else err), every queued
 * call fails unsent, and a thread blocked on the socket is woken by
 * shutting it down.
 */
static void break_pipe(dlock__pipe *p, dlock_err err, const dlock__msg *why,
                       const dlock__call *victim)
{
    int64_t now = dlock__now_us();
    const dlock__call *first_queued = p->queued;
    int n = 0, total;

    p->broken = 1;
    for (dlock__call *c = p->flight; c != NULL; c = c->next)
        n++;
    total = n;
    while (p->flight != NULL) {
        dlock__call *c = p->flight;
        dlock_err e = c == victim || c->deadline_us <= now ? DLOCK_TIMEOUT
                                                           : err;

        p->flight = c->next;
        c->broke = 1;
        c->report = n-- == total;
        explain(p, c, e, why, total);
        finish(p, c, e);
    }
    while (p->queued != NULL) {
        dlock__call *c = p->queued;

        p->queued = c->next;
        c->broke = 1;
        c->report = total == 0 && c == first_queued;
        explain(p, c, DLOCK_UNAVAILABLE, why, total);
        finish(p, c, DLOCK_UNAVAILABLE);
    }
    p->flight_tail = p->queued_tail = NULL;
    p->in_flight = p->nqueued = 0;
    if (p->reading || p->writing)
        shutdown(dlock__conn_fd(p->conn), SHUT_RDWR);
}

/* Gives up on a call past its deadline: a queued one leaves the queue
 * (nothing was sent), one in flight breaks the pipe. */
static void expire(dlock__pipe *p, dlock__call *call)
{
    dlock__msg why;
    dlock__call **link = &p->queued, *prev = NULL;

    while (*link != NULL && *link != call) {
        prev = *link;
        link = &(*link)->next;
    }
    if (*link == call) {
        *link = call->next;
        p->nqueued--;
        if (p->queued_tail == call)
            p->queued_tail = prev;
        dlock__msg_set(call->m, DLOCK_TIMEOUT,
                       "command for %s still queued at its deadline",
                       dlock__conn_desc(p->conn));
        finish(p, call, DLOCK_TIMEOUT);
        return;
    }
    dlock__msg_set(&why, DLOCK_UNAVAILABLE,
                   "connection to %s dropped: a command on it got no reply "
                   "by its deadline",
                   dlock__conn_desc(p->conn));
    break_pipe(p, DLOCK_UNAVAILABLE, &why, call);
}

/*
 * Moves the queued calls that fit into the write buffer to the flight
 * list and copies their bytes there; returns the byte count (0 when a call
 * failed instead: out of memory for a large command) and the earliest
 * deadline among them.
 */
static size_t take_batch(dlock__pipe *p, int64_t *deadline_us)
{
    size_t n = 0;

    if (p->wcap < p->queued->len || p->wbuf == NULL) {
        size_t want = p->queued->len > 4096 ? p->queued->len : 4096;
        char *grown = dlock__realloc(p->wbuf, want);

        if (grown == NULL) {
            dlock__call *c = p->queued;

            p->queued = c->next;
            p->nqueued--;
            if (p->queued == NULL)
                p->queued_tail = NULL;
            dlock__msg_set(c->m, DLOCK_NOMEM, "a write buffer for %s",
                           dlock__conn_desc(p->conn));
            finish(p, c, DLOCK_NOMEM);
            return 0;
        }
        p->wbuf = grown;
        p->wcap = want;
    }
    *deadline_us = p->queued->deadline_us;
    while (p->queued != NULL && n + p->queued->len <= p->wcap) {
        dlock__call *c = p->queued;

        p->queued = c->next;
        p->nqueued--;
        memcpy(p->wbuf + n, c->cmd, c->len);
        n += c->len;
        c->sent = 1;
        p->in_flight++;
        if (c->deadline_us < *deadline_us)
            *deadline_us = c->deadline_us;
        append(&p->flight, &p->flight_tail, c);
    }
    assert((p->queued == NULL) == (p->nqueued == 0));
    if (p->queued == NULL)
        p->queued_tail = NULL;
    else if (p->wcap < WRITE_BATCH_MAX) {
        char *grown = dlock__realloc(p->wbuf, WRITE_BATCH_MAX);

        /* Next batch fits more; without memory it stays as it is. */
        if (grown != NULL) {
            p->wbuf = grown;
            p->wcap = WRITE_BATCH_MAX;
        }
    }
    return n;
}

/* Whether what is queued may be written now, holding back aside: nobody
 * writes, and on TLS nobody reads either. */
static int writer_free(const dlock__pipe *p)
{
    return p->queued != NULL && !p->writing && !p->broken
           && (p->duplex || !p->reading);
}

/* The writer: sends everything queued, one write per batch. */
static void write_queued(dlock__pipe *p)
{
    p->writing = 1;
    while (p->queued != NULL && !p->broken) {
        int64_t deadline_us;
        size_t n = take_batch(p, &deadline_us);
        dlock__msg why;
        dlock_err err;

        if (n == 0)
            continue;
        pthread_mutex_unlock(&p->mu);
        err = dlock__conn_send(p->conn, p->wbuf, n, deadline_us, &why);
        pthread_mutex_lock(&p->mu);
        if (err != DLOCK_OK && !p->broken)
            break_pipe(p, err, &why, NULL);
    }
    p->writing = 0;
}

/* Replies one read hands out before it wakes their threads. */
#define DELIVER_MAX 16

/*
 * Takes the next reply off the socket, and every reply already complete
 * behind it, and gives them to the oldest calls in flight, in order;
 * returns 0 when the pipe broke instead.  The threads of those calls are
 * woken only once the mutex is dropped: a thread woken while the reader
 * holds it could take the reader's CPU and then sleep again on the mutex
 * for its next command (a second sleep and wake-up per command).  By then
 * those threads may have returned (they saw their state change): the
 * wakes go to the pipe's parking slots, never to the calls.
 */
static int deliver_some(dlock__pipe *p, const dlock__call *call)
{
    redisReply *r[DELIVER_MAX];
    uint32_t mask[PARK_WORDS] = {0}; /* the slots of threads to wake */
    int n = 0, sleepers = 0, i;
    dlock__msg why;
    dlock_err err;

    pthread_mutex_unlock(&p->mu);
    err = dlock__conn_recv(p->conn, call->deadline_us, &r[0], &why);
    if (err == DLOCK_OK)
        n = 1;
    while (err == DLOCK_OK && n < DELIVER_MAX) {
        err = dlock__conn_take(p->conn, &r[n], &why);
        if (err != DLOCK_OK || r[n] == NULL)
            break;
        n++;
    }
    pthread_mutex_lock(&p->mu);
    if (p->broken) {
        for (i = 0; i < n; i++)
            freeReplyObject(r[i]);
        return 0;
    }
    for (i = 0; i < n; i++) {
        dlock__call *c = p->flight;
        int slot;

        if (c == NULL) {
            for (; i < n; i++)
                freeReplyObject(r[i]);
            err = dlock__msg_set(&why, DLOCK_PROTOCOL,
                                 "a reply from %s that no command asked for",
                                 dlock__conn_desc(p->conn));
            break;
        }
        p->flight = c->next;
        p->in_flight--;
        if (p->flight == NULL)
            p->flight_tail = NULL;
        c->reply = r[i];
        p->answered++;
        slot = settle(p, c, DLOCK_OK);
        if (slot >= 0) {
            mask[slot_word((unsigned)slot)] |= slot_bit((unsigned)slot);
            sleepers++;
        }
    }
    if (err != DLOCK_OK)
        break_pipe(p, err == DLOCK_TIMEOUT ? DLOCK_UNAVAILABLE : err, &why,
                   err == DLOCK_TIMEOUT ? call : NULL);
    /* Their threads will queue their next commands (see hold_back); those
     * of the read before may still be on their way too. */
    p->due_older = p->due_back;
    p->due_back = n;
    if (sleepers > 0) {
        pthread_mutex_unlock(&p->mu);
        for (unsigned w = 0; w < PARK_WORDS; w++)
            if (mask[w] != 0)
                wake_slots(p, w, mask[w]);
        pthread_mutex_lock(&p->mu);
    }
    /* What was held back since the last read goes out now (on TLS the
     * reader writes only when it is done, in read_until). */
    if (writer_free(p))
        write_queued(p);
    return !p->broken;
}

/* The reader: hands out replies until call's has come, then writes what
 * queued meanwhile if the writer had to wait (TLS) and wakes the oldest
 * call in flight to read next. */
static void read_until(dlock__pipe *p, dlock__call *call)
{
    p->reading = 1;
    while (!call_done(call) && deliver_some(p, call))
        ;
    /* Replies already here go out now, sparing their threads a turn. */
    while (!p->broken && p->flight != NULL && dlock__conn_buffered(p->conn)
           && deliver_some(p, call))
        ;
    p->reading = 0;
    if (p->broken)
        return;
    if (writer_free(p))
        write_queued(p);
    if (p->flight != NULL && !p->reading)
        give_turn(p, p->flight);
}

/*
 * A caller writes what is queued.  While it wrote a later batch, a reader
 * may have handed it its own reply and, finding no call in flight then,
 * woken nobody: the batch just sent has no reader.  A caller whose call is
 * done therefore wakes the oldest call in flight to read, as a reader that
 * is done does.
 */
static void write_as_caller(dlock__pipe *p, const dlock__call *call)
{
    write_queued(p);
    if (call_done(call) && !p->broken && p->flight != NULL && !p->reading)
        give_turn(p, p->flight);
}

/* Commands in flight from which a caller holds its command back for the
 * threads the last reads woke (see the top of the file).  Measured on 2
 * cores (session 22, docs/benchmarks.md): at 32 threads bench_lock's
 * pairs/s +20 % (0.59 -> 0.76 of the limit, medians of four interleaved
 * pairs), client and server CPU a pair 28.0 + 24.9 -> 19.8 + 21.6 us, the
 * p99 2.54 -> 1.75 times the limit's; 8 threads as before.  Holding back
 * from 1 in flight on, 8 threads lost 30 %: a read answers only a few,
 * and the rest wait for a round trip. */
#define HOLD_FROM 8

/*
 * The most commands a held batch gathers: a third of the pipe's commands
 * (in flight and queued), so that about three batches go round at once,
 * one at the server, one coming back, one on its way, and each side has
 * work while the other runs.  The caller that queues the last of them
 * writes the batch, though more threads are due back.  With one batch of
 * everything a read answered (about 16 at 32 threads), the two sides took
 * turns: redis-server idle while the threads came back one by one, the
 * threads idle while it ran their batch (the CPUs 14 % idle at 32
 * threads, 15 % at 16).  Measured with a scratch driver on 2 cores,
 * medians of six interleaved runs (session 23, docs/benchmarks.md): a
 * fixed batch of 8 took 32 threads from 38.6k to 41.7k pairs/s; a third,
 * with the two reads counted (hold_back), from 37.6k to 47.8k (16
 * threads: 33.2k to 41.3k), the CPUs then idle 8 %.
 */
static int hold_batch(const dlock__pipe *p)
{
    const int third = (p->in_flight + p->nqueued) / 3;

    return third > 2 ? third : 2;
}

/* Whether a caller should leave its command queued: a reader is at work,
 * the server has HOLD_FROM commands in hand, threads the last two reads
 * woke have yet to queue theirs, and the batch is not yet full.  Counting
 * the read before the last as well matters: a read that came before the
 * last one's threads were all back made the rest write one by one (most
 * writes at 32 threads were of one command). */
static int hold_back(const dlock__pipe *p)
{
    return p->duplex && p->reading && p->due_back + p->due_older > 0
           && p->in_flight >= HOLD_FROM && p->nqueued < hold_batch(p);
}

static int may_write(const dlock__pipe *p)
{
    return writer_free(p) && !hold_back(p);
}

static int may_read(const dlock__pipe *p, const dlock__call *call)
{
    return call->sent && !p->reading && !p->broken
           && (p->duplex || !p->writing);
}

/*
 * Drops the mutex and sleeps until the call is done, its thread is given a
 * role, or its deadline passes (then it gives up).  Returns 1 with the
 * mutex held again, or 0 when the call is done and the mutex not taken.
 */
static int wait_turn(dlock__pipe *p, dlock__call *call)
{
    int s = CALL_RUNNING;

    atomic_store(&call->state, CALL_RUNNING);
    pthread_mutex_unlock(&p->mu);
    if (atomic_compare_exchange_strong(&call->state, &s, CALL_SLEEPING)) {
        atomic_uint *word = &p->park[slot_word(call->park)];
        const uint32_t bit = slot_bit(call->park);
        int timed_out = 0;

        /* The sequence number is read before the state: a waker that
         * changes the state after this check bumps it after this read, so
         * the futex refuses to sleep on the old number or the wake comes
         * after the sleep began. */
        while (!timed_out) {
            unsigned seq = atomic_load(word);

            if (atomic_load(&call->state) != CALL_SLEEPING)
                break;
            timed_out = sleep_on_word(word, bit, seq, call->deadline_us);
        }
        s = CALL_SLEEPING;
        if (timed_out
            && atomic_compare_exchange_strong(&call->state, &s,
                                              CALL_RUNNING)) {
            pthread_mutex_lock(&p->mu);
            if (!call_done(call))
                expire(p, call);
            return 1;
        }
    }
    if (call_done(call))
        return 0;
    pthread_mutex_lock(&p->mu);
    if (!call_done(call))
        atomic_store(&call->state, CALL_RUNNING);
    return 1;
}

static void call_start(dlock__call *call)
{
    call->reply = NULL;
    call->err = DLOCK_OK;
    call->sent = call->reused = call->report = call->broke = 0;
    atomic_init(&call->state, CALL_RUNNING);
    call->park = 0;
    call->next = NULL;
}

void dlock__pipe_run(dlock__pipe *p, dlock__call *call)
{
    call_start(call);
    pthread_mutex_lock(&p->mu);
    if (p->broken) {
        dlock__msg_set(call->m, DLOCK_UNAVAILABLE,
                       "not sent: the connection to %s had failed",
                       dlock__conn_desc(p->conn));
        /* It broke between the pool's choice and now: go elsewhere. */
        call->broke = 1;
        finish(p, call, DLOCK_UNAVAILABLE);
    } else {
        call->park = p->next_park++ % PARK_SLOTS;
        append(&p->queued, &p->queued_tail, call);
        p->nqueued++;
        if (p->due_older > 0)
            p->due_older--;
        else if (p->due_back > 0)
            p->due_back--;
    }
    while (!call_done(call))
        if (may_write(p))
            write_as_caller(p, call);
        else if (may_read(p, call))
            read_until(p, call);
        else if (!wait_turn(p, call))
            return;
    pthread_mutex_unlock(&p->mu);
}
