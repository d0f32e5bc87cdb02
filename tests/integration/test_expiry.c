/*
 * test_expiry.c: what a TTL means for holders, old and new.
 *
 * A lock that is never released must free itself when its TTL runs out,
 * and the holder that let it expire must not be able to hurt the next
 * holder: its release deletes nothing and says DLOCK_LOST, its extend
 * extends nothing and says DLOCK_LOST.  Extending a lock that is still ours
 * must grow both our local validity and the key's PTTL in Redis.
 *
 * TTLs are 100 ms so each case is short; the server's view is read with a
 * separate connection (testkit_redis_cmd), not through the library.
 */
#include "itkit.h"

#include <string.h>

typedef struct key_on {
    const char *url;
    const char *key;
} key_on;

static int key_is_gone(void *arg)
{
    const key_on *k = arg;

    return testkit_redis_int(k->url, "EXISTS %s", k->key) == 0;
}

/* Waits (bounded) until Redis itself has dropped the key. */
static void wait_for_expiry(const char *url, const char *key)
{
    key_on k = {url, key};

    TK_EXPECT(testkit_wait_until(key_is_gone, &k, 2000),
              "%s expires in "
              "Redis within 2 s of a 100 ms TTL",
              key);
}

static void expired_lock_can_be_taken_by_another_client(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *a = itkit_client(url, NULL), *b = itkit_client(url, NULL);
    dlock_acquire_opts short_ttl = itkit_acquire_opts(100, 0);
    dlock_acquire_opts try_once = itkit_acquire_opts(5000, 0);
    dlock_acquire_opts waiting = itkit_acquire_opts(5000, 3000);
    char key[TESTKIT_KEY_MAX];
    dlock_lock *held, *next = NULL;
    int64_t asked_at, waited;

    (void)state;
    testkit_key(key, "expiry_frees");
    /* The TTL starts when Redis runs the SET, which is after we ask and
     * before the reply arrives (late, on a loaded machine): so measure
     * from the asking. */
    asked_at = testkit_now_ms();
    held = itkit_acquire(a, key, &short_ttl);
    TK_EXPECT_ERR(dlock_acquire(b, key, &try_once, &next), DLOCK_BUSY, b,
                  "a second client's try while the 100 ms lock runs");
    TK_EXPECT_ERR(dlock_acquire(b, key, &waiting, &next), DLOCK_OK, b,
                  "a second client waiting up to 3 s for the unreleased lock");
    waited = testkit_now_ms() - asked_at;
    TK_EXPECT(waited >= 95,
              "the second client got the key only once the "
              "first one's 100 ms ran out, got it after %lld ms",
              (long long)waited);
    TK_EXPECT(dlock_lock_fence(next) > dlock_lock_fence(held),
              "the new "
              "grant has a higher fence (%llu after %llu)",
              (unsigned long long)dlock_lock_fence(next),
              (unsigned long long)dlock_lock_fence(held));
    dlock_lock_free(held);
    TK_EXPECT_ERR(dlock_release(next), DLOCK_OK, b,
                  "the new holder's "
                  "release");
    testkit_forget_lock(url, key);
    dlock_client_free(a);
    dlock_client_free(b);
}

static void release_after_expiry_is_lost_and_keeps_the_new_holder(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *a = itkit_client(url, NULL), *b = itkit_client(url, NULL);
    dlock_acquire_opts short_ttl = itkit_acquire_opts(100, 0);
    char key[TESTKIT_KEY_MAX];
    char new_token[DLOCK_TOKEN_LEN + 1];
    dlock_lock *old, *current;
    dlock_lock_info info;

    (void)state;
    testkit_key(key, "expiry_release");
    old = itkit_acquire(a, key, &short_ttl);
    wait_for_expiry(url, key);
    current = itkit_acquire(b, key, NULL);
    snprintf(new_token, sizeof(new_token), "%s", dlock_lock_token(current));
    TK_EXPECT_ERR(dlock_release(old), DLOCK_LOST, a,
                  "releasing a lock "
                  "that expired and was taken by another client");
    TK_EXPECT(dlock_inspect(b, key, &info) == DLOCK_OK, "inspect works");
    TK_EXPECT(info.held && strcmp(info.token, new_token) == 0,
              "the new holder still holds the key (token %s), found held=%d "
              "token %s",
              new_token, info.held, info.token);
    TK_EXPECT(info.ttl_ms > 5000,
              "the new holder's TTL is untouched, "
              "found %lld ms",
              (long long)info.ttl_ms);
    TK_EXPECT_ERR(dlock_release(current), DLOCK_OK, b,
                  "the new holder's "
                  "release");
    testkit_forget_lock(url, key);
    dlock_client_free(a);
    dlock_client_free(b);
}

