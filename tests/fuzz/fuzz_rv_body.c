/*
 * fuzz_rv_body.c: fuzz target for reviewd's JSON input and its UTF-8
 * rules (svc_json.c): the body parser, the field checks, the character
 * counts that limits such as the 200-character title are measured in,
 * and the error bodies that quote hostile text back.
 *
 * The input is a request body.  Properties checked on every input:
 *   - svc_utf8_valid agrees with an independent decoder written from
 *     RFC 3629 (code point ranges, not byte patterns; fuzz_utf8.h), and
 *     with jansson's json_stringn on every input without NUL bytes;
 *   - svc_json_parse_object accepts only valid UTF-8 that jansson reads as
 *     one object without duplicate keys; what it accepts dumps and
 *     re-parses to an equal object; what it refuses comes with a detail;
 *   - for each string field, svc_utf8_chars gives the decoder's count of
 *     code points, and svc_json_string_field accepts it for a range
 *     exactly when that count is inside, returning the string itself;
 *   - svc_json_only_fields refuses exactly when a key is not allowed;
 *   - svc_json_error_body quotes any detail (the input, as text) as a JSON
 *     object in valid UTF-8, unchanged when the detail was valid UTF-8
 *     and short enough to fit.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_target.h"
#include "fuzz_utf8.h"
#include "svc_json.h"

#define TARGET "rv_body"
#define INPUT_MAX 65536
/* What svc_json_error_body quotes unchanged (its buffer, less slack). */
#define QUOTE_MAX 500

/* Code points in s[0..n), or -1 if it is not valid UTF-8 without NUL. */
static long decoded_chars(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    long count = 0;

    for (size_t i = 0; i < n; count++) {
        uint32_t cp = 0;
        const size_t len = fuzz_utf8_decode_one(p + i, n - i, &cp);

        if (len == 0 || cp == 0)
            return -1;
        i += len;
    }
    return count;
}

static void check_utf8(const char *s, size_t n)
{
    const long chars = decoded_chars(s, n);
    const int valid = svc_utf8_valid(s, n);
    json_t *js;

    if (valid != (chars >= 0))
        fuzz_fail(TARGET, "svc_utf8_valid %d, decoder %ld on %zu bytes", valid,
                  chars, n);
    if (memchr(s, '\0', n) != NULL)
        return;
    js = json_stringn(s, n);
    if ((js != NULL) != valid)
        fuzz_fail(TARGET, "svc_utf8_valid %d, jansson %d", valid, js != NULL);
    json_decref(js);
}

/* The field checks on one string value. */
static void check_string_field(const json_t *obj, const char *key,
                               const json_t *v)
{
    const char *s = json_string_value(v);
    const long chars = decoded_chars(s, strlen(s));
    const char *out = NULL;
    char detail[256];
    int rc;

    if (chars < 0 || svc_utf8_chars(s) != (size_t)chars)
        fuzz_fail(TARGET, "\"%s\": svc_utf8_chars %zu, decoder %ld", key,
                  svc_utf8_chars(s), chars);
    rc = svc_json_string_field(obj, key, 1, 200, 0, &out, detail,
                               sizeof(detail));
    if (rc != ((chars >= 1 && chars <= 200) ? 1 : -1))
        fuzz_fail(TARGET, "\"%s\" of %ld characters: string_field %d", key,
                  chars, rc);
    if (rc == 1 && out != s)
        fuzz_fail(TARGET, "string_field gave another string");
}

/* Every field of an accepted body. */
static void check_fields(const json_t *obj)
{
    static const char *const allowed[] = {"title", "content", "comment", NULL};
    const char *key;
    json_t *v;
    int unknown = 0;
    char detail[256];
    const char *out;

    json_object_foreach((json_t *)obj, key, v)
    {
        if (strcmp(key, "title") != 0 && strcmp(key, "content") != 0
            && strcmp(key, "comment") != 0)
            unknown = 1;
        if (json_is_string(v))
            check_string_field(obj, key, v);
        else if (svc_json_string_field(obj, key, 0, 10, json_is_null(v), &out,
                                       detail, sizeof(detail))
                 != (json_is_null(v) ? 0 : -1))
            fuzz_fail(TARGET, "\"%s\" of type %d accepted as a string", key,
                      (int)json_typeof(v));
    }
    if ((svc_json_only_fields(obj, allowed, detail, sizeof(detail)) != 0)
        != unknown)
        fuzz_fail(TARGET, "only_fields disagrees (unknown %d)", unknown);
}

static void check_parse(const char *body, size_t n)
{
    char detail[256] = "";
    json_t *obj = svc_json_parse_object(body, n, detail, sizeof(detail));
    json_t *again;
    char *text;

    if (obj == NULL) {
        if (detail[0] == '\0')
            fuzz_fail(TARGET, "refused without a detail");
        return;
    }
    if (!json_is_object(obj) || !svc_utf8_valid(body, n))
        fuzz_fail(TARGET, "accepted a non-object or non-UTF-8 body");
    check_fields(obj);
    text = json_dumps(obj, JSON_COMPACT);
    again = text != NULL ? json_loads(text, JSON_REJECT_DUPLICATES, NULL)
                         : NULL;
    if (again == NULL || !json_equal(obj, again))
        fuzz_fail(TARGET, "accepted body does not round-trip: %s", text);
    free(text);
    json_decref(again);
    json_decref(obj);
}

/* The error body quoting the input as its detail. */
static void check_error_body(const char *body, size_t n)
{
    char *detail = strndup(body, n);
    char *text;
    json_t *root;
    const char *quoted;

    if (detail == NULL)
        abort();
    text = svc_json_error_body("INVALID_ARGUMENT", detail);
    if (text == NULL || !svc_utf8_valid(text, strlen(text)))
        fuzz_fail(TARGET, "error body missing or not UTF-8");
    root = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    quoted = json_string_value(json_object_get(root, "detail"));
    if (quoted == NULL)
        fuzz_fail(TARGET, "error body without detail: %s", text);
    if (strlen(detail) <= QUOTE_MAX && svc_utf8_valid(detail, strlen(detail))
        && strcmp(quoted, detail) != 0)
        fuzz_fail(TARGET, "valid detail changed in the error body");
    json_decref(root);
    free(text);
    free(detail);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;

    if (size > INPUT_MAX)
        return 0;
    check_utf8(body, size);
    check_parse(body, size);
    check_error_body(body, size);
    return 0;
}
