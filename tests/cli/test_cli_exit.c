/*
 * test_cli_exit.c: the exit codes (src/cli/cli_exit.c) and the one-line
 * messages (src/cli/cli_say.c).
 *
 * Scripts branch on the codes, so each dlock_err is pinned to its
 * documented code, and a child's wait status is reported as a shell would.
 * Messages must stay one line whatever text a server or a key puts in
 * them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <sys/wait.h>

#include "cli_exit.h"
#include "cli_say.h"
#include "testkit.h"

static void each_error_has_its_documented_code(void **state)
{
    static const struct {
        dlock_err err;
        int code;
    } table[] = {
        {DLOCK_OK, 0},           {DLOCK_BUSY, 75},     {DLOCK_LOST, 76},
        {DLOCK_UNAVAILABLE, 69}, {DLOCK_TIMEOUT, 69},  {DLOCK_PROTOCOL, 69},
        {DLOCK_TLS, 69},         {DLOCK_AUTH, 69},     {DLOCK_SERVER, 69},
        {DLOCK_INVALID, 64},     {DLOCK_NOMEM, 70},    {DLOCK_SYSTEM, 70},
        {DLOCK_STATE, 70},       {(dlock_err)999, 70},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        TK_EXPECT(cli_exit_of(table[i].err, CLI_EXIT_BUSY) == table[i].code,
                  "dlock_err %d exits %d", (int)table[i].err, table[i].code);
}

static void conflict_exit_code_replaces_only_busy(void **state)
{
    (void)state;
    TK_EXPECT(cli_exit_of(DLOCK_BUSY, 9) == 9, "busy exits 9 with -E 9");
    TK_EXPECT(cli_exit_of(DLOCK_BUSY, 0) == 0, "busy exits 0 with -E 0");
    TK_EXPECT(cli_exit_of(DLOCK_UNAVAILABLE, 9) == 69,
              "unavailable still exits 69");
}

static void wait_status_is_reported_like_a_shell(void **state)
{
    (void)state;
    TK_EXPECT(cli_exit_of_wait_status(W_EXITCODE(0, 0)) == 0, "exit 0");
    TK_EXPECT(cli_exit_of_wait_status(W_EXITCODE(3, 0)) == 3, "exit 3");
    TK_EXPECT(cli_exit_of_wait_status(W_EXITCODE(255, 0)) == 255, "exit 255");
    TK_EXPECT(cli_exit_of_wait_status(W_EXITCODE(0, SIGKILL)) == 137,
              "SIGKILL is 137");
    TK_EXPECT(cli_exit_of_wait_status(W_EXITCODE(0, SIGTERM)) == 143,
              "SIGTERM is 143");
}

static void messages_never_span_lines(void **state)
{
    char buf[32];

    (void)state;
    TK_EXPECT(strcmp(cli_say_sanitize(buf, sizeof(buf), "a\nb\r\tc\x1b[2J"),
                     "a?b??c?[2J")
                  == 0,
              "control characters become '?', got \"%s\"", buf);
    TK_EXPECT(strcmp(cli_say_sanitize(buf, 4, "abcdef"), "abc") == 0,
              "long text is cut at the buffer, got \"%s\"", buf);
    TK_EXPECT(strcmp(cli_say_sanitize(buf, sizeof(buf), "caf\xc3\xa9"),
                     "caf\xc3\xa9")
                  == 0,
              "UTF-8 passes unchanged");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(each_error_has_its_documented_code),
        cmocka_unit_test(conflict_exit_code_replaces_only_busy),
        cmocka_unit_test(wait_status_is_reported_like_a_shell),
        cmocka_unit_test(messages_never_span_lines),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
