/*
 * kh_array_text.c: the array literal builder (see kh_array_text.h).
 *
 * The buffer doubles as it grows and always keeps room for the closing
 * brace and the NUL, so data is a valid C string after every call.
 */
#include "kh_array_text.h"

#include <stdlib.h>
#include <string.h>

/* Appends n bytes, growing the buffer; nothing once failed. */
static void put(kh_array_text *a, const char *bytes, size_t n)
{
    if (a->failed)
        return;
    if (a->len + n + 2 > a->cap) {
        const size_t cap = (a->len + n + 2) * 2;
        char *p = realloc(a->data, cap);

        if (p == NULL) {
            a->failed = 1;
            return;
        }
        a->data = p;
        a->cap = cap;
    }
    memcpy(a->data + a->len, bytes, n);
    a->len += n;
    a->data[a->len] = '\0';
}

/* Appends element i: a double-quoted string with " and \ escaped, or
 * NULL when text is NULL. */
void kh_array_text_add(kh_array_text *a, size_t i, const char *text, size_t n)
{
    size_t k, from = 0;

    put(a, i == 0 ? "{" : ",", 1);
    if (text == NULL) {
        put(a, "NULL", 4);
        return;
    }
    put(a, "\"", 1);
    for (k = 0; k < n; k++) {
        if (text[k] == '"' || text[k] == '\\') {
            put(a, text + from, k - from);
            put(a, "\\", 1);
            from = k;
        }
    }
    put(a, text + from, n - from);
    put(a, "\"", 1);
}

void kh_array_text_end(kh_array_text *a, size_t n)
{
    put(a, n == 0 ? "{}" : "}", n == 0 ? 2 : 1);
}
