/*
 * fuzz_reply.c: fuzz target for reply handling in the transport, the bytes
 * a Redis server (or whatever answers on its port) sends back.
 *
 * The target plays the server: dlock__conn_from_fd wraps one end of a
 * socketpair in a dlock__conn, the input is written into the other end as
 * the server's replies, and dlock__conn_recv is called until it fails or
 * has nothing more.  Then the server end is shut down, so the session
 * always ends in an error (the connection closed, or a protocol error
 * earlier), never in a wait.  For each input:
 *
 *   - nothing may crash, leak or hit undefined behaviour (the sanitizers),
 *     and no call may wait: every recv before the end uses deadline 0, and
 *     the one after the shutdown has a 2 s bound that only a hang reaches;
 *   - every reply must be well formed (known type, terminated strings,
 *     element pointers present), and an error reply must map to a code
 *     through dlock__reply_error with a terminated message;
 *   - the transport must never hold more memory than its reply ceiling,
 *     DLOCK__REPLY_MAX, whatever lengths the bytes declare (checked after
 *     every call with the allocator's own count of bytes in use);
 *   - the bytes must mean the same whatever way they arrive: the input is
 *     sent at once, then split into pieces, and every way must give the
 *     same replies (a digest of their contents) and the same final error.
 *     Payloads of up to SHORT_MAX bytes are split at every byte boundary
 *     (each two-piece split, and one byte at a time), unless the whole
 *     run made the transport hold over SPLIT_HEAP_MAX; longer ones in pieces
 *     whose sizes the input's control byte seeds, so that libFuzzer chooses
 *     the split points by mutating it.
 *
 * Found by this target: hiredis 0.14's reader allocates the element
 * vector of an array as soon as it reads the count, 8 bytes an element,
 * so 13 bytes ("*100000000\r\n") once made the transport hold 800 MB.
 * The transport now charges every reply object to a per-reply budget
 * (src/lib/transport/conn.c) and refuses such a reply with DLOCK_PROTOCOL; the
 * memory check above keeps it refused on corpus/reply/array-count-800mb.
 *
 * Input format: byte 0 is the control byte, the rest is what the server
 * sends.  Seeds in corpus/reply/ start with a printable control byte so
 * they stay readable.
 *
 * fuzz_target_selftest adds the checks too slow for every input: replies
 * just under and just over the 64 MiB ceiling (in the plain build).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "transport/conn.h"
#include "fuzz_target.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_ASAN 1
#endif
#ifdef FUZZ_ASAN
/* From <sanitizer/allocator_interface.h>, which clang ships and Debian's
 * gcc does not; both runtimes export it. */
size_t __sanitizer_get_current_allocated_bytes(void);
#else
#include <malloc.h>
#endif

#define TARGET "reply"
#define INPUT_MAX 65536
#define SHORT_MAX 48
#define SPLIT_HEAP_MAX ((size_t)1 << 20)
/* What the allocator may hold beyond the ceiling: the reader's buffer
 * and bookkeeping. */
#define HEAP_SLACK (1u << 20)
/* hiredis nests at most 7 arrays; anything deeper is a reader bug. */
#define DEPTH_MAX 9

/* What one session saw: a digest of the replies, their count, and the
 * error that ended it. */
typedef struct outcome {
    uint64_t digest;
    size_t replies;
    dlock_err end;
    size_t peak_heap; /* most bytes the transport held; not compared */
} outcome;

/* A session: the server's end, the client's connection, the bytes
 * written so far, and the memory bound. */
typedef struct session {
    int server;
    dlock__conn *conn;
    size_t fed;
    size_t heap_base;
    size_t heap_limit;
    outcome out;
    int ended;
} session;

static char fuzz_path[] = "/fuzz/redis.sock";
static const dlock__endpoint fuzz_ep = {
    .transport = DLOCK__UNIX,
    .path = fuzz_path,
    .desc = "fuzz-server",
};

