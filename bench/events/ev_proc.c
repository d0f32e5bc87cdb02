/*
 * ev_proc.c: starting and stopping bench_events' service processes (see
 * ev_proc.h).
 *
 * The child sets its extra environment and opens its output file between
 * fork and execv; a failure there is reported on that output file and the
 * child exits with 127, which the parent sees as an early exit while it
 * waits for the ready line.  Polls are every 20 ms: start-up takes tens
 * of milliseconds, and the benchmark is not timing it.
 */
#include "ev_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EV_POLL_MS 20

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* In the child: environment, output, exec.  Never returns. */
static void child_exec(char *const argv[], const char *const env[],
                       const char *out_path)
{
    int fd = open(out_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    size_t i;

    if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0)
        _exit(127);
    for (i = 0; env[i] != NULL; i++) {
        if (putenv((char *)env[i]) != 0) {
            fprintf(stderr, "ev_proc: putenv %s failed\n", env[i]);
            _exit(127);
        }
    }
    execv(argv[0], argv);
    fprintf(stderr, "ev_proc: exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

int ev_proc_start(ev_proc *p, const char *name, char *const argv[],
                  const char *const env[], const char *log_path,
                  const char *out_path, char *err, size_t errlen)
{
    FILE *f = fopen(log_path, "w");
    pid_t pid;

    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s", name);
    snprintf(p->log, sizeof(p->log), "%s", log_path);
    if (f == NULL) {
        snprintf(err, errlen, "%s: cannot create %s: %s", name, log_path,
                 strerror(errno));
        return -1;
    }
    fclose(f);
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "%s: fork: %s", name, strerror(errno));
        return -1;
    }
    if (pid == 0)
        child_exec(argv, env, out_path);
    p->pid = pid;
    return 0;
}

/* Whether the child exited; reaps it then. */
static int exited(ev_proc *p)
{
    int status;

    return waitpid(p->pid, &status, WNOHANG) == p->pid;
}

/* The first line of path containing needle, into line.  Returns 1 when
 * found. */
static int log_has(const char *path, const char *needle, char *line,
                   size_t linelen)
{
    FILE *f = fopen(path, "r");
    char buf[4096];
    int found = 0;

    if (f == NULL)
        return 0;
    while (!found && fgets(buf, sizeof(buf), f) != NULL) {
        if (strstr(buf, needle) != NULL) {
            snprintf(line, linelen, "%s", buf);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

int ev_proc_wait_log(ev_proc *p, const char *needle, int timeout_ms,
                     char *line, size_t linelen, char *err, size_t errlen)
{
    int waited;

    for (waited = 0; waited <= timeout_ms; waited += EV_POLL_MS) {
        if (log_has(p->log, needle, line, linelen))
            return 0;
        if (exited(p)) {
            snprintf(err, errlen,
                     "%s (pid %ld) exited before logging %s; "
                     "see %s and its output file",
                     p->name, (long)p->pid, needle, p->log);
            p->pid = 0;
            return -1;
        }
        sleep_ms(EV_POLL_MS);
    }
    snprintf(err, errlen, "%s (pid %ld) did not log %s within %d ms; see %s",
             p->name, (long)p->pid, needle, timeout_ms, p->log);
    return -1;
}

int ev_proc_stop(ev_proc *p, int timeout_ms)
{
    int waited;

    if (p->pid <= 0)
        return 0;
    kill(p->pid, SIGTERM);
    for (waited = 0; waited < timeout_ms; waited += EV_POLL_MS) {
        if (exited(p)) {
            p->pid = 0;
            return 0;
        }
        sleep_ms(EV_POLL_MS);
    }
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
    p->pid = 0;
    return -1;
}
