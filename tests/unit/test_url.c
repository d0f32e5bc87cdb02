/*
 * test_url.c: the Redis URL parser (src/lib/url.c) on every form that
 * dlock/client.h documents, and on each kind of malformed URL.
 *
 * The parser is tested through its internal entry point dlock__url_parse
 * so that each field of the endpoint can be checked, and so that a
 * malformed URL is seen to fail with DLOCK_INVALID and a message that names
 * the part that is wrong, which is what the person on call reads.  Every
 * case clears its endpoint, so a leak shows up under ASan.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "testkit.h"
#include "url.h"

/* Parses url, expecting success. */
static void parse_ok(const char *url, dlock__endpoint *ep)
{
    dlock__msg m;
    dlock_err err;

    dlock__msg_clear(&m);
    err = dlock__url_parse(url, ep, &m);
    TK_EXPECT(err == DLOCK_OK, "\"%s\" parses, got %s: %s", url,
              dlock_errname(err), m.text);
}

/* Parses url, expecting DLOCK_INVALID with a message containing part. */
static void parse_invalid(const char *url, const char *part)
{
    dlock__endpoint ep;
    dlock__msg m;
    dlock_err err;

    dlock__msg_clear(&m);
    err = dlock__url_parse(url, &ep, &m);
    TK_EXPECT(err == DLOCK_INVALID,
              "\"%s\" is rejected with DLOCK_INVALID, "
              "got %s",
              url, dlock_errname(err));
    TK_EXPECT(strstr(m.text, part) != NULL,
              "the message for \"%s\" names "
              "\"%s\", got \"%s\"",
              url, part, m.text);
    TK_EXPECT(ep.host == NULL && ep.path == NULL && ep.user == NULL
                  && ep.password == NULL,
              "a failed parse of \"%s\" leaves nothing "
              "to free",
              url);
}

static void redis_url_with_host_only_gets_default_port_and_db(void **state)
{
    dlock__endpoint ep;

    (void)state;
    parse_ok("redis://localhost", &ep);
    TK_EXPECT(ep.transport == DLOCK__TCP, "redis:// is plain TCP");
    TK_EXPECT(strcmp(ep.host, "localhost") == 0, "host localhost, got %s",
              ep.host);
    TK_EXPECT(ep.port == 6379, "default port 6379, got %d", ep.port);
    TK_EXPECT(ep.db == 0, "default db 0, got %d", ep.db);
    TK_EXPECT(ep.user == NULL && ep.password == NULL,
              "no credentials when the URL has none");
    TK_EXPECT(strcmp(ep.desc, "localhost:6379") == 0,
              "desc localhost:6379, got %s", ep.desc);
    dlock__endpoint_clear(&ep);
}

static void redis_url_with_port_and_db_path(void **state)
{
    dlock__endpoint ep;

    (void)state;
    parse_ok("redis://127.0.0.1:6380/2", &ep);
    TK_EXPECT(strcmp(ep.host, "127.0.0.1") == 0, "host 127.0.0.1, got %s",
              ep.host);
    TK_EXPECT(ep.port == 6380, "port 6380, got %d", ep.port);
    TK_EXPECT(ep.db == 2, "db 2 from the path, got %d", ep.db);
    TK_EXPECT(strcmp(ep.desc, "127.0.0.1:6380") == 0,
              "desc 127.0.0.1:6380, got %s", ep.desc);
    dlock__endpoint_clear(&ep);
}

static void db_query_parameter_and_trailing_slash(void **state)
{
    dlock__endpoint ep;

    (void)state;
    parse_ok("redis://h?db=5", &ep);
    TK_EXPECT(ep.db == 5, "?db=5 selects db 5, got %d", ep.db);
    dlock__endpoint_clear(&ep);
    parse_ok("redis://h:7000/", &ep);
    TK_EXPECT(ep.db == 0 && ep.port == 7000,
              "a trailing slash keeps db 0, "
              "got db %d port %d",
              ep.db, ep.port);
    dlock__endpoint_clear(&ep);
}

static void scheme_is_case_insensitive(void **state)
{
    dlock__endpoint ep;

    (void)state;
    parse_ok("REDIS://h", &ep);
    TK_EXPECT(ep.transport == DLOCK__TCP, "REDIS:// is plain TCP");
    dlock__endpoint_clear(&ep);
    parse_ok("RedisS://h", &ep);
    TK_EXPECT(ep.transport == DLOCK__TLS, "RedisS:// is TLS");
    dlock__endpoint_clear(&ep);
}

static void rediss_url_is_tls(void **state)
{
    dlock__endpoint ep;

    (void)state;
    parse_ok("rediss://cache.example:6390/1", &ep);
    TK_EXPECT(ep.transport == DLOCK__TLS, "rediss:// is TLS");
    TK_EXPECT(strcmp(ep.host, "cache.example") == 0 && ep.port == 6390
                  && ep.db == 1,
              "host cache.example port 6390 db 1, got %s %d %d", ep.host,
              ep.port, ep.db);
    dlock__endpoint_clear(&ep);
}

