/*
 * test_cli_args.c: the command-line parser of every dlock subcommand
 * (src/cli/cli_args.c).
 *
 * Checks the defaults, each option landing in its field, the operands of
 * each subcommand, that `run` leaves everything after KEY to the command,
 * and that each kind of usage error is refused with a message naming what
 * is wrong (which is what the user reads after "dlock: run: ").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "cli_args.h"
#include "cli_exit.h"
#include "testkit.h"

#define MAX_WORDS 32

/* A writable argv built from a NULL-terminated list of words. */
struct line {
    char text[MAX_WORDS][64];
    char *argv[MAX_WORDS + 1];
    int argc;
};

static void line_init(struct line *l, const char *const *words)
{
    memset(l, 0, sizeof(*l));
    for (; words[l->argc] != NULL; l->argc++) {
        assert_true(l->argc < MAX_WORDS);
        strncpy(l->text[l->argc], words[l->argc], sizeof(l->text[0]) - 1);
        l->argv[l->argc] = l->text[l->argc];
    }
}

static void parse_ok(enum cli_command cmd, const char *const *words,
                     struct line *l, struct cli_args *a)
{
    char why[256] = "";
    int rc;

    line_init(l, words);
    rc = cli_args_parse(cmd, l->argc, l->argv, a, why, sizeof(why));
    TK_EXPECT(rc == 0, "'%s %s ...' parses, got: %s", words[0],
              words[1] != NULL ? words[1] : "", why);
}

static void parse_refused(enum cli_command cmd, const char *const *words,
                          const char *part)
{
    struct line l;
    struct cli_args a;
    char why[256] = "";
    int rc;

    line_init(&l, words);
    rc = cli_args_parse(cmd, l.argc, l.argv, &a, why, sizeof(why));
    TK_EXPECT(rc == -1, "'%s %s ...' is refused", words[0],
              words[1] != NULL ? words[1] : "");
    TK_EXPECT(strstr(why, part) != NULL,
              "the message names \"%s\", got "
              "\"%s\"",
              part, why);
    TK_EXPECT(strchr(why, '\n') == NULL, "the message is one line: \"%s\"",
              why);
}

static void run_defaults_are_the_documented_ones(void **state)
{
    static const char *const w[] = {"run", "job", "--", "true", NULL};
    struct line l;
    struct cli_args a;

    (void)state;
    parse_ok(CLI_CMD_RUN, w, &l, &a);
    TK_EXPECT(a.ttl_ms == 30000, "default TTL 30 s, got %lld",
              (long long)a.ttl_ms);
    TK_EXPECT(a.wait_ms == 0, "default: no wait, got %lld",
              (long long)a.wait_ms);
    TK_EXPECT(a.grace_ms == 5000, "default grace 5 s, got %lld",
              (long long)a.grace_ms);
    TK_EXPECT(a.busy_exit == CLI_EXIT_BUSY, "busy exits 75 by default");
    TK_EXPECT(!a.fail_open && !a.quiet && !a.json && !a.help,
              "no flags by default");
    TK_EXPECT(a.url == NULL, "no --url by default");
    TK_EXPECT(strcmp(a.key, "job") == 0, "KEY is job, got %s", a.key);
    TK_EXPECT(strcmp(a.command[0], "true") == 0 && a.command[1] == NULL,
              "the command is just 'true'");
}

static void run_options_land_in_their_fields(void **state)
{
    static const char *const w[] = {"run",
                                    "--ttl",
                                    "2s",
                                    "-w",
                                    "forever",
                                    "--grace=750ms",
                                    "--fail-open",
                                    "-q",
                                    "-E",
                                    "9",
                                    "--url",
                                    "redis://h:1/2",
                                    "--tls-ca",
                                    "ca.pem",
                                    "--tls-cert",
                                    "c.pem",
                                    "--tls-key",
                                    "k.pem",
                                    "--tls-server-name",
                                    "redis.internal",
                                    "job",
                                    "--",
                                    "sleep",
                                    "1",
                                    NULL};
    struct line l;
    struct cli_args a;

    (void)state;
    parse_ok(CLI_CMD_RUN, w, &l, &a);
    TK_EXPECT(a.ttl_ms == 2000, "--ttl 2s, got %lld", (long long)a.ttl_ms);
    TK_EXPECT(a.wait_ms == -1, "-w forever is -1");
    TK_EXPECT(a.grace_ms == 750, "--grace=750ms");
    TK_EXPECT(a.fail_open && a.quiet, "--fail-open and -q are set");
    TK_EXPECT(a.busy_exit == 9, "-E 9, got %d", a.busy_exit);
    TK_EXPECT(strcmp(a.url, "redis://h:1/2") == 0, "--url is kept");
    TK_EXPECT(strcmp(a.tls_ca_file, "ca.pem") == 0
                  && strcmp(a.tls_cert_file, "c.pem") == 0
                  && strcmp(a.tls_key_file, "k.pem") == 0
                  && strcmp(a.tls_server_name, "redis.internal") == 0,
              "the TLS options are kept");
    TK_EXPECT(strcmp(a.command[0], "sleep") == 0
                  && strcmp(a.command[1], "1") == 0 && a.command[2] == NULL,
              "the command is 'sleep 1'");
}

