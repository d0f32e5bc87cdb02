/*
 * test_reviewd_loopreads.c: GET /v1/documents/{id} answered on the
 * event loop (REVIEWD_LOOP_READS, http/rv_loop.h, handlers/rv_doc_loop.h).
 *
 *   - a loop connects to PostgreSQL when it starts, so the first read
 *     after a start is answered on it;
 *   - the read is really answered there (reviewd_loop_document_reads_total
 *     in /metrics grows), with the reply the worker path gives: the body
 *     of the 201 that created the document byte for byte, the caller's
 *     X-Request-Id echoed, 404 NOT_FOUND for a missing id, 401 without a
 *     token, and a read with ?include=content still served (by a worker);
 *   - reviewd's PostgreSQL connections cut again and again (as a restart
 *     does, pg_terminate_backend, as test_reviewd_recovery.c) while
 *     client threads keep reading: every read gets 200 or 503, never no
 *     answer; /healthz answers all along; and afterwards the loops have
 *     made their connections again (the counter grows once more).
 *
 * Bounds are generous (a request that gets no answer in the kit's HTTP
 * timeout fails); nothing here times the server.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rvt_kit.h"
#include "testkit.h"
#include "testkit_threads.h"

#define READERS 4
#define CUTS 6
#define CUT_GAP_US (300 * 1000)
#define WAIT_MS 15000

static rvt_db db;
static rvt_server srv;
static char *alice;
static const rvt_person people[] = {{&alice, "alice", "author"},
                                    {NULL, NULL, NULL}};

/* The readers' shared state (static: the threads outlive no test). */
static char doc_path[64];
static atomic_int stop_readers;
static atomic_int reads_ok, reads_503, reads_other;
static testkit_threads readers;

static int setup(void **state)
{
    const char *const env[] = {"REVIEWD_THREADS=2", NULL};

    (void)state;
    if (rvt_fixture_start(&db, &srv, "loopreads", NULL, env, 1) != 0)
        return -1;
    return rvt_people_mint(people);
}

static int teardown(void **state)
{
    (void)state;
    atomic_store(&stop_readers, 1);
    testkit_threads_join_all(&readers);
    return rvt_fixture_end(&db, &srv, people);
}

/* reviewd_loop_document_reads_total now (-1: not found). */
static long long loop_reads(void)
{
    return rvt_metric(srv.port, "reviewd_loop_document_reads_total");
}

/* The event loops reviewd runs: one per CPU, at most its workers (2). */
static long long event_loops(void)
{
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    return cpus < 1 ? 1 : cpus < 2 ? cpus : 2;
}

/* 1 once every loop has a PostgreSQL connection ready to send. */
static int loops_connected(void *arg)
{
    (void)arg;
    return rvt_metric(srv.port, "reviewd_pg_loop_connections_ready")
           >= event_loops();
}

/* A started reviewd's loops connect to PostgreSQL before any read asks
 * them to, so the very first read is answered on a loop, not handed to a
 * worker while the loop's connection is still being made. */
static void the_first_read_after_start_is_the_loops(void **state)
{
    long long before;
    rvt_resp r;

    (void)state;
    TK_EXPECT(testkit_wait_until(loops_connected, NULL, WAIT_MS),
              "every loop's PostgreSQL connection ready within %d ms of "
              "start, with no read yet (%lld ready, %lld loops)",
              WAIT_MS,
              rvt_metric(srv.port, "reviewd_pg_loop_connections_ready"),
              event_loops());
    rvt_call(srv.port, "POST", "/v1/documents", alice,
             "{\"title\":\"first\",\"content\":\"read me first\"}", NULL, &r);
    rvt_expect_status(&r, 201, NULL, "create");
    snprintf(doc_path, sizeof(doc_path), "/v1/documents/%s",
             rvt_field(&r, "id"));
    rvt_resp_free(&r);
    before = loop_reads();
    assert_int_equal(before, 0);
    rvt_call(srv.port, "GET", doc_path, alice, NULL, NULL, &r);
    rvt_expect_status(&r, 200, NULL, "the first read");
    rvt_resp_free(&r);
    TK_EXPECT(loop_reads() == before + 1,
              "the first read was answered on a loop (counter %lld -> %lld)",
              before, loop_reads());
}

/* Reads the document once; 1 when the loop's counter has passed *arg. */
static int read_counted(void *arg)
{
    const long long *before = arg;
    rvt_resp r;

    rvt_call(srv.port, "GET", doc_path, alice, NULL, NULL, &r);
    rvt_resp_free(&r);
    return loop_reads() > *before;
}

