/*
 * wake_ceiling.c: blocking callers and one answerer, on futexes (see
 * wake_ceiling.h).
 *
 * The callers push onto a Treiber stack that the answerer takes whole, so
 * the answerer pays one exchange for everything that queued while it was
 * busy, as a connection's reader pays one read for every reply that came
 * in; and nobody sleeps or wakes unless it has to (a caller answered
 * before it announced its sleep never sleeps), so the figure is the least
 * such a client can spend.  Like libdlock's pipe (src/lib/transport/
 * pipe.c), a caller sleeps in a slot, one bit of a futex word shared by
 * 32 callers, and the answerer wakes every caller of a batch with one
 * FUTEX_WAKE_BITSET per word; the wake never touches a request, which its
 * caller may have reused by then.
 */
#include "wake_ceiling.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench_clock.h"
#include "bench_cpu.h"

#define SLOT_BITS 32
#define WORDS (WAKE_CEILING_THREADS_MAX / SLOT_BITS)

typedef struct request {
    struct request *next;
    unsigned slot;    /* its caller's: bit slot % 32 of word slot / 32 */
    atomic_int state; /* 0 waiting, 1 asleep, 2 answered */
} request;

typedef struct shared {
    _Atomic(request *) queue; /* pushed by callers, taken whole */
    atomic_uint park[WORDS];  /* futex words: bumped by each wake */
    atomic_int answerer_asleep;
    atomic_int answerer_word;
    atomic_int stop;
    atomic_long calls;
    atomic_long wakes;
} shared;

static long futex(atomic_int *word, int op, int val)
{
    return syscall(SYS_futex, (int *)word, op, val, NULL, NULL, 0);
}

static void wake_answerer(shared *s)
{
    atomic_store(&s->answerer_word, 1);
    futex(&s->answerer_word, FUTEX_WAKE_PRIVATE, 1);
}

/* Answers every request on list and wakes the callers that sleep, one
 * system call per word; returns how many callers were woken. */
static long answer_all(shared *s, request *r)
{
    uint32_t mask[WORDS] = {0};
    long woken = 0;

    while (r != NULL) {
        request *next = r->next;
        const unsigned slot = r->slot;

        /* After the exchange the caller may return and reuse r. */
        if (atomic_exchange(&r->state, 2) == 1) {
            mask[slot / SLOT_BITS] |= 1u << (slot % SLOT_BITS);
            woken++;
        }
        r = next;
    }
    for (unsigned w = 0; w < WORDS; w++) {
        if (mask[w] != 0) {
            atomic_fetch_add(&s->park[w], 1);
            syscall(SYS_futex, &s->park[w], FUTEX_WAKE_BITSET_PRIVATE, INT_MAX,
                    NULL, NULL, mask[w]);
        }
    }
    return woken;
}

/* Sleeps in r's slot until r is answered. */
static void sleep_until_answered(shared *s, request *r)
{
    atomic_uint *word = &s->park[r->slot / SLOT_BITS];
    const uint32_t bit = 1u << (r->slot % SLOT_BITS);

    /* The word is read before the state: an answer after this check
     * bumps it after this read, so the futex refuses the old number or
     * the wake comes after the sleep began. */
    for (;;) {
        const unsigned seq = atomic_load(word);

        if (atomic_load(&r->state) != 1)
            return;
        syscall(SYS_futex, word, FUTEX_WAIT_BITSET_PRIVATE, seq, NULL, NULL,
                bit);
    }
}

typedef struct caller_arg {
    shared *s;
    unsigned slot;
} caller_arg;

static void *caller(void *arg)
{
    shared *s = ((caller_arg *)arg)->s;
    request r = {.slot = ((caller_arg *)arg)->slot};
    long calls = 0;

    while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
        request *head = atomic_load(&s->queue);
        int expected = 0;

        atomic_store(&r.state, 0);
        do
            r.next = head;
        while (!atomic_compare_exchange_weak(&s->queue, &head, &r));
        if (atomic_exchange(&s->answerer_asleep, 0)) {
            wake_answerer(s);
            atomic_fetch_add(&s->wakes, 1);
        }
        /* Sleep until answered: announce it, then wait on the word. */
        if (atomic_compare_exchange_strong(&r.state, &expected, 1))
            sleep_until_answered(s, &r);
        calls++;
    }
    atomic_fetch_add(&s->calls, calls);
    return NULL;
}

static void *answerer(void *arg)
{
    shared *s = arg;

    while (!atomic_load(&s->stop)) {
        request *r = atomic_exchange(&s->queue, NULL);

        if (r == NULL) {
            atomic_store(&s->answerer_word, 0);
            atomic_store(&s->answerer_asleep, 1);
            /* A push between the exchange and here finds answerer_asleep
             * set and wakes us; one before it is seen by this re-check. */
            if (atomic_load(&s->queue) == NULL && !atomic_load(&s->stop))
                futex(&s->answerer_word, FUTEX_WAIT_PRIVATE, 0);
            atomic_store(&s->answerer_asleep, 0);
            continue;
        }
        atomic_fetch_add(&s->wakes, answer_all(s, r));
    }
    /* Answer whatever is left so that every caller can see stop. */
    answer_all(s, atomic_exchange(&s->queue, NULL));
    return NULL;
}

/* Stops the run and joins n callers, answering for the answerer
 * meanwhile: a caller may have pushed after the answerer's last look. */
static void stop_callers(shared *s, pthread_t *t, int n)
{
    atomic_store(&s->stop, 1);
    for (int i = 0; i < n; i++) {
        while (pthread_tryjoin_np(t[i], NULL) == EBUSY) {
            wake_answerer(s);
            answer_all(s, atomic_exchange(&s->queue, NULL));
            usleep(100);
        }
    }
}

int wake_ceiling_run(int threads, int64_t duration_ms, wake_ceiling *out)
{
    static shared s; /* one run at a time (wake_ceiling.h) */
    static caller_arg args[WAKE_CEILING_THREADS_MAX];
    pthread_t t[WAKE_CEILING_THREADS_MAX], a;
    int64_t start, cpu0;
    int started = 0, err = 0;

    memset(out, 0, sizeof(*out));
    out->threads = threads;
    if (threads < 1 || threads > WAKE_CEILING_THREADS_MAX) {
        errno = EINVAL;
        return -1;
    }
    memset(&s, 0, sizeof(s));
    err = pthread_create(&a, NULL, answerer, &s);
    if (err != 0) {
        errno = err;
        return -1;
    }
    cpu0 = bench_cpu_self_us();
    start = bench_clock_ns();
    while (started < threads) {
        args[started] = (caller_arg){&s, (unsigned)started};
        err = pthread_create(&t[started], NULL, caller, &args[started]);
        if (err != 0)
            break;
        started++;
    }
    if (err == 0)
        usleep((useconds_t)duration_ms * 1000);
    stop_callers(&s, t, started);
    out->seconds = (double)(bench_clock_ns() - start) / 1e9;
    out->cpu_us = cpu0 < 0 ? -1 : bench_cpu_self_us() - cpu0;
    wake_answerer(&s);
    pthread_join(a, NULL);
    out->calls = atomic_load(&s.calls);
    out->wakes = atomic_load(&s.wakes);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return 0;
}

double wake_ceiling_calls_per_s(const wake_ceiling *w)
{
    return w->seconds > 0 ? (double)w->calls / w->seconds : NAN;
}

double wake_ceiling_cpu_us_per_call(const wake_ceiling *w)
{
    return w->calls > 0 && w->cpu_us >= 0
               ? (double)w->cpu_us / (double)w->calls
               : NAN;
}
