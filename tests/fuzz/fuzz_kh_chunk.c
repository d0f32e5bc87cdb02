/*
 * fuzz_kh_chunk.c: fuzz target for kh-indexer's chunker, kh_chunk_split
 * (services/indexer/kh_chunk.c), against the rules kh_chunk.h documents.
 *
 * The input is five bytes of options, then the text:
 *   byte 0      control: bit 0 clear, the options are mapped into their
 *               valid range (target 16..1024, overlap below target / 2),
 *               so most inputs exercise the splitting itself; bit 0 set,
 *               they are taken as they come (bits 1 and 2: target or
 *               overlap counted down from SIZE_MAX), valid or not;
 *   bytes 1-2   the target size, little-endian;
 *   bytes 3-4   the overlap, little-endian;
 *   the rest    the text (a shorter input means zeros and no text).
 *
 * Properties checked on every input, each from kh_chunk.h's text rather
 * than from the code:
 *   - options are refused (-1, spans NULL, count 0) exactly when the target
 *     is below KH_CHUNK_TARGET_MIN or the overlap not below target / 2;
 *     valid ones are accepted, and an empty text gives no span;
 *   - coverage: the chunks, copied out as the indexer stores them and
 *     joined by dropping from each one the part that overlaps the one
 *     before, give back the text byte for byte;
 *   - overlap: each chunk starts overlap_bytes before the previous one
 *     ended, moved forward past continuation bytes only (so the overlap
 *     is at most overlap_bytes), and after the previous one's start;
 *   - size: every chunk is 1..target_bytes long, every chunk but the last
 *     at least target / 2 (the cut never looks into the first half), and
 *     there are at most len / (target / 2 - overlap) + 1 of them;
 *   - UTF-8: no start or end falls inside a valid multi-byte sequence,
 *     whatever the rest of the input is; when the input is valid UTF-8
 *     (fuzz_utf8.h's decoder), every chunk is valid UTF-8 on its own;
 *   - where cuts fall: a chunk that is not the last ends at the best end
 *     the rules allow, checked as optimality: its end satisfies rule r,
 *     no end in the window satisfies a rule before r, and none after it
 *     in the window satisfies r.  The rules, in order: a paragraph break
 *     ("\n\n" before the end), a sentence end ('.', '!' or '?' followed
 *     by white space, or 。！？ before the end), white space before the
 *     end (on a character boundary), each looked for in
 *     [start + target/2, start + target]; then a character boundary among
 *     the four ends start + target - 3 .. start + target; then, only if
 *     none of those exists, start + target itself.
 *
 * fuzz_target_selftest adds fixed checks: the defaults, the edges of the
 * valid option range, and a long mixed-script document with the defaults
 * (bigger than libFuzzer's inputs).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_target.h"
#include "fuzz_utf8.h"
#include "kh_chunk.h"

#define TARGET "kh_chunk"
#define HEADER 5
/* Bigger texts take no new paths; the checks are linear in the text. */
#define TEXT_MAX 8192
/* The mapped range of targets: small enough that fuzzed texts of a few
 * hundred bytes already make several chunks. */
#define MAPPED_TARGET_SPAN 1009

/* The rules of kh_chunk.h, in order of preference. */
enum rule { PARAGRAPH, SENTENCE, SPACE, CHARACTER, RULES };

typedef struct chunk_case {
    const unsigned char *text;
    size_t len;
    kh_chunk_opts opts;
    int opts_valid; /* what kh_chunk.h says of opts */
} chunk_case;

/* What the checks derive from the text once: for each rule, the last
 * end <= x that satisfies it (last[r][x], 0 for none, since no window
 * contains 0), and which positions lie strictly inside a valid
 * multi-byte sequence. */
typedef struct text_index {
    size_t *last[RULES];
    unsigned char *inside;
    int utf8;
} text_index;

static int is_white(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
           || c == '\v';
}

