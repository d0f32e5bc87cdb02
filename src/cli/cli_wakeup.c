/*
 * cli_wakeup.c: the self-pipe and the signal handlers (cli_wakeup.h).
 *
 * A signal handler has no argument through which to pass the pipe, so the
 * write end is kept in the one piece of global mutable state in the tool,
 * `signal_fd`, a volatile sig_atomic_t that the handler only reads.  It is
 * set before the handlers are installed and reset after they are removed,
 * so a handler never sees a half-written value or a closed descriptor.
 * Everything else is passed down from main.
 */
#include "cli_wakeup.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static const int caught_signals[CLI_WAKE_SIGNALS] = {
    SIGINT,
    SIGTERM,
    SIGHUP,
    SIGCHLD,
};

/* The pipe's write end for the signal handlers, or -1.  See the top. */
static volatile sig_atomic_t signal_fd = -1;

int cli_wakeup_open(struct cli_wakeup *w)
{
    int fds[2];

    memset(w, 0, sizeof(*w));
    w->read_fd = w->write_fd = -1;
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0)
        return -1;
    w->read_fd = fds[0];
    w->write_fd = fds[1];
    return 0;
}

void cli_wakeup_close(struct cli_wakeup *w)
{
    if (w->read_fd >= 0)
        close(w->read_fd);
    if (w->write_fd >= 0)
        close(w->write_fd);
    w->read_fd = w->write_fd = -1;
}

/* One byte to fd, keeping errno for the interrupted code.  A failed
 * write is dropped: see the top of cli_wakeup.h. */
static void post_byte(int fd, unsigned char event)
{
    const int saved = errno;
    ssize_t n;

    do {
        n = write(fd, &event, 1);
    } while (n < 0 && errno == EINTR);
    errno = saved;
}

void cli_wakeup_post(const struct cli_wakeup *w, unsigned char event)
{
    post_byte(w->write_fd, event);
}

int cli_wakeup_drain(const struct cli_wakeup *w, unsigned char *events,
                     size_t max)
{
    ssize_t n;

    do {
        n = read(w->read_fd, events, max);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    return (int)n;
}

/* Whether a signal came from a terminal to the whole process group. */
static int sent_by_terminal(int sig, const siginfo_t *info)
{
    return sig != SIGCHLD && sig != SIGTERM && info != NULL
           && info->si_code == SI_KERNEL;
}

static void on_signal(int sig, siginfo_t *info, void *context)
{
    const int fd = signal_fd;

    (void)context;
    if (fd < 0)
        return;
    post_byte(fd, (unsigned char)(sent_by_terminal(sig, info)
                                      ? sig | CLI_WAKE_TERMINAL
                                      : sig));
}

int cli_wakeup_stop_signal(unsigned char event)
{
    const int sig = event & ~CLI_WAKE_TERMINAL;

    return sig == SIGINT || sig == SIGTERM || sig == SIGHUP ? sig : 0;
}

/* Whether sig was ignored before we touched it, so must stay ignored.
 * SIGCHLD is ours to catch whatever it was: we need to reap. */
static int keeps_ignored(int sig, const struct sigaction *before)
{
    return sig != SIGCHLD && before->sa_handler == SIG_IGN;
}

int cli_wakeup_catch_signals(struct cli_wakeup *w)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_signal;
    /* SA_RESTART: the library's threads and our blocking calls carry on
     * through a signal; SA_NOCLDSTOP: a stopped child is not an end. */
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < CLI_WAKE_SIGNALS; i++)
        if (sigaction(caught_signals[i], NULL, &w->saved[i]) != 0)
            return -1;
    signal_fd = w->write_fd;
    w->caught = 1;
    for (size_t i = 0; i < CLI_WAKE_SIGNALS; i++) {
        if (keeps_ignored(caught_signals[i], &w->saved[i]))
            continue;
        if (sigaction(caught_signals[i], &sa, NULL) != 0) {
            const int saved_errno = errno;

            cli_wakeup_release_signals(w);
            errno = saved_errno;
            return -1;
        }
    }
    return 0;
}

void cli_wakeup_release_signals(struct cli_wakeup *w)
{
    if (!w->caught)
        return;
    for (size_t i = 0; i < CLI_WAKE_SIGNALS; i++)
        sigaction(caught_signals[i], &w->saved[i], NULL);
    w->caught = 0;
    signal_fd = -1;
}

void cli_wakeup_block_signals(sigset_t *old)
{
    sigset_t set;

    sigemptyset(&set);
    for (size_t i = 0; i < CLI_WAKE_SIGNALS; i++)
        sigaddset(&set, caught_signals[i]);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

void cli_wakeup_restore_mask(const sigset_t *old)
{
    pthread_sigmask(SIG_SETMASK, old, NULL);
}
