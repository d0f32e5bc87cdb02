/*
 * test_kh_chunk.c: the chunker's rules and invariants (kh_chunk.h).
 *
 * Each rule has a case built so that only that rule can explain where the
 * cut falls (a paragraph break beats a sentence end, a sentence end beats
 * a space, Chinese full stops count as sentence ends, and a text with no
 * break at all is cut on a character boundary, never inside a 3-byte
 * character).  The invariants are then checked over generated texts of
 * mixed scripts and over random bytes, for several sizes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kh_chunk.h"

/* Checks every invariant of kh_chunk.h for one result; utf8 says whether
 * the input is valid UTF-8 (then boundaries are checked too). */
static void check_invariants(const char *text, size_t len,
                             const kh_chunk_opts *o, const kh_chunk_span *s,
                             size_t n, int utf8)
{
    size_t i;

    if (len == 0) {
        assert_int_equal(n, 0);
        return;
    }
    assert_true(n >= 1);
    assert_int_equal(s[0].offset, 0);
    assert_int_equal(s[n - 1].offset + s[n - 1].length, len);
    for (i = 0; i < n; i++) {
        assert_true(s[i].length >= 1);
        assert_true(s[i].length <= o->target_bytes);
        if (i > 0) {
            assert_true(s[i].offset > s[i - 1].offset);
            assert_true(s[i].offset <= s[i - 1].offset + s[i - 1].length);
        }
        if (utf8) {
            const size_t end = s[i].offset + s[i].length;

            assert_true(((unsigned char)text[s[i].offset] & 0xC0) != 0x80);
            assert_true(end == len
                        || ((unsigned char)text[end] & 0xC0) != 0x80);
        }
    }
}

static void split_ok(const char *text, size_t len, size_t target,
                     size_t overlap, kh_chunk_span **s, size_t *n)
{
    kh_chunk_opts o = {target, overlap};

    assert_int_equal(kh_chunk_split(text, len, &o, s, n), 0);
    check_invariants(text, len, &o, *s, *n, 1);
}

static void short_text_is_one_chunk(void **state)
{
    const char *t = "A short note.";
    kh_chunk_span *s;
    size_t n;

    (void)state;
    split_ok(t, strlen(t), 100, 10, &s, &n);
    assert_int_equal(n, 1);
    assert_int_equal(s[0].length, strlen(t));
    free(s);
}

static void empty_text_has_no_chunks(void **state)
{
    kh_chunk_opts o;
    kh_chunk_span *s = (kh_chunk_span *)1;
    size_t n = 7;

    (void)state;
    kh_chunk_opts_init(&o);
    assert_int_equal(kh_chunk_split("", 0, &o, &s, &n), 0);
    assert_null(s);
    assert_int_equal(n, 0);
}

static void bad_options_are_refused(void **state)
{
    kh_chunk_opts tiny = {8, 0}, overlap = {100, 50};
    kh_chunk_span *s;
    size_t n;

    (void)state;
    assert_int_equal(kh_chunk_split("abc", 3, &tiny, &s, &n), -1);
    assert_null(s);
    assert_int_equal(kh_chunk_split("abc", 3, &overlap, &s, &n), -1);
    assert_int_equal(n, 0);
}

/* "Para one. Still one.\n\nPara two ..." with target 40: the blank line
 * at 22 is inside [20, 40], so the cut is there although a sentence end
 * and spaces come later. */
static void paragraph_break_wins_over_sentence_end(void **state)
{
    const char *t = "Para one. Still one.\n\nPara two. More text. "
                    "And more text here.";
    kh_chunk_span *s;
    size_t n;

    (void)state;
    split_ok(t, strlen(t), 40, 0, &s, &n);
    assert_true(n >= 2);
    assert_int_equal(s[0].length, 22);
    assert_memory_equal(t + s[1].offset, "Para two.", 9);
    free(s);
}

static void sentence_end_wins_over_space(void **state)
{
    const char *t = "One two three four. Five six seven eight nine ten "
                    "eleven twelve";
    kh_chunk_span *s;
    size_t n;

    (void)state;
    split_ok(t, strlen(t), 30, 0, &s, &n);
    assert_int_equal(s[0].length, 19); /* "One two three four." */
    free(s);
}

static void chinese_full_stop_ends_a_sentence(void **state)
{
    /* 13 Han characters (39 bytes), 。, then more Han text: target 48
     * must cut right after the 。 (42 bytes). */
    const char *t = "我们的数据库文档很重要都有"
                    "。"
                    "第二句话也在这里继续写下去直到很长很长";
    kh_chunk_span *s;
    size_t n;

    (void)state;
    split_ok(t, strlen(t), 48, 0, &s, &n);
    assert_true(n >= 2);
    assert_int_equal(s[0].length, 42);
    assert_memory_equal(t + s[0].offset + s[0].length - 3, "。", 3);
    free(s);
}

