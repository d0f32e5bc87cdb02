/*
 * test_reviewd_fuzz.c: 10,000 randomly mutated requests, then a healthy
 * service and not one 5xx.
 *
 * The requests start from the API's real shapes (methods, paths with
 * ids, tokens, content types, idempotency keys, JSON bodies) and are then
 * mutated at random: bytes flipped, inserted and cut, fields given the
 * wrong types, huge numbers, deep nesting, invalid UTF-8 in bodies and
 * percent-encoded paths, forged or truncated tokens, odd methods and
 * headers.  Every request is correctly framed (its Content-Length is
 * true), so a server that stays quiet is hanging, not waiting for more:
 * each answer must come within 10 s, and none may be 5xx.  Afterwards
 * /healthz and /readyz must answer and a full create, submit, approve
 * cycle must work.  The seed is printed (and taken from RVT_FUZZ_SEED) so
 * a failure can be replayed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rvt_kit.h"
#include "testkit.h"
#include "testkit_threads.h"

#define REQUESTS 10000
#define THREADS 4
#define BODY_MAX 65536

static rvt_db db;
static rvt_server srv;
static char *tokens[4];
static char ids[8][24];
static uint64_t seed;
static atomic_int answered, five_xx, hung, closed;

static int setup(void **state)
{
    const char *const env[] = {"REVIEWD_CONNECTION_TIMEOUT_S=3", NULL};
    const char *s = getenv("RVT_FUZZ_SEED");
    int i;

    (void)state;
    seed = s != NULL ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
    fprintf(stderr, "fuzz seed %llu (RVT_FUZZ_SEED to replay)\n",
            (unsigned long long)seed);
    if (testkit_shared_redis() == NULL
        || rvt_fixture_start(&db, &srv, "fuzz", testkit_redis_url(), env, 1)
               != 0)
        return -1;
    tokens[0] = rvt_token("alice", "author", 3600);
    tokens[1] = rvt_token("bob", "reviewer", 3600);
    tokens[2] = rvt_token("root", "admin", 3600);
    tokens[3] = rvt_token("alice", "author", -300); /* past the leeway */
    for (i = 0; i < 4; i++)
        if (rvt_create_pending(srv.port, tokens[0], ids[2 * i], ids[2 * i + 1])
            != 0)
            return -1;
    return 0;
}

static int teardown(void **state)
{
    const int clean = rvt_fixture_stop(&db, &srv);
    int i;

    (void)state;
    for (i = 0; i < 4; i++)
        free(tokens[i]);
    return clean ? 0 : -1;
}

/* xorshift64*: fast, and reproducible from the seed. */
static uint64_t next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

static unsigned pick(uint64_t *s, unsigned n)
{
    return (unsigned)(next(s) % n);
}

#define PICK(s, arr) (arr[pick(s, sizeof(arr) / sizeof(arr[0]))])

/* A growing request buffer. */
typedef struct buf {
    char data[BODY_MAX + 16384];
    size_t len;
} buf;

static void put(buf *b, const char *p, size_t n)
{
    if (b->len + n < sizeof(b->data)) {
        memcpy(b->data + b->len, p, n);
        b->len += n;
    }
}

static void puts_(buf *b, const char *s)
{
    put(b, s, strlen(s));
}

static const char *const methods[] = {"GET",     "POST",
                                      "PUT",     "HEAD",
                                      "DELETE",  "PATCH",
                                      "OPTIONS", "G3T",
                                      "post",    "GET / HTTP/1.1\r\nX:"};
