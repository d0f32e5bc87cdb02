/*
 * test_reviewd_openapi.c: docs/openapi.yaml describes the service that
 * runs (reviewd.openapi_matches_service).
 *
 * The spec is checked the way a client generator reads it, in JavaScript
 * (tools/openapi-check/check.mjs: yaml, then ajv's draft 2020-12
 * validator): every operation, error cases included, each answer's
 * status, required headers and body against the schema, every listed
 * 2xx and 4xx produced with each error code it may carry (holding
 * reviewd's Redis locks by hand for LOCK_BUSY), 405's Allow per path.  This program gives it what
 * the other reviewd tests get from rvt_kit: a fresh database with ids at
 * a random offset, a real reviewd on the stack's Redis, and at the end a
 * SIGTERM that must make reviewd exit 0 (under ASan: no leak, no error).
 *
 * OPENAPI_NODE, OPENAPI_CHECK and OPENAPI_SPEC are set by CTest.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "rvt_kit.h"
#include "testkit.h"

static rvt_db db;
static rvt_server srv;

static int setup(void **state)
{
    (void)state;
    if (testkit_shared_redis() == NULL || rvt_db_create(&db, "openapi") != 0
        || rvt_server_start(&srv, &db, testkit_redis_url(), NULL,
                            "reviewd_openapi")
               != 0
        || rvt_db_offset_ids(&db) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    const int clean = rvt_server_stop(&srv);

    (void)state;
    if (clean)
        rvt_server_remove_dir(&srv);
    rvt_db_drop(&db);
    if (!clean) {
        fprintf(stderr, "reviewd did not exit 0 on SIGTERM\n");
        return -1;
    }
    return 0;
}

/* The value of a variable CTest sets, or a failed test naming it. */
static const char *required_env(const char *name)
{
    const char *v = getenv(name);

    TK_EXPECT(v != NULL && v[0] != '\0', "%s is set (by CTest)", name);
    return v;
}

/* Prints the checker's output (its failures, then its summary line). */
static void print_file(const char *path)
{
    char line[1024];
    FILE *f = fopen(path, "r");

    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL)
        fputs(line, stderr);
    fclose(f);
}

static void every_operation_answers_as_the_spec_says(void **state)
{
    const char *node = required_env("OPENAPI_NODE");
    const char *check = required_env("OPENAPI_CHECK");
    const char *spec = required_env("OPENAPI_SPEC");
    const char *const argv[] = {node, check, spec, NULL};
    char port[48], redis[300], out[700];
    const char *const env[] = {port, redis, "JWT_SECRET=" RVT_SECRET, NULL};
    int status = 0;
    pid_t pid;

    (void)state;
    snprintf(port, sizeof(port), "REVIEWD_PORT=%d", srv.port);
    snprintf(redis, sizeof(redis), "REDIS_URL=%s", testkit_redis_url());
    snprintf(out, sizeof(out), "%s/openapi-check.out", srv.dir);
    pid = rvt_spawn(node, argv, env, out);
    assert_true(pid > 0);
    /* Bounded by check.mjs's own 10 s per request and CTest's TIMEOUT. */
    assert_int_equal(waitpid(pid, &status, 0), pid);
    print_file(out);
    TK_EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "check.mjs passes (status %d; its failures are above)", status);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_operation_answers_as_the_spec_says),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
