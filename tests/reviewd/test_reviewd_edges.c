/*
 * test_reviewd_edges.c: reviewd against hostile and careless HTTP
 * clients (issue 15, items 3, 14 and 15).
 *
 * One reviewd with small limits (10 connections, 8 per address, 2 s
 * header and body deadlines, a 1 MiB body budget, and a 30 s idle timeout
 * that a trickle of bytes would keep restarting) shows that:
 *   - 30 slowloris sockets, each sending a header line every 1.5 s, are
 *     all cut off within a few seconds, and a normal client from another
 *     address is served at once meanwhile;
 *   - a body trickled a byte at a time is cut at its deadline with 408;
 *   - a client that writes a whole 1 MiB + 1 body reads its 413 (no
 *     reset while it writes);
 *   - 2,000 mutated requests (random methods, paths, queries, headers and
 *     bodies) over 8 keep-alive connections each get an answer: no reset,
 *     no 5xx, every error with a JSON {code, detail} body and an
 *     X-Request-Id;
 *   - two bodies that together exceed the body budget: the second is
 *     503, and the first (and a later one) are served;
 *   - a replayed 201 carries the Location of the first, and an operation
 *     that takes no query parameters refuses one;
 *   - made-up methods share one "OTHER" label in /metrics.
 *
 * The clients here are raw sockets with their own source addresses
 * (127.0.0.x), so the per-address cap can be seen on loopback.  Every
 * wait is bounded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rvt_kit.h"
#include "rvt_wire.h"
#include "testkit.h"

static rvt_db db;
static rvt_server srv;
static char *author;
static char *reviewer;
static const rvt_person people[] = {{&author, "ann", "author"},
                                    {&reviewer, "rex", "reviewer"},
                                    {NULL, NULL, NULL}};

static int setup(void **state)
{
    const char *const env[] = {"REVIEWD_THREADS=2",
                               "REVIEWD_MAX_CONNECTIONS=10",
                               "REVIEWD_MAX_CONNECTIONS_PER_IP=8",
                               "REVIEWD_HEADER_TIMEOUT_S=2",
                               "REVIEWD_BODY_TIMEOUT_S=2",
                               "REVIEWD_CONNECTION_TIMEOUT_S=30",
                               "REVIEWD_BODY_BUFFER_MB=1",
                               "REVIEWD_LOG_FILE=@log",
                               NULL};

    (void)state;
    if (rvt_fixture_start(&db, &srv, "edges", NULL, env, 1) != 0)
        return -1;
    return rvt_people_mint(people);
}

static int teardown(void **state)
{
    (void)state;
    return rvt_fixture_end(&db, &srv, people);
}

/* ---- a raw client ------------------------------------------------------- */

/* A keep-alive connection to reviewd from source address src. */
static void dial(rvt_wire *w, const char *src)
{
    rvt_wire_dial(w, srv.port, src);
}

/* ---- slow clients ------------------------------------------------------- */

#define SLOWLORIS 30

