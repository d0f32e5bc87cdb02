/*
 * cli_args.c: parses a subcommand's options and operands (cli_args.h).
 *
 * One getopt_long table serves every subcommand; a per-subcommand bit mask
 * says which options it takes and a small enum says which operands follow.
 * Long-only options get getopt values above 255 so that they can never
 * collide with a short option letter.  Values are checked here (durations,
 * the exit code's range), so the subcommands receive only sane numbers.
 */
#include "cli_args.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli_duration.h"
#include "cli_exit.h"

enum option_id {
    OPT_HELP,
    OPT_URL,
    OPT_TLS_CA,
    OPT_TLS_CERT,
    OPT_TLS_KEY,
    OPT_TLS_SERVER_NAME,
    OPT_TTL,
    OPT_WAIT,
    OPT_GRACE,
    OPT_CONFLICT_EXIT_CODE,
    OPT_FAIL_OPEN,
    OPT_QUIET,
    OPT_JSON,
    OPT_EVERY,
    OPT_LEADER,
    OPT_TOKEN,
    OPT_FAIR,
    OPT_WAIT_REPLICAS,
    OPT_WAIT_REPLICAS_TIMEOUT,
    OPT_COUNT
};

#define BIT(id) (1u << (id))
#define LONG_ONLY(id) (256 + (id))

/* The options every subcommand takes: help and how to reach Redis. */
#define COMMON                                                              \
    (BIT(OPT_HELP) | BIT(OPT_URL) | BIT(OPT_TLS_CA) | BIT(OPT_TLS_CERT)     \
     | BIT(OPT_TLS_KEY) | BIT(OPT_TLS_SERVER_NAME) | BIT(OPT_WAIT_REPLICAS) \
     | BIT(OPT_WAIT_REPLICAS_TIMEOUT))

/* The short options, for every subcommand; the mask decides the rest. */
static const char short_options[] = ":hu:t:w:E:q";

static const struct option long_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"url", required_argument, NULL, 'u'},
    {"tls-ca", required_argument, NULL, LONG_ONLY(OPT_TLS_CA)},
    {"tls-cert", required_argument, NULL, LONG_ONLY(OPT_TLS_CERT)},
    {"tls-key", required_argument, NULL, LONG_ONLY(OPT_TLS_KEY)},
    {"tls-server-name", required_argument, NULL,
     LONG_ONLY(OPT_TLS_SERVER_NAME)},
    {"ttl", required_argument, NULL, 't'},
    {"wait", required_argument, NULL, 'w'},
    {"grace", required_argument, NULL, LONG_ONLY(OPT_GRACE)},
    {"conflict-exit-code", required_argument, NULL, 'E'},
    {"fail-open", no_argument, NULL, LONG_ONLY(OPT_FAIL_OPEN)},
    {"quiet", no_argument, NULL, 'q'},
    {"json", no_argument, NULL, LONG_ONLY(OPT_JSON)},
    {"every", required_argument, NULL, LONG_ONLY(OPT_EVERY)},
    {"leader", no_argument, NULL, LONG_ONLY(OPT_LEADER)},
    {"token", required_argument, NULL, LONG_ONLY(OPT_TOKEN)},
    {"fair", no_argument, NULL, LONG_ONLY(OPT_FAIR)},
    {"wait-replicas", required_argument, NULL, LONG_ONLY(OPT_WAIT_REPLICAS)},
    {"wait-replicas-timeout", required_argument, NULL,
     LONG_ONLY(OPT_WAIT_REPLICAS_TIMEOUT)},
    {NULL, 0, NULL, 0},
};

/* What follows the options. */
enum operands {
    OPERANDS_KEY,         /* KEY */
    OPERANDS_KEY_TOKEN,   /* KEY TOKEN */
    OPERANDS_KEY_COMMAND, /* KEY [--] COMMAND [ARGS...] */
    OPERANDS_URL          /* [URL], the same as --url */
};

struct command_spec {
    const char *name;
    unsigned options;
    enum operands operands;
};

