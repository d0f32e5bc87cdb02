/*
 * test_reviewd_bulkhead.c: one dead dependency costs its own callers a
 * fast 503 and nobody else anything (issue 15, item 1).
 *
 * A real reviewd, with its default worker pool, talks to a dependency
 * through the fault kit's pausable proxy (dlock-test-proxy, testkit.h),
 * which is then paused: a blackhole, connections accepted and held, not
 * a byte forwarded, nothing reset, as behind a dead switch.  Six client
 * threads keep asking for what needs that dependency while the main
 * thread samples, each on a fresh connection:
 *   - MongoDB (CONTENT_STORE=mongo, the MongoDB-wire test server behind
 *     the proxy), clients asking GET ?include=content: /healthz answers
 *     every time, fast; GET without the text (PostgreSQL only) stays
 *     fast; the clients get 503 CONTENT_UNAVAILABLE, most of them at
 *     once (the breaker);
 *   - PostgreSQL behind the proxy, clients asking GET /v1/documents/{id}:
 *     /healthz answers every time, fast; /readyz answers 503 "down"
 *     within its own short deadline; the clients get 503 UNAVAILABLE,
 *     most of them at once.
 * /metrics counts the breaker's openings and the calls it refused.  After
 * the proxy resumes, the service recovers by itself (the breaker's trial
 * call) within a bounded wait.
 *
 * Bounds are generous for a loaded machine (a /healthz under 500 ms, a
 * median under 100 ms): before the bulkheads, workers blocked in libmongoc
 * or libpq made /healthz wait seconds (MongoDB) or for ever (PostgreSQL).
 * A /healthz sample that gets no answer in 5 s ends the sampling, so the
 * test stays short when it fails.
 *
 * The client threads, their counters and the case's servers live in
 * static storage (the_case), and end_case, each case's teardown, resumes
 * the proxy, stops and joins the clients and stops what the case started,
 * whether it passed or failed: a failed assertion leaves by longjmp while
 * the clients still run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rvt_kit.h"
#include "rvt_mongo.h"
#include "testkit.h"

#define CLIENTS 6
#define SAMPLES 200
/* Sampling lasts past the first calls' budget (2 s), into the time the
 * breaker answers: OUTAGE_MS and AFTER_FIRST calls per client, at most
 * OUTAGE_MAX_MS (a sanitizer build is slow). */
#define OUTAGE_MS 3500
#define AFTER_FIRST 3
#define OUTAGE_MAX_MS 20000
#define MAX_CALLS 4096
#define HEALTHZ_MAX_MS 500
#define HEALTHZ_MEDIAN_MS 100
#define FAST_503_MEDIAN_MS 300
#define HEALTHZ_GIVE_UP_MS 5000
#define RECOVER_MS 15000
/* How long a healthy setup's create may take, retries included. */
#define CREATE_MS 15000

/* The kit runs reviewd with 4 workers; this test runs the default pool,
 * whose size is part of what it tests (empty is unset). */
#define DEFAULT_POOL "REVIEWD_THREADS="

static const char *redis_url;
static char *alice;
static const rvt_person people[] = {{&alice, "alice", "author"},
                                    {NULL, NULL, NULL}};

static int setup(void **state)
{
    (void)state;
    return rvt_setup_shared(&redis_url, people);
}

static int teardown(void **state)
{
    (void)state;
    rvt_people_free(people);
    return 0;
}

/* ---- clients that need the dead dependency -------------------------- */

typedef struct client {
    pthread_t thread;
    int port;
    char path[96];
    atomic_int *stop;
    atomic_int *started;  /* clients that have begun their first call */
    atomic_int *answered; /* calls answered, all clients */
    int calls;
    int unavailable; /* 503 with the expected code */
    char other[96];  /* the first other answer, for the message */
    const char *want_code;
    int64_t ms[MAX_CALLS];
} client;

