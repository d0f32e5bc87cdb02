/*
 * test_kh_embed.c: the embedding step (kh_embed.h) with the project's own
 * EMBED_COMMAND, tests/indexer/embed_stub.sh, whose vector is the first 8
 * bytes of SHA-256 of its input over 256.  This test computes the same
 * with OpenSSL, so a vector that is wrong, missing or stored with the
 * wrong chunk shows.
 *
 *   - kh_embed_run directly: the stub's vector for Latin and Chinese text,
 *     and each documented failure (non-zero exit, something other than
 *     numbers, nothing, past the timeout) fails with its reason and no
 *     vector; past the timeout the command's own children die with it;
 *   - through kh-indexer, on the stack's RabbitMQ under an exchange and a
 *     queue of the run's own (deleted at the end): every chunk of an
 *     approved document carries the vector of its own text; and while
 *     one chunk's embedding fails the event is retried (the log says so
 *     more than once) with nothing committed for the document, no chunks
 *     and no processed-event row, until the command works again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libpq-fe.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "evt_kit.h"
#include "kh_embed.h"
#include "testkit.h"

#define DIM 8
#define WAIT_MS 60000 /* only catches a hang */

typedef struct fixture {
    rvt_db db;
    rvt_server srv;
    evt_indexer ix;
    char stub[600];
    char fail_file[600];
    char exchange[96];
    evt_tokens tok;
} fixture;

/* What embed_stub.sh prints for text, computed here. */
static void expected_vector(const char *text, size_t len, float out[DIM])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    int i;

    assert_int_equal(EVP_Digest(text, len, md, &mdlen, EVP_sha256(), NULL), 1);
    for (i = 0; i < DIM; i++)
        out[i] = (float)md[i] / 256.0f;
}

static int same_vector(const float *got, size_t dim, const float *want)
{
    size_t i;

    if (dim != DIM)
        return 0;
    for (i = 0; i < DIM; i++)
        if (fabsf(got[i] - want[i]) > 1e-6f)
            return 0;
    return 1;
}

static int start_services(fixture *f)
{
    char e_amqp[300], e_exchange[160], e_kh_exchange[160], e_queue[160];
    char e_cmd[700], e_fail[700];
    const char *const rv_env[] = {e_amqp, e_exchange, "REVIEWD_LOG_FILE=@log",
                                  NULL};
    const char *const ix_env[] = {
        e_kh_exchange,         e_queue, e_cmd, e_fail, "KH_CHUNK_TARGET=400",
        "KH_CHUNK_OVERLAP=40", NULL};

    snprintf(e_amqp, sizeof(e_amqp), "AMQP_URL=%s", testkit_amqp_url());
    snprintf(e_exchange, sizeof(e_exchange), "REVIEWD_AMQP_EXCHANGE=%s",
             f->exchange);
    snprintf(e_kh_exchange, sizeof(e_kh_exchange), "KH_EXCHANGE=%s",
             f->exchange);
    snprintf(e_queue, sizeof(e_queue), "KH_QUEUE=%s", f->exchange);
    snprintf(e_cmd, sizeof(e_cmd), "EMBED_COMMAND=%s", f->stub);
    snprintf(e_fail, sizeof(e_fail), "EMBED_STUB_FAIL_FILE=%s", f->fail_file);
    /* The indexer declares its queue first, so nothing the relay
     * publishes is routed nowhere. */
    if (evt_indexer_start(&f->ix, &f->db, testkit_amqp_url(), ix_env,
                          "indexer-embed")
        != 0)
        return -1;
    return rvt_server_start(&f->srv, &f->db, NULL, rv_env, "indexer-embed");
}