static void run_leaves_the_commands_options_alone(void **state)
{
    static const char *const with_dashes[] = {"run", "job",    "--",    "sh",
                                              "-c",  "exit 3", "--ttl", NULL};
    static const char *const without_dashes[] = {"run", "job",    "ls",
                                                 "-l",  "--wait", NULL};
    struct line l;
    struct cli_args a;

    (void)state;
    parse_ok(CLI_CMD_RUN, with_dashes, &l, &a);
    TK_EXPECT(a.ttl_ms == 30000, "--ttl after -- is the command's");
    TK_EXPECT(strcmp(a.command[1], "-c") == 0
                  && strcmp(a.command[3], "--ttl") == 0
                  && a.command[4] == NULL,
              "the command keeps -c and --ttl");
    parse_ok(CLI_CMD_RUN, without_dashes, &l, &a);
    TK_EXPECT(a.wait_ms == 0, "--wait after the command is the command's");
    TK_EXPECT(strcmp(a.command[0], "ls") == 0
                  && strcmp(a.command[2], "--wait") == 0,
              "without --, the command starts after KEY");
}

static void run_usage_errors_are_refused(void **state)
{
    static const char *const no_key[] = {"run", NULL};
    static const char *const no_command[] = {"run", "job", NULL};
    static const char *const only_dashes[] = {"run", "job", "--", NULL};
    static const char *const option_after_key[] = {"run", "job", "--ttl",
                                                   "5s",  "--",  "true",
                                                   NULL};
    static const char *const empty_key[] = {"run", "", "--", "true", NULL};
    static const char *const bad_ttl[] = {"run", "--ttl", "30x",
                                          "job", "true",  NULL};
    static const char *const zero_ttl[] = {"run", "--ttl", "0",
                                           "job", "true",  NULL};
    static const char *const bad_wait[] = {"run", "--wait", "soon",
                                           "job", "true",   NULL};
    static const char *const bad_grace[] = {"run", "--grace", "-1",
                                            "job", "true",    NULL};
    static const char *const big_code[] = {"run", "-E",   "256",
                                           "job", "true", NULL};
    static const char *const word_code[] = {"run", "-E",   "x",
                                            "job", "true", NULL};
    static const char *const unknown_long[] = {"run", "--frobnicate", "job",
                                               "true", NULL};
    static const char *const unknown_short[] = {"run", "-z", "job", "true",
                                                NULL};
    static const char *const missing_ttl[] = {"run", "--ttl", NULL};
    static const char *const json[] = {"run", "--json", "job", "true", NULL};

    (void)state;
    parse_refused(CLI_CMD_RUN, no_key, "missing KEY");
    parse_refused(CLI_CMD_RUN, no_command, "missing COMMAND");
    parse_refused(CLI_CMD_RUN, only_dashes, "missing COMMAND");
    parse_refused(CLI_CMD_RUN, option_after_key, "options go before KEY");
    parse_refused(CLI_CMD_RUN, empty_key, "KEY must not be empty");
    parse_refused(CLI_CMD_RUN, bad_ttl, "--ttl '30x'");
    parse_refused(CLI_CMD_RUN, zero_ttl, "--ttl '0'");
    parse_refused(CLI_CMD_RUN, bad_wait, "--wait 'soon'");
    parse_refused(CLI_CMD_RUN, bad_grace, "--grace '-1'");
    parse_refused(CLI_CMD_RUN, big_code, "0..255");
    parse_refused(CLI_CMD_RUN, word_code, "0..255");
    parse_refused(CLI_CMD_RUN, unknown_long, "'--frobnicate'");
    parse_refused(CLI_CMD_RUN, unknown_short, "'-z'");
    parse_refused(CLI_CMD_RUN, missing_ttl, "--ttl needs a value");
    parse_refused(CLI_CMD_RUN, json, "--json is not used by 'run'");
}

