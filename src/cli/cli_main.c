/*
 * cli_main.c: the dlock tool's entry point: picks the subcommand, parses
 * its arguments and runs it.
 *
 * `dlock --help`, `dlock help [COMMAND]`, `dlock COMMAND --help` and
 * `dlock --version` are answered here on stdout with exit 0; anything that
 * is not a known subcommand is a usage error (64) with a one-line hint on
 * stderr.  Process state lives in main's frame and is passed down; the
 * only global is the signal handlers' pipe descriptor (cli_wakeup.c).
 */
#include <stdio.h>
#include <string.h>

#include "cli_args.h"
#include "cli_cmd.h"
#include "cli_exit.h"
#include "cli_say.h"
#include "cli_usage.h"
#include "dlock/dlock.h"

typedef int (*cli_handler)(const struct cli_args *a);

static const cli_handler handlers[CLI_CMD_COUNT] = {
    [CLI_CMD_RUN] = cli_cmd_run,         [CLI_CMD_ACQUIRE] = cli_cmd_acquire,
    [CLI_CMD_RELEASE] = cli_cmd_release, [CLI_CMD_EXTEND] = cli_cmd_extend,
    [CLI_CMD_STATUS] = cli_cmd_status,   [CLI_CMD_LEADER] = cli_cmd_leader,
    [CLI_CMD_DOCTOR] = cli_cmd_doctor,
};

static int print_version(void)
{
    printf("dlock %s (libdlock %s)\n", DLOCK_VERSION_STRING, dlock_version());
    return CLI_EXIT_OK;
}

/* dlock help [COMMAND] */
static int print_help(int argc, char **argv)
{
    int command;

    if (argc < 3) {
        cli_usage_print_overview(stdout);
        return CLI_EXIT_OK;
    }
    command = cli_command_find(argv[2]);
    if (command < 0 || argc > 3) {
        cli_say("help: no command '%s' (commands: run acquire release "
                "extend status leader doctor)",
                argv[2]);
        return CLI_EXIT_USAGE;
    }
    cli_usage_print(stdout, (enum cli_command)command);
    return CLI_EXIT_OK;
}

static int run_command(enum cli_command command, int argc, char **argv)
{
    const char *name = cli_command_name(command);
    struct cli_args args;
    char why[512];

    if (cli_args_parse(command, argc, argv, &args, why, sizeof(why)) != 0) {
        cli_say("%s: %s (see 'dlock help %s')", name, why, name);
        return CLI_EXIT_USAGE;
    }
    if (args.help) {
        cli_usage_print(stdout, command);
        return CLI_EXIT_OK;
    }
    return handlers[command](&args);
}

int main(int argc, char **argv)
{
    const char *first = argc > 1 ? argv[1] : NULL;
    int command;

    if (first == NULL) {
        cli_say("missing command (see 'dlock --help')");
        return CLI_EXIT_USAGE;
    }
    if (strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0)
        return print_help(1, argv);
    if (strcmp(first, "help") == 0)
        return print_help(argc, argv);
    if (strcmp(first, "--version") == 0 || strcmp(first, "-V") == 0)
        return print_version();
    command = cli_command_find(first);
    if (command < 0) {
        cli_say("unknown command '%s' (see 'dlock --help')", first);
        return CLI_EXIT_USAGE;
    }
    return run_command((enum cli_command)command, argc - 1, argv + 1);
}
