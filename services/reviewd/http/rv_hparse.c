/*
 * rv_hparse.c: the request parser of rv_hparse.h.
 *
 * The head is examined a line at a time (up to its LF), each line once:
 * h->pos is the start of the first line not examined.  An incomplete
 * last line is only measured, so a limit is decided as soon as its bytes
 * show it.  A line ends with CRLF, or a bare LF (RFC 9112 section 2.2);
 * any other CR is refused.  Up to two empty lines before the request line
 * are skipped (section 2.2: a client may send CRLF after a body).
 *
 * The chunked decoder is a state machine over the framing bytes, so the
 * body can arrive in pieces of any size, down to one byte.
 */
#include "http/rv_hparse.h"

#include <ctype.h>

#include <string.h>
#include <strings.h>

enum {
    CH_SIZE = 0, /* hex digits of a chunk size */
    CH_EXT,      /* after them: extensions up to the line end */
    CH_DATA,     /* chunk data */
    CH_DATA_END, /* the CRLF after the data */
    CH_TRAILER,  /* trailer lines, up to an empty one */
    CH_DONE
};

static const char empty[] = "";

static rv_hp_result fail(rv_hp_error *e, unsigned status, const char *code,
                         const char *detail)
{
    e->status = status;
    e->code = code;
    e->detail = detail;
    return RV_HP_ERROR;
}

static rv_hp_result bad(rv_hp_error *e, const char *detail)
{
    return fail(e, 400, "BAD_REQUEST", detail);
}

/* tchar of RFC 9110 section 5.6.2. */
static int is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')
        || (c >= 'A' && c <= 'Z'))
        return 1;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A character of a field value: VCHAR, obs-text, SP or HTAB. */
static int is_field_char(unsigned char c)
{
    return c == ' ' || c == '\t' || (c > 0x20 && c != 0x7F);
}

static int is_ows(char c)
{
    return c == ' ' || c == '\t';
}

void rv_hparse_init(rv_hhead *h)
{
    memset(h, 0, sizeof(*h));
    h->content_length = -1;
    h->method = empty;
    h->target = empty;
}

/* The request target: origin form, or "*" for OPTIONS. */
static int target_ok(const char *t, size_t n, const char *method)
{
    size_t i;

    if (n == 1 && t[0] == '*')
        return strcmp(method, "OPTIONS") == 0;
    if (n == 0 || t[0] != '/')
        return 0;
    for (i = 0; i < n; i++)
        if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7F)
            return 0;
    return 1;
}

/* "method SP request-target SP HTTP-version", line = buf[0..n) with its
 * line end removed. */
static rv_hp_result request_line(rv_hhead *h, char *line, size_t n)
{
    char *sp1 = memchr(line, ' ', n), *sp2, *v;
    size_t i, vlen;

    if (sp1 == NULL || sp1 == line)
        return bad(&h->err, "the request line is malformed");
    for (i = 0; line + i < sp1; i++)
        if (!is_tchar((unsigned char)line[i]))
            return bad(&h->err, "the method is not a token");
    if (i > RV_HP_METHOD_MAX)
        return bad(&h->err, "the method is too long");
    sp2 = memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - line));
    if (sp2 == NULL) {
        /* As partial_line decides it for the same bytes. */
        if (n - (size_t)(sp1 + 1 - line) > RV_HP_TARGET_MAX)
            return fail(&h->err, 414, "URI_TOO_LONG",
                        "the request target is over 8 KiB");
        return bad(&h->err, "the request line is malformed");
    }
    if ((size_t)(sp2 - sp1 - 1) > RV_HP_TARGET_MAX)
        return fail(&h->err, 414, "URI_TOO_LONG",
                    "the request target is over 8 KiB");
    v = sp2 + 1;
    vlen = n - (size_t)(v - line);
    if (vlen != 8 || memcmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9'
        || v[6] != '.' || v[7] < '0' || v[7] > '9')
        return bad(&h->err, "the request line is malformed");
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return fail(&h->err, 505, "HTTP_VERSION_NOT_SUPPORTED",
                    "only HTTP/1.0 and HTTP/1.1 are supported");
    h->minor = v[7] - '0';
    *sp1 = '\0';
    *sp2 = '\0';
    if (!target_ok(sp1 + 1, (size_t)(sp2 - sp1 - 1), line))
        return bad(&h->err, "the request target is malformed");
    h->method = line;
    h->target = sp1 + 1;
    h->line_done = 1;
    return RV_HP_MORE;
}

