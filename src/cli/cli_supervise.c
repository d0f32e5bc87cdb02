/*
 * cli_supervise.c: the loop around the running command (cli_supervise.h).
 *
 * Each turn: reap whatever ended (the command, and orphans handed to us
 * as subreaper); return once the command and everything it left are gone;
 * look at the lease (lost? how long valid?) and move the deadlines; act
 * on a deadline that has passed; then sleep in poll(2) on the wakeup pipe
 * and a CLOCK_BOOTTIME timerfd set to the next deadline.  Checking the
 * lease and waitpid on every turn means a pipe byte that was dropped or
 * came before the loop is never needed: bytes and the timer only end the
 * sleep.
 *
 * States: RUNNING (no stop yet: stop_at and kill_by follow the lease) ->
 * STOPPING (lost, ran out, told to stop, or the command ended and left
 * processes: SIGTERM sent to all, SIGKILL due at kill_at <= kill_by) ->
 * KILLED (SIGKILL sent; sent again every KILL_REPEAT_MS while anything
 * is left, for processes forked meanwhile) -> ended, when the command has
 * been reaped and nothing of it is left.
 */
#include "cli_supervise.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_exit.h"
#include "cli_guard.h"
#include "cli_say.h"
#include "cli_spawn.h"

/* How many event bytes are handled per wake-up; the rest wait a turn. */
#define EVENTS_PER_TURN 64
/* SIGKILL again this often while something is left after SIGKILL. */
#define KILL_REPEAT_MS 50
/* The kill margin before valid_until: 2% of the TTL + 10 ms, capped. */
#define KILL_MARGIN_MAX_MS 250
/* The lease is sampled at least every ttl/6, within these bounds. */
#define SAMPLE_MIN_MS 20
#define SAMPLE_MAX_MS 5000
/* valid_until moves in the file only by more than sampling noise. */
#define FILE_SLACK_MS 5
/* How deep the descendant walk goes, against a loop in /proc. */
#define TREE_DEPTH_MAX 32

#define NS_PER_MS INT64_C(1000000)

struct loop {
    const struct cli_supervision *s;
    struct cli_outcome *out;
    struct cli_guard guard;
    int timer_fd;
    int child_done;
    int stopping;        /* SIGTERM sent */
    int killed;          /* SIGKILL sent */
    int64_t kill_at;     /* boot ns of SIGKILL, 0: none */
    int64_t kill_by;     /* lease's SIGKILL deadline, 0: none */
    int64_t stop_at;     /* lease's SIGTERM deadline, 0: none */
    int64_t next_sample; /* boot ns of the next lease look */
    int64_t file_ms;     /* what the deadline file says */
};

int64_t cli_valid_until_epoch_ms(int64_t valid_ms)
{
    struct timespec ts;

    if (valid_ms == INT64_MAX)
        return -1;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + valid_ms;
}

/* ---- the processes ------------------------------------------------------ */

/*
 * Sends sig to every process descended from parent but skip, through
 * /proc's children lists; returns how many it found.  A process that left
 * the command's group (setsid) is still found while its parent lives,
 * and once that dies it is ours, as subreaper.
 */
static int signal_descendants(pid_t parent, pid_t skip, int sig, int depth)
{
    char path[64];
    long pid;
    int n = 0;
    FILE *f;

    if (depth > TREE_DEPTH_MAX)
        return 0;
    snprintf(path, sizeof(path), "/proc/%ld/task/%ld/children", (long)parent,
             (long)parent);
    f = fopen(path, "re");
    if (f == NULL)
        return 0;
    while (fscanf(f, "%ld", &pid) == 1) {
        if (pid == skip)
            continue;
        n++;
        if (sig != 0)
            kill((pid_t)pid, sig);
        n += signal_descendants((pid_t)pid, skip, sig, depth + 1);
    }
    fclose(f);
    return n;
}

/* Sends sig to the command's group and every descendant of dlock but the
 * guardian; returns 1 if any process was there to get it. */
static int signal_all(struct loop *l, int sig)
{
    const int in_group = kill(-l->s->child, sig) == 0;

    return signal_descendants(getpid(), l->guard.pid, sig, 0) > 0 || in_group;
}

static int anything_left(struct loop *l)
{
    return signal_all(l, 0);
}

/* Reaps every child that ended: the command (its status kept), orphans
 * of its group, and the guardian if it died.  -1 on an error. */
static int reap_all(struct loop *l)
{
    for (;;) {
        int status;
        pid_t got = waitpid(-1, &status, WNOHANG);

        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno == ECHILD)
            return 0;
        if (got < 0) {
            cli_say("waiting for '%s' (pid %d): %s", l->s->command,
                    (int)l->s->child, strerror(errno));
            return -1;
        }
        if (got == 0)
            return 0;
        if (got == l->s->child) {
            l->out->wait_status = status;
            l->child_done = 1;
        } else if (got == l->guard.pid) {
            l->guard.pid = 0;
        }
    }
}

