/*
 * rv_hparse.h: reviewd's HTTP/1.1 request parser, incremental and pure
 * (no I/O, no allocation), strict per RFC 9112 and bounded.
 *
 * Why our own: every answer reviewd sends must be JSON with an
 * X-Request-Id (issue 15), including the ones a library would send
 * itself for requests it cannot parse.  Here each refusal is a status,
 * an error code of docs/api.md and a detail, and the caller (rv_http.c)
 * writes the answer.
 *
 * The head: rv_hparse_head is called with the connection's buffer each
 * time bytes arrive, the same buffer growing (the bytes already given
 * must not change).  It examines only complete lines it has not seen,
 * and decides a limit as soon as the bytes show it, whatever follows: a
 * request target over RV_HP_TARGET_MAX (414), header lines over
 * RV_HP_HEADERS_MAX together (431), so a caller never buffers more than
 * RV_HP_HEAD_MAX bytes of a head.  Once the head is complete, the method,
 * the target and each header are NUL-terminated strings inside the
 * caller's buffer (the parser writes the NULs over the separators), read
 * with rv_hparse_header; they live as long as the buffer's first
 * head_len bytes.
 *
 * The body: rv_hbody decodes a Content-Length or chunked body piece by
 * piece, from whatever bytes follow the head, and says where it ends
 * (the rest is the next request).  Chunk sizes, chunk-size lines and
 * trailers are bounded; trailers are read and dropped.
 *
 * Refusals (status, code):
 *   400 BAD_REQUEST      malformed request line, header line, framing
 *                        (Content-Length not digits or out of range, two
 *                        that differ, Transfer-Encoding with it or
 *                        without a final "chunked", "chunked" twice),
 *                        a bare CR, obs-fold, whitespace before a colon,
 *                        HTTP/1.1 without exactly one Host, a Host that
 *                        is not host[:port], a malformed chunk;
 *   413 PAYLOAD_TOO_LARGE a chunked body past its cap;
 *   414 URI_TOO_LONG     a request target over 8 KiB;
 *   431 HEADERS_TOO_LARGE header lines (or trailers) over 16 KiB;
 *   501 NOT_IMPLEMENTED  a transfer coding before the final chunked;
 *   505 HTTP_VERSION_NOT_SUPPORTED  HTTP/d.d other than 1.0 and 1.1.
 *
 * Threads: the state belongs to its caller; no global state.
 */
#ifndef RV_HPARSE_H
#define RV_HPARSE_H

#include <stddef.h>
#include <stdint.h>

#define RV_HP_METHOD_MAX 32
#define RV_HP_TARGET_MAX (8 * 1024)
#define RV_HP_HEADERS_MAX (16 * 1024)
/* The most a request line can take: method, target, version, spaces
 * and line end. */
#define RV_HP_LINE_MAX (RV_HP_METHOD_MAX + RV_HP_TARGET_MAX + 16)
/* The most bytes of a head a caller buffers before a decision: a few
 * empty lines before it, the request line, the headers, the end. */
#define RV_HP_HEAD_MAX (8 + RV_HP_LINE_MAX + RV_HP_HEADERS_MAX + 2)
/* Chunk-size lines (with extensions) and chunk trailers. */
#define RV_HP_CHUNK_LINE_MAX 1024
#define RV_HP_TRAILERS_MAX RV_HP_HEADERS_MAX

typedef enum rv_hp_result {
    RV_HP_MORE = 0, /* everything given is used; more bytes are needed */
    RV_HP_DONE = 1, /* the head (or body) is complete */
    RV_HP_ERROR = 2 /* refused: status, code and detail are set */
} rv_hp_result;

typedef struct rv_hp_error {
    unsigned status;    /* 400, 413, 414, 431, 501, 505 */
    const char *code;   /* docs/api.md's code (static) */
    const char *detail; /* for the client (static) */
} rv_hp_error;

