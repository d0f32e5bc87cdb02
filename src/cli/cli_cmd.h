/*
 * cli_cmd.h: the subcommands of dlock, one function each.
 *
 * Each takes the parsed command line (cli_args.h), does its work, says
 * what went wrong on stderr (cli_say.h) and returns the process's exit
 * code (cli_exit.h).  main picks the function by the subcommand's name.
 */
#ifndef DLOCK_CLI_CMD_H
#define DLOCK_CLI_CMD_H

#include "cli_args.h"

/* dlock run: acquire, run COMMAND under the lock, release (cli_run.c);
 * with --every, cli_cmd_run_every. */
int cli_cmd_run(const struct cli_args *a);

/* dlock run --every: at most one node runs COMMAND each tick
 * (cli_run_every.c). */
int cli_cmd_run_every(const struct cli_args *a);

/* dlock acquire: take the lock and print its token (cli_acquire.c). */
int cli_cmd_acquire(const struct cli_args *a);

/* dlock release: give back a lock by its token (cli_release.c). */
int cli_cmd_release(const struct cli_args *a);

/* dlock extend: renew a lock by its token (cli_extend.c). */
int cli_cmd_extend(const struct cli_args *a);

/* dlock status: what Redis says about a lock (cli_status.c). */
int cli_cmd_status(const struct cli_args *a);

/* dlock leader: run COMMAND while this node leads KEY (cli_leader.c). */
int cli_cmd_leader(const struct cli_args *a);

/* dlock doctor: is the server safe for locks (cli_doctor.c). */
int cli_cmd_doctor(const struct cli_args *a);

#endif /* DLOCK_CLI_CMD_H */
