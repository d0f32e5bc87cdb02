/*
 * test_reviewd_recovery.c: reviewd after a database failure, a backlog
 * and a bad start, against the stack's PostgreSQL.
 *
 *   - keyed POSTs right after PostgreSQL dropped every connection: the
 *     early Idempotency-Key look-up makes its connection again, as the
 *     unkeyed writes always did (before: 503 UNAVAILABLE);
 *   - an idempotency backlog larger than one statement can delete under
 *     the statement timeout drains, in batches (before: the one DELETE
 *     was cancelled every round, for ever);
 *   - the database password is in no line reviewd prints when it cannot
 *     start: a wrong host, a '/' in the password that libpq reads as a
 *     port, a malformed URI, a keyword string without '='.
 *
 * A PostgreSQL restart (pg_ctl restart -m fast) ends every backend with
 * "terminating connection due to administrator command"; the test does
 * exactly that to reviewd's own backends with pg_terminate_backend, which
 * leaves the stack's server, and the tests running beside this one on
 * it, alone.  REVIEWD_THREADS=1 makes sure the request lands on a worker
 * whose connection was cut.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rvt_kit.h"
#include "testkit.h"

#define BACKLOG 50000 /* backlog_sql's rows */

static rvt_db db;
static rvt_server srv;
static char *alice, *bob;
static const rvt_person people[] = {{&alice, "alice", "author"},
                                    {&bob, "bob", "reviewer"},
                                    {NULL, NULL, NULL}};

static int setup(void **state)
{
    /* The sweep every second, under a 1 s statement timeout. */
    const char *const env[] = {"REVIEWD_THREADS=1",
                               "REVIEWD_SWEEP_INTERVAL_S=1",
                               "REVIEWD_PG_TIMEOUT_S=1", NULL};

    (void)state;
    if (testkit_shared_redis() == NULL
        || rvt_fixture_start(&db, &srv, "recovery", testkit_shared_redis(),
                             env, 1)
               != 0)
        return -1;
    return rvt_people_mint(people);
}

static int teardown(void **state)
{
    (void)state;
    return rvt_fixture_end(&db, &srv, people);
}

/* Ends every backend of reviewd on the test database, as a restart would;
 * returns how many. */
static long long cut_reviewd_connections(void)
{
    return rvt_sql_int(&db,
                       "SELECT count(pg_terminate_backend(pid)) FROM "
                       "pg_stat_activity WHERE datname = current_database() "
                       "AND application_name = 'reviewd'");
}

/* 1 once the event loop's PostgreSQL connection is ready (REVIEWD_THREADS
 * is 1: one loop). */
static int loop_ready(void *arg)
{
    (void)arg;
    return rvt_metric(srv.port, "reviewd_pg_loop_connections_ready") >= 1;
}

static void keyed_posts_recover_right_after_a_restart(void **state)
{
    char doc[24], rid[24], path[128];
    rvt_resp r;

    (void)state;
    /* The restart comes after reviewd's start has settled (its loop
     * connects as it starts), as a restart in service does. */
    TK_EXPECT(testkit_wait_until(loop_ready, NULL, 15000),
              "the loop's PostgreSQL connection is ready within 15 s");
    assert_int_equal(rvt_create_doc(srv.port, alice, "restart", doc), 0);
    TK_EXPECT(cut_reviewd_connections() >= 1, "reviewd's worker connection "
                                              "was cut");
    snprintf(path, sizeof(path), "/v1/documents/%s/submit", doc);
    rvt_call(srv.port, "POST", path, alice, NULL, "after-restart-1", &r);
    rvt_expect_status(&r, 201, NULL, "a keyed submit right after the restart");
    snprintf(rid, sizeof(rid), "%s",
             rvt_field(&r, "review.id") != NULL ? rvt_field(&r, "review.id")
                                                : "0");
    rvt_resp_free(&r);
    TK_EXPECT(cut_reviewd_connections() >= 1, "cut again");
    snprintf(path, sizeof(path), "/v1/reviews/%s/approve", rid);
    rvt_call(srv.port, "POST", path, bob, NULL, "after-restart-2", &r);
    rvt_expect_status(&r, 200, NULL,
                      "a keyed approve right after the restart");
    rvt_resp_free(&r);
    rvt_call(srv.port, "POST", path, bob, NULL, "after-restart-2", &r);
    rvt_expect_status(&r, 200, NULL, "its retry, replayed");
    rvt_resp_free(&r);
}

/* ---- the sweep ------------------------------------------------------------ */

