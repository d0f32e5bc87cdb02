/*
 * test_indexer_mongo.c: kh-indexer with CONTENT_STORE=mongo indexes the
 * text reviewd wrote to MongoDB, and never an empty one.
 *
 * The whole pipeline runs for real: reviewd (CONTENT_STORE=mongo) writes
 * each version's text to a private MongoDB-wire server (rvt_mongo.h) and
 * its relay publishes the approval to the shared stack's RabbitMQ; a
 * kh-indexer process, configured with the same CONTENT_STORE and
 * MONGO_URL, consumes it and writes chunks to this test's own PostgreSQL
 * database.  On the shared broker the test uses an exchange and a queue
 * of its own (REVIEWD_AMQP_EXCHANGE, KH_EXCHANGE, KH_QUEUE), deleted at
 * the end, so its events reach no other consumer and no other test's
 * events reach its indexer.
 *
 *   - an approved document's chunks hold the approved version's text,
 *     read from its MongoDB record (PostgreSQL's kh_document_content has
 *     no row for it), covering the text from its first byte to its last;
 *   - an approval whose record is missing fails, is logged with the
 *     document and version, is not recorded as processed and writes no
 *     chunk; once the record is back, the retried event indexes it;
 *   - MongoDB orphans (records no row points at) older than the grace
 *     period are deleted by `reviewd content-orphans --delete` and by the
 *     server's periodic sweep (REVIEWD_ORPHAN_SWEEP_S), younger ones and
 *     a document's own records are kept.
 *
 * Every wait is bounded (30 s) so a hang fails instead of blocking CTest.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mongoc/mongoc.h>

#include "rvt_kit.h"
#include "rvt_mongo.h"
#include "testkit.h"

#define WAIT_MS 30000

/* The kh-indexer process. */
typedef struct indexer {
    pid_t pid;
    char log[700];
} indexer;

static rvt_mongo mongo;
static char mongo_db[64];
static mongoc_client_t *peek; /* the test's own MongoDB client */
static rvt_db db;
static rvt_server srv;
static indexer ix;
static char exchange[96], queue[96];
static char *alice, *bob;

/* ---- kh-indexer -------------------------------------------------------- */

static const char *indexer_bin(void)
{
    const char *bin = getenv("KH_INDEXER_BIN");
    static char fallback[600];

    if (bin != NULL && bin[0] != '\0')
        return bin;
    snprintf(fallback, sizeof(fallback), "%s/services/indexer/kh-indexer",
             testkit_build_dir());
    return fallback;
}

/* The log file's text, malloc'd ("" when it does not exist yet). */
static char *read_log(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 1 << 20);
    size_t n;

    if (buf == NULL || f == NULL) {
        if (f != NULL)
            fclose(f);
        return buf;
    }
    n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* 1 if one line of the indexer's log holds both a and b (b may be NULL). */
static int log_line_has(const char *a, const char *b)
{
    char *text = read_log(ix.log);
    char *line, *save = NULL;
    int found = 0;

    for (line = text != NULL ? strtok_r(text, "\n", &save) : NULL;
         line != NULL && !found; line = strtok_r(NULL, "\n", &save))
        found = strstr(line, a) != NULL && (b == NULL || strstr(line, b));
    free(text);
    return found;
}

static int indexer_consuming(void *arg)
{
    (void)arg;
    return log_line_has("\"msg\":\"consuming\"", queue);
}

static void set_env(const char *name, const char *value)
{
    if (setenv(name, value, 1) != 0)
        _exit(125);
}

/* Starts kh-indexer on this test's database, broker names and MongoDB,
 * and waits until it consumes from its queue. */
