/*
 * svc_json.h: strict JSON input and the API's error bodies.
 *
 * Request bodies are parsed by jansson with JSON_REJECT_DUPLICATES (a body
 * with "title" twice is ambiguous, so it is refused) and jansson's own
 * UTF-8 validation; the helpers below check an object's fields against a
 * list, so a misspelt or extra field is a 400 rather than silently
 * ignored.  Lengths are counted in Unicode code points, as API.md counts
 * "characters".
 *
 * Ownership: functions returning char * return malloc'd text the caller
 * frees; json_t results follow jansson's reference rules as stated.
 * Threads: all functions are reentrant.
 */
#ifndef SVC_JSON_H
#define SVC_JSON_H

#include <jansson.h>
#include <stddef.h>

/*
 * Parses body[0..len) as one JSON object.  Returns the object (new
 * reference), or NULL with a human message in detail: not JSON, not
 * UTF-8, a duplicate key, \u0000 in a string, or not an object.
 */
json_t *svc_json_parse_object(const char *body, size_t len, char *detail,
                              size_t detaillen);

/*
 * Checks that every key of obj is in the NULL-terminated list allowed.
 * Returns 0, or -1 with "unknown field \"x\"" in detail.
 */
int svc_json_only_fields(const json_t *obj, const char *const *allowed,
                         char *detail, size_t detaillen);

/*
 * Reads obj[name] as a string of min_chars..max_chars characters.
 * Returns 1 and sets *out (borrowed from obj) when present and valid;
 * 0 when absent, or null and null_ok (then *out is NULL); -1 with a
 * message in detail when it has the wrong type or length.
 */
int svc_json_string_field(const json_t *obj, const char *name,
                          size_t min_chars, size_t max_chars, int null_ok,
                          const char **out, char *detail, size_t detaillen);

/* Number of code points in the valid UTF-8 string s. */
size_t svc_utf8_chars(const char *s);

/* Succeeds (1) when s[0..len) is valid UTF-8 without NUL bytes. */
int svc_utf8_valid(const char *s, size_t len);

/*
 * The error body {"code":code,"detail":detail} as malloc'd text, or NULL
 * on allocation failure.
 */
char *svc_json_error_body(const char *code, const char *detail);

/* json_dumps with the service's flags (compact); steals obj. */
char *svc_json_dump_steal(json_t *obj);

#endif /* SVC_JSON_H */