typedef struct rv_hhead {
    /* Once RV_HP_DONE, inside the caller's buffer: */
    const char *method;     /* a token */
    const char *target;     /* as received: "/..." or "*" (OPTIONS) */
    int minor;              /* HTTP/1.<minor>: 0 or 1 */
    size_t head_len;        /* bytes of the head, its empty line included */
    int64_t content_length; /* -1: none */
    int chunked;            /* Transfer-Encoding: chunked */
    int keep_alive;         /* the connection may carry another request */
    int expect_continue;    /* Expect: 100-continue (HTTP/1.1) */
    int started;            /* a byte of the request line has arrived */
    rv_hp_error err;        /* RV_HP_ERROR's reason */
    /* Parser state. */
    size_t pos;          /* the first byte not examined yet */
    size_t fields;       /* the first header line */
    size_t parsed;       /* the end of the last header line accepted */
    size_t header_bytes; /* header lines so far, line ends included */
    int line_done;       /* the request line was parsed */
    int hosts;           /* Host fields seen */
    int close;           /* Connection: close */
    int ka;              /* Connection: keep-alive */
    int te;              /* Transfer-Encoding seen */
    int te_chunked;      /* "chunked" codings in it */
    int te_other;        /* other codings in it */
    int te_last_chunked; /* the last coding in it is chunked */
} rv_hhead;

/* Prepares h for a new request. */
void rv_hparse_init(rv_hhead *h);

/* Examines buf[0..len) (the whole request so far, given again as it
 * grows; bytes before h->pos are never read again except by
 * rv_hparse_header).  RV_HP_DONE: the head is buf[0..head_len); what
 * follows is the body, or the next request. */
rv_hp_result rv_hparse_head(rv_hhead *h, char *buf, size_t len);

/* The value of the first header field named name (case-insensitive),
 * NULL if absent: after RV_HP_DONE, or after a refusal once the request
 * line was parsed (then among the header lines before the refused one),
 * with the same buf. */
const char *rv_hparse_header(const rv_hhead *h, const char *buf,
                             const char *name);

typedef struct rv_hbody {
    int chunked;
    int state;       /* where in the chunked framing */
    uint64_t left;   /* bytes left of the body or the chunk */
    uint64_t total;  /* chunked: data bytes so far */
    uint64_t max;    /* chunked: the most data accepted (then 413) */
    size_t line;     /* bytes of the current size line */
    size_t trailers; /* bytes of trailers */
    int digits;      /* hex digits of the current size */
    int ext;         /* a chunk extension began (";") */
    int cr;          /* a CR was just seen */
    rv_hp_error err;
} rv_hbody;

/* Prepares b for the body h announces; a chunked body carries at most
 * max bytes of data. */
void rv_hbody_init(rv_hbody *b, const rv_hhead *h, uint64_t max);

/* Decodes from in[0..len): sets *used to the bytes consumed and
 * (*data, *dlen) to the body bytes among them (a piece of in; *dlen 0
 * for none).  Called again with the rest while *used < len.
 * RV_HP_MORE: no end yet; RV_HP_DONE: the body ended at in + *used;
 * RV_HP_ERROR: b->err. */
rv_hp_result rv_hbody_feed(rv_hbody *b, const char *in, size_t len,
                           size_t *used, const char **data, size_t *dlen);

/* Decodes %XX in s in place (a '%' not followed by two hex digits stays
 * as it is); returns the new length.  The result may hold NULs. */
size_t rv_hparse_unescape(char *s);

/* The query string q (after '?', modified in place) split on '&' into
 * key=value pairs, '+' read as a space, each percent-decoded; arg is
 * called with each (value NULL without '='), and stops the walk by
 * returning 0.  Returns 0 if it was stopped, else 1. */
int rv_hparse_query(char *q,
                    int (*arg)(void *cls, const char *key, const char *value),
                    void *cls);

#endif /* RV_HPARSE_H */
