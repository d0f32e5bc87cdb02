/*
 * cli_role.c: a candidate campaigning in the background, and the command
 * run under its leadership (cli_role.h).
 *
 * Messages about a run name it the same way at start and end, "leader of
 * KEY (term T)" or "tick N of KEY (term T)", so that the two lines of one
 * run are found together in a log that many nodes write to.
 */
#include "cli_role.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_client.h"
#include "cli_env.h"
#include "cli_exit.h"
#include "cli_say.h"

/* How many event bytes are read per turn; the rest wait for the next. */
#define EVENTS_PER_TURN 64

/* On the candidate's thread: only wake the main thread. */
static void on_gained(dlock_leader *leader, uint64_t term, void *arg)
{
    (void)leader;
    (void)term;
    cli_wakeup_post(arg, CLI_WAKE_GAINED);
}

static void on_lost(dlock_leader *leader, uint64_t term, void *arg)
{
    (void)leader;
    (void)term;
    cli_wakeup_post(arg, CLI_WAKE_LOST);
}

/* Makes the candidate and starts its thread; signals are blocked. */
static int start_candidate(struct cli_role *r)
{
    dlock_leader_opts o;
    dlock_err err;

    dlock_leader_opts_init(&o);
    o.ttl_ms = r->a->ttl_ms;
    o.on_gained = on_gained;
    o.on_lost = on_lost;
    o.arg = &r->wakeup;
    err = dlock_leader_new(r->client, r->a->key, &o, &r->leader);
    if (err != DLOCK_OK) {
        cli_say("cannot campaign for %.64s: %s", r->a->key,
                dlock_client_errmsg(r->client));
        return cli_exit_of(err, CLI_EXIT_BUSY);
    }
    if (cli_wakeup_catch_signals(&r->wakeup) != 0) {
        cli_say("cannot catch signals: %s", strerror(errno));
        return CLI_EXIT_INTERNAL;
    }
    err = dlock_leader_start(r->leader);
    if (err != DLOCK_OK) {
        cli_say("cannot campaign for %.64s: %s", r->a->key,
                dlock_client_errmsg(r->client));
        return cli_exit_of(err, CLI_EXIT_BUSY);
    }
    r->started = 1;
    return CLI_EXIT_OK;
}

int cli_role_open(struct cli_role *r, const struct cli_args *a)
{
    sigset_t old;
    int code;

    memset(r, 0, sizeof(*r));
    r->a = a;
    if (cli_wakeup_open(&r->wakeup) != 0) {
        cli_say("cannot make the wakeup pipe: %s", strerror(errno));
        return CLI_EXIT_INTERNAL;
    }
    cli_wakeup_block_signals(&old);
    code = cli_client_open_for_lease(a, 0, &r->client);
    if (code == CLI_EXIT_OK)
        code = start_candidate(r);
    cli_wakeup_restore_mask(&old);
    return code;
}

/* Notes what one event byte means for the loop. */
static void note_event(struct cli_role *r, unsigned char event)
{
    const int sig = cli_wakeup_stop_signal(event);

    if (sig != 0)
        r->stop_signal = sig;
    else if (event == CLI_WAKE_GAINED)
        r->gained = 1;
}