/* ---- stopping ----------------------------------------------------------- */

static void send_kill(struct loop *l, int64_t now)
{
    if (!l->killed)
        cli_say("'%s' (pid %d) or its process group is still running after "
                "it was told to stop: sending SIGKILL",
                l->s->command, (int)l->s->child);
    l->killed = 1;
    signal_all(l, SIGKILL);
    l->kill_at = now + KILL_REPEAT_MS * NS_PER_MS;
}

/* STOPPING: SIGTERM sent; SIGKILL after --grace, never after kill_by. */
static void arm_kill(struct loop *l)
{
    const int64_t now = cli_boot_ns();

    if (l->stopping)
        return;
    l->stopping = 1;
    l->kill_at = now + l->s->grace_ms * NS_PER_MS;
    if (l->kill_by != 0 && l->kill_at > l->kill_by)
        l->kill_at = l->kill_by;
    if (l->kill_at <= now)
        send_kill(l, now);
}

static void write_deadline_file(struct loop *l, int64_t epoch_ms)
{
    const char *path = l->s->lease->valid_until_file;
    char tmp[4096];
    FILE *f;

    if (path == NULL)
        return;
    l->file_ms = epoch_ms;
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "we");
    if (f == NULL) {
        cli_say("warning: cannot write %s: %s", tmp, strerror(errno));
        return;
    }
    fprintf(f, "%" PRId64 "\n", epoch_ms);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        cli_say("warning: cannot update %s: %s", path, strerror(errno));
}

/* The lock is gone or about to be: stop the group before another holder's
 * work can start. */
static void stop_lost(struct loop *l, const char *why)
{
    const char *what = l->s->held != NULL ? l->s->held : "lock";
    int64_t left;

    if (l->out->lost)
        return;
    l->out->lost = 1;
    l->stop_at = 0;
    write_deadline_file(l, 0);
    if (l->stopping) {
        /* Already stopping: only the deadline may come closer. */
        if (l->kill_by != 0 && l->kill_at > l->kill_by)
            l->kill_at = l->kill_by;
        return;
    }
    left = l->kill_by != 0 ? (l->kill_by - cli_boot_ns()) / NS_PER_MS
                           : l->s->grace_ms;
    if (left > l->s->grace_ms)
        left = l->s->grace_ms;
    cli_say("%s %.64s %s: stopping '%s' (pid %d) and its process group "
            "with SIGTERM, SIGKILL within %" PRId64 " ms",
            what, l->s->key, why, l->s->command, (int)l->s->child,
            left > 0 ? left : 0);
    signal_all(l, SIGTERM);
    arm_kill(l);
}

/* ---- the lease ---------------------------------------------------------- */

static int64_t kill_margin_ms(int64_t ttl_ms)
{
    const int64_t m = ttl_ms / 50 + 10;

    return m > KILL_MARGIN_MAX_MS ? KILL_MARGIN_MAX_MS : m;
}

static int64_t stop_window_ms(const struct loop *l)
{
    const int64_t quarter = l->s->lease->ttl_ms / 4;

    return l->s->grace_ms < quarter ? l->s->grace_ms : quarter;
}

static int64_t sample_every_ms(int64_t ttl_ms)
{
    const int64_t every = ttl_ms / 6;

    return every < SAMPLE_MIN_MS   ? SAMPLE_MIN_MS
           : every > SAMPLE_MAX_MS ? SAMPLE_MAX_MS
                                   : every;
}

/* Looks at the lease and moves the deadlines; stops when it is over. */
static void sample_lease(struct loop *l)
{
    const struct cli_lease *lease = l->s->lease;
    const int64_t now = cli_boot_ns();
    int64_t valid, epoch;

    if (lease == NULL || l->out->lost)
        return;
    l->next_sample = now + sample_every_ms(lease->ttl_ms) * NS_PER_MS;
    if (lease->lost(lease->arg)) {
        stop_lost(l, "was lost");
        return;
    }
    valid = lease->valid_ms(lease->arg);
    if (valid == INT64_MAX) {
        l->kill_by = l->stop_at = 0;
        cli_guard_deadline(&l->guard, 0);
        return;
    }
    l->kill_by = now + (valid - kill_margin_ms(lease->ttl_ms)) * NS_PER_MS;
    l->stop_at = l->kill_by - stop_window_ms(l) * NS_PER_MS;
    cli_guard_deadline(&l->guard, l->kill_by);
    epoch = cli_valid_until_epoch_ms(valid);
    if (valid > 0
        && (epoch > l->file_ms + FILE_SLACK_MS
            || epoch < l->file_ms - FILE_SLACK_MS))
        write_deadline_file(l, epoch);
    if (valid <= 0)
        stop_lost(l, "ran out (its lease could not be renewed)");
    else if (now >= l->stop_at)
        stop_lost(l, "was not renewed in time (its lease ends in less "
                     "than the time to stop the command)");
    else if (l->stopping && l->kill_at > l->kill_by)
        l->kill_at = l->kill_by;
}

