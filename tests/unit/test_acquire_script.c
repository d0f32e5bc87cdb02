/*
 * test_acquire_script.c: the acquire script's two flows answer alike.
 *
 * The acquire script (lock.c) reads and takes the key in one call, SET NX
 * GET, which Redis has taken since 7.0; when it then refuses the grant
 * (live fair waiters, a floor above what it can grant) it deletes the key
 * again.  A server before 7.0 refuses NX with GET as a syntax error, and
 * the script falls back to reading the key with GET and setting it last.
 * The servers here are all 7.0, so the older server's refusal is made by
 * running the same body with the SET's GET option spelled as one no
 * version knows (a syntax error, as 6.2 gives for NX with GET).  Each case
 * runs through both bodies with EVAL on the shared Redis: a grant, the
 * holder's own repeat, a busy key, fair waiters queued, a floor above the
 * server's clock (with and without a counter, which a refusal leaves as it
 * was), a counter ahead of the clock; the answers and the keys left behind
 * must be the same.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "lock/lock_internal.h"
#include "testkit.h"

#define TOKEN "00112233445566778899aabbccddeeff"
#define OTHER "ffeeddccbbaa99887766554433221100"

/* The script's body as lock.c sends it, and the same body with the GET
 * option replaced by an unknown one: the pre-7.0 flow.  malloc'd. */
static char *body_of(int before_7)
{
    const char *body = dlock__lock_acquire_script()->body;
    const char *get = strstr(body, "'NX', 'PX', ARGV[2], 'GET')");
    char *copy = strdup(body);

    assert_non_null(get);
    assert_non_null(copy);
    if (before_7)
        memcpy(copy + (get - body) + strlen("'NX', 'PX', ARGV[2], '"), "GOT",
               3);
    return copy;
}

/* EVALs body on key with token and floor; the reply (the caller frees). */
static redisReply *acquire(const char *body, const char *key,
                           const char *token, const char *floor)
{
    const char *url = testkit_shared_redis();

    return testkit_redis_cmd(url,
                             "EVAL %s 5 %s #dlock:fence:{%s} {%s}:fence "
                             "#dlock:queue:{%s} #dlock:waiters:{%s} %s 30000 "
                             "%s 60000",
                             body, key, key, key, key, key, token, floor);
}

/* An answer as the client reads it: its status, and its second word or
 * element as text (the fence, or the busy key's PTTL). */
typedef struct answer {
    long long status;
    char value[32];
} answer;

/* Reads and frees r: the words "1 fence now", "0 -2 now" and "2 now", or
 * the busy table {0, pttl, now}; fails on any other shape. */
static answer answer_of(redisReply *r)
{
    answer a = {0};

    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR)
        fail_msg("the script failed: %s", r->str);
    if (r->type == REDIS_REPLY_STRING) {
        char now[32];
        int n = sscanf(r->str, "%lld %31s %31s", &a.status, a.value, now);

        if (a.status == 2)
            assert_int_equal(n, 2);
        else
            assert_int_equal(n, 3);
    } else {
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        assert_int_equal(r->elements, 3);
        assert_int_equal(r->element[0]->type, REDIS_REPLY_INTEGER);
        assert_int_equal(r->element[1]->type, REDIS_REPLY_INTEGER);
        assert_int_equal(r->element[2]->type, REDIS_REPLY_STRING);
        a.status = r->element[0]->integer;
        assert_int_equal(a.status, 0);
        snprintf(a.value, sizeof(a.value), "%lld", r->element[1]->integer);
    }
    freeReplyObject(r);
    return a;
}

static long long key_exists(const char *key)
{
    return testkit_redis_int(testkit_shared_redis(), "EXISTS %s", key);
}

/* Fails unless key's fence counter holds want. */
static void expect_counter(const char *key, const char *want)
{
    redisReply *r = testkit_redis_cmd(testkit_shared_redis(),
                                      "GET #dlock:fence:{%s}", key);

    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, want);
    freeReplyObject(r);
}

static void forget(const char *key)
{
    testkit_redis_int(testkit_shared_redis(),
                      "DEL %s #dlock:fence:{%s} #dlock:queue:{%s} "
                      "#dlock:waiters:{%s}",
                      key, key, key, key);
}

/* A grant, then the holder's repeat (the same fence), then another token:
 * busy with the key's TTL. */
static void grant_repeat_and_busy(int before_7)
{
    char *body = body_of(before_7);
    char key[TESTKIT_KEY_MAX];
    answer grant, repeat, busy;

    testkit_key(key, before_7 ? "script_grant_old" : "script_grant");
    grant = answer_of(acquire(body, key, TOKEN, "0"));
    assert_int_equal(grant.status, 1);
    assert_true(strtoull(grant.value, NULL, 10) > 0);
    assert_int_equal(key_exists(key), 1);
    assert_true(testkit_redis_int(testkit_shared_redis(), "PTTL %s", key) > 0);

    repeat = answer_of(acquire(body, key, TOKEN, "0"));
    assert_int_equal(repeat.status, 1);
    assert_string_equal(repeat.value, grant.value);

    busy = answer_of(acquire(body, key, OTHER, "0"));
    assert_int_equal(busy.status, 0);
    assert_true(strtoll(busy.value, NULL, 10) > 0);
    forget(key);
    free(body);
}

