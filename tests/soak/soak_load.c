/*
 * soak_load.c: the mixed, steady load of the soak (scripts/soak), and the
 * resource samples of the processes under it.
 *
 *   soak_load --port P --secret S --pid PID --out DIR [--seconds N]
 *             [--warmup N] [--rate R] [--workers W] [--seed S]
 *             [--indexer-pid PID] [--sample-ms MS] [--idle N]
 *             [--idle-timeout S]
 *
 * W workers (default 8) share a target rate of R requests/s (default 300,
 * well below what reviewd serves on 2 cores, so the soak measures time,
 * not saturation).  Each worker draws its next action from a fixed mix:
 * document GETs (keep-alive, and on a fresh Connection: close socket),
 * creates, edits and submits of its own drafts, approve/reject races (the
 * same review decided from two connections at once), review listings,
 * searches, /metrics, and bad requests that must get exactly their 4xx
 * (malformed JSON, a bad id, a forged and an expired token, a wrong role,
 * an unknown id, DELETE, a 2 MB body, text/plain).  One more thread sends
 * requests slowly, a few bytes at a time, and another holds idle
 * connections (some fresh, some after one request) until the server's
 * connection timeout cuts them, which must happen.
 *
 * Every answer is classified by what was asked: ok (the expected 2xx),
 * bad_expected (a bad request got its 4xx), contention (a 409 where
 * concurrent requests may lose), unavailable (503), server_error (other
 * 5xx), conn_error (no answer: reset, closed or a 30 s timeout) and
 * unexpected (any other status).  The last four are also written one per
 * line, with the wall-clock time, so soak_report can tell those inside a
 * fault window from those outside.
 *
 * Quiet points: after --warmup seconds and again after the load, every
 * thread closes its connections and waits; once reviewd's descriptor count
 * has settled, that reading is the "start" (or "end") sample of each
 * process, the only two readings that are compared.  Before the end
 * reading, /readyz must answer "ok" (bounded wait), so a dependency that
 * is still reconnecting after the last fault does not make the counts
 * differ.  Between them, every --sample-ms, a "run" sample is written.
 * The load runs --seconds in all, not counting the time the start quiet
 * point took (seconds on a loaded machine): --seconds minus --warmup of
 * load always follow the start reading.
 *
 * The file DIR/started appears once the start reading is taken (the
 * script's nemesis waits for it).  Other files written into DIR:
 * samples.tsv ("t_ms phase proc rss_kb fds"),
 * events.tsv ("t_ms route status kind") and counts.tsv (lines "route NAME
 * CLASS N", "kind NAME N" and "stat NAME N").  The exit status is 0 when
 * the load ran (whatever its answers were: judging is soak_report's job)
 * and 1 when it could not start or a quiet point could not be reached.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_clock.h"
#include "bench_http.h"
#include "bench_run.h"
#include "api/rv_auth.h"
#include "soak_proc.h"

#define REQUEST_TIMEOUT_MS 30000
#define MAX_WORKERS 64
#define RING 1024
#define DRAFTS 32

/* ---- what is counted ----------------------------------------------------- */

typedef enum route {
    R_GET_DOC,
    R_GET_DOC_CLOSE,
    R_GET_DOC_SLOW,
    R_CREATE,
    R_EDIT,
    R_SUBMIT,
    R_APPROVE,
    R_REJECT,
    R_LIST,
    R_SEARCH,
    R_METRICS,
    R_BAD_JSON,
    R_BAD_ID,
    R_BAD_TOKEN,
    R_EXPIRED,
    R_FORBIDDEN,
    R_NOT_FOUND,
    R_METHOD,
    R_TOO_LARGE,
    R_MEDIA,
    R_COUNT
} route;

static const char *const route_names[R_COUNT] = {
    "GET /v1/documents/{id}",
    "GET /v1/documents/{id} (close)",
    "GET /v1/documents/{id} (slow)",
    "POST /v1/documents",
    "PUT /v1/documents/{id}",
    "POST /v1/documents/{id}/submit",
    "POST /v1/reviews/{id}/approve",
    "POST /v1/reviews/{id}/reject",
    "GET /v1/reviews?status=pending",
    "GET /v1/search",
    "GET /metrics",
    "bad: malformed JSON",
    "bad: id abc",
    "bad: forged token",
    "bad: expired token",
    "bad: reviewer creates",
    "bad: unknown id",
    "bad: DELETE",
    "bad: 2 MB body",
    "bad: text/plain"};

enum { C_2XX, C_3XX, C_4XX, C_5XX, C_CONN, C_COUNT };
static const char *const class_names[C_COUNT] = {"2xx", "3xx", "4xx", "5xx",
                                                 "conn"};

typedef enum kind {
    K_OK,
    K_BAD_EXPECTED,
    K_CONTENTION,
    K_UNAVAILABLE,
    K_SERVER_ERROR,
    K_CONN_ERROR,
    K_UNEXPECTED,
    K_COUNT
} kind;
static const char *const kind_names[K_COUNT] = {"ok",           "bad_expected",
                                                "contention",   "unavailable",
                                                "server_error", "conn_error",
                                                "unexpected"};

