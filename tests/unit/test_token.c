/*
 * test_token.c: owner tokens (src/lib/base/token.c).
 *
 * A token is the whole proof of ownership of a lock, so it must have the
 * documented shape (DLOCK_TOKEN_LEN lower-case hex digits) and must not
 * repeat.  10,000 tokens from one process are checked for duplicates by
 * sorting; with 128 random bits a duplicate means a broken source, never
 * bad luck.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "testkit.h"
#include "base/token.h"

#define TOKENS 10000

static int is_lower_hex(char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
}

static void token_is_32_lower_case_hex_digits(void **state)
{
    char token[DLOCK_TOKEN_LEN + 1];
    dlock__msg m;

    (void)state;
    TK_EXPECT(DLOCK_TOKEN_LEN == 32, "DLOCK_TOKEN_LEN is 32, got %d",
              DLOCK_TOKEN_LEN);
    memset(token, 'x', sizeof(token));
    TK_EXPECT(dlock__token_new(token, &m) == DLOCK_OK,
              "a token can be made: %s", m.text);
    TK_EXPECT(strlen(token) == DLOCK_TOKEN_LEN,
              "the token has %d "
              "characters and a NUL, got %zu",
              DLOCK_TOKEN_LEN, strlen(token));
    for (int i = 0; i < DLOCK_TOKEN_LEN; i++)
        TK_EXPECT(is_lower_hex(token[i]),
                  "character %d of %s is a "
                  "lower-case hex digit",
                  i, token);
    TK_EXPECT(dlock__token_valid(token), "a new token is valid: %s", token);
}

static int compare_tokens(const void *a, const void *b)
{
    return memcmp(a, b, DLOCK_TOKEN_LEN);
}

static void ten_thousand_tokens_are_distinct(void **state)
{
    char(*tokens)[DLOCK_TOKEN_LEN + 1] = calloc(TOKENS, sizeof(*tokens));
    dlock__msg m;

    (void)state;
    TK_EXPECT(tokens != NULL, "memory for %d tokens", TOKENS);
    for (int i = 0; i < TOKENS; i++)
        TK_EXPECT(dlock__token_new(tokens[i], &m) == DLOCK_OK,
                  "token %d can be made: %s", i, m.text);
    qsort(tokens, TOKENS, sizeof(*tokens), compare_tokens);
    for (int i = 1; i < TOKENS; i++)
        TK_EXPECT(memcmp(tokens[i - 1], tokens[i], DLOCK_TOKEN_LEN) != 0,
                  "no two of %d tokens are equal; %s repeats", TOKENS,
                  tokens[i]);
    free(tokens);
}

static void token_validation_accepts_hex_of_the_right_length_only(void **state)
{
    (void)state;
    TK_EXPECT(dlock__token_valid("0123456789abcdef0123456789ABCDEF"),
              "32 hex digits of either case are a token");
    TK_EXPECT(!dlock__token_valid("0123456789abcdef0123456789abcde"),
              "31 digits are not a token");
    TK_EXPECT(!dlock__token_valid("0123456789abcdef0123456789abcdef0"),
              "33 digits are not a token");
    TK_EXPECT(!dlock__token_valid("0123456789abcdef0123456789abcdeg"),
              "a 'g' is not a hex digit");
    TK_EXPECT(!dlock__token_valid(""), "the empty string is not a token");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(token_is_32_lower_case_hex_digits),
        cmocka_unit_test(ten_thousand_tokens_are_distinct),
        cmocka_unit_test(
            token_validation_accepts_hex_of_the_right_length_only),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