static void fullwidth_question_and_exclamation_end_sentences(void **state)
{
    const char *t = "这是问题吗？是的！然后还有很多很多很多很多很多文字";
    kh_chunk_span *s;
    size_t n;

    (void)state;
    split_ok(t, strlen(t), 30, 0, &s, &n);
    /* The last stop inside [15, 30] is ！ ending at byte 27. */
    assert_int_equal(s[0].length, 27);
    free(s);
}

static void unbroken_han_text_is_cut_between_characters(void **state)
{
    char t[3 * 200 + 1];
    kh_chunk_span *s;
    size_t n, i;

    (void)state;
    for (i = 0; i < 200; i++)
        memcpy(t + 3 * i, "字", 3);
    t[600] = '\0';
    split_ok(t, 600, 100, 10, &s, &n);
    for (i = 0; i < n; i++) {
        assert_int_equal(s[i].offset % 3, 0);
        assert_int_equal(s[i].length % 3, 0);
        assert_true(i + 1 == n || s[i].length >= 96);
    }
    free(s);
}

static void overlap_repeats_the_end_of_the_previous_chunk(void **state)
{
    const char *t = "alpha beta gamma delta epsilon zeta eta theta iota "
                    "kappa lambda mu nu xi omicron pi rho sigma tau";
    kh_chunk_span *s;
    size_t n, i;

    (void)state;
    split_ok(t, strlen(t), 40, 10, &s, &n);
    assert_true(n >= 3);
    for (i = 1; i < n; i++)
        assert_int_equal(s[i].offset, s[i - 1].offset + s[i - 1].length - 10);
    free(s);
}

/* Text of words, CJK sentences and paragraphs, chosen by a seeded
 * generator so a failure can be replayed. */
static size_t mixed_text(char *buf, size_t cap, unsigned seed)
{
    static const char *const pieces[] = {
        "word ",      "longer-word ", "end. ", "why? ", "\n\n", "数据",
        "文档",       "。",           "！",    "？",    "é",    "😀",
        "ありがとう", "한국어 ",      "\n"};
    const size_t np = sizeof(pieces) / sizeof(pieces[0]);
    size_t len = 0;

    srand(seed);
    while (len + 16 < cap) {
        const char *p = pieces[(size_t)rand() % np];
        const size_t pl = strlen(p);

        memcpy(buf + len, p, pl);
        len += pl;
    }
    return len;
}

static void invariants_hold_for_mixed_scripts(void **state)
{
    static const size_t targets[] = {16, 17, 31, 64, 200, 1000};
    char buf[6000];
    kh_chunk_span *s;
    size_t n, ti;
    unsigned seed;

    (void)state;
    for (seed = 1; seed <= 20; seed++) {
        const size_t len = mixed_text(buf, sizeof(buf), seed);

        for (ti = 0; ti < sizeof(targets) / sizeof(targets[0]); ti++) {
            split_ok(buf, len, targets[ti], targets[ti] / 2 - 1, &s, &n);
            free(s);
            split_ok(buf, len, targets[ti], 0, &s, &n);
            free(s);
        }
    }
}

static void random_bytes_still_cover_the_text(void **state)
{
    unsigned char buf[4096];
    kh_chunk_opts o = {64, 20};
    kh_chunk_span *s;
    size_t n, i;
    unsigned seed;

    (void)state;
    for (seed = 1; seed <= 50; seed++) {
        srand(seed);
        for (i = 0; i < sizeof(buf); i++)
            buf[i] = (unsigned char)(rand() & 0xFF);
        assert_int_equal(kh_chunk_split((const char *)buf, sizeof(buf), &o, &s,
                                        &n),
                         0);
        check_invariants((const char *)buf, sizeof(buf), &o, s, n, 0);
        free(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(short_text_is_one_chunk),
        cmocka_unit_test(empty_text_has_no_chunks),
        cmocka_unit_test(bad_options_are_refused),
        cmocka_unit_test(paragraph_break_wins_over_sentence_end),
        cmocka_unit_test(sentence_end_wins_over_space),
        cmocka_unit_test(chinese_full_stop_ends_a_sentence),
        cmocka_unit_test(fullwidth_question_and_exclamation_end_sentences),
        cmocka_unit_test(unbroken_han_text_is_cut_between_characters),
        cmocka_unit_test(overlap_repeats_the_end_of_the_previous_chunk),
        cmocka_unit_test(invariants_hold_for_mixed_scripts),
        cmocka_unit_test(random_bytes_still_cover_the_text),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
