/*
 * test_reviewd_writes.c: REVIEWD_WRITE_CONCURRENCY, the write
 * transactions' gate (tx/rv_admit.h).
 *
 * reviewd-testing runs with one place for writes and a 600 ms request
 * budget.  A create parked by X-Test-Pause-Ms inside its transaction
 * holds the only place (the pause does not eat its own budget,
 * rv_hooks.h); meanwhile:
 *   - /metrics shows one write running;
 *   - a second create waits for the place, shows as waiting, and when its
 *     budget ends is answered 503 UNAVAILABLE (JSON, as docs/api.md says),
 *     counted in reviewd_write_admission_timeouts_total, and leaves no
 *     document behind;
 *   - a read is not gated: it is answered 200 at once.
 * When the parked create commits, the place is free again: a third create
 * gets 201 and nothing is left running or waiting.
 *
 * A second reviewd, with the stack's Redis, one place and a 2 s budget,
 * shows that a write takes its place before its Redis lock: while a
 * create is parked, a submit waits for the place without holding its
 * document's lock (the key lock:doc:submit:{id} does not exist), so a
 * second submit of the same document is not turned away with 409
 * LOCK_BUSY for a wait that is not its own: it waits too, and its budget
 * ends it with 503.  Once the parked create commits, the document is
 * submitted (one place, taken once per write).
 *
 * Every write path takes exactly one place, with Redis and without it
 * (degraded locks), with an Idempotency-Key and without: on both servers,
 * with one place and nothing parked, create, edit, submit, approve and
 * reject, each once plainly and once keyed and replayed, are answered
 * at once (a write that took a second place would wait for itself and
 * get 503), and none is left running or waiting.
 *
 * The parked create and the waiting submit live in static storage and
 * end_case, the cases' teardown, joins them whether the case passed or
 * failed.  Bounds are generous; nothing here times the server except
 * that a waiting write must not outlast the parked one, and where a slow
 * machine could let the parked one finish first, the assertion allows
 * for it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rvt_kit.h"
#include "testkit.h"

#define PAUSE_MS 4000
#define WAIT_MS 15000
/* The parked create of the Redis case: four budgets of the waiters. */
#define PAUSE_LOCKED_MS 8000

static rvt_db db, db_redis;
static rvt_server srv, srv_redis;
static const char *redis_url;
static char *alice, *bob;
static const rvt_person people[] = {{&alice, "alice", "author"},
                                    {&bob, "bob", "reviewer"},
                                    {NULL, NULL, NULL}};

/* The parked create and the waiting submit (static: see the top
 * comment). */
static pthread_t parked_thread;
static int parked_started;
static int parked_pause_ms;
static atomic_int parked_answered;
static rvt_resp parked_resp;
static pthread_t waiter_thread;
static int waiter_started;
static char waiter_path[96];
static rvt_resp waiter_resp;

static int setup(void **state)
{
    const char *const env[] = {"REVIEWD_WRITE_CONCURRENCY=1",
                               "REVIEWD_REQUEST_BUDGET_MS=600",
                               "REVIEWD_TEST_HOOKS=1", NULL};
    const char *const env_redis[] = {"REVIEWD_WRITE_CONCURRENCY=1",
                                     "REVIEWD_REQUEST_BUDGET_MS=2000",
                                     "REVIEWD_TEST_HOOKS=1", NULL};

    (void)state;
    redis_url = testkit_shared_redis();
    if (redis_url == NULL
        || rvt_fixture_start(&db, &srv, "writes", NULL, env, 0) != 0
        || rvt_fixture_start(&db_redis, &srv_redis, "writes_redis", redis_url,
                             env_redis, 1)
               != 0)
        return -1;
    return rvt_people_mint(people);
}

static int teardown(void **state)
{
    const int rc = rvt_fixture_end(&db, &srv, people);
    const int rc_redis = rvt_fixture_end(&db_redis, &srv_redis, NULL);

    (void)state;
    return rc == 0 && rc_redis == 0 ? 0 : -1;
}

static int end_case(void **state)
{
    (void)state;
    if (waiter_started) {
        pthread_join(waiter_thread, NULL);
        waiter_started = 0;
    }
    if (parked_started) {
        pthread_join(parked_thread, NULL);
        parked_started = 0;
    }
    rvt_resp_free(&waiter_resp);
    rvt_resp_free(&parked_resp);
    atomic_store(&parked_answered, 0);
    return 0;
}

/* A create parked for parked_pause_ms on the server arg points to. */
static void *parked_main(void *arg)
{
    const rvt_server *const on = arg;
    char auth[4200], pause[48];
    const char *headers[] = {auth, "Content-Type: application/json", pause,
                             NULL};
    static const char body[] = "{\"title\":\"parked\",\"content\":\"x\"}";

    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", alice);
    snprintf(pause, sizeof(pause), "X-Test-Pause-Ms: %d", parked_pause_ms);
    rvt_http(on->port, "POST", "/v1/documents", headers, body, strlen(body),
             &parked_resp);
    atomic_store(&parked_answered, 1);
    return NULL;
}