typedef enum stat_id {
    S_RACES,
    S_RACE_ONE_WINNER,
    S_RACE_TWO_WINNERS,
    S_RACE_NO_WINNER,
    S_IDLE_OPENED,
    S_IDLE_CLOSED_BY_SERVER,
    S_IDLE_NOT_CLOSED,
    S_READYZ_OK,
    S_QUIET_START,
    S_QUIET_END,
    S_COUNT
} stat_id;
static const char *const stat_names[S_COUNT] = {"races",
                                                "race_one_winner",
                                                "race_two_winners",
                                                "race_no_winner",
                                                "idle_opened",
                                                "idle_closed_by_server",
                                                "idle_not_closed",
                                                "readyz_ok",
                                                "quiet_start_settled",
                                                "quiet_end_settled"};

static atomic_llong by_route[R_COUNT][C_COUNT];
static atomic_llong by_kind[K_COUNT];
static atomic_llong stats[S_COUNT];

/* ---- options and shared state -------------------------------------------- */

static struct {
    int port, seconds, warmup, rate, workers, sample_ms, idle;
    int idle_timeout_s;
    long seed;
    pid_t pid, indexer_pid;
    const char *secret, *out;
} opt = {0, 600, 60, 300, 8, 5000, 4, 30, 1, 0, 0, NULL, NULL};

static char *author_token, *reviewer_token, *reviewer2_token;
static char *forged_token, *expired_token;
static FILE *events_file, *samples_file;
static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;

static atomic_int stop_flag, pause_flag, paused;

/* Recently created documents (any worker's), for GETs. */
static struct {
    pthread_mutex_t lock;
    long long ids[RING];
    long n;
} docs = {PTHREAD_MUTEX_INITIALIZER, {0}, 0};

/* Pending reviews waiting for a race: a FIFO ring. */
static struct {
    pthread_mutex_t lock;
    long long ids[RING];
    long head, tail;
} pending = {PTHREAD_MUTEX_INITIALIZER, {0}, 0, 0};

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void docs_add(long long id)
{
    pthread_mutex_lock(&docs.lock);
    docs.ids[docs.n % RING] = id;
    docs.n++;
    pthread_mutex_unlock(&docs.lock);
}

static long long docs_pick(unsigned *seed)
{
    long long id = 0;

    pthread_mutex_lock(&docs.lock);
    if (docs.n > 0) {
        const long have = docs.n < RING ? docs.n : RING;
        id = docs.ids[rand_r(seed) % have];
    }
    pthread_mutex_unlock(&docs.lock);
    return id;
}

static void pending_push(long long id)
{
    pthread_mutex_lock(&pending.lock);
    if (pending.tail - pending.head < RING) {
        pending.ids[pending.tail % RING] = id;
        pending.tail++;
    }
    pthread_mutex_unlock(&pending.lock);
}

static long long pending_pop(void)
{
    long long id = 0;

    pthread_mutex_lock(&pending.lock);
    if (pending.head < pending.tail) {
        id = pending.ids[pending.head % RING];
        pending.head++;
    }
    pthread_mutex_unlock(&pending.lock);
    return id;
}

/* ---- classifying answers ------------------------------------------------- */

static int class_of(int status)
{
    if (status < 0)
        return C_CONN;
    if (status >= 500)
        return C_5XX;
    if (status >= 400)
        return C_4XX;
    return status >= 300 ? C_3XX : C_2XX;
}

/* What an answer means, given the status that was asked for (want) and
 * whether a 409 is a fair loss of a race (contention_ok). */
static kind kind_of(int status, int want, int contention_ok)
{
    if (status < 0)
        return K_CONN_ERROR;
    if (status == want)
        return want >= 400 ? K_BAD_EXPECTED : K_OK;
    if (status == 409 && contention_ok)
        return K_CONTENTION;
    if (status == 503)
        return K_UNAVAILABLE;
    return status >= 500 ? K_SERVER_ERROR : K_UNEXPECTED;
}

/* Counts one answer; returns 1 when it was the one asked for. */
static int record(route r, int status, int want, int contention_ok)
{
    const kind k = kind_of(status, want, contention_ok);

    atomic_fetch_add(&by_route[r][class_of(status)], 1);
    atomic_fetch_add(&by_kind[k], 1);
    if (k >= K_UNAVAILABLE) {
        pthread_mutex_lock(&file_lock);
        fprintf(events_file, "%lld\t%s\t%d\t%s\n", (long long)wall_ms(),
                route_names[r], status, kind_names[k]);
        pthread_mutex_unlock(&file_lock);
    }
    return k == K_OK || k == K_BAD_EXPECTED;
}

/* ---- a worker ------------------------------------------------------------ */

typedef struct worker {
    int index;
    unsigned seed;
    int issued;               /* requests of the current action */
    int64_t b_used_ns;        /* when conn b last answered */
    long long drafts[DRAFTS]; /* own documents in draft */
    int ndrafts;
    bench_http a, b, tmp; /* keep-alive, race partner, one-shot */
} worker;