static int setup(void **state)
{
    char dir[512];
    fixture *f = calloc(1, sizeof(*f));

    if (f == NULL)
        return -1;
    snprintf(f->stub, sizeof(f->stub), "%s/tests/indexer/embed_stub.sh",
             testkit_source_dir());
    snprintf(f->exchange, sizeof(f->exchange), "evt.embed.%d.%lld",
             (int)getpid(), (long long)testkit_now_us());
    if (testkit_scratch_dir(dir, sizeof(dir), "indexer-embed") == NULL
        || rvt_db_create(&f->db, "evtembed") != 0) {
        free(f);
        return -1;
    }
    snprintf(f->fail_file, sizeof(f->fail_file), "%s/embed-fail", dir);
    /* reviewd migrates the database; the indexer needs the tables. */
    if (rvt_server_start(&f->srv, &f->db, NULL, NULL, "indexer-embed") != 0
        || !rvt_server_stop(&f->srv) || start_services(f) != 0
        || evt_tokens_make(&f->tok) != 0) {
        evt_indexer_stop(&f->ix);
        rvt_server_stop(&f->srv);
        rvt_db_drop(&f->db);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    const int indexer_clean = evt_indexer_stop(&f->ix);
    const int clean = rvt_server_stop(&f->srv);

    evt_amqp_forget(testkit_amqp_url(), f->exchange, f->exchange);
    rvt_db_drop(&f->db);
    if (clean && indexer_clean)
        rvt_server_remove_dir(&f->srv);
    evt_tokens_free(&f->tok);
    free(f);
    return clean && indexer_clean ? 0 : -1;
}

/* ---- kh_embed_run ---------------------------------------------------- */

static void command_prints_the_vector_of_its_input(void **state)
{
    static const char *const texts[] = {"hello",
                                        "我们的数据库文档说明如何备份。\n\n"};
    fixture *f = *state;
    char err[512];
    float want[DIM];
    float *vec = NULL;
    size_t dim = 0, i;

    unsetenv("EMBED_STUB_MODE");
    for (i = 0; i < 2; i++) {
        TK_EXPECT(kh_embed_run(f->stub, texts[i], strlen(texts[i]), 10000,
                               &vec, &dim, err, sizeof(err))
                      == 0,
                  "the stub embeds \"%s\" (%s)", texts[i], err);
        expected_vector(texts[i], strlen(texts[i]), want);
        TK_EXPECT(same_vector(vec, dim, want),
                  "the vector is the text's "
                  "SHA-256 prefix (dim %zu)",
                  dim);
        free(vec);
    }
}

typedef struct failure_mode {
    const char *mode;
    int timeout_ms;
    const char *reason; /* a part of err */
} failure_mode;

/* The slow stub's child (its pid in the file) is killed with it. */
static void expect_child_killed(const char *pid_file)
{
    FILE *f = fopen(pid_file, "r");
    long n = 0;
    pid_t pid;

    TK_EXPECT(f != NULL && fscanf(f, "%ld", &n) == 1 && n > 0,
              "the slow stub wrote its child's pid to %s", pid_file);
    fclose(f);
    pid = (pid_t)n;
    TK_EXPECT(testkit_wait_until(evt_pid_gone, &pid, 5000),
              "the command's own child (pid %ld) is killed at the timeout, "
              "not left running",
              n);
    unlink(pid_file);
}

static void failing_commands_fail_with_the_reason(void **state)
{
    static const failure_mode modes[] = {
        {"fail", 10000, "status 3"},
        {"garbage", 10000, "not a vector"},
        {"empty", 10000, ""},
        {"slow", 300, ""},
    };
    fixture *f = *state;
    char err[512], pid_file[700];
    float *vec;
    size_t dim, i;

    snprintf(pid_file, sizeof(pid_file), "%s.pid", f->fail_file);
    setenv("EMBED_STUB_PID_FILE", pid_file, 1);
    for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        const int64_t t0 = testkit_now_ms();

        setenv("EMBED_STUB_MODE", modes[i].mode, 1);
        vec = (float *)1;
        dim = 99;
        err[0] = '\0';
        TK_EXPECT(kh_embed_run(f->stub, "text", 4, modes[i].timeout_ms, &vec,
                               &dim, err, sizeof(err))
                      == -1,
                  "EMBED_STUB_MODE=%s fails", modes[i].mode);
        TK_EXPECT(vec == NULL && dim == 0, "%s gives no vector",
                  modes[i].mode);
        TK_EXPECT(err[0] != '\0' && strstr(err, modes[i].reason) != NULL,
                  "%s says why, with \"%s\": \"%s\"", modes[i].mode,
                  modes[i].reason, err);
        /* The stub sleeps 30 s: only a kill at the timeout ends it early. */
        TK_EXPECT(testkit_now_ms() - t0 < 20000,
                  "%s returns without "
                  "waiting for the command to finish",
                  modes[i].mode);
    }
    expect_child_killed(pid_file);
    unsetenv("EMBED_STUB_MODE");
    unsetenv("EMBED_STUB_PID_FILE");
}

/* ---- through kh-indexer ---------------------------------------------- */

/* Parses "{0.1,0.2}" into v (DIM entries max); returns the count. */
static size_t parse_pg_array(const char *s, float *v)
{
    size_t n = 0;
    char *end;

    if (*s == '{')
        s++;
    while (*s != '\0' && *s != '}' && n < DIM + 1) {
        v[n++] = strtof(s, &end);
        if (end == s)
            return 0;
        s = end + (*end == ',');
    }
    return n;
}

/* Every chunk of the document carries the stub's vector of its own text.
 * Returns the number of chunks, or -1 after a mismatch (on stderr). */
