/*
 * test_error.c: the one error space (include/dlock/error.h, src/lib/base/error.c).
 *
 * Error values are stored and compared across versions, so each one is
 * pinned to its number here, and each has its own non-empty text and its
 * own stable name.  A new code added to the enum must be added to the table
 * below, or the count check fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "dlock/error.h"
#include "testkit.h"

static const struct {
    dlock_err err;
    int value;
    const char *name;
} codes[] = {
    {DLOCK_OK, 0, "DLOCK_OK"},
    {DLOCK_BUSY, 1, "DLOCK_BUSY"},
    {DLOCK_LOST, 2, "DLOCK_LOST"},
    {DLOCK_UNAVAILABLE, 3, "DLOCK_UNAVAILABLE"},
    {DLOCK_TIMEOUT, 4, "DLOCK_TIMEOUT"},
    {DLOCK_PROTOCOL, 5, "DLOCK_PROTOCOL"},
    {DLOCK_TLS, 6, "DLOCK_TLS"},
    {DLOCK_INVALID, 7, "DLOCK_INVALID"},
    {DLOCK_NOMEM, 8, "DLOCK_NOMEM"},
    {DLOCK_AUTH, 9, "DLOCK_AUTH"},
    {DLOCK_SERVER, 10, "DLOCK_SERVER"},
    {DLOCK_SYSTEM, 11, "DLOCK_SYSTEM"},
    {DLOCK_STATE, 12, "DLOCK_STATE"},
    {DLOCK_UNPROVEN, 13, "DLOCK_UNPROVEN"},
    {DLOCK_UNREPLICATED, 14, "DLOCK_UNREPLICATED"},
};

#define NCODES (sizeof(codes) / sizeof(*codes))

static void error_values_are_fixed(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCODES; i++)
        TK_EXPECT((int)codes[i].err == codes[i].value, "%s is %d, got %d",
                  codes[i].name, codes[i].value, (int)codes[i].err);
    /* Every value up to the last is listed: no gaps, none forgotten. */
    TK_EXPECT(NCODES == (size_t)DLOCK_UNREPLICATED + 1,
              "the table lists all "
              "%d codes",
              (int)DLOCK_UNREPLICATED + 1);
}

static void every_error_has_a_distinct_non_empty_text(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCODES; i++) {
        const char *text = dlock_strerror(codes[i].err);

        TK_EXPECT(text != NULL && text[0] != '\0', "%s has a text",
                  codes[i].name);
        TK_EXPECT(strcmp(text, dlock_strerror((dlock_err)999)) != 0,
                  "%s has its own text, not the unknown-code text",
                  codes[i].name);
        for (size_t j = 0; j < i; j++)
            TK_EXPECT(strcmp(text, dlock_strerror(codes[j].err)) != 0,
                      "%s and %s have different texts (both \"%s\")",
                      codes[i].name, codes[j].name, text);
    }
}

static void every_error_has_its_stable_name(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCODES; i++) {
        const char *name = dlock_errname(codes[i].err);

        TK_EXPECT(name != NULL && strcmp(name, codes[i].name) == 0,
                  "code %d is named %s, got %s", codes[i].value, codes[i].name,
                  name ? name : "(null)");
    }
}

static void unknown_value_gets_a_fixed_text_and_name(void **state)
{
    const char *text = dlock_strerror((dlock_err)-1);
    const char *name = dlock_errname((dlock_err)13);

    (void)state;
    TK_EXPECT(text != NULL && text[0] != '\0', "an unknown code has a text");
    TK_EXPECT(name != NULL && name[0] != '\0', "an unknown code has a name");
    TK_EXPECT(strcmp(text, dlock_strerror((dlock_err)1000)) == 0,
              "every unknown code gets the same text");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(error_values_are_fixed),
        cmocka_unit_test(every_error_has_a_distinct_non_empty_text),
        cmocka_unit_test(every_error_has_its_stable_name),
        cmocka_unit_test(unknown_value_gets_a_fixed_text_and_name),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