/* The id field at path ("id" or "review.id") of a JSON body, or 0. */
static long long body_id(const char *body, const char *path)
{
    json_error_t err;
    json_t *root = json_loads(body, 0, &err);
    json_t *v = root;
    long long id = 0;

    if (strcmp(path, "review.id") == 0)
        v = json_object_get(root, "review");
    v = json_object_get(v, "id");
    if (json_is_string(v))
        id = atoll(json_string_value(v));
    json_decref(root);
    return id;
}

static int keepalive(worker *w, route r, const char *method, const char *path,
                     const char *token, const char *body, int want,
                     const char **resp)
{
    const int status = bench_http_request(&w->a, method, path, token, body,
                                          resp);

    w->issued++;
    return record(r, status, want, r == R_EDIT || r == R_SUBMIT);
}

/* Sends raw bytes on a fresh connection that is closed afterwards. */
static int one_shot(worker *w, route r, const char *raw, int want)
{
    const char *body;
    int status = -1;

    w->issued++;
    bench_http_init(&w->tmp, opt.port, REQUEST_TIMEOUT_MS);
    if (bench_http_connect(&w->tmp) == 0
        && bench_http_send(&w->tmp, raw, strlen(raw)) == 0)
        status = bench_http_read(&w->tmp, &body);
    bench_http_close(&w->tmp);
    return record(r, status, want, 0);
}

static void act_get(worker *w)
{
    char path[96];
    const char *resp;
    const long long id = docs_pick(&w->seed);

    snprintf(path, sizeof(path), "/v1/documents/%lld%s", id,
             rand_r(&w->seed) % 2 ? "?include=content" : "");
    keepalive(w, R_GET_DOC, "GET", path, author_token, NULL, 200, &resp);
}

static void act_get_close(worker *w)
{
    char raw[1024];

    snprintf(raw, sizeof(raw),
             "GET /v1/documents/%lld HTTP/1.1\r\n"
             "Host: soak\r\nAuthorization: Bearer %s\r\n"
             "Connection: close\r\n\r\n",
             docs_pick(&w->seed), reviewer_token);
    one_shot(w, R_GET_DOC_CLOSE, raw, 200);
}

static void act_create(worker *w)
{
    char body[256];
    const char *resp;
    long long id;

    snprintf(body, sizeof(body),
             "{\"title\":\"soak %d\",\"content\":"
             "\"Soak document: review notes on the release plan and the "
             "\xe6\x95\xb0\xe6\x8d\xae\xe5\xba\x93 handbook, %u.\"}",
             w->index, rand_r(&w->seed));
    if (!keepalive(w, R_CREATE, "POST", "/v1/documents", author_token, body,
                   201, &resp))
        return;
    id = body_id(resp, "id");
    if (id > 0) {
        docs_add(id);
        if (w->ndrafts == DRAFTS) {
            memmove(w->drafts, w->drafts + 1,
                    (DRAFTS - 1) * sizeof(w->drafts[0]));
            w->ndrafts--;
        }
        w->drafts[w->ndrafts++] = id;
    }
}

static void act_edit(worker *w)
{
    char path[64], body[160];
    const char *resp;

    if (w->ndrafts == 0) {
        act_create(w);
        return;
    }
    snprintf(path, sizeof(path), "/v1/documents/%lld",
             w->drafts[rand_r(&w->seed) % w->ndrafts]);
    snprintf(body, sizeof(body),
             "{\"content\":\"Edited for review, "
             "release plan revision %u.\"}",
             rand_r(&w->seed));
    keepalive(w, R_EDIT, "PUT", path, author_token, body, 200, &resp);
}

static void act_submit(worker *w)
{
    char path[80];
    const char *resp;
    long long doc, review;

    if (w->ndrafts == 0) {
        act_create(w);
        return;
    }
    doc = w->drafts[--w->ndrafts];
    snprintf(path, sizeof(path), "/v1/documents/%lld/submit", doc);
    if (keepalive(w, R_SUBMIT, "POST", path, author_token, NULL, 201, &resp)) {
        review = body_id(resp, "review.id");
        if (review > 0)
            pending_push(review);
    }
}

/* Sends req on h, reconnecting first when it is closed or was idle long
 * enough that the server may be closing it. */
static int race_send(bench_http *h, const char *req, int fresh)
{
    if (h->fd < 0 || fresh) {
        if (bench_http_connect(h) != 0)
            return -1;
    }
    return bench_http_send(h, req, strlen(req));
}

static void format_decision(char *buf, size_t len, long long review,
                            int approve, const char *token)
{
    const char *body = approve ? "{\"comment\":\"looks right\"}"
                               : "{\"comment\":\"needs another pass\"}";

    snprintf(buf, len,
             "POST /v1/reviews/%lld/%s HTTP/1.1\r\nHost: soak\r\n"
             "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n%s",
             review, approve ? "approve" : "reject", token, strlen(body),
             body);
}