/* Each path shape with the method it serves. */
static const struct {
    const char *method;
    const char *shape;
} shapes[] = {
    {"POST", "/v1/documents"},
    {"POST", "/v1/documents"},
    {"GET", "/v1/documents/%s"},
    {"PUT", "/v1/documents/%s"},
    {"POST", "/v1/documents/%s/submit"},
    {"POST", "/v1/documents/%s/submit"},
    {"GET", "/v1/reviews"},
    {"GET", "/v1/reviews/%s"},
    {"POST", "/v1/reviews/%s/approve"},
    {"POST", "/v1/reviews/%s/approve"},
    {"POST", "/v1/reviews/%s/reject"},
    {"POST", "/v1/reviews/%s/reject"},
    {"GET", "/healthz"},
    {"GET", "/readyz"},
    {"GET", "/metrics"},
    {"GET", "/v1/documents/%s?include=content"},
    {"GET", "/v1/reviews?status=%s&limit=%s"},
    {"GET", "/v1/reviews?after=%s"},
    {"GET", "/nowhere/%s"},
};
static const char *const odd_ids[] = {"0",
                                      "-1",
                                      "abc",
                                      "007",
                                      "99999999999999999999",
                                      "9223372036854775807",
                                      "9223372036854775808",
                                      "%00",
                                      "%C3%A9",
                                      "%FF%FE",
                                      "1%2F2",
                                      "",
                                      "1.0",
                                      "pending",
                                      "%2e%2e"};
static const char *const types[] = {"application/json",
                                    "application/json",
                                    "application/json",
                                    "application/json; charset=utf-8",
                                    "application/json; charset=latin1",
                                    "text/plain",
                                    "application/x-www-form-urlencoded",
                                    "",
                                    "application",
                                    "application/json;;;"};
static const char *const bodies[] = {
    "{\"title\":\"t\",\"content\":\"c\"}",
    "{\"title\":\"x\"}",
    "{\"comment\":\"ok\"}",
    "{}",
    "",
    "{\"content\":\"\\u00e9\"}",
    "{\"title\":\"a\",\"title\":\"b\",\"content\":\"c\"}",
    "{\"title\":1e400,\"content\":\"c\"}",
    "[]",
    "null",
    "{\"comment\":\"\\ud800\"}",
    "{\"title\":{\"a\":[1,2,{}]},\"content\":0}"};

static const char *random_id(uint64_t *s)
{
    return pick(s, 3) == 0 ? PICK(s, odd_ids) : ids[pick(s, 8)];
}

/* The request line up to the version: mostly the shape's own method. */
static void add_method_and_path(buf *b, uint64_t *s)
{
    char path[512];
    const unsigned k = pick(s, sizeof(shapes) / sizeof(shapes[0]));
    const char *shape = shapes[k].shape;
    size_t n;

    puts_(b, pick(s, 5) == 0 ? PICK(s, methods) : shapes[k].method);
    puts_(b, " ");
    snprintf(path, sizeof(path), shape, random_id(s),
             pick(s, 2) ? "pending" : random_id(s));
    n = strlen(path);
    if (pick(s, 6) == 0 && n > 1) {
        /* Mutate one byte to another printable one (no space: the request
         * line stays framed). */
        path[pick(s, (unsigned)n)] = (char)('!' + pick(s, 94));
    }
    if (pick(s, 10) == 0 && n + 12 < sizeof(path))
        strcat(path, pick(s, 2) ? "/" : "?x=%FF&x=");
    puts_(b, path);
}

/* A token: valid, forged (one character changed), truncated or garbage. */
static void add_auth(buf *b, uint64_t *s)
{
    char tok[2048];
    const unsigned r = pick(s, 12);

    if (r == 0)
        return;
    snprintf(tok, sizeof(tok), "%s",
             tokens[pick(s, 10) == 0 ? 3 : pick(s, 3)]);
    if (r == 1) {
        tok[pick(s, (unsigned)strlen(tok))] = (char)('A' + pick(s, 26));
    } else if (r == 2) {
        tok[pick(s, (unsigned)strlen(tok))] = '\0';
    } else if (r == 3) {
        snprintf(tok, sizeof(tok), "%llx.%llx", (unsigned long long)next(s),
                 (unsigned long long)next(s));
    }
    puts_(b, pick(s, 12) == 0   ? "Authorization: bearer "
             : pick(s, 20) == 0 ? "Authorization: Basic "
                                : "Authorization: Bearer ");
    puts_(b, tok);
    puts_(b, "\r\n");
}

