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
 * of the clock, is the floor of the next fence.  The plain acquire reads
 * it only while the new counter is absent or unreadable (every script that
 * writes the new counter writes it above the old one), and a counter the
 * previous acquire script wrote is the floor of this version's fences.
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

/* The acquire script as it was before session 12 (b26fa3a), which read
 * the legacy counter on every grant and the fair queue with ZRANGE: a
 * deployment's counters may have been written by it. */
static const char previous_acquire[] =
    "local function dec(v)\n"
    "  if type(v) == 'string' and #v <= 19 and v:find('^[1-9]%d*$') then\n"
    "    return v\n"
    "  end\n"
    "end\n"
    "local function gt(a, b)\n"
    "  return #a > #b or (#a == #b and a > b)\n"
    "end\n"
    "local function inc(s)\n"
    "  local i = #s\n"
    "  while i > 0 and s:sub(i, i) == '9' do i = i - 1 end\n"
    "  if i == 0 then return '1' .. string.rep('0', #s) end\n"
    "  return s:sub(1, i - 1) .. string.char(s:byte(i) + 1) ..\n"
    "         string.rep('0', #s - i)\n"
    "end\n"
    "local t = redis.call('TIME')\n"
    "local now = t[1] .. string.format('%06d', tonumber(t[2]))\n"
    "local holder = redis.call('GET', KEYS[1])\n"
    "if holder == ARGV[1] then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  return {1, redis.call('GET', KEYS[2]) or '0', now}\n"
    "end\n"
    "if holder then\n"
    "  return {0, redis.call('PTTL', KEYS[1]), now}\n"
    "end\n"
    "local queued = redis.call('ZRANGE', KEYS[4], 0, 15)\n"
    "if #queued > 0 then\n"
    "  local now_ms = tonumber(t[1]) * 1000 + "
    "math.floor(tonumber(t[2]) / 1000)\n"
    "  for _, who in ipairs(queued) do\n"
    "    local v = redis.call('HGET', KEYS[5], who) or ''\n"
    "    if (tonumber(string.match(v, '^(%d+)')) or 0) >= now_ms then\n"
    "      return {0, -2, now}\n"
    "    end\n"
    "  end\n"
    "end\n"
    "local last = dec(redis.call('GET', KEYS[2]))\n"
    "local legacy = dec(redis.pcall('GET', KEYS[3]))\n"
    "if legacy and (not last or gt(legacy, last)) then last = legacy end\n"
    "local fence = now\n"
    "if last and not gt(now, last) then fence = inc(last) end\n"
    "if #fence > 19 or not gt(fence, ARGV[3]) then\n"
    "  return {2, now}\n"
    "end\n"
    "redis.call('SET', KEYS[2], fence, 'PX', ARGV[4])\n"
    "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
    "return {1, fence, now}\n";

/* Grants key with previous_acquire, as a client of that version would,
 * and lets it go; returns the fence it granted (0 if it did not). */
static unsigned long long grant_by_previous_script(const char *url,
                                                   const char *key)
{
    redisReply *r = testkit_redis_cmd(
        url,
        "EVAL %s 5 %s #dlock:fence:{%s} {%s}:fence #dlock:queue:{%s} "
        "#dlock:waiters:{%s} 00000000000000000000000000000001 10000 0 "
        "2592010000",
        previous_acquire, key, key, key, key, key);
    unsigned long long fence = 0;

    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 3
        && r->element[0]->type == REDIS_REPLY_INTEGER
        && r->element[0]->integer == 1
        && r->element[1]->type == REDIS_REPLY_STRING)
        fence = strtoull(r->element[1]->str, NULL, 10);
    freeReplyObject(r);
    freeReplyObject(testkit_redis_cmd(url, "DEL %s", key));
    return fence;
}

/* Acquires and releases key; returns the fence of the grant. */
static unsigned long long grant_and_release(dlock_client *c, const char *key)
{
    dlock_lock *l = itkit_acquire(c, key, NULL);
    const unsigned long long fence = dlock_lock_fence(l);

    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, c, "release");
    return fence;
}

static void fences_rise_across_counters_the_previous_script_wrote(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    char key[TESTKIT_KEY_MAX];
    /* Above any server clock in microseconds (year 2255). */
    const unsigned long long ahead = 9007199254740992ull;
    unsigned long long before, after;
    redisReply *r;

    (void)state;
    /* A counter at the clock, as most are. */
    testkit_key(key, "ns_prev_clock");
    before = grant_by_previous_script(url, key);
    TK_EXPECT(before > 0, "the previous script grants a fresh key");
    after = grant_and_release(c, key);
    TK_EXPECT(after > before,
              "this version's grant after the previous one's "
              "has a higher fence: %llu after %llu",
              after, before);
    testkit_forget_lock(url, key);
    /* A counter ahead of the clock, carried over from the legacy one by
     * the previous script: this version continues it though it does not
     * read the legacy counter while the new one exists. */
    testkit_key(key, "ns_prev_ahead");
    r = testkit_redis_cmd(url, "SET {%s}:fence %llu", key, ahead);
    freeReplyObject(r);
    before = grant_by_previous_script(url, key);
    TK_EXPECT(before == ahead + 1,
              "the previous script continues the legacy "
              "counter: %llu, got %llu",
              ahead + 1, before);
    for (unsigned long long i = 1; i <= 2; i++) {
        after = grant_and_release(c, key);
        TK_EXPECT(after == before + i,
                  "grant %llu by this version has fence %llu, "
                  "got %llu",
                  i, before + i, after);
    }
    /* And the previous script, run again (a client not yet upgraded,
     * granting after this version), continues this version's counter. */
    before = grant_by_previous_script(url, key);
    TK_EXPECT(before == after + 1,
              "the previous script continues this version's "
              "counter: %llu, got %llu",
              after + 1, before);
    testkit_forget_lock(url, key);
    dlock_client_free(c);
}

static void legacy_counter_is_read_only_while_the_counter_is_not(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    char key[TESTKIT_KEY_MAX];
    const unsigned long long counter = 9007199254740992ull;
    unsigned long long fence;

    (void)state;
    testkit_key(key, "ns_legacy_late");
    /* A legacy counter above a new counter that exists: only a client of
     * a version before the counter moved could have written it, and this
     * version no longer reads it then (docs/benchmarks.md, "Session 12"). */
    freeReplyObject(
        testkit_redis_cmd(url, "SET #dlock:fence:{%s} %llu", key, counter));
    freeReplyObject(
        testkit_redis_cmd(url, "SET {%s}:fence %llu", key, counter + 100));
    fence = grant_and_release(c, key);
    TK_EXPECT(fence == counter + 1,
              "the counter, not the legacy one, is the floor "
              "while it exists: %llu, got %llu",
              counter + 1, fence);
    /* An unreadable counter is as good as none: the legacy one counts. */
    freeReplyObject(
        testkit_redis_cmd(url, "SET #dlock:fence:{%s} garbage", key));
    fence = grant_and_release(c, key);
    TK_EXPECT(fence == counter + 101,
              "with the counter unreadable, the legacy one is "
              "the floor: %llu, got %llu",
              counter + 101, fence);
    testkit_forget_lock(url, key);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_fence_counter_name_is_an_independent_lock),
        cmocka_unit_test(derived_names_are_refused),
        cmocka_unit_test(legacy_counter_is_the_floor_after_an_upgrade),
        cmocka_unit_test(
            fences_rise_across_counters_the_previous_script_wrote),
        cmocka_unit_test(legacy_counter_is_read_only_while_the_counter_is_not),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
