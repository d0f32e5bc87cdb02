/*
 * test_reviewd_storm.c: the concurrency contract under storms, with Redis
 * up, stopped, and stopped in the middle of the storm.
 *
 * Each round creates a draft and fires, all at once from their own
 * threads and connections:
 *   - 64 submits of that draft: exactly one 201, every other answer 409
 *     (LOCK_BUSY from Redis or INVALID_STATE from PostgreSQL), and the
 *     database holds exactly one pending review for the document;
 *   - then 128 decisions on that review by two reviewers, half approve and
 *     half reject: exactly one 200, every other answer 409, the review
 *     decided once, and the document's status equal to the review's.
 * Each scenario runs 20 rounds.  reviewd uses a private redis-server
 * (testkit) that the test stops and starts by pid; while it is stopped
 * /readyz must say degraded with redis down, decisions carry no fence, and
 * after it is back /readyz must say ok within 10 s.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rvt_kit.h"
#include "testkit.h"

#define ROUNDS 20
#define SUBMITTERS 64
#define DECIDERS 128

static rvt_db db;
static rvt_server srv;
static testkit_redis *redis;
static char *alice, *bob, *carol;
static const rvt_person people[] = {{&alice, "alice", "author"},
                                    {&bob, "bob", "reviewer"},
                                    {&carol, "carol", "reviewer"},
                                    {NULL, NULL, NULL}};

static int setup(void **state)
{
    const testkit_redis_opts opts = {.name = "reviewd_storm_redis"};
    const char *const env[] = {"REVIEWD_THREADS=4",
                               "REVIEWD_REDIS_CHECK_MS=100", NULL};

    (void)state;
    redis = testkit_redis_start(&opts);
    if (redis == NULL
        || rvt_fixture_start(&db, &srv, "storm", redis->url, env, 0) != 0)
        return -1;
    return rvt_people_mint(people);
}

static int teardown(void **state)
{
    const int rc = rvt_fixture_end(&db, &srv, people);

    (void)state;
    testkit_redis_free(redis);
    return rc;
}

/* Counts answers by status; fails on anything but 2xx and 409. */
static int count_ok(const rvt_storm_req *reqs, int n, int ok_status,
                    const char *what)
{
    int ok = 0, i;

    for (i = 0; i < n; i++) {
        if (reqs[i].status == ok_status) {
            ok++;
            continue;
        }
        TK_EXPECT(reqs[i].status == 409
                      && (strcmp(reqs[i].code, "LOCK_BUSY") == 0
                          || strcmp(reqs[i].code, "INVALID_STATE") == 0),
                  "%s: every loser gets 409 LOCK_BUSY or INVALID_STATE, "
                  "got %d %s",
                  what, reqs[i].status, reqs[i].code);
    }
    return ok;
}

/* 64 submits of one draft; returns the review id in rid. */
static void submit_storm(void (*on_half)(void *), char *rid)
{
    static rvt_storm_req reqs[SUBMITTERS];
    char doc[24], sql[256];
    int i;

    assert_int_equal(rvt_create_doc(srv.port, alice, "storm", doc), 0);
    memset(reqs, 0, sizeof(reqs));
    for (i = 0; i < SUBMITTERS; i++) {
        reqs[i].method = "POST";
        snprintf(reqs[i].path, sizeof(reqs[i].path), "/v1/documents/%s/submit",
                 doc);
        reqs[i].token = alice;
    }
    assert_int_equal(rvt_storm(srv.port, reqs, SUBMITTERS, on_half, NULL), 0);
    TK_EXPECT(count_ok(reqs, SUBMITTERS, 201, "submit storm") == 1,
              "exactly one of 64 concurrent submits gets 201");
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM kh_document_review "
             "WHERE document_id = %s AND status = 'pending'",
             doc);
    TK_EXPECT(rvt_sql_int(&db, sql) == 1, "one pending review");
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM kh_document_review "
             "WHERE document_id = %s",
             doc);
    TK_EXPECT(rvt_sql_int(&db, sql) == 1, "one review at all");
    snprintf(sql, sizeof(sql),
             "SELECT current_review_id FROM kh_document "
             "WHERE id = %s AND status = 'pending_review'",
             doc);
    assert_int_equal(rvt_sql(&db, sql, rid, 24), 0);
    TK_EXPECT(rid[0] != '\0', "the document is pending_review");
}

/* 128 approve/reject calls by two reviewers on one review. */
static void decide_storm(const char *rid, void (*on_half)(void *),
                         int want_fence)
{
    static rvt_storm_req reqs[DECIDERS];
    char sql[512], out[128];
    int i;

    memset(reqs, 0, sizeof(reqs));
    for (i = 0; i < DECIDERS; i++) {
        const int approve = i % 2 == 0;

        reqs[i].method = "POST";
        snprintf(reqs[i].path, sizeof(reqs[i].path), "/v1/reviews/%s/%s", rid,
                 approve ? "approve" : "reject");
        reqs[i].token = (i / 2) % 2 == 0 ? bob : carol;
        reqs[i].body = approve ? "{\"comment\":\"yes\"}"
                               : "{\"comment\":\"no\"}";
    }
    assert_int_equal(rvt_storm(srv.port, reqs, DECIDERS, on_half, NULL), 0);
    TK_EXPECT(count_ok(reqs, DECIDERS, 200, "decision storm") == 1,
              "exactly one of 128 concurrent decisions gets 200");
    snprintf(sql, sizeof(sql),
             "SELECT d.status = r.status AND "
             "r.status IN ('approved', 'rejected') AND r.reviewer IN "
             "('bob', 'carol') FROM kh_document d JOIN kh_document_review r "
             "ON r.id = d.current_review_id WHERE r.id = %s",
             rid);
    assert_int_equal(rvt_sql(&db, sql, out, sizeof(out)), 0);
    TK_EXPECT(strcmp(out, "t") == 0,
              "the document's status equals its review's");
    if (want_fence >= 0) {
        snprintf(sql, sizeof(sql),
                 "SELECT fence IS NOT NULL FROM "
                 "kh_document_review WHERE id = %s",
                 rid);
        assert_int_equal(rvt_sql(&db, sql, out, sizeof(out)), 0);
        TK_EXPECT(strcmp(out, want_fence ? "t" : "f") == 0,
                  "the decision %s a fence", want_fence ? "has" : "has no");
    }
}