static const struct command_spec commands[CLI_CMD_COUNT] = {
    [CLI_CMD_RUN] = {"run",
                     COMMON | BIT(OPT_TTL) | BIT(OPT_WAIT) | BIT(OPT_GRACE)
                         | BIT(OPT_CONFLICT_EXIT_CODE) | BIT(OPT_FAIL_OPEN)
                         | BIT(OPT_QUIET) | BIT(OPT_EVERY) | BIT(OPT_FAIR),
                     OPERANDS_KEY_COMMAND},
    [CLI_CMD_ACQUIRE] = {"acquire",
                         COMMON | BIT(OPT_TTL) | BIT(OPT_WAIT) | BIT(OPT_FAIR),
                         OPERANDS_KEY},
    [CLI_CMD_RELEASE] = {"release", COMMON | BIT(OPT_TOKEN) | BIT(OPT_FAIR),
                         OPERANDS_KEY_TOKEN},
    [CLI_CMD_EXTEND] = {"extend", COMMON | BIT(OPT_TTL) | BIT(OPT_TOKEN),
                        OPERANDS_KEY_TOKEN},
    [CLI_CMD_STATUS] = {"status", COMMON | BIT(OPT_JSON) | BIT(OPT_LEADER),
                        OPERANDS_KEY},
    [CLI_CMD_LEADER] = {"leader",
                        COMMON | BIT(OPT_TTL) | BIT(OPT_GRACE)
                            | BIT(OPT_QUIET),
                        OPERANDS_KEY_COMMAND},
    [CLI_CMD_DOCTOR] = {"doctor", COMMON | BIT(OPT_JSON), OPERANDS_URL},
};

/* What `run --every` refuses: each only means something for one run. */
#define NOT_WITH_EVERY                                  \
    (BIT(OPT_WAIT) | BIT(OPT_FAIL_OPEN) | BIT(OPT_FAIR) \
     | BIT(OPT_CONFLICT_EXIT_CODE))

int cli_command_find(const char *name)
{
    for (int i = 0; i < CLI_CMD_COUNT; i++)
        if (strcmp(commands[i].name, name) == 0)
            return i;
    return -1;
}

const char *cli_command_name(enum cli_command command)
{
    return commands[command].name;
}

static int fail(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    return -1;
}

/* The option_id of a getopt return value, or -1. */
static int option_of(int c)
{
    switch (c) {
    case 'h': return OPT_HELP;
    case 'u': return OPT_URL;
    case 't': return OPT_TTL;
    case 'w': return OPT_WAIT;
    case 'E': return OPT_CONFLICT_EXIT_CODE;
    case 'q': return OPT_QUIET;
    default: break;
    }
    if (c >= LONG_ONLY(0) && c < LONG_ONLY(OPT_COUNT))
        return c - LONG_ONLY(0);
    return -1;
}

/* The long name of an option, for messages. */
static const char *long_name_of(int id)
{
    for (const struct option *o = long_options; o->name != NULL; o++)
        if (option_of(o->val) == id)
            return o->name;
    return "?";
}

/* An exit code: 0..255 in plain decimal. */
static int parse_exit_code(const char *text, int *code)
{
    int value = 0;

    if (*text == '\0' || strlen(text) > 3)
        return -1;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        value = value * 10 + (*p - '0');
    }
    if (value > 255)
        return -1;
    *code = value;
    return 0;
}

int cli_args_replicas(const char *text, int *out)
{
    int value = 0;

    if (text == NULL || *text == '\0' || strlen(text) > 2)
        return -1;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        value = value * 10 + (*p - '0');
    }
    if (value < 1 || value > 64)
        return -1;
    *out = value;
    return 0;
}