/* Iterates over the comma-separated elements of a list value, calling
 * el with each non-empty one (OWS trimmed, parameters cut at ';'). */
static void list_each(const char *v,
                      void (*el)(rv_hhead *, const char *, size_t, int),
                      rv_hhead *h)
{
    while (*v != '\0') {
        const char *e = v, *end;
        int params = 0;

        while (*e != '\0' && *e != ',')
            e++;
        while (v < e && is_ows(*v))
            v++;
        for (end = v; end < e && *end != ';'; end++)
            ;
        params = end < e;
        while (end > v && is_ows(end[-1]))
            end--;
        if (end > v || params)
            el(h, v, (size_t)(end - v), params);
        v = *e == ',' ? e + 1 : e;
    }
}

static void connection_el(rv_hhead *h, const char *v, size_t n, int params)
{
    (void)params;
    if (n == 5 && strncasecmp(v, "close", 5) == 0)
        h->close = 1;
    else if (n == 10 && strncasecmp(v, "keep-alive", 10) == 0)
        h->ka = 1;
}

static void te_el(rv_hhead *h, const char *v, size_t n, int params)
{
    /* Anything but one final "chunked" is counted against it; the last
     * coding seen decides te_last_chunked (fields are combined in
     * order, RFC 9110 section 5.3). */
    if (n == 7 && strncasecmp(v, "chunked", 7) == 0 && !params) {
        h->te_chunked++;
        h->te_last_chunked = 1;
    } else {
        h->te_other++;
        h->te_last_chunked = 0;
    }
}

/* A Host value: uri-host [":" port] (RFC 9110 section 7.2, RFC 3986),
 * empty allowed; checked by its characters: a reg-name's or an
 * IP-literal's and a port's, nothing else (no whitespace, no '/', '@',
 * '?', '#'). */
static int host_ok(const char *v)
{
    static const char extra[] = "-._~%!$&'()*+,;=:[]";

    for (; *v != '\0'; v++)
        if (!isalnum((unsigned char)*v) && strchr(extra, *v) == NULL)
            return 0;
    return 1;
}

/* Content-Length: 1*DIGIT within int64_t. */
static rv_hp_result content_length(rv_hhead *h, const char *v)
{
    int64_t n = 0;
    size_t i;

    if (v[0] == '\0')
        return bad(&h->err, "Content-Length is not a number");
    for (i = 0; v[i] != '\0'; i++) {
        if (v[i] < '0' || v[i] > '9')
            return bad(&h->err, "Content-Length is not a number");
        if (n > (INT64_MAX - 9) / 10)
            return bad(&h->err, "Content-Length is out of range");
        n = n * 10 + (v[i] - '0');
    }
    if (h->content_length >= 0 && h->content_length != n)
        return bad(&h->err, "two Content-Length fields differ");
    h->content_length = n;
    return RV_HP_MORE;
}

