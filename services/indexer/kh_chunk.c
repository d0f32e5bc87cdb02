/*
 * kh_chunk.c: the chunker (see kh_chunk.h for the rules and invariants).
 *
 * One pass from the front: while more than target_bytes remain, pick the
 * best end in [pos + target/2, pos + target] by the rules in order, emit
 * the span, and start the next one overlap_bytes earlier (moved forward
 * to a character boundary).  Because overlap is below target/2 and every
 * end is past pos + target/2 (or, for the character-boundary rule, within
 * 4 bytes of pos + target), each step moves the start forward, so the
 * loop ends after at most len / (target/2 - overlap) + 1 spans.
 */
#include "kh_chunk.h"

#include <stdlib.h>

void kh_chunk_opts_init(kh_chunk_opts *opts)
{
    opts->target_bytes = 1000;
    opts->overlap_bytes = 100;
}

static int is_continuation(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

static int is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
           || c == '\v';
}

/* 1 if a chunk may end before t[e]: e is the end or starts a character. */
static int char_boundary(const unsigned char *t, size_t len, size_t e)
{
    return e >= len || !is_continuation(t[e]);
}

static int paragraph_end(const unsigned char *t, size_t len, size_t e)
{
    (void)len;
    return e >= 2 && t[e - 1] == '\n' && t[e - 2] == '\n';
}

/* 。 E3 80 82, ！ EF BC 81, ？ EF BC 9F: full-width stops end a sentence
 * without a following space. */
static int cjk_stop_before(const unsigned char *t, size_t e)
{
    if (e < 3)
        return 0;
    if (t[e - 3] == 0xE3 && t[e - 2] == 0x80 && t[e - 1] == 0x82)
        return 1;
    return t[e - 3] == 0xEF && t[e - 2] == 0xBC
           && (t[e - 1] == 0x81 || t[e - 1] == 0x9F);
}

static int sentence_end(const unsigned char *t, size_t len, size_t e)
{
    const unsigned char last = e > 0 ? t[e - 1] : 0;

    if ((last == '.' || last == '!' || last == '?') && e < len
        && is_space(t[e]))
        return 1;
    return cjk_stop_before(t, e);
}

static int space_end(const unsigned char *t, size_t len, size_t e)
{
    (void)len;
    return e > 0 && is_space(t[e - 1]) && char_boundary(t, len, e);
}

typedef int (*end_rule)(const unsigned char *t, size_t len, size_t e);

/* The largest e in [lo, hi] that rule accepts, or 0 if none does. */
static size_t last_end(const unsigned char *t, size_t len, size_t lo,
                       size_t hi, end_rule rule)
{
    size_t e;

    for (e = hi; e >= lo && e > 0; e--)
        if (rule(t, len, e))
            return e;
    return 0;
}

/* Where the chunk that starts at pos ends; only called with more than
 * target bytes left after pos. */
static size_t choose_end(const unsigned char *t, size_t len, size_t pos,
                         size_t target)
{
    static const end_rule rules[] = {paragraph_end, sentence_end, space_end};
    const size_t hi = pos + target;
    const size_t lo = pos + target / 2;
    size_t i, e;

    for (i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
        e = last_end(t, len, lo, hi, rules[i]);
        if (e != 0)
            return e;
    }
    for (e = hi; e + 3 >= hi && e > pos; e--)
        if (char_boundary(t, len, e))
            return e;
    return hi; /* not UTF-8 here: any cut is as good as another */
}

static int push_span(kh_chunk_span **spans, size_t *count, size_t *cap,
                     size_t offset, size_t length)
{
    if (*count == *cap) {
        const size_t ncap = *cap != 0 ? *cap * 2 : 8;
        kh_chunk_span *p = realloc(*spans, ncap * sizeof(*p));

        if (p == NULL)
            return -1;
        *spans = p;
        *cap = ncap;
    }
    (*spans)[*count].offset = offset;
    (*spans)[*count].length = length;
    (*count)++;
    return 0;
}

int kh_chunk_split(const char *text, size_t len, const kh_chunk_opts *opts,
                   kh_chunk_span **spans, size_t *count)
{
    const unsigned char *t = (const unsigned char *)text;
    const size_t target = opts->target_bytes;
    size_t cap = 0, pos = 0, end, next;

    *spans = NULL;
    *count = 0;
    if (target < KH_CHUNK_TARGET_MIN || opts->overlap_bytes >= target / 2)
        return -1;
    while (pos < len) {
        end = len - pos <= target ? len : choose_end(t, len, pos, target);
        if (push_span(spans, count, &cap, pos, end - pos) != 0) {
            free(*spans);
            *spans = NULL;
            *count = 0;
            return -1;
        }
        if (end == len)
            break;
        next = end - opts->overlap_bytes;
        while (next < end && !char_boundary(t, len, next))
            next++;
        pos = next;
    }
    return 0;
}
