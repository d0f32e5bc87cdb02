/*
 * test_reviewd_authz.c: who may act is decided before any lock.
 *
 * docs/api.md's check order puts ownership and four eyes (403) before the
 * state and the locks (409).  Before the fix, submit took the Redis lock
 * lock:doc:submit:{id} before it read the document, so any signed-in user
 * who repeated POST /v1/documents/{victim}/submit held the owner's lock:
 * the owner got 409 LOCK_BUSY, and so did the attacker, instead of 403;
 * an edit took the row lock (FOR UPDATE) before its owner check, so a
 * stranger's PUT waited behind, and made wait, the owner's own work.
 *
 *   - eight attacker connections repeat submit on alice's document while
 *     alice submits it (and a reviewer rejects it) twenty times: every
 *     one of alice's submits is 201, every attacker answer 403;
 *   - with the Redis key held by hand, a stranger's submit and the
 *     author's own approve are 403 (not 409 LOCK_BUSY);
 *   - with the document's row locked by another transaction, a stranger's
 *     PUT and submit are 403 at once (before: they waited on the row lock
 *     until the statement timeout and answered 503);
 *   - with the review's and the document's rows locked by another
 *     transaction, the author's own approve and reject (as a reviewer, as
 *     an admin) are 403 at once, four eyes being checked before the rows
 *     are locked.
 *
 * The attackers' state and threads live in static storage (the_attack),
 * and end_attack, the case's teardown, stops and joins them whether the
 * case passed or failed: a failed assertion leaves the case by longjmp,
 * and the group's teardown would stop the server under them.
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

#include "rvt_kit.h"
#include "testkit.h"
#include "testkit_threads.h"

#define ATTACKERS 8
#define ROUNDS 20
#define TOKEN_BY_HAND "00000000000000000000000000000bad"

static rvt_db db;
static rvt_server srv;
static char *alice, *mallory, *bob;
static const rvt_person people[] = {{&alice, "alice", "author"},
                                    {&mallory, "mallory", "author"},
                                    {&bob, "bob", "reviewer"},
                                    {NULL, NULL, NULL}};
static const char *redis_url;

static int setup(void **state)
{
    /* A statement timeout of 3 s: a request that waited on a row lock
     * would answer 503 after it, well inside the HTTP client's wait. */
    const char *const env[] = {"REVIEWD_PG_TIMEOUT_S=3", NULL};

    (void)state;
    redis_url = testkit_shared_redis();
    if (redis_url == NULL
        || rvt_fixture_start(&db, &srv, "authz", redis_url, env, 1) != 0)
        return -1;
    return rvt_people_mint(people);
}

static int teardown(void **state)
{
    (void)state;
    return rvt_fixture_end(&db, &srv, people);
}

/* ---- eight attackers against the owner ---------------------------------- */

typedef struct attack {
    char path[128];
    atomic_int stop;
    atomic_int forbidden;  /* 403 answers */
    atomic_int other;      /* anything else */
    char first_other[160]; /* the first such answer, for the message */
    pthread_mutex_t mu;
    testkit_threads attackers;
} attack;

static attack the_attack;

static void *attacker_main(void *arg)
{
    attack *a = arg;
    rvt_resp r;

    while (!atomic_load(&a->stop)) {
        rvt_call(srv.port, "POST", a->path, mallory, NULL, NULL, &r);
        if (r.status == 403) {
            atomic_fetch_add(&a->forbidden, 1);
        } else if (atomic_fetch_add(&a->other, 1) == 0) {
            pthread_mutex_lock(&a->mu);
            snprintf(a->first_other, sizeof(a->first_other), "%d %.120s",
                     r.status, r.body != NULL ? r.body : "");
            pthread_mutex_unlock(&a->mu);
        }
        rvt_resp_free(&r);
    }
    return NULL;
}

/* One round: alice submits (201), bob rejects (200).  Returns the
 * submit's status; the reject's failures count as the round failing. */
static int owner_round(const char *doc_path, char *why, size_t whylen)
{
    char path[128];
    rvt_resp r;
    int status;

    rvt_call(srv.port, "POST", doc_path, alice, NULL, NULL, &r);
    status = r.status;
    if (status != 201) {
        snprintf(why, whylen, "submit %d %.120s", r.status,
                 r.body != NULL ? r.body : "");
        rvt_resp_free(&r);
        return status;
    }
    snprintf(path, sizeof(path), "/v1/reviews/%s/reject",
             rvt_field(&r, "review.id"));
    rvt_resp_free(&r);
    rvt_call(srv.port, "POST", path, bob, "{\"comment\":\"again\"}", NULL, &r);
    if (r.status != 200) {
        snprintf(why, whylen, "reject %d %.120s", r.status,
                 r.body != NULL ? r.body : "");
        status = -r.status;
    }
    rvt_resp_free(&r);
    return status;
}

