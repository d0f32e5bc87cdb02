/*
 * test_fencing.c: fencing tokens strictly increase with every grant.
 *
 * A protected resource refuses writes from an older grant by comparing
 * fences, so a fence may never repeat or go back: 10,000 grants of one key
 * in a row must give 10,000 strictly increasing fences.  The counter and the
 * scripts that advance it live in Redis; a SCRIPT FLUSH (or a restart)
 * empties the server's script cache, and the next acquire must load the
 * script again (the NOSCRIPT fallback) and go on with a higher fence.  The
 * flush runs on a private server so that no other test loses its scripts.
 * The next fence is max(last + 1, server microseconds): a counter ahead of
 * the clock must still grow by exactly one per grant.
 *
 * The acquire script takes the key before it reads the counter (one call
 * fewer, lock.c); a grant it then refuses must leave the key as it found
 * it.  A counter, fair queue or queue entry Redis cannot read (another
 * type under its name) fails the acquire with the server's error and
 * leaves the key free: a key left set by a refused acquire would be held
 * by a token no caller has, for its whole TTL.
 */
#include "itkit.h"

#include <stdio.h>
#include <string.h>

#define GRANTS 10000

static void fences_strictly_increase_over_ten_thousand_grants(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    dlock_acquire_opts o = itkit_acquire_opts(5000, 0);
    char key[TESTKIT_KEY_MAX];
    uint64_t previous = 0;
    int64_t started = testkit_now_ms();
    dlock_lock_info info;

    (void)state;
    testkit_key(key, "fencing_grants");
    for (int i = 0; i < GRANTS; i++) {
        dlock_lock *l = NULL;
        dlock_err err = dlock_acquire(c, key, &o, &l);
        uint64_t fence;

        TK_EXPECT(err == DLOCK_OK,
                  "grant %d of a released key succeeds, got "
                  "%s: %s",
                  i, dlock_errname(err), dlock_client_errmsg(c));
        fence = dlock_lock_fence(l);
        TK_EXPECT(fence > previous,
                  "grant %d has a fence above the last "
                  "one: %llu after %llu",
                  i, (unsigned long long)fence, (unsigned long long)previous);
        previous = fence;
        err = dlock_release(l);
        TK_EXPECT(err == DLOCK_OK, "release %d succeeds, got %s: %s", i,
                  dlock_errname(err), dlock_client_errmsg(c));
    }
    print_message("%d grants in %lld ms\n", GRANTS,
                  (long long)(testkit_now_ms() - started));
    TK_EXPECT(dlock_inspect(c, key, &info) == DLOCK_OK
                  && info.last_fence == previous,
              "Redis keeps the last fence "
              "granted, %llu, got %llu",
              (unsigned long long)previous,
              (unsigned long long)info.last_fence);
    testkit_forget_lock(url, key);
    dlock_client_free(c);
}

static void fence_ahead_of_the_server_clock_still_grows_by_one(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    char key[TESTKIT_KEY_MAX];
    /* 2^53, above any server clock in microseconds until the year 2255:
     * the counter, not the clock, decides the next fence, and fences are
     * 64-bit (dlock/lock.h), so 2^53 + 1 must follow 2^53 (a counter kept
     * in a Lua number, a double, cannot get past 2^53). */
    const unsigned long long ahead = 9007199254740992ull;
    redisReply *r;

    (void)state;
    testkit_key(key, "fencing_ahead");
    r = testkit_redis_cmd(url, "SET {%s}:fence %llu", key, ahead);
    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS,
              "SET the fence "
              "counter ahead of the clock");
    freeReplyObject(r);
    for (unsigned long long i = 1; i <= 3; i++) {
        dlock_lock *l = itkit_acquire(c, key, NULL);

        TK_EXPECT(dlock_lock_fence(l) == ahead + i,
                  "grant %llu after a "
                  "counter of %llu gets fence %llu, got %llu",
                  i, ahead, ahead + i,
                  (unsigned long long)dlock_lock_fence(l));
        TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, c, "release");
    }
    testkit_forget_lock(url, key);
    dlock_client_free(c);
}

/* Empties the private server's script cache. */
static void script_flush(const testkit_redis *server)
{
    redisReply *r = testkit_redis_cmd(server->admin_url, "SCRIPT FLUSH");

    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS,
              "SCRIPT FLUSH on "
              "the private server");
    freeReplyObject(r);
}

