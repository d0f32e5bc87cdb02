/*
 * cli_spawn.h: starts the command of `dlock run`, `dlock leader` and
 * `run --every`.
 *
 * fork and execvpe, into a process group of its own whose id is the
 * command's pid, so that dlock can stop everything the command started
 * (a shell's children and theirs) with one kill(-pgid): a lock that is
 * lost must not leave a grandchild working without it.  The command stays
 * in dlock's session; dlock forwards the signals it gets (cli_supervise.h)
 * and the guardian (cli_guard.h) kills the group should dlock die.  The
 * kernel also kills the command itself if dlock dies without reaping it
 * (PR_SET_PDEATHSIG; see cli_spawn.c).  Whether the exec worked is learned
 * through a close-on-exec pipe: the child writes errno to it only when
 * execvpe fails, so the parent reads EOF on success or the reason on
 * failure, and can say "no such command" itself instead of the child
 * printing from between fork and exec, where a child of a multithreaded
 * process may only make async-signal-safe calls.
 */
#ifndef DLOCK_CLI_SPAWN_H
#define DLOCK_CLI_SPAWN_H

#include <sys/types.h>

/*
 * Runs argv[0] (searched on PATH when it has no '/') with argv and envp.
 * Returns 0 with *pid set to the running command.  When the command could
 * not be run, says why on stderr, reaps the child and returns 127 (not
 * found) or 126 (other exec failures), as a shell does; 70 when fork
 * itself failed.
 */
int cli_spawn(char *const argv[], char *const envp[], pid_t *pid);

#endif /* DLOCK_CLI_SPAWN_H */
