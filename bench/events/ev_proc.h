/*
 * ev_proc.h: the service processes bench_events starts itself (reviewd
 * with and without its relay, kh-indexer), each stopped by its pid.
 *
 * A service is started with fork and execv, its environment the
 * benchmark's own plus the NAME=VALUE pairs given, stdout and stderr
 * appended to a file of its own.  It is ready when its JSON log (a file
 * the service writes, named in that environment) holds a line with a given
 * message; the wait is bounded, and fails at once if the process exits.
 * Stopping sends SIGTERM, waits a bounded time, then SIGKILL, and reaps
 * the child, so no process outlives the benchmark.
 *
 * Ownership: an ev_proc is the caller's; every string is copied.
 * Threads: one thread (the main one) starts and stops processes.
 */
#ifndef EV_PROC_H
#define EV_PROC_H

#include <stddef.h>
#include <sys/types.h>

typedef struct ev_proc {
    pid_t pid; /* 0 while not running */
    char name[32];
    char log[512]; /* the service's JSON log */
} ev_proc;

/*
 * Starts argv[0] (a path) with argv, the extra environment env (NULL-
 * terminated NAME=VALUE strings), stdout and stderr appended to out_path.
 * log_path is the service's own log, read by ev_proc_wait_log; it is
 * truncated first.  Returns 0, or -1 with err set.
 */
int ev_proc_start(ev_proc *p, const char *name, char *const argv[],
                  const char *const env[], const char *log_path,
                  const char *out_path, char *err, size_t errlen);

/*
 * Waits up to timeout_ms for a line of the log containing needle, and
 * copies the first such line into line.  Returns 0, or -1 with err set
 * (timed out, or the process exited).
 */
int ev_proc_wait_log(ev_proc *p, const char *needle, int timeout_ms,
                     char *line, size_t linelen, char *err, size_t errlen);

/* SIGTERM, up to timeout_ms, then SIGKILL; reaps it.  Returns 0 when it
 * exited on SIGTERM, -1 when it had to be killed.  Not running: 0. */
int ev_proc_stop(ev_proc *p, int timeout_ms);

#endif /* EV_PROC_H */