static void slowloris_is_cut_off_and_others_are_served(void **state)
{
    static const char line[] = "X-Slow: 1\r\n";
    static const char start[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
    static const char healthz[] =
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    static rvt_wire fd[SLOWLORIS];
    rvt_wire normal;
    int open_left = SLOWLORIS, i;
    int64_t t0, next_line, served_ms;
    rvt_answer a;

    (void)state;
    for (i = 0; i < SLOWLORIS; i++) {
        dial(&fd[i], "127.0.0.1");
        (void)rvt_wire_send(&fd[i], start, sizeof(start) - 1);
    }
    /* A normal client from another address is served at once, although
     * the slow ones asked for every slot (10). */
    t0 = testkit_now_ms();
    dial(&normal, "127.0.0.2");
    assert_int_equal(rvt_wire_send(&normal, healthz, sizeof(healthz) - 1), 0);
    rvt_wire_read(&normal, 0, 5000, &a);
    served_ms = testkit_now_ms() - t0;
    rvt_wire_close(&normal);
    TK_EXPECT(a.status == 200,
              "a normal client is served beside 30 slow "
              "ones, got %d (%s) after %lld ms",
              a.status, a.why, (long long)served_ms);
    rvt_answer_clear(&a);
    /* The slow ones keep sending a header line every 1.5 s, which the
     * idle timeout (30 s) would never cut: the 2 s header deadline must,
     * so every one ends within 8 s. */
    next_line = testkit_now_ms() + 1500;
    while (open_left > 0 && testkit_now_ms() - t0 < 8000) {
        for (i = 0; i < SLOWLORIS; i++) {
            if (fd[i].fd >= 0 && rvt_wire_ended(&fd[i], 0) != RVT_WIRE_OPEN) {
                rvt_wire_close(&fd[i]);
                open_left--;
            }
        }
        if (testkit_now_ms() >= next_line) {
            for (i = 0; i < SLOWLORIS; i++)
                if (fd[i].fd >= 0)
                    (void)rvt_wire_send(&fd[i], line, sizeof(line) - 1);
            next_line += 1500;
        }
        usleep(20 * 1000);
    }
    for (i = 0; i < SLOWLORIS; i++)
        rvt_wire_close(&fd[i]);
    TK_EXPECT(open_left == 0,
              "every slowloris socket is cut off within "
              "8 s, %d still open",
              open_left);
}

static void a_trickled_body_is_cut_at_its_deadline(void **state)
{
    static const char head[] =
        "POST /v1/documents HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
        "Content-Type: application/json\r\n\r\n{";
    const int64_t t0 = testkit_now_ms();
    rvt_wire w;
    int ended = 0;
    rvt_answer a;

    (void)state;
    dial(&w, "127.0.0.1");
    assert_int_equal(rvt_wire_send(&w, head, sizeof(head) - 1), 0);
    /* One byte every 300 ms: the idle timeout would never fire. */
    while (!ended && testkit_now_ms() - t0 < 6000) {
        struct pollfd p = {w.fd, POLLIN, 0};

        if (poll(&p, 1, 300) == 1)
            ended = 1;
        else if (rvt_wire_send(&w, " ", 1) != 0)
            ended = 1;
    }
    rvt_wire_read(&w, 0, 1000, &a);
    rvt_wire_close(&w);
    TK_EXPECT(ended, "a body trickled a byte at a time is cut off "
                     "(deadline 2 s) within 6 s");
    TK_EXPECT(a.status == 408 && rvt_answer_is_json_error(&a, 0),
              "and answered 408 with a JSON error, got %d (%s)", a.status,
              a.why);
    rvt_answer_clear(&a);
}

/* ---- early answers ------------------------------------------------------ */

static void a_body_over_the_cap_gets_a_readable_413(void **state)
{
    const size_t n = 1024 * 1024 + 1;
    const int small = 16 * 1024;
    char head[2048];
    char *body = malloc(n);
    rvt_wire w;
    int wrote;
    rvt_answer a;

    (void)state;
    assert_non_null(body);
    dial(&w, "127.0.0.1");
    memset(body, 'x', n);
    /* A small send buffer, as over a real network: the body is still
     * being written when the server answers, not all in the kernel. */
    (void)setsockopt(w.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    snprintf(head, sizeof(head),
             "POST /v1/documents HTTP/1.1\r\nHost: x\r\n"
             "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n",
             author, n);
    wrote = rvt_wire_send(&w, head, strlen(head)) == 0
            && rvt_wire_send(&w, body, n) == 0;
    rvt_wire_read(&w, 0, 5000, &a);
    rvt_wire_close(&w);
    free(body);
    TK_EXPECT(wrote, "the whole 1 MiB + 1 body is written (no reset)");
    TK_EXPECT(a.status == 413 && rvt_answer_is_json_error(&a, 0)
                  && strcmp(json_string_value(json_object_get(a.json, "code")),
                            "PAYLOAD_TOO_LARGE")
                         == 0,
              "and the 413 PAYLOAD_TOO_LARGE is read, got %d (%s)", a.status,
              a.why);
    rvt_answer_clear(&a);
}

/* ---- mutated requests --------------------------------------------------- */

#define MUTATED 2000
#define KEEPALIVE 8

static uint64_t rng_state;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static const char *pick(const char *const *v, size_t n)
{
    return v[rnd() % n];
}

#define PICK(v) pick(v, sizeof(v) / sizeof(v[0]))

/* Writes one random request into out; returns its length.  *head is set
 * for HEAD (its answer has no body). */
static size_t mutate(char *out, size_t cap, char *body_buf, int *head)
{
    static const char *const methods[] = {"GET",     "GET",  "POST",   "POST",
                                          "PUT",     "HEAD", "DELETE", "PATCH",
                                          "OPTIONS", "BREW", "get"};
    static const char *const paths[] = {
        "/v1/documents",
        "/v1/documents/1",
        "/v1/documents/1/submit",
        "/v1/documents/9223372036854775807/99999999999999999999",
        "/v1/documents/-5",
        "/v1/documents/abc",
        "/v1/documents/00000001",
        "/v1/reviews",
        "/v1/reviews/1",
        "/v1/reviews/1/approve",
        "/v1/reviews/2/reject",
        "/v1/search",
        "/healthz",
        "/readyz",
        "/metrics",
        "/",
        "/v1/documents/",
        "/v1//documents",
        "/%FF%FE",
        "/v1/%64ocuments",
        "/v1/documents/1/submit/x"};
    static const char *const queries[] = {"",
                                          "",
                                          "",
                                          "?limit=abc&after=-5",
                                          "?include=content",
                                          "?include=content&include=content",
                                          "?q=%FF",
                                          "?x=1",
                                          "?q=hello&limit=5",
                                          "?status=pending",
                                          "?limit=1&limit=2",
                                          "?"};
    static const char *const types[] = {"application/json",
                                        "application/json; charset=utf-8",
                                        "text/plain",
                                        "application/json; charset=latin1",
                                        "multipart/form-data",
                                        NULL};
    static const char *const bodies[] = {"{\"title\":\"t\",\"content\":\"c\"}",
                                         "{\"decision\":",
                                         "[]",
                                         "{}",
                                         "{\"comment\":\"ok\"}",
                                         "null",
                                         "{\"title\":1}"};
    const int kind = (int)(rnd() % 10);
    const char *method = PICK(methods), *type = PICK(types);
    size_t n, blen = 0;
    int with_body = rnd() % 2;

    *head = strcmp(method, "HEAD") == 0;
    n = (size_t)snprintf(out, cap, "%s %s%s HTTP/1.1\r\nHost: x\r\n", method,
                         PICK(paths), PICK(queries));
    switch (rnd() % 5) {
    case 0:
        n += (size_t)snprintf(out + n, cap - n, "Authorization: Bearer %s\r\n",
                              author);
        break;
    case 1:
        n += (size_t)snprintf(out + n, cap - n, "Authorization: Bearer %s\r\n",
                              reviewer);
        break;
    case 2:
        n += (size_t)snprintf(out + n, cap - n,
                              "Authorization: Bearer x.y.z\r\n");
        break;
    case 3:
        n += (size_t)snprintf(out + n, cap - n, "Authorization: Basic a\r\n");
        break;
    default: break;
    }
    if (type != NULL)
        n += (size_t)snprintf(out + n, cap - n, "Content-Type: %s\r\n", type);
    if (rnd() % 3 == 0) {
        n += (size_t)snprintf(out + n, cap - n, "Idempotency-Key: k%llu%s\r\n",
                              (unsigned long long)(rnd() % 1000),
                              rnd() % 4 == 0 ? " spaced" : "");
    }
    if (rnd() % 3 == 0) {
        n += (size_t)snprintf(out + n, cap - n, "X-Request-Id: %s\r\n",
                              rnd() % 2 ? "trace-1" : "");
    }
    if (rnd() % 4 == 0) {
        n += (size_t)snprintf(out + n, cap - n, "X-%llu: %llu\r\n",
                              (unsigned long long)rnd(),
                              (unsigned long long)rnd());
    }
    if (with_body) {
        if (kind == 0) {
            /* Random bytes, NULs included, up to 32 KiB. */
            blen = (size_t)(rnd() % (32 * 1024));
            for (size_t i = 0; i < blen; i++)
                body_buf[i] = (char)rnd();
        } else if (kind == 1 && rnd() % 8 == 0) {
            blen = 1024 * 1024 + 1 + (size_t)(rnd() % 1000); /* over */
            memset(body_buf, 'z', blen);
        } else {
            const char *b = PICK(bodies);

            blen = strlen(b);
            memcpy(body_buf, b, blen);
        }
        n += (size_t)snprintf(out + n, cap - n, "Content-Length: %zu\r\n",
                              blen);
    }
    n += (size_t)snprintf(out + n, cap - n, "\r\n");
    return n + blen;
}

static void mutated_requests_each_get_an_answer(void **state)
{
    const size_t cap = 2 * 1024 * 1024;
    char *req = malloc(cap), *body = malloc(cap);
    static rvt_wire fd[KEEPALIVE];
    int failures = 0, i, head;
    int count[6] = {0};
    static char last[KEEPALIVE][160];

    (void)state;
    assert_non_null(req);
    assert_non_null(body);
    rng_state = (uint64_t)testkit_now_us() | 1;
    fprintf(stderr, "mutation seed %llu\n", (unsigned long long)rng_state);
    for (i = 0; i < KEEPALIVE; i++)
        dial(&fd[i], "127.0.0.3");
    for (i = 0; i < MUTATED && failures < 5; i++) {
        const int c = i % KEEPALIVE;
        size_t hn, n = mutate(req, 64 * 1024, body, &head);
        int wrote;
        rvt_answer a;

        /* mutate wrote the head into req and the body into body. */
        hn = (size_t)(strstr(req, "\r\n\r\n") - req) + 4;
        wrote = rvt_wire_send(&fd[c], req, hn) == 0
                && rvt_wire_send(&fd[c], body, n - hn) == 0;
        rvt_wire_read(&fd[c], head, 10000, &a);
        if (!wrote || a.status == 0 || a.status >= 500
            || (a.status >= 400 && !rvt_answer_is_json_error(&a, head))) {
            failures++;
            req[strcspn(req, "\r")] = '\0';
            fprintf(stderr,
                    "request %d (%s, body %zu; after %s): %s, "
                    "status %d (%s) ct=%s id=%s body=%.200s\n",
                    i, req, n - hn, last[c],
                    wrote ? "written" : "WRITE FAILED", a.status, a.why,
                    a.content_type, a.request_id, a.body);
        }
        count[a.status / 100 < 6 ? a.status / 100 : 0]++;
        snprintf(last[c], sizeof(last[c]), "%.*s (body %zu) -> %d",
                 (int)strcspn(req, "\r"), req, n - hn, a.status);
        if (a.status == 0 || a.closes) {
            rvt_wire_close(&fd[c]);
            dial(&fd[c], "127.0.0.3");
        }
        rvt_answer_clear(&a);
    }
    for (i = 0; i < KEEPALIVE; i++)
        rvt_wire_close(&fd[i]);
    free(req);
    free(body);
    fprintf(stderr, "%d requests: %d 2xx, %d 4xx, %d 5xx, %d unanswered\n", i,
            count[2], count[4], count[5], count[0]);
    TK_EXPECT(failures == 0,
              "every mutated request is answered, no 5xx, "
              "every error JSON with X-Request-Id (%d failures)",
              failures);
}

/* ---- the body budget ---------------------------------------------------- */

static void bodies_over_the_budget_are_503_and_the_rest_served(void **state)
{
    const size_t text = 600 * 1024;
    char *json = malloc(text + 64), head[2048];
    size_t n;
    rvt_wire first, second;
    rvt_answer a;

    (void)state;
    assert_non_null(json);
    dial(&first, "127.0.0.4");
    n = (size_t)snprintf(json, text + 64, "{\"title\":\"big\",\"content\":\"");
    memset(json + n, 'b', text);
    n += text;
    n += (size_t)snprintf(json + n, 64, "\"}");
    snprintf(head, sizeof(head),
             "POST /v1/documents HTTP/1.1\r\nHost: x\r\n"
             "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n",
             author, n);
    /* The first body is buffered (1 MiB of the 1 MiB budget reserved)
     * and left unfinished... */
    assert_int_equal(rvt_wire_send(&first, head, strlen(head)), 0);
    assert_int_equal(rvt_wire_send(&first, json, n - 1), 0);
    usleep(200 * 1000);
    /* ...so a second one finds the budget spent: 503, read whole. */
    dial(&second, "127.0.0.4");
    assert_int_equal(rvt_wire_send(&second, head, strlen(head)), 0);
    assert_int_equal(rvt_wire_send(&second, json, n), 0);
    rvt_wire_read(&second, 0, 5000, &a);
    TK_EXPECT(a.status == 503 && rvt_answer_is_json_error(&a, 0),
              "a body over the budget is 503, got %d (%s)", a.status, a.why);
    rvt_answer_clear(&a);
    /* The first ends and is created; the budget is back for the next. */
    assert_int_equal(rvt_wire_send(&first, json + n - 1, 1), 0);
    rvt_wire_read(&first, 0, 5000, &a);
    TK_EXPECT(a.status == 201, "the buffered body is served, got %d (%s)",
              a.status, a.why);
    rvt_answer_clear(&a);
    assert_int_equal(rvt_wire_send(&second, head, strlen(head)), 0);
    assert_int_equal(rvt_wire_send(&second, json, n), 0);
    rvt_wire_read(&second, 0, 5000, &a);
    TK_EXPECT(a.status == 201, "and the budget is free again, got %d (%s)",
              a.status, a.why);
    rvt_answer_clear(&a);
    rvt_wire_close(&first);
    rvt_wire_close(&second);
    free(json);
}

/* ---- contract ----------------------------------------------------------- */

static void a_replayed_201_has_its_location(void **state)
{
    const char *body = "{\"title\":\"replay\",\"content\":\"c\"}";
    char loc1[128], loc2[128];
    rvt_resp r1, r2;

    (void)state;
    assert_int_equal(rvt_call(srv.port, "POST", "/v1/documents", author, body,
                              "edges-replay-1", &r1),
                     0);
    assert_int_equal(rvt_call(srv.port, "POST", "/v1/documents", author, body,
                              "edges-replay-1", &r2),
                     0);
    TK_EXPECT(r1.status == 201 && r2.status == 201,
              "created, then "
              "replayed: %d, %d",
              r1.status, r2.status);
    TK_EXPECT(rvt_header(&r1, "Location", loc1, sizeof(loc1)) != NULL
                  && rvt_header(&r2, "Location", loc2, sizeof(loc2)) != NULL
                  && strcmp(loc1, loc2) == 0,
              "the replay names the same document in Location");
    rvt_resp_free(&r1);
    rvt_resp_free(&r2);
}

/* Every method label of /metrics' request families is one of the
 * router's five (rv_router.h); NULL when all are, else the first other. */
static const char *odd_method_label(const char *page, char *buf, size_t len)
{
    static const char *const known[] = {"GET", "HEAD", "POST", "PUT", "OTHER"};
    const char *p = page;

    while ((p = strstr(p, "method=\"")) != NULL) {
        const char *end = strchr(p + 8, '"');
        size_t i, n;

        if (end == NULL)
            break;
        n = (size_t)(end - (p + 8));
        for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
            if (strlen(known[i]) == n && strncmp(p + 8, known[i], n) == 0)
                break;
        if (i == sizeof(known) / sizeof(known[0])) {
            snprintf(buf, len, "%.*s", (int)n, p + 8);
            return buf;
        }
        p = end;
    }
    return NULL;
}

/* 100 requests with 100 made-up methods over five routes: /metrics
 * labels them all "OTHER", so its page does not grow with what clients
 * invent (one series per method name was 76 KB after a few hundred). */
static void made_up_methods_share_one_metrics_label(void **state)
{
    static const char *const paths[] = {"/healthz", "/v1/documents",
                                        "/v1/documents/1", "/nowhere",
                                        "/v1/search"};
    char method[16], odd[64];
    rvt_resp r;
    int i;

    (void)state;
    for (i = 0; i < 100; i++) {
        snprintf(method, sizeof(method), "BREW%d", i);
        assert_int_equal(rvt_call(srv.port, method, paths[i % 5], NULL, NULL,
                                  NULL, &r),
                         0);
        rvt_resp_free(&r);
    }
    assert_int_equal(rvt_call(srv.port, "GET", "/metrics", NULL, NULL, NULL,
                              &r),
                     0);
    TK_EXPECT(r.status == 200 && r.body != NULL, "/metrics answers, got %d",
              r.status);
    TK_EXPECT(odd_method_label(r.body, odd, sizeof(odd)) == NULL,
              "every method label is GET, HEAD, POST, PUT or OTHER, got %s",
              odd);
    TK_EXPECT(strstr(r.body, "method=\"OTHER\"") != NULL,
              "the made-up methods are counted as OTHER");
    rvt_resp_free(&r);
}

static void unknown_query_parameters_are_refused_everywhere(void **state)
{
    static const char *const paths[] = {"/v1/documents?x=1", "/healthz?x=1",
                                        "/readyz?limit=abc", "/metrics?x",
                                        "/v1/documents/1?include=content&y=2"};
    static const char *const methods[] = {"POST", "GET", "GET", "GET", "GET"};
    rvt_resp r;

    (void)state;
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        assert_int_equal(rvt_call(srv.port, methods[i], paths[i], author,
                                  i == 0 ? "{\"title\":\"q\",\"content\":"
                                           "\"c\"}"
                                         : NULL,
                                  NULL, &r),
                         0);
        TK_EXPECT(r.status == 400 && rvt_field(&r, "code") != NULL
                      && strcmp(rvt_field(&r, "code"), "INVALID_ARGUMENT")
                             == 0,
                  "%s %s is 400 INVALID_ARGUMENT, got %d", methods[i],
                  paths[i], r.status);
        rvt_resp_free(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(slowloris_is_cut_off_and_others_are_served),
        cmocka_unit_test(a_trickled_body_is_cut_at_its_deadline),
        cmocka_unit_test(a_body_over_the_cap_gets_a_readable_413),
        cmocka_unit_test(mutated_requests_each_get_an_answer),
        cmocka_unit_test(bodies_over_the_budget_are_503_and_the_rest_served),
        cmocka_unit_test(a_replayed_201_has_its_location),
        cmocka_unit_test(unknown_query_parameters_are_refused_everywhere),
        cmocka_unit_test(made_up_methods_share_one_metrics_label),
    };

    if (getenv("RVT_EDGES_FILTER") != NULL)
        cmocka_set_test_filter(getenv("RVT_EDGES_FILTER"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
