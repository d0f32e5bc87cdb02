/*
 * bench_tool.c: the benchmarks' subprocess runner (see bench_tool.h).
 *
 * The child's stdout and stderr share one pipe, read with poll() against
 * the deadline; output beyond OUTPUT_MAX is read and dropped, so a chatty
 * tool can never block on a full pipe.
 */
#include "bench_tool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_clock.h"

extern char **environ;

#define OUTPUT_MAX (1 << 20)

/* Reads fd to EOF into a new NUL-terminated buffer, until deadline.
 * Returns the buffer (possibly partial on timeout; *timed_out set), or
 * NULL when out of memory. */
static char *read_all(int fd, int64_t deadline, int *timed_out)
{
    char *buf = malloc(OUTPUT_MAX + 1);
    size_t n = 0;

    *timed_out = 0;
    while (buf != NULL) {
        const int64_t left_ms = (deadline - bench_clock_ns()) / 1000000;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (left_ms <= 0 || poll(&pfd, 1, (int)left_ms) == 0) {
            *timed_out = 1;
            break;
        }
        char chunk[4096];
        const ssize_t r = read(fd, chunk, sizeof(chunk));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        const size_t take = n + (size_t)r > OUTPUT_MAX ? OUTPUT_MAX - n
                                                       : (size_t)r;
        memcpy(buf + n, chunk, take);
        n += take;
    }
    if (buf != NULL)
        buf[n] = '\0';
    return buf;
}

/* Spawns argv with stdout and stderr on a pipe; returns the pid and the
 * read end in *fd, or -1. */
static pid_t spawn_captured(char **argv, int *fd)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY,
                                     0);
    posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, p[1], STDERR_FILENO);
    pid_t pid;
    const int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (rc != 0) {
        close(p[0]);
        errno = rc;
        return -1;
    }
    *fd = p[0];
    return pid;
}

/* Reaps pid (killing it first if asked) and returns its CPU time in
 * microseconds and its exit status. */
static int64_t reap_with_cpu(pid_t pid, int kill_first, int *status)
{
    struct rusage ru;

    if (kill_first)
        kill(pid, SIGKILL);
    memset(&ru, 0, sizeof(ru));
    while (wait4(pid, status, 0, &ru) < 0 && errno == EINTR)
        continue;
    return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000
           + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

int bench_tool_run(char **argv, int timeout_ms, char **text, int *status,
                   int64_t *cpu_us, char *err, size_t errlen)
{
    int fd;
    int timed_out;

    *text = NULL;
    *status = 0;
    *cpu_us = 0;
    const pid_t pid = spawn_captured(argv, &fd);
    if (pid < 0) {
        snprintf(err, errlen, "cannot run %s: %s", argv[0], strerror(errno));
        return -1;
    }
    char *out = read_all(fd, bench_clock_ns() + (int64_t)timeout_ms * 1000000,
                         &timed_out);
    close(fd);
    *cpu_us = reap_with_cpu(pid, timed_out || out == NULL, status);
    if (out == NULL) {
        snprintf(err, errlen, "out of memory reading %s's output", argv[0]);
        return -1;
    }
    if (timed_out) {
        snprintf(err, errlen, "%s did not finish in %d ms", argv[0],
                 timeout_ms);
        free(out);
        return -1;
    }
    *text = out;
    return 0;
}