static int indexer_start(void)
{
    char dburl[600];

    snprintf(ix.log, sizeof(ix.log), "%s/kh-indexer.log", srv.dir);
    snprintf(dburl, sizeof(dburl), "%s", db.url);
    ix.pid = fork();
    if (ix.pid < 0) {
        fprintf(stderr, "kh-indexer: fork: %s\n", strerror(errno));
        return -1;
    }
    if (ix.pid == 0) {
        set_env("DATABASE_URL", dburl);
        set_env("AMQP_URL", testkit_amqp_url());
        set_env("KH_EXCHANGE", exchange);
        set_env("KH_QUEUE", queue);
        set_env("CONTENT_STORE", "mongo");
        set_env("MONGO_URL", mongo.url);
        set_env("KH_LOG_FILE", ix.log);
        set_env("KH_CHUNK_TARGET", "64");
        set_env("KH_CHUNK_OVERLAP", "8");
        set_env("KH_RETRY_MS", "200");
        unsetenv("EMBED_COMMAND");
        execl(indexer_bin(), "kh-indexer", (char *)NULL);
        _exit(127);
    }
    if (!testkit_wait_until(indexer_consuming, NULL, WAIT_MS)) {
        fprintf(stderr, "kh-indexer did not consume %s within 30 s; log %s\n",
                queue, ix.log);
        return -1;
    }
    return 0;
}

static int indexer_gone(void *arg)
{
    int *status = arg;

    return waitpid(ix.pid, status, WNOHANG) == ix.pid;
}

