/*
 * cli_supervise.h: what dlock does while a command it started runs (under
 * a lock for `dlock run`, under a leadership for `dlock leader` and
 * `dlock run --every`).
 *
 * The supervisor waits on the wakeup pipe (cli_wakeup.h) until the command
 * has ended, and meanwhile:
 *   - forwards SIGINT, SIGTERM and SIGHUP sent to dlock to the command
 *     (not those a terminal sent to the whole process group, which the
 *     command has already); with stop_on_signal, such a signal also means
 *     "stop": SIGKILL follows when the grace period has passed;
 *   - when the lock or leadership is found lost, sends the command SIGTERM
 *     at once and SIGKILL when the grace period has passed, because past
 *     that point another holder may already be doing the same work;
 *   - reaps the command and hands back its wait status.
 * The lock itself is renewed by the library's watchdog thread meanwhile;
 * the supervisor never talks to Redis, so a slow server never delays a
 * signal.
 *
 * States: RUNNING (no deadline) -> STOPPING (lost, or told to stop;
 * SIGTERM or the stop signal sent, SIGKILL due at the deadline) -> KILLED
 * (SIGKILL sent) -> ended, which is reached from any state when waitpid
 * reports the command gone.
 */
#ifndef DLOCK_CLI_SUPERVISE_H
#define DLOCK_CLI_SUPERVISE_H

#include <stdint.h>
#include <sys/types.h>

#include "cli_wakeup.h"

struct cli_supervision {
    pid_t child;                   /* the running command */
    const struct cli_wakeup *wakeup;
    int64_t grace_ms;              /* SIGTERM to SIGKILL, once lost */
    const char *key;               /* for messages */
    const char *command;           /* argv[0], for messages */
    const char *held;              /* what is lost, for messages: NULL
                                    * for "lock", or "leadership of" */
    int stop_on_signal;            /* SIGINT/TERM/HUP stop the command */
};

struct cli_outcome {
    int wait_status;               /* the command's, from waitpid */
    int lost;                      /* the lock was lost while it ran */
    int stop_signal;               /* the last SIGINT/TERM/HUP dlock got
                                    * while it ran, else 0 */
};

/*
 * Supervises s->child until it has ended and fills *out.  Returns 0, or -1
 * when waiting itself failed (poll or waitpid errors, said on stderr); the
 * command has then been killed and reaped.
 */
int cli_supervise(const struct cli_supervision *s, struct cli_outcome *out);

#endif /* DLOCK_CLI_SUPERVISE_H */
