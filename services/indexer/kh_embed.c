/*
 * kh_embed.c: running EMBED_COMMAND (see kh_embed.h).
 *
 * posix_spawn with two pipes, not popen: popen gives one direction only,
 * and a command that prints before it has read all of its input would
 * deadlock a writer that first writes everything.  So one poll(2) loop
 * writes stdin and reads stdout together until the command closes its
 * output, bounded by a deadline after which the child (our own, by pid)
 * is killed.  Both pipe ends we keep are close-on-exec and non-blocking;
 * SIGPIPE is ignored by the indexer, so a command that exits without
 * reading gives EPIPE here, which is reported, not fatal.
 */
#include "kh_embed.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

typedef struct child_io {
    pid_t pid;
    int in_fd;  /* the command's stdin, ours to write; -1 when closed */
    int out_fd; /* the command's stdout, ours to read; -1 at EOF */
    const char *text;
    size_t len;
    size_t written;
    char *out;
    size_t out_len;
} child_io;

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* Spawns sh -c command with pipes on stdin and stdout, in a process
 * group of its own: a command past its timeout is killed with all it
 * started (a pipeline, a script's children), not just the shell, so
 * nothing is left running with the pipes or the indexer's stderr. */
static int spawn_child(const char *command, child_io *io, char *err,
                       size_t errlen)
{
    int in[2], out[2], rc;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    char *const argv[] = {"sh", "-c", (char *)command, NULL};

    if (pipe2(in, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    if (pipe2(out, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        close(in[0]);
        close(in[1]);
        return -1;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    rc = posix_spawn(&io->pid, "/bin/sh", &fa, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (rc != 0) {
        snprintf(err, errlen, "EMBED_COMMAND: cannot run /bin/sh: %s",
                 strerror(rc));
        close(in[1]);
        close(out[0]);
        return -1;
    }
    io->in_fd = in[1];
    io->out_fd = out[0];
    fcntl(io->in_fd, F_SETFL, O_NONBLOCK);
    fcntl(io->out_fd, F_SETFL, O_NONBLOCK);
    if (io->len == 0)
        close_fd(&io->in_fd);
    return 0;
}

/* Writes what the pipe takes; closes stdin when all is written or the
 * command stopped reading. */
static void feed(child_io *io)
{
    const ssize_t n = write(io->in_fd, io->text + io->written,
                            io->len - io->written);

    if (n > 0)
        io->written += (size_t)n;
    if ((n < 0 && errno != EAGAIN && errno != EINTR) || io->written == io->len)
        close_fd(&io->in_fd);
}

/* Reads what is there; returns -1 when the output passes the cap. */
static int drain(child_io *io)
{
    char buf[8192];
    const ssize_t n = read(io->out_fd, buf, sizeof(buf));
    char *p;

    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        close_fd(&io->out_fd);
        return 0;
    }
    if (n < 0)
        return 0;
    if (io->out_len + (size_t)n > KH_EMBED_OUTPUT_MAX)
        return -1;
    p = realloc(io->out, io->out_len + (size_t)n + 1);
    if (p == NULL)
        return -1;
    memcpy(p + io->out_len, buf, (size_t)n);
    io->out = p;
    io->out_len += (size_t)n;
    io->out[io->out_len] = '\0';
    return 0;
}

/* The poll loop; returns 0 at EOF of stdout, -1 on timeout or overflow. */
static int exchange(child_io *io, int timeout_ms, char *err, size_t errlen)
{
    const long long deadline = now_ms() + timeout_ms;
    struct pollfd p[2];
    int n;

    while (io->out_fd >= 0) {
        const long long left = deadline - now_ms();

        if (left <= 0) {
            snprintf(err, errlen, "EMBED_COMMAND: no result within %d ms",
                     timeout_ms);
            return -1;
        }
        n = 0;
        p[n].fd = io->out_fd;
        p[n++].events = POLLIN;
        if (io->in_fd >= 0) {
            p[n].fd = io->in_fd;
            p[n++].events = POLLOUT;
        }
        if (poll(p, (nfds_t)n, (int)left) < 0 && errno != EINTR) {
            snprintf(err, errlen, "poll: %s", strerror(errno));
            return -1;
        }
        if (n == 2 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP)))
            feed(io);
        if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && drain(io) != 0) {
            snprintf(err, errlen, "EMBED_COMMAND: output over %d bytes",
                     KH_EMBED_OUTPUT_MAX);
            return -1;
        }
    }
    return 0;
}

/* Reaps the child (killing its whole process group first when
 * kill_it); returns its status. */
static int reap(pid_t pid, int kill_it)
{
    int status = 0;

    if (kill_it)
        kill(-pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

int kh_embed_run(const char *command, const char *text, size_t len,
                 int timeout_ms, float **vec, size_t *dim, char *err,
                 size_t errlen)
{
    child_io io = {0, -1, -1, text, len, 0, NULL, 0};
    int rc, status;

    *vec = NULL;
    *dim = 0;
    if (spawn_child(command, &io, err, errlen) != 0)
        return -1;
    rc = exchange(&io, timeout_ms, err, errlen);
    close_fd(&io.in_fd);
    close_fd(&io.out_fd);
    status = reap(io.pid, rc != 0);
    if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        snprintf(err, errlen, "EMBED_COMMAND: exited with %s %d",
                 WIFEXITED(status) ? "status" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        rc = -1;
    }
    if (rc == 0) {
        rc = kh_embed_parse(io.out != NULL ? io.out : "", io.out_len, vec, dim,
                            err, errlen);
    }
    free(io.out);
    return rc;
}

static int is_separator(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',';
}

/* Skips separators and one pair of brackets' ends. */
static size_t skip_separators(const char *s, size_t i, size_t len)
{
    while (i < len && (is_separator(s[i]) || s[i] == '[' || s[i] == ']'))
        i++;
    return i;
}

static int parse_fail(float *v, char *err, size_t errlen, const char *why,
                      const char *at, size_t n)
{
    free(v);
    snprintf(err, errlen, "EMBED_COMMAND: %s near \"%.*s\"", why,
             (int)(n > 32 ? 32 : n), at);
    return -1;
}

int kh_embed_parse(const char *out, size_t len, float **vec, size_t *dim,
                   char *err, size_t errlen)
{
    float *v = NULL;
    size_t n = 0, cap = 0, i = skip_separators(out, 0, len);

    *vec = NULL;
    *dim = 0;
    if (memchr(out, '\0', len) != NULL)
        return parse_fail(NULL, err, errlen, "NUL byte in the output", "", 0);
    while (i < len) {
        char *end = NULL;
        const float f = strtof(out + i, &end);

        if (end == out + i || !isfinite(f)
            || (end < out + len && !is_separator(*end) && *end != ']')) {
            return parse_fail(v, err, errlen, "not a number", out + i,
                              len - i);
        }
        if (n == cap) {
            float *p = realloc(v, (cap = cap ? cap * 2 : 64) * sizeof(*v));

            if (p == NULL)
                return parse_fail(v, err, errlen, "out of memory", "", 0);
            v = p;
        }
        v[n++] = f;
        i = skip_separators(out, (size_t)(end - out), len);
    }
    if (n == 0)
        return parse_fail(v, err, errlen, "no number printed", out, len);
    *vec = v;
    *dim = n;
    return 0;
}

char *kh_embed_pg_array(const float *vec, size_t dim)
{
    const size_t cap = dim * 18 + 3;
    char *s = malloc(cap);
    size_t len = 0, i;

    if (s == NULL)
        return NULL;
    s[len++] = '{';
    for (i = 0; i < dim; i++) {
        len += (size_t)snprintf(s + len, cap - len, "%s%.9g", i ? "," : "",
                                (double)vec[i]);
    }
    s[len++] = '}';
    s[len] = '\0';
    return s;
}
