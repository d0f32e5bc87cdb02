/*
 * cli_args.h: the command line of every dlock subcommand, parsed into one
 * struct.
 *
 * All subcommands share one option table, and each says which of the
 * options it takes, so an option means the same thing everywhere and one
 * that a subcommand does not take is a usage error there (exit 64) rather
 * than silently ignored.  Parsing only reads: it does not connect, print or
 * exit, so the unit tests can drive it; the caller prints the message and
 * picks the exit code.
 *
 * `run` and `leader` stop at their first operand (POSIX getopt order),
 * since everything after KEY belongs to the command; the others accept
 * options anywhere, as GNU tools do.  `run --every` is the scheduled form
 * of run: the options that only make sense for one run under a lock
 * (--wait, --fail-open, --conflict-exit-code) are refused with it.  Strings
 * in struct cli_args point into argv.
 */
#ifndef DLOCK_CLI_ARGS_H
#define DLOCK_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>

enum cli_command {
    CLI_CMD_RUN,
    CLI_CMD_ACQUIRE,
    CLI_CMD_RELEASE,
    CLI_CMD_EXTEND,
    CLI_CMD_STATUS,
    CLI_CMD_LEADER,
    CLI_CMD_DOCTOR,
    CLI_CMD_COUNT
};

/* Defaults, also printed by the help texts and the man page. */
#define CLI_DEFAULT_TTL_MS 30000
#define CLI_DEFAULT_GRACE_MS 5000
#define CLI_DEFAULT_URL "redis://127.0.0.1:6379"

struct cli_args {
    enum cli_command which;
    int help; /* --help: print the subcommand's usage */

    const char *url;                  /* --url, or NULL: see cli_client_url */
    const char *tls_ca_file;          /* --tls-ca */
    const char *tls_cert_file;        /* --tls-cert */
    const char *tls_key_file;         /* --tls-key */
    const char *tls_server_name;      /* --tls-server-name */
    int wait_replicas;                /* --wait-replicas; 0 = not given */
    int64_t wait_replicas_timeout_ms; /* --wait-replicas-timeout; 0 = not
                                       * given */

    int64_t ttl_ms;   /* --ttl; CLI_DEFAULT_TTL_MS */
    int64_t wait_ms;  /* --wait; 0 = do not wait, -1 = forever */
    int64_t grace_ms; /* --grace; CLI_DEFAULT_GRACE_MS */
    int64_t every_ms; /* run --every: the tick; 0 = run once */
    int busy_exit;    /* --conflict-exit-code; 75 */
    int fail_open;    /* --fail-open */
    int quiet;        /* --quiet */
    int json;         /* --json */
    int leader;       /* status --leader: KEY names a role */
    int fair;         /* run --fair: first come, first served */

    const char *key;   /* KEY */
    const char *token; /* TOKEN, for release and extend: NULL when
                               * not given, "-" for stdin (cli_token.h) */
    char **command;    /* run, leader: COMMAND [ARGS], NULL-ended */
};

/* Parses a replica count, 1..64 in plain decimal, into *out (for
 * --wait-replicas and DLOCK_WAIT_REPLICAS); 0, or -1 if it is not one. */
int cli_args_replicas(const char *text, int *out);

/* The subcommand named name, or -1 if there is none. */
int cli_command_find(const char *name);

/* The name of command, such as "run". */
const char *cli_command_name(enum cli_command command);

/*
 * Parses the subcommand's arguments: argv[0] is the subcommand's name and
 * argv[1..argc-1] its options and operands; argv[argc] must be NULL.
 * Fills *out with the defaults and then what argv says.  With --help, the
 * operands are not checked.  Returns 0, or -1 with a one-line reason in
 * why (NUL-terminated, at most whylen bytes).  May permute argv (GNU
 * getopt) and uses getopt's globals, which it resets first.
 */
int cli_args_parse(enum cli_command command, int argc, char **argv,
                   struct cli_args *out, char *why, size_t whylen);

#endif /* DLOCK_CLI_ARGS_H */
