/*
 * test_fence.c: fence counter keys, reserved names and the floor
 * (src/lib/client/fence.c).
 *
 * The counter must sit in the lock's cluster slot (the slot is computed
 * here as Redis Cluster does: CRC16 of the hash tag, or of the whole key,
 * mod 16384), must be a name no lock may take, and the legacy name must be
 * exactly what earlier versions wrote.  Fences parse only as Redis and the
 * scripts write them (no sign, no leading zero, at most 19 digits), and the
 * floor only ever rises, also under concurrent raises.  A lock's six names
 * built at once in one block (what every acquire does) are the strings
 * the key functions build one by one.  The scripts' shared Lua for the
 * fence rule (the server's clock as a decimal string, and plus one digit
 * by digit, past 2^53 where Lua's doubles stop counting) answers as the
 * rule says, run by EVAL on the shared Redis.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "client/fence.h"
#include "testkit.h"
#include "testkit_threads.h"

static uint16_t crc16(const char *s, size_t len)
{
    uint16_t crc = 0;

    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)s[i] << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021)
                                 : (uint16_t)(crc << 1);
    }
    return crc;
}

/* The Redis Cluster slot of key. */
static unsigned slot_of(const char *key)
{
    const char *open = strchr(key, '{');
    const char *close = open != NULL ? strchr(open + 1, '}') : NULL;

    if (close != NULL && close > open + 1)
        return crc16(open + 1, (size_t)(close - open - 1)) % 16384;
    return crc16(key, strlen(key)) % 16384;
}

static void counter_keys_are_reserved_and_share_the_slot(void **state)
{
    /* Every kind of valid name: no brace, a tag, an opening brace only. */
    const char *names[] = {"x",  "deploy:db", "{t}x", "a{t}b",
                           "x{", "{x}:fence", "a{b"};
    const char *want[] = {"#dlock:fence:{x}",  "#dlock:fence:{deploy:db}",
                          "#dlock:fence:{t}x", "#dlock:fence:a{t}b",
                          "#dlock:fence:{x{}", "#dlock:fence:{x}:fence",
                          "#dlock:fence:{a{b}"};
    const char *legacy[] = {"{x}:fence",  "{deploy:db}:fence",
                            "{t}x:fence", "a{t}b:fence",
                            "{x{}:fence", "{x}:fence:fence",
                            "{a{b}:fence"};

    (void)state;
    for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
        char *key = dlock__fence_key(names[i]);
        char *old = dlock__fence_legacy_key(names[i]);

        TK_EXPECT(key != NULL && strcmp(key, want[i]) == 0,
                  "the counter "
                  "of %s is %s, got %s",
                  names[i], want[i], key);
        TK_EXPECT(old != NULL && strcmp(old, legacy[i]) == 0,
                  "the legacy "
                  "counter of %s is %s, got %s",
                  names[i], legacy[i], old);
        TK_EXPECT(dlock__fence_name_reserved(key),
                  "%s is refused as a lock "
                  "name",
                  key);
        TK_EXPECT(slot_of(key) == slot_of(names[i]),
                  "%s shares %s's slot: "
                  "%u and %u",
                  key, names[i], slot_of(key), slot_of(names[i]));
        free(key);
        free(old);
    }
}

/* One name of a lock built at once, against the same name built alone
 * (a malloc'd string, freed here) and, when not NULL, the literal. */
static void same_name(const char *key, const char *what, const char *got,
                      char *alone, const char *literal)
{
    TK_EXPECT(alone != NULL && strcmp(got, alone) == 0,
              "the %s of %.40s built at once is %s, built alone %s", what, key,
              got, alone);
    TK_EXPECT(literal == NULL || strcmp(got, literal) == 0,
              "the %s of %.40s is %s, got %s", what, key, literal, got);
    free(alone);
}

static void a_lock_s_names_built_at_once_are_the_ones_built_alone(void **state)
{
    static char longest[DLOCK_KEY_MAX + 1];
    const char *names[] = {"x",   "deploy:db", "{t}x", "a{t}b", "x{",
                           "a{b", "a{}b",      "{}",   longest};
    /* For "x" and "a{t}b", every name written out. */
    const char *const x[] = {"#dlock:fence:{x}", "{x}:fence",
                             "#dlock:queue:{x}", "#dlock:waiters:{x}",
                             "dlock:released:x"};
    const char *const tagged[] = {"#dlock:fence:a{t}b", "a{t}b:fence",
                                  "#dlock:queue:a{t}b", "#dlock:waiters:a{t}b",
                                  "dlock:released:a{t}b"};

    (void)state;
    memset(longest, 'k', DLOCK_KEY_MAX);
    for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
        const char *const key = names[i];
        const char *const *lit = strcmp(key, "x") == 0       ? x
                                 : strcmp(key, "a{t}b") == 0 ? tagged
                                                             : NULL;
        char *channel = malloc(strlen(key) + sizeof("dlock:released:"));
        dlock__lock_names n;

        assert_non_null(channel);
        strcpy(channel, "dlock:released:");
        strcat(channel, key);
        assert_int_equal(dlock__fence_lock_names(key, "dlock:released:", &n),
                         0);
        TK_EXPECT(strcmp(n.key, key) == 0, "the key is %.40s, got %.40s", key,
                  n.key);
        same_name(key, "fence counter", n.fence, dlock__fence_key(key),
                  lit != NULL ? lit[0] : NULL);
        same_name(key, "legacy counter", n.legacy_fence,
                  dlock__fence_legacy_key(key), lit != NULL ? lit[1] : NULL);
        same_name(key, "queue", n.queue,
                  dlock__fence_derived_key("queue", key),
                  lit != NULL ? lit[2] : NULL);
        same_name(key, "waiters key", n.waiters,
                  dlock__fence_derived_key("waiters", key),
                  lit != NULL ? lit[3] : NULL);
        same_name(key, "channel", n.channel, channel,
                  lit != NULL ? lit[4] : NULL);
        free(n.key);
    }
}