static void unix_url_with_absolute_path_and_db(void **state)
{
    dlock__endpoint ep;

    (void)state;
    parse_ok("unix:///run/redis/redis.sock", &ep);
    TK_EXPECT(ep.transport == DLOCK__UNIX, "unix:// is a socket path");
    TK_EXPECT(strcmp(ep.path, "/run/redis/redis.sock") == 0,
              "path /run/redis/redis.sock, got %s", ep.path);
    TK_EXPECT(ep.host == NULL, "a socket URL has no host");
    TK_EXPECT(strcmp(ep.desc, "unix:/run/redis/redis.sock") == 0,
              "desc unix:/run/redis/redis.sock, got %s", ep.desc);
    dlock__endpoint_clear(&ep);
    parse_ok("unix:///tmp/r.sock?db=3", &ep);
    TK_EXPECT(strcmp(ep.path, "/tmp/r.sock") == 0 && ep.db == 3,
              "path /tmp/r.sock db 3, got %s %d", ep.path, ep.db);
    dlock__endpoint_clear(&ep);
}

static void unix_url_with_credentials(void **state)
{
    dlock__endpoint ep;

    (void)state;
    parse_ok("unix://app:secret@/tmp/r.sock", &ep);
    TK_EXPECT(ep.user != NULL && strcmp(ep.user, "app") == 0,
              "user app, got %s", ep.user ? ep.user : "(null)");
    TK_EXPECT(ep.password != NULL && strcmp(ep.password, "secret") == 0,
              "password secret");
    TK_EXPECT(strcmp(ep.path, "/tmp/r.sock") == 0, "path /tmp/r.sock, got %s",
              ep.path);
    dlock__endpoint_clear(&ep);
}

static void user_and_password_forms(void **state)
{
    dlock__endpoint ep;

    (void)state;
    parse_ok("redis://alice:pw@h", &ep);
    TK_EXPECT(strcmp(ep.user, "alice") == 0 && strcmp(ep.password, "pw") == 0,
              "user alice, password pw");
    TK_EXPECT(strcmp(ep.host, "h") == 0, "host h, got %s", ep.host);
    dlock__endpoint_clear(&ep);

    parse_ok("redis://:onlypw@h", &ep);
    TK_EXPECT(ep.user == NULL, "\":pw@\" has no user name");
    TK_EXPECT(ep.password && strcmp(ep.password, "onlypw") == 0,
              "\":pw@\" has password onlypw");
    dlock__endpoint_clear(&ep);

    parse_ok("redis://bob@h", &ep);
    TK_EXPECT(ep.user && strcmp(ep.user, "bob") == 0 && ep.password == NULL,
              "\"bob@\" is a user name without a password");
    dlock__endpoint_clear(&ep);

    parse_ok("redis://u:p@ss@h:1234", &ep);
    TK_EXPECT(strcmp(ep.password, "p@ss") == 0 && strcmp(ep.host, "h") == 0
                  && ep.port == 1234,
              "the userinfo ends at the last '@': password "
              "p@ss, host h, got %s %s",
              ep.password, ep.host);
    dlock__endpoint_clear(&ep);
}

static void user_and_password_are_percent_decoded(void **state)
{
    dlock__endpoint ep;

    (void)state;
    parse_ok("redis://us%40er%3a1:p%3Ass%2F%25x@h", &ep);
    TK_EXPECT(strcmp(ep.user, "us@er:1") == 0,
              "user decodes to us@er:1, "
              "got %s",
              ep.user);
    TK_EXPECT(strcmp(ep.password, "p:ss/%x") == 0,
              "password decodes to p:ss/%%x, got %s", ep.password);
    dlock__endpoint_clear(&ep);
}

static void ipv6_host_in_brackets(void **state)
{
    dlock__endpoint ep;

    (void)state;
    parse_ok("redis://[::1]:6380", &ep);
    TK_EXPECT(strcmp(ep.host, "::1") == 0,
              "host ::1 without brackets, got "
              "%s",
              ep.host);
    TK_EXPECT(ep.port == 6380, "port 6380, got %d", ep.port);
    TK_EXPECT(strcmp(ep.desc, "[::1]:6380") == 0, "desc [::1]:6380, got %s",
              ep.desc);
    dlock__endpoint_clear(&ep);
    parse_ok("redis://u:p@[2001:db8::7]/4", &ep);
    TK_EXPECT(strcmp(ep.host, "2001:db8::7") == 0 && ep.port == 6379
                  && ep.db == 4,
              "host 2001:db8::7, default port, db 4, got %s %d "
              "%d",
              ep.host, ep.port, ep.db);
    dlock__endpoint_clear(&ep);
}

