/*
 * cli_exit.c: maps libdlock's error codes to the tool's exit codes
 * (cli_exit.h).
 *
 * A switch with no default, like dlock_strerror, so that -Wswitch names a
 * dlock_err added to the library and not yet given an exit code here.
 */
#include "cli_exit.h"

#include <sys/wait.h>

int cli_exit_of(dlock_err err, int busy_code)
{
    switch (err) {
    case DLOCK_OK: return CLI_EXIT_OK;
    case DLOCK_BUSY: return busy_code;
    case DLOCK_LOST: return CLI_EXIT_LOST;
    case DLOCK_UNAVAILABLE:
    case DLOCK_TIMEOUT:
    case DLOCK_TLS:
    case DLOCK_AUTH:
    case DLOCK_PROTOCOL:
    case DLOCK_SERVER:
    case DLOCK_UNPROVEN:
    case DLOCK_UNREPLICATED: return CLI_EXIT_UNAVAILABLE;
    case DLOCK_INVALID: return CLI_EXIT_USAGE;
    case DLOCK_NOMEM:
    case DLOCK_SYSTEM:
    case DLOCK_STATE: return CLI_EXIT_INTERNAL;
    }
    return CLI_EXIT_INTERNAL;
}

int cli_exit_of_wait_status(int wait_status)
{
    if (WIFEXITED(wait_status))
        return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status))
        return CLI_EXIT_SIGNAL_BASE + WTERMSIG(wait_status);
    return CLI_EXIT_INTERNAL;
}