/* A header value of random bytes without CR or LF. */
static void add_random_value(buf *b, uint64_t *s, unsigned max)
{
    const unsigned n = pick(s, max) + 1;
    unsigned i;

    for (i = 0; i < n; i++) {
        char c = (char)(pick(s, 4) == 0 ? 0x80 + pick(s, 128)
                                        : ' ' + pick(s, 95));

        put(b, &c, 1);
    }
}

static void add_headers(buf *b, uint64_t *s)
{
    if (pick(s, 5) == 0) {
        puts_(b, "Idempotency-Key: ");
        add_random_value(b, s, pick(s, 4) == 0 ? 300 : 20);
        puts_(b, "\r\n");
    }
    if (pick(s, 6) == 0) {
        puts_(b, "X-Request-Id: ");
        add_random_value(b, s, pick(s, 4) == 0 ? 400 : 40);
        puts_(b, "\r\n");
    }
    if (pick(s, 15) == 0) {
        puts_(b, "X-");
        add_random_value(b, s, 8);
        puts_(b, ": v\r\n");
    }
}

/* Mutates body[0..*len) in place. */
static void mutate(char *body, size_t *len, uint64_t *s)
{
    const unsigned rounds = pick(s, 4);
    unsigned i;

    for (i = 0; i<rounds && * len> 0; i++) {
        const size_t at = pick(s, (unsigned)*len);

        switch (pick(s, 4)) {
        case 0: body[at] = (char)next(s); break;
        case 1:
            if (*len + 1 < BODY_MAX) {
                memmove(body + at + 1, body + at, *len - at);
                body[at] = (char)next(s);
                (*len)++;
            }
            break;
        case 2: *len = at; break;
        default: body[at] = (char)(0x80 + pick(s, 128)); break;
        }
    }
}

/* A body: a template, mutated, or a pathological one. */
static size_t make_body(char *body, uint64_t *s)
{
    size_t len, i;
    const unsigned r = pick(s, 20);

    if (r == 0) {
        /* Deep nesting. */
        len = 4000 + pick(s, 20000);
        for (i = 0; i < len; i++)
            body[i] = i < len / 2 ? '[' : ']';
        return len;
    }
    if (r == 1) {
        len = (size_t)snprintf(body, BODY_MAX, "{\"title\":\"");
        i = 1000 + pick(s, 30000);
        memset(body + len, 'x', i);
        len += i;
        len += (size_t)snprintf(body + len, 64, "\",\"content\":\"c\"}");
        return len;
    }
    snprintf(body, BODY_MAX, "%s", PICK(s, bodies));
    len = strlen(body);
    if (pick(s, 2) == 0)
        mutate(body, &len, s);
    return len;
}