/* SIGTERM; 1 if it exited 0 within 15 s (under ASan: without a leak). */
static int indexer_stop(void)
{
    int status = 0;

    if (ix.pid <= 0)
        return 1;
    kill(ix.pid, SIGTERM);
    if (!testkit_wait_until(indexer_gone, &status, 15000)) {
        kill(ix.pid, SIGKILL);
        waitpid(ix.pid, &status, 0);
        ix.pid = 0;
        return 0;
    }
    ix.pid = 0;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* ---- the broker ------------------------------------------------------- */

/* Deletes this test's queue and exchange on the shared broker, so runs
 * leave nothing behind.  Best effort, each step bounded by 5 s. */
static void delete_broker_names(void)
{
    struct amqp_connection_info info;
    struct timeval tv = {5, 0};
    char *url = strdup(testkit_amqp_url());
    amqp_connection_state_t conn = amqp_new_connection();
    amqp_socket_t *sock = conn != NULL ? amqp_tcp_socket_new(conn) : NULL;

    amqp_default_connection_info(&info);
    if (url == NULL || sock == NULL
        || amqp_parse_url(url, &info) != AMQP_STATUS_OK) {
        fprintf(stderr, "amqp cleanup: cannot set up\n");
    } else if (amqp_set_rpc_timeout(conn, &tv) != AMQP_STATUS_OK
               || amqp_set_handshake_timeout(conn, &tv) != AMQP_STATUS_OK
               || amqp_socket_open_noblock(sock, info.host, info.port, &tv)
                      != AMQP_STATUS_OK
               || amqp_login(conn, info.vhost, 1, 131072, 0,
                             AMQP_SASL_METHOD_PLAIN, info.user, info.password)
                          .reply_type
                      != AMQP_RESPONSE_NORMAL
               || amqp_channel_open(conn, 1) == NULL) {
        fprintf(stderr, "amqp cleanup: cannot reach %s:%d\n", info.host,
                info.port);
    } else {
        amqp_queue_delete(conn, 1, amqp_cstring_bytes(queue), 0, 0);
        amqp_exchange_delete(conn, 1, amqp_cstring_bytes(exchange), 0);
        amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
    }
    if (conn != NULL)
        amqp_destroy_connection(conn);
    free(url);
}

/* ---- MongoDB behind reviewd's back ------------------------------------- */

static mongoc_collection_t *records(void)
{
    return mongoc_client_get_collection(peek, mongo_db, "document_content");
}

static int delete_record(const char *doc_id, int version)
{
    bson_error_t error;
    bson_t *filter = BCON_NEW("document_id",
                              BCON_INT64(strtoll(doc_id, NULL, 10)), "version",
                              BCON_INT32(version));
    mongoc_collection_t *coll = records();
    const bool ok = mongoc_collection_delete_one(coll, filter, NULL, NULL,
                                                 &error);

    if (!ok)
        fprintf(stderr, "mongo: delete: %s\n", error.message);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
    return ok ? 0 : -1;
}

/* Inserts doc (then destroyed) into the records.  0 or -1. */
static int insert_record(bson_t *doc)
{
    bson_error_t error;
    mongoc_collection_t *coll = records();
    const bool ok = doc != NULL
                    && mongoc_collection_insert_one(coll, doc, NULL, NULL,
                                                    &error);

    if (!ok) {
        fprintf(stderr, "mongo: insert: %s\n",
                doc != NULL ? error.message : "out of memory");
    }
    bson_destroy(doc);
    mongoc_collection_destroy(coll);
    return ok ? 0 : -1;
}

/* Writes record (doc_id, version) as reviewd does (svc_content_mongo.c). */
static int put_record(const char *doc_id, int version, const char *text)
{
    return insert_record(
        BCON_NEW("document_id", BCON_INT64(strtoll(doc_id, NULL, 10)),
                 "version", BCON_INT32(version), "content", BCON_UTF8(text)));
}

/* Writes an orphan-to-be record (doc_id, version) as reviewd does, its
 * written_at age_s seconds in the past. */
static int put_aged_record(long long doc_id, int version, long age_s)
{
    const int64_t at = ((int64_t)time(NULL) - age_s) * 1000;

    return insert_record(BCON_NEW("document_id", BCON_INT64(doc_id), "version",
                                  BCON_INT32(version), "content",
                                  BCON_UTF8("orphaned text"), "written_at",
                                  BCON_DATE_TIME(at)));
}

/* How many records (doc_id, any version) exist, or -1. */
static long long record_count(long long doc_id)
{
    bson_error_t error;
    bson_t *filter = BCON_NEW("document_id", BCON_INT64(doc_id));
    mongoc_collection_t *coll = records();
    const int64_t n = mongoc_collection_count_documents(coll, filter, NULL,
                                                        NULL, NULL, &error);

    if (n < 0)
        fprintf(stderr, "mongo: count: %s\n", error.message);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
    return n;
}

/* ---- set-up ------------------------------------------------------------ */

static int setup(void **state)
{
    static char env_mongo[300], env_amqp[300], env_exchange[160];
    const char *env[] = {"CONTENT_STORE=mongo",
                         env_mongo,
                         env_amqp,
                         env_exchange,
                         "REVIEWD_RELAY_SWEEP_MS=200",
                         "REVIEWD_LOG_FILE=@log",
                         NULL};
    const char *redis_url = testkit_shared_redis();
    const long tag = (long)getpid();

    (void)state;
    snprintf(mongo_db, sizeof(mongo_db), "ixt_mongo_%ld", tag);
    snprintf(exchange, sizeof(exchange), "ixt.documents.%ld.%d", tag,
             rand() % 100000);
    snprintf(queue, sizeof(queue), "ixt.indexer.%ld.%d", tag, rand() % 100000);
    if (redis_url == NULL
        || rvt_mongo_open(&mongo, "indexer_mongo", mongo_db) != 0)
        return -1;
    snprintf(env_mongo, sizeof(env_mongo), "MONGO_URL=%s", mongo.url);
    snprintf(env_amqp, sizeof(env_amqp), "AMQP_URL=%s", testkit_amqp_url());
    snprintf(env_exchange, sizeof(env_exchange), "REVIEWD_AMQP_EXCHANGE=%s",
             exchange);
    mongoc_init();
    peek = mongoc_client_new(mongo.url);
    if (peek == NULL || rvt_db_create(&db, "ixmongo") != 0
        || rvt_server_start(&srv, &db, redis_url, env, "indexer_mongo") != 0
        || rvt_db_offset_ids(&db) != 0 || indexer_start() != 0)
        return -1;
    alice = rvt_token("alice", "author", 3600);
    bob = rvt_token("bob", "reviewer", 3600);
    return 0;
}

static int teardown(void **state)
{
    const int indexer_clean = indexer_stop();
    const int clean = rvt_server_stop(&srv) && indexer_clean;

    (void)state;
    TK_EXPECT(indexer_clean, "kh-indexer exits 0 on SIGTERM (log %s)", ix.log);
    if (clean)
        rvt_server_remove_dir(&srv);
    else
        rvt_server_log_tail(&srv);
    delete_broker_names();
    rvt_db_drop(&db);
    mongoc_client_destroy(peek);
    mongoc_cleanup();
    rvt_mongo_close(&mongo, clean);
    free(alice);
    free(bob);
    return clean ? 0 : -1;
}

/* ---- helpers ----------------------------------------------------------- */

static void expect_status(rvt_resp *r, int status, const char *what)
{
    TK_EXPECT(r->status == status, "%s answers %d, got %d: %s", what, status,
              r->status, r->body != NULL ? r->body : "(no body)");
    rvt_resp_free(r);
}

/* Creates a document with content; its id into id. */
static void create(const char *title, const char *content, char id[24])
{
    json_t *o = json_pack("{s:s,s:s}", "title", title, "content", content);
    char *body = json_dumps(o, JSON_COMPACT);
    rvt_resp r;

    assert_int_equal(rvt_call(srv.port, "POST", "/v1/documents", alice, body,
                              NULL, &r),
                     0);
    TK_EXPECT(r.status == 201, "create answers 201, got %d", r.status);
    snprintf(id, 24, "%s", rvt_field(&r, "id"));
    rvt_resp_free(&r);
    free(body);
    json_decref(o);
}

static void edit(const char *id, const char *content)
{
    json_t *o = json_pack("{s:s}", "content", content);
    char *body = json_dumps(o, JSON_COMPACT);
    char path[96];
    rvt_resp r;

    snprintf(path, sizeof(path), "/v1/documents/%s", id);
    assert_int_equal(rvt_call(srv.port, "PUT", path, alice, body, NULL, &r),
                     0);
    expect_status(&r, 200, "PUT content");
    free(body);
    json_decref(o);
}

/* Submits id; its review id into rid. */
static void submit(const char *id, char rid[24])
{
    char path[96];
    rvt_resp r;

    snprintf(path, sizeof(path), "/v1/documents/%s/submit", id);
    assert_int_equal(rvt_call(srv.port, "POST", path, alice, NULL, NULL, &r),
                     0);
    TK_EXPECT(r.status == 201, "submit answers 201, got %d", r.status);
    snprintf(rid, 24, "%s", rvt_field(&r, "review.id"));
    rvt_resp_free(&r);
}

static void approve(const char *rid)
{
    char path[96];
    rvt_resp r;

    snprintf(path, sizeof(path), "/v1/reviews/%s/approve", rid);
    assert_int_equal(rvt_call(srv.port, "POST", path, bob, "{}", NULL, &r), 0);
    expect_status(&r, 200, "approve");
}

typedef struct processed_wait {
    const char *doc_id;
} processed_wait;

static int processed(void *arg)
{
    const processed_wait *w = arg;
    char sql[160];

    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM kh_processed_event "
             "WHERE document_id = %s",
             w->doc_id);
    return rvt_sql_int(&db, sql) > 0;
}

