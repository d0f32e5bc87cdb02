/*
 * cli_supervise.c: the loop around the running command (cli_supervise.h).
 *
 * The loop is: reap if the command has ended, else sleep in poll(2) on the
 * wakeup pipe until an event or the SIGKILL deadline, act on what woke it,
 * and start over.  Checking waitpid(WNOHANG) first on every turn means a
 * SIGCHLD byte that arrived before the loop, or was dropped, is never
 * needed: the pipe only ends the sleep.  Deadlines use CLOCK_MONOTONIC, so
 * a clock step cannot cut the grace period short or stretch it.
 */
#include "cli_supervise.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "cli_say.h"

/* How many event bytes are handled per wake-up; the rest wait a turn. */
#define EVENTS_PER_TURN 64

struct loop {
    const struct cli_supervision *s;
    struct cli_outcome *out;
    int64_t kill_at_us;            /* SIGKILL deadline; 0 when none */
    int armed;                     /* a deadline was set (STOPPING) */
};

static int64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* 1 when the command has ended (status in out), 0 while it runs, -1 on
 * an error. */
static int command_ended(struct loop *l)
{
    pid_t got;

    do {
        got = waitpid(l->s->child, &l->out->wait_status, WNOHANG);
    } while (got < 0 && errno == EINTR);
    if (got < 0) {
        cli_say("waiting for '%s' (pid %d): %s", l->s->command,
                (int)l->s->child, strerror(errno));
        return -1;
    }
    return got == l->s->child;
}

static void send_kill(struct loop *l)
{
    cli_say("'%s' (pid %d) is still running %lld ms after it was told to "
            "stop: sending SIGKILL", l->s->command, (int)l->s->child,
            (long long)l->s->grace_ms);
    kill(l->s->child, SIGKILL);
    l->kill_at_us = 0;
}

/* Sets the SIGKILL deadline, unless one is set or was reached. */
static void arm_kill(struct loop *l)
{
    if (l->kill_at_us != 0 || l->armed)
        return;
    l->armed = 1;
    l->kill_at_us = now_us() + l->s->grace_ms * 1000;
    if (l->s->grace_ms == 0)
        send_kill(l);
}

/* The lock is gone: stop the command before another holder's work
 * overlaps with it. */
static void stop_lost_command(struct loop *l)
{
    if (l->out->lost)
        return;
    l->out->lost = 1;
    cli_say("%s %.64s was lost: stopping '%s' (pid %d) with SIGTERM, "
            "SIGKILL after %lld ms", l->s->held != NULL ? l->s->held : "lock",
            l->s->key, l->s->command, (int)l->s->child,
            (long long)l->s->grace_ms);
    kill(l->s->child, SIGTERM);
    arm_kill(l);
}

/* SIGINT, SIGTERM or SIGHUP reached dlock: pass it on, unless a terminal
 * sent it to the command too; with stop_on_signal, also stop. */
static void handle_stop_signal(struct loop *l, unsigned char event, int sig)
{
    l->out->stop_signal = sig;
    if ((event & CLI_WAKE_TERMINAL) == 0)
        kill(l->s->child, sig);
    if (!l->s->stop_on_signal)
        return;
    if (!l->armed)
        cli_say("got signal %d: stopping '%s' (pid %d), SIGKILL after "
                "%lld ms", sig, l->s->command, (int)l->s->child,
                (long long)l->s->grace_ms);
    arm_kill(l);
}

/* Other bytes (SIGCHLD, CLI_WAKE_GAINED) only end the sleep. */
static void handle_event(struct loop *l, unsigned char event)
{
    const int sig = cli_wakeup_stop_signal(event);

    if (event == CLI_WAKE_LOST)
        stop_lost_command(l);
    else if (sig != 0)
        handle_stop_signal(l, event, sig);
}

/* Milliseconds poll may sleep: until the SIGKILL deadline, or forever. */
static int poll_timeout_ms(const struct loop *l)
{
    int64_t left;

    if (l->kill_at_us == 0)
        return -1;
    left = l->kill_at_us - now_us();
    if (left <= 0)
        return 0;
    /* Round up, so we never wake just before the deadline and spin. */
    return (int)((left + 999) / 1000);
}

/* Sleeps until an event or the deadline and acts on it; -1 on error. */
static int wait_turn(struct loop *l)
{
    struct pollfd pfd = {.fd = l->s->wakeup->read_fd, .events = POLLIN};
    unsigned char events[EVENTS_PER_TURN];
    int n;

    if (poll(&pfd, 1, poll_timeout_ms(l)) < 0 && errno != EINTR) {
        cli_say("waiting for '%s': poll: %s", l->s->command,
                strerror(errno));
        return -1;
    }
    n = cli_wakeup_drain(l->s->wakeup, events, sizeof(events));
    if (n < 0) {
        cli_say("waiting for '%s': read: %s", l->s->command,
                strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++)
        handle_event(l, events[i]);
    if (l->kill_at_us != 0 && now_us() >= l->kill_at_us)
        send_kill(l);
    return 0;
}

/* After a failure of our own: the command must not outlive supervision. */
static void kill_and_reap(const struct cli_supervision *s)
{
    kill(s->child, SIGKILL);
    while (waitpid(s->child, NULL, 0) < 0 && errno == EINTR)
        continue;
}

int cli_supervise(const struct cli_supervision *s, struct cli_outcome *out)
{
    struct loop l = {.s = s, .out = out, .kill_at_us = 0, .armed = 0};
    int ended;

    memset(out, 0, sizeof(*out));
    for (;;) {
        ended = command_ended(&l);
        if (ended != 0)
            break;
        if (wait_turn(&l) != 0) {
            kill_and_reap(s);
            return -1;
        }
    }
    /* waitpid fails only when the pid is not our child (ECHILD): there is
     * then nothing left to kill or reap. */
    return ended < 0 ? -1 : 0;
}