static void *client_run(void *arg)
{
    client *c = arg;

    atomic_fetch_add(c->started, 1);
    while (!atomic_load(c->stop) && c->calls < MAX_CALLS) {
        const int64_t t0 = testkit_now_ms();
        rvt_resp r;
        const char *code;

        if (rvt_call(c->port, "GET", c->path, alice, NULL, NULL, &r) != 0)
            r.status = 0;
        c->ms[c->calls++] = testkit_now_ms() - t0;
        atomic_fetch_add(c->answered, 1);
        code = r.status != 0 ? rvt_field(&r, "code") : NULL;
        if (r.status == 503 && code != NULL
            && strcmp(code, c->want_code) == 0) {
            c->unavailable++;
        } else if (c->other[0] == '\0') {
            snprintf(c->other, sizeof(c->other), "%d %s", r.status,
                     code != NULL ? code : "-");
        }
        rvt_resp_free(&r);
    }
    return NULL;
}

static int all_started(void *arg)
{
    return atomic_load((atomic_int *)arg) == CLIENTS;
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

static int64_t median(int64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_i64);
    return n > 0 ? v[n / 2] : -1;
}

/* ---- what the main thread samples ----------------------------------- */

/* GET /healthz on a fresh connection; its time in ms, or -1 when no
 * answer came within HEALTHZ_GIVE_UP_MS (or not 200). */
static int64_t healthz_ms(int port)
{
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: t\r\n"
                              "Connection: close\r\n\r\n";
    const int64_t t0 = testkit_now_ms();
    rvt_resp r;
    int ok;

    ok = rvt_http_raw(port, req, sizeof(req) - 1, HEALTHZ_GIVE_UP_MS, &r) == 0
         && r.status == 200;
    rvt_resp_free(&r);
    return ok ? testkit_now_ms() - t0 : -1;
}

typedef struct outage {
    int port;
    const char *busy_path; /* what the clients ask */
    const char *busy_code; /* the 503's code they must get */
    const char *side_path; /* sampled too, NULL: none */
    int side_status;       /* what it must answer */
    int64_t side_max_ms;   /* and within */
} outage;

/* One case's clients, their shared counters, and what the case started,
 * in static storage: a failed assertion leaves the case by longjmp while
 * the clients still call, so they must outlive its frame until end_case
 * has stopped them.  One case at a time uses it. */
typedef struct bulk_case {
    client clients[CLIENTS];
    atomic_int stop, started, answered;
    int running; /* clients started, not yet joined */
    testkit_proxy *proxy;
    rvt_mongo mongo;
    int mongo_open;
    rvt_db db;
    int db_made;
    rvt_server srv;
    int srv_running;
} bulk_case;

static bulk_case the_case;

static bulk_case *begin_case(void)
{
    memset(&the_case, 0, sizeof(the_case));
    return &the_case;
}

/* Stops the clients started and joins them (each returns after its call
 * in flight, bounded by rvt_call's wait). */
static void stop_clients(bulk_case *bc)
{
    atomic_store(&bc->stop, 1);
    for (int i = 0; i < bc->running; i++)
        pthread_join(bc->clients[i].thread, NULL);
    bc->running = 0;
}

/* Teardown of every case, passed or failed: lets the proxy forward again
 * so the clients' calls return, joins them, then stops reviewd, the
 * database, the proxy and the MongoDB server the case left. */
static int end_case(void **state)
{
    bulk_case *bc = &the_case;

    (void)state;
    if (bc->proxy != NULL)
        testkit_proxy_ctl(bc->proxy, "resume");
    stop_clients(bc);
    if (bc->srv_running)
        rvt_server_terminate(&bc->srv);
    if (bc->db_made)
        rvt_db_drop(&bc->db);
    testkit_proxy_free(bc->proxy);
    if (bc->mongo_open)
        rvt_mongo_close(&bc->mongo, 1);
    memset(bc, 0, sizeof(*bc));
    return 0;
}

/* Runs the clients against the dead dependency and samples /healthz (and
 * side_path) meanwhile; asserts the bounds of the file's comment. */
