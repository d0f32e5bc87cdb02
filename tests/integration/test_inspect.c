/*
 * test_inspect.c: dlock_inspect reports what Redis holds for a lock name.
 *
 * `dlock status` and operators rely on it, so each field is checked in each
 * state: a name never used (nothing), a held lock (held, its TTL, its token,
 * the last fence, equal to the holder's), a released lock (free, but the
 * last fence is kept: fences outlive locks), and a key set without TTL by
 * someone else (ttl -1).
 */
#include "itkit.h"

#include <string.h>

static void inspect_reports_free_held_and_released_states(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    dlock_acquire_opts o = itkit_acquire_opts(5000, 0);
    char key[TESTKIT_KEY_MAX], token[DLOCK_TOKEN_LEN + 1];
    dlock_lock_info info;
    dlock_lock *l;
    uint64_t fence;

    (void)state;
    testkit_key(key, "inspect");
    TK_EXPECT_ERR(dlock_inspect(c, key, &info), DLOCK_OK, c,
                  "inspect of a "
                  "name never used");
    TK_EXPECT(!info.held && info.ttl_ms == 0 && info.last_fence == 0
                  && info.token[0] == '\0',
              "a name never used: not held, ttl 0, "
              "fence 0, no token; got held=%d ttl=%lld fence=%llu token=%s",
              info.held, (long long)info.ttl_ms,
              (unsigned long long)info.last_fence, info.token);

    l = itkit_acquire(c, key, &o);
    fence = dlock_lock_fence(l);
    snprintf(token, sizeof(token), "%s", dlock_lock_token(l));
    TK_EXPECT_ERR(dlock_inspect(c, key, &info), DLOCK_OK, c,
                  "inspect of a "
                  "held lock");
    TK_EXPECT(info.held, "a held lock shows held");
    TK_EXPECT(info.ttl_ms > 4000 && info.ttl_ms <= 5000,
              "its TTL is about "
              "5000 ms, got %lld",
              (long long)info.ttl_ms);
    TK_EXPECT(info.last_fence == fence,
              "last_fence is the holder's fence "
              "%llu, got %llu",
              (unsigned long long)fence, (unsigned long long)info.last_fence);
    TK_EXPECT(strcmp(info.token, token) == 0,
              "token is the holder's %s, got "
              "%s",
              token, info.token);

    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, c, "the release");
    TK_EXPECT_ERR(dlock_inspect(c, key, &info), DLOCK_OK, c,
                  "inspect of a "
                  "released lock");
    TK_EXPECT(!info.held && info.ttl_ms == 0 && info.token[0] == '\0',
              "a released lock is free: held=%d ttl=%lld token=%s", info.held,
              (long long)info.ttl_ms, info.token);
    TK_EXPECT(info.last_fence == fence,
              "the last fence outlives the lock: "
              "%llu, got %llu",
              (unsigned long long)fence, (unsigned long long)info.last_fence);
    testkit_forget_lock(url, key);
    dlock_client_free(c);
}

static void inspect_shows_a_key_without_ttl(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    char key[TESTKIT_KEY_MAX];
    dlock_lock_info info;
    redisReply *r;

    (void)state;
    testkit_key(key, "inspect_no_ttl");
    r = testkit_redis_cmd(url, "SET %s 0123456789abcdef0123456789abcdef", key);
    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS, "SET without TTL");
    freeReplyObject(r);
    TK_EXPECT_ERR(dlock_inspect(c, key, &info), DLOCK_OK, c,
                  "inspect of a "
                  "key without TTL");
    TK_EXPECT(info.held && info.ttl_ms == -1,
              "held with ttl -1, got held=%d "
              "ttl=%lld",
              info.held, (long long)info.ttl_ms);
    TK_EXPECT(strcmp(info.token, "0123456789abcdef0123456789abcdef") == 0,
              "the stored value is shown as the token, got %s", info.token);
    testkit_forget_lock(url, key);
    dlock_client_free(c);
}

static void inspect_rejects_a_bad_name(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    dlock_lock_info info;

    (void)state;
    TK_EXPECT_ERR(dlock_inspect(c, "", &info), DLOCK_INVALID, c,
                  "inspect of "
                  "an empty name");
    TK_EXPECT(strstr(dlock_client_errmsg(c), "empty") != NULL,
              "the message "
              "says the name is empty: %s",
              dlock_client_errmsg(c));
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(inspect_reports_free_held_and_released_states),
        cmocka_unit_test(inspect_shows_a_key_without_ttl),
        cmocka_unit_test(inspect_rejects_a_bad_name),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
