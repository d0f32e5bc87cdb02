/*
 * url.c: the Redis URL parser (see url.h).
 *
 * The parser works on a bounded copy of the URL and splits it left to
 * right: scheme, optional userinfo (up to the last '@' before the path),
 * authority or socket path, optional /db, optional query.  Each part is
 * checked where it is cut, so a message can say which part is wrong.  It is
 * a fuzz target (tests/fuzz/fuzz_url.c): no input may crash it or leak.
 */
#include "url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"

static int hex_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Percent-decodes s[0..len) into a new string; *out is NULL on failure. */
static dlock_err percent_decode(const char *s, size_t len, const char *what,
                                char **out, dlock__msg *m)
{
    char *dst = dlock__malloc(len + 1);
    size_t j = 0;

    *out = NULL;
    if (dst == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "decoding the URL's %s", what);
    for (size_t i = 0; i < len; i++) {
        int hi, lo;

        if (s[i] != '%') {
            dst[j++] = s[i];
            continue;
        }
        if (i + 2 >= len) {
            hi = -1;
            lo = -1;
        } else {
            hi = hex_value(s[i + 1]);
            lo = hex_value(s[i + 2]);
        }
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
            dlock__free(dst);
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "bad percent-escape in the URL's %s", what);
        }
        dst[j++] = (char)(hi * 16 + lo);
        i += 2;
    }
    dst[j] = '\0';
    *out = dst;
    return DLOCK_OK;
}

/* Parses a decimal integer in [min, max] from s[0..len). */
static int parse_int(const char *s, size_t len, long min, long max, int *out)
{
    long value = 0;

    if (len == 0 || len > 10)
        return 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        value = value * 10 + (s[i] - '0');
    }
    if (value < min || value > max)
        return 0;
    *out = (int)value;
    return 1;
}

/* Splits "user:pass" (or ":pass", or "user") and decodes both parts. */
static dlock_err parse_userinfo(const char *s, size_t len,
                                dlock__endpoint *ep, dlock__msg *m)
{
    const char *colon = memchr(s, ':', len);
    size_t ulen = colon ? (size_t)(colon - s) : len;
    dlock_err err;

    if (ulen > 0) {
        err = percent_decode(s, ulen, "user name", &ep->user, m);
        if (err != DLOCK_OK)
            return err;
    }
    if (colon == NULL)
        return DLOCK_OK;
    return percent_decode(colon + 1, len - ulen - 1, "password",
                          &ep->password, m);
}

/* Parses "host[:port]" or "[v6]:port". */
static dlock_err parse_authority(const char *s, size_t len,
                                 dlock__endpoint *ep, dlock__msg *m)
{
    const char *host = s;
    size_t hlen;
    const char *rest;

    ep->port = 6379;
    if (len > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', len);

        if (close == NULL)
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "unclosed '[' in the URL's host");
        host = s + 1;
        hlen = (size_t)(close - host);
        rest = close + 1;
        if (rest < s + len && *rest != ':')
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "unexpected text after ']' in the URL");
    } else {
        const char *colon = memchr(s, ':', len);

        hlen = colon ? (size_t)(colon - s) : len;
        rest = s + hlen;
    }
    if (hlen == 0)
        return dlock__msg_set(m, DLOCK_INVALID, "the URL has no host");
    if (memchr(host, '%', hlen) != NULL || memchr(host, '@', hlen) != NULL)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "unexpected character in the URL's host");
    if (rest < s + len) {
        size_t plen = (size_t)(s + len - rest - 1);

        if (!parse_int(rest + 1, plen, 1, 65535, &ep->port))
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "the URL's port is not 1..65535");
    }
    ep->host = dlock__strndup(host, hlen);
    if (ep->host == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "copying the URL's host");
    return DLOCK_OK;
}

/* Parses "db=N" query parameters joined by '&'. */
static dlock_err parse_query(const char *s, size_t len, dlock__endpoint *ep,
                             dlock__msg *m)
{
    while (len > 0) {
        const char *amp = memchr(s, '&', len);
        size_t plen = amp ? (size_t)(amp - s) : len;

        if (plen > 3 && memcmp(s, "db=", 3) == 0) {
            if (!parse_int(s + 3, plen - 3, 0, 2147483647L, &ep->db))
                return dlock__msg_set(m, DLOCK_INVALID,
                                      "the URL's db is not a number");
        } else if (plen > 0) {
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "unknown URL parameter '%.*s' (only db=N)",
                                  (int)(plen > 40 ? 40 : plen), s);
        }
        if (amp == NULL)
            break;
        len -= plen + 1;
        s = amp + 1;
    }
    return DLOCK_OK;
}