static void pattern_and_prefix_names_are_reserved(void **state)
{
    const char *reserved[] = {"#dlock:",  "#dlock:x",        "{sem:a}:holders",
                              "{rw:a}",   "{leader:a}:term", "{rl:a}",
                              "{once:a}", "{idem:a}"};
    const char *free_names[] = {"#dlock",     "dlock:x",       "x#dlock:",
                                "{sem}",      "{semaphore:a}", "sem:a",
                                "{x}{sem:a}", "{Sem:a}"};

    (void)state;
    for (size_t i = 0; i < sizeof(reserved) / sizeof(*reserved); i++)
        TK_EXPECT(dlock__fence_name_reserved(reserved[i]), "%s is reserved",
                  reserved[i]);
    for (size_t i = 0; i < sizeof(free_names) / sizeof(*free_names); i++)
        TK_EXPECT(!dlock__fence_name_reserved(free_names[i]),
                  "%s is a lock "
                  "name",
                  free_names[i]);
}

#define RAISERS 4
#define RAISES 20000

static void *raise_many(void *arg)
{
    dlock_client *c = arg;

    for (uint64_t i = 1; i <= RAISES; i++)
        dlock__fence_floor_raise(c, i * RAISERS);
    return NULL;
}

/* The racing raisers and their client, in static storage: a failed
 * expectation leaves the case by longjmp while they may still raise, and
 * end_raisers joins them before it frees the client. */
static testkit_threads raisers;
static dlock_client *raised;

static int end_raisers(void **state)
{
    (void)state;
    testkit_threads_join_all(&raisers);
    dlock_client_free(raised);
    raised = NULL;
    return 0;
}

static void the_floor_only_rises(void **state)
{
    char why[DLOCK_ERRMSG_MAX];
    dlock_client *c;

    (void)state;
    TK_EXPECT(dlock_client_new(testkit_shared_redis(), NULL, &raised, why,
                               sizeof(why))
                  == DLOCK_OK,
              "a client: %s", why);
    c = raised;
    /* A fresh client has seen no fence: its floor starts at 0. */
    dlock__fence_floor_raise(c, 10);
    dlock__fence_floor_raise(c, 10);
    dlock__fence_floor_raise(c, 5);
    TK_EXPECT(dlock__fence_floor(c) == 10,
              "a lower value does not lower "
              "the floor, got %llu",
              (unsigned long long)dlock__fence_floor(c));
    for (int i = 0; i < RAISERS; i++)
        TK_EXPECT(testkit_threads_start(&raisers, raise_many, c) == 0,
                  "a thread starts");
    testkit_threads_join_all(&raisers);
    TK_EXPECT(dlock__fence_floor(c) == (uint64_t)RAISES * RAISERS,
              "after "
              "racing raises the floor is their maximum, got %llu",
              (unsigned long long)dlock__fence_floor(c));
}

/* The answer of EVAL body 0 a b, as a string ("" if it is not one). */
static void eval_string(const char *body, const char *a, const char *b,
                        char *out, size_t len)
{
    redisReply *r = testkit_redis_cmd(testkit_shared_redis(),
                                      "EVAL %s 0 %s %s", body, a, b);

    snprintf(out, len, "%s",
             r != NULL && r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
}

static void the_scripts_clock_and_increment_are_decimal(void **state)
{
    static const char *const now[][3] = {
        {"1733000000", "5", "1733000000000005"},
        {"1733000000", "123456", "1733000000123456"},
        {"1733000000", "0", "1733000000000000"},
    };
    static const char *const plus_one[][2] = {
        {"1", "2"},
        {"9", "10"},
        {"1099", "1100"},
        {"1999", "2000"},
        {"1796480633902386", "1796480633902387"},
        {"9007199254740993", "9007199254740994"}, /* past 2^53 */
        {"9999999999999999999", "10000000000000000000"},
    };
    const char *now_body = "local t = {ARGV[1], ARGV[2]}\n"
                           "return " DLOCK__FENCE_LUA_NOW "\n";
    const char *inc_body = DLOCK__FENCE_LUA_INC "return inc(ARGV[1])\n";
    char got[64];

    (void)state;
    for (size_t i = 0; i < sizeof(now) / sizeof(now[0]); i++) {
        eval_string(now_body, now[i][0], now[i][1], got, sizeof(got));
        TK_EXPECT(strcmp(got, now[i][2]) == 0,
                  "TIME %s %s reads as microseconds %s, got \"%s\"", now[i][0],
                  now[i][1], now[i][2], got);
    }
    for (size_t i = 0; i < sizeof(plus_one) / sizeof(plus_one[0]); i++) {
        eval_string(inc_body, plus_one[i][0], "-", got, sizeof(got));
        TK_EXPECT(strcmp(got, plus_one[i][1]) == 0,
                  "%s plus one is %s, got \"%s\"", plus_one[i][0],
                  plus_one[i][1], got);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(counter_keys_are_reserved_and_share_the_slot),
        cmocka_unit_test(
            a_lock_s_names_built_at_once_are_the_ones_built_alone),
        cmocka_unit_test(pattern_and_prefix_names_are_reserved),
        cmocka_unit_test(the_scripts_clock_and_increment_are_decimal),
        cmocka_unit_test_teardown(the_floor_only_rises, end_raisers),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
