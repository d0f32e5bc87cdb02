/*
 * cli_exit.h: the dlock tool's exit codes, and how a dlock_err maps to one.
 *
 * Scripts and cron wrappers branch on these numbers, so they are part of
 * the tool's interface (docs/dlock.1, EXIT STATUS) and never change.  They
 * follow sysexits(3) where a code there means the same thing, so that
 * tools which already know those codes read ours correctly: 75 is
 * EX_TEMPFAIL (try again later: the lock is busy), 69 EX_UNAVAILABLE,
 * 64 EX_USAGE and 70 EX_SOFTWARE.  76 (EX_PROTOCOL in sysexits) is ours:
 * the lock was lost while the command ran.  `dlock run` otherwise exits
 * with its command's status, so these codes can collide with a command's
 * own; --conflict-exit-code moves the busy code out of the way, as
 * flock -E does.
 */
#ifndef DLOCK_CLI_EXIT_H
#define DLOCK_CLI_EXIT_H

#include "dlock/error.h"

enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_USAGE = 64,       /* bad arguments, options or URL */
    CLI_EXIT_UNAVAILABLE = 69, /* Redis cannot be used (fail closed) */
    CLI_EXIT_INTERNAL = 70,    /* a failure of ours or of the OS */
    CLI_EXIT_BUSY = 75,        /* someone else holds the lock */
    CLI_EXIT_LOST = 76,        /* our token is gone */
    CLI_EXIT_UNSAFE = 78,      /* doctor: the server is not safe for locks
                                * (EX_CONFIG) */
    /* Like a shell: a command that could not be run. */
    CLI_EXIT_NOEXEC = 126,   /* found but not executable */
    CLI_EXIT_NOTFOUND = 127, /* not found on PATH */
    /* Like a shell: a command killed by signal N exits 128 + N. */
    CLI_EXIT_SIGNAL_BASE = 128
};

/*
 * The exit code for a failed library call: DLOCK_BUSY gives busy_code (75,
 * or what --conflict-exit-code asked for), DLOCK_LOST 76, the failures of
 * Redis or the way to it (unavailable, timeout, TLS, auth, protocol, server
 * error) 69, DLOCK_INVALID 64, and everything else 70.  DLOCK_OK gives 0.
 */
int cli_exit_of(dlock_err err, int busy_code);

/*
 * The exit code that reports a child's wait status as a shell does: the
 * child's own exit code, or 128 + N when signal N killed it.
 */
int cli_exit_of_wait_status(int wait_status);

#endif /* DLOCK_CLI_EXIT_H */
