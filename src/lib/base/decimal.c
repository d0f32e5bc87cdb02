/*
 * decimal.c: integers as decimal text (decimal.h).
 *
 * The length comes first, so that the digits can be written in place from
 * the last one back: no scratch buffer, no copy, no locale, no format to
 * parse.  The length is the base-2 length times log10(2) (1233 / 4096),
 * which is the digit count or one less, settled by one comparison with a
 * power of ten; the digits go two at a time from a table of "00".."99",
 * half the divisions of one at a time.
 */
#include "base/decimal.h"

static const uint64_t powers_of_ten[20] = {
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

/* "00" to "99", each number's two digits at twice the number. */
static const char two_digits[201] = "0001020304050607080910111213141516171819"
                                    "2021222324252627282930313233343536373839"
                                    "4041424344454647484950515253545556575859"
                                    "6061626364656667686970717273747576777879"
                                    "8081828384858687888990919293949596979899";

size_t dlock__decimal_len(uint64_t v)
{
    /* v | 1 has the digits of v (every power of ten past 1 is even) and
     * is never 0, whose count is 1 as 1's is. */
    const unsigned bits = 64u - (unsigned)__builtin_clzll(v | 1);
    const unsigned t = (bits * 1233u) >> 12; /* 0..19 */

    return t + ((v | 1) >= powers_of_ten[t]);
}

void dlock__decimal_put(char *out, uint64_t v, size_t n)
{
    size_t i = n;

    out[n] = '\0';
    while (v >= 100) {
        const unsigned r = (unsigned)(v % 100) * 2;

        v /= 100;
        out[--i] = two_digits[r + 1];
        out[--i] = two_digits[r];
    }
    if (v >= 10) {
        out[1] = two_digits[v * 2 + 1];
        out[0] = two_digits[v * 2];
    } else
        out[0] = (char)('0' + v);
}

size_t dlock__decimal_u64(char *out, uint64_t v)
{
    const size_t n = dlock__decimal_len(v);

    dlock__decimal_put(out, v, n);
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
