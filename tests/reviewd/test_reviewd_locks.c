/*
 * test_reviewd_locks.c: what the Redis lock does and what it cannot undo.
 *
 * The locks are taken under docs/api.md's key names, so a test can hold one by
 * hand in Redis (SET key token PX ttl) and watch reviewd turn requests
 * away with 409 LOCK_BUSY until the TTL ends.  The central case is a
 * holder that outlives its lock: with REVIEWD_TEST_HOOKS=1 the
 * X-Test-Pause-Ms header stalls a request inside its transaction while it
 * "holds" the lock; the test waits for the key to expire, lets a second
 * reviewer decide, and then the stalled request must fail with 409
 * INVALID_STATE: the database guard wins, so no second decision exists.
 * A second reviewd without Redis shows the PostgreSQL side of
 * Idempotency-Key (409 while the first request still runs) and degraded
 * readiness.  A stalled request lives in static storage (the_slow), and
 * end_slow, its case's teardown, joins it whether the case passed or
 * failed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rvt_kit.h"
#include "testkit.h"

#define TOKEN_BY_HAND "00000000000000000000000000000bad"

static rvt_db db, db_off;
static rvt_server srv, srv_off;
static char *alice, *bob, *carol;
static const rvt_person people[] = {{&alice, "alice", "author"},
                                    {&bob, "bob", "reviewer"},
                                    {&carol, "carol", "reviewer"},
                                    {NULL, NULL, NULL}};
static const char *redis_url;

static int setup(void **state)
{
    const char *const env[] = {"REVIEWD_TEST_HOOKS=1",
                               "REVIEWD_REVIEW_LOCK_TTL_MS=300",
                               "REVIEWD_SUBMIT_LOCK_TTL_MS=300", NULL};
    const char *const env_off[] = {"REVIEWD_TEST_HOOKS=1", NULL};

    (void)state;
    redis_url = testkit_shared_redis();
    if (redis_url == NULL
        || rvt_fixture_start(&db, &srv, "locks", redis_url, env, 1) != 0
        || rvt_fixture_start(&db_off, &srv_off, "locks_off", NULL, env_off, 0)
               != 0)
        return -1;
    return rvt_people_mint(people);
}

static int teardown(void **state)
{
    const int rc = rvt_fixture_end(&db, &srv, people);
    const int rc_off = rvt_fixture_end(&db_off, &srv_off, NULL);

    (void)state;
    return rc == 0 && rc_off == 0 ? 0 : -1;
}

typedef struct key_wait {
    const char *key;
    int want; /* 1: exists, 0: gone */
} key_wait;

static int key_is(void *arg)
{
    key_wait *w = arg;

    return testkit_redis_int(redis_url, "EXISTS %s", w->key) == w->want;
}

static int wait_key(const char *key, int want)
{
    key_wait w = {key, want};

    return testkit_wait_until(key_is, &w, rvt_scaled_ms(5000));
}

static void a_key_held_by_hand_turns_decisions_away_until_its_ttl(void **state)
{
    char doc[24], rid[24], key[96], path[128];
    rvt_resp r;

    (void)state;
    assert_int_equal(rvt_create_pending(srv.port, alice, doc, rid), 0);
    snprintf(key, sizeof(key), "lock:doc:review:%s", rid);
    freeReplyObject(
        testkit_redis_cmd(redis_url, "SET %s %s PX 2000", key, TOKEN_BY_HAND));
    snprintf(path, sizeof(path), "/v1/reviews/%s/approve", rid);
    rvt_call(srv.port, "POST", path, bob, NULL, NULL, &r);
    rvt_expect_status(&r, 409, "LOCK_BUSY", "approve while the key is held");
    rvt_resp_free(&r);
    TK_EXPECT(wait_key(key, 0), "the hand-held key expires by its TTL");
    rvt_call(srv.port, "POST", path, bob, NULL, NULL, &r);
    rvt_expect_status(&r, 200, NULL, "approve once the key expired");
    TK_EXPECT(rvt_field(&r, "review.fence") != NULL,
              "the decision carries the lock's fence");
    rvt_resp_free(&r);
    testkit_forget_lock(redis_url, key);
}