/* One header line, line[0..n) without its line end. */
static rv_hp_result header_line(rv_hhead *h, char *line, size_t n)
{
    char *colon = memchr(line, ':', n), *v, *end;
    size_t i;

    if (is_ows(line[0]))
        return bad(&h->err, "obsolete line folding is not accepted");
    if (colon == NULL || colon == line)
        return bad(&h->err, "a header line is malformed");
    for (i = 0; line + i < colon; i++) {
        if (is_ows(line[i]))
            return bad(&h->err, "whitespace before a header's colon");
        if (!is_tchar((unsigned char)line[i]))
            return bad(&h->err, "a header name is not a token");
    }
    for (v = colon + 1; v < line + n; v++)
        if (!is_field_char((unsigned char)*v))
            return bad(&h->err, "a header value has a control character");
    v = colon + 1;
    end = line + n;
    while (v < end && is_ows(*v))
        v++;
    while (end > v && is_ows(end[-1]))
        end--;
    *colon = '\0';
    *end = '\0';
    if (strcasecmp(line, "Host") == 0) {
        h->hosts++;
        if (!host_ok(v))
            return bad(&h->err, "the Host field is malformed");
    } else if (strcasecmp(line, "Content-Length") == 0) {
        return content_length(h, v);
    } else if (strcasecmp(line, "Transfer-Encoding") == 0) {
        h->te = 1;
        list_each(v, te_el, h);
    } else if (strcasecmp(line, "Connection") == 0) {
        list_each(v, connection_el, h);
    } else if (strcasecmp(line, "Expect") == 0) {
        if (strcasecmp(v, "100-continue") == 0)
            h->expect_continue = 1;
    }
    return RV_HP_MORE;
}

/* The head is complete: the framing and the rules on the whole. */
static rv_hp_result head_done(rv_hhead *h)
{
    if (h->minor == 1 && h->hosts != 1)
        return bad(&h->err, h->hosts == 0 ? "an HTTP/1.1 request has no Host"
                                          : "more than one Host field");
    if (h->te) {
        if (h->content_length >= 0)
            return bad(&h->err,
                       "Transfer-Encoding and Content-Length together");
        /* Without a final chunked the body's end cannot be known: 400
         * and close (RFC 9112 section 6.3); chunked twice is malformed;
         * a coding before a final chunked is one we do not implement. */
        if (!h->te_last_chunked)
            return bad(&h->err, "chunked is not the final transfer coding");
        if (h->te_chunked != 1)
            return bad(&h->err, "Transfer-Encoding is malformed");
        if (h->te_other > 0)
            return fail(&h->err, 501, "NOT_IMPLEMENTED",
                        "the only transfer coding accepted is chunked");
        h->chunked = 1;
    }
    h->expect_continue = h->expect_continue && h->minor == 1;
    /* HTTP/1.0 with Transfer-Encoding: closed after the answer (RFC
     * 9112 section 6.1: its framing cannot be trusted further). */
    h->keep_alive = !h->close && (h->minor == 1 || h->ka)
                    && !(h->te && h->minor == 0);
    return RV_HP_DONE;
}

/* An incomplete line buf[pos..len): refused now if it is already over a
 * limit, whatever follows. */
static rv_hp_result partial_line(rv_hhead *h, const char *buf, size_t len)
{
    const char *p = buf + h->pos;
    const size_t n = len - h->pos;

    if (h->line_done) {
        if (h->header_bytes + n > RV_HP_HEADERS_MAX)
            return fail(&h->err, 431, "HEADERS_TOO_LARGE",
                        "the headers are over 16 KiB");
        return RV_HP_MORE;
    }
    if (n > 0)
        h->started = 1;
    {
        const char *sp1 = memchr(p, ' ', n);

        if (sp1 == NULL) {
            if (n > RV_HP_METHOD_MAX)
                return bad(&h->err, "the request line is malformed");
            return RV_HP_MORE;
        }
        if ((size_t)(sp1 - p) > RV_HP_METHOD_MAX)
            return bad(&h->err, "the method is too long");
        {
            const size_t rest = n - (size_t)(sp1 + 1 - p);
            const char *sp2 = memchr(sp1 + 1, ' ', rest);
            const size_t tlen = sp2 != NULL ? (size_t)(sp2 - sp1 - 1) : rest;

            if (tlen > RV_HP_TARGET_MAX)
                return fail(&h->err, 414, "URI_TOO_LONG",
                            "the request target is over 8 KiB");
            if (sp2 != NULL && n - (size_t)(sp2 + 1 - p) > 9)
                return bad(&h->err, "the request line is malformed");
        }
    }
    return RV_HP_MORE;
}