/* Cuts the scheme; sets ep->transport and returns the length of the
 * scheme with "://", or 0 for an unknown scheme. */
static size_t parse_scheme(const char *url, dlock__endpoint *ep)
{
    if (strncasecmp(url, "redis://", 8) == 0) {
        ep->transport = DLOCK__TCP;
        return 8;
    }
    if (strncasecmp(url, "rediss://", 9) == 0) {
        ep->transport = DLOCK__TLS;
        return 9;
    }
    if (strncasecmp(url, "unix://", 7) == 0) {
        ep->transport = DLOCK__UNIX;
        return 7;
    }
    return 0;
}

static void describe(dlock__endpoint *ep)
{
    if (ep->transport == DLOCK__UNIX)
        snprintf(ep->desc, sizeof(ep->desc), "unix:%s", ep->path);
    else if (strchr(ep->host, ':') != NULL)
        snprintf(ep->desc, sizeof(ep->desc), "[%s]:%d", ep->host, ep->port);
    else
        snprintf(ep->desc, sizeof(ep->desc), "%s:%d", ep->host, ep->port);
}

/* Parses what follows the userinfo: a socket path or an authority with an
 * optional /db, then the query. */
static dlock_err parse_location(const char *s, size_t len,
                                dlock__endpoint *ep, dlock__msg *m)
{
    const char *query = memchr(s, '?', len);
    size_t loclen = query ? (size_t)(query - s) : len;
    dlock_err err;

    if (ep->transport == DLOCK__UNIX) {
        if (loclen < 2 || s[0] != '/')
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "a unix:// URL needs an absolute socket "
                                  "path, as in unix:///run/redis.sock");
        ep->path = dlock__strndup(s, loclen);
        if (ep->path == NULL)
            return dlock__msg_set(m, DLOCK_NOMEM, "copying the socket path");
    } else {
        const char *slash = memchr(s, '/', loclen);
        size_t alen = slash ? (size_t)(slash - s) : loclen;

        err = parse_authority(s, alen, ep, m);
        if (err != DLOCK_OK)
            return err;
        if (slash != NULL && loclen - alen > 1 &&
            !parse_int(slash + 1, loclen - alen - 1, 0, 2147483647L,
                       &ep->db))
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "the URL's path must be a database "
                                  "number, as in redis://host/2");
    }
    if (query == NULL)
        return DLOCK_OK;
    return parse_query(query + 1, len - loclen - 1, ep, m);
}

dlock_err dlock__url_parse(const char *url, dlock__endpoint *ep,
                           dlock__msg *m)
{
    size_t len, skip;
    const char *rest, *at = NULL;
    dlock_err err;

    memset(ep, 0, sizeof(*ep));
    if (url == NULL || url[0] == '\0')
        return dlock__msg_set(m, DLOCK_INVALID, "the Redis URL is empty");
    len = strnlen(url, DLOCK__URL_MAX + 1);
    if (len > DLOCK__URL_MAX)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "the Redis URL is longer than %d bytes",
                              DLOCK__URL_MAX);
    skip = parse_scheme(url, ep);
    if (skip == 0)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "the Redis URL must start with redis://, "
                              "rediss:// or unix://");
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)url[i];

        if (ch <= ' ' || ch >= 0x7f)
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "the Redis URL has a space or control "
                                  "character at offset %zu", i);
    }
    rest = url + skip;
    len -= skip;
    /* The userinfo ends at the last '@' before the first '/' or '?', so a
     * stray '@' later in the URL cannot cut the host. */
    for (size_t i = 0; i < len && rest[i] != '/' && rest[i] != '?'; i++) {
        if (rest[i] == '@')
            at = rest + i;
    }
    if (at != NULL) {
        err = parse_userinfo(rest, (size_t)(at - rest), ep, m);
        if (err != DLOCK_OK)
            goto fail;
        len -= (size_t)(at - rest) + 1;
        rest = at + 1;
    }
    err = parse_location(rest, len, ep, m);
    if (err != DLOCK_OK)
        goto fail;
    describe(ep);
    return DLOCK_OK;
fail:
    dlock__endpoint_clear(ep);
    return err;
}

void dlock__endpoint_clear(dlock__endpoint *ep)
{
    dlock__free(ep->host);
    dlock__free(ep->path);
    dlock__free(ep->user);
    if (ep->password != NULL) {
        /* The password should not linger in freed memory. */
        explicit_bzero(ep->password, strlen(ep->password));
        dlock__free(ep->password);
    }
    memset(ep, 0, sizeof(*ep));
}
