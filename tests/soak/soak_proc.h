/*
 * soak_proc.h: the resources of a running process as the soak samples
 * them: resident memory (VmRSS in /proc/PID/status) and open file
 * descriptors (the entries of /proc/PID/fd).
 *
 * These two numbers are what a slow leak shows first in a long-running
 * service: memory that is never freed, and sockets or files that are
 * never closed.  Both are read from /proc, so the process needs no help
 * and the soak works the same on the plain and the sanitizer build.
 *
 * Threads: every function may be called from any thread; nothing is
 * cached.
 */
#ifndef SOAK_PROC_H
#define SOAK_PROC_H

#include <stdio.h>
#include <sys/types.h>

/* One reading of one process. */
typedef struct soak_proc_sample {
    long rss_kb; /* VmRSS in kB, -1 when it could not be read */
    int fds;     /* open descriptors, -1 when /proc/PID/fd is unreadable */
} soak_proc_sample;

/* Reads pid's VmRSS and descriptor count into out.  Returns 0 when both
 * were read, -1 when the process is gone or /proc refused (the failed
 * field is then -1). */
int soak_proc_read(pid_t pid, soak_proc_sample *out);

/*
 * Waits until pid's descriptor count has stayed the same for stable_ms
 * (read every 100 ms), at most timeout_ms in all, and then reads a sample
 * into out.  This is the "quiet point" reading: after the load's
 * connections are closed, the server closes its side of each on its next
 * event loop turn, so a reading taken at once could still count some.
 * Returns 0 when the count settled, 1 when it was still moving at the
 * deadline (out is the last reading), -1 when the process is gone.
 */
int soak_proc_settle(pid_t pid, int stable_ms, int timeout_ms,
                     soak_proc_sample *out);

/*
 * Writes one line per open descriptor of pid to out: "fd target", where
 * a TCP socket's target is "tcp LOCAL -> REMOTE" (from /proc/PID/net/tcp
 * and tcp6) and any other target is what readlink says ("socket:[N]",
 * "pipe:[N]", a path).  This is what tells which descriptor a count that
 * grew has gained: a second connection to PostgreSQL's port, say.
 * Returns 0, or -1 when the process is gone.
 */
int soak_proc_list_fds(pid_t pid, FILE *out);

#endif /* SOAK_PROC_H */
