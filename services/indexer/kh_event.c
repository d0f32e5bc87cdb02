/*
 * kh_event.c: parsing and checking a document.approved event (see
 * kh_event.h).
 *
 * The checks are strict on purpose: the ids go to PostgreSQL as
 * ::uuid and ::bigint parameters, and an id that PostgreSQL would
 * reject (or read differently, like a bigint with a leading zero) would
 * fail its transaction on every redelivery instead of being dropped once.
 */
#include "kh_event.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

const char *kh_outcome_name(kh_outcome outcome)
{
    switch (outcome) {
    case KH_INDEXED: return "indexed";
    case KH_STALE: return "stale";
    case KH_DUPLICATE: return "duplicate";
    case KH_FAILED: break;
    }
    return "failed";
}

/* 8-4-4-4-12 hex digits. */
static int uuid_shaped(const char *s)
{
    size_t i;

    if (strlen(s) != 36)
        return 0;
    for (i = 0; i < 36; i++) {
        const int dash = i == 8 || i == 13 || i == 18 || i == 23;
        const char c = s[i];

        if (dash ? c != '-'
                 : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')
                     || (c >= 'A' && c <= 'F')))
            return 0;
    }
    return 1;
}

static int canonical_id(const char *s)
{
    size_t i, n = strlen(s);

    if (n == 0 || n > 19 || s[0] == '0')
        return 0;
    for (i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return n < 19 || strcmp(s, "9223372036854775807") <= 0;
}

int kh_event_parse(const char *body, size_t len, kh_event *ev, char *err,
                   size_t errlen)
{
    json_error_t jerr;
    json_t *obj = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    const char *id = NULL, *type = NULL, *doc = NULL;
    json_int_t version = 0;
    int rc = -1;

    memset(ev, 0, sizeof(*ev));
    if (obj == NULL) {
        snprintf(err, errlen, "event: not JSON: %s", jerr.text);
        return -1;
    }
    if (json_unpack_ex(obj, &jerr, 0, "{s:s,s:s,s:s,s:I}", "event_id", &id,
                       "type", &type, "document_id", &doc, "document_version",
                       &version)
        != 0) {
        snprintf(err, errlen, "event: %s", jerr.text);
    } else if (!uuid_shaped(id) || strcmp(type, "document.approved") != 0
               || !canonical_id(doc) || version < 1 || version > INT32_MAX) {
        snprintf(err, errlen,
                 "event: malformed event_id, type, "
                 "document_id or document_version");
    } else {
        snprintf(ev->event_id, sizeof(ev->event_id), "%s", id);
        snprintf(ev->document_id, sizeof(ev->document_id), "%s", doc);
        ev->document_version = (int)version;
        rc = 0;
    }
    json_decref(obj);
    return rc;
}
