/*
 * cli_guard.c: the guardian process (cli_guard.h).
 *
 * Its loop: poll the pipe until a message or the deadline; at the
 * deadline, SIGKILL the group and forget the deadline (dlock may still
 * send "done" or a later one); on EOF, SIGKILL the group and exit.  The
 * deadline is kept on CLOCK_BOOTTIME and the poll timeout recomputed each
 * turn, so a host suspend never stretches it by more than one turn.
 */
#include "cli_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MSG_GROUP = 1, MSG_DEADLINE = 2, MSG_DONE = 3 };

struct guard_msg {
    int64_t kind;
    int64_t value;
};

/* The guardian's pipe, after it has closed everything else. */
#define GUARD_FD 3

int64_t cli_boot_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Signals back to their defaults, none blocked, a group of its own, and
 * no descriptor but the pipe (and stderr, for nothing but a last word). */
static void guardian_setup(int fd)
{
    struct sigaction dfl, ign;
    sigset_t none;

    memset(&dfl, 0, sizeof(dfl));
    memset(&ign, 0, sizeof(ign));
    dfl.sa_handler = SIG_DFL;
    ign.sa_handler = SIG_IGN;
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction(sig, &dfl, NULL);
    sigaction(SIGINT, &ign, NULL);
    sigaction(SIGHUP, &ign, NULL);
    sigaction(SIGPIPE, &ign, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    setpgid(0, 0);
    if (fd != GUARD_FD) {
        dup2(fd, GUARD_FD);
        close(fd);
    }
    {
        int null = open("/dev/null", O_RDWR);

        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            if (null > 2)
                close(null);
        }
    }
    if (syscall(SYS_close_range, GUARD_FD + 1, ~0U, 0) != 0)
        for (int i = GUARD_FD + 1; i < 4096; i++)
            close(i);
}

/* Milliseconds poll may sleep until deadline (-1: none), rounded up. */
static int guardian_timeout(int64_t deadline)
{
    int64_t left;

    if (deadline == 0)
        return -1;
    left = deadline - cli_boot_ns();
    if (left <= 0)
        return 0;
    left = (left + 999999) / 1000000;
    return left > 3600000 ? 3600000 : (int)left;
}

static void guardian_kill(pid_t pgid)
{
    if (pgid > 0)
        kill(-pgid, SIGKILL);
}

static __attribute__((noreturn)) void guardian_main(int fd)
{
    pid_t pgid = 0;
    int64_t deadline = 0;

    guardian_setup(fd);
    for (;;) {
        struct pollfd p = {.fd = GUARD_FD, .events = POLLIN};
        struct guard_msg m;
        ssize_t n;

        if (poll(&p, 1, guardian_timeout(deadline)) == 0) {
            if (deadline != 0 && cli_boot_ns() >= deadline) {
                guardian_kill(pgid);
                deadline = 0;
            }
            continue;
        }
        n = read(GUARD_FD, &m, sizeof(m));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n != (ssize_t)sizeof(m)) {
            guardian_kill(pgid); /* dlock is gone */
            _exit(0);
        }
        if (m.kind == MSG_GROUP)
            pgid = (pid_t)m.value;
        else if (m.kind == MSG_DEADLINE)
            deadline = m.value;
        else if (m.kind == MSG_DONE)
            _exit(0);
    }
}

int cli_guard_start(struct cli_guard *g)
{
    int fds[2];

    g->pid = 0;
    g->fd = -1;
    g->deadline_ns = 0;
    /* A socket pair rather than a pipe: send(MSG_NOSIGNAL) cannot raise
     * SIGPIPE should the guardian be gone, and records keep their
     * bounds. */
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
        return -1;
    g->pid = fork();
    if (g->pid < 0) {
        const int saved = errno;

        close(fds[0]);
        close(fds[1]);
        g->pid = 0;
        errno = saved;
        return -1;
    }
    if (g->pid == 0) {
        close(fds[1]);
        guardian_main(fds[0]);
    }
    close(fds[0]);
    g->fd = fds[1];
    return 0;
}

static void send_msg(struct cli_guard *g, int64_t kind, int64_t value)
{
    const struct guard_msg m = {kind, value};
    ssize_t n;

    if (g->fd < 0)
        return;
    /* Never blocks dlock: a stopped guardian whose buffer is full misses
     * a later deadline and keeps an earlier one, which errs on the safe
     * side. */
    do {
        n = send(g->fd, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
}

void cli_guard_watch(struct cli_guard *g, pid_t pgid)
{
    send_msg(g, MSG_GROUP, pgid);
}

void cli_guard_deadline(struct cli_guard *g, int64_t boot_ns)
{
    if (boot_ns == g->deadline_ns)
        return;
    g->deadline_ns = boot_ns;
    send_msg(g, MSG_DEADLINE, boot_ns);
}

void cli_guard_stop(struct cli_guard *g)
{
    send_msg(g, MSG_DONE, 0);
    if (g->fd >= 0)
        close(g->fd);
    g->fd = -1;
    if (g->pid > 0)
        while (waitpid(g->pid, NULL, 0) < 0 && errno == EINTR)
            continue;
    g->pid = 0;
}