static void survive_outage(const outage *o)
{
    bulk_case *const bc = &the_case;
    client *const clients = bc->clients;
    int64_t health[SAMPLES], all[CLIENTS * MAX_CALLS];
    int n = 0, nall = 0, i, unavailable = 0, calls = 0;
    int64_t worst = 0, side_worst = 0;
    char side_bad[96] = "";
    const struct timespec pace = {0, 40 * 1000 * 1000};
    int64_t begin, elapsed = 0;

    for (i = 0; i < CLIENTS; i++) {
        memset(&clients[i], 0, sizeof(clients[i]));
        clients[i].port = o->port;
        snprintf(clients[i].path, sizeof(clients[i].path), "%s", o->busy_path);
        clients[i].want_code = o->busy_code;
        clients[i].stop = &bc->stop;
        clients[i].started = &bc->started;
        clients[i].answered = &bc->answered;
        assert_int_equal(pthread_create(&clients[i].thread, NULL, client_run,
                                        &clients[i]),
                         0);
        bc->running = i + 1;
    }
    /* Sampling starts as soon as every client has begun: the first calls
     * are still waiting out their budget, which is when a pool without
     * bulkheads is full. */
    assert_true(testkit_wait_until(all_started, &bc->started, 10000));
    begin = testkit_now_ms();
    for (n = 0; n < SAMPLES && elapsed < OUTAGE_MAX_MS
                && (elapsed < OUTAGE_MS
                    || atomic_load(&bc->answered) < CLIENTS * AFTER_FIRST);
         n++, elapsed = testkit_now_ms() - begin) {
        health[n] = healthz_ms(o->port);
        if (health[n] < 0) {
            n++;
            break;
        }
        worst = health[n] > worst ? health[n] : worst;
        if (o->side_path != NULL) {
            const int64_t t0 = testkit_now_ms();
            int64_t took;
            rvt_resp r;

            if (rvt_call(o->port, "GET", o->side_path, alice, NULL, NULL, &r)
                != 0)
                r.status = 0;
            took = testkit_now_ms() - t0;
            side_worst = took > side_worst ? took : side_worst;
            if (r.status != o->side_status && side_bad[0] == '\0') {
                snprintf(side_bad, sizeof(side_bad), "%d %.60s", r.status,
                         r.body != NULL ? r.body : "");
            }
            rvt_resp_free(&r);
        }
        nanosleep(&pace, NULL);
    }
    stop_clients(bc);
    for (i = 0; i < CLIENTS; i++) {
        unavailable += clients[i].unavailable;
        calls += clients[i].calls;
        memcpy(all + nall, clients[i].ms,
               (size_t)clients[i].calls * sizeof(int64_t));
        nall += clients[i].calls;
    }
    fprintf(stderr,
            "# healthz: %d samples, worst %lld ms; %s worst %lld "
            "ms; clients: %d calls, %d x 503 %s, median %lld ms\n",
            n, (long long)worst, o->side_path != NULL ? o->side_path : "-",
            (long long)side_worst, calls, unavailable, o->busy_code,
            (long long)median(all, nall));
    for (i = 0; i < n; i++) {
        if (health[i] < 0) {
            fail_msg("/healthz sample %d got no 200 within %d ms", i,
                     HEALTHZ_GIVE_UP_MS);
        }
        if (health[i] >= HEALTHZ_MAX_MS) {
            fail_msg("/healthz sample %d took %lld ms (bound %d)", i,
                     (long long)health[i], HEALTHZ_MAX_MS);
        }
    }
    if (median(health, n) >= HEALTHZ_MEDIAN_MS) {
        fail_msg("/healthz median %lld ms (bound %d)",
                 (long long)median(health, n), HEALTHZ_MEDIAN_MS);
    }
    if (o->side_path != NULL
        && (side_bad[0] != '\0' || side_worst >= o->side_max_ms)) {
        fail_msg("%s: status %s, worst %lld ms (want %d within %lld ms)",
                 o->side_path, side_bad[0] != '\0' ? side_bad : "ok",
                 (long long)side_worst, o->side_status,
                 (long long)o->side_max_ms);
    }
    for (i = 0; i < CLIENTS; i++) {
        if (clients[i].other[0] != '\0') {
            fail_msg("client %d got %s, want only 503 %s", i, clients[i].other,
                     o->busy_code);
        }
    }
    assert_true(unavailable >= CLIENTS);
    if (median(all, nall) >= FAST_503_MEDIAN_MS) {
        fail_msg("the 503s took %lld ms (median), want under %d: no "
                 "breaker?",
                 (long long)median(all, nall), FAST_503_MEDIAN_MS);
    }
}

