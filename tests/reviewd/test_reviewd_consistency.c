/*
 * test_reviewd_consistency.c: answers that must agree with themselves,
 * locks that must not collide, and token times.
 *
 *   - GET ?include=content shows one committed state: under a storm of
 *     edits whose text names the version it makes ("v7" is version 7's
 *     text), no answer pairs one version's row with another's text
 *     (before: the row and the text were two statements, two snapshots);
 *   - an Idempotency-Key's advisory lock is not the 32-bit hashtext of its
 *     scope in the relay's class id any more: a session holding that old
 *     key (which any colliding key, or the relay, would hold) does not
 *     turn a keyed POST away with 409 (test_reviewd_locks.c sees the
 *     new key, a single bigint with the top bit set, while it is held);
 *   - tokens on the wire: an nbf 1 s ahead (an issuer's clock ahead of
 *     ours) is accepted, an exp of 1e300 is refused.
 *
 * The storm's readers live in static storage (the_reads), and end_reads,
 * that case's teardown, stops and joins them whether it passed or failed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jwt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rvt_kit.h"
#include "testkit.h"
#include "testkit_threads.h"

#define READERS 3
#define EDITS 120
#define EDITS_MAX 3000

static rvt_db db;
static rvt_server srv;
static char *alice;
static const rvt_person people[] = {{&alice, "alice", "author"},
                                    {NULL, NULL, NULL}};

static int setup(void **state)
{
    (void)state;
    if (rvt_fixture_start(&db, &srv, "consistency", NULL, NULL, 1) != 0)
        return -1;
    return rvt_people_mint(people);
}

static int teardown(void **state)
{
    (void)state;
    return rvt_fixture_end(&db, &srv, people);
}

/* ---- one snapshot --------------------------------------------------------- */

typedef struct reads {
    char path[128];
    atomic_int stop;
    atomic_int reads;
    atomic_int mixed;  /* text of another version than the row's */
    atomic_int failed; /* not a 200 */
    char example[200];
    pthread_mutex_t mu;
    testkit_threads readers;
} reads;

/* The readers' state and threads, in static storage: a failed assertion
 * leaves the case by longjmp while they still read, and the group's
 * teardown would stop the server under them; end_reads stops and joins
 * them first. */
static reads the_reads;

/* Stops and joins the readers started (each returns after its request in
 * flight, bounded by rvt_call's wait). */
static void stop_readers(reads *s)
{
    atomic_store(&s->stop, 1);
    testkit_threads_join_all(&s->readers);
}

/* Teardown of the edit storm's case, passed or failed. */
static int end_reads(void **state)
{
    (void)state;
    stop_readers(&the_reads);
    pthread_mutex_destroy(&the_reads.mu);
    memset(&the_reads, 0, sizeof(the_reads));
    return 0;
}

static void note(reads *s, const char *what, const rvt_resp *r)
{
    pthread_mutex_lock(&s->mu);
    if (s->example[0] == '\0') {
        snprintf(s->example, sizeof(s->example), "%s: %d %.150s", what,
                 r->status, r->body != NULL ? r->body : "");
    }
    pthread_mutex_unlock(&s->mu);
}

static void *reader_main(void *arg)
{
    reads *s = arg;
    rvt_resp r;

    while (!atomic_load(&s->stop)) {
        const char *content;
        char want[32];

        rvt_call(srv.port, "GET", s->path, alice, NULL, NULL, &r);
        content = rvt_field(&r, "content");
        if (r.status != 200 || content == NULL) {
            atomic_fetch_add(&s->failed, 1);
            note(s, "failed", &r);
        } else {
            snprintf(want, sizeof(want), "v%lld",
                     (long long)json_integer_value(
                         json_object_get(r.json, "version")));
            if (strcmp(content, want) != 0) {
                atomic_fetch_add(&s->mixed, 1);
                note(s, "mixed", &r);
            }
        }
        atomic_fetch_add(&s->reads, 1);
        rvt_resp_free(&r);
    }
    return NULL;
}