static void run_rounds(void (*on_half)(void *), void (*before)(void),
                       int want_fence)
{
    char rid[24];
    int round;

    for (round = 0; round < ROUNDS; round++) {
        if (before != NULL)
            before();
        submit_storm(on_half, rid);
        if (before != NULL)
            before();
        decide_storm(rid, on_half, want_fence);
    }
}

static void storms_with_redis_up_decide_exactly_once(void **state)
{
    (void)state;
    TK_EXPECT(rvt_wait_ready(srv.port, "ok", "ok", 10000),
              "/readyz is ok with Redis up");
    run_rounds(NULL, NULL, 1);
    TK_EXPECT(rvt_server_log_shows(&srv, "\"lock\":\"busy\""),
              "Redis turned some duplicates away (409 LOCK_BUSY)");
}

static void storms_with_redis_stopped_decide_exactly_once(void **state)
{
    (void)state;
    assert_int_equal(testkit_redis_stop(redis), 0);
    TK_EXPECT(rvt_wait_ready(srv.port, "degraded", "down", 10000),
              "/readyz says degraded, redis down");
    run_rounds(NULL, NULL, 0);
    TK_EXPECT(rvt_wait_ready(srv.port, "degraded", "down", 1000),
              "still degraded after the storms");
}

static void redis_coming_back_is_used_again_within_10_s(void **state)
{
    (void)state;
    assert_int_equal(testkit_redis_restart(redis), 0);
    TK_EXPECT(rvt_wait_ready(srv.port, "ok", "ok", 10000),
              "/readyz is ok within 10 s of Redis coming back");
    TK_EXPECT(rvt_server_log_has(&srv, "\"msg\":\"dependency_down\"")
                  && rvt_server_log_has(&srv, "\"msg\":\"dependency_up\""),
              "each transition was logged");
}

static void stop_redis(void *arg)
{
    (void)arg;
    testkit_redis_stop(redis);
}

static void start_redis_if_stopped(void)
{
    if (redis->pid == 0)
        assert_int_equal(testkit_redis_restart(redis), 0);
}

static void storms_with_redis_stopped_midway_decide_exactly_once(void **state)
{
    (void)state;
    run_rounds(stop_redis, start_redis_if_stopped, -1);
    start_redis_if_stopped();
    TK_EXPECT(rvt_wait_ready(srv.port, "ok", "ok", 10000),
              "/readyz is ok within 10 s after the last outage");
}

static void warnings_are_logged_per_transition_not_per_request(void **state)
{
    char *log = NULL;
    FILE *f = fopen(srv.log, "r");
    size_t cap = 0;
    long downs = 0;

    (void)state;
    assert_non_null(f);
    while (getline(&log, &cap, f) > 0)
        if (strstr(log, "\"msg\":\"dependency_down\"") != NULL)
            downs++;
    free(log);
    fclose(f);
    /* One outage in the stopped scenario and at most one per half round
     * in the midway one: far fewer than the thousands of requests. */
    TK_EXPECT(downs >= 1 && downs <= 1 + 2 * ROUNDS,
              "1..%d dependency_down lines, got %ld", 1 + 2 * ROUNDS, downs);
}

static void reviewd_starts_while_redis_is_down_and_uses_it_once_up(
    void **state)
{
    const char *const env[] = {"REVIEWD_REDIS_CHECK_MS=100", NULL};
    char doc[24], rid[24], path[128];
    rvt_server late;
    rvt_resp r;

    (void)state;
    assert_int_equal(testkit_redis_stop(redis), 0);
    assert_int_equal(rvt_server_start(&late, &db, redis->url, env,
                                      "reviewd_storm"),
                     0);
    TK_EXPECT(rvt_wait_ready(late.port, "degraded", "down", 10000),
              "it starts and serves, degraded, redis down");
    assert_int_equal(rvt_create_pending(late.port, alice, doc, rid), 0);
    assert_int_equal(testkit_redis_restart(redis), 0);
    TK_EXPECT(rvt_wait_ready(late.port, "ok", "ok", 10000),
              "/readyz is ok within 10 s of Redis starting, no restart");
    snprintf(path, sizeof(path), "/v1/reviews/%s/approve", rid);
    rvt_call(late.port, "POST", path, bob, NULL, NULL, &r);
    TK_EXPECT(r.status == 200 && rvt_field(&r, "review.fence") != NULL,
              "decisions take the Redis lock again (a fence), got %d",
              r.status);
    rvt_resp_free(&r);
    TK_EXPECT(rvt_server_stop(&late), "the late server exits 0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(storms_with_redis_up_decide_exactly_once),
        cmocka_unit_test(storms_with_redis_stopped_decide_exactly_once),
        cmocka_unit_test(redis_coming_back_is_used_again_within_10_s),
        cmocka_unit_test(storms_with_redis_stopped_midway_decide_exactly_once),
        cmocka_unit_test(warnings_are_logged_per_transition_not_per_request),
        cmocka_unit_test(
            reviewd_starts_while_redis_is_down_and_uses_it_once_up),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