static int chunks_with_their_vectors(fixture *f, const char *doc_id)
{
    const char *const params[] = {doc_id};
    PGresult *res;
    int i, n;

    assert_int_equal(rvt_sql(&f->db, "SELECT 1", NULL, 0), 0);
    res = PQexecParams(f->db.conn,
                       "SELECT content, coalesce(embedding::"
                       "text, '') FROM kh_chunk WHERE document_id = "
                       "$1::bigint ORDER BY chunk_index",
                       1, NULL, params, NULL, NULL, 0);
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    n = PQntuples(res);
    for (i = 0; i < n; i++) {
        float got[DIM + 1], want[DIM];
        const size_t dim = parse_pg_array(PQgetvalue(res, i, 1), got);

        expected_vector(PQgetvalue(res, i, 0), (size_t)PQgetlength(res, i, 0),
                        want);
        if (!same_vector(got, dim, want)) {
            fprintf(stderr, "chunk %d of %s has embedding %s\n", i, doc_id,
                    PQgetvalue(res, i, 1));
            n = -1;
            break;
        }
    }
    PQclear(res);
    return n;
}

/* Creates, submits and approves a document of five paragraphs (several
 * 400-byte chunks); the last holds `last`. */
static void approve_doc(fixture *f, const char *last, char *doc_id,
                        char *event_id)
{
    char content[2048], review[24];
    size_t n = 0;
    int p;

    for (p = 0; p < 4; p++) {
        n += (size_t)snprintf(content + n, sizeof(content) - n,
                              "Paragraph %d. Every chunk of this text is "
                              "embedded on its own, and its vector is stored "
                              "beside it for a later similarity search.\n\n",
                              p);
    }
    snprintf(content + n, sizeof(content) - n, "%s", last);
    assert_int_equal(evt_create_doc(f->srv.port, f->tok.author, "Embedded",
                                    content, doc_id),
                     0);
    assert_int_equal(evt_submit(f->srv.port, f->tok.author, doc_id, review),
                     0);
    assert_int_equal(evt_decide(f->srv.port, f->tok.reviewer, review, 1), 0);
    assert_int_equal(evt_db_event_id(&f->db, doc_id, "document.approved",
                                     event_id),
                     0);
}

static void indexer_stores_each_chunks_vector(void **state)
{
    fixture *f = *state;
    char doc[24], event_id[64];
    int n;

    approve_doc(f, "The last paragraph ends the document.", doc, event_id);
    TK_EXPECT(evt_db_wait_indexed(&f->db, &event_id, 1, WAIT_MS),
              "kh-indexer indexes the approval");
    n = chunks_with_their_vectors(f, doc);
    TK_EXPECT(n > 1,
              "several chunks, each with its own text's vector "
              "(got %d)",
              n);
}

typedef struct failures_wait {
    const evt_indexer *ix;
    const char *event_id;
} failures_wait;

static int failed_twice(void *arg)
{
    const failures_wait *w = arg;

    return evt_log_count(w->ix->log, "event_failed", "event_id", w->event_id,
                         NULL)
           >= 2;
}

static void failing_embedding_fails_the_event_until_it_works(void **state)
{
    fixture *f = *state;
    char doc[24], event_id[64], sql[200];
    failures_wait fw = {&f->ix, event_id};
    FILE *flag = fopen(f->fail_file, "w");
    int n;

    assert_non_null(flag);
    fclose(flag);
    approve_doc(f,
                "The last paragraph says EMBED-FAIL, so while the flag "
                "file exists its chunk cannot be embedded.",
                doc, event_id);
    TK_EXPECT(testkit_wait_until(failed_twice, &fw, WAIT_MS),
              "the event fails and is retried (event_failed twice)");
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM kh_processed_event "
             "WHERE event_id = '%s'",
             event_id);
    TK_EXPECT(rvt_sql_int(&f->db, sql) == 0, "a failed event is not "
                                             "recorded as processed");
    TK_EXPECT(evt_db_chunks(&f->db, doc) == 0, "no chunk of a half-embedded "
                                               "document is committed");
    assert_int_equal(unlink(f->fail_file), 0);
    TK_EXPECT(evt_db_wait_indexed(&f->db, &event_id, 1, WAIT_MS),
              "once the command works, the retried event is indexed");
    n = chunks_with_their_vectors(f, doc);
    TK_EXPECT(n > 1, "every chunk has its vector after the retry (got %d)", n);
    TK_EXPECT(evt_indexer_wait_logged(&f->ix, event_id, WAIT_MS),
              "kh-indexer logs the event's outcome after its commit");
    TK_EXPECT(evt_log_count(f->ix.log, "event_done", "event_id", event_id,
                            "outcome", "indexed", NULL)
                  == 1,
              "the event is indexed once");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(command_prints_the_vector_of_its_input),
        cmocka_unit_test(failing_commands_fail_with_the_reason),
        cmocka_unit_test(indexer_stores_each_chunks_vector),
        cmocka_unit_test(failing_embedding_fails_the_event_until_it_works),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
