/*
 * fuzz_rv_hparse.c: fuzz target for reviewd's HTTP/1.1 request parser
 * (services/reviewd/http/rv_hparse.c), the first code every byte from a
 * client meets.
 *
 * The input is the bytes of a connection: a head, then whatever follows
 * (a body, the next request).  Its first byte picks where the bytes are
 * split, as a socket would deliver them.  Properties checked on every
 * input, besides "no crash, leak or UB":
 *   - the head gives the same result (done, or the same refusal) whole
 *     and fed in pieces;
 *   - a refusal is one of the documented statuses with a code and a
 *     detail, and is decided within RV_HP_HEAD_MAX bytes;
 *   - a complete head is at most RV_HP_HEAD_MAX bytes, its method is a
 *     non-empty string and its target starts with '/' or is "*";
 *   - the body after it decodes to the same bytes, ending at the same
 *     place (or refused the same), whole and a byte at a time, and never
 *     yields more data than it consumed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_target.h"
#include "http/rv_hparse.h"

#define TARGET "rv_hparse"
#define INPUT_MAX (64 * 1024)

static char whole[INPUT_MAX];
static char split[INPUT_MAX];

static int status_ok(unsigned s)
{
    return s == 400 || s == 413 || s == 414 || s == 431 || s == 501
           || s == 505;
}

/* Decodes in[0..n) with pieces of at most step bytes; the data goes to
 * out.  Returns the result, with the bytes used and the data length. */
static rv_hp_result decode(const rv_hhead *h, const char *in, size_t n,
                           size_t step, char *out, size_t *used_out,
                           size_t *olen, unsigned *status)
{
    rv_hbody b;
    rv_hp_result r = RV_HP_MORE;
    size_t off = 0, end = 0, o = 0;

    rv_hbody_init(&b, h, 4096);
    while (r == RV_HP_MORE && end < n) {
        end = end + step < n ? end + step : n;
        while (off < end && r == RV_HP_MORE) {
            const char *d;
            size_t dl, used;

            r = rv_hbody_feed(&b, in + off, end - off, &used, &d, &dl);
            if (used > end - off || dl > used)
                fuzz_fail(TARGET, "the decoder used more than it was given");
            if (dl > 0)
                memcpy(out + o, d, dl);
            o += dl;
            off += used;
        }
    }
    *used_out = off;
    *olen = o;
    *status = r == RV_HP_ERROR ? b.err.status : 0;
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char out1[INPUT_MAX], out2[INPUT_MAX];
    rv_hhead a, b;
    rv_hp_result ra, rb = RV_HP_MORE;
    size_t step, n, i;

    if (size < 1 || size > INPUT_MAX)
        return 0;
    step = (size_t)data[0] % 64 + 1;
    n = size - 1;
    memcpy(whole, data + 1, n);
    memcpy(split, data + 1, n);
    rv_hparse_init(&a);
    ra = rv_hparse_head(&a, whole, n);
    rv_hparse_init(&b);
    for (i = 0; i < n && rb == RV_HP_MORE;) {
        i = i + step < n ? i + step : n;
        rb = rv_hparse_head(&b, split, i);
    }
    if (ra != rb)
        fuzz_fail(TARGET, "whole %d, in pieces of %zu %d", ra, step, rb);
    if (ra == RV_HP_ERROR) {
        if (!status_ok(a.err.status) || a.err.status != b.err.status
            || a.err.code == NULL || a.err.detail == NULL)
            fuzz_fail(TARGET, "refusal %u (in pieces %u)", a.err.status,
                      b.err.status);
        if (a.pos > RV_HP_HEAD_MAX)
            fuzz_fail(TARGET, "decided after %zu bytes", a.pos);
        return 0;
    }
    if (ra == RV_HP_MORE) {
        if (n > RV_HP_HEAD_MAX)
            fuzz_fail(TARGET, "%zu bytes and no decision", n);
        return 0;
    }
    if (a.head_len != b.head_len || a.head_len > RV_HP_HEAD_MAX
        || a.head_len > n)
        fuzz_fail(TARGET, "head of %zu bytes (in pieces %zu)", a.head_len,
                  b.head_len);
    if (a.method[0] == '\0'
        || (a.target[0] != '/' && strcmp(a.target, "*") != 0))
        fuzz_fail(TARGET, "method \"%s\", target \"%s\"", a.method, a.target);
    (void)rv_hparse_header(&a, whole, "Host");
    {
        size_t u1, u2, l1, l2;
        unsigned s1, s2;
        const rv_hp_result r1 = decode(&a, whole + a.head_len, n - a.head_len,
                                       n, out1, &u1, &l1, &s1);
        const rv_hp_result r2 = decode(&a, whole + a.head_len, n - a.head_len,
                                       1, out2, &u2, &l2, &s2);

        if (r1 != r2 || l1 != l2 || memcmp(out1, out2, l1) != 0 || s1 != s2
            || (r1 != RV_HP_ERROR && u1 != u2))
            fuzz_fail(TARGET, "the body decodes differently in pieces");
        if (r1 == RV_HP_ERROR && !status_ok(s1))
            fuzz_fail(TARGET, "body refusal %u", s1);
    }
    return 0;
}