/* A free key with a live fair waiter queued: busy with the fair hint (-2)
 * and the key left free. */
static void fair_waiters_queued(int before_7)
{
    char *body = body_of(before_7);
    char key[TESTKIT_KEY_MAX];
    redisReply *r;
    long long now_ms;
    answer queued;

    testkit_key(key, before_7 ? "script_fair_old" : "script_fair");
    r = testkit_redis_cmd(testkit_shared_redis(), "TIME");
    assert_non_null(r);
    now_ms = strtoll(r->element[0]->str, NULL, 10) * 1000;
    freeReplyObject(r);
    testkit_redis_int(testkit_shared_redis(), "ZADD #dlock:queue:{%s} 1 %s",
                      key, OTHER);
    testkit_redis_int(testkit_shared_redis(),
                      "HSET #dlock:waiters:{%s} %s %lld:2000:1", key, OTHER,
                      now_ms + 60000);
    queued = answer_of(acquire(body, key, TOKEN, "0"));
    assert_int_equal(queued.status, 0);
    assert_string_equal(queued.value, "-2");
    assert_int_equal(key_exists(key), 0);
    forget(key);
    free(body);
}

/* A floor no fence the server can give is above: "2 now", the key left
 * free and the counter as it was: absent, then (after a grant) holding
 * that grant's fence. */
static void floor_above_the_server(int before_7)
{
    const char *url = testkit_shared_redis();
    char *body = body_of(before_7);
    char key[TESTKIT_KEY_MAX];
    answer grant;

    testkit_key(key, before_7 ? "script_floor_old" : "script_floor");
    assert_int_equal(
        answer_of(acquire(body, key, TOKEN, "9000000000000000000")).status, 2);
    assert_int_equal(key_exists(key), 0);
    assert_int_equal(testkit_redis_int(url, "EXISTS #dlock:fence:{%s}", key),
                     0);

    grant = answer_of(acquire(body, key, TOKEN, "0"));
    assert_int_equal(grant.status, 1);
    testkit_redis_int(url, "DEL %s", key);
    assert_int_equal(
        answer_of(acquire(body, key, TOKEN, "9000000000000000000")).status, 2);
    assert_int_equal(key_exists(key), 0);
    expect_counter(key, grant.value);
    assert_true(testkit_redis_int(url, "PTTL #dlock:fence:{%s}", key) > 0);
    forget(key);
    free(body);
}

/* Sets key's fence counter to value, for 60 s. */
static void set_counter(const char *key, const char *value)
{
    redisReply *r = testkit_redis_cmd(testkit_shared_redis(),
                                      "SET #dlock:fence:{%s} %s PX 60000", key,
                                      value);

    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
}

/* A counter ahead of the server's clock: the next fence is the counter
 * plus one, carried digit by digit as decimal strings, and the counter
 * holds it after the grant; a counter at the last 19-digit number cannot
 * be passed, so the grant is refused and the counter left as it was. */
static void counter_ahead_of_the_clock(int before_7)
{
    static const char *const ahead[][2] = {
        {"9007199254740992", "9007199254740993"},
        {"9007199254740999", "9007199254741000"},
        {"8999999999999999999", "9000000000000000000"},
    };
    const char *url = testkit_shared_redis();
    char *body = body_of(before_7);
    char key[TESTKIT_KEY_MAX];
    answer grant;

    testkit_key(key, before_7 ? "script_ahead_old" : "script_ahead");
    for (size_t i = 0; i < sizeof(ahead) / sizeof(ahead[0]); i++) {
        set_counter(key, ahead[i][0]);
        grant = answer_of(acquire(body, key, TOKEN, "0"));
        assert_int_equal(grant.status, 1);
        assert_string_equal(grant.value, ahead[i][1]);
        expect_counter(key, ahead[i][1]);
        testkit_redis_int(url, "DEL %s", key);
    }
    set_counter(key, "9999999999999999999");
    assert_int_equal(answer_of(acquire(body, key, TOKEN, "0")).status, 2);
    assert_int_equal(key_exists(key), 0);
    expect_counter(key, "9999999999999999999");
    forget(key);
    free(body);
}

static void redis_7_flow_grants_repeats_and_refuses(void **state)
{
    (void)state;
    grant_repeat_and_busy(0);
    fair_waiters_queued(0);
    floor_above_the_server(0);
    counter_ahead_of_the_clock(0);
}

static void pre_7_flow_answers_the_same(void **state)
{
    (void)state;
    grant_repeat_and_busy(1);
    fair_waiters_queued(1);
    floor_above_the_server(1);
    counter_ahead_of_the_clock(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(redis_7_flow_grants_repeats_and_refuses),
        cmocka_unit_test(pre_7_flow_answers_the_same),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
