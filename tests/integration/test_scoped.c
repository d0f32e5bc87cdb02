/*
 * test_scoped.c: the scoped forms, dlock_with and DLOCK_GUARD.
 *
 * dlock_with must run the callback while the key is held (seen from Redis
 * inside the callback), hand back the callback's result, and release after;
 * when the key is busy the callback must not run at all.  DLOCK_GUARD must
 * release when the variable goes out of scope, whichever way the scope is
 * left (falling off the end, or an early return), and a lock moved out of
 * the guard must stay held.
 */
#include "itkit.h"

#include <string.h>

typedef struct seen {
    dlock_client *client;
    int calls;
    int held_inside;
    int token_matches;
} seen;

static int inside(dlock_lock *l, void *arg)
{
    seen *s = arg;
    dlock_lock_info info;

    s->calls++;
    if (dlock_inspect(s->client, dlock_lock_key(l), &info) == DLOCK_OK) {
        s->held_inside = info.held;
        s->token_matches = strcmp(info.token, dlock_lock_token(l)) == 0;
    }
    return 42;
}

static int key_held(dlock_client *c, const char *key)
{
    dlock_lock_info info;

    TK_EXPECT(dlock_inspect(c, key, &info) == DLOCK_OK, "inspect %s", key);
    return info.held;
}

static void with_runs_the_callback_while_held_then_releases(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    char key[TESTKIT_KEY_MAX];
    seen s = {c, 0, 0, 0};
    int result = -1;

    (void)state;
    testkit_key(key, "scoped_with");
    TK_EXPECT_ERR(dlock_with(c, key, NULL, inside, &s, &result), DLOCK_OK, c,
                  "dlock_with on a free key");
    TK_EXPECT(s.calls == 1, "the callback runs once, ran %d times", s.calls);
    TK_EXPECT(s.held_inside && s.token_matches,
              "inside the callback Redis "
              "holds the key with the lock's token");
    TK_EXPECT(result == 42, "fn_result is the callback's return, 42, got %d",
              result);
    TK_EXPECT(!key_held(c, key), "the key is released after dlock_with");
    testkit_forget_lock(url, key);
    dlock_client_free(c);
}

static void with_on_a_busy_key_does_not_run_the_callback(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    char key[TESTKIT_KEY_MAX];
    seen s = {c, 0, 0, 0};
    int result = -1;
    dlock_lock *held;

    (void)state;
    testkit_key(key, "scoped_with_busy");
    held = itkit_acquire(c, key, NULL);
    TK_EXPECT_ERR(dlock_with(c, key, NULL, inside, &s, &result), DLOCK_BUSY, c,
                  "dlock_with on a held key");
    TK_EXPECT(s.calls == 0, "the callback never runs when the acquire fails");
    TK_EXPECT(result == 0,
              "fn_result is 0 when the callback did not run, "
              "got %d",
              result);
    TK_EXPECT(key_held(c, key), "the other holder keeps the key");
    TK_EXPECT_ERR(dlock_release(held), DLOCK_OK, c, "the holder's release");
    testkit_forget_lock(url, key);
    dlock_client_free(c);
}

/* Takes key under a guard and leaves early through a return. */
static int guarded_early_return(dlock_client *c, const char *key)
{
    DLOCK_GUARD(l);

    if (dlock_acquire(c, key, NULL, &l) != DLOCK_OK)
        return -1;
    if (!key_held(c, key))
        return -2;
    return 1; /* the guard releases here */
}

static void guard_releases_on_scope_exit(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    char key[TESTKIT_KEY_MAX];

    (void)state;
    testkit_key(key, "scoped_guard");
    {
        DLOCK_GUARD(l);

        TK_EXPECT_ERR(dlock_acquire(c, key, NULL, &l), DLOCK_OK, c,
                      "acquire into a guard");
        TK_EXPECT(key_held(c, key), "the key is held inside the scope");
    }
    TK_EXPECT(!key_held(c, key), "the guard released the key at the end of "
                                 "its scope");
    TK_EXPECT(guarded_early_return(c, key) == 1, "the guarded function held "
                                                 "the key");
    TK_EXPECT(!key_held(c, key), "the guard released the key on an early "
                                 "return");
    testkit_forget_lock(url, key);
    dlock_client_free(c);
}

static void lock_moved_out_of_a_guard_stays_held(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    char key[TESTKIT_KEY_MAX];
    dlock_lock *kept = NULL;

    (void)state;
    testkit_key(key, "scoped_moved");
    {
        DLOCK_GUARD(l);

        TK_EXPECT_ERR(dlock_acquire(c, key, NULL, &l), DLOCK_OK, c,
                      "acquire into a guard");
        kept = l;
        l = NULL;
    }
    TK_EXPECT(key_held(c, key), "a lock moved out of its guard is still "
                                "held after the scope");
    TK_EXPECT_ERR(dlock_release(kept), DLOCK_OK, c,
                  "releasing the moved "
                  "lock");
    testkit_forget_lock(url, key);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(with_runs_the_callback_while_held_then_releases),
        cmocka_unit_test(with_on_a_busy_key_does_not_run_the_callback),
        cmocka_unit_test(guard_releases_on_scope_exit),
        cmocka_unit_test(lock_moved_out_of_a_guard_stays_held),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