static void a_submit_lock_held_by_hand_creates_no_review(void **state)
{
    char doc[24], key[96], path[128], sql[160];
    rvt_resp r;

    (void)state;
    assert_int_equal(rvt_create_doc(srv.port, alice, "held", doc), 0);
    snprintf(key, sizeof(key), "lock:doc:submit:%s", doc);
    freeReplyObject(testkit_redis_cmd(redis_url, "SET %s %s PX 60000", key,
                                      TOKEN_BY_HAND));
    snprintf(path, sizeof(path), "/v1/documents/%s/submit", doc);
    rvt_call(srv.port, "POST", path, alice, NULL, NULL, &r);
    rvt_expect_status(&r, 409, "LOCK_BUSY", "submit while the key is held");
    rvt_resp_free(&r);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM kh_document_review "
             "WHERE document_id = %s",
             doc);
    TK_EXPECT(rvt_sql_int(&db, sql) == 0, "no review was created");
    freeReplyObject(testkit_redis_cmd(redis_url, "DEL %s", key));
    rvt_call(srv.port, "POST", path, alice, NULL, NULL, &r);
    rvt_expect_status(&r, 201, NULL, "submit once the key is gone");
    rvt_resp_free(&r);
    testkit_forget_lock(redis_url, key);
}

typedef struct slow_call {
    int port;
    char path[128];
    const char *token;
    const char *body;
    const char *idem;
    rvt_resp resp;
    pthread_t thread;
    int running; /* started, not yet joined */
} slow_call;

/* The stalled request of a case, in static storage: a failed expectation
 * leaves the case by longjmp while it still runs, and the group's
 * teardown would stop the servers under it; end_slow joins it first.  One
 * case at a time uses it. */
static slow_call the_slow;

static slow_call *begin_slow(void)
{
    memset(&the_slow, 0, sizeof(the_slow));
    return &the_slow;
}

static void start_slow(slow_call *s, void *(*main_fn)(void *))
{
    assert_int_equal(pthread_create(&s->thread, NULL, main_fn, s), 0);
    s->running = 1;
}

static void join_slow(slow_call *s)
{
    if (s->running)
        pthread_join(s->thread, NULL);
    s->running = 0;
}

/* Teardown of the cases with a stalled request, passed or failed: joins it
 * (it returns within rvt_http's wait) and frees its answer. */
static int end_slow(void **state)
{
    (void)state;
    join_slow(&the_slow);
    rvt_resp_free(&the_slow.resp);
    return 0;
}

/* A request that stalls 1.5 s (times RVT_TIMEOUT_SCALE) inside its
 * transaction. */
static void *slow_main(void *arg)
{
    slow_call *s = arg;
    char auth[4200], idem[300], pause[64];
    const char *headers[5];
    int n = 0;

    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", s->token);
    headers[n++] = auth;
    /* Long enough for what the test does meanwhile, also under valgrind. */
    snprintf(pause, sizeof(pause), "X-Test-Pause-Ms: %lld",
             (long long)rvt_scaled_ms(1500));
    headers[n++] = pause;
    if (s->body != NULL)
        headers[n++] = "Content-Type: application/json";
    if (s->idem != NULL) {
        snprintf(idem, sizeof(idem), "Idempotency-Key: %s", s->idem);
        headers[n++] = idem;
    }
    headers[n] = NULL;
    rvt_http(s->port, "POST", s->path, headers, s->body,
             s->body != NULL ? strlen(s->body) : 0, &s->resp);
    return NULL;
}

static void a_holder_paused_past_its_ttl_cannot_make_a_second_decision(
    void **state)
{
    char doc[24], rid[24], key[96], path[128], sql[256], out[256];
    slow_call *const slow = begin_slow();
    rvt_resp r;
    char fence[32];

    (void)state;
    assert_int_equal(rvt_create_pending(srv.port, alice, doc, rid), 0);
    snprintf(key, sizeof(key), "lock:doc:review:%s", rid);
    slow->port = srv.port;
    snprintf(slow->path, sizeof(slow->path), "/v1/reviews/%s/approve", rid);
    slow->token = bob;
    start_slow(slow, slow_main);
    TK_EXPECT(wait_key(key, 1), "the stalled approve holds the lock");
    TK_EXPECT(wait_key(key, 0), "its 300 ms TTL runs out while it stalls");
    snprintf(path, sizeof(path), "/v1/reviews/%s/reject", rid);
    rvt_call(srv.port, "POST", path, carol, "{\"comment\":\"no\"}", NULL, &r);
    rvt_expect_status(&r, 200, NULL, "a second reviewer takes the free lock");
    snprintf(fence, sizeof(fence), "%s",
             rvt_field(&r, "review.fence") != NULL
                 ? rvt_field(&r, "review.fence")
                 : "");
    rvt_resp_free(&r);
    join_slow(slow);
    rvt_expect_status(&slow->resp, 409, "INVALID_STATE",
                      "the holder whose lock expired");
    rvt_resp_free(&slow->resp);
    snprintf(sql, sizeof(sql),
             "SELECT r.status || ' ' || r.reviewer || ' ' "
             "|| r.fence || ' ' || d.status FROM kh_document_review r JOIN "
             "kh_document d ON d.id = r.document_id WHERE r.id = %s",
             rid);
    assert_int_equal(rvt_sql(&db, sql, out, sizeof(out)), 0);
    snprintf(sql, sizeof(sql), "rejected carol %s rejected", fence);
    TK_EXPECT(strcmp(out, sql) == 0,
              "one decision, carol's, with her "
              "fence: got \"%s\", want \"%s\"",
              out, sql);
    rvt_call(srv.port, "GET", "/metrics", NULL, NULL, NULL, &r);
    TK_EXPECT(r.body != NULL
                  && strstr(r.body, "reviewd_lock_release_total{outcome="
                                    "\"lost\"} 0")
                         == NULL,
              "the late release was counted as lost");
    rvt_resp_free(&r);
    testkit_forget_lock(redis_url, key);
}

