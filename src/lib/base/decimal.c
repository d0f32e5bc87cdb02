/*
 * decimal.c: integers as decimal text (decimal.h).
 *
 * The length comes first, from comparisons with the powers of ten, so
 * that the digits can be written in place from the last one back: no
 * scratch buffer, no copy, no locale, no format to parse.
 */
#include "base/decimal.h"

static const uint64_t powers_of_ten[] = {
    1u,
    10u,
    100u,
    1000u,
    10000u,
    100000u,
    1000000u,
    10000000u,
    100000000u,
    1000000000u,
    10000000000u,
    100000000000u,
    1000000000000u,
    10000000000000u,
    100000000000000u,
    1000000000000000u,
    10000000000000000u,
    100000000000000000u,
    1000000000000000000u,
    10000000000000000000u,
};

size_t dlock__decimal_len(uint64_t v)
{
    size_t n = 1;

    while (n < sizeof(powers_of_ten) / sizeof(*powers_of_ten)
           && v >= powers_of_ten[n])
        n++;
    return n;
}

size_t dlock__decimal_u64(char *out, uint64_t v)
{
    const size_t n = dlock__decimal_len(v);

    out[n] = '\0';
    for (size_t i = n; i > 0; v /= 10)
        out[--i] = (char)('0' + v % 10);
    return n;
}

size_t dlock__decimal_i64(char *out, int64_t v)
{
    if (v >= 0)
        return dlock__decimal_u64(out, (uint64_t)v);
    out[0] = '-';
    /* The magnitude in unsigned arithmetic: -INT64_MIN does not fit. */
    return 1 + dlock__decimal_u64(out + 1, 0 - (uint64_t)v);
}