static void park_a_create(rvt_server *on, int pause_ms)
{
    parked_pause_ms = pause_ms;
    assert_int_equal(pthread_create(&parked_thread, NULL, parked_main, on), 0);
    parked_started = 1;
}

/* The submit that waits for the place (waiter_path, on srv_redis). */
static void *waiter_main(void *arg)
{
    (void)arg;
    rvt_call(srv_redis.port, "POST", waiter_path, alice, NULL, NULL,
             &waiter_resp);
    return NULL;
}

static int one_write_running(void *arg)
{
    const rvt_server *const on = arg;

    return rvt_metric(on->port, "reviewd_writes_running") == 1;
}

static int one_write_waiting(void *arg)
{
    const rvt_server *const on = arg;

    return rvt_metric(on->port, "reviewd_writes_waiting") == 1;
}

static long long documents_titled(const char *title)
{
    char sql[160];

    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM kh_document WHERE title = '%s'", title);
    return rvt_sql_int(&db, sql);
}

static void a_write_waits_for_a_place_within_its_budget(void **state)
{
    rvt_resp r;

    (void)state;
    park_a_create(&srv, PAUSE_MS);
    TK_EXPECT(testkit_wait_until(one_write_running, &srv, WAIT_MS),
              "the parked create holds the one place within %d ms", WAIT_MS);

    /* The only place is taken: this create waits, then its budget ends. */
    rvt_call(srv.port, "POST", "/v1/documents", alice,
             "{\"title\":\"turned away\",\"content\":\"x\"}", NULL, &r);
    rvt_expect_status(&r, 503, "UNAVAILABLE",
                      "a create while the place is held");
    rvt_resp_free(&r);
    TK_EXPECT(!atomic_load(&parked_answered),
              "the waiting create was answered before the parked one "
              "(its budget, not the parked create, ended its wait)");
    TK_EXPECT(rvt_metric(srv.port, "reviewd_write_admission_timeouts_total")
                  == 1,
              "the timeout is counted");
    TK_EXPECT(documents_titled("turned away") == 0,
              "a create turned away wrote nothing");

    /* Reads are not gated. */
    rvt_call(srv.port, "GET", "/v1/documents?limit=1", alice, NULL, NULL, &r);
    rvt_expect_status(&r, 200, NULL, "a list while the place is held");
    rvt_resp_free(&r);
    TK_EXPECT(!atomic_load(&parked_answered),
              "the read was answered while the create was still parked");

    /* The parked create commits; the place is free again. */
    pthread_join(parked_thread, NULL);
    parked_started = 0;
    rvt_expect_status(&parked_resp, 201, NULL, "the parked create");
    rvt_call(srv.port, "POST", "/v1/documents", alice,
             "{\"title\":\"after\",\"content\":\"x\"}", NULL, &r);
    rvt_expect_status(&r, 201, NULL, "a create after the place was freed");
    rvt_resp_free(&r);
    TK_EXPECT(rvt_metric(srv.port, "reviewd_writes_running") == 0
                  && rvt_metric(srv.port, "reviewd_writes_waiting") == 0,
              "nothing left running or waiting");
}

static void a_submit_waits_for_its_place_before_taking_its_lock(void **state)
{
    char doc[24], key[64];
    rvt_resp r;
    int submitted = 0;

    (void)state;
    assert_int_equal(rvt_create_doc(srv_redis.port, alice, "gated", doc), 0);
    snprintf(key, sizeof(key), "lock:doc:submit:%s", doc);
    snprintf(waiter_path, sizeof(waiter_path), "/v1/documents/%s/submit", doc);
    park_a_create(&srv_redis, PAUSE_LOCKED_MS);
    TK_EXPECT(testkit_wait_until(one_write_running, &srv_redis, WAIT_MS),
              "the parked create holds the one place within %d ms", WAIT_MS);

    /* A submit of the document waits for the place, without its lock. */
    assert_int_equal(pthread_create(&waiter_thread, NULL, waiter_main, NULL),
                     0);
    waiter_started = 1;
    TK_EXPECT(testkit_wait_until(one_write_waiting, &srv_redis, WAIT_MS),
              "the submit waits for the place within %d ms", WAIT_MS);
    TK_EXPECT(testkit_redis_int(redis_url, "EXISTS %s", key) == 0,
              "%s does not exist while its submit waits for a place (the "
              "place comes before the lock)",
              key);

    /* The same document's twin waits for a place too: no 409 for a wait
     * that is not its own. */
    rvt_call(srv_redis.port, "POST", waiter_path, alice, NULL, NULL, &r);
    TK_EXPECT(r.status != 409,
              "a second submit of %s while the first waits for a place is "
              "not turned away with 409: got %d %s",
              doc, r.status, r.body != NULL ? r.body : "");
    if (!atomic_load(&parked_answered))
        rvt_expect_status(&r, 503, "UNAVAILABLE",
                          "a second submit while the place is held");
    submitted += r.status == 201;
    rvt_resp_free(&r);

    pthread_join(waiter_thread, NULL);
    waiter_started = 0;
    TK_EXPECT(waiter_resp.status == 503 || waiter_resp.status == 201,
              "the waiting submit: 503 when its budget ended first, 201 if "
              "the parked create finished first; got %d %s",
              waiter_resp.status,
              waiter_resp.body != NULL ? waiter_resp.body : "");
    submitted += waiter_resp.status == 201;

    /* The parked create commits; the place and the lock are free. */
    pthread_join(parked_thread, NULL);
    parked_started = 0;
    rvt_expect_status(&parked_resp, 201, NULL, "the parked create");
    if (submitted == 0) {
        rvt_call(srv_redis.port, "POST", waiter_path, alice, NULL, NULL, &r);
        rvt_expect_status(&r, 201, NULL, "a submit after the place was freed");
        rvt_resp_free(&r);
    }
    TK_EXPECT(testkit_redis_int(redis_url, "EXISTS %s", key) == 0,
              "%s released after the submit", key);
    TK_EXPECT(rvt_metric(srv_redis.port, "reviewd_writes_running") == 0
                  && rvt_metric(srv_redis.port, "reviewd_writes_waiting") == 0,
              "nothing left running or waiting");
}