static void fences_keep_growing_across_a_script_flush(void **state)
{
    testkit_redis_opts so = {.name = "fencing_flush"};
    testkit_redis *server = testkit_redis_start(&so);
    dlock_client *c;
    dlock_acquire_opts o = itkit_acquire_opts(5000, 0);
    char key[TESTKIT_KEY_MAX];
    dlock_lock *before, *after;
    uint64_t fence_before;

    (void)state;
    TK_EXPECT(server != NULL, "a private redis-server starts");
    c = itkit_client(server->url, NULL);
    testkit_key(key, "fencing_flush");
    before = itkit_acquire(c, key, &o);
    fence_before = dlock_lock_fence(before);
    TK_EXPECT_ERR(dlock_release(before), DLOCK_OK, c,
                  "release before the "
                  "flush");

    script_flush(server);
    after = itkit_acquire(c, key, &o);
    TK_EXPECT(dlock_lock_fence(after) > fence_before,
              "the first grant after "
              "SCRIPT FLUSH has a higher fence: %llu after %llu",
              (unsigned long long)dlock_lock_fence(after),
              (unsigned long long)fence_before);
    script_flush(server);
    TK_EXPECT_ERR(dlock_extend(after, 5000), DLOCK_OK, c,
                  "extend right "
                  "after a flush (its script is reloaded too)");
    script_flush(server);
    TK_EXPECT_ERR(dlock_release(after), DLOCK_OK, c,
                  "release right after "
                  "a flush");
    TK_EXPECT(testkit_redis_int(server->admin_url, "EXISTS %s", key) == 0,
              "the release after the flush deleted the key");
    dlock_client_free(c);
    testkit_redis_free(server);
}

/* Puts a value of the wrong type under name (a list). */
static void spoil(const char *url, const char *name)
{
    redisReply *r = testkit_redis_cmd(url, "RPUSH %s spoiled", name);

    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_INTEGER,
              "RPUSH a list "
              "under %s",
              name);
    freeReplyObject(r);
}

/* An acquire that must fail with the server's WRONGTYPE answer and leave
 * key unset; what names the spoiled key for the messages. */
static void expect_refused_and_key_free(dlock_client *c, const char *url,
                                        const char *key, const char *what)
{
    dlock_acquire_opts o = itkit_acquire_opts(5000, 0);
    dlock_lock *l = NULL;
    dlock_err err = dlock_acquire(c, key, &o, &l);

    TK_EXPECT(err == DLOCK_SERVER && l == NULL,
              "an acquire with %s of "
              "the wrong type fails with the server's error, got %s: %s",
              what, dlock_errname(err), dlock_client_errmsg(c));
    TK_EXPECT(strstr(dlock_client_errmsg(c), "WRONGTYPE") != NULL,
              "the message carries Redis's answer: %s",
              dlock_client_errmsg(c));
    TK_EXPECT(testkit_redis_int(url, "EXISTS %s", key) == 0,
              "the refused acquire left the key free (%s of the wrong "
              "type)",
              what);
}

static void unreadable_counter_or_queue_fails_and_leaves_the_key_free(
    void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    dlock_acquire_opts o = itkit_acquire_opts(5000, 0);
    char key[TESTKIT_KEY_MAX], counter[TESTKIT_KEY_MAX + 32],
        queue[TESTKIT_KEY_MAX + 32], waiters[TESTKIT_KEY_MAX + 32];

    (void)state;
    testkit_key(key, "fencing_unreadable");
    snprintf(counter, sizeof(counter), "#dlock:fence:{%s}", key);
    snprintf(queue, sizeof(queue), "#dlock:queue:{%s}", key);
    snprintf(waiters, sizeof(waiters), "#dlock:waiters:{%s}", key);

    spoil(url, counter);
    expect_refused_and_key_free(c, url, key, "the fence counter");
    testkit_redis_int(url, "DEL %s", counter);
    TK_EXPECT_ERR(dlock_release(itkit_acquire(c, key, &o)), DLOCK_OK, c,
                  "with the counter deleted, an acquire and release");

    spoil(url, queue);
    expect_refused_and_key_free(c, url, key, "the fair queue");
    testkit_redis_int(url, "DEL %s", queue);

    /* A queue with an entry whose waiters' hash is a list. */
    testkit_redis_int(url, "ZADD %s 1 waiter", queue);
    spoil(url, waiters);
    expect_refused_and_key_free(c, url, key, "the fair waiters' entries");
    testkit_redis_int(url, "DEL %s %s", queue, waiters);
    TK_EXPECT_ERR(dlock_release(itkit_acquire(c, key, &o)), DLOCK_OK, c,
                  "with the queue deleted, an acquire and release");
    testkit_forget_lock(url, key);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fences_strictly_increase_over_ten_thousand_grants),
        cmocka_unit_test(fence_ahead_of_the_server_clock_still_grows_by_one),
        cmocka_unit_test(fences_keep_growing_across_a_script_flush),
        cmocka_unit_test(
            unreadable_counter_or_queue_fails_and_leaves_the_key_free),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