/* Stops and joins the attackers started (each returns after its request
 * in flight, bounded by rvt_call's wait). */
static void stop_attackers(attack *a)
{
    atomic_store(&a->stop, 1);
    testkit_threads_join_all(&a->attackers);
}

/* Teardown of the attackers' case, passed or failed. */
static int end_attack(void **state)
{
    (void)state;
    stop_attackers(&the_attack);
    pthread_mutex_destroy(&the_attack.mu);
    memset(&the_attack, 0, sizeof(the_attack));
    return 0;
}

static void attackers_never_hold_the_owners_submit_lock(void **state)
{
    char doc[24], why[200] = "";
    attack *const a = &the_attack;
    int ok = 0;

    (void)state;
    memset(a, 0, sizeof(*a));
    pthread_mutex_init(&a->mu, NULL);
    assert_int_equal(rvt_create_doc(srv.port, alice, "victim", doc), 0);
    snprintf(a->path, sizeof(a->path), "/v1/documents/%s/submit", doc);
    for (int i = 0; i < ATTACKERS; i++)
        assert_int_equal(testkit_threads_start(&a->attackers, attacker_main,
                                               a),
                         0);
    for (int i = 0; i < ROUNDS; i++)
        if (owner_round(a->path, why, sizeof(why)) == 201)
            ok++;
        else
            fprintf(stderr, "round %d: %s\n", i, why);
    stop_attackers(a);
    TK_EXPECT(ok == ROUNDS,
              "the owner's submit succeeded %d times in %d "
              "under %d attackers (last failure: %s)",
              ok, ROUNDS, ATTACKERS, why);
    TK_EXPECT(atomic_load(&a->other) == 0 && atomic_load(&a->forbidden) > 0,
              "the attackers got 403 %d times and something else %d times "
              "(first: %s)",
              atomic_load(&a->forbidden), atomic_load(&a->other),
              a->first_other);
}

/* Calls reviewd as token, with body (NULL: none), and expects status
 * with the error code (NULL: a success); what says who asks, when. */
static void expect_call(const char *method, const char *path,
                        const char *token, const char *body, int status,
                        const char *code, const char *what)
{
    rvt_resp r;

    rvt_call(srv.port, method, path, token, body, NULL, &r);
    rvt_expect_status(&r, status, code, what);
    rvt_resp_free(&r);
}

/* ---- 403 before 409 LOCK_BUSY ------------------------------------------- */

static void a_held_redis_lock_still_answers_strangers_403(void **state)
{
    char doc[24], rid[24], key[96], path[128];

    (void)state;
    assert_int_equal(rvt_create_pending(srv.port, alice, doc, rid), 0);
    snprintf(key, sizeof(key), "lock:doc:submit:%s", doc);
    freeReplyObject(testkit_redis_cmd(redis_url, "SET %s %s PX 30000", key,
                                      TOKEN_BY_HAND));
    snprintf(path, sizeof(path), "/v1/documents/%s/submit", doc);
    expect_call("POST", path, mallory, NULL, 403, "FORBIDDEN",
                "a stranger's submit while the submit lock is held");
    testkit_forget_lock(redis_url, key);

    /* Four eyes: alice may not decide her own document's review, lock
     * or no lock.  Her token's role is author, so an admin alice. */
    snprintf(key, sizeof(key), "lock:doc:review:%s", rid);
    freeReplyObject(testkit_redis_cmd(redis_url, "SET %s %s PX 30000", key,
                                      TOKEN_BY_HAND));
    {
        char *alice_admin = rvt_token("alice", "admin", 3600);

        snprintf(path, sizeof(path), "/v1/reviews/%s/approve", rid);
        expect_call("POST", path, alice_admin, NULL, 403, "FORBIDDEN",
                    "the author's own approve while the review lock is held");
        free(alice_admin);
    }
    expect_call("POST", path, bob, NULL, 409, "LOCK_BUSY",
                "a reviewer who may decide, while the lock is held");
    testkit_forget_lock(redis_url, key);
    expect_call("POST", path, bob, NULL, 200, NULL,
                "the reviewer once the lock is free");
}

/* ---- 403 before the row lock -------------------------------------------- */

