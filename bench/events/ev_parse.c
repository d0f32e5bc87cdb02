/*
 * ev_parse.c: bench_events' parsers of event bodies and kh-indexer's log
 * (see ev_parse.h).
 *
 * Both inputs are JSON written by our own services, and only a few flat
 * string fields are needed, so they are found by key rather than by a
 * JSON parser: a field's value ends at the next quote, which rv_log and
 * json_build_object escape inside strings.  Anything unexpected is "not
 * found", never a guess.
 */
#include "ev_parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

long long ev_parse_doc_id(const char *p, size_t len)
{
    static const char key[] = "\"document_id\"";
    const char *end = p + len;
    const char *k = memmem(p, len, key, sizeof(key) - 1);
    long long id = 0;
    int digits = 0;

    if (k == NULL)
        return -1;
    /* json_build_object writes "key" : value, with spaces. */
    for (k += sizeof(key) - 1;
         k < end && (*k == ' ' || *k == ':' || *k == '"'); k++) {
    }
    for (; k < end && *k >= '0' && *k <= '9' && digits < 18; k++) {
        id = id * 10 + (*k - '0');
        digits++;
    }
    return digits > 0 ? id : -1;
}

int64_t ev_parse_ts(const char *ts)
{
    struct tm tm;
    const char *rest;
    int ms = 0, digits = 0;

    memset(&tm, 0, sizeof(tm));
    rest = strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm);
    if (rest == NULL)
        return -1;
    if (*rest == '.') {
        for (rest++; *rest >= '0' && *rest <= '9' && digits < 3; rest++) {
            ms = ms * 10 + (*rest - '0');
            digits++;
        }
        for (; digits < 3; digits++)
            ms *= 10;
    }
    return *rest == 'Z' ? (int64_t)timegm(&tm) * 1000000 + ms * 1000 : -1;
}

/* The string value of "key":"..." in line, into out; 0 when found. */
static int field(const char *line, const char *key, char *out, size_t len)
{
    char pat[64];
    const char *p, *end;

    snprintf(pat, sizeof(pat), "\"%s\":\"", key);
    p = strstr(line, pat);
    if (p == NULL)
        return -1;
    p += strlen(pat);
    end = strchr(p, '"');
    if (end == NULL || (size_t)(end - p) >= len)
        return -1;
    memcpy(out, p, (size_t)(end - p));
    out[end - p] = '\0';
    return 0;
}

int ev_parse_indexed_line(const char *line, long long *doc_id, int64_t *at_us)
{
    char ts[64], doc[32], outcome[32];
    int64_t at;
    long long id;

    if (strstr(line, "\"msg\":\"event_done\"") == NULL
        || field(line, "outcome", outcome, sizeof(outcome)) != 0
        || strcmp(outcome, "indexed") != 0
        || field(line, "ts", ts, sizeof(ts)) != 0
        || field(line, "document_id", doc, sizeof(doc)) != 0)
        return 0;
    id = ev_parse_doc_id(line, strlen(line));
    at = ev_parse_ts(ts);
    if (id < 0 || at < 0 || atoll(doc) != id)
        return 0;
    *doc_id = id;
    *at_us = at;
    return 1;
}