static void extend_grows_validity_and_pttl(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    dlock_acquire_opts one_second = itkit_acquire_opts(1000, 0);
    char key[TESTKIT_KEY_MAX];
    dlock_lock *l;
    int64_t valid_before, valid_after;
    long long pttl_before, pttl_after;

    (void)state;
    testkit_key(key, "expiry_extend");
    l = itkit_acquire(c, key, &one_second);
    valid_before = dlock_lock_valid_ms(l);
    pttl_before = testkit_redis_int(url, "PTTL %s", key);
    TK_EXPECT(valid_before > 0 && valid_before <= 1000,
              "a 1 s lock is valid "
              "for at most 1 s, got %lld ms",
              (long long)valid_before);
    TK_EXPECT(pttl_before > 0 && pttl_before <= 1000,
              "its PTTL is at most "
              "1000 ms, got %lld",
              pttl_before);
    TK_EXPECT_ERR(dlock_extend(l, 5000), DLOCK_OK, c, "extending to 5 s");
    valid_after = dlock_lock_valid_ms(l);
    pttl_after = testkit_redis_int(url, "PTTL %s", key);
    TK_EXPECT(valid_after > 4000 && valid_after > valid_before,
              "extend to "
              "5 s makes the lock valid for over 4 s, got %lld ms (was %lld)",
              (long long)valid_after, (long long)valid_before);
    TK_EXPECT(pttl_after > 4000 && pttl_after <= 5000,
              "extend to 5 s sets "
              "the key's PTTL to about 5000, got %lld (was %lld)",
              pttl_after, pttl_before);
    TK_EXPECT_ERR(dlock_extend(l, 0), DLOCK_OK, c,
                  "extending by the "
                  "current TTL (0)");
    pttl_after = testkit_redis_int(url, "PTTL %s", key);
    TK_EXPECT(pttl_after > 4000,
              "extend(0) re-arms the last TTL, 5 s, got "
              "PTTL %lld",
              pttl_after);
    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, c,
                  "releasing the extended "
                  "lock");
    testkit_forget_lock(url, key);
    dlock_client_free(c);
}

static void extend_of_a_lost_lock_is_lost_and_touches_nothing(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *a = itkit_client(url, NULL), *b = itkit_client(url, NULL);
    dlock_acquire_opts short_ttl = itkit_acquire_opts(100, 0);
    dlock_acquire_opts two_seconds = itkit_acquire_opts(2000, 0);
    char key[TESTKIT_KEY_MAX];
    dlock_lock *old, *current;
    long long pttl;

    (void)state;
    testkit_key(key, "expiry_extend_lost");
    old = itkit_acquire(a, key, &short_ttl);
    wait_for_expiry(url, key);
    TK_EXPECT(dlock_lock_valid_ms(old) == 0,
              "an expired lock has no "
              "validity left, got %lld ms",
              (long long)dlock_lock_valid_ms(old));
    current = itkit_acquire(b, key, &two_seconds);
    TK_EXPECT_ERR(dlock_extend(old, 60000), DLOCK_LOST, a,
                  "extending a lock "
                  "that expired and was taken");
    TK_EXPECT(dlock_lock_lost(old) == 1, "a failed extend marks the lock "
                                         "lost");
    pttl = testkit_redis_int(url, "PTTL %s", key);
    TK_EXPECT(pttl > 0 && pttl <= 2000,
              "the new holder's 2 s TTL was not "
              "extended to 60 s by the old holder, PTTL %lld",
              pttl);
    TK_EXPECT_ERR(dlock_extend(old, 60000), DLOCK_STATE, a,
                  "extending a "
                  "lock already known lost");
    TK_EXPECT_ERR(dlock_release(old), DLOCK_LOST, a,
                  "releasing the lost "
                  "lock");
    TK_EXPECT_ERR(dlock_release(current), DLOCK_OK, b,
                  "the new holder's "
                  "release");
    testkit_forget_lock(url, key);
    dlock_client_free(a);
    dlock_client_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(expired_lock_can_be_taken_by_another_client),
        cmocka_unit_test(
            release_after_expiry_is_lost_and_keeps_the_new_holder),
        cmocka_unit_test(extend_grows_validity_and_pttl),
        cmocka_unit_test(extend_of_a_lost_lock_is_lost_and_touches_nothing),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