typedef struct advisory_wait {
    rvt_db *db;
} advisory_wait;

static int advisory_held(void *arg)
{
    advisory_wait *w = arg;

    /* A single-bigint key (objsubid 1) with the top bit set (the high
     * half, classid, at least 2^31): the idempotency keys' own space. */
    return rvt_sql_int(w->db,
                       "SELECT count(*) FROM pg_locks WHERE locktype"
                       " = 'advisory' AND objsubid = 1 AND classid::text::"
                       "bigint >= 2147483648 AND granted")
           > 0;
}

static void without_redis_an_idempotent_twin_is_busy_while_the_first_runs(
    void **state)
{
    char doc[24];
    advisory_wait w = {&db_off};
    slow_call *const slow = begin_slow();
    rvt_resp r;

    (void)state;
    assert_int_equal(rvt_create_doc(srv_off.port, alice, "twin", doc), 0);
    slow->port = srv_off.port;
    snprintf(slow->path, sizeof(slow->path), "/v1/documents/%s/submit", doc);
    slow->token = alice;
    slow->idem = "twin-key";
    start_slow(slow, slow_main);
    TK_EXPECT(testkit_wait_until(advisory_held, &w, rvt_scaled_ms(5000)),
              "the first request holds the key's advisory lock");
    rvt_call(srv_off.port, "POST", slow->path, alice, NULL, "twin-key", &r);
    rvt_expect_status(&r, 409, "LOCK_BUSY", "the twin while the first runs");
    rvt_resp_free(&r);
    join_slow(slow);
    rvt_expect_status(&slow->resp, 201, NULL, "the first request");
    rvt_call(srv_off.port, "POST", slow->path, alice, NULL, "twin-key", &r);
    rvt_expect_status(&r, 201, NULL, "a retry after it finished");
    TK_EXPECT(slow->resp.body != NULL && r.body != NULL
                  && strcmp(slow->resp.body, r.body) == 0,
              "the retry replays the first response");
    TK_EXPECT(json_is_null(
                  json_object_get(json_object_get(r.json, "review"), "fence")),
              "no fence without Redis");
    rvt_resp_free(&r);
    rvt_resp_free(&slow->resp);
}

static void without_redis_decisions_have_no_fence_and_readyz_is_degraded(
    void **state)
{
    char doc[24], rid[24], path[128];
    rvt_resp r;

    (void)state;
    rvt_call(srv_off.port, "GET", "/readyz", NULL, NULL, NULL, &r);
    rvt_expect_status(&r, 200, NULL, "/readyz without Redis");
    TK_EXPECT(strcmp(rvt_field(&r, "status"), "degraded") == 0
                  && strcmp(rvt_field(&r, "redis"), "off") == 0,
              "degraded with redis off: %s", r.body);
    rvt_resp_free(&r);
    assert_int_equal(rvt_create_pending(srv_off.port, alice, doc, rid), 0);
    snprintf(path, sizeof(path), "/v1/reviews/%s/approve", rid);
    rvt_call(srv_off.port, "POST", path, bob, NULL, NULL, &r);
    rvt_expect_status(&r, 200, NULL, "approve without Redis");
    TK_EXPECT(json_is_null(
                  json_object_get(json_object_get(r.json, "review"), "fence")),
              "fence is null for a degraded decision");
    rvt_resp_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            a_key_held_by_hand_turns_decisions_away_until_its_ttl),
        cmocka_unit_test(a_submit_lock_held_by_hand_creates_no_review),
        cmocka_unit_test_teardown(
            a_holder_paused_past_its_ttl_cannot_make_a_second_decision,
            end_slow),
        cmocka_unit_test_teardown(
            without_redis_an_idempotent_twin_is_busy_while_the_first_runs,
            end_slow),
        cmocka_unit_test(
            without_redis_decisions_have_no_fence_and_readyz_is_degraded),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
