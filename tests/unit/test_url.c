/*
 * test_url.c: the Redis URL parsers of src/lib/transport/url.c on every form that
 * dlock/client.h documents, and on each kind of malformed URL: the
 * single-server parser (dlock__url_parse) and the deployment parser
 * (dlock__url_parse_deployment: Sentinel, Cluster, Redlock).
 *
 * The parsers are tested through their internal entry points so that
 * each field of the endpoint, and each node of a deployment, can be
 * checked (every node must carry its own copy of what the URL shares:
 * credentials, TLS, db), and so that a malformed URL is seen to fail with
 * DLOCK_INVALID, a message that names the part that is wrong (what the
 * person on call reads), never the password, and nothing left to free.
 * The single-server parser must refuse deployment schemes with a message
 * that says what they are, not "unknown scheme".  Every case clears what
 * it parsed, so a leak shows up under ASan.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "testkit.h"
#include "transport/url.h"

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

/* What every refused URL must show, whichever parser refused it: err is
 * DLOCK_INVALID, the message names part (NULL: any part) and never the
 * password, and left_nothing says the output holds nothing to free. */
static void expect_refused(const char *url, dlock_err err, const char *msg,
                           const char *part, int left_nothing)
{
    TK_EXPECT(err == DLOCK_INVALID,
              "\"%s\" is rejected with DLOCK_INVALID, "
              "got %s",
              url, dlock_errname(err));
    TK_EXPECT(part == NULL || strstr(msg, part) != NULL,
              "the message for \"%s\" names "
              "\"%s\", got \"%s\"",
              url, part, msg);
    TK_EXPECT(strstr(msg, "s3cret") == NULL,
              "the message for \"%s\" never contains the password, got "
              "\"%s\"",
              url, msg);
    TK_EXPECT(left_nothing, "a failed parse of \"%s\" leaves nothing to free",
              url);
}

/* Parses url as one server, expecting it refused (see expect_refused). */
static void parse_invalid(const char *url, const char *part)
{
    dlock__endpoint ep;
    dlock__msg m;
    dlock_err err;

    dlock__msg_clear(&m);
    err = dlock__url_parse(url, &ep, &m);
    expect_refused(url, err, m.text, part,
                   ep.host == NULL && ep.path == NULL && ep.user == NULL
                       && ep.password == NULL);
}

/* Parses url as a deployment, expecting success. */
static void parse_deployment_ok(const char *url, dlock__deployment *d)
{
    dlock__msg m;
    dlock_err err;

    dlock__msg_clear(&m);
    err = dlock__url_parse_deployment(url, d, &m);
    TK_EXPECT(err == DLOCK_OK, "\"%s\" parses, got %s: %s", url,
              dlock_errname(err), m.text);
}

static int deployment_is_empty(const dlock__deployment *d)
{
    if (d->nnodes != 0 || d->master_name != NULL)
        return 0;
    for (int i = 0; i < DLOCK__NODES_MAX; i++)
        if (d->nodes[i].host != NULL || d->nodes[i].user != NULL
            || d->nodes[i].password != NULL || d->nodes[i].path != NULL)
            return 0;
    return 1;
}