/* One write on port, with key (NULL: none); fails unless it got want.
 * With field, copies that field of the answer into out (24 bytes). */
static void write_once(int port, const char *token, const char *method,
                       const char *path, const char *body, const char *key,
                       int want, const char *what, const char *field,
                       char *out)
{
    rvt_resp r;

    rvt_call(port, method, path, token, body, key, &r);
    rvt_expect_status(&r, want, NULL, what);
    if (field != NULL) {
        const char *v = rvt_field(&r, field);

        TK_EXPECT(v != NULL, "%s answers with %s: %s", what, field, r.body);
        snprintf(out, 24, "%s", v);
    }
    rvt_resp_free(&r);
}

/* The five writes on port; keyed: each sent twice with one key (the
 * second a replay).  tag keeps the keys apart between calls. */
static void every_write(int port, int keyed, const char *tag)
{
    const int sends = keyed ? 2 : 1;
    char doc[24], doc2[24], review[24], review2[24], path[96], key[96];
    const char *const k = keyed ? key : NULL;

    for (int n = 0; n < sends; n++) {
        snprintf(key, sizeof(key), "writes-%s-create-%d", tag, (int)getpid());
        write_once(port, alice, "POST", "/v1/documents",
                   "{\"title\":\"one place\",\"content\":\"x\"}", k, 201,
                   "a create", "id", doc);
    }
    snprintf(path, sizeof(path), "/v1/documents/%s", doc);
    write_once(port, alice, "PUT", path, "{\"title\":\"edited\"}", NULL, 200,
               "an edit (keys are for POST)", NULL, NULL);
    snprintf(path, sizeof(path), "/v1/documents/%s/submit", doc);
    snprintf(key, sizeof(key), "writes-%s-submit-%d", tag, (int)getpid());
    for (int n = 0; n < sends; n++)
        write_once(port, alice, "POST", path, NULL, k, 201, "a submit",
                   "review.id", review);
    snprintf(path, sizeof(path), "/v1/reviews/%s/approve", review);
    snprintf(key, sizeof(key), "writes-%s-approve-%d", tag, (int)getpid());
    for (int n = 0; n < sends; n++)
        write_once(port, bob, "POST", path, NULL, k, 200, "an approval", NULL,
                   NULL);
    assert_int_equal(rvt_create_pending(port, alice, doc2, review2), 0);
    snprintf(path, sizeof(path), "/v1/reviews/%s/reject", review2);
    snprintf(key, sizeof(key), "writes-%s-reject-%d", tag, (int)getpid());
    for (int n = 0; n < sends; n++)
        write_once(port, bob, "POST", path, "{\"comment\":\"no\"}", k, 200,
                   "a rejection", NULL, NULL);
}

static void every_write_takes_one_place(void **state)
{
    const rvt_server *const servers[] = {&srv, &srv_redis};
    const char *const tags[] = {"degraded", "redis"};

    (void)state;
    for (int i = 0; i < 2; i++) {
        const int port = servers[i]->port;
        const long long timeouts = rvt_metric(
            port, "reviewd_write_admission_timeouts_total");
        char tag[32];

        snprintf(tag, sizeof(tag), "%s-plain", tags[i]);
        every_write(port, 0, tag);
        snprintf(tag, sizeof(tag), "%s-keyed", tags[i]);
        every_write(port, 1, tag);
        TK_EXPECT(rvt_metric(port, "reviewd_write_admission_timeouts_total")
                      == timeouts,
                  "no write waited out its budget (%s)", tags[i]);
        TK_EXPECT(rvt_metric(port, "reviewd_writes_running") == 0
                      && rvt_metric(port, "reviewd_writes_waiting") == 0,
                  "nothing left running or waiting (%s)", tags[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(a_write_waits_for_a_place_within_its_budget,
                                  end_case),
        cmocka_unit_test_teardown(
            a_submit_waits_for_its_place_before_taking_its_lock, end_case),
        cmocka_unit_test(every_write_takes_one_place),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
