/*
 * test_reentrant.c: reentrant acquires count holds per thread.
 *
 * With opts.reentrant, the thread that holds a key and acquires it again on
 * the same client gets the same lock with its hold count raised, without a
 * round trip; any other thread (even on the same client) is BUSY; each
 * release lowers the count and only the last one deletes the key.  Without
 * the option, the holder's own second acquire is BUSY like anyone's.
 */
#include "itkit.h"

#include <pthread.h>
#include <string.h>

typedef struct other_thread {
    dlock_client *client;
    const char *key;
    dlock_err result;
    char message[DLOCK_ERRMSG_MAX];
} other_thread;

static void *try_from_other_thread(void *arg)
{
    other_thread *t = arg;
    dlock_acquire_opts o = itkit_acquire_opts(5000, 0);
    dlock_lock *l = NULL;

    o.reentrant = 1;
    t->result = dlock_acquire(t->client, t->key, &o, &l);
    snprintf(t->message, sizeof(t->message), "%s",
             dlock_client_errmsg(t->client));
    if (l != NULL)
        dlock_release(l);
    return NULL;
}

/* What a reentrant try by another thread of the same client gets. */
static dlock_err other_thread_try(dlock_client *c, const char *key,
                                  char *message, size_t len)
{
    other_thread t = {c, key, DLOCK_OK, ""};
    pthread_t thread;

    TK_EXPECT(pthread_create(&thread, NULL, try_from_other_thread, &t) == 0,
              "a second thread starts");
    pthread_join(thread, NULL);
    snprintf(message, len, "%s", t.message);
    return t.result;
}

static int key_held(dlock_client *c, const char *key)
{
    dlock_lock_info info;

    TK_EXPECT(dlock_inspect(c, key, &info) == DLOCK_OK, "inspect %s", key);
    return info.held;
}

static void same_thread_reenters_and_other_threads_are_busy(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    dlock_acquire_opts o = itkit_acquire_opts(5000, 0);
    char key[TESTKIT_KEY_MAX], message[DLOCK_ERRMSG_MAX];
    dlock_lock *first, *second = NULL;
    dlock_err err;

    (void)state;
    testkit_key(key, "reentrant");
    o.reentrant = 1;
    first = itkit_acquire(c, key, &o);
    TK_EXPECT(dlock_lock_holds(first) == 1,
              "one hold after the first "
              "acquire, got %d",
              dlock_lock_holds(first));
    TK_EXPECT_ERR(dlock_acquire(c, key, &o, &second), DLOCK_OK, c,
                  "the "
                  "holder's own reentrant acquire");
    TK_EXPECT(second == first, "the reentrant acquire returns the lock the "
                               "thread already holds");
    TK_EXPECT(dlock_lock_holds(first) == 2,
              "two holds after reentering, "
              "got %d",
              dlock_lock_holds(first));

    err = other_thread_try(c, key, message, sizeof(message));
    TK_EXPECT(err == DLOCK_BUSY,
              "another thread of the same client is BUSY, "
              "got %s: %s",
              dlock_errname(err), message);

    TK_EXPECT_ERR(dlock_release(second), DLOCK_OK, c,
                  "the first of two "
                  "releases");
    TK_EXPECT(dlock_lock_holds(first) == 1, "one hold left, got %d",
              dlock_lock_holds(first));
    TK_EXPECT(key_held(c, key), "the key is still held after one of two "
                                "releases");
    err = other_thread_try(c, key, message, sizeof(message));
    TK_EXPECT(err == DLOCK_BUSY,
              "another thread is still BUSY with one hold "
              "left, got %s: %s",
              dlock_errname(err), message);

    TK_EXPECT_ERR(dlock_release(first), DLOCK_OK, c, "the last release");
    TK_EXPECT(!key_held(c, key), "the last release frees the key");
    err = other_thread_try(c, key, message, sizeof(message));
    TK_EXPECT(err == DLOCK_OK,
              "another thread gets the freed key, got %s: "
              "%s",
              dlock_errname(err), message);
    testkit_forget_lock(url, key);
    dlock_client_free(c);
}

static void without_reentrant_the_holder_itself_is_busy(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    char key[TESTKIT_KEY_MAX];
    dlock_lock *held, *again = NULL;

    (void)state;
    testkit_key(key, "not_reentrant");
    held = itkit_acquire(c, key, NULL);
    TK_EXPECT_ERR(dlock_acquire(c, key, NULL, &again), DLOCK_BUSY, c,
                  "a non-reentrant second acquire by the holder");
    TK_EXPECT(again == NULL && dlock_lock_holds(held) == 1,
              "no second "
              "lock and no extra hold");
    TK_EXPECT_ERR(dlock_release(held), DLOCK_OK, c, "the release");
    testkit_forget_lock(url, key);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_thread_reenters_and_other_threads_are_busy),
        cmocka_unit_test(without_reentrant_the_holder_itself_is_busy),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