static void token_commands_take_key_and_token(void **state)
{
    static const char *const release[] = {"release", "job", "ab12", NULL};
    static const char *const extend[] = {"extend", "job",  "--ttl",
                                         "1m",     "ab12", NULL};
    struct line l;
    struct cli_args a;

    (void)state;
    parse_ok(CLI_CMD_RELEASE, release, &l, &a);
    TK_EXPECT(strcmp(a.key, "job") == 0 && strcmp(a.token, "ab12") == 0,
              "release gets KEY and TOKEN");
    parse_ok(CLI_CMD_EXTEND, extend, &l, &a);
    TK_EXPECT(a.ttl_ms == 60000, "extend takes --ttl anywhere, got %lld",
              (long long)a.ttl_ms);
    TK_EXPECT(strcmp(a.token, "ab12") == 0, "extend gets TOKEN");
}

static void token_may_be_an_option_or_left_out(void **state)
{
    static const char *const no_token[] = {"release", "job", NULL};
    static const char *const option[] = {"extend", "--token", "-", "job",
                                         NULL};
    static const char *const twice[] = {"release", "--token", "a",
                                        "job",     "b",       NULL};
    struct line l;
    struct cli_args a;

    (void)state;
    parse_ok(CLI_CMD_RELEASE, no_token, &l, &a);
    TK_EXPECT(a.token == NULL, "no TOKEN parses, for DLOCK_TOKEN");
    parse_ok(CLI_CMD_EXTEND, option, &l, &a);
    TK_EXPECT(strcmp(a.token, "-") == 0, "--token - asks for stdin");
    parse_refused(CLI_CMD_RELEASE, twice, "TOKEN given twice");
}

static void other_commands_refuse_what_they_do_not_use(void **state)
{
    static const char *const release_extra[] = {"release", "job", "t", "x",
                                                NULL};
    static const char *const release_ttl[] = {"release", "--ttl", "1s",
                                              "job",     "t",     NULL};
    static const char *const status_wait[] = {"status", "-w", "1s", "job",
                                              NULL};
    static const char *const acquire_fail_open[] = {"acquire", "--fail-open",
                                                    "job", NULL};
    static const char *const acquire_two_keys[] = {"acquire", "a", "b", NULL};

    (void)state;
    parse_refused(CLI_CMD_RELEASE, release_extra, "unexpected argument 'x'");
    parse_refused(CLI_CMD_RELEASE, release_ttl,
                  "--ttl is not used by 'release'");
    parse_refused(CLI_CMD_STATUS, status_wait, "--wait is not used by");
    parse_refused(CLI_CMD_ACQUIRE, acquire_fail_open,
                  "--fail-open is not used by 'acquire'");
    parse_refused(CLI_CMD_ACQUIRE, acquire_two_keys, "unexpected argument");
}

static void help_skips_the_operand_checks(void **state)
{
    static const char *const w[] = {"release", "--help", NULL};
    struct line l;
    struct cli_args a;

    (void)state;
    parse_ok(CLI_CMD_RELEASE, w, &l, &a);
    TK_EXPECT(a.help, "--help is set");
}

static void status_takes_json_after_the_key(void **state)
{
    static const char *const w[] = {"status", "job", "--json", NULL};
    struct line l;
    struct cli_args a;

    (void)state;
    parse_ok(CLI_CMD_STATUS, w, &l, &a);
    TK_EXPECT(a.json && strcmp(a.key, "job") == 0, "--json after KEY");
}

static void every_command_takes_the_replica_options(void **state)
{
    static const char *const w[] = {"acquire", "--wait-replicas",
                                    "2",       "--wait-replicas-timeout",
                                    "250ms",   "job",
                                    NULL};
    static const char *const zero[] = {"run",  "--wait-replicas",
                                       "0",    "job",
                                       "true", NULL};
    static const char *const many[] = {"status", "--wait-replicas", "65",
                                       "job", NULL};
    static const char *const never[] = {"release", "--wait-replicas-timeout",
                                        "0",       "job",
                                        "t",       NULL};
    struct line l;
    struct cli_args a;

    (void)state;
    parse_ok(CLI_CMD_ACQUIRE, w, &l, &a);
    TK_EXPECT(a.wait_replicas == 2 && a.wait_replicas_timeout_ms == 250,
              "2 replicas within 250 ms, got %d within %lld", a.wait_replicas,
              (long long)a.wait_replicas_timeout_ms);
    parse_refused(CLI_CMD_RUN, zero, "1..64");
    parse_refused(CLI_CMD_STATUS, many, "1..64");
    parse_refused(CLI_CMD_RELEASE, never, "1 ms to 1 h");
}