/* The same review decided from two connections at once: approve on one,
 * approve or reject on the other.  Exactly one may win. */
static void act_race(worker *w)
{
    char ra[1024], rb[1024];
    const char *body;
    const long long review = pending_pop();
    const int b_approves = rand_r(&w->seed) % 2;
    const int fresh_b = bench_clock_ns() - w->b_used_ns > 3000000000LL;
    int sa = -1, sb = -1, wins;

    if (review == 0) {
        act_get(w);
        return;
    }
    format_decision(ra, sizeof(ra), review, 1, reviewer_token);
    format_decision(rb, sizeof(rb), review, b_approves, reviewer2_token);
    const int sent_a = race_send(&w->a, ra, 0);
    const int sent_b = race_send(&w->b, rb, fresh_b);
    sa = sent_a == 0 ? bench_http_read(&w->a, &body) : -1;
    sb = sent_b == 0 ? bench_http_read(&w->b, &body) : -1;
    w->b_used_ns = bench_clock_ns();
    if (sa < 0)
        bench_http_close(&w->a);
    if (sb < 0)
        bench_http_close(&w->b);
    w->issued += 2;
    record(R_APPROVE, sa, 200, 1);
    record(b_approves ? R_APPROVE : R_REJECT, sb, 200, 1);
    wins = (sa == 200) + (sb == 200);
    atomic_fetch_add(&stats[S_RACES], 1);
    atomic_fetch_add(&stats[wins == 1   ? S_RACE_ONE_WINNER
                            : wins == 2 ? S_RACE_TWO_WINNERS
                                        : S_RACE_NO_WINNER],
                     1);
}

static void act_list(worker *w)
{
    const char *resp;

    keepalive(w, R_LIST, "GET", "/v1/reviews?status=pending&limit=20",
              reviewer_token, NULL, 200, &resp);
}

static void act_search(worker *w)
{
    static const char *const q[] = {"release", "review+plan",
                                    "%E6%95%B0%E6%8D%AE", "handbook"};
    char path[96];
    const char *resp;

    snprintf(path, sizeof(path), "/v1/search?q=%s&limit=5",
             q[rand_r(&w->seed) % 4]);
    keepalive(w, R_SEARCH, "GET", path, author_token, NULL, 200, &resp);
}

static void act_metrics(worker *w)
{
    const char *resp;

    keepalive(w, R_METRICS, "GET", "/metrics", NULL, NULL, 200, &resp);
}

/* One bad request, answered with exactly its 4xx. */
static void act_bad(worker *w)
{
    char raw[1024];
    const char *resp;
    const long long id = docs_pick(&w->seed);

    switch (rand_r(&w->seed) % 9) {
    case 0:
        keepalive(w, R_BAD_JSON, "POST", "/v1/documents", author_token,
                  "{\"title\": \"soak\", \"content\": ", 400, &resp);
        break;
    case 1:
        keepalive(w, R_BAD_ID, "GET", "/v1/documents/abc", author_token, NULL,
                  400, &resp);
        break;
    case 2:
        snprintf(raw, sizeof(raw), "/v1/documents/%lld", id);
        keepalive(w, R_BAD_TOKEN, "GET", raw, forged_token, NULL, 401, &resp);
        break;
    case 3:
        snprintf(raw, sizeof(raw), "/v1/documents/%lld", id);
        keepalive(w, R_EXPIRED, "GET", raw, expired_token, NULL, 401, &resp);
        break;
    case 4:
        keepalive(w, R_FORBIDDEN, "POST", "/v1/documents", reviewer_token,
                  "{\"title\":\"no\",\"content\":\"reviewers do not write\"}",
                  403, &resp);
        break;
    case 5:
        keepalive(w, R_NOT_FOUND, "GET", "/v1/documents/9223372036854775000",
                  author_token, NULL, 404, &resp);
        break;
    case 6:
        snprintf(raw, sizeof(raw),
                 "DELETE /v1/documents/%lld HTTP/1.1\r\n"
                 "Host: soak\r\nAuthorization: Bearer %s\r\n"
                 "Connection: close\r\n\r\n",
                 id, author_token);
        one_shot(w, R_METHOD, raw, 405);
        break;
    case 7:
        /* Declared but not sent: with Expect: 100-continue the server
         * answers 413 at once (docs/api.md); a client that declares a
         * body without it must send it before it reads the answer. */
        snprintf(raw, sizeof(raw),
                 "POST /v1/documents HTTP/1.1\r\n"
                 "Host: soak\r\nAuthorization: Bearer %s\r\n"
                 "Content-Type: application/json\r\n"
                 "Content-Length: 2000000\r\nExpect: 100-continue\r\n"
                 "Connection: close\r\n\r\n",
                 author_token);
        one_shot(w, R_TOO_LARGE, raw, 413);
        break;
    default:
        snprintf(raw, sizeof(raw),
                 "POST /v1/documents HTTP/1.1\r\n"
                 "Host: soak\r\nAuthorization: Bearer %s\r\n"
                 "Content-Type: text/plain\r\nContent-Length: 5\r\n"
                 "Connection: close\r\n\r\nhello",
                 author_token);
        one_shot(w, R_MEDIA, raw, 415);
        break;
    }
}

