/*
 * test_key_namespace.c: the keys the library derives from a lock name are
 * out of reach of every lock name, and an upgrade keeps the fences.
 *
 * A lock K keeps its fence counter in "#dlock:fence:{K}" (fence.h); names
 * that begin with "#dlock:" or with a pattern's "{sem:", "{rw:", ... are
 * refused.  Before, the counter was "{K}:fence", itself a valid lock name:
 * lock "{K}:fence" was busy for ever once K had been granted, and K could
 * not be granted ("ERR value is not an integer") while "{K}:fence" was
 * held.  Now the two are independent locks.  The old counter is still read
 * (never written): a deployment's counter under the old name, even ahead
 * of the clock, is the floor of the next fence.
 */
#include "itkit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void a_fence_counter_name_is_an_independent_lock(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    char key[TESTKIT_KEY_MAX], counter[TESTKIT_KEY_MAX + 16];
    dlock_lock *x, *named_like_counter, *x_again;

    (void)state;
    testkit_key(key, "ns_x");
    snprintf(counter, sizeof(counter), "{%s}:fence", key);
    x = itkit_acquire(c, key, NULL);
    TK_EXPECT_ERR(dlock_release(x), DLOCK_OK, c, "release x");
    named_like_counter = itkit_acquire(c, counter, NULL);
    TK_EXPECT(dlock_lock_fence(named_like_counter) > 0,
              "lock '{x}:fence' "
              "is granted after x was, with a fence of its own");
    x_again = itkit_acquire(c, key, NULL);
    TK_EXPECT(dlock_lock_fence(x_again) > 0, "x is granted while "
                                             "'{x}:fence' is held");
    TK_EXPECT_ERR(dlock_release(x_again), DLOCK_OK, c, "release x");
    TK_EXPECT_ERR(dlock_release(named_like_counter), DLOCK_OK, c,
                  "release "
                  "'{x}:fence'");
    testkit_forget_lock(url, key);
    testkit_forget_lock(url, counter);
    dlock_client_free(c);
}

static void derived_names_are_refused(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    const char *names[] = {
        "#dlock:fence:{x}", "#dlock:anything", "{sem:s}:holders",
        "{sem:s}:fence",    "{rw:r}:writer",   "{leader:l}",
        "{leader:l}:term",  "{rl:r}",          "{once:o}",
        "{idem:i}",
    };
    const char *allowed[] = {"{semx}:a", "sem:s", "{x}#dlock:", "dlock:x"};

    (void)state;
    for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
        dlock_lock *l = NULL;
        dlock_lock_info info;

        TK_EXPECT_ERR(dlock_acquire(c, names[i], NULL, &l), DLOCK_INVALID, c,
                      names[i]);
        TK_EXPECT(l == NULL
                      && strstr(dlock_client_errmsg(c), "derives") != NULL,
                  "no lock, and the message says why: %s",
                  dlock_client_errmsg(c));
        TK_EXPECT_ERR(dlock_inspect(c, names[i], &info), DLOCK_INVALID, c,
                      "inspecting a derived name");
    }
    for (size_t i = 0; i < sizeof(allowed) / sizeof(*allowed); i++) {
        char key[TESTKIT_KEY_MAX];
        dlock_lock *l;

        snprintf(key, sizeof(key), "%s:%d", allowed[i], (int)getpid());
        l = itkit_acquire(c, key, NULL);
        TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, c, key);
        testkit_forget_lock(url, key);
        freeReplyObject(testkit_redis_cmd(url, "DEL #dlock:fence:%s", key));
    }
    dlock_client_free(c);
}

static void legacy_counter_is_the_floor_after_an_upgrade(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    char key[TESTKIT_KEY_MAX];
    /* Above any server clock in microseconds (year 2255). */
    const unsigned long long legacy = 9007199254740992ull;
    dlock_lock_info info;
    redisReply *r;

    (void)state;
    testkit_key(key, "ns_upgrade");
    r = testkit_redis_cmd(url, "SET {%s}:fence %llu", key, legacy);
    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS,
              "an old version's "
              "counter, ahead of the clock");
    freeReplyObject(r);
    TK_EXPECT(dlock_inspect(c, key, &info) == DLOCK_OK
                  && info.last_fence == legacy,
              "inspect reports the old counter, "
              "%llu, got %llu",
              legacy, (unsigned long long)info.last_fence);
    for (unsigned long long i = 1; i <= 2; i++) {
        dlock_lock *l = itkit_acquire(c, key, NULL);

        TK_EXPECT(dlock_lock_fence(l) == legacy + i,
                  "grant %llu after the "
                  "upgrade has fence %llu, got %llu",
                  i, legacy + i, (unsigned long long)dlock_lock_fence(l));
        TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, c, "release");
    }
    TK_EXPECT(testkit_redis_int(url, "PTTL #dlock:fence:{%s}", key)
                  > (long long)29 * 86400 * 1000,
              "the new counter expires, "
              "30 days after the lock's TTL");
    r = testkit_redis_cmd(url, "GET {%s}:fence", key);
    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STRING
                  && strtoull(r->str, NULL, 10) == legacy,
              "the old counter is "
              "never written");
    freeReplyObject(r);
    testkit_forget_lock(url, key);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_fence_counter_name_is_an_independent_lock),
        cmocka_unit_test(derived_names_are_refused),
        cmocka_unit_test(legacy_counter_is_the_floor_after_an_upgrade),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