static void include_content_reads_one_version_under_an_edit_storm(void **state)
{
    char doc[24], path[128], body[64];
    reads *const s = &the_reads;
    rvt_resp r;
    int edits = 0, attempts = 0, unavailable = 0;
    char refused[200] = "";

    (void)state;
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    rvt_call(srv.port, "POST", "/v1/documents", alice,
             "{\"title\":\"storm\",\"content\":\"v1\"}", NULL, &r);
    rvt_expect_status(&r, 201, NULL, "create");
    snprintf(doc, sizeof(doc), "%s", rvt_field(&r, "id"));
    rvt_resp_free(&r);
    snprintf(s->path, sizeof(s->path), "/v1/documents/%s?include=content",
             doc);
    for (int i = 0; i < READERS; i++)
        assert_int_equal(testkit_threads_start(&s->readers, reader_main, s),
                         0);
    snprintf(path, sizeof(path), "/v1/documents/%s", doc);
    /* At least EDITS edits, and on until the readers have read 100 times
     * while edits run (bounded: a quiet machine edits faster than a loaded
     * one reads, and the count of edits is not what is checked). */
    for (int v = 2; v <= EDITS_MAX + 1; v++) {
        snprintf(body, sizeof(body), "{\"content\":\"v%d\"}", v);
        rvt_call(srv.port, "PUT", path, alice, body, NULL, &r);
        edits += r.status == 200;
        /* A 503 (the request's budget ran out on a loaded machine) wrote
         * nothing, which is what it says; any other refusal is a failure. */
        unavailable += r.status == 503;
        if (r.status != 200 && r.status != 503 && refused[0] == '\0')
            snprintf(refused, sizeof(refused), "%d %.150s", r.status,
                     r.body != NULL ? r.body : "");
        attempts++;
        rvt_resp_free(&r);
        if (attempts >= EDITS && atomic_load(&s->reads) >= 100)
            break;
    }
    stop_readers(s);
    if (unavailable > 0)
        printf("# %d of %d edits answered 503 (the request budget)\n",
               unavailable, attempts);
    TK_EXPECT(edits + unavailable == attempts && edits >= EDITS / 2,
              "every edit succeeded or was refused as unavailable (%d of %d "
              "succeeded, %d unavailable; first other refusal: %s)",
              edits, attempts, unavailable, refused);
    TK_EXPECT(atomic_load(&s->reads) >= READERS, "the readers read %d times",
              atomic_load(&s->reads));
    TK_EXPECT(atomic_load(&s->mixed) == 0 && atomic_load(&s->failed) == 0,
              "%d of %d reads mixed two versions, %d failed (first: %s)",
              atomic_load(&s->mixed), atomic_load(&s->reads),
              atomic_load(&s->failed), s->example);
}

/* ---- the idempotency lock's key space ------------------------------------ */

static void old_key_space_collisions_do_not_refuse_a_keyed_post(void **state)
{
    char doc[24], path[128], sql[512];
    rvt_resp r;

    (void)state;
    assert_int_equal(rvt_create_doc(srv.port, alice, "idem-space", doc), 0);
    snprintf(path, sizeof(path), "/v1/documents/%s/submit", doc);
    /* The key the old scheme gave this request's scope, held by another
     * session: what a colliding user key, or the relay, would hold. */
    snprintf(sql, sizeof(sql),
             "SELECT pg_advisory_lock(1263028548, "
             "hashtext('alice' || chr(10) || 'POST' || chr(10) || '%s' || "
             "chr(10) || 'space-key'))",
             path);
    assert_int_equal(rvt_sql(&db, sql, NULL, 0), 0);
    rvt_call(srv.port, "POST", path, alice, NULL, "space-key", &r);
    rvt_expect_status(&r, 201, NULL,
                      "a keyed submit whose old 32-bit key is held");
    rvt_resp_free(&r);
    assert_int_equal(rvt_sql(&db, "SELECT pg_advisory_unlock_all()", NULL, 0),
                     0);
}

/* ---- token times on the wire --------------------------------------------- */

static char *token_with_times(const char *times)
{
    char claims[256];
    jwt_t *jwt = NULL;
    char *tok = NULL;

    snprintf(claims, sizeof(claims),
             "{\"sub\":\"alice\",\"role\":\"author\",%s}", times);
    if (jwt_new(&jwt) == 0 && jwt_add_grants_json(jwt, claims) == 0
        && jwt_set_alg(jwt, JWT_ALG_HS256, (const unsigned char *)RVT_SECRET,
                       (int)strlen(RVT_SECRET))
               == 0)
        tok = jwt_encode_str(jwt);
    jwt_free(jwt);
    return tok;
}

static void tokens_allow_clock_skew_but_not_forever(void **state)
{
    char times[128], doc[24], path[64];
    char *tok;
    rvt_resp r;

    (void)state;
    assert_int_equal(rvt_create_doc(srv.port, alice, "times", doc), 0);
    snprintf(path, sizeof(path), "/v1/documents/%s", doc);
    snprintf(times, sizeof(times), "\"exp\":%lld,\"nbf\":%lld",
             (long long)time(NULL) + 600, (long long)time(NULL) + 1);
    tok = token_with_times(times);
    assert_non_null(tok);
    rvt_call(srv.port, "GET", path, tok, NULL, NULL, &r);
    rvt_expect_status(&r, 200, NULL, "a token whose nbf is 1 s ahead");
    rvt_resp_free(&r);
    free(tok);
    tok = token_with_times("\"exp\":1e300");
    assert_non_null(tok);
    rvt_call(srv.port, "GET", path, tok, NULL, NULL, &r);
    rvt_expect_status(&r, 401, NULL, "a token with exp 1e300");
    rvt_resp_free(&r);
    free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(
            include_content_reads_one_version_under_an_edit_storm, end_reads),
        cmocka_unit_test(old_key_space_collisions_do_not_refuse_a_keyed_post),
        cmocka_unit_test(tokens_allow_clock_skew_but_not_forever),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