/* The mix, in percent of actions. */
static const struct {
    void (*act)(worker *w);
    int weight;
} mix[] = {
    {act_get, 30},    {act_get_close, 5}, {act_create, 12}, {act_edit, 8},
    {act_submit, 10}, {act_race, 10},     {act_list, 5},    {act_search, 6},
    {act_metrics, 2}, {act_bad, 12},
};

static void act_one(worker *w)
{
    int r = rand_r(&w->seed) % 100;

    for (size_t i = 0; i < sizeof(mix) / sizeof(mix[0]); i++) {
        if (r < mix[i].weight) {
            mix[i].act(w);
            return;
        }
        r -= mix[i].weight;
    }
    act_get(w);
}

/* Holds the calling thread while a quiet point is being read; returns at
 * once when none is asked for. */
static void wait_while_paused(bench_http *const *conns, int n)
{
    if (!atomic_load(&pause_flag))
        return;
    for (int i = 0; i < n; i++)
        bench_http_close(conns[i]);
    atomic_fetch_add(&paused, 1);
    while (atomic_load(&pause_flag) && !atomic_load(&stop_flag))
        bench_sleep_ns(20000000);
    atomic_fetch_sub(&paused, 1);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    bench_http *const conns[] = {&w->a, &w->b};
    const int64_t interval = (int64_t)opt.workers * 1000000000LL / opt.rate;
    int64_t next = bench_clock_ns();

    bench_http_init(&w->a, opt.port, REQUEST_TIMEOUT_MS);
    bench_http_init(&w->b, opt.port, REQUEST_TIMEOUT_MS);
    while (!atomic_load(&stop_flag)) {
        wait_while_paused(conns, 2);
        w->issued = 0;
        act_one(w);
        const int64_t now = bench_clock_ns();
        next += w->issued * interval;
        /* After a stall (a fault, a pause) resume the rate, not a burst. */
        if (next < now - 1000000000LL)
            next = now;
        if (next > now)
            bench_sleep_ns(next - now);
    }
    bench_http_close(&w->a);
    bench_http_close(&w->b);
    return NULL;
}

/* ---- the slow client and the idle connections ---------------------------- */

/* A GET sent in four pieces 250 ms apart, every 3 s. */
static void *slow_main(void *arg)
{
    bench_http *h = arg;
    bench_http *const conns[] = {h};
    unsigned seed = (unsigned)opt.seed ^ 0x5a5au;
    char raw[1024];
    const char *body;

    while (!atomic_load(&stop_flag)) {
        int status = -1;
        size_t len, piece, off = 0;

        wait_while_paused(conns, 1);
        snprintf(raw, sizeof(raw),
                 "GET /v1/documents/%lld HTTP/1.1\r\n"
                 "Host: soak\r\nAuthorization: Bearer %s\r\n"
                 "Connection: close\r\n\r\n",
                 docs_pick(&seed), author_token);
        len = strlen(raw);
        piece = len / 4 + 1;
        bench_http_init(h, opt.port, REQUEST_TIMEOUT_MS);
        int failed = bench_http_connect(h);
        while (failed == 0 && off < len) {
            const size_t n = len - off < piece ? len - off : piece;

            failed = bench_http_send(h, raw + off, n);
            off += n;
            bench_sleep_ns(off < len ? 250000000LL : 0);
        }
        if (failed == 0)
            status = bench_http_read(h, &body);
        bench_http_close(h);
        record(R_GET_DOC_SLOW, status, 200, 0);
        bench_sleep_ns(3000000000LL);
    }
    return NULL;
}

/* Waits until the server has closed fd (1), or deadline passed or a quiet
 * point or the end was asked for (0). */
static int closed_by_server(int fd, int64_t deadline_ns)
{
    char byte;

    while (bench_clock_ns() < deadline_ns && !atomic_load(&stop_flag)
           && !atomic_load(&pause_flag)) {
        struct pollfd p = {fd, POLLIN, 0};

        if (poll(&p, 1, 200) > 0) {
            const ssize_t got = recv(fd, &byte, 1, MSG_DONTWAIT);

            if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
                return 1;
        }
    }
    return 0;
}

/* Opens opt.idle connections (every other one after a GET /healthz) and
 * checks that the server cuts each at its connection timeout; again and
 * again. */
