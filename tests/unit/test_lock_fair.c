/*
 * test_lock_fair.c: the fair lock's grant message (src/lib/lock/lock_fair.c):
 * what a waiter reads from it and when it may hold the lock on it.
 *
 * A grant is "try:fence:confirm_ms" exactly; anything else (the empty
 * nudge, a missing field, a sign, a fence of 0) is not one.  A grant is
 * taken only for the waiter's latest queued try, with a fence above the
 * floor that try proves, and its validity is the confirm window counted from
 * that try's send time less the lease's drift allowance, so a waiter that
 * sat in the queue longer than the window does not take it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "base/lease.h"
#include "lock/lock_fair.h"
#include "testkit.h"

static int parse(const char *msg, dlock__fair_grant *g)
{
    return dlock__fair_grant_parse(msg, strlen(msg), g);
}

static void grant_message_is_read_exactly(void **state)
{
    dlock__fair_grant g;

    (void)state;
    TK_EXPECT(parse("7:1700000000000123:2000", &g), "a grant parses");
    TK_EXPECT(g.try_seq == 7 && g.fence == 1700000000000123ull
                  && g.confirm_ms == 2000,
              "its fields: %llu %llu %lld", (unsigned long long)g.try_seq,
              (unsigned long long)g.fence, (long long)g.confirm_ms);
    TK_EXPECT(!parse("", &g), "the empty nudge is no grant");
    TK_EXPECT(!parse("7:123", &g), "two fields are no grant");
    TK_EXPECT(!parse("7:123:2000:1", &g), "four fields are no grant");
    TK_EXPECT(!parse("7:-123:2000", &g), "a sign is no grant");
    TK_EXPECT(!parse("7:0:2000", &g), "fence 0 is no grant");
    TK_EXPECT(!parse("7::2000", &g), "an empty field is no grant");
    TK_EXPECT(!parse("7:123456789012345678901:2000", &g),
              "a fence past 20 digits is no grant");
    TK_EXPECT(dlock__fair_grant_parse("7:12:20009", 7, &g)
                  && g.confirm_ms == 20,
              "only len bytes are read");
}

static int nudge(const char *msg, int64_t *ms)
{
    return dlock__fair_nudge_parse(msg, strlen(msg), ms);
}

/* A nudge with the holder's time is one decimal field; a grant, the
 * empty nudge and anything else are not. */
static void nudge_message_is_read_exactly(void **state)
{
    dlock__fair_grant g;
    int64_t ms = -1;

    (void)state;
    TK_EXPECT(nudge("2000", &ms) && ms == 2000, "a nudge parses: %lld",
              (long long)ms);
    TK_EXPECT(!parse("2000", &g), "a nudge is no grant");
    TK_EXPECT(!nudge("7:1700000000000123:2000", &ms), "a grant is no nudge");
    TK_EXPECT(!nudge("", &ms), "the empty nudge carries no time");
    TK_EXPECT(!nudge("-5", &ms) && !nudge("5x", &ms) && !nudge("5:", &ms),
              "only digits");
    TK_EXPECT(!nudge("123456789012345678901", &ms), "at most 20 digits");
}

static void grant_is_taken_only_when_it_is_safe(void **state)
{
    const dlock__fair_grant g = {.try_seq = 3,
                                 .fence = 500,
                                 .confirm_ms = 2000};
    const int64_t sent = 10000000;
    const dlock__fair_queued q = {.try_seq = 3, .sent_us = sent, .floor = 400};
    const dlock__fair_queued older = {.try_seq = 4, .sent_us = sent};
    const dlock__fair_queued none = {0};
    const dlock__fair_queued high = {.try_seq = 3,
                                     .sent_us = sent,
                                     .floor = 500};
    int64_t until;

    (void)state;
    TK_EXPECT(dlock__fair_grant_check(&g, &q, sent + 1000, &until),
              "a grant of the latest queued try is taken");
    TK_EXPECT(until == dlock__lease_until_of(sent, 2000)
                  && until < sent + 2000000,
              "validity counts from the try's send time, less drift: %lld",
              (long long)(until - sent));
    TK_EXPECT(!dlock__fair_grant_check(&g, &older, sent + 1000, &until),
              "a grant of an older try than the latest is not taken");
    TK_EXPECT(!dlock__fair_grant_check(&g, &none, sent + 1000, &until),
              "no queued try: not taken");
    TK_EXPECT(!dlock__fair_grant_check(&g, &high, sent + 1000, &until),
              "a fence not above the floor is not taken");
    TK_EXPECT(!dlock__fair_grant_check(&g, &q, sent + 1990000, &until),
              "a confirm window spent in the queue is not taken");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grant_message_is_read_exactly),
        cmocka_unit_test(grant_is_taken_only_when_it_is_safe),
        cmocka_unit_test(nudge_message_is_read_exactly),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
