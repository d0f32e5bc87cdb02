/*
 * test_cli_token.c: where release and extend find TOKEN (cli_token.h):
 * the operand, the first line of stdin for "-", else $DLOCK_TOKEN; and
 * what is refused, with a reason that says where a token may come from.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "cli_token.h"
#include "testkit.h"

/* A stream over text, for stdin. */
static FILE *stream_of(const char *text)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");

    TK_EXPECT(f != NULL, "fmemopen");
    return f;
}

static void operand_wins_over_environment(void **state)
{
    char buf[CLI_TOKEN_MAX], why[160];

    (void)state;
    TK_EXPECT(cli_token_resolve("abc", "fromenv", NULL, buf, why, sizeof(why))
                      == 0
                  && strcmp(buf, "abc") == 0,
              "the operand is the token");
}

static void dash_reads_one_line_of_stdin(void **state)
{
    char buf[CLI_TOKEN_MAX], why[160];
    FILE *in = stream_of("  0123abcd \nsecond line\n");

    (void)state;
    TK_EXPECT(cli_token_resolve("-", "fromenv", in, buf, why, sizeof(why)) == 0
                  && strcmp(buf, "0123abcd") == 0,
              "the first line, trimmed, got '%s'", buf);
    fclose(in);
    in = stream_of("no-newline");
    TK_EXPECT(cli_token_resolve("-", NULL, in, buf, why, sizeof(why)) == 0
                  && strcmp(buf, "no-newline") == 0,
              "a last line without \\n");
    fclose(in);
}

static void environment_is_used_without_operand(void **state)
{
    char buf[CLI_TOKEN_MAX], why[160];

    (void)state;
    TK_EXPECT(cli_token_resolve(NULL, "fromenv\n", NULL, buf, why, sizeof(why))
                      == 0
                  && strcmp(buf, "fromenv") == 0,
              "DLOCK_TOKEN is the token");
}

static void missing_or_empty_tokens_are_refused(void **state)
{
    char buf[CLI_TOKEN_MAX], why[160], longline[300];
    FILE *in;

    (void)state;
    TK_EXPECT(cli_token_resolve(NULL, NULL, NULL, buf, why, sizeof(why)) == -1
                  && strstr(why, "DLOCK_TOKEN") != NULL,
              "no token anywhere names the ways to give one: %s", why);
    TK_EXPECT(cli_token_resolve(NULL, "", NULL, buf, why, sizeof(why)) == -1,
              "an empty DLOCK_TOKEN is no token");
    in = stream_of("");
    TK_EXPECT(cli_token_resolve("-", "env", in, buf, why, sizeof(why)) == -1
                  && strstr(why, "stdin") != NULL,
              "empty stdin is refused, not replaced by DLOCK_TOKEN: %s", why);
    fclose(in);
    memset(longline, 'a', sizeof(longline) - 2);
    longline[sizeof(longline) - 2] = '\n';
    longline[sizeof(longline) - 1] = '\0';
    in = stream_of(longline);
    TK_EXPECT(cli_token_resolve("-", NULL, in, buf, why, sizeof(why)) == -1
                  && strstr(why, "too long") != NULL,
              "a huge line is refused");
    fclose(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(operand_wins_over_environment),
        cmocka_unit_test(dash_reads_one_line_of_stdin),
        cmocka_unit_test(environment_is_used_without_operand),
        cmocka_unit_test(missing_or_empty_tokens_are_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