/*
 * The backlog, expired an hour ago, and what makes deleting it cost time
 * in proportion to the rows whatever the machine: a statement trigger
 * that sleeps 40 us per deleted row.  One DELETE of the whole backlog
 * then needs 2 s, over the 1 s statement timeout on any machine; a batch
 * of a thousand rows needs 40 ms.  (Without the trigger, whether one
 * DELETE of 50,000 rows outlasts 1 s depends on the machine: 0.1 s here,
 * loaded.)
 */
static const char backlog_sql[] =
    "INSERT INTO kh_idempotency (user_sub, method, path, key, request_hash,"
    " status_code, response_body, expires_at) SELECT 'sweep', 'POST',"
    " '/v1/documents', 'k' || g, sha256(''::bytea), 201, '{}',"
    " now() - interval '1 hour' FROM generate_series(1, 50000) g;"
    "CREATE FUNCTION rvt_slow_delete() RETURNS trigger LANGUAGE plpgsql AS"
    " $fn$ BEGIN PERFORM pg_sleep((SELECT count(*) FROM gone) * 0.00004);"
    " RETURN NULL; END $fn$;"
    "CREATE TRIGGER rvt_slow_delete AFTER DELETE ON kh_idempotency"
    " REFERENCING OLD TABLE AS gone FOR EACH STATEMENT"
    " EXECUTE FUNCTION rvt_slow_delete();";

static int backlog_gone(void *arg)
{
    (void)arg;
    return rvt_sql_int(&db, "SELECT count(*) FROM kh_idempotency WHERE "
                            "user_sub = 'sweep'")
           == 0;
}

static void a_large_expired_backlog_is_swept_in_batches(void **state)
{
    rvt_resp r;
    char want[96];

    (void)state;
    assert_int_equal(rvt_sql(&db, backlog_sql, NULL, 0), 0);
    TK_EXPECT(testkit_wait_until(backlog_gone, NULL, 15000),
              "the %d expired rows were swept within 15 s (%lld left)",
              BACKLOG,
              rvt_sql_int(&db, "SELECT count(*) FROM kh_idempotency "
                               "WHERE user_sub = 'sweep'"));
    /* The restart above may have failed one round on a cut connection;
     * what must never show is the cancelled DELETE of the old sweep. */
    TK_EXPECT(!rvt_server_log_has(&srv, "statement timeout"),
              "no sweep statement ran into the statement timeout");
    rvt_call(srv.port, "GET", "/metrics", NULL, NULL, NULL, &r);
    snprintf(want, sizeof(want), "reviewd_idempotency_swept_total %d",
             BACKLOG);
    TK_EXPECT(r.body != NULL && strstr(r.body, want) != NULL,
              "/metrics counts them: %s", want);
    rvt_resp_free(&r);
    assert_int_equal(rvt_sql(&db,
                             "DROP TRIGGER rvt_slow_delete ON "
                             "kh_idempotency",
                             NULL, 0),
                     0);
}

/* ---- the password --------------------------------------------------------- */

#define PASSWORD_HEAD "Pw9xQz"

static void the_password_is_in_no_start_up_line(void **state)
{
    static const char *const urls[] = {
        "postgresql://rvt:" PASSWORD_HEAD "secret@nohost.invalid:5432/db",
        "postgresql://rvt:" PASSWORD_HEAD "/secret@127.0.0.1:1/db",
        "postgresql://rvt:" PASSWORD_HEAD "secret@[::1/db",
        "host=127.0.0.1 port=1 password " PASSWORD_HEAD "secret",
    };
    const char *const args[] = {"serve", NULL};

    (void)state;
    for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
        char url_env[256], out[8192];
        const char *env[] = {url_env,
                             "JWT_SECRET=" RVT_SECRET,
                             "LISTEN_ADDR=127.0.0.1:0",
                             "REVIEWD_PG_TIMEOUT_S=2",
                             "REVIEWD_LOG_LEVEL=debug",
                             NULL};
        int status;

        snprintf(url_env, sizeof(url_env), "DATABASE_URL=%s", urls[i]);
        status = rvt_run_reviewd(args, env, out, sizeof(out));
        TK_EXPECT(status > 0,
                  "reviewd refused to start with %s (status "
                  "%d)",
                  urls[i], status);
        TK_EXPECT(strstr(out, "DATABASE_URL") != NULL,
                  "the error names "
                  "DATABASE_URL: %s",
                  out);
        TK_EXPECT(strstr(out, PASSWORD_HEAD) == NULL,
                  "no piece of the "
                  "password in what reviewd printed for %s:\n%s",
                  urls[i], out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(keyed_posts_recover_right_after_a_restart),
        cmocka_unit_test(a_large_expired_backlog_is_swept_in_batches),
        cmocka_unit_test(the_password_is_in_no_start_up_line),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