static void *idle_main(void *arg)
{
    bench_http *h = arg;
    bench_http *conns[MAX_WORKERS];
    const char *body;

    for (int i = 0; i < opt.idle; i++) {
        conns[i] = &h[i];
        bench_http_init(&h[i], opt.port, REQUEST_TIMEOUT_MS);
    }
    while (!atomic_load(&stop_flag)) {
        wait_while_paused(conns, opt.idle);
        const int64_t deadline = bench_clock_ns()
                                 + (int64_t)(opt.idle_timeout_s + 20)
                                       * 1000000000LL;
        for (int i = 0; i < opt.idle && !atomic_load(&pause_flag); i++) {
            const int fresh = i % 2 == 0;

            if (bench_http_connect(&h[i]) != 0
                || (!fresh
                    && bench_http_request(&h[i], "GET", "/healthz", NULL, NULL,
                                          &body)
                           != 200)) {
                bench_http_close(&h[i]);
                continue;
            }
            atomic_fetch_add(&stats[S_IDLE_OPENED], 1);
        }
        for (int i = 0; i < opt.idle; i++) {
            if (h[i].fd < 0)
                continue;
            if (closed_by_server(h[i].fd, deadline))
                atomic_fetch_add(&stats[S_IDLE_CLOSED_BY_SERVER], 1);
            else if (!atomic_load(&stop_flag) && !atomic_load(&pause_flag))
                atomic_fetch_add(&stats[S_IDLE_NOT_CLOSED], 1);
            bench_http_close(&h[i]);
        }
    }
    return NULL;
}

/* ---- samples and quiet points -------------------------------------------- */

static void write_sample(const char *phase, const char *proc,
                         const soak_proc_sample *s)
{
    pthread_mutex_lock(&file_lock);
    fprintf(samples_file, "%lld\t%s\t%s\t%ld\t%d\n", (long long)wall_ms(),
            phase, proc, s->rss_kb, s->fds);
    fflush(samples_file);
    pthread_mutex_unlock(&file_lock);
}

static void sample_all(const char *phase)
{
    soak_proc_sample s;

    soak_proc_read(opt.pid, &s);
    write_sample(phase, "reviewd", &s);
    if (opt.indexer_pid > 0) {
        soak_proc_read(opt.indexer_pid, &s);
        write_sample(phase, "kh-indexer", &s);
    }
}

static FILE *open_out(const char *name)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", opt.out, name);
    f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "soak_load: cannot write %s: %s\n", path,
                strerror(errno));
    }
    return f;
}

/* Writes the descriptors of pid at a quiet point to fds-PHASE-PROC.txt,
 * for telling what a count that changed has gained or lost. */
static void list_fds(const char *phase, const char *proc, pid_t pid)
{
    char name[96];
    FILE *f;

    snprintf(name, sizeof(name), "fds-%s-%s.txt", phase, proc);
    f = open_out(name);
    if (f != NULL) {
        soak_proc_list_fds(pid, f);
        fclose(f);
    }
}

/* Every load thread has closed its connections and waits (threads: how
 * many there are), then the descriptor counts settle and are read.
 * Returns 0, or -1 when the threads or the counts did not get there. */
static int quiet_point(const char *phase, int threads, stat_id settled)
{
    soak_proc_sample s;
    const int64_t deadline = bench_clock_ns() + 90000000000LL;
    int rc;

    while (atomic_load(&paused) < threads && bench_clock_ns() < deadline)
        bench_sleep_ns(20000000);
    if (atomic_load(&paused) < threads) {
        fprintf(stderr,
                "soak_load: only %d of %d threads stopped for the "
                "%s reading\n",
                atomic_load(&paused), threads, phase);
        return -1;
    }
    rc = soak_proc_settle(opt.pid, 1500, 20000, &s);
    write_sample(phase, "reviewd", &s);
    if (opt.indexer_pid > 0) {
        soak_proc_sample t;
        const int rc2 = soak_proc_settle(opt.indexer_pid, 1500, 20000, &t);

        write_sample(phase, "kh-indexer", &t);
        rc = rc != 0 ? rc : rc2;
    }
    list_fds(phase, "reviewd", opt.pid);
    if (opt.indexer_pid > 0)
        list_fds(phase, "kh-indexer", opt.indexer_pid);
    atomic_store(&stats[settled], rc == 0);
    if (rc < 0) {
        fprintf(stderr, "soak_load: a process is gone at the %s reading\n",
                phase);
    }
    return rc < 0 ? -1 : 0;
}

/* Polls /readyz until it answers 200 with "status":"ok", up to 120 s. */
static int wait_ready(void)
{
    bench_http h;
    const char *body = "";
    const int64_t deadline = bench_clock_ns() + 120000000000LL;
    int ok = 0;

    bench_http_init(&h, opt.port, 10000);
    while (!ok && bench_clock_ns() < deadline) {
        ok = bench_http_request(&h, "GET", "/readyz", NULL, NULL, &body) == 200
             && strstr(body, "\"status\":\"ok\"") != NULL;
        if (!ok)
            bench_sleep_ns(500000000LL);
    }
    fprintf(stderr, "soak_load: /readyz at the end: %s\n",
            h.fd >= 0 ? body : "(no answer)");
    bench_http_close(&h);
    return ok;
}

/* ---- set-up and the run -------------------------------------------------- */