static size_t heap_in_use(void)
{
#ifdef FUZZ_ASAN
    return __sanitizer_get_current_allocated_bytes();
#else
    struct mallinfo2 mi = mallinfo2();

    return mi.uordblks + mi.hblkhd;
#endif
}

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void check_error_reply(const redisReply *r)
{
    dlock__msg m = {{0}};
    dlock_err err = dlock__reply_error(r, "fuzzing", fuzz_ep.desc, &m);

    if (err != DLOCK_UNAVAILABLE && err != DLOCK_AUTH && err != DLOCK_SERVER)
        fuzz_fail(TARGET, "an error reply mapped to %s", dlock_errname(err));
    if (memchr(m.text, '\0', sizeof(m.text)) == NULL || m.text[0] == '\0')
        fuzz_fail(TARGET, "an error reply gave an unterminated or empty "
                          "message");
}

/* Checks one reply (and its elements) and folds it into the digest. */
static uint64_t check_reply(const redisReply *r, int depth, uint64_t h)
{
    int type;

    if (r == NULL)
        fuzz_fail(TARGET, "a NULL element at depth %d", depth);
    if (depth > DEPTH_MAX)
        fuzz_fail(TARGET, "a reply nested %d deep", depth);
    if (dlock__reply_type_name(r) == NULL)
        fuzz_fail(TARGET, "no type name for type %d", r->type);
    type = r->type;
    h = mix(h, &type, sizeof(type));
    switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        if (r->str == NULL || r->str[r->len] != '\0')
            fuzz_fail(TARGET, "a %s reply of %zu bytes is not terminated",
                      dlock__reply_type_name(r), r->len);
        if (r->type == REDIS_REPLY_ERROR)
            check_error_reply(r);
        h = mix(h, &r->len, sizeof(r->len));
        return mix(h, r->str, r->len);
    case REDIS_REPLY_INTEGER: return mix(h, &r->integer, sizeof(r->integer));
    case REDIS_REPLY_NIL: return h;
    case REDIS_REPLY_ARRAY:
        if (r->elements > 0 && r->element == NULL)
            fuzz_fail(TARGET, "an array of %zu has no element vector",
                      r->elements);
        h = mix(h, &r->elements, sizeof(r->elements));
        for (size_t i = 0; i < r->elements; i++)
            h = check_reply(r->element[i], depth + 1, h);
        return h;
    default: fuzz_fail(TARGET, "a reply of unknown type %d", r->type);
    }
}

static void check_heap(session *s)
{
    size_t now = heap_in_use();

    if (now > s->heap_base && now - s->heap_base > s->out.peak_heap)
        s->out.peak_heap = now - s->heap_base;
    if (now > s->heap_base && now - s->heap_base > s->heap_limit)
        fuzz_fail(TARGET,
                  "the transport holds %zu bytes after %zu bytes "
                  "were fed: a reply's memory is not bounded by the %u-byte "
                  "ceiling (DLOCK__REPLY_MAX)",
                  now - s->heap_base, s->fed, DLOCK__REPLY_MAX);
}

/* Ends the session with err, which must have broken the connection. */
static void end_session(session *s, dlock_err err, const dlock__msg *m)
{
    if (memchr(m->text, '\0', sizeof(m->text)) == NULL || m->text[0] == '\0')
        fuzz_fail(TARGET, "%s came without a terminated message",
                  dlock_errname(err));
    if (!dlock__conn_broken(s->conn))
        fuzz_fail(TARGET, "%s (\"%s\") left the connection usable",
                  dlock_errname(err), m->text);
    s->out.end = err;
    s->ended = 1;
}

/* Takes every complete reply, without waiting (deadline_us 0), or with a
 * bound after the shutdown.  Each reply takes at least 3 bytes, so more
 * than fed/3 + 2 calls means the transport loops. */
static void drain(session *s, int64_t deadline_us)
{
    for (size_t calls = 0; calls <= s->fed / 3 + 2; calls++) {
        redisReply *r = NULL;
        dlock__msg m = {{0}};
        dlock_err err = dlock__conn_recv(s->conn, deadline_us, &r, &m);

        check_heap(s);
        if (err != DLOCK_OK) {
            if (r != NULL)
                fuzz_fail(TARGET, "%s with a reply", dlock_errname(err));
            end_session(s, err, &m);
            return;
        }
        if (r == NULL)
            return;
        s->out.digest = check_reply(r, 0, s->out.digest);
        s->out.replies++;
        freeReplyObject(r);
    }
    fuzz_fail(TARGET, "more replies than %zu bytes can hold", s->fed);
}

/* Writes len bytes as the server, taking replies whenever the socket is
 * full so that neither side can block the other. */