static void run_every_takes_a_tick_and_the_lease_options(void **state)
{
    static const char *const w[] = {"run", "--every", "1m",     "--ttl",
                                    "10s", "--grace", "1s",     "-q",
                                    "job", "--",      "report", NULL};
    static const char *const once[] = {"run", "job", "true", NULL};
    struct line l;
    struct cli_args a;

    (void)state;
    parse_ok(CLI_CMD_RUN, w, &l, &a);
    TK_EXPECT(a.every_ms == 60000, "--every 1m is 60000 ms, got %lld",
              (long long)a.every_ms);
    TK_EXPECT(a.ttl_ms == 10000 && a.grace_ms == 1000 && a.quiet,
              "--ttl, --grace and --quiet go with --every");
    TK_EXPECT(strcmp(a.command[0], "report") == 0, "the command follows");
    parse_ok(CLI_CMD_RUN, once, &l, &a);
    TK_EXPECT(a.every_ms == 0, "without --every, run runs once");
}

static void run_every_refuses_the_options_of_a_single_run(void **state)
{
    static const char *const wait[] = {"run", "--every", "1s",   "-w",
                                       "1s",  "job",     "true", NULL};
    static const char *const fail_open[] = {"run", "--fail-open", "--every",
                                            "1s",  "job",         "true",
                                            NULL};
    static const char *const code[] = {"run", "--every", "1s",   "-E",
                                       "0",   "job",     "true", NULL};
    static const char *const zero[] = {"run", "--every", "0",
                                       "job", "true",    NULL};
    static const char *const junk[] = {"run", "--every", "often",
                                       "job", "true",    NULL};

    (void)state;
    parse_refused(CLI_CMD_RUN, wait, "--wait is not used with --every");
    parse_refused(CLI_CMD_RUN, fail_open,
                  "--fail-open is not used with --every");
    parse_refused(CLI_CMD_RUN, code,
                  "--conflict-exit-code is not used with --every");
    parse_refused(CLI_CMD_RUN, zero, "--every '0'");
    parse_refused(CLI_CMD_RUN, junk, "--every 'often'");
}

static void leader_takes_key_and_command_like_run(void **state)
{
    static const char *const w[] = {"leader",  "--ttl",  "2s",
                                    "--grace", "500ms",  "role",
                                    "consume", "--wait", NULL};
    static const char *const no_command[] = {"leader", "role", NULL};
    static const char *const wait[] = {"leader", "-w", "1s",
                                       "role",   "x",  NULL};
    static const char *const every[] = {"leader", "--every", "1s",
                                        "role",   "x",       NULL};
    static const char *const after_key[] = {"leader", "role", "--ttl", "1s",
                                            "--",     "x",    NULL};
    struct line l;
    struct cli_args a;

    (void)state;
    parse_ok(CLI_CMD_LEADER, w, &l, &a);
    TK_EXPECT(a.ttl_ms == 2000 && a.grace_ms == 500, "--ttl and --grace");
    TK_EXPECT(strcmp(a.key, "role") == 0
                  && strcmp(a.command[0], "consume") == 0
                  && strcmp(a.command[1], "--wait") == 0,
              "everything after KEY is the command's");
    parse_refused(CLI_CMD_LEADER, no_command, "missing COMMAND");
    parse_refused(CLI_CMD_LEADER, wait, "--wait is not used by 'leader'");
    parse_refused(CLI_CMD_LEADER, every, "--every is not used by 'leader'");
    parse_refused(CLI_CMD_LEADER, after_key, "options go before KEY");
}

static void commands_are_found_by_name(void **state)
{
    (void)state;
    for (int i = 0; i < CLI_CMD_COUNT; i++)
        TK_EXPECT(cli_command_find(cli_command_name((enum cli_command)i)) == i,
                  "command %d is found by its name", i);
    TK_EXPECT(cli_command_find("lock") == -1, "there is no 'lock'");
    TK_EXPECT(cli_command_find("") == -1, "there is no ''");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(run_defaults_are_the_documented_ones),
        cmocka_unit_test(run_options_land_in_their_fields),
        cmocka_unit_test(run_leaves_the_commands_options_alone),
        cmocka_unit_test(run_usage_errors_are_refused),
        cmocka_unit_test(token_commands_take_key_and_token),
        cmocka_unit_test(token_may_be_an_option_or_left_out),
        cmocka_unit_test(other_commands_refuse_what_they_do_not_use),
        cmocka_unit_test(help_skips_the_operand_checks),
        cmocka_unit_test(status_takes_json_after_the_key),
        cmocka_unit_test(every_command_takes_the_replica_options),
        cmocka_unit_test(run_every_takes_a_tick_and_the_lease_options),
        cmocka_unit_test(run_every_refuses_the_options_of_a_single_run),
        cmocka_unit_test(leader_takes_key_and_command_like_run),
        cmocka_unit_test(commands_are_found_by_name),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
