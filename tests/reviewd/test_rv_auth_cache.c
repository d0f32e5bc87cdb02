/*
 * test_rv_auth_cache.c: rv_auth_verify's per-thread cache of verified
 * tokens answers exactly what the full check would.
 *
 * The cache (rv_auth.c) lets a token that passed every check skip the
 * signature and JSON work the next time the same thread sees the same
 * bytes under the same secret.  What it must never do is widen what is
 * accepted: so each test first makes a token pass (and so be cached) and
 * then shows that whatever would refuse it in full still refuses it: a
 * later clock past exp or before nbf, another secret, one changed byte.
 * The last tests fill the cache beyond its size and run it from several
 * threads, checking every answer's identity.
 *
 * The threaded case keeps its tokens, arguments and threads in static
 * storage (the_verifiers), and its teardown joins whatever threads a
 * failed assertion (a longjmp out of the case) left running before it
 * frees the tokens they read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jwt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/rv_auth.h"

#define SECRET "cache-secret-0123456789abcdefghi"
#define OTHER "other-secret-0123456789abcdefghi"
#define NOW ((int64_t)1800000000)

/* A token with these claims, signed HS256 with key. */
static char *sign(const char *claims, const char *key)
{
    jwt_t *jwt = NULL;
    char *tok;

    assert_int_equal(jwt_new(&jwt), 0);
    assert_int_equal(jwt_add_grants_json(jwt, claims), 0);
    assert_int_equal(jwt_set_alg(jwt, JWT_ALG_HS256,
                                 (const unsigned char *)key, (int)strlen(key)),
                     0);
    tok = jwt_encode_str(jwt);
    assert_non_null(tok);
    jwt_free(jwt);
    return tok;
}

/* rv_auth_verify of "Bearer tok" under key at now. */
static int verify_at(const char *tok, const char *key, int64_t now,
                     rv_identity *who, char *detail, size_t detaillen)
{
    char header[2048];

    /* No leeway, so the boundaries below are exactly exp and nbf. */
    const rv_auth_policy policy = {(const unsigned char *)key, strlen(key), 0,
                                   86400};

    snprintf(header, sizeof(header), "Bearer %s", tok);
    return rv_auth_verify(header, &policy, now, who, detail, detaillen);
}

static void a_cached_token_expires_when_its_exp_passes(void **state)
{
    char *tok = rv_auth_issue((const unsigned char *)SECRET, strlen(SECRET),
                              "alice", "author", NOW, 60);
    rv_identity who;
    char detail[160];

    (void)state;
    assert_int_equal(verify_at(tok, SECRET, NOW, &who, detail, 160), 0);
    assert_int_equal(verify_at(tok, SECRET, NOW + 59, &who, detail, 160), 0);
    assert_string_equal(who.sub, "alice");
    assert_int_equal(verify_at(tok, SECRET, NOW + 60, &who, detail, 160), -1);
    assert_string_equal(detail, "the token has expired");
    assert_string_equal(who.sub, "");
    assert_int_equal(who.role, RV_ROLE_NONE);
    free(tok);
}

static void a_cached_token_is_refused_again_before_its_nbf(void **state)
{
    char *tok = sign("{\"sub\":\"carol\",\"role\":\"admin\","
                     "\"exp\":1800000100,\"nbf\":1800000010}",
                     SECRET);
    rv_identity who;
    char detail[160];

    (void)state;
    assert_int_equal(verify_at(tok, SECRET, NOW, &who, detail, 160), -1);
    assert_int_equal(verify_at(tok, SECRET, NOW + 10, &who, detail, 160), 0);
    assert_int_equal(who.role, RV_ROLE_ADMIN);
    /* Cached now; a clock that goes back before nbf still refuses it. */
    assert_int_equal(verify_at(tok, SECRET, NOW + 9, &who, detail, 160), -1);
    assert_string_equal(detail, "the token is not valid yet (\"nbf\")");
    assert_string_equal(who.sub, "");
    free(tok);
}

static void a_cached_token_does_not_verify_under_another_secret(void **state)
{
    char *tok = rv_auth_issue((const unsigned char *)SECRET, strlen(SECRET),
                              "bob", "reviewer", NOW, 60);
    rv_identity who;
    char detail[160];

    (void)state;
    assert_int_equal(verify_at(tok, SECRET, NOW, &who, detail, 160), 0);
    assert_int_equal(verify_at(tok, OTHER, NOW, &who, detail, 160), -1);
    assert_string_equal(who.sub, "");
    /* Rebinding to OTHER dropped the entry; it verifies in full again. */
    assert_int_equal(verify_at(tok, SECRET, NOW, &who, detail, 160), 0);
    assert_string_equal(who.sub, "bob");
    free(tok);
}