int cli_role_wait(struct cli_role *r, int64_t timeout_ms)
{
    struct pollfd pfd = {.fd = r->wakeup.read_fd, .events = POLLIN};
    unsigned char events[EVENTS_PER_TURN];
    const int timeout = timeout_ms < 0           ? -1
                        : timeout_ms > INT32_MAX ? INT32_MAX
                                                 : (int)timeout_ms;
    int n;

    if (poll(&pfd, 1, timeout) < 0 && errno != EINTR) {
        cli_say("waiting for leadership of %.64s: poll: %s", r->a->key,
                strerror(errno));
        return -1;
    }
    n = cli_wakeup_drain(&r->wakeup, events, sizeof(events));
    if (n < 0) {
        cli_say("waiting for leadership of %.64s: read: %s", r->a->key,
                strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++)
        note_event(r, events[i]);
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The leadership one command runs under, for the supervisor: lost when
 * this node no longer leads, or leads in a later term (the command's
 * term ended in between, and another node may have led meanwhile). */
struct term_lease {
    dlock_leader *leader;
    uint64_t term;
};

static int term_lost(void *arg)
{
    const struct term_lease *t = arg;

    return !dlock_leader_is_leader(t->leader)
           || dlock_leader_term(t->leader) != t->term;
}

static int64_t term_valid_ms(void *arg)
{
    const struct term_lease *t = arg;

    return term_lost(arg) ? 0 : dlock_leader_valid_ms(t->leader);
}

/* "tick N of KEY (term T)" or "leader of KEY (term T)". */
static void run_label(char *buf, size_t len, const char *key, uint64_t term,
                      int64_t tick)
{
    if (tick >= 0)
        snprintf(buf, len, "tick %" PRId64 " of %.64s (term %" PRIu64 ")",
                 tick, key, term);
    else
        snprintf(buf, len, "leader of %.64s (term %" PRIu64 ")", key, term);
}

/* How the command ended, as a shell would put it. */
static void say_ended(const char *label, const struct cli_supervision *s,
                      const struct cli_outcome *out, int64_t took_ms)
{
    const int st = out->wait_status;

    if (WIFSIGNALED(st))
        cli_say("%s: '%s' (pid %d) was killed by signal %d after %" PRId64
                " ms",
                label, s->command, (int)s->child, WTERMSIG(st), took_ms);
    else
        cli_say("%s: '%s' (pid %d) exited %d after %" PRId64 " ms", label,
                s->command, (int)s->child, WEXITSTATUS(st), took_ms);
}

int cli_role_run_command(struct cli_role *r, uint64_t term, int64_t tick,
                         struct cli_outcome *out)
{
    const struct cli_args *a = r->a;
    struct term_lease tl = {r->leader, term};
    struct cli_lease lease = {
        .ttl_ms = a->ttl_ms,
        .valid_ms = term_valid_ms,
        .lost = term_lost,
        .arg = &tl,
    };
    struct cli_supervision s = {
        .wakeup = &r->wakeup,
        .lease = &lease,
        .grace_ms = a->grace_ms,
        .key = a->key,
        .command = a->command[0],
        .held = "leadership of",
        .stop_on_signal = 1,
    };
    char label[160], file[CLI_DEADLINE_PATH_MAX];
    struct cli_env_deadline deadline = {cli_valid_until_epoch_ms(
                                            term_valid_ms(&tl)),
                                        NULL};
    struct cli_env env;
    int64_t started;
    int code;

    memset(out, 0, sizeof(*out));
    run_label(label, sizeof(label), a->key, term, tick);
    if (cli_deadline_file_make(file) == 0)
        deadline.file = lease.valid_until_file = file;
    if (cli_env_build_leader(&env, environ, a->key, term, tick, &deadline)
        != 0) {
        cli_say("%s: cannot start '%s': out of memory", label, s.command);
        cli_deadline_file_remove(file);
        return CLI_EXIT_INTERNAL;
    }
    started = now_ms();
    s.started_label = a->quiet ? NULL : label;
    code = cli_supervise_command(&s, a->command, env.envp, out);
    cli_env_free(&env);
    cli_deadline_file_remove(file);
    if (code != 0)
        return code;
    if (!a->quiet || out->lost)
        say_ended(label, &s, out, now_ms() - started);
    if (out->stop_signal != 0)
        r->stop_signal = out->stop_signal;
    return CLI_EXIT_OK;
}

void cli_role_close(struct cli_role *r)
{
    if (r->started && dlock_leader_stop(r->leader) != DLOCK_OK)
        cli_say("warning: leadership of %.64s not resigned, another node "
                "takes over when its lease of %" PRId64 " ms runs out: %s",
                r->a->key, r->a->ttl_ms, dlock_client_errmsg(r->client));
    r->started = 0;
    dlock_leader_free(r->leader);
    r->leader = NULL;
    dlock_client_free(r->client);
    r->client = NULL;
    cli_wakeup_release_signals(&r->wakeup);
    cli_wakeup_close(&r->wakeup);
}
