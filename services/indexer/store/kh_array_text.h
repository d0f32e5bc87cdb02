/*
 * kh_array_text.h: a PostgreSQL array literal ("{...}") built up one
 * element at a time, for the array parameters of the store's statements.
 *
 * The store sends a document's chunks (and a batch's ids and writes) as
 * text array parameters unnested in SQL, so that any number of rows goes
 * in one statement with one plan.  Elements are double-quoted with " and
 * \ escaped, or NULL; the caller numbers them (0 opens the literal) and
 * closes the literal with kh_array_text_end, which writes "{}" for none.
 * An allocation failure is remembered (failed) and makes every later call
 * do nothing, so a builder checks once, at the end.
 *
 * Ownership: the caller owns a zeroed kh_array_text and frees data.
 * Threads: one builder per thread.
 */
#ifndef KH_ARRAY_TEXT_H
#define KH_ARRAY_TEXT_H

#include <stddef.h>

/* Start from all zeroes; data is NUL-terminated while failed is 0. */
typedef struct kh_array_text {
    char *data;
    size_t len, cap;
    int failed; /* an allocation failed: data is incomplete */
} kh_array_text;

/* Appends element i (0 opens the literal): text[0..n) quoted, or NULL
 * when text is NULL. */
void kh_array_text_add(kh_array_text *a, size_t i, const char *text, size_t n);

/* Closes a literal of n elements. */
void kh_array_text_end(kh_array_text *a, size_t n);

#endif /* KH_ARRAY_TEXT_H */
