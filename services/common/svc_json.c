/*
 * svc_json.c: strict JSON parsing and error bodies for the services.
 *
 * jansson already validates UTF-8 inside strings and rejects \u0000
 * unless asked not to (PostgreSQL text cannot hold NUL, so we keep that);
 * JSON_REJECT_DUPLICATES refuses repeated keys.  What jansson does not
 * say is whether the whole body was UTF-8 outside strings, so the body is
 * checked first: the error then names the real problem.
 */
#include "svc_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the UTF-8 sequence that starts with byte b, 0 if invalid as a
 * first byte. */
static int utf8_seq_len(unsigned char b)
{
    if (b < 0x80)
        return 1;
    if (b >= 0xC2 && b <= 0xDF)
        return 2;
    if (b >= 0xE0 && b <= 0xEF)
        return 3;
    if (b >= 0xF0 && b <= 0xF4)
        return 4;
    return 0;
}

/* Checks the continuation bytes of one sequence, with the overlong,
 * surrogate and > U+10FFFF exclusions of RFC 3629. */
static int utf8_seq_ok(const unsigned char *p, int n)
{
    int i;

    for (i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    if (n == 3) {
        if (p[0] == 0xE0 && p[1] < 0xA0)
            return 0;
        if (p[0] == 0xED && p[1] > 0x9F)
            return 0;
    }
    if (n == 4) {
        if (p[0] == 0xF0 && p[1] < 0x90)
            return 0;
        if (p[0] == 0xF4 && p[1] > 0x8F)
            return 0;
    }
    return 1;
}

int svc_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    while (i < len) {
        const int n = utf8_seq_len(p[i]);

        if (n == 0 || p[i] == 0 || (size_t)n > len - i
            || !utf8_seq_ok(p + i, n))
            return 0;
        i += (size_t)n;
    }
    return 1;
}

size_t svc_utf8_chars(const char *s)
{
    size_t n = 0;

    for (; *s != '\0'; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            n++;
    return n;
}

json_t *svc_json_parse_object(const char *body, size_t len, char *detail,
                              size_t detaillen)
{
    json_error_t err;
    json_t *root;

    if (len == 0) {
        snprintf(detail, detaillen, "the request body must be a JSON object");
        return NULL;
    }
    if (!svc_utf8_valid(body, len)) {
        snprintf(detail, detaillen, "the request body is not valid UTF-8");
        return NULL;
    }
    root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &err);
    if (root == NULL) {
        snprintf(detail, detaillen, "malformed JSON at line %d column %d: %s",
                 err.line, err.column, err.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        snprintf(detail, detaillen, "the request body must be a JSON object");
        return NULL;
    }
    return root;
}

static int is_allowed(const char *key, const char *const *allowed)
{
    for (; *allowed != NULL; allowed++)
        if (strcmp(key, *allowed) == 0)
            return 1;
    return 0;
}

int svc_json_only_fields(const json_t *obj, const char *const *allowed,
                         char *detail, size_t detaillen)
{
    const char *key;
    json_t *value;

    json_object_foreach((json_t *)obj, key, value)
    {
        (void)value;
        if (!is_allowed(key, allowed)) {
            snprintf(detail, detaillen, "unknown field \"%.64s\"", key);
            return -1;
        }
    }
    return 0;
}

int svc_json_string_field(const json_t *obj, const char *name,
                          size_t min_chars, size_t max_chars, int null_ok,
                          const char **out, char *detail, size_t detaillen)
{
    const json_t *v = json_object_get(obj, name);
    size_t n;

    *out = NULL;
    if (v == NULL || (null_ok && json_is_null(v)))
        return 0;
    if (!json_is_string(v)) {
        snprintf(detail, detaillen, "\"%s\" must be a string%s", name,
                 null_ok ? " or null" : "");
        return -1;
    }
    n = svc_utf8_chars(json_string_value(v));
    if (n < min_chars || n > max_chars) {
        snprintf(detail, detaillen,
                 "\"%s\" must be %zu..%zu characters, "
                 "got %zu",
                 name, min_chars, max_chars, n);
        return -1;
    }
    *out = json_string_value(v);
    return 1;
}

char *svc_json_dump_steal(json_t *obj)
{
    char *text;

    if (obj == NULL)
        return NULL;
    /* Reals (search scores, rounded to 6 places by the query) with at
     * most 10 significant digits: 0.1, not jansson's 0.10000000000000001. */
    text = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER
                               | JSON_REAL_PRECISION(10));
    json_decref(obj);
    return text;
}

/* Copies s into out (size outlen), replacing every byte that does not
 * start a valid UTF-8 sequence by '?', so text that was cut in the middle
 * of a character (or quotes hostile input) still makes a valid string. */
static void utf8_sanitize(const char *s, char *out, size_t outlen)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len = strlen(s);
    size_t i = 0;
    size_t o = 0;

    while (i < len && o + 5 < outlen) {
        const int n = utf8_seq_len(p[i]);

        if (n > 0 && (size_t)n <= len - i && utf8_seq_ok(p + i, n)) {
            memcpy(out + o, p + i, (size_t)n);
            o += (size_t)n;
            i += (size_t)n;
        } else {
            out[o++] = '?';
            i++;
        }
    }
    out[o] = '\0';
}

char *svc_json_error_body(const char *code, const char *detail)
{
    char clean[512];

    utf8_sanitize(detail, clean, sizeof(clean));
    return svc_json_dump_steal(
        json_pack("{s:s,s:s}", "code", code, "detail", clean));
}