static int make_tokens(void)
{
    const unsigned char *s = (const unsigned char *)opt.secret;
    const size_t n = strlen(opt.secret);
    const int64_t now = (int64_t)time(NULL);
    const long ttl = opt.seconds + 3600L;
    static const char other[] = "not-the-secret-0123456789abcdefghij";

    author_token = rv_auth_issue(s, n, "alice", "author", now, ttl);
    reviewer_token = rv_auth_issue(s, n, "bob", "reviewer", now, ttl);
    reviewer2_token = rv_auth_issue(s, n, "carol", "reviewer", now, ttl);
    forged_token = rv_auth_issue((const unsigned char *)other,
                                 sizeof(other) - 1, "alice", "author", now,
                                 ttl);
    expired_token = rv_auth_issue(s, n, "alice", "author", now, -60);
    return author_token && reviewer_token && reviewer2_token && forged_token
                   && expired_token
               ? 0
               : -1;
}

/* A first set of documents, so GETs have something to read at once. */
static int seed_documents(void)
{
    bench_http h;
    const char *body;
    int made = 0;

    bench_http_init(&h, opt.port, REQUEST_TIMEOUT_MS);
    for (int i = 0; i < 20; i++) {
        if (bench_http_request(&h, "POST", "/v1/documents", author_token,
                               "{\"title\":\"seed\",\"content\":\"Seeded "
                               "release plan.\"}",
                               &body)
            == 201) {
            const long long id = body_id(body, "id");

            if (id > 0) {
                docs_add(id);
                made++;
            }
        }
    }
    bench_http_close(&h);
    return made > 0 ? 0 : -1;
}

static int write_counts(void)
{
    FILE *f = open_out("counts.tsv");

    if (f == NULL)
        return -1;
    for (int r = 0; r < R_COUNT; r++) {
        for (int c = 0; c < C_COUNT; c++) {
            fprintf(f, "route\t%s\t%s\t%lld\n", route_names[r], class_names[c],
                    atomic_load(&by_route[r][c]));
        }
    }
    for (int k = 0; k < K_COUNT; k++) {
        fprintf(f, "kind\t%s\t%lld\n", kind_names[k],
                atomic_load(&by_kind[k]));
    }
    for (int s = 0; s < S_COUNT; s++)
        fprintf(f, "stat\t%s\t%lld\n", stat_names[s], atomic_load(&stats[s]));
    return fclose(f) == 0 ? 0 : -1;
}

static long long total_requests(void)
{
    long long n = 0;

    for (int k = 0; k < K_COUNT; k++)
        n += atomic_load(&by_kind[k]);
    return n;
}

/* Creates DIR/started once the start reading is taken: the nemesis waits
 * for it, so no fault can fall before or on that reading. */
static void mark_started(void)
{
    FILE *f = open_out("started");

    if (f != NULL)
        fclose(f);
}

/* Samples every opt.sample_ms until the end, with the start quiet point
 * after the warm-up and a progress line every minute. */
static int run_load(int threads)
{
    const int64_t t0 = bench_clock_ns();
    /* The start quiet point does not count against the run: on a loaded
     * machine it can take seconds, which would leave too little load
     * after it for an idle connection to reach the server's timeout. */
    int64_t end = t0 + (int64_t)opt.seconds * 1000000000LL;
    int64_t next_sample = t0, next_progress = t0 + 60000000000LL;
    int warm = opt.warmup == 0;

    if (warm) {
        sample_all("start");
        mark_started();
    }
    while (bench_clock_ns() < end) {
        const int64_t now = bench_clock_ns();

        if (!warm && now - t0 >= (int64_t)opt.warmup * 1000000000LL) {
            atomic_store(&pause_flag, 1);
            const int rc = quiet_point("start", threads, S_QUIET_START);
            atomic_store(&pause_flag, 0);
            end += bench_clock_ns() - now;
            if (rc != 0)
                return -1;
            mark_started();
            warm = 1;
        }
        if (now >= next_sample) {
            sample_all("run");
            next_sample += (int64_t)opt.sample_ms * 1000000;
        }
        if (now >= next_progress) {
            soak_proc_sample s;

            soak_proc_read(opt.pid, &s);
            bench_progress("soak_load",
                           "%3lld s: %lld requests, reviewd "
                           "rss %ld kB, %d fds",
                           (long long)((now - t0) / 1000000000LL),
                           total_requests(), s.rss_kb, s.fds);
            next_progress += 60000000000LL;
        }
        bench_sleep_ns(100000000LL);
    }
    return 0;
}