/* ---- events ------------------------------------------------------------- */

/* SIGINT, SIGTERM or SIGHUP reached dlock: pass it on to the command's
 * group (a terminal sent it to dlock's group, not the command's); with
 * stop_on_signal, also stop. */
static void handle_stop_signal(struct loop *l, int sig)
{
    l->out->stop_signal = sig;
    kill(-l->s->child, sig);
    if (!l->s->stop_on_signal || l->stopping)
        return;
    cli_say("got signal %d: stopping '%s' (pid %d), SIGKILL after %" PRId64
            " ms",
            sig, l->s->command, (int)l->s->child, l->s->grace_ms);
    arm_kill(l);
}

/* Other bytes (SIGCHLD, CLI_WAKE_GAINED) only end the sleep. */
static void handle_event(struct loop *l, unsigned char event)
{
    const int sig = cli_wakeup_stop_signal(event);

    if (event == CLI_WAKE_LOST && l->s->lease != NULL)
        stop_lost(l, "was lost");
    else if (sig != 0)
        handle_stop_signal(l, sig);
}

/* The command ended by itself: what it left running goes too, since the
 * lock is released once this returns. */
static void stop_leftovers(struct loop *l)
{
    if (l->stopping || !anything_left(l))
        return;
    cli_say("'%s' (pid %d) ended and left processes running: stopping them "
            "with SIGTERM, SIGKILL after %" PRId64 " ms",
            l->s->command, (int)l->s->child, l->s->grace_ms);
    signal_all(l, SIGTERM);
    arm_kill(l);
}

/*
 * The command ended of a SIGKILL this loop did not send, after the
 * deadline the guardian was given: the guardian killed its group because
 * the lease was running out and this loop, not scheduled in time (dlock
 * paused, or starved of CPU), had not stopped it.  That is the lease
 * running out as in sample_lease, and is reported the same way (the lock
 * counts as lost, dlock exits 76), not as the command's own SIGKILL.
 */
static void note_guardian_kill(struct loop *l)
{
    const int st = l->out->wait_status;
    const char *what = l->s->held != NULL ? l->s->held : "lock";

    if (l->s->lease == NULL || l->out->lost || l->killed || l->kill_by == 0
        || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL
        || cli_boot_ns() < l->kill_by)
        return;
    l->out->lost = 1;
    write_deadline_file(l, 0);
    cli_say("%s %.64s ran out while '%s' (pid %d) ran (its lease could not "
            "be renewed, and dlock was not scheduled in time to stop it): "
            "the guardian killed its process group at the lease's deadline",
            what, l->s->key, l->s->command, (int)l->s->child);
}

/* The next moment the loop must look, on CLOCK_BOOTTIME; 0: none. */
static int64_t next_wake(const struct loop *l)
{
    int64_t at = 0;
    const int64_t cands[] = {
        l->stopping ? l->kill_at : 0,
        l->out->lost ? 0 : l->stop_at,
        l->s->lease != NULL && !l->out->lost ? l->next_sample : 0,
    };

    for (size_t i = 0; i < sizeof(cands) / sizeof(*cands); i++)
        if (cands[i] != 0 && (at == 0 || cands[i] < at))
            at = cands[i];
    return at;
}