/* Waits until the indexer has recorded an event of doc_id; 1 if it did. */
static int wait_processed(const char *doc_id)
{
    processed_wait w = {doc_id};

    return testkit_wait_until(processed, &w, WAIT_MS);
}

static long long doc_sql_int(const char *fmt, const char *doc_id)
{
    char sql[768];

    snprintf(sql, sizeof(sql), fmt, doc_id);
    return rvt_sql_int(&db, sql);
}

/* Checks that doc_id's chunks are version `version` of text: each is
 * text's bytes at its offset, the first starts at 0 and the last ends at
 * the text's end.  text has no single quote (it goes into SQL). */
static void expect_chunks_hold(const char *doc_id, int version,
                               const char *text)
{
    char sql[4096];

    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM kh_chunk WHERE "
             "document_id = %%s AND (document_version <> %d OR "
             "convert_to(content, 'UTF8') <> substring(convert_to('%s', "
             "'UTF8') FROM byte_offset + 1 FOR octet_length(content)))",
             version, text);
    TK_EXPECT(doc_sql_int("SELECT count(*) FROM kh_chunk WHERE "
                          "document_id = %s",
                          doc_id)
                  > 1,
              "the text is split into several chunks");
    TK_EXPECT(doc_sql_int(sql, doc_id) == 0,
              "every chunk is the approved version's bytes at its offset");
    TK_EXPECT(doc_sql_int("SELECT min(byte_offset) FROM kh_chunk WHERE "
                          "document_id = %s",
                          doc_id)
                  == 0,
              "the chunks start at the text's first byte");
    TK_EXPECT(doc_sql_int("SELECT max(byte_offset + octet_length(content)) "
                          "FROM kh_chunk WHERE document_id = %s",
                          doc_id)
                  == (long long)strlen(text),
              "the chunks end at the text's last byte (%zu)", strlen(text));
}