static int parse_args(int argc, char **argv)
{
    static const struct option longs[] = {
        {"port", 1, 0, 'p'},         {"secret", 1, 0, 's'},
        {"pid", 1, 0, 'P'},          {"out", 1, 0, 'o'},
        {"seconds", 1, 0, 'd'},      {"warmup", 1, 0, 'w'},
        {"rate", 1, 0, 'r'},         {"workers", 1, 0, 'W'},
        {"seed", 1, 0, 'S'},         {"indexer-pid", 1, 0, 'I'},
        {"sample-ms", 1, 0, 'm'},    {"idle", 1, 0, 'i'},
        {"idle-timeout", 1, 0, 't'}, {0, 0, 0, 0}};
    const char *me = "soak_load";
    int c;

    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'p':
            opt.port = (int)bench_parse_long(me, "--port", optarg, 1, 65535);
            break;
        case 's': opt.secret = optarg; break;
        case 'P':
            opt.pid = (pid_t)bench_parse_long(me, "--pid", optarg, 1, INT_MAX);
            break;
        case 'o': opt.out = optarg; break;
        case 'd':
            opt.seconds = (int)bench_parse_long(me, "--seconds", optarg, 1,
                                                86400);
            break;
        case 'w':
            opt.warmup = (int)bench_parse_long(me, "--warmup", optarg, 0,
                                               86400);
            break;
        case 'r':
            opt.rate = (int)bench_parse_long(me, "--rate", optarg, 1, 100000);
            break;
        case 'W':
            opt.workers = (int)bench_parse_long(me, "--workers", optarg, 1,
                                                MAX_WORKERS);
            break;
        case 'S':
            opt.seed = bench_parse_long(me, "--seed", optarg, 0, LONG_MAX);
            break;
        case 'I':
            opt.indexer_pid = (pid_t)bench_parse_long(me, "--indexer-pid",
                                                      optarg, 1, INT_MAX);
            break;
        case 'm':
            opt.sample_ms = (int)bench_parse_long(me, "--sample-ms", optarg,
                                                  100, 600000);
            break;
        case 'i':
            opt.idle = (int)bench_parse_long(me, "--idle", optarg, 0,
                                             MAX_WORKERS);
            break;
        case 't':
            opt.idle_timeout_s = (int)bench_parse_long(me, "--idle-timeout",
                                                       optarg, 1, 3600);
            break;
        default: return -1;
        }
    }
    return opt.port > 0 && opt.pid > 0 && opt.secret != NULL && opt.out != NULL
                   && opt.warmup < opt.seconds
               ? 0
               : -1;
}

/* Starts the workers, the slow client and the idle holder; returns how
 * many threads started (all of them unless threads ran out). */
static int start_threads(pthread_t *t, worker *w, bench_http *slow,
                         bench_http *idle)
{
    int n = 0;

    for (int i = 0; i < opt.workers; i++) {
        w[i].index = i;
        w[i].seed = (unsigned)(opt.seed * 7919 + i * 104729 + 1);
        if (pthread_create(&t[n], NULL, worker_main, &w[i]) != 0)
            return n;
        n++;
    }
    if (pthread_create(&t[n], NULL, slow_main, slow) != 0)
        return n;
    n++;
    if (opt.idle > 0 && pthread_create(&t[n], NULL, idle_main, idle) == 0)
        n++;
    return n;
}

int main(int argc, char **argv)
{
    pthread_t threads[MAX_WORKERS + 2];
    worker *w;
    bench_http *slow, *idle;
    int started, want, rc = 0;

    if (parse_args(argc, argv) != 0) {
        fprintf(stderr,
                "usage: soak_load --port P --secret S --pid PID "
                "--out DIR [--seconds N] [--warmup N (< seconds)] "
                "[--rate R] [--workers W] [--seed S] [--indexer-pid PID] "
                "[--sample-ms MS] [--idle N] [--idle-timeout S]\n");
        return 2;
    }
    w = calloc((size_t)opt.workers, sizeof(*w));
    slow = calloc(1, sizeof(*slow));
    idle = calloc((size_t)opt.idle + 1, sizeof(*idle));
    events_file = open_out("events.tsv");
    samples_file = open_out("samples.tsv");
    if (w == NULL || slow == NULL || idle == NULL || events_file == NULL
        || samples_file == NULL || make_tokens() != 0) {
        fprintf(stderr,
                "soak_load: cannot set up (memory, tokens or "
                "output files in %s)\n",
                opt.out);
        return 1;
    }
    if (seed_documents() != 0) {
        fprintf(stderr,
                "soak_load: reviewd on port %d created no "
                "document\n",
                opt.port);
        return 1;
    }
    want = opt.workers + 1 + (opt.idle > 0);
    started = start_threads(threads, w, slow, idle);
    if (started < want) {
        fprintf(stderr, "soak_load: started %d of %d threads\n", started,
                want);
        rc = 1;
    }
    if (rc == 0 && run_load(started) != 0)
        rc = 1;
    atomic_store(&stop_flag, 1);
    for (int i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    atomic_store(&stats[S_READYZ_OK], wait_ready());
    /* Every thread has ended and closed its sockets: the end reading. */
    if (rc == 0) {
        atomic_store(&paused, started);
        rc = quiet_point("end", started, S_QUIET_END);
    }
    fclose(samples_file);
    fclose(events_file);
    if (write_counts() != 0)
        rc = 1;
    bench_progress("soak_load", "%lld requests in all", total_requests());
    free(w);
    free(slow);
    free(idle);
    free(author_token);
    free(reviewer_token);
    free(reviewer2_token);
    free(forged_token);
    free(expired_token);
    return rc;
}