static void one_changed_byte_of_a_cached_token_is_refused(void **state)
{
    char *tok = rv_auth_issue((const unsigned char *)SECRET, strlen(SECRET),
                              "dave", "author", NOW, 60);
    const size_t len = strlen(tok);
    rv_identity who;
    char detail[160];

    (void)state;
    assert_int_equal(verify_at(tok, SECRET, NOW, &who, detail, 160), 0);
    /* Not the last character: two of its bits are padding, which a
     * decoder may ignore, so changing it may leave the same signature. */
    for (size_t i = 0; i + 1 < len; i++) {
        const char was = tok[i];

        if (was == '.')
            continue;
        tok[i] = was == 'A' ? 'B' : 'A';
        assert_int_equal(verify_at(tok, SECRET, NOW, &who, detail, 160), -1);
        assert_string_equal(who.sub, "");
        tok[i] = was;
    }
    /* A shorter or longer token is not the cached one either. */
    tok[len - 1] = '\0';
    assert_int_equal(verify_at(tok, SECRET, NOW, &who, detail, 160), -1);
    free(tok);
}

/* More tokens than the cache holds, each verified twice: every answer
 * names its own token's subject. */
static void many_tokens_each_verify_as_their_own_subject(void **state)
{
    enum { N = 100 };
    char *toks[N];
    char sub[32];
    rv_identity who;
    char detail[160];

    (void)state;
    for (int i = 0; i < N; i++) {
        snprintf(sub, sizeof(sub), "user-%d", i);
        toks[i] = rv_auth_issue((const unsigned char *)SECRET, strlen(SECRET),
                                sub, "author", NOW, 60);
        assert_non_null(toks[i]);
    }
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            snprintf(sub, sizeof(sub), "user-%d", i);
            assert_int_equal(verify_at(toks[i], SECRET, NOW, &who, detail,
                                       160),
                             0);
            assert_string_equal(who.sub, sub);
        }
    }
    for (int i = 0; i < N; i++)
        free(toks[i]);
}

typedef struct thread_arg {
    const char *tok[2];
    const char *sub[2];
    int failures;
} thread_arg;

static void *verify_many(void *p)
{
    thread_arg *a = p;
    rv_identity who;
    char detail[160];

    for (int i = 0; i < 2000; i++) {
        const int k = i % 2;

        if (verify_at(a->tok[k], SECRET, NOW, &who, detail, 160) != 0
            || strcmp(who.sub, a->sub[k]) != 0)
            a->failures++;
    }
    return NULL;
}

enum { VERIFIERS = 4 };

/* The threaded case's state, in static storage: a failed assertion
 * leaves the case while its threads still read the tokens and write
 * their counts. */
typedef struct verifiers {
    char *alice, *bob;
    pthread_t t[VERIFIERS];
    thread_arg a[VERIFIERS];
    int started; /* threads started */
    int joined;  /* threads joined */
} verifiers;

static verifiers the_verifiers;

/* Teardown of the threaded case, passed or failed: joins the threads
 * still running (each returns after its 2,000 checks) and frees the
 * tokens. */
static int end_verifiers(void **state)
{
    verifiers *v = &the_verifiers;

    (void)state;
    for (int i = v->joined; i < v->started; i++)
        pthread_join(v->t[i], NULL);
    free(v->alice);
    free(v->bob);
    memset(v, 0, sizeof(*v));
    return 0;
}

static void threads_verifying_the_same_tokens_see_their_identities(
    void **state)
{
    verifiers *v = &the_verifiers;

    (void)state;
    memset(v, 0, sizeof(*v));
    v->alice = rv_auth_issue((const unsigned char *)SECRET, strlen(SECRET),
                             "alice", "author", NOW, 60);
    v->bob = rv_auth_issue((const unsigned char *)SECRET, strlen(SECRET),
                           "bob", "reviewer", NOW, 60);
    for (int i = 0; i < VERIFIERS; i++) {
        v->a[i] = (thread_arg){{v->alice, v->bob}, {"alice", "bob"}, 0};
        assert_int_equal(pthread_create(&v->t[i], NULL, verify_many, &v->a[i]),
                         0);
        v->started = i + 1;
    }
    for (int i = 0; i < VERIFIERS; i++) {
        const int joined = pthread_join(v->t[i], NULL);

        v->joined = i + 1;
        assert_int_equal(joined, 0);
        assert_int_equal(v->a[i].failures, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_cached_token_expires_when_its_exp_passes),
        cmocka_unit_test(a_cached_token_is_refused_again_before_its_nbf),
        cmocka_unit_test(a_cached_token_does_not_verify_under_another_secret),
        cmocka_unit_test(one_changed_byte_of_a_cached_token_is_refused),
        cmocka_unit_test(many_tokens_each_verify_as_their_own_subject),
        cmocka_unit_test_teardown(
            threads_verifying_the_same_tokens_see_their_identities,
            end_verifiers),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
