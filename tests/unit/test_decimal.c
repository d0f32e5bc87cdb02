/*
 * test_decimal.c: integers as decimal text (src/lib/base/decimal.c).
 *
 * Every TTL, fence and floor libdlock sends goes through these, and a
 * fence is compared by Redis as decimal text, so a wrong digit is a wrong
 * fence.  Each value is checked against snprintf, which they replace (the
 * digits, the length, nothing written past the NUL): the edges (0, one
 * digit, each power of ten and the numbers either side of it, the
 * extremes of both types) and a million values spread over the range.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "testkit.h"
#include "base/decimal.h"

/* Checks one written value against snprintf's text: the same digits,
 * the length returned, the NUL after them, and no byte written past it
 * (got was filled with 'x'). */
static void check_text(const char *want, int wlen, const char *got, size_t len)
{
    TK_EXPECT(len == (size_t)wlen && strcmp(got, want) == 0,
              "%s is written as %s (%d characters), got \"%.22s\" (%zu)", want,
              want, wlen, got, len);
    TK_EXPECT(got[len + 1] == 'x', "nothing is written past the NUL of %s",
              want);
}

static void check_u64(uint64_t v)
{
    char want[32], got[DLOCK__DECIMAL_MAX + 1];
    const int wlen = snprintf(want, sizeof(want), "%" PRIu64, v);

    memset(got, 'x', sizeof(got));
    check_text(want, wlen, got, dlock__decimal_u64(got, v));
    TK_EXPECT(dlock__decimal_len(v) == (size_t)wlen,
              "%s has %d digits, dlock__decimal_len says %zu", want, wlen,
              dlock__decimal_len(v));
}

static void check_i64(int64_t v)
{
    char want[32], got[DLOCK__DECIMAL_MAX + 1];
    const int wlen = snprintf(want, sizeof(want), "%" PRId64, v);

    memset(got, 'x', sizeof(got));
    check_text(want, wlen, got, dlock__decimal_i64(got, v));
}

static void unsigned_edges_read_as_printf_writes_them(void **state)
{
    uint64_t p = 1;

    (void)state;
    check_u64(0);
    check_u64(UINT64_MAX);
    check_u64(UINT64_MAX - 1);
    check_u64((uint64_t)1 << 53); /* where a Lua number stops being exact */
    check_u64(((uint64_t)1 << 53) + 1);
    /* 10^0 to 10^19, the last power of ten in a uint64_t. */
    for (int i = 0; i < 20; i++) {
        check_u64(p);
        check_u64(p - 1);
        check_u64(p + 1);
        if (i < 19)
            p *= 10;
    }
}

static void signed_edges_read_as_printf_writes_them(void **state)
{
    int64_t p = 1;

    (void)state;
    check_i64(0);
    check_i64(-1);
    check_i64(INT64_MAX);
    check_i64(INT64_MIN);
    check_i64(INT64_MIN + 1);
    /* 10^0 to 10^18; 10^19 does not fit in an int64_t. */
    for (int i = 0; i < 19; i++) {
        check_i64(p);
        check_i64(-p);
        check_i64(p - 1);
        check_i64(1 - p);
        if (i < 18)
            p *= 10;
    }
}

/* A million values from a 64-bit LCG, and the same shifted right by
 * every amount, so that every length is covered many times. */
static void a_million_values_read_as_printf_writes_them(void **state)
{
    uint64_t x = 0x9e3779b97f4a7c15u;

    (void)state;
    for (int i = 0; i < 1000000; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        const uint64_t v = x >> (i % 64);
        check_u64(v);
        check_i64((int64_t)v);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unsigned_edges_read_as_printf_writes_them),
        cmocka_unit_test(signed_edges_read_as_printf_writes_them),
        cmocka_unit_test(a_million_values_read_as_printf_writes_them),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
