/*
 * test_cli_duration.c: the duration parser behind --ttl, --wait and
 * --grace (src/cli/cli_duration.c).
 *
 * Every documented form parses to the exact number of milliseconds, and
 * every kind of junk is refused rather than read as some other duration,
 * since a mistyped TTL that parsed would silently change how long a lock
 * lives.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "cli_duration.h"
#include "testkit.h"

static void expect_ms(const char *text, int64_t want)
{
    int64_t got = -2;
    int rc = cli_duration_parse(text, &got);

    TK_EXPECT(rc == 0, "\"%s\" parses", text);
    TK_EXPECT(got == want, "\"%s\" is %lld ms, got %lld", text,
              (long long)want, (long long)got);
}

static void expect_refused(const char *text)
{
    int64_t got = -2;
    int rc = cli_duration_parse(text, &got);

    TK_EXPECT(rc == -1, "\"%s\" is refused, got %lld ms", text,
              (long long)got);
    TK_EXPECT(got == 0, "a refused \"%s\" leaves 0, got %lld", text,
              (long long)got);
}

static void every_unit_gives_milliseconds(void **state)
{
    (void)state;
    expect_ms("500ms", 500);
    expect_ms("30s", 30000);
    expect_ms("5m", 300000);
    expect_ms("1h", 3600000);
    expect_ms("0", 0);
    expect_ms("0ms", 0);
}

static void bare_number_means_seconds(void **state)
{
    (void)state;
    expect_ms("10", 10000);
    expect_ms("1", 1000);
}

static void fractions_are_exact_to_the_millisecond(void **state)
{
    (void)state;
    expect_ms("1.5s", 1500);
    expect_ms("0.5", 500);
    expect_ms("0.001s", 1);
    expect_ms("1.25m", 75000);
    expect_ms("2.500s", 2500);
    expect_refused("0.0001s");
    expect_refused("1.5ms");
}

static void junk_is_refused(void **state)
{
    static const char *const junk[] = {
        "",      " 5s",  "5s ",   "5 s",  "-5s", "+5s",     "30x", "s",
        "ms",    "5sec", "1e3",   "0x10", "inf", "nan",     ".5s", "5.",
        "5..5s", "5.s",  "1h30m", "5S",   "5M",  "forever", "-1",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
        expect_refused(junk[i]);
}

static void durations_beyond_ten_years_are_refused(void **state)
{
    (void)state;
    expect_ms("87600h", CLI_DURATION_MAX_MS);
    expect_refused("87601h");
    expect_refused("999999999999h");
    expect_refused("9999999999999999999999s");
}

static void wait_also_takes_forever_and_minus_one(void **state)
{
    int64_t ms = 0;

    (void)state;
    TK_EXPECT(cli_duration_parse_wait("forever", &ms) == 0 && ms == -1,
              "--wait forever is -1, got %lld", (long long)ms);
    ms = 0;
    TK_EXPECT(cli_duration_parse_wait("-1", &ms) == 0 && ms == -1,
              "--wait -1 is -1, got %lld", (long long)ms);
    TK_EXPECT(cli_duration_parse_wait("10s", &ms) == 0 && ms == 10000,
              "--wait 10s is 10000, got %lld", (long long)ms);
    TK_EXPECT(cli_duration_parse_wait("-2", &ms) == -1,
              "--wait -2 is refused");
    TK_EXPECT(cli_duration_parse_wait("Forever", &ms) == -1,
              "--wait Forever is refused");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_unit_gives_milliseconds),
        cmocka_unit_test(bare_number_means_seconds),
        cmocka_unit_test(fractions_are_exact_to_the_millisecond),
        cmocka_unit_test(junk_is_refused),
        cmocka_unit_test(durations_beyond_ten_years_are_refused),
        cmocka_unit_test(wait_also_takes_forever_and_minus_one),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