static void empty_url_is_invalid(void **state)
{
    dlock__endpoint ep;
    dlock__msg m;

    (void)state;
    parse_invalid("", "empty");
    dlock__msg_clear(&m);
    TK_EXPECT(dlock__url_parse(NULL, &ep, &m) == DLOCK_INVALID,
              "a NULL URL is DLOCK_INVALID");
    TK_EXPECT(strstr(m.text, "empty") != NULL,
              "a NULL URL is called empty, "
              "got \"%s\"",
              m.text);
}

static void url_without_scheme_is_invalid(void **state)
{
    (void)state;
    parse_invalid("127.0.0.1:6379", "redis://");
    parse_invalid("http://h:6379", "redis://");
    parse_invalid("redis:/h", "redis://");
}

static void port_out_of_range_or_not_a_number_is_invalid(void **state)
{
    (void)state;
    parse_invalid("redis://h:0", "port");
    parse_invalid("redis://h:65536", "port");
    parse_invalid("redis://h:abc", "port");
    parse_invalid("redis://h:", "port");
    parse_invalid("redis://[::1]:99999", "port");
}

static void url_without_host_is_invalid(void **state)
{
    (void)state;
    parse_invalid("redis://", "host");
    parse_invalid("redis://:6379", "host");
    parse_invalid("redis://user:pw@:6379", "host");
    parse_invalid("rediss:///0", "host");
    parse_invalid("redis://[]:6379", "host");
    parse_invalid("redis://[::1", "host");
}

static void relative_unix_path_is_invalid(void **state)
{
    (void)state;
    parse_invalid("unix://redis.sock", "absolute");
    parse_invalid("unix://", "absolute");
    parse_invalid("unix://?db=1", "absolute");
}

static void unknown_parameter_is_invalid(void **state)
{
    (void)state;
    parse_invalid("redis://h?timeout=5", "timeout");
    parse_invalid("unix:///tmp/r.sock?db=1&tls=yes", "tls");
    parse_invalid("redis://h?db=x", "db");
    parse_invalid("redis://h/notadb", "database number");
}

static void control_characters_and_spaces_are_invalid(void **state)
{
    (void)state;
    parse_invalid("redis://h\x01:6379", "control character");
    parse_invalid("redis://h :6379", "control character");
    parse_invalid("redis://h:6379/0\n", "control character");
    parse_invalid("redis://h\x7f", "control character");
}

static void bad_percent_escape_is_invalid(void **state)
{
    (void)state;
    parse_invalid("redis://us%zzer:pw@h", "percent-escape");
    parse_invalid("redis://user:pw%4@h", "percent-escape");
    parse_invalid("redis://user:pw%@h", "password");
    parse_invalid("redis://user%00:pw@h", "user name");
}

static void overlong_url_is_invalid(void **state)
{
    char url[DLOCK__URL_MAX + 64];

    (void)state;
    memset(url, 'a', sizeof(url) - 1);
    memcpy(url, "redis://", 8);
    url[sizeof(url) - 1] = '\0';
    parse_invalid(url, "longer than");
}

static void error_message_never_shows_the_password(void **state)
{
    static const char *const urls[] = {
        "redis://u:s3cretpw@h:0",
        "redis://u:s3cretpw@h?x=1",
        "redis://u:s3cretpw@/0",
        "redis://u:s3cretpw%zz@h",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(urls) / sizeof(*urls); i++) {
        dlock__endpoint ep;
        dlock__msg m;

        dlock__msg_clear(&m);
        TK_EXPECT(dlock__url_parse(urls[i], &ep, &m) == DLOCK_INVALID,
                  "\"%s\" is invalid", urls[i]);
        TK_EXPECT(strstr(m.text, "s3cret") == NULL,
                  "the message for a bad "
                  "URL never contains the password, got \"%s\"",
                  m.text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(redis_url_with_host_only_gets_default_port_and_db),
        cmocka_unit_test(redis_url_with_port_and_db_path),
        cmocka_unit_test(db_query_parameter_and_trailing_slash),
        cmocka_unit_test(scheme_is_case_insensitive),
        cmocka_unit_test(rediss_url_is_tls),
        cmocka_unit_test(unix_url_with_absolute_path_and_db),
        cmocka_unit_test(unix_url_with_credentials),
        cmocka_unit_test(user_and_password_forms),
        cmocka_unit_test(user_and_password_are_percent_decoded),
        cmocka_unit_test(ipv6_host_in_brackets),
        cmocka_unit_test(empty_url_is_invalid),
        cmocka_unit_test(url_without_scheme_is_invalid),
        cmocka_unit_test(port_out_of_range_or_not_a_number_is_invalid),
        cmocka_unit_test(url_without_host_is_invalid),
        cmocka_unit_test(relative_unix_path_is_invalid),
        cmocka_unit_test(unknown_parameter_is_invalid),
        cmocka_unit_test(control_characters_and_spaces_are_invalid),
        cmocka_unit_test(bad_percent_escape_is_invalid),
        cmocka_unit_test(overlong_url_is_invalid),
        cmocka_unit_test(error_message_never_shows_the_password),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