/* ---- tests ------------------------------------------------------------- */

static void an_approved_document_is_indexed_from_its_mongo_record(void **state)
{
    const char *draft = "A draft that was never approved, about nothing.";
    const char *text = "Distributed locks keep two reviewers from deciding "
                       "one document twice. \xe5\x88\x86\xe5\xb8\x83\xe5\xbc"
                       "\x8f\xe9\x94\x81\xe4\xbf\x9d\xe8\xaf\x81\xe6\xaf\x8f"
                       "\xe4\xb8\xaa\xe6\x96\x87\xe6\xa1\xa3\xe5\x8f\xaa\xe8"
                       "\xa2\xab\xe5\xae\xa1\xe6\x89\xb9\xe4\xb8\x80\xe6\xac"
                       "\xa1\xe3\x80\x82 The indexer reads this version.";
    char id[24], rid[24];

    (void)state;
    create("indexed from mongo", draft, id);
    edit(id, text);
    submit(id, rid);
    approve(rid);
    TK_EXPECT(wait_processed(id),
              "kh-indexer processed the approval of %s "
              "within 30 s (log %s)",
              id, ix.log);
    TK_EXPECT(doc_sql_int("SELECT count(*) FROM kh_processed_event WHERE "
                          "document_id = %s AND outcome = 'indexed'",
                          id)
                  == 1,
              "the event is recorded as indexed");
    TK_EXPECT(doc_sql_int("SELECT count(*) FROM kh_document_content WHERE "
                          "document_id = %s",
                          id)
                  == 0,
              "PostgreSQL holds no text: it can only have come from MongoDB");
    expect_chunks_hold(id, 2, text);
    TK_EXPECT(log_line_has("\"msg\":\"starting\"", mongo_db),
              "kh-indexer logs that it reads MongoDB %s", mongo_db);
}

static int failure_logged(void *arg)
{
    char want[64];

    snprintf(want, sizeof(want), "\"document_id\":\"%s\"", (const char *)arg);
    return log_line_has("\"msg\":\"event_failed\"", want)
           && log_line_has(want, "version 1 missing");
}

static void a_missing_record_fails_the_event_until_it_is_back(void **state)
{
    const char *text = "A text whose record goes missing before the "
                       "approval, then comes back from a backup.";
    char id[24], rid[24];

    (void)state;
    create("record goes missing", text, id);
    submit(id, rid);
    assert_int_equal(delete_record(id, 1), 0);
    approve(rid);
    TK_EXPECT(testkit_wait_until(failure_logged, id, WAIT_MS),
              "kh-indexer logs event_failed for %s with \"version 1 "
              "missing\" (log %s)",
              id, ix.log);
    TK_EXPECT(doc_sql_int("SELECT count(*) FROM kh_processed_event WHERE "
                          "document_id = %s",
                          id)
                  == 0,
              "the failed event is not recorded as processed");
    TK_EXPECT(doc_sql_int("SELECT count(*) FROM kh_chunk WHERE "
                          "document_id = %s",
                          id)
                  == 0,
              "no chunk is written for a missing text, not even an empty "
              "one");

    assert_int_equal(put_record(id, 1, text), 0);
    TK_EXPECT(wait_processed(id),
              "the retried event is processed once the "
              "record is back (log %s)",
              ix.log);
    TK_EXPECT(doc_sql_int("SELECT count(*) FROM kh_processed_event WHERE "
                          "document_id = %s AND outcome = 'indexed'",
                          id)
                  == 1,
              "and recorded as indexed");
    expect_chunks_hold(id, 1, text);
}

/* ---- MongoDB orphans -------------------------------------------------- */

