/*
 * test_wallclock_shim_moves_redis_time.c: the wall-clock shim
 * (dlock_test_wallclock.c) really moves a running redis-server's clock:
 * TIME follows each step of the offset file, both ways, and key expiry
 * follows it too, which is what the lock tests rely on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testkit.h"

/* Slack for a loaded machine between our clock reading and the server's. */
#define SLACK_MS 2000

static int64_t host_wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The server's TIME in ms, or INT64_MIN. */
static int64_t server_time_ms(const testkit_redis *r)
{
    redisReply *reply = testkit_redis_cmd(r->admin_url, "TIME");
    int64_t ms = INT64_MIN;

    if (reply != NULL && reply->type == REDIS_REPLY_ARRAY
        && reply->elements == 2)
        ms = strtoll(reply->element[0]->str, NULL, 10) * 1000
             + strtoll(reply->element[1]->str, NULL, 10) / 1000;
    if (reply != NULL)
        freeReplyObject(reply);
    return ms;
}

static void expect_offset(const testkit_redis *r, int64_t offset_ms)
{
    int64_t before = host_wall_ms();
    int64_t got = server_time_ms(r);
    int64_t after = host_wall_ms();

    TK_EXPECT(got != INT64_MIN, "TIME answers");
    TK_EXPECT(got >= before + offset_ms - SLACK_MS
                  && got <= after + offset_ms + SLACK_MS,
              "TIME is the host's clock %+lld ms, got %+lld ms",
              (long long)offset_ms, (long long)(got - before));
}

static void time_and_expiry_follow_the_offset(void **state)
{
    testkit_redis_opts opts = {.name = "wallclock", .wallclock = 1};
    testkit_redis *r = testkit_redis_start(&opts);
    redisReply *reply;

    (void)state;
    TK_EXPECT(r != NULL, "a private redis-server under the shim starts");
    expect_offset(r, 0);
    TK_EXPECT(testkit_redis_clock_step(r, 60000) == 0, "step +60 s");
    expect_offset(r, 60000);
    TK_EXPECT(testkit_redis_clock_step(r, -30000) == 0, "step -30 s");
    expect_offset(r, -30000);

    /* A key with 20 s to live is gone once the clock jumps 60 s ahead. */
    TK_EXPECT(testkit_redis_clock_step(r, 0) == 0, "step back to 0");
    reply = testkit_redis_cmd(r->admin_url, "SET k v PX 20000");
    TK_EXPECT(reply != NULL && reply->type == REDIS_REPLY_STATUS, "SET");
    freeReplyObject(reply);
    TK_EXPECT(testkit_redis_int(r->admin_url, "EXISTS k") == 1,
              "the key lives before the step");
    TK_EXPECT(testkit_redis_clock_step(r, 60000) == 0, "step +60 s");
    TK_EXPECT(testkit_redis_int(r->admin_url, "EXISTS k") == 0,
              "the key expired by the server's stepped clock");
    testkit_redis_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(time_and_expiry_follow_the_offset),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