typedef struct recovers {
    int port;
    const char *path;
} recovers;

static int answers_200(void *arg)
{
    const recovers *w = arg;
    rvt_resp r;
    int ok;

    ok = rvt_call(w->port, "GET", w->path, alice, NULL, NULL, &r) == 0
         && r.status == 200;
    rvt_resp_free(&r);
    return ok;
}

/* What create_once needs and gives back. */
typedef struct create_try {
    int port;
    char *id;
    size_t idlen;
} create_try;

/* One create; 1 on 201 (the id kept), 0 otherwise (printed). */
static int create_once(void *arg)
{
    const create_try *t = arg;
    rvt_resp r;
    const char *got;
    int ok;

    ok = rvt_call(t->port, "POST", "/v1/documents", alice,
                  "{\"title\":\"bulkhead\",\"content\":\"text\"}", NULL, &r)
             == 0
         && r.status == 201 && (got = rvt_field(&r, "id")) != NULL;
    if (ok) {
        snprintf(t->id, t->idlen, "%s", got);
    } else {
        fprintf(stderr, "create: %d %s\n", r.status,
                r.body != NULL ? r.body : "");
    }
    rvt_resp_free(&r);
    return ok;
}

/* A document to stage an outage on, made while the dependencies are
 * healthy.  On a loaded machine a healthy MongoDB or PostgreSQL can still
 * miss one request's budget (a 503, which may open its breaker for a
 * moment), so the create is tried again for CREATE_MS: this is the
 * case's setup, not what it checks. */
static int create_doc(int port, char *id, size_t idlen)
{
    create_try t = {port, id, idlen};

    return testkit_wait_until(create_once, &t, CREATE_MS) ? 0 : -1;
}

/* ---- MongoDB blackholed ------------------------------------------------ */

static void mongo_dead_costs_only_the_text(void **state)
{
    bulk_case *const bc = begin_case();
    rvt_mongo *const mongo = &bc->mongo;
    testkit_proxy *proxy;
    rvt_db *const db = &bc->db;
    rvt_server *const srv = &bc->srv;
    char url_env[300], id[32], with[96], without[96];
    const char *env[] = {"CONTENT_STORE=mongo", url_env, DEFAULT_POOL, NULL};
    char mongo_db[64];

    (void)state;
    snprintf(mongo_db, sizeof(mongo_db), "rvt_bulk_%ld", (long)getpid());
    assert_int_equal(rvt_mongo_open(mongo, "bulkhead_mongo", mongo_db), 0);
    bc->mongo_open = 1;
    proxy = bc->proxy = testkit_proxy_for("bulkhead_mongo_proxy", mongo->port);
    assert_non_null(proxy);
    /* No timeouts in the URL: reviewd's own, cut from its budget. */
    snprintf(url_env, sizeof(url_env), "MONGO_URL=mongodb://127.0.0.1:%d/%s",
             proxy->port, mongo_db);
    bc->db_made = bc->srv_running = 1; /* at least in part: end_case */
    assert_int_equal(rvt_fixture_start(db, srv, "bulkhead_mongo", redis_url,
                                       env, 1),
                     0);
    assert_int_equal(create_doc(srv->port, id, sizeof(id)), 0);
    snprintf(with, sizeof(with), "/v1/documents/%s?include=content", id);
    snprintf(without, sizeof(without), "/v1/documents/%s", id);
    {
        const recovers w = {srv->port, with};

        assert_true(answers_200((void *)&w));
    }

    assert_int_equal(testkit_proxy_ctl(proxy, "pause"), 0);
    {
        const outage o = {srv->port, with, "CONTENT_UNAVAILABLE",
                          without,   200,  1500};

        survive_outage(&o);
    }
    assert_true(
        rvt_metric(srv->port, "reviewd_content_mongo_breaker_opens_total")
        >= 1);
    assert_true(rvt_metric(srv->port, "reviewd_content_mongo_refused_total")
                >= 1);
    assert_int_equal(testkit_proxy_ctl(proxy, "resume"), 0);
    {
        recovers w = {srv->port, with};

        assert_true(testkit_wait_until(answers_200, &w, RECOVER_MS));
    }
    bc->db_made = bc->srv_running = 0;
    assert_true(rvt_fixture_stop(db, srv));
}

