/*
 * fuzz_utf8.h: an independent UTF-8 decoder for the fuzz targets' checks.
 *
 * The targets judge the code under test against this decoder, so it is
 * written from RFC 3629's code point ranges (a sequence is valid when it
 * decodes to a scalar value in the range its length allows, not a
 * surrogate, at most U+10FFFF) rather than from the byte patterns the
 * services' own validators test.  Two implementations of one rule that
 * agree on every input the fuzzer tries are the evidence; sharing this
 * one between targets keeps it a single reference.
 */
#ifndef DLOCK_FUZZ_UTF8_H
#define DLOCK_FUZZ_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes one UTF-8 sequence at p (n >= 1 bytes left) into *cp; returns
 * its length, or 0 if no valid sequence starts at p. */
static inline size_t fuzz_utf8_decode_one(const unsigned char *p, size_t n,
                                          uint32_t *cp)
{
    size_t len;
    uint32_t c, min;

    if (p[0] < 0x80) {
        *cp = p[0];
        return 1;
    }
    if ((p[0] & 0xE0) == 0xC0)
        len = 2, c = p[0] & 0x1F, min = 0x80;
    else if ((p[0] & 0xF0) == 0xE0)
        len = 3, c = p[0] & 0x0F, min = 0x800;
    else if ((p[0] & 0xF8) == 0xF0)
        len = 4, c = p[0] & 0x07, min = 0x10000;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (p[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    *cp = c;
    return len;
}

/* 1 if s[0..n) is valid UTF-8 (NUL bytes are allowed: U+0000). */
static inline int fuzz_utf8_valid(const unsigned char *s, size_t n)
{
    uint32_t cp;

    for (size_t i = 0; i < n;) {
        const size_t len = fuzz_utf8_decode_one(s + i, n - i, &cp);

        if (len == 0)
            return 0;
        i += len;
    }
    return 1;
}

#endif /* DLOCK_FUZZ_UTF8_H */