rv_hp_result rv_hparse_head(rv_hhead *h, char *buf, size_t len)
{
    while (h->pos < len) {
        char *line = buf + h->pos;
        char *lf = memchr(line, '\n', len - h->pos);
        size_t n;
        rv_hp_result r;

        if (lf == NULL)
            return partial_line(h, buf, len);
        /* What the line's bytes decided before its LF came, decided the
         * same when they come together. */
        r = partial_line(h, buf, h->pos + (size_t)(lf - line));
        if (r == RV_HP_ERROR)
            return r;
        n = (size_t)(lf - line);
        if (n > 0 && line[n - 1] == '\r')
            n--;
        if (memchr(line, '\r', n) != NULL)
            return bad(&h->err, "a bare CR in the request's head");
        if (!h->line_done) {
            if (n == 0) {
                /* An empty line before the request line. */
                if (h->pos + (size_t)(lf + 1 - line) > 8)
                    return bad(&h->err, "the request line is malformed");
                h->pos += (size_t)(lf + 1 - line);
                continue;
            }
            h->started = 1;
            r = request_line(h, line, n);
            h->pos += (size_t)(lf + 1 - line);
            h->fields = h->pos;
            h->parsed = h->pos;
            if (r != RV_HP_MORE)
                return r;
            continue;
        }
        h->header_bytes += (size_t)(lf + 1 - line);
        if (h->header_bytes > RV_HP_HEADERS_MAX)
            return fail(&h->err, 431, "HEADERS_TOO_LARGE",
                        "the headers are over 16 KiB");
        h->pos += (size_t)(lf + 1 - line);
        if (n == 0) {
            h->head_len = h->pos;
            h->parsed = h->pos;
            *line = '\0';
            return head_done(h);
        }
        r = header_line(h, line, n);
        if (r != RV_HP_MORE)
            return r;
        h->parsed = h->pos;
    }
    return partial_line(h, buf, len);
}

const char *rv_hparse_header(const rv_hhead *h, const char *buf,
                             const char *name)
{
    const char *p = buf + h->fields, *end = buf + h->parsed;

    if (!h->line_done)
        return NULL;
    while (p < end) {
        const char *v;

        while (p < end
               && (*p == '\0' || *p == '\r' || *p == '\n' || is_ows(*p)))
            p++;
        if (p >= end)
            break;
        v = p + strlen(p) + 1; /* the name's NUL, where the colon was */
        while (is_ows(*v))
            v++;
        if (strcasecmp(p, name) == 0)
            return v;
        p = v + strlen(v) + 1;
    }
    return NULL;
}

