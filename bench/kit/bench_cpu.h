/*
 * bench_cpu.h: what the CPUs did during a run: this process's CPU time, a
 * server's (from /proc), the whole machine's, how loaded the machine
 * was (load average, CPU pressure), and how long a thread or a server
 * waited in run queues for a CPU (schedstat).
 *
 * On a loaded, shared 2-core machine a latency alone means little; the CPU
 * a phase cost and the pressure it ran under say whether other work
 * competed with it.  All functions are thread-safe and return -1 (or NAN,
 * or "?") when the kernel does not give the reading.
 */
#ifndef DLOCK_BENCH_CPU_H
#define DLOCK_BENCH_CPU_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* User + system CPU time of this process (all threads), microseconds. */
int64_t bench_cpu_self_us(void);

/* User + system CPU time of process pid from /proc, microseconds; -1 when
 * it cannot be read (no pid, the process is gone). */
int64_t bench_cpu_pid_us(pid_t pid);

/* The kernel's CPU pressure, /proc/pressure/cpu "some avg10": the share
 * of the last 10 s in which some runnable task waited for a CPU, in
 * percent; NAN without PSI.  On a shared machine it says whether other
 * work competed with the run, which is why every run line carries it. */
double bench_cpu_pressure(void);

/* How long the calling thread has waited in a run queue (runnable, not
 * running) since it started, from /proc/thread-self/schedstat,
 * microseconds; -1 without schedstat.  Read at a thread's start and end,
 * it says how much of a phase the thread spent waiting for a CPU: the
 * scheduling stalls that a latency's maximum may hold (docs/benchmarks.md,
 * "Session 16: the fair hand-off's outliers"). */
int64_t bench_cpu_thread_runq_us(void);

/* The same, summed over every thread of process pid (a server's);
 * -1 when it cannot be read. */
int64_t bench_cpu_pid_runq_us(pid_t pid);

/* /proc/loadavg as one line into buf ("?" when unreadable); returns buf. */
const char *bench_loadavg(char *buf, size_t len);

/* CPU time all CPUs of the machine spent busy (everything but idle and
 * iowait in /proc/stat), microseconds since boot; -1 when unreadable.
 * Read before and after a phase, it says how much CPU the phase cost the
 * machine as a whole, servers and other work included. */
int64_t bench_cpu_machine_us(void);

#endif /* DLOCK_BENCH_CPU_H */