/* ---- PostgreSQL blackholed --------------------------------------------- */

/* host:port of the PostgreSQL that url names (TCP only). */
static int pg_target(const char *url, char *out, size_t outlen)
{
    char *err = NULL;
    PQconninfoOption *opts = PQconninfoParse(url, &err), *o;
    const char *host = "127.0.0.1", *port = "5432";

    if (opts == NULL) {
        fprintf(stderr, "bad url %s: %s\n", url, err != NULL ? err : "?");
        PQfreemem(err);
        return -1;
    }
    for (o = opts; o->keyword != NULL; o++)
        if (o->val != NULL && strcmp(o->keyword, "host") == 0)
            host = o->val;
        else if (o->val != NULL && strcmp(o->keyword, "port") == 0)
            port = o->val;
    snprintf(out, outlen, "%s:%s", host, port);
    PQconninfoFree(opts);
    return out[0] == '/' ? -1 : 0;
}

static int readyz_ms(int port, int *status)
{
    const int64_t t0 = testkit_now_ms();
    rvt_resp r;

    *status = rvt_call(port, "GET", "/readyz", NULL, NULL, NULL, &r) == 0
                  ? r.status
                  : 0;
    rvt_resp_free(&r);
    return (int)(testkit_now_ms() - t0);
}

static void postgres_dead_costs_only_its_callers(void **state)
{
    bulk_case *const bc = begin_case();
    testkit_proxy *proxy;
    rvt_db *const db = &bc->db;
    rvt_db via;
    rvt_server *const srv = &bc->srv;
    char target[300], id[32], path[96];
    const char *env[] = {DEFAULT_POOL, NULL};
    int status, ms;

    (void)state;
    assert_int_equal(rvt_db_create(db, "bulkhead_pg"), 0);
    bc->db_made = 1;
    assert_int_equal(pg_target(db->url, target, sizeof(target)), 0);
    proxy = bc->proxy = testkit_proxy_start("bulkhead_pg_proxy", target);
    assert_non_null(proxy);
    via = *db;
    via.conn = NULL;
    assert_true(strlen(db->url) + 40 < sizeof(via.url));
    snprintf(via.url, sizeof(via.url), "%.*s host=127.0.0.1 port=%d",
             (int)sizeof(via.url) - 40, db->url, proxy->port);
    assert_int_equal(rvt_server_start(srv, &via, redis_url, env,
                                      "reviewd_bulkhead_pg"),
                     0);
    bc->srv_running = 1;
    assert_int_equal(rvt_db_offset_ids(db), 0); /* reviewd migrated it */
    assert_int_equal(create_doc(srv->port, id, sizeof(id)), 0);
    snprintf(path, sizeof(path), "/v1/documents/%s", id);

    assert_int_equal(testkit_proxy_ctl(proxy, "pause"), 0);
    {
        const outage o = {srv->port, path, "UNAVAILABLE", NULL, 0, 0};

        survive_outage(&o);
    }
    assert_true(rvt_metric(srv->port, "reviewd_pg_breaker_opens_total") >= 1);
    assert_true(rvt_metric(srv->port, "reviewd_pg_refused_total") >= 1);
    ms = readyz_ms(srv->port, &status);
    fprintf(stderr, "# /readyz: %d in %d ms\n", status, ms);
    assert_int_equal(status, 503);
    assert_true(ms < 2500); /* its 1 s bound, and a loaded machine */

    assert_int_equal(testkit_proxy_ctl(proxy, "resume"), 0);
    {
        recovers w = {srv->port, path};

        assert_true(testkit_wait_until(answers_200, &w, RECOVER_MS));
    }
    bc->db_made = bc->srv_running = 0;
    assert_true(rvt_fixture_stop(db, srv));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(mongo_dead_costs_only_the_text, end_case),
        cmocka_unit_test_teardown(postgres_dead_costs_only_its_callers,
                                  end_case),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