/* Parses url as a deployment, expecting it refused (see expect_refused). */
static void parse_deployment_invalid(const char *url, const char *part)
{
    dlock__deployment d;
    dlock__msg m;
    dlock_err err;

    dlock__msg_clear(&m);
    err = dlock__url_parse_deployment(url, &d, &m);
    expect_refused(url, err, m.text, part, deployment_is_empty(&d));
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

static void expect_node(const dlock__deployment *d, int i, const char *host,
                        int port)
{
    TK_EXPECT(i < d->nnodes, "node %d exists (of %d)", i, d->nnodes);
    TK_EXPECT(strcmp(d->nodes[i].host, host) == 0 && d->nodes[i].port == port,
              "node %d is %s:%d, got %s", i, host, port, d->nodes[i].desc);
}

static void sentinel_url_names_sentinels_and_master(void **state)
{
    dlock__deployment d;

    (void)state;
    parse_deployment_ok("redis+sentinel://10.0.0.1:26380,10.0.0.2,[::1]:26381/"
                        "mymaster?db=3",
                        &d);
    TK_EXPECT(d.kind == DLOCK__SENTINEL, "a Sentinel deployment");
    TK_EXPECT(d.nnodes == 3, "three sentinels, got %d", d.nnodes);
    expect_node(&d, 0, "10.0.0.1", 26380);
    expect_node(&d, 1, "10.0.0.2", 26379);
    expect_node(&d, 2, "::1", 26381);
    TK_EXPECT(strcmp(d.master_name, "mymaster") == 0, "master mymaster");
    TK_EXPECT(d.db == 3, "the locks' db is 3, got %d", d.db);
    for (int i = 0; i < d.nnodes; i++)
        TK_EXPECT(d.nodes[i].db == 0 && d.nodes[i].transport == DLOCK__TCP,
                  "a sentinel is reached over TCP with no SELECT");
    dlock__deployment_clear(&d);
}

static void tls_and_credentials_apply_to_every_node(void **state)
{
    static const char *const urls[] = {
        "rediss+sentinel://al%40x:pw@h1:1,h2:2/m",
        "rediss+cluster://al%40x:pw@h1:1,h2:2",
        "redlocks://al%40x:pw@h1:1,h2:2,h3:3",
    };

    (void)state;
    for (size_t u = 0; u < sizeof(urls) / sizeof(*urls); u++) {
        dlock__deployment d;

        parse_deployment_ok(urls[u], &d);
        for (int i = 0; i < d.nnodes; i++) {
            TK_EXPECT(d.nodes[i].transport == DLOCK__TLS,
                      "node %d of %s "
                      "uses TLS",
                      i, urls[u]);
            TK_EXPECT(d.nodes[i].user != NULL
                          && strcmp(d.nodes[i].user, "al@x") == 0
                          && d.nodes[i].password != NULL
                          && strcmp(d.nodes[i].password, "pw") == 0,
                      "node %d of %s has the decoded credentials", i, urls[u]);
        }
        dlock__deployment_clear(&d);
    }
}

static void cluster_url_lists_seed_nodes(void **state)
{
    dlock__deployment d;

    (void)state;
    parse_deployment_ok("REDIS+CLUSTER://127.0.0.1:7000,127.0.0.1:7001/0", &d);
    TK_EXPECT(d.kind == DLOCK__CLUSTER && d.nnodes == 2, "two seeds");
    expect_node(&d, 0, "127.0.0.1", 7000);
    expect_node(&d, 1, "127.0.0.1", 7001);
    TK_EXPECT(strcmp(d.nodes[1].desc, "127.0.0.1:7001") == 0,
              "described as host:port, got %s", d.nodes[1].desc);
    dlock__deployment_clear(&d);
    parse_deployment_ok("redis+cluster://seed", &d);
    expect_node(&d, 0, "seed", 6379);
    dlock__deployment_clear(&d);
}

static void redlock_url_lists_masters_with_db(void **state)
{
    dlock__deployment d;

    (void)state;
    parse_deployment_ok("redlock://a:7000,b:7001,c:7002,d:7003,e:7004/2", &d);
    TK_EXPECT(d.kind == DLOCK__REDLOCK && d.nnodes == 5, "five masters");
    for (int i = 0; i < d.nnodes; i++)
        TK_EXPECT(d.nodes[i].db == 2 && d.nodes[i].port == 7000 + i,
                  "master %d on port %d with db 2", i, 7000 + i);
    dlock__deployment_clear(&d);
}

static void single_server_urls_give_one_node(void **state)
{
    dlock__deployment d;

    (void)state;
    parse_deployment_ok("redis://u:p@h:7/4", &d);
    TK_EXPECT(d.kind == DLOCK__SINGLE && d.nnodes == 1 && d.db == 4,
              "one node, db 4");
    expect_node(&d, 0, "h", 7);
    dlock__deployment_clear(&d);
}

static void every_url_takes_the_replica_parameters(void **state)
{
    dlock__deployment d;

    (void)state;
    parse_deployment_ok("redis://h:7/4?wait_replicas=2&wait_timeout=300", &d);
    TK_EXPECT(d.db == 4 && d.wait_replicas == 2 && d.wait_timeout_ms == 300,
              "db 4, 2 replicas in 300 ms, got %d, %d, %d", d.db,
              d.wait_replicas, d.wait_timeout_ms);
    dlock__deployment_clear(&d);
    parse_deployment_ok("redis+sentinel://a,b/m?wait_replicas=1&db=2", &d);
    TK_EXPECT(d.db == 2 && d.wait_replicas == 1 && d.wait_timeout_ms == 0,
              "db 2, 1 replica, the default timeout");
    dlock__deployment_clear(&d);
    parse_deployment_invalid("redis://h?wait_replicas=two",
                             "not a number in range");
    parse_deployment_invalid("redis://h?wait_replicas=65",
                             "not a number in range");
    parse_deployment_invalid("redis+sentinel://a/m?wait=1", "wait_replicas=N");
}

static void single_server_parser_refuses_deployments(void **state)
{
    static const char *const urls[] = {
        "redis+sentinel://h/m",
        "redis+cluster://h",
        "redlock://a,b,c",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(urls) / sizeof(*urls); i++) {
        dlock__endpoint ep;
        dlock__msg m;

        dlock__msg_clear(&m);
        TK_EXPECT(dlock__url_parse(urls[i], &ep, &m) == DLOCK_INVALID,
                  "%s is not one server", urls[i]);
        TK_EXPECT(strstr(m.text, "names several servers") != NULL,
                  "the message says why, got \"%s\"", m.text);
    }
}

static void malformed_deployment_urls_are_invalid(void **state)
{
    (void)state;
    parse_deployment_invalid("redis+sentinel://h1,h2", "master's name");
    parse_deployment_invalid("redis+sentinel://h1,h2/", "master's name");
    parse_deployment_invalid("redis+sentinel://h1/ma$ter",
                             "master name may hold");
    parse_deployment_invalid("redis+cluster://h1,,h2",
                             "empty entry (server 2)");
    parse_deployment_invalid("redis+cluster://h1,", "empty entry");
    parse_deployment_invalid("redis+cluster://h1:0,h2", "server 1 of the URL");
    parse_deployment_invalid("redis+cluster://h1,h2:x", "server 2 of the URL");
    parse_deployment_invalid("redis+cluster://h1/3", "only database 0");
    parse_deployment_invalid("redis+cluster://h1?db=1", "only database 0");
    parse_deployment_invalid("redlock://a,b", "at least 3");
    parse_deployment_invalid("redlock://a,b,c/x", "database number");
    parse_deployment_invalid("redlock://a:1,b:2,A:1", "names A:1 twice");
    parse_deployment_invalid("redlock://a:6379,b,a", "twice");
    parse_deployment_invalid("redlock://a,b,c?timeout=1",
                             "unknown URL parameter");
    parse_deployment_invalid("redlock://u:p%zz@a,b,c", "percent-escape");
    parse_deployment_invalid("redlock://a,b,c d", "space");
}

static void more_than_the_node_limit_is_invalid(void **state)
{
    char url[512] = "redlock://";

    (void)state;
    for (int i = 0; i <= DLOCK__NODES_MAX; i++) {
        size_t at = strlen(url);

        snprintf(url + at, sizeof(url) - at, "%sh:%d", i ? "," : "", 7000 + i);
    }
    parse_deployment_invalid(url, "more than 16 servers");
}

/* Every allocation of a parse may fail: each gives DLOCK_NOMEM and, under
 * ASan, no leak. */
static void allocation_failure_unwinds(void **state)
{
    static const char url[] =
        "rediss+sentinel://u:p@h1:1,h2:2,h3:3/master?db=2";
    dlock__deployment d;
    dlock__msg m;
    long n, allocations;

    (void)state;
    dlock__alloc_fail_nth(0);
    parse_deployment_ok(url, &d);
    dlock__deployment_clear(&d);
    allocations = dlock__alloc_count();
    TK_EXPECT(allocations > 3, "the parse allocates, counted %ld",
              allocations);
    for (n = 1; n <= allocations; n++) {
        dlock_err err;

        dlock__alloc_fail_nth(n);
        err = dlock__url_parse_deployment(url, &d, &m);
        dlock__alloc_fail_nth(0);
        TK_EXPECT(err == DLOCK_NOMEM,
                  "allocation %ld failing gives NOMEM, "
                  "got %s",
                  n, dlock_errname(err));
        TK_EXPECT(deployment_is_empty(&d), "nothing is left to free");
    }
}

/* Each bad URL, single-server or deployment, fed to both parsers: each
 * refuses it, and no message shows the password. */
static void error_message_never_shows_the_password(void **state)
{
    static const char *const urls[] = {
        "redis://u:s3cretpw@h:0",         "redis://u:s3cretpw@h?x=1",
        "redis://u:s3cretpw@/0",          "redis://u:s3cretpw%zz@h",
        "redlock://u:s3cretpw@a,b",       "redis+sentinel://u:s3cretpw@a,b",
        "redis+cluster://u:s3cretpw@a,a", "redlocks://u:s3cretpw@a,b,c/q",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(urls) / sizeof(*urls); i++) {
        parse_invalid(urls[i], NULL);
        parse_deployment_invalid(urls[i], NULL);
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
        cmocka_unit_test(sentinel_url_names_sentinels_and_master),
        cmocka_unit_test(tls_and_credentials_apply_to_every_node),
        cmocka_unit_test(cluster_url_lists_seed_nodes),
        cmocka_unit_test(redlock_url_lists_masters_with_db),
        cmocka_unit_test(single_server_urls_give_one_node),
        cmocka_unit_test(every_url_takes_the_replica_parameters),
        cmocka_unit_test(single_server_parser_refuses_deployments),
        cmocka_unit_test(malformed_deployment_urls_are_invalid),
        cmocka_unit_test(more_than_the_node_limit_is_invalid),
        cmocka_unit_test(allocation_failure_unwinds),
        cmocka_unit_test(error_message_never_shows_the_password),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