/* Durations and numbers, checked for their option's range. */
static int set_valued(struct cli_args *a, int id, const char *v, char *why,
                      size_t whylen)
{
    const char *name = long_name_of(id);

    switch (id) {
    case OPT_TTL:
        if (cli_duration_parse(v, &a->ttl_ms) != 0 || a->ttl_ms == 0)
            return fail(why, whylen,
                        "--%s '%s' is not a duration above 0 "
                        "(such as 500ms, 30s, 5m, 1h)",
                        name, v);
        return 0;
    case OPT_WAIT:
        if (cli_duration_parse_wait(v, &a->wait_ms) != 0)
            return fail(why, whylen,
                        "--%s '%s' is not a duration (such as "
                        "0, 10s, 5m) or 'forever'",
                        name, v);
        return 0;
    case OPT_EVERY:
        if (cli_duration_parse(v, &a->every_ms) != 0 || a->every_ms == 0)
            return fail(why, whylen,
                        "--%s '%s' is not a duration above 0 "
                        "(such as 1s, 5m, 1h)",
                        name, v);
        return 0;
    case OPT_GRACE:
        if (cli_duration_parse(v, &a->grace_ms) != 0)
            return fail(why, whylen,
                        "--%s '%s' is not a duration (such as "
                        "500ms, 5s)",
                        name, v);
        return 0;
    case OPT_WAIT_REPLICAS:
        if (cli_args_replicas(v, &a->wait_replicas) != 0)
            return fail(why, whylen, "--%s '%s' is not a number 1..64", name,
                        v);
        return 0;
    case OPT_WAIT_REPLICAS_TIMEOUT:
        if (cli_duration_parse(v, &a->wait_replicas_timeout_ms) != 0
            || a->wait_replicas_timeout_ms == 0
            || a->wait_replicas_timeout_ms > 3600000)
            return fail(why, whylen,
                        "--%s '%s' is not a duration of 1 ms to 1 h "
                        "(such as 500ms, 2s)",
                        name, v);
        return 0;
    case OPT_CONFLICT_EXIT_CODE:
        if (parse_exit_code(v, &a->busy_exit) != 0)
            return fail(why, whylen,
                        "--%s '%s' is not an exit code "
                        "0..255",
                        name, v);
        return 0;
    default: break;
    }
    return fail(why, whylen, "internal: option --%s has no parser", name);
}

/* Stores the option id with value v (NULL for flags) into a. */
static int set_option(struct cli_args *a, int id, const char *v, char *why,
                      size_t whylen)
{
    switch (id) {
    case OPT_HELP: a->help = 1; return 0;
    case OPT_URL: a->url = v; return 0;
    case OPT_TLS_CA: a->tls_ca_file = v; return 0;
    case OPT_TLS_CERT: a->tls_cert_file = v; return 0;
    case OPT_TLS_KEY: a->tls_key_file = v; return 0;
    case OPT_TLS_SERVER_NAME: a->tls_server_name = v; return 0;
    case OPT_FAIL_OPEN: a->fail_open = 1; return 0;
    case OPT_QUIET: a->quiet = 1; return 0;
    case OPT_JSON: a->json = 1; return 0;
    case OPT_LEADER: a->leader = 1; return 0;
    case OPT_TOKEN: a->token = v; return 0;
    case OPT_FAIR: a->fair = 1; return 0;
    default: break;
    }
    return set_valued(a, id, v, why, whylen);
}

/* Names what getopt refused: an unknown option or a missing value. */
static int getopt_failure(int c, char **argv, char *why, size_t whylen)
{
    const int id = option_of(optopt);

    if (c == ':' && id >= 0)
        return fail(why, whylen, "option --%s needs a value",
                    long_name_of(id));
    if (optopt != 0 && id < 0)
        return fail(why, whylen, "unknown option '-%c'", optopt);
    return fail(why, whylen, "unknown option '%s'", argv[optind - 1]);
}

static void set_defaults(struct cli_args *a, enum cli_command command)
{
    memset(a, 0, sizeof(*a));
    a->which = command;
    a->ttl_ms = CLI_DEFAULT_TTL_MS;
    a->grace_ms = CLI_DEFAULT_GRACE_MS;
    a->busy_exit = CLI_EXIT_BUSY;
}

/* Reads the options; leaves optind at the first operand and the set of
 * options seen in *given. */
