/*
 * wake_ceiling.h: what putting a blocking caller to sleep and waking it
 * again costs on this machine, with no network and no Redis: the part of
 * a blocking client's CPU per call that no coalescing of commands onto
 * connections can remove.
 *
 * A dlock_client serves threads that each call dlock_acquire and block
 * until their reply is in; however their commands are gathered onto
 * connections, each call ends with its thread asleep and woken again.
 * wake_ceiling_run measures that shape alone: T caller threads and one
 * answering thread (standing for a connection's reader in the best case
 * of auto-pipelining, where one thread answers everything that queued
 * while it was busy).  A caller pushes its request onto a lock-free
 * stack, wakes the answerer if it sleeps, and sleeps in its slot (a bit
 * of a futex word 32 callers share) until answered; the answerer takes
 * the whole stack at once, answers each request and wakes the callers
 * that sleep with one system call per word, as libdlock's pipe does.
 *
 * bench_wakeup prints the figures alone; bench_lock measures them in the
 * same run as its thread figures, to put a ceiling beside each of them
 * (bench_lock.c, "the blocking ceiling").
 *
 * Ownership: the result is the caller's.  Threads: one run at a time per
 * process (the process's CPU time is what a run reads).
 */
#ifndef DLOCK_BENCH_WAKE_CEILING_H
#define DLOCK_BENCH_WAKE_CEILING_H

#include <stdint.h>

#define WAKE_CEILING_THREADS_MAX 256

typedef struct wake_ceiling {
    int threads;    /* callers */
    long calls;     /* answered calls in all */
    long wakes;     /* futex wakes that found a sleeper */
    double seconds; /* from the first caller's start to the last's end */
    int64_t cpu_us; /* this process's CPU over the run, -1 if unknown */
} wake_ceiling;

/* Runs threads callers (1..WAKE_CEILING_THREADS_MAX) and an answerer for
 * duration_ms.  Returns 0, or -1 with errno when a thread could not be
 * started (the threads started are stopped and joined first). */
int wake_ceiling_run(int threads, int64_t duration_ms, wake_ceiling *out);

/* Calls per second, and the process's CPU microseconds per call (NAN
 * without calls or without a CPU reading). */
double wake_ceiling_calls_per_s(const wake_ceiling *w);
double wake_ceiling_cpu_us_per_call(const wake_ceiling *w);

#endif /* DLOCK_BENCH_WAKE_CEILING_H */
