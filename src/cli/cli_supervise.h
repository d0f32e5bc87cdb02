/*
 * cli_supervise.h: what dlock does while a command it started runs (under
 * a lock for `dlock run`, under a leadership for `dlock leader` and
 * `dlock run --every`).
 *
 * The principle (issue 13): no process of the command may run after
 * another node could have been granted the lock.  The lease's valid_until
 * (from dlock_lock_valid_ms or dlock_leader_valid_ms, which never
 * overstate) is that moment, and the supervisor acts on it by itself,
 * on a timer, without waiting for any renewal reply:
 *   - the command runs in a process group of its own (cli_spawn.h), dlock
 *     is its subreaper (PR_SET_CHILD_SUBREAPER: orphans of the command
 *     stay ours to reap and to kill), and every stop signals the whole
 *     group and every other process descended from dlock (cli_kill_tree);
 *   - kill_by = valid_until - a small margin (2% of the TTL + 10 ms, at
 *     most 250 ms): SIGKILL lands there at the latest;
 *   - stop_at = kill_by - min(--grace, ttl/4): if the lease has not been
 *     renewed by then, the group gets SIGTERM and the lock counts as lost
 *     (exit 76).  A healthy watchdog renews every ttl/3, well before;
 *   - when the lock is found lost earlier (on_lost's pipe byte, or the
 *     supervisor's own look at dlock_lock_lost at every turn, since a
 *     byte can be dropped), SIGTERM at once and SIGKILL after --grace, but
 *     never after kill_by;
 *   - the lease is sampled at every turn and at least every ttl/6, so the
 *     deadlines follow renewals; each new kill_by goes to the guardian
 *     (cli_guard.h), which kills the group at kill_by by itself if dlock
 *     is stopped, and at once if dlock dies;
 *   - with valid_until_file, the file is rewritten (atomically) with
 *     valid_until in epoch ms when it moves, and with 0 once the lock is
 *     lost, for the command to re-read;
 *   - SIGINT, SIGTERM and SIGHUP sent to dlock are forwarded to the group;
 *     with stop_on_signal they also mean "stop": SIGKILL after --grace
 *     (never after kill_by);
 *   - when the command itself ends, what is left of its group is stopped
 *     the same way (SIGTERM, SIGKILL after --grace), and the supervisor
 *     returns only once nothing of it runs: the lock is released after
 *     the last process, never before.
 * The supervisor never talks to Redis, so a slow server never delays a
 * signal.  Deadlines are on CLOCK_BOOTTIME (a timerfd), which keeps
 * counting while the host is suspended.
 */
#ifndef DLOCK_CLI_SUPERVISE_H
#define DLOCK_CLI_SUPERVISE_H

#include <stdint.h>
#include <sys/types.h>

#include "cli_wakeup.h"

/* What the command runs under, as the supervisor sees it. */
struct cli_lease {
    int64_t ttl_ms;
    /* Milliseconds still known valid (never overstated): 0 once lost or
     * expired, INT64_MAX when unbounded (a degraded --fail-open lock). */
    int64_t (*valid_ms)(void *arg);
    /* 1 once the lock or leadership is known lost. */
    int (*lost)(void *arg);
    void *arg;
    /* Rewritten with valid_until (epoch ms); NULL for none. */
    const char *valid_until_file;
};

struct cli_supervision {
    const struct cli_wakeup *wakeup;
    const struct cli_lease *lease; /* NULL: no deadline */
    int64_t grace_ms;              /* SIGTERM to SIGKILL, once stopping */
    const char *key;               /* for messages */
    const char *command;           /* argv[0], for messages */
    const char *held;              /* what is lost, for messages: NULL
                                    * for "lock", or "leadership of" */
    int stop_on_signal;            /* SIGINT/TERM/HUP stop the command */
    const char *started_label;     /* non-NULL: say "LABEL: 'command'
                                    * started (pid N)" once it runs */
    pid_t child;                   /* set by cli_supervise_command */
};

struct cli_outcome {
    int wait_status; /* the command's, from waitpid */
    int lost;        /* the lock was lost (or ran out)
                                    * while it ran */
    int stop_signal; /* the last SIGINT/TERM/HUP dlock got
                                    * while it ran, else 0 */
};

/*
 * Makes dlock the subreaper of what it starts (once per process), starts
 * the guardian, runs argv with envp in a new process group (cli_spawn)
 * and supervises it as above until the command and every process it left
 * have ended; fills *out (s->child is set to the command's pid).  Returns
 * 0 once the command ran and ended; 126/127 (said on stderr) when it could
 * not be run; 70 when starting or waiting failed (said on stderr; the
 * group has then been killed).
 */
int cli_supervise_command(struct cli_supervision *s, char *const argv[],
                          char *const envp[], struct cli_outcome *out);

/* Epoch milliseconds valid_ms from now (CLOCK_REALTIME), or -1 when
 * valid_ms is INT64_MAX (unbounded): DLOCK_VALID_UNTIL's value. */
int64_t cli_valid_until_epoch_ms(int64_t valid_ms);

/* Size of a buffer for cli_deadline_file_make. */
#define CLI_DEADLINE_PATH_MAX 512

/*
 * Makes a private folder (mode 0700) under $XDG_RUNTIME_DIR, else $TMPDIR,
 * else /tmp, and writes the path of "valid_until" in it into path: the
 * DLOCK_VALID_UNTIL_FILE of one run.  Returns 0, or -1 (said on stderr;
 * the run goes on without the file).
 */
int cli_deadline_file_make(char path[CLI_DEADLINE_PATH_MAX]);

/* Removes the file and its folder; nothing for an empty path. */
void cli_deadline_file_remove(const char *path);

#endif /* DLOCK_CLI_SUPERVISE_H */