void rv_hbody_init(rv_hbody *b, const rv_hhead *h, uint64_t max)
{
    memset(b, 0, sizeof(*b));
    b->chunked = h->chunked;
    b->max = max;
    b->left = h->chunked || h->content_length < 0
                  ? 0
                  : (uint64_t)h->content_length;
    b->state = h->chunked ? CH_SIZE : CH_DONE;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A line end in chunked framing: CRLF or a bare LF.  Returns 1 at the
 * LF, 0 at the CR (more to come), -1 for anything else. */
static int line_end(rv_hbody *b, char c)
{
    if (c == '\r' && !b->cr) {
        b->cr = 1;
        return 0;
    }
    if (c == '\n') {
        b->cr = 0;
        return 1;
    }
    return -1;
}

rv_hp_result rv_hbody_feed(rv_hbody *b, const char *in, size_t len,
                           size_t *used, const char **data, size_t *dlen)
{
    size_t i = 0;

    *data = NULL;
    *dlen = 0;
    *used = 0;
    if (!b->chunked) {
        const size_t n = b->left < len ? (size_t)b->left : len;

        *data = n > 0 ? in : NULL;
        *dlen = n;
        *used = n;
        b->left -= n;
        return b->left == 0 ? RV_HP_DONE : RV_HP_MORE;
    }
    while (i < len) {
        const char c = in[i];

        switch (b->state) {
        case CH_SIZE: {
            const int d = hex_value(c);
            const uint64_t limit = b->max - b->total;

            if (d >= 0) {
                if ((uint64_t)d > limit
                    || b->left > (limit - (uint64_t)d) / 16) {
                    *used = i;
                    return fail(&b->err, 413, "PAYLOAD_TOO_LARGE",
                                "the request body is over its cap");
                }
                b->left = b->left * 16 + (uint64_t)d;
                b->digits++;
                b->line++;
                i++;
                break;
            }
            if (b->digits == 0) {
                *used = i;
                return bad(&b->err, "a chunk size is malformed");
            }
            b->state = CH_EXT;
        }
            /* fall through */
        case CH_EXT: {
            const int e = (c == '\r' || c == '\n') ? line_end(b, c) : -2;

            /* After the size: OWS, then ";" and extensions, or the end. */
            if (e == -2 && c == ';')
                b->ext = 1;
            if (++b->line > RV_HP_CHUNK_LINE_MAX || e == -1
                || (e == -2
                    && (b->cr || !is_field_char((unsigned char)c)
                        || (!b->ext && !is_ows(c))))) {
                *used = i;
                return bad(&b->err, "a chunk size line is malformed");
            }
            i++;
            if (e == 1) {
                b->line = 0;
                b->digits = 0;
                b->ext = 0;
                b->state = b->left == 0 ? CH_TRAILER : CH_DATA;
            }
            break;
        }
        case CH_DATA: {
            const size_t n = b->left < len - i ? (size_t)b->left : len - i;

            b->left -= n;
            b->total += n;
            if (b->left == 0)
                b->state = CH_DATA_END;
            *data = in + i;
            *dlen = n;
            *used = i + n;
            return RV_HP_MORE;
        }
        case CH_DATA_END:
            if (line_end(b, c) < 0) {
                *used = i;
                return bad(&b->err, "a chunk's data is not followed by CRLF");
            }
            i++;
            if (!b->cr)
                b->state = CH_SIZE;
            break;
        case CH_TRAILER:
            if (++b->trailers > RV_HP_TRAILERS_MAX) {
                *used = i;
                return fail(&b->err, 431, "HEADERS_TOO_LARGE",
                            "the chunked trailers are over 16 KiB");
            }
            i++;
            if (c == '\r' || c == '\n') {
                const int e = line_end(b, c);

                if (e < 0) {
                    *used = i - 1;
                    return bad(&b->err, "a bare CR in the trailers");
                }
                if (e == 1) {
                    if (b->line == 0) {
                        b->state = CH_DONE;
                        *used = i;
                        return RV_HP_DONE;
                    }
                    b->line = 0;
                }
            } else if (b->cr || !is_field_char((unsigned char)c)) {
                *used = i - 1;
                return bad(&b->err, "a trailer line is malformed");
            } else {
                b->line++;
            }
            break;
        default: *used = i; return RV_HP_DONE;
        }
    }
    *used = i;
    return RV_HP_MORE;
}

size_t rv_hparse_unescape(char *s)
{
    size_t r = 0, w = 0;

    while (s[r] != '\0') {
        int hi, lo;

        if (s[r] == '%' && (hi = hex_value(s[r + 1])) >= 0
            && (lo = hex_value(s[r + 2])) >= 0) {
            s[w++] = (char)(hi * 16 + lo);
            r += 3;
        } else {
            s[w++] = s[r++];
        }
    }
    s[w] = '\0';
    return w;
}

int rv_hparse_query(char *q,
                    int (*arg)(void *cls, const char *key, const char *value),
                    void *cls)
{
    while (*q != '\0') {
        char *amp = strchr(q, '&'), *eq, *p;

        if (amp != NULL)
            *amp = '\0';
        if (*q != '\0') {
            for (p = q; *p != '\0'; p++)
                if (*p == '+')
                    *p = ' ';
            eq = strchr(q, '=');
            if (eq != NULL)
                *eq = '\0';
            rv_hparse_unescape(q);
            if (eq != NULL)
                rv_hparse_unescape(eq + 1);
            if (!arg(cls, q, eq != NULL ? eq + 1 : NULL))
                return 0;
        }
        if (amp == NULL)
            break;
        q = amp + 1;
    }
    return 1;
}