static void a_locked_row_still_answers_strangers_403_at_once(void **state)
{
    char doc[24], sql[160], path[128];
    rvt_resp r;
    int64_t t0;

    (void)state;
    assert_int_equal(rvt_create_doc(srv.port, alice, "locked", doc), 0);
    /* The test's own connection holds the row, as a long submit or edit
     * of the owner would. */
    snprintf(sql, sizeof(sql),
             "BEGIN; SELECT id FROM kh_document WHERE id "
             "= %s FOR UPDATE",
             doc);
    assert_int_equal(rvt_sql(&db, sql, NULL, 0), 0);
    snprintf(path, sizeof(path), "/v1/documents/%s", doc);
    t0 = testkit_now_ms();
    expect_call("PUT", path, mallory, "{\"title\":\"mine\"}", 403, "FORBIDDEN",
                "a stranger's edit of a locked row");
    snprintf(path, sizeof(path), "/v1/documents/%s/submit", doc);
    expect_call("POST", path, mallory, NULL, 403, "FORBIDDEN",
                "a stranger's submit of a locked row");
    /* Under the 3 s statement timeout a wait on the row lock shows. */
    TK_EXPECT(testkit_now_ms() - t0 < 2500,
              "both answered without waiting "
              "for the row lock (took %lld ms)",
              (long long)(testkit_now_ms() - t0));
    assert_int_equal(rvt_sql(&db, "ROLLBACK", NULL, 0), 0);
    snprintf(path, sizeof(path), "/v1/documents/%s", doc);
    rvt_call(srv.port, "PUT", path, alice, "{\"title\":\"still mine\"}", NULL,
             &r);
    rvt_expect_status(&r, 200, NULL, "the owner's edit once the row is free");
    TK_EXPECT(r.json != NULL
                  && json_integer_value(json_object_get(r.json, "version"))
                         == 2,
              "the owner's edit is the only one: version 2");
    rvt_resp_free(&r);
}

/* Four eyes before the row locks: with the review's and the document's
 * rows held by another transaction (as a long decision by a rightful
 * reviewer would hold them), the document's own author and submitter,
 * signed in as a reviewer (approve) or an admin (reject), is 403 at once.
 * Were four eyes checked only under the row lock (the decision's
 * statement refuses her without locking, then reads both rows FOR
 * UPDATE to say why), she would wait for the rows and answer 503 at the
 * 3 s statement timeout instead. */
static void a_locked_review_still_answers_the_author_403_at_once(void **state)
{
    char doc[24], rid[24], sql[256], path[128];
    char *alice_reviewer = NULL, *alice_admin = NULL;
    int64_t t0;

    (void)state;
    assert_int_equal(rvt_create_pending(srv.port, alice, doc, rid), 0);
    alice_reviewer = rvt_token("alice", "reviewer", 3600);
    alice_admin = rvt_token("alice", "admin", 3600);
    assert_non_null(alice_reviewer);
    assert_non_null(alice_admin);
    snprintf(sql, sizeof(sql),
             "BEGIN; SELECT r.id FROM kh_document_review r JOIN kh_document "
             "d ON d.id = r.document_id WHERE r.id = %s FOR UPDATE OF r, d",
             rid);
    assert_int_equal(rvt_sql(&db, sql, NULL, 0), 0);
    snprintf(path, sizeof(path), "/v1/reviews/%s/approve", rid);
    t0 = testkit_now_ms();
    expect_call(
        "POST", path, alice_reviewer, NULL, 403, "FORBIDDEN",
        "the author's own approve (as a reviewer) while the rows are locked");
    snprintf(path, sizeof(path), "/v1/reviews/%s/reject", rid);
    expect_call(
        "POST", path, alice_admin, "{\"comment\":\"no\"}", 403, "FORBIDDEN",
        "the author's own reject (as an admin) while the rows are locked");
    /* Under the 3 s statement timeout a wait on the row lock shows. */
    TK_EXPECT(testkit_now_ms() - t0 < 2500,
              "both answered without waiting "
              "for the row locks (took %lld ms)",
              (long long)(testkit_now_ms() - t0));
    free(alice_reviewer);
    free(alice_admin);
    assert_int_equal(rvt_sql(&db, "ROLLBACK", NULL, 0), 0);
    /* The review was decidable all along: only four eyes stood in the
     * way, and a reviewer who is not the author decides it. */
    snprintf(path, sizeof(path), "/v1/reviews/%s/approve", rid);
    expect_call("POST", path, bob, NULL, 200, NULL,
                "another reviewer once the rows are free");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(attackers_never_hold_the_owners_submit_lock,
                                  end_attack),
        cmocka_unit_test(a_held_redis_lock_still_answers_strangers_403),
        cmocka_unit_test(a_locked_row_still_answers_strangers_403_at_once),
        cmocka_unit_test(a_locked_review_still_answers_the_author_403_at_once),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