static int is_cont(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

static int at_boundary(const unsigned char *t, size_t len, size_t e)
{
    return e == len || !is_cont(t[e]);
}

/* 1 if t[e-3..e) is 。 (U+3002), ！ (U+FF01) or ？ (U+FF1F). */
static int after_cjk_stop(const unsigned char *t, size_t e)
{
    static const unsigned char stops[3][3] = {{0xE3, 0x80, 0x82},
                                              {0xEF, 0xBC, 0x81},
                                              {0xEF, 0xBC, 0x9F}};

    for (size_t i = 0; e >= 3 && i < 3; i++)
        if (memcmp(t + e - 3, stops[i], 3) == 0)
            return 1;
    return 0;
}

/* 1 if a chunk ending before t[e] satisfies rule r. */
static int satisfies(const unsigned char *t, size_t len, size_t e, enum rule r)
{
    switch (r) {
    case PARAGRAPH: return e >= 2 && t[e - 2] == '\n' && t[e - 1] == '\n';
    case SENTENCE:
        if (e >= 1 && e < len && strchr(".!?", t[e - 1]) != NULL
            && t[e - 1] != '\0' && is_white(t[e]))
            return 1;
        return after_cjk_stop(t, e);
    case SPACE: return e >= 1 && is_white(t[e - 1]) && at_boundary(t, len, e);
    case CHARACTER: return at_boundary(t, len, e);
    case RULES: break;
    }
    abort();
}

static void index_free(text_index *ix)
{
    for (int r = 0; r < RULES; r++)
        free(ix->last[r]);
    free(ix->inside);
}

static void index_text(const unsigned char *t, size_t len, text_index *ix)
{
    uint32_t cp;

    for (int r = 0; r < RULES; r++) {
        ix->last[r] = malloc((len + 1) * sizeof(size_t));
        if (ix->last[r] == NULL)
            abort();
        for (size_t e = 0; e <= len; e++) {
            const size_t before = e > 0 ? ix->last[r][e - 1] : 0;

            ix->last[r][e] = e > 0 && satisfies(t, len, e, r) ? e : before;
        }
    }
    ix->inside = calloc(len + 1, 1);
    if (ix->inside == NULL)
        abort();
    ix->utf8 = 1;
    for (size_t i = 0; i < len;) {
        const size_t n = fuzz_utf8_decode_one(t + i, len - i, &cp);

        if (n == 0) {
            ix->utf8 = 0;
            i++;
            continue;
        }
        memset(ix->inside + i + 1, 1, n - 1);
        i += n;
    }
}

static size_t span_end(const kh_chunk_span *s)
{
    return s->offset + s->length;
}

/* The ends rule r may pick for a chunk starting at pos: [*lo, *hi]. */
static void rule_window(const chunk_case *c, size_t pos, enum rule r,
                        size_t *lo, size_t *hi)
{
    const size_t target = c->opts.target_bytes;

    *hi = pos + target;
    *lo = r == CHARACTER ? pos + target - 3 : pos + target / 2;
}

/* Some end of rule r in its window for a chunk starting at pos? */
static int rule_has_end(const chunk_case *c, const text_index *ix, size_t pos,
                        enum rule r)
{
    size_t lo, hi;

    rule_window(c, pos, r, &lo, &hi);
    return ix->last[r][hi] >= lo;
}

/* A chunk that is not the last ends at the best end the rules allow. */
static void check_cut(const chunk_case *c, const text_index *ix,
                      const kh_chunk_span *s, size_t i)
{
    const size_t pos = s->offset, e = span_end(s);
    enum rule r;
    size_t lo, hi;

    /* The rules look back from the target only when the rest does not
     * fit in one chunk; a rest that fits is the last chunk, whole. */
    if (c->len - pos <= c->opts.target_bytes)
        fuzz_fail(TARGET,
                  "chunk %zu [%zu, %zu) is not the last, though"
                  " the %zu bytes left fit in one",
                  i, pos, e, c->len - pos);
    for (r = PARAGRAPH; r < RULES; r++) {
        rule_window(c, pos, r, &lo, &hi);
        if (e >= lo && e <= hi && satisfies(c->text, c->len, e, r))
            break;
        if (rule_has_end(c, ix, pos, r))
            fuzz_fail(TARGET,
                      "chunk %zu [%zu, %zu): rule %d had an end"
                      " (%zu) but the cut is elsewhere",
                      i, pos, e, (int)r, ix->last[r][hi]);
    }
    if (r == RULES) {
        if (e != pos + c->opts.target_bytes)
            fuzz_fail(TARGET,
                      "chunk %zu [%zu, %zu): no rule holds, yet"
                      " the cut is not at the target",
                      i, pos, e);
        return;
    }
    if (ix->last[r][hi] != e)
        fuzz_fail(TARGET,
                  "chunk %zu [%zu, %zu): a later end (%zu) also"
                  " satisfies rule %d",
                  i, pos, e, ix->last[r][hi], (int)r);
}

/* Size, order, overlap and UTF-8 rules of chunk i. */
static void check_span(const chunk_case *c, const text_index *ix,
                       const kh_chunk_span *s, size_t i, size_t n)
{
    const size_t target = c->opts.target_bytes;
    const size_t e = span_end(&s[i]);

    if (s[i].length < 1 || s[i].length > target || e > c->len)
        fuzz_fail(TARGET, "chunk %zu [%zu, +%zu) of %zu bytes: bad size", i,
                  s[i].offset, s[i].length, c->len);
    if (i + 1 < n && s[i].length < target / 2)
        fuzz_fail(TARGET,
                  "chunk %zu of %zu bytes is under half the target"
                  " %zu",
                  i, s[i].length, target);
    if (ix->inside[s[i].offset] || ix->inside[e])
        fuzz_fail(TARGET, "chunk %zu [%zu, %zu) cuts a UTF-8 sequence", i,
                  s[i].offset, e);
    if (ix->utf8 && !fuzz_utf8_valid(c->text + s[i].offset, s[i].length))
        fuzz_fail(TARGET, "chunk %zu of valid UTF-8 is not UTF-8", i);
    if (i == 0) {
        if (s[0].offset != 0)
            fuzz_fail(TARGET, "the first chunk starts at %zu", s[0].offset);
        return;
    }
    /* The previous end less the overlap, moved past continuation bytes
     * only (and never past the previous end). */
    const size_t prev_end = span_end(&s[i - 1]);
    size_t want = prev_end - c->opts.overlap_bytes;

    while (want < prev_end && is_cont(c->text[want]))
        want++;
    if (s[i].offset != want || s[i].offset <= s[i - 1].offset)
        fuzz_fail(TARGET,
                  "chunk %zu starts at %zu, expected %zu (previous"
                  " [%zu, %zu), overlap %zu)",
                  i, s[i].offset, want, s[i - 1].offset, prev_end,
                  c->opts.overlap_bytes);
}

/* Copies the chunks out and joins them minus their overlaps. */
static void check_reconstruction(const chunk_case *c, const kh_chunk_span *s,
                                 size_t n)
{
    unsigned char *joined = malloc(c->len + 1);
    unsigned char *prev = NULL;
    size_t at = 0;

    if (joined == NULL)
        abort();
    for (size_t i = 0; i < n; i++) {
        unsigned char *chunk = malloc(s[i].length);
        size_t shared = 0;

        if (chunk == NULL)
            abort();
        memcpy(chunk, c->text + s[i].offset, s[i].length);
        if (i > 0) {
            shared = span_end(&s[i - 1]) - s[i].offset;
            if (shared > c->opts.overlap_bytes || shared > s[i].length
                || memcmp(prev + s[i - 1].length - shared, chunk, shared) != 0)
                fuzz_fail(TARGET,
                          "chunks %zu and %zu overlap by %zu bytes"
                          " that differ or exceed the overlap",
                          i - 1, i, shared);
        }
        if (at + s[i].length - shared > c->len)
            fuzz_fail(TARGET, "the chunks hold more than the text");
        memcpy(joined + at, chunk + shared, s[i].length - shared);
        at += s[i].length - shared;
        free(prev);
        prev = chunk;
    }
    free(prev);
    if (at != c->len || memcmp(joined, c->text, c->len) != 0)
        fuzz_fail(TARGET,
                  "the chunks joined give %zu bytes, not the %zu of"
                  " the text",
                  at, c->len);
    free(joined);
}

static void check_chunks(const chunk_case *c, const kh_chunk_span *s, size_t n)
{
    const size_t step = c->opts.target_bytes / 2 - c->opts.overlap_bytes;
    text_index ix;

    if (n > c->len / step + 1)
        fuzz_fail(TARGET, "%zu chunks of %zu bytes, more than the bound", n,
                  c->len);
    index_text(c->text, c->len, &ix);
    for (size_t i = 0; i < n; i++) {
        check_span(c, &ix, s, i, n);
        if (i + 1 < n)
            check_cut(c, &ix, &s[i], i);
    }
    index_free(&ix);
    if (n > 0 && span_end(&s[n - 1]) != c->len)
        fuzz_fail(TARGET, "the last chunk ends at %zu, not at %zu",
                  span_end(&s[n - 1]), c->len);
    check_reconstruction(c, s, n);
}

/* Splits c's text and checks the result against every rule. */
static void check_case(const chunk_case *c)
{
    static kh_chunk_span sentinel;
    kh_chunk_span *spans = &sentinel; /* a refusal must reset both */
    size_t count = 12345;
    const int rc = kh_chunk_split((const char *)c->text, c->len, &c->opts,
                                  &spans, &count);

    if (!c->opts_valid) {
        if (rc != -1 || spans != NULL || count != 0)
            fuzz_fail(TARGET,
                      "target %zu overlap %zu: not refused cleanly"
                      " (rc %d, count %zu)",
                      c->opts.target_bytes, c->opts.overlap_bytes, rc, count);
        return;
    }
    if (rc != 0)
        fuzz_fail(TARGET, "target %zu overlap %zu: valid options refused",
                  c->opts.target_bytes, c->opts.overlap_bytes);
    if (c->len == 0 && (spans != NULL || count != 0))
        fuzz_fail(TARGET, "an empty text gave %zu chunks", count);
    if (c->len > 0 && count == 0)
        fuzz_fail(TARGET, "%zu bytes gave no chunk", c->len);
    check_chunks(c, spans, count);
    free(spans);
}

/* The options the input's first bytes stand for (see the top). */
static void read_options(const uint8_t *data, size_t size, chunk_case *c)
{
    uint8_t h[HEADER] = {0};
    size_t target, overlap;

    memcpy(h, data, size < HEADER ? size : HEADER);
    target = (size_t)h[1] | (size_t)h[2] << 8;
    overlap = (size_t)h[3] | (size_t)h[4] << 8;
    if ((h[0] & 1) == 0) {
        target = KH_CHUNK_TARGET_MIN + target % MAPPED_TARGET_SPAN;
        overlap %= target / 2;
    } else {
        if (h[0] & 2)
            target = SIZE_MAX - target;
        if (h[0] & 4)
            overlap = SIZE_MAX - overlap;
    }
    c->opts.target_bytes = target;
    c->opts.overlap_bytes = overlap;
    c->opts_valid = target >= KH_CHUNK_TARGET_MIN && overlap < target / 2;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    chunk_case c;

    if (size > HEADER + TEXT_MAX)
        return 0;
    read_options(data, size, &c);
    c.text = size > HEADER ? data + HEADER : data;
    c.len = size > HEADER ? size - HEADER : 0;
    check_case(&c);
    return 0;
}

/* A document of 280 pieces mixing English, Chinese, emoji, runs without
 * a space and paragraph breaks. */
static size_t mixed_document(unsigned char *buf, size_t cap)
{
    static const char *const parts[] = {
        "The lock is held by one client at a time. ",
        "锁在同一时间只由一个客户端持有。",
        "Renewal failed! ",
        "续约失败！是否重试？",
        "\xF0\x9F\x94\x92 ",
        "a-very-long-word-without-any-space-at-all-to-break-on-",
        "\n\n",
    };
    size_t at = 0;

    for (unsigned i = 0; i < 40 * 7; i++) {
        const char *p = parts[(i * 5 + i / 7) % 7];
        const size_t n = strlen(p);

        if (at + n > cap)
            break;
        memcpy(buf + at, p, n);
        at += n;
    }
    return at;
}

void fuzz_target_selftest(void)
{
    static unsigned char doc[32768];
    static const struct {
        size_t target, overlap;
        int valid;
    } edges[] = {
        {0, 0, 0},
        {15, 0, 0},
        {16, 7, 1},
        {16, 8, 0},
        {17, 8, 0},
        {18, 8, 1},
        {SIZE_MAX, SIZE_MAX / 2 - 1, 1},
        {SIZE_MAX, SIZE_MAX, 0},
    };
    chunk_case c = {doc, 0, {0, 0}, 1};

    c.len = mixed_document(doc, sizeof(doc));
    kh_chunk_opts_init(&c.opts);
    if (c.opts.target_bytes != 1000 || c.opts.overlap_bytes != 100)
        fuzz_fail(TARGET, "the defaults are not 1000/100 as documented");
    if (!fuzz_utf8_valid(doc, c.len))
        fuzz_fail(TARGET, "the self-test document is not UTF-8");
    check_case(&c);
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
        c.opts.target_bytes = edges[i].target;
        c.opts.overlap_bytes = edges[i].overlap;
        c.opts_valid = edges[i].valid;
        check_case(&c);
    }
}