static int arm_timer(struct loop *l, int64_t at)
{
    struct itimerspec its;

    memset(&its, 0, sizeof(its));
    if (at != 0) {
        /* 0 would disarm: a deadline already passed fires at once. */
        if (at <= 0)
            at = 1;
        its.it_value.tv_sec = at / 1000000000;
        its.it_value.tv_nsec = at % 1000000000;
    }
    return timerfd_settime(l->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* Sleeps until an event or the next deadline and acts on the events. */
static int wait_turn(struct loop *l)
{
    struct pollfd pfd[2] = {
        {.fd = l->s->wakeup->read_fd, .events = POLLIN},
        {.fd = l->timer_fd, .events = POLLIN},
    };
    unsigned char events[EVENTS_PER_TURN];
    uint64_t expirations;
    int n;

    if (arm_timer(l, next_wake(l)) != 0
        || (poll(pfd, 2, -1) < 0 && errno != EINTR)) {
        cli_say("waiting for '%s': %s", l->s->command, strerror(errno));
        return -1;
    }
    if (read(l->timer_fd, &expirations, sizeof(expirations)) < 0
        && errno != EAGAIN && errno != EINTR) {
        cli_say("waiting for '%s': timer: %s", l->s->command, strerror(errno));
        return -1;
    }
    n = cli_wakeup_drain(l->s->wakeup, events, sizeof(events));
    if (n < 0) {
        cli_say("waiting for '%s': read: %s", l->s->command, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++)
        handle_event(l, events[i]);
    return 0;
}

/* One turn; 1 when everything has ended, 0 to go on, -1 on an error. */
static int turn(struct loop *l)
{
    int64_t now;

    if (reap_all(l) != 0)
        return -1;
    if (l->child_done && !anything_left(l)) {
        note_guardian_kill(l);
        return 1;
    }
    sample_lease(l);
    if (l->child_done)
        stop_leftovers(l);
    now = cli_boot_ns();
    if (l->stopping && l->kill_at != 0 && now >= l->kill_at)
        send_kill(l, now);
    return wait_turn(l);
}

/* After a failure of our own: nothing of the command may outlive
 * supervision. */
static void kill_and_reap(struct loop *l)
{
    signal_all(l, SIGKILL);
    while (!l->child_done && waitpid(l->s->child, &l->out->wait_status, 0) < 0
           && errno == EINTR)
        continue;
}

static int supervise(struct loop *l)
{
    int rc;

    do {
        rc = turn(l);
    } while (rc == 0);
    if (rc < 0) {
        kill_and_reap(l);
        return CLI_EXIT_INTERNAL;
    }
    return CLI_EXIT_OK;
}

int cli_supervise_command(struct cli_supervision *s, char *const argv[],
                          char *const envp[], struct cli_outcome *out)
{
    struct loop l;
    int code;

    memset(&l, 0, sizeof(l));
    memset(out, 0, sizeof(*out));
    l.s = s;
    l.out = out;
    l.file_ms = -1;
    /* Orphans of the command become ours, to kill and to reap. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        cli_say("warning: cannot become the subreaper of '%s': %s", argv[0],
                strerror(errno));
    l.timer_fd = timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);
    if (l.timer_fd < 0 || cli_guard_start(&l.guard) != 0) {
        cli_say("cannot start '%s': %s", argv[0], strerror(errno));
        if (l.timer_fd >= 0)
            close(l.timer_fd);
        return CLI_EXIT_INTERNAL;
    }
    /* The command may read the file as soon as it starts. */
    if (s->lease != NULL && s->lease->valid_until_file != NULL)
        write_deadline_file(&l, cli_valid_until_epoch_ms(
                                    s->lease->valid_ms(s->lease->arg)));
    code = cli_spawn(argv, envp, &s->child);
    if (code == CLI_EXIT_OK) {
        cli_guard_watch(&l.guard, s->child);
        if (s->started_label != NULL)
            cli_say("%s: '%s' started (pid %d)", s->started_label, s->command,
                    (int)s->child);
        code = supervise(&l);
    }
    cli_guard_stop(&l.guard);
    close(l.timer_fd);
    return code;
}

int cli_deadline_file_make(char path[CLI_DEADLINE_PATH_MAX])
{
    const char *bases[] = {getenv("XDG_RUNTIME_DIR"), getenv("TMPDIR"),
                           "/tmp"};

    for (size_t i = 0; i < sizeof(bases) / sizeof(*bases); i++) {
        const char *base = bases[i];
        int n;

        if (base == NULL || base[0] == '\0')
            continue;
        n = snprintf(path, CLI_DEADLINE_PATH_MAX, "%s/dlock-XXXXXX", base);
        if (n < 0 || n >= CLI_DEADLINE_PATH_MAX - 16 || mkdtemp(path) == NULL)
            continue;
        strcat(path, "/valid_until");
        return 0;
    }
    cli_say("warning: cannot make a folder for DLOCK_VALID_UNTIL_FILE: %s",
            strerror(errno));
    path[0] = '\0';
    return -1;
}

void cli_deadline_file_remove(const char *path)
{
    char dir[CLI_DEADLINE_PATH_MAX];
    char *slash;

    if (path == NULL || path[0] == '\0')
        return;
    unlink(path);
    snprintf(dir, sizeof(dir), "%s.tmp", path);
    unlink(dir);
    snprintf(dir, sizeof(dir), "%s", path);
    slash = strrchr(dir, '/');
    if (slash == NULL)
        return;
    *slash = '\0';
    rmdir(dir);
}
