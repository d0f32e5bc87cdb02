/*
 * test_url_deployment.c: the deployment URLs of src/lib/url.c (Sentinel,
 * Cluster, Redlock), parsed by dlock__url_parse_deployment.
 *
 * Each accepted form is checked node by node, since every node must carry
 * its own copy of what the URL shares (credentials, TLS, db); each refused
 * form must fail with DLOCK_INVALID, a message naming the wrong part, and
 * nothing left to free.  The single-server parser must refuse deployment
 * schemes with a message that says what they are, not "unknown scheme".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "testkit.h"
#include "url.h"

static void parse_ok(const char *url, dlock__deployment *d)
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

static void parse_invalid(const char *url, const char *part)
{
    dlock__deployment d;
    dlock__msg m;
    dlock_err err;

    dlock__msg_clear(&m);
    err = dlock__url_parse_deployment(url, &d, &m);
    TK_EXPECT(err == DLOCK_INVALID,
              "\"%s\" is rejected with DLOCK_INVALID, "
              "got %s",
              url, dlock_errname(err));
    TK_EXPECT(strstr(m.text, part) != NULL,
              "the message for \"%s\" names "
              "\"%s\", got \"%s\"",
              url, part, m.text);
    TK_EXPECT(deployment_is_empty(&d),
              "a failed parse of \"%s\" leaves "
              "nothing to free",
              url);
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
    parse_ok("redis+sentinel://10.0.0.1:26380,10.0.0.2,[::1]:26381/"
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

        parse_ok(urls[u], &d);
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
    parse_ok("REDIS+CLUSTER://127.0.0.1:7000,127.0.0.1:7001/0", &d);
    TK_EXPECT(d.kind == DLOCK__CLUSTER && d.nnodes == 2, "two seeds");
    expect_node(&d, 0, "127.0.0.1", 7000);
    expect_node(&d, 1, "127.0.0.1", 7001);
    TK_EXPECT(strcmp(d.nodes[1].desc, "127.0.0.1:7001") == 0,
              "described as host:port, got %s", d.nodes[1].desc);
    dlock__deployment_clear(&d);
    parse_ok("redis+cluster://seed", &d);
    expect_node(&d, 0, "seed", 6379);
    dlock__deployment_clear(&d);
}

static void redlock_url_lists_masters_with_db(void **state)
{
    dlock__deployment d;

    (void)state;
    parse_ok("redlock://a:7000,b:7001,c:7002,d:7003,e:7004/2", &d);
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
    parse_ok("redis://u:p@h:7/4", &d);
    TK_EXPECT(d.kind == DLOCK__SINGLE && d.nnodes == 1 && d.db == 4,
              "one node, db 4");
    expect_node(&d, 0, "h", 7);
    dlock__deployment_clear(&d);
}

static void every_url_takes_the_replica_parameters(void **state)
{
    dlock__deployment d;

    (void)state;
    parse_ok("redis://h:7/4?wait_replicas=2&wait_timeout=300", &d);
    TK_EXPECT(d.db == 4 && d.wait_replicas == 2 && d.wait_timeout_ms == 300,
              "db 4, 2 replicas in 300 ms, got %d, %d, %d", d.db,
              d.wait_replicas, d.wait_timeout_ms);
    dlock__deployment_clear(&d);
    parse_ok("redis+sentinel://a,b/m?wait_replicas=1&db=2", &d);
    TK_EXPECT(d.db == 2 && d.wait_replicas == 1 && d.wait_timeout_ms == 0,
              "db 2, 1 replica, the default timeout");
    dlock__deployment_clear(&d);
    parse_invalid("redis://h?wait_replicas=two", "not a number in range");
    parse_invalid("redis://h?wait_replicas=65", "not a number in range");
    parse_invalid("redis+sentinel://a/m?wait=1", "wait_replicas=N");
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
    parse_invalid("redis+sentinel://h1,h2", "master's name");
    parse_invalid("redis+sentinel://h1,h2/", "master's name");
    parse_invalid("redis+sentinel://h1/ma$ter", "master name may hold");
    parse_invalid("redis+cluster://h1,,h2", "empty entry (server 2)");
    parse_invalid("redis+cluster://h1,", "empty entry");
    parse_invalid("redis+cluster://h1:0,h2", "server 1 of the URL");
    parse_invalid("redis+cluster://h1,h2:x", "server 2 of the URL");
    parse_invalid("redis+cluster://h1/3", "only database 0");
    parse_invalid("redis+cluster://h1?db=1", "only database 0");
    parse_invalid("redlock://a,b", "at least 3");
    parse_invalid("redlock://a,b,c/x", "database number");
    parse_invalid("redlock://a:1,b:2,A:1", "names A:1 twice");
    parse_invalid("redlock://a:6379,b,a", "twice");
    parse_invalid("redlock://a,b,c?timeout=1", "unknown URL parameter");
    parse_invalid("redlock://u:p%zz@a,b,c", "percent-escape");
    parse_invalid("redlock://a,b,c d", "space");
}

static void more_than_the_node_limit_is_invalid(void **state)
{
    char url[512] = "redlock://";

    (void)state;
    for (int i = 0; i <= DLOCK__NODES_MAX; i++) {
        size_t at = strlen(url);

        snprintf(url + at, sizeof(url) - at, "%sh:%d", i ? "," : "", 7000 + i);
    }
    parse_invalid(url, "more than 16 servers");
}

static void error_message_never_shows_the_password(void **state)
{
    static const char *const urls[] = {
        "redlock://u:s3cretpw@a,b",
        "redis+sentinel://u:s3cretpw@a,b",
        "redis+cluster://u:s3cretpw@a,a",
        "redlocks://u:s3cretpw@a,b,c/q",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(urls) / sizeof(*urls); i++) {
        dlock__deployment d;
        dlock__msg m;

        dlock__msg_clear(&m);
        TK_EXPECT(dlock__url_parse_deployment(urls[i], &d, &m)
                      == DLOCK_INVALID,
                  "\"%s\" is invalid", urls[i]);
        TK_EXPECT(strstr(m.text, "s3cret") == NULL,
                  "the message never "
                  "contains the password, got \"%s\"",
                  m.text);
    }
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
    parse_ok(url, &d);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sentinel_url_names_sentinels_and_master),
        cmocka_unit_test(tls_and_credentials_apply_to_every_node),
        cmocka_unit_test(cluster_url_lists_seed_nodes),
        cmocka_unit_test(redlock_url_lists_masters_with_db),
        cmocka_unit_test(single_server_urls_give_one_node),
        cmocka_unit_test(every_url_takes_the_replica_parameters),
        cmocka_unit_test(single_server_parser_refuses_deployments),
        cmocka_unit_test(malformed_deployment_urls_are_invalid),
        cmocka_unit_test(more_than_the_node_limit_is_invalid),
        cmocka_unit_test(error_message_never_shows_the_password),
        cmocka_unit_test(allocation_failure_unwinds),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