static void serve(session *s, const uint8_t *p, size_t len)
{
    size_t done = 0;

    while (done < len && !s->ended) {
        ssize_t n = send(s->server, p + done, len - done, MSG_NOSIGNAL);

        if (n < 0 && errno != EAGAIN && errno != EINTR)
            fuzz_fail(TARGET, "writing as the server: %s", strerror(errno));
        if (n > 0) {
            done += (size_t)n;
            s->fed += (size_t)n;
        }
        drain(s, 0);
    }
}

static void open_session(session *s, size_t heap_limit)
{
    int sv[2];
    dlock__msg m = {{0}};

    memset(s, 0, sizeof(*s));
    s->out.digest = 14695981039346656037ull;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        fuzz_fail(TARGET, "socketpair: %s", strerror(errno));
    fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK);
    s->server = sv[1];
    s->heap_base = heap_in_use();
    s->heap_limit = heap_limit;
    if (dlock__conn_from_fd(sv[0], &fuzz_ep, &s->conn, &m) != DLOCK_OK)
        fuzz_fail(TARGET, "dlock__conn_from_fd: %s", m.text);
}

/* Shuts the server's end and takes what is left: the session must end in
 * an error well before the 2 s bound. */
static void close_session(session *s)
{
    if (!s->ended) {
        shutdown(s->server, SHUT_WR);
        drain(s, dlock__deadline_after_ms(2000));
    }
    if (!s->ended)
        fuzz_fail(TARGET, "the session did not end after the server closed");
    if (s->out.end == DLOCK_TIMEOUT)
        fuzz_fail(TARGET, "the transport waited after the server closed");
    dlock__conn_free(s->conn);
    close(s->server);
}

/* Sends a command first, as dlock__conn_call would, and drops it unread
 * on the server side: the send path shares the connection's state. */
static void send_ping(session *s)
{
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    dlock__msg m = {{0}};
    char sink[64];

    if (dlock__conn_send(s->conn, ping, sizeof(ping) - 1,
                         dlock__deadline_after_ms(2000), &m)
        != DLOCK_OK)
        fuzz_fail(TARGET, "sending PING on a fresh connection: %s", m.text);
    if (recv(s->server, sink, sizeof(sink), 0) != (ssize_t)sizeof(ping) - 1)
        fuzz_fail(TARGET, "the server did not get the PING");
}

/* One session with the payload cut into pieces of the given sizes (their
 * sum is n). */
static void run_pieces(const uint8_t *p, const size_t *pieces, size_t count,
                       int ping, outcome *out)
{
    session s;
    size_t at = 0;

    open_session(&s, DLOCK__REPLY_MAX + HEAP_SLACK);
    if (ping)
        send_ping(&s);
    for (size_t i = 0; i < count && !s.ended; i++) {
        serve(&s, p + at, pieces[i]);
        at += pieces[i];
    }
    close_session(&s);
    *out = s.out;
}

static void expect_same(const outcome *whole, const outcome *split,
                        const char *how, size_t n)
{
    if (whole->replies != split->replies || whole->digest != split->digest
        || whole->end != split->end)
        fuzz_fail(TARGET,
                  "%zu bytes sent at once gave %zu replies and %s; "
                  "sent %s they gave %zu replies and %s%s",
                  n, whole->replies, dlock_errname(whole->end), how,
                  split->replies, dlock_errname(split->end),
                  whole->replies == split->replies && whole->end == split->end
                      ? " (different contents)"
                      : "");
}

/* Short payloads: every two-piece split, and one byte at a time. */
static void split_everywhere(const uint8_t *p, size_t n, const outcome *whole)
{
    static size_t ones[SHORT_MAX];
    char how[64];
    outcome split;

    for (size_t k = 1; k < n; k++) {
        size_t two[2] = {k, n - k};

        run_pieces(p, two, 2, 0, &split);
        snprintf(how, sizeof(how), "split after byte %zu", k);
        expect_same(whole, &split, how, n);
    }
    for (size_t i = 0; i < n; i++)
        ones[i] = 1;
    run_pieces(p, ones, n, 0, &split);
    expect_same(whole, &split, "one byte at a time", n);
}

/* Long payloads: piece sizes from a generator seeded by the control byte,
 * from 1 byte to 4 KiB, so that small and large pieces mix. */
