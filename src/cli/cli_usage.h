/*
 * cli_usage.h: the help texts of dlock and of each subcommand.
 *
 * The texts are short reminders; docs/dlock.1 is the full manual, and the
 * two must agree on options, defaults and exit codes.
 */
#ifndef DLOCK_CLI_USAGE_H
#define DLOCK_CLI_USAGE_H

#include <stdio.h>

#include "cli_args.h"

/* Prints the overview: the subcommands and the exit codes. */
void cli_usage_print_overview(FILE *out);

/* Prints the help of one subcommand. */
void cli_usage_print(FILE *out, enum cli_command command);

#endif /* DLOCK_CLI_USAGE_H */