static void build_request(buf *b, char *body, uint64_t *s)
{
    char line[64];
    const size_t blen = make_body(body, s);

    b->len = 0;
    if (pick(s, 40) == 0) {
        /* Not HTTP at all, but ended like a header block. */
        add_random_value(b, s, 200);
        puts_(b, "\r\n\r\n");
        return;
    }
    add_method_and_path(b, s);
    puts_(b, pick(s, 30) == 0 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n");
    puts_(b, "Host: 127.0.0.1\r\nConnection: close\r\n");
    add_auth(b, s);
    if (pick(s, 8) != 0) {
        puts_(b, "Content-Type: ");
        puts_(b, PICK(s, types));
        puts_(b, "\r\n");
    }
    add_headers(b, s);
    if (blen > 0 || pick(s, 3) == 0) {
        snprintf(line, sizeof(line), "Content-Length: %zu\r\n", blen);
        puts_(b, line);
    }
    puts_(b, "\r\n");
    put(b, body, blen);
}

typedef struct worker {
    uint64_t state;
    int count;
} worker;

static void record(const rvt_resp *r, const buf *b)
{
    atomic_fetch_add(&answered, 1);
    if (r->timed_out) {
        if (atomic_fetch_add(&hung, 1) < 3)
            fprintf(stderr, "no answer within 10 s to: %.200s\n", b->data);
    } else if (r->status == 0) {
        atomic_fetch_add(&closed, 1);
    } else if (r->status >= 500) {
        if (atomic_fetch_add(&five_xx, 1) < 5) {
            fprintf(stderr, "%d %s to: %.300s\n", r->status,
                    r->body != NULL ? r->body : "", b->data);
        }
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    buf *b = malloc(sizeof(*b));
    char *body = malloc(BODY_MAX + 1);
    rvt_resp r;
    int i;

    for (i = 0; b != NULL && body != NULL && i < w->count; i++) {
        build_request(b, body, &w->state);
        rvt_http_raw(srv.port, b->data, b->len, 10000, &r);
        record(&r, b);
        rvt_resp_free(&r);
    }
    free(b);
    free(body);
    return NULL;
}

/* The fuzzing workers, in static storage: a failed assertion leaves the
 * case by longjmp while they still send, and the group's teardown would
 * stop the server under them; end_workers joins them first (each returns
 * after its count of requests, every one bounded by a 10 s wait). */
typedef struct workers {
    worker w[THREADS];
    testkit_threads threads;
} workers;

static workers the_workers;

/* Teardown of the fuzzing case, passed or failed. */
static int end_workers(void **state)
{
    (void)state;
    testkit_threads_join_all(&the_workers.threads);
    memset(&the_workers, 0, sizeof(the_workers));
    return 0;
}

static void ten_thousand_mutated_requests_get_no_5xx_and_no_hang(void **state)
{
    workers *ws = &the_workers;
    int i;

    (void)state;
    memset(ws, 0, sizeof(*ws));
    for (i = 0; i < THREADS; i++) {
        ws->w[i].state = seed * 0x9E3779B97F4A7C15ULL + (uint64_t)i + 1;
        ws->w[i].count = REQUESTS / THREADS;
        assert_int_equal(testkit_threads_start(&ws->threads, worker_main,
                                               &ws->w[i]),
                         0);
    }
    testkit_threads_join_all(&ws->threads);
    fprintf(stderr,
            "%d requests, %d closed without an answer (HTTP-level "
            "garbage), %d 5xx, %d hung\n",
            atomic_load(&answered), atomic_load(&closed),
            atomic_load(&five_xx), atomic_load(&hung));
    TK_EXPECT(atomic_load(&answered) == REQUESTS, "all %d requests sent",
              REQUESTS);
    TK_EXPECT(atomic_load(&five_xx) == 0, "no 5xx answer");
    TK_EXPECT(atomic_load(&hung) == 0, "no request left without an answer");
}

static void the_service_is_healthy_afterwards(void **state)
{
    char doc[24], rid[24], path[128];
    rvt_resp r;

    (void)state;
    TK_EXPECT(kill(srv.pid, 0) == 0, "reviewd is still running");
    rvt_call(srv.port, "GET", "/healthz", NULL, NULL, NULL, &r);
    TK_EXPECT(r.status == 200, "/healthz answers 200");
    rvt_resp_free(&r);
    TK_EXPECT(rvt_wait_ready(srv.port, "ok", "ok", 10000), "/readyz says ok");
    assert_int_equal(rvt_create_pending(srv.port, tokens[0], doc, rid), 0);
    snprintf(path, sizeof(path), "/v1/reviews/%s/approve", rid);
    rvt_call(srv.port, "POST", path, tokens[1], NULL, NULL, &r);
    TK_EXPECT(r.status == 200, "a full cycle still works");
    rvt_resp_free(&r);
    rvt_call(srv.port, "GET", "/metrics", NULL, NULL, NULL, &r);
    TK_EXPECT(r.body != NULL && strstr(r.body, "status=\"500\"") == NULL
                  && strstr(r.body, "status=\"503\"") == NULL,
              "the metrics agree: no 5xx was answered");
    rvt_resp_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(
            ten_thousand_mutated_requests_get_no_5xx_and_no_hang, end_workers),
        cmocka_unit_test(the_service_is_healthy_afterwards),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