static void split_by_seed(const uint8_t *p, size_t n, uint8_t control,
                          const outcome *whole)
{
    static size_t pieces[INPUT_MAX];
    uint32_t x = (control + 1u) * 2654435761u;
    size_t count = 0, left = n;
    outcome split;
    char how[64];

    while (left > 0) {
        size_t len;

        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        len = 1 + (x >> 8) % (1u << (x % 13));
        if (len > left)
            len = left;
        pieces[count++] = len;
        left -= len;
    }
    run_pieces(p, pieces, count, 0, &split);
    snprintf(how, sizeof(how), "in %zu pieces (seed %u)", count,
             (unsigned)control);
    expect_same(whole, &split, how, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data + 1;
    size_t n, whole_piece;
    outcome whole;

    if (size < 1 || size > INPUT_MAX + 1)
        return 0;
    n = size - 1;
    whole_piece = n;
    run_pieces(p, &whole_piece, n > 0, 1, &whole);
    /* A short input that made the transport hold megabytes (a declared
     * array of millions of elements, within the ceiling) is split once by
     * the seed rather than at each of its boundaries: twenty such
     * allocations per input take seconds under ASan, and a loaded machine
     * then hits libFuzzer's per-input timeout with no bug to find. */
    if (n <= SHORT_MAX && whole.peak_heap <= SPLIT_HEAP_MAX)
        split_everywhere(p, n, &whole);
    else
        split_by_seed(p, n, data[0], &whole);
    return 0;
}

/* ---- fixed checks, run once by the replay main -------------------------- */

#ifdef FUZZ_ASAN
/* Streaming 2 x 64 MiB through hiredis's reader grows its buffer 1 MiB at
 * a time: under AddressSanitizer every step is a fresh mapping, and the two
 * checks take a minute on this 2-core machine instead of a few seconds.
 * The plain build runs them. */
void fuzz_target_selftest(void)
{
    fprintf(stderr,
            "fuzz: %s: the 64 MiB ceiling checks run in the plain "
            "build only\n",
            TARGET);
}
#else

/* Declares a bulk string of len bytes and streams it (and its CRLF) in
 * 64 KiB writes; returns how the session ended (DLOCK_OK: one reply). */
static dlock_err stream_bulk(size_t len, size_t *reply_len)
{
    static uint8_t block[65536];
    char head[32];
    session s;
    size_t sent = 0;

    memset(block, 'x', sizeof(block));
    /* The reader's buffer and the finished reply both hold the string. */
    open_session(&s, 3 * (size_t)DLOCK__REPLY_MAX + HEAP_SLACK);
    snprintf(head, sizeof(head), "$%zu\r\n", len);
    serve(&s, (const uint8_t *)head, strlen(head));
    while (sent < len + 2 && !s.ended && s.out.replies == 0) {
        size_t chunk = len + 2 - sent < sizeof(block) ? len + 2 - sent
                                                      : sizeof(block);

        serve(&s, block, chunk);
        sent += chunk;
    }
    *reply_len = s.out.replies;
    if (s.out.replies == 1) {
        dlock__conn_free(s.conn);
        close(s.server);
        return DLOCK_OK;
    }
    close_session(&s);
    return s.out.end;
}

void fuzz_target_selftest(void)
{
    size_t replies;
    size_t head = strlen("$67108000\r\n");
    size_t under = DLOCK__REPLY_MAX - head - 2 - 64;
    dlock_err err;

    err = stream_bulk(under, &replies);
    if (err != DLOCK_OK || replies != 1)
        fuzz_fail(TARGET,
                  "a %zu-byte bulk reply, under the ceiling, gave "
                  "%s and %zu replies",
                  under, dlock_errname(err), replies);
    err = stream_bulk(DLOCK__REPLY_MAX + 1024, &replies);
    if (err != DLOCK_PROTOCOL)
        fuzz_fail(TARGET,
                  "a bulk reply over the %u-byte ceiling gave %s, "
                  "not PROTOCOL",
                  DLOCK__REPLY_MAX, dlock_errname(err));
    fprintf(stderr,
            "fuzz: %s: replies under and over the %u-byte ceiling "
            "are taken and refused\n",
            TARGET, DLOCK__REPLY_MAX);
}
#endif