static void reads_are_answered_on_the_loop_as_by_a_worker(void **state)
{
    const char *const with_id[] = {"X-Request-Id: loop-read-1", NULL};
    char tok[256], rid[160], created[1024];
    long long before = 0;
    rvt_resp r;
    int i;

    (void)state;
    rvt_call(srv.port, "POST", "/v1/documents", alice,
             "{\"title\":\"loop\",\"content\":\"read me\"}", NULL, &r);
    rvt_expect_status(&r, 201, NULL, "create");
    snprintf(created, sizeof(created), "%s", r.body);
    snprintf(doc_path, sizeof(doc_path), "/v1/documents/%s",
             rvt_field(&r, "id"));
    rvt_resp_free(&r);
    /* A loop whose connection was cut reconnects when next asked: wait
     * until one answers. */
    TK_EXPECT(testkit_wait_until(read_counted, &before, WAIT_MS),
              "reviewd_loop_document_reads_total grows within %d ms", WAIT_MS);
    before = loop_reads();
    for (i = 0; i < 20; i++) {
        rvt_call(srv.port, "GET", doc_path, alice, NULL, NULL, &r);
        rvt_expect_status(&r, 200, NULL, "a read");
        TK_EXPECT(strcmp(r.body, created) == 0,
                  "the read's body is the create's:\n%s\n%s", r.body, created);
        rvt_resp_free(&r);
    }
    TK_EXPECT(loop_reads() > before, "the reads went through the loop");
    snprintf(tok, sizeof(tok), "Authorization: Bearer %s", alice);
    {
        const char *const h[] = {with_id[0], tok, NULL};

        assert_int_equal(rvt_http(srv.port, "GET", doc_path, h, NULL, 0, &r),
                         0);
    }
    rvt_expect_status(&r, 200, NULL, "a read with X-Request-Id");
    TK_EXPECT(rvt_header(&r, "X-Request-Id", rid, sizeof(rid)) != NULL
                  && strcmp(rid, "loop-read-1") == 0,
              "X-Request-Id echoed");
    rvt_resp_free(&r);
    rvt_call(srv.port, "GET", "/v1/documents/987654321", alice, NULL, NULL,
             &r);
    rvt_expect_status(&r, 404, "NOT_FOUND", "a missing document");
    rvt_resp_free(&r);
    rvt_call(srv.port, "GET", doc_path, NULL, NULL, NULL, &r);
    rvt_expect_status(&r, 401, NULL, "no token");
    rvt_resp_free(&r);
    {
        char path[96];

        snprintf(path, sizeof(path), "%s?include=content", doc_path);
        rvt_call(srv.port, "GET", path, alice, NULL, NULL, &r);
        rvt_expect_status(&r, 200, NULL, "include=content, on a worker");
        TK_EXPECT(rvt_field(&r, "content") != NULL
                      && strcmp(rvt_field(&r, "content"), "read me") == 0,
                  "the text came with it");
        rvt_resp_free(&r);
    }
}

static void *reader_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_readers)) {
        rvt_resp r;

        rvt_call(srv.port, "GET", doc_path, alice, NULL, NULL, &r);
        if (r.status == 200)
            atomic_fetch_add(&reads_ok, 1);
        else if (r.status == 503)
            atomic_fetch_add(&reads_503, 1);
        else
            atomic_fetch_add(&reads_other, 1);
        rvt_resp_free(&r);
    }
    return NULL;
}

/* Ends every backend of reviewd on the test database, as a restart
 * would; returns how many. */
static long long cut_reviewd_connections(void)
{
    return rvt_sql_int(&db,
                       "SELECT count(pg_terminate_backend(pid)) FROM "
                       "pg_stat_activity WHERE datname = current_database() "
                       "AND application_name = 'reviewd'");
}

static void reads_survive_cut_connections(void **state)
{
    long long before, cut = 0;
    rvt_resp r;
    int i;

    (void)state;
    assert_true(doc_path[0] != '\0');
    atomic_store(&stop_readers, 0);
    for (i = 0; i < READERS; i++)
        assert_int_equal(testkit_threads_start(&readers, reader_main, NULL),
                         0);
    for (i = 0; i < CUTS; i++) {
        usleep(CUT_GAP_US);
        cut += cut_reviewd_connections();
        rvt_call(srv.port, "GET", "/healthz", NULL, NULL, NULL, &r);
        rvt_expect_status(&r, 200, NULL, "/healthz between the cuts");
        rvt_resp_free(&r);
    }
    usleep(CUT_GAP_US);
    atomic_store(&stop_readers, 1);
    testkit_threads_join_all(&readers);
    fprintf(stderr, "%lld connections cut; reads: %d ok, %d 503, %d other\n",
            cut, atomic_load(&reads_ok), atomic_load(&reads_503),
            atomic_load(&reads_other));
    TK_EXPECT(cut >= CUTS, "reviewd's connections were cut each time");
    TK_EXPECT(atomic_load(&reads_other) == 0,
              "every read got 200 or 503 (%d did not)",
              atomic_load(&reads_other));
    TK_EXPECT(atomic_load(&reads_ok) > 0, "reads succeeded between cuts");
    before = loop_reads();
    TK_EXPECT(testkit_wait_until(read_counted, &before, WAIT_MS),
              "the loops read again after the cuts within %d ms", WAIT_MS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_first_read_after_start_is_the_loops),
        cmocka_unit_test(reads_are_answered_on_the_loop_as_by_a_worker),
        cmocka_unit_test(reads_survive_cut_connections),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