#define GRACE_ENV "REVIEWD_ORPHAN_GRACE_S=600"

/* Document ids far above any this test's reviewd hands out. */
static long long orphan_id(int k)
{
    return 7000000000000LL + (long long)getpid() * 10 + k;
}

static void orphans_past_the_grace_period_are_deleted_by_the_command(
    void **state)
{
    char dburl[600], murl[300], out[4096], line[96], id[24];
    const char *const args[] = {"content-orphans", "--delete", NULL};
    const char *const env[] = {dburl, "CONTENT_STORE=mongo", murl, GRACE_ENV,
                               NULL};

    (void)state;
    create("kept", "a document's own record is never an orphan", id);
    assert_int_equal(put_aged_record(orphan_id(0), 1, 7200), 0);
    assert_int_equal(put_aged_record(orphan_id(1), 1, 5), 0);
    snprintf(dburl, sizeof(dburl), "DATABASE_URL=%s", db.url);
    snprintf(murl, sizeof(murl), "MONGO_URL=%s", mongo.url);
    TK_EXPECT(rvt_run_reviewd(args, env, out, sizeof(out)) == 0,
              "content-orphans --delete exits 0: %s", out);
    snprintf(line, sizeof(line), "%lld 1 no_row deleted\n", orphan_id(0));
    TK_EXPECT(strstr(out, line) != NULL,
              "the two-hour-old orphan is "
              "listed as deleted: %s",
              out);
    snprintf(line, sizeof(line), "%lld 1 no_row kept\n", orphan_id(1));
    TK_EXPECT(strstr(out, line) != NULL,
              "the five-second-old orphan is "
              "listed as kept: %s",
              out);
    TK_EXPECT(record_count(orphan_id(0)) == 0, "the old orphan is gone");
    TK_EXPECT(record_count(orphan_id(1)) == 1, "the young orphan stays");
    TK_EXPECT(record_count(strtoll(id, NULL, 10)) == 1,
              "the document's own record stays");
}

static int swept_logged(void *arg)
{
    return rvt_server_log_has(arg, "\"msg\":\"content_orphans_swept\"");
}

typedef struct gone_wait {
    long long id;
} gone_wait;

static int record_gone(void *arg)
{
    return record_count(((const gone_wait *)arg)->id) == 0;
}

static void the_server_sweeps_old_orphans_periodically(void **state)
{
    char murl[300];
    const char *const env[] = {
        "CONTENT_STORE=mongo",   murl, GRACE_ENV, "REVIEWD_ORPHAN_SWEEP_S=1",
        "REVIEWD_LOG_FILE=@log", NULL};
    gone_wait old = {orphan_id(2)};
    rvt_server sweeper;

    (void)state;
    assert_int_equal(put_aged_record(orphan_id(2), 1, 7200), 0);
    assert_int_equal(put_aged_record(orphan_id(3), 1, 5), 0);
    snprintf(murl, sizeof(murl), "MONGO_URL=%s", mongo.url);
    assert_int_equal(rvt_server_start(&sweeper, &db, testkit_redis_url(), env,
                                      "indexer_mongo_sweep"),
                     0);
    TK_EXPECT(testkit_wait_until(record_gone, &old, WAIT_MS),
              "the server's sweep deletes the two-hour-old orphan");
    TK_EXPECT(testkit_wait_until(swept_logged, &sweeper, WAIT_MS),
              "the log says content_orphans_swept");
    TK_EXPECT(record_count(orphan_id(3)) == 1, "the young orphan stays");
    TK_EXPECT(rvt_server_stop(&sweeper), "the sweeping reviewd exits 0");
    rvt_server_remove_dir(&sweeper);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            an_approved_document_is_indexed_from_its_mongo_record),
        cmocka_unit_test(a_missing_record_fails_the_event_until_it_is_back),
        cmocka_unit_test(
            orphans_past_the_grace_period_are_deleted_by_the_command),
        cmocka_unit_test(the_server_sweeps_old_orphans_periodically),
    };

    srand((unsigned)getpid() ^ (unsigned)testkit_now_us());
    return cmocka_run_group_tests(tests, setup, teardown);
}
