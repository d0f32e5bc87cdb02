/*
 * bench_wakeup: the most calls per second that threads blocking for their
 * own answers can make on this machine, with no network and no Redis.
 *
 * Issue 17 asks libdlock's 8- and 32-thread throughput for 0.9 of
 * redis-benchmark's pipelined limit (`-c 1 -P N`: one thread writes N
 * commands in one system call and reads N replies in one).  A dlock_client
 * serves threads that each call dlock_acquire and block until their reply
 * is in; however their commands are coalesced onto connections, each call
 * ends with its thread put to sleep and woken again.  This program
 * measures the ceiling of that shape alone: T caller threads and one
 * server thread (standing for the connection's reader, the best case of
 * auto-pipelining, where one thread answers everything that queued while
 * it was busy).  A caller pushes its request onto a lock-free stack, wakes
 * the server if it sleeps, and sleeps on its own futex word until
 * answered; the server takes the whole stack at once, answers each
 * request and wakes the callers that sleep.  Nothing is sent anywhere, so
 * the figure is an upper bound for any client with this API on this
 * machine: with the network and redis-server sharing the same CPUs the
 * real ceiling is lower.
 *
 *   bench_wakeup [--threads N]... [--duration-ms MS]
 *
 * Prints one JSON line per thread count, {"kind":"ceiling","threads":N,
 * "calls_per_s":..,"pairs_per_s":..,"wakes_per_call":..}, and a line for
 * people on stderr.  A pair is two calls (acquire and release).
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define THREADS_MAX 256

typedef struct request {
    struct request *next;
    atomic_int state; /* 0 waiting, 1 asleep, 2 answered */
} request;

typedef struct bench {
    _Atomic(request *) queue; /* pushed by callers, taken whole */
    atomic_int server_asleep;
    atomic_int server_word;
    atomic_int stop;
    atomic_long calls;
    atomic_long wakes;
} bench;

static long futex(atomic_int *word, int op, int val)
{
    return syscall(SYS_futex, (int *)word, op, val, NULL, NULL, 0);
}

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *caller(void *arg)
{
    bench *b = arg;
    request r;
    long calls = 0;

    while (!atomic_load_explicit(&b->stop, memory_order_relaxed)) {
        request *head = atomic_load(&b->queue);

        atomic_store(&r.state, 0);
        do
            r.next = head;
        while (!atomic_compare_exchange_weak(&b->queue, &head, &r));
        if (atomic_exchange(&b->server_asleep, 0)) {
            atomic_store(&b->server_word, 1);
            futex(&b->server_word, FUTEX_WAKE_PRIVATE, 1);
            atomic_fetch_add(&b->wakes, 1);
        }
        /* Sleep until answered: announce it, then wait on the word. */
        {
            int expected = 0;

            if (atomic_compare_exchange_strong(&r.state, &expected, 1))
                while (atomic_load(&r.state) == 1)
                    futex(&r.state, FUTEX_WAIT_PRIVATE, 1);
        }
        calls++;
    }
    atomic_fetch_add(&b->calls, calls);
    return NULL;
}

static void *server(void *arg)
{
    bench *b = arg;

    while (!atomic_load(&b->stop)) {
        request *r = atomic_exchange(&b->queue, NULL);

        if (r == NULL) {
            atomic_store(&b->server_word, 0);
            atomic_store(&b->server_asleep, 1);
            /* A push between the exchange and here finds server_asleep set
             * and wakes us; one before it is seen by this re-check. */
            if (atomic_load(&b->queue) == NULL && !atomic_load(&b->stop))
                futex(&b->server_word, FUTEX_WAIT_PRIVATE, 0);
            atomic_store(&b->server_asleep, 0);
            continue;
        }
        while (r != NULL) {
            request *next = r->next;

            /* After the store the caller may return and reuse r. */
            if (atomic_exchange(&r->state, 2) == 1) {
                futex(&r->state, FUTEX_WAKE_PRIVATE, 1);
                atomic_fetch_add(&b->wakes, 1);
            }
            r = next;
        }
    }
    /* Answer whatever is left so that every caller can see stop. */
    for (request *r = atomic_exchange(&b->queue, NULL); r != NULL;) {
        request *next = r->next;

        if (atomic_exchange(&r->state, 2) == 1)
            futex(&r->state, FUTEX_WAKE_PRIVATE, 1);
        r = next;
    }
    return NULL;
}

static int run(int threads, int64_t duration_ms)
{
    pthread_t t[THREADS_MAX], s;
    bench b;
    int64_t start, took;
    double per_s;

    memset(&b, 0, sizeof(b));
    if (pthread_create(&s, NULL, server, &b) != 0) {
        fprintf(stderr, "bench_wakeup: pthread_create: %s\n", strerror(errno));
        return -1;
    }
    start = now_ns();
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], NULL, caller, &b) != 0) {
            fprintf(stderr, "bench_wakeup: pthread_create: %s\n",
                    strerror(errno));
            exit(1);
        }
    usleep((useconds_t)duration_ms * 1000);
    atomic_store(&b.stop, 1);
    /* Callers finish their last call; the server keeps answering until
     * each has, so it stops last. */
    for (int i = 0; i < threads; i++) {
        while (pthread_tryjoin_np(t[i], NULL) == EBUSY) {
            atomic_store(&b.server_word, 1);
            futex(&b.server_word, FUTEX_WAKE_PRIVATE, 1);
            for (request *r = atomic_exchange(&b.queue, NULL); r != NULL;) {
                request *next = r->next;

                if (atomic_exchange(&r->state, 2) == 1)
                    futex(&r->state, FUTEX_WAKE_PRIVATE, 1);
                r = next;
            }
            usleep(100);
        }
    }
    took = now_ns() - start;
    atomic_store(&b.server_word, 1);
    futex(&b.server_word, FUTEX_WAKE_PRIVATE, 1);
    pthread_join(s, NULL);
    per_s = (double)atomic_load(&b.calls) * 1e9 / (double)took;
    printf("{\"kind\":\"ceiling\",\"threads\":%d,\"calls_per_s\":%.0f,"
           "\"pairs_per_s\":%.0f,\"wakes_per_call\":%.2f}\n",
           threads, per_s, per_s / 2,
           (double)atomic_load(&b.wakes)
               / (double)(atomic_load(&b.calls) ? atomic_load(&b.calls) : 1));
    fprintf(stderr,
            "bench_wakeup: %d blocking threads, no network: %.0f calls/s, "
            "%.0f pairs/s at most\n",
            threads, per_s, per_s / 2);
    return 0;
}

int main(int argc, char **argv)
{
    int threads[16], n = 0;
    int64_t duration_ms = 2000;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc && n < 16) {
            threads[n] = atoi(argv[++i]);
            if (threads[n] < 1 || threads[n] > THREADS_MAX) {
                fprintf(stderr, "bench_wakeup: --threads 1..%d\n",
                        THREADS_MAX);
                return 2;
            }
            n++;
        } else if (strcmp(argv[i], "--duration-ms") == 0 && i + 1 < argc) {
            duration_ms = atoll(argv[++i]);
            if (duration_ms < 100 || duration_ms > 600000) {
                fprintf(stderr, "bench_wakeup: --duration-ms 100..600000\n");
                return 2;
            }
        } else {
            fprintf(
                stderr,
                "usage: bench_wakeup [--threads N]... [--duration-ms MS]\n");
            return 2;
        }
    }
    if (n == 0) {
        threads[n++] = 8;
        threads[n++] = 32;
    }
    for (int i = 0; i < n; i++)
        if (run(threads[i], duration_ms) != 0)
            return 1;
    return 0;
}
