/*
 * test_bad_urls.c: malformed URLs and options through dlock_client_new.
 *
 * A wrong URL must fail at once with DLOCK_INVALID and a message in errbuf
 * that names what is wrong, before any connection is tried (so it is fast
 * even with a long connect timeout), and must hand out no client.  errbuf
 * must be NUL-terminated when it is small, and may be NULL.
 */
#include "itkit.h"

#include <string.h>

static const struct {
    const char *url;
    const char *names;
} bad_urls[] = {
    {"", "empty"},
    {"localhost:6379", "redis://"},
    {"http://localhost:6379", "redis://"},
    {"redis://localhost:0", "port"},
    {"redis://localhost:65536", "port"},
    {"redis://localhost:abc", "port"},
    {"redis://:6379", "host"},
    {"unix://relative/redis.sock", "absolute"},
    {"redis://localhost?timeout=1", "timeout"},
    {"redis://local host", "control character"},
    {"redis://us%zz:pw@localhost", "percent-escape"},
    {"redis://localhost/db7", "database number"},
};

static void malformed_urls_are_invalid_with_a_clear_message(void **state)
{
    dlock_client_opts o = itkit_client_opts();

    (void)state;
    o.connect_timeout_ms = 5000;
    for (size_t i = 0; i < sizeof(bad_urls) / sizeof(*bad_urls); i++) {
        char errbuf[DLOCK_ERRMSG_MAX] = "";
        dlock_client *c = NULL;
        int64_t started = testkit_now_ms();
        dlock_err err = dlock_client_new(bad_urls[i].url, &o, &c, errbuf,
                                         sizeof(errbuf));
        int64_t took = testkit_now_ms() - started;

        TK_EXPECT(err == DLOCK_INVALID, "\"%s\" is DLOCK_INVALID, got %s: %s",
                  bad_urls[i].url, dlock_errname(err), errbuf);
        TK_EXPECT(c == NULL, "\"%s\" hands out no client", bad_urls[i].url);
        TK_EXPECT(strstr(errbuf, bad_urls[i].names) != NULL,
                  "the message "
                  "for \"%s\" names \"%s\": %s",
                  bad_urls[i].url, bad_urls[i].names, errbuf);
        TK_EXPECT(strstr(errbuf, dlock_strerror(DLOCK_INVALID)) != NULL,
                  "the message ends with the code's text: %s", errbuf);
        TK_EXPECT(took < 100,
                  "\"%s\" fails before any connection attempt, "
                  "took %lld ms",
                  bad_urls[i].url, (long long)took);
    }
}

static void small_or_missing_errbuf_is_safe(void **state)
{
    char small[8];
    dlock_client *c = NULL;

    (void)state;
    memset(small, 'x', sizeof(small));
    TK_EXPECT(dlock_client_new("redis://h:0", NULL, &c, small, sizeof(small))
                  == DLOCK_INVALID,
              "a bad port is invalid with a small errbuf");
    TK_EXPECT(memchr(small, '\0', sizeof(small)) != NULL, "a small errbuf is "
                                                          "NUL-terminated");
    TK_EXPECT(dlock_client_new("redis://h:0", NULL, &c, NULL, 0)
                  == DLOCK_INVALID,
              "a bad port is invalid with no errbuf");
    TK_EXPECT(dlock_client_new(NULL, NULL, &c, NULL, 0) == DLOCK_INVALID,
              "a NULL URL is invalid");
    TK_EXPECT(c == NULL, "no client is handed out");
}

static void invalid_options_are_rejected(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client_opts o = itkit_client_opts();
    char errbuf[DLOCK_ERRMSG_MAX] = "";
    dlock_client *c = NULL;

    (void)state;
    o.pool_size = 5000;
    TK_EXPECT(dlock_client_new(url, &o, &c, errbuf, sizeof(errbuf))
                  == DLOCK_INVALID,
              "pool_size 5000 is invalid: %s", errbuf);
    TK_EXPECT(strstr(errbuf, "pool_size") != NULL,
              "the message names "
              "pool_size: %s",
              errbuf);
    o = itkit_client_opts();
    o.connect_timeout_ms = -1;
    TK_EXPECT(dlock_client_new(url, &o, &c, errbuf, sizeof(errbuf))
                  == DLOCK_INVALID,
              "a negative timeout is invalid: %s", errbuf);
    TK_EXPECT(c == NULL, "no client is handed out");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(malformed_urls_are_invalid_with_a_clear_message),
        cmocka_unit_test(small_or_missing_errbuf_is_safe),
        cmocka_unit_test(invalid_options_are_rejected),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