static int parse_options(const struct command_spec *spec, int argc,
                         char **argv, struct cli_args *a, unsigned *given,
                         char *why, size_t whylen)
{
    char optstring[sizeof(short_options) + 1];

    /* "+" stops at the first operand: the rest of a run line is the
     * command's own. */
    snprintf(optstring, sizeof(optstring), "%s%s",
             spec->operands == OPERANDS_KEY_COMMAND ? "+" : "", short_options);
    optind = 0; /* GNU: start over, also for a second parse */
    opterr = 0; /* we word the messages ourselves */
    for (;;) {
        const int c = getopt_long(argc, argv, optstring, long_options, NULL);
        const int id = option_of(c);

        if (c == -1)
            break;
        if (c == '?' || c == ':')
            return getopt_failure(c, argv, why, whylen);
        if (id < 0 || (spec->options & BIT(id)) == 0)
            return fail(why, whylen, "option --%s is not used by '%s'",
                        id < 0 ? "?" : long_name_of(id), spec->name);
        if (set_option(a, id, optarg, why, whylen) != 0)
            return -1;
        *given |= BIT(id);
    }
    return 0;
}

/* run --every takes none of the options that only suit a single run. */
static int check_every(const struct cli_args *a, unsigned given, char *why,
                       size_t whylen)
{
    const unsigned clash = given & NOT_WITH_EVERY;

    if (a->every_ms == 0 || clash == 0)
        return 0;
    for (int id = 0; id < OPT_COUNT; id++)
        if (clash & BIT(id))
            return fail(why, whylen, "--%s is not used with --every",
                        long_name_of(id));
    return 0;
}

/* KEY [--] COMMAND [ARGS...] */
static int parse_run_command(char **rest, int n, struct cli_args *a, char *why,
                             size_t whylen)
{
    int skip = 0;

    if (n > 0 && strcmp(rest[0], "--") == 0)
        skip = 1;
    else if (n > 0 && rest[0][0] == '-')
        /* Most likely an option after KEY; running "--ttl" would not be
         * what anyone meant. */
        return fail(why, whylen,
                    "options go before KEY; put -- between "
                    "KEY and a command that starts with '-' (got '%s')",
                    rest[0]);
    if (n - skip < 1)
        return fail(why, whylen, "missing COMMAND after KEY");
    a->command = rest + skip;
    return 0;
}

/* The operands after the options: argv[optind..argc-1]. */
static int parse_operands(const struct command_spec *spec, int n, char **rest,
                          struct cli_args *a, char *why, size_t whylen)
{
    const int wanted = spec->operands == OPERANDS_KEY_TOKEN ? 2 : 1;

    if (spec->operands == OPERANDS_URL) {
        if (n > 1)
            return fail(why, whylen, "unexpected argument '%s'", rest[1]);
        if (n == 1 && a->url != NULL)
            return fail(why, whylen,
                        "give the URL once: as --url or as "
                        "the operand");
        if (n == 1)
            a->url = rest[0];
        return 0;
    }
    if (n < 1)
        return fail(why, whylen, "missing KEY");
    if (rest[0][0] == '\0')
        return fail(why, whylen, "KEY must not be empty");
    a->key = rest[0];
    if (spec->operands == OPERANDS_KEY_COMMAND)
        return parse_run_command(rest + 1, n - 1, a, why, whylen);
    /* TOKEN may be left out: it then comes from DLOCK_TOKEN (cli_token.h),
     * which the command reads, since parsing only reads argv. */
    if (n > wanted)
        return fail(why, whylen, "unexpected argument '%s'", rest[wanted]);
    if (spec->operands == OPERANDS_KEY_TOKEN && n == 2) {
        if (a->token != NULL)
            return fail(why, whylen,
                        "TOKEN given twice (--token and "
                        "'%s')",
                        rest[1]);
        a->token = rest[1];
    }
    return 0;
}

int cli_args_parse(enum cli_command command, int argc, char **argv,
                   struct cli_args *out, char *why, size_t whylen)
{
    const struct command_spec *spec = &commands[command];
    unsigned given = 0;

    set_defaults(out, command);
    if (parse_options(spec, argc, argv, out, &given, why, whylen) != 0)
        return -1;
    if (out->help)
        return 0;
    if (check_every(out, given, why, whylen) != 0)
        return -1;
    return parse_operands(spec, argc - optind, argv + optind, out, why,
                          whylen);
}
