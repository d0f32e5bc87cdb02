/*
 * test_reviewd_limits.c: limits, start-up checks and operations.
 *
 * One reviewd with small limits (one worker thread, four connections,
 * two-second timeouts, one-second idempotency records) shows that the
 * connection limit holds, idle and slow clients are cut off, expired
 * idempotency records stop replaying, PostgreSQL going away is 503 and
 * /readyz "down" (and back), SIGHUP reopens the log file and SIGTERM
 * drains a request in flight before exiting 0; /healthz answers while
 * the only worker is blocked.  Short-lived runs of the
 * binary check the start-up contract: a missing or malformed setting
 * stops reviewd with one line naming it, `reviewd token` prints a usable
 * token, and migrations started together apply once.  The threads a
 * case starts keep their state in static storage (the_case), and
 * end_case, that case's teardown, joins them whether it passed or failed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rvt_kit.h"
#include "testkit.h"
#include "testkit_threads.h"

static rvt_db db;
static rvt_server srv;
static char *alice;
static const rvt_person people[] = {{&alice, "alice", "author"},
                                    {NULL, NULL, NULL}};
static char env_db[600];

static int setup(void **state)
{
    const char *const env[] = {"REVIEWD_THREADS=1",
                               "REVIEWD_MAX_CONNECTIONS=4",
                               "REVIEWD_CONNECTION_TIMEOUT_S=2",
                               "REVIEWD_TEST_HOOKS=1",
                               "REVIEWD_IDEMPOTENCY_TTL_S=1",
                               "REVIEWD_SWEEP_INTERVAL_S=1",
                               "REVIEWD_PG_TIMEOUT_S=2",
                               "REVIEWD_LOG_FILE=@log",
                               NULL};

    (void)state;
    if (rvt_fixture_start(&db, &srv, "limits", NULL, env, 0) != 0)
        return -1;
    snprintf(env_db, sizeof(env_db), "DATABASE_URL=%s", db.url);
    return rvt_people_mint(people);
}

static int teardown(void **state)
{
    (void)state;
    return rvt_fixture_end(&db, &srv, people);
}

static int open_idle(int port)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    return fd;
}

/* 1 if the server closes fd (EOF or reset) within ms. */
static int closed_within(int fd, int ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    char buf[256];

    while (poll(&p, 1, ms) == 1)
        if (recv(fd, buf, sizeof(buf), 0) <= 0)
            return 1;
    return 0;
}

static const char healthz[] =
    "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

static void the_connection_limit_holds_further_clients_off(void **state)
{
    int idle[4], i;
    rvt_resp r;

    (void)state;
    for (i = 0; i < 4; i++)
        idle[i] = open_idle(srv.port);
    /* With all four slots taken, a fifth client is not served (the
     * listener accepts nothing while the limit is reached, so it waits in
     * the kernel's backlog: rv_listener.h); 500 ms is the bound of
     * "not". */
    rvt_http_raw(srv.port, healthz, sizeof(healthz) - 1, 500, &r);
    TK_EXPECT(r.status == 0,
              "no answer beyond the connection limit, got "
              "%d",
              r.status);
    rvt_resp_free(&r);
    for (i = 0; i < 4; i++)
        close(idle[i]);
    rvt_http_raw(srv.port, healthz, sizeof(healthz) - 1, 5000, &r);
    TK_EXPECT(r.status == 200, "served again once the slots are free");
    rvt_resp_free(&r);
}

static void idle_and_slow_clients_are_cut_off(void **state)
{
    const char partial[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
    int idle = open_idle(srv.port);
    int slow = open_idle(srv.port);

    (void)state;
    assert_int_equal(send(slow, partial, sizeof(partial) - 1, 0),
                     (ssize_t)sizeof(partial) - 1);
    TK_EXPECT(closed_within(idle, 6000),
              "an idle connection is closed after the 2 s timeout");
    TK_EXPECT(closed_within(slow, 6000),
              "a client that never finishes its headers is closed too");
    close(idle);
    close(slow);
}

static int idem_swept(void *arg)
{
    return rvt_sql_int(arg, "SELECT count(*) FROM kh_idempotency") == 0;
}

#define STORED "reviewd_idempotency_total{outcome=\"stored\"} "

static void expired_idempotency_records_are_swept_and_not_replayed(
    void **state)
{
    const char *body = "{\"title\":\"expiring\",\"content\":\"x\"}";
    const char *stored;
    char first[24];
    rvt_resp r;

    (void)state;
    rvt_call(srv.port, "POST", "/v1/documents", alice, body, "exp-key", &r);
    assert_int_equal(r.status, 201);
    snprintf(first, sizeof(first), "%s", rvt_field(&r, "id"));
    rvt_resp_free(&r);
    /* Counted, not counted in the table: with a 1 s TTL the sweep may
     * already have deleted the record on a slow machine. */
    rvt_call(srv.port, "GET", "/metrics", NULL, NULL, NULL, &r);
    stored = r.body != NULL ? strstr(r.body, STORED) : NULL;
    TK_EXPECT(stored != NULL && atoi(stored + strlen(STORED)) >= 1,
              "the response was recorded");
    rvt_resp_free(&r);
    TK_EXPECT(testkit_wait_until(idem_swept, &db, 10000),
              "the sweep deletes the record once it expires (1 s)");
    rvt_call(srv.port, "POST", "/v1/documents", alice, body, "exp-key", &r);
    TK_EXPECT(r.status == 201 && strcmp(rvt_field(&r, "id"), first) != 0,
              "after expiry the key runs the request again");
    rvt_resp_free(&r);
}

/* Runs SQL on the stack's own database (not the one reviewd uses). */
static void admin_sql(const char *sql)
{
    rvt_db admin = db;

    admin.conn = NULL;
    snprintf(admin.url, sizeof(admin.url), "%s", db.admin_url);
    assert_int_equal(rvt_sql(&admin, sql, NULL, 0), 0);
    rvt_db_close(&admin);
}

/* Drops every connection of the reviewd servers on db's database, as a
 * PostgreSQL restart or an idle timeout does. */
static void drop_reviewd_connections(void)
{
    char sql[512];

    snprintf(sql, sizeof(sql),
             "SELECT count(pg_terminate_backend(pid)) "
             "FROM pg_stat_activity WHERE datname = '%s' AND "
             "application_name = 'reviewd'",
             db.name);
    admin_sql(sql);
}

/* ALTER DATABASE ... ALLOW_CONNECTIONS: new connections to db's database
 * refused (allow 0) or let in again. */
static void allow_connections(int allow)
{
    char sql[512];

    snprintf(sql, sizeof(sql), "ALTER DATABASE %s ALLOW_CONNECTIONS %s",
             db.name, allow ? "true" : "false");
    admin_sql(sql);
}

static void postgres_going_away_is_503_and_readyz_down(void **state)
{
    char sql[512];
    rvt_resp r;

    (void)state;
    rvt_db_close(&db);
    allow_connections(0);
    snprintf(sql, sizeof(sql),
             "SELECT count(pg_terminate_backend(pid)) FROM "
             "pg_stat_activity WHERE datname = '%s'",
             db.name);
    admin_sql(sql);
    rvt_call(srv.port, "GET", "/v1/documents/1", alice, NULL, NULL, &r);
    TK_EXPECT(r.status == 503
                  && strcmp(rvt_field(&r, "code"), "UNAVAILABLE") == 0,
              "a request without PostgreSQL is 503 UNAVAILABLE, got %d",
              r.status);
    rvt_resp_free(&r);
    TK_EXPECT(rvt_wait_ready(srv.port, "down", NULL, 5000),
              "/readyz says down");
    rvt_call(srv.port, "GET", "/readyz", NULL, NULL, NULL, &r);
    TK_EXPECT(r.status == 503
                  && strcmp(rvt_field(&r, "postgres"), "down") == 0,
              "/readyz is 503 with postgres down");
    rvt_resp_free(&r);
    allow_connections(1);
    TK_EXPECT(rvt_wait_ready(srv.port, "degraded", "off", 10000),
              "/readyz recovers (degraded: this server has no Redis)");
    rvt_call(srv.port, "POST", "/v1/documents", alice,
             "{\"title\":\"back\",\"content\":\"x\"}", NULL, &r);
    TK_EXPECT(r.status == 201, "requests work again after reconnecting");
    rvt_resp_free(&r);
}

static int reopened(void *arg)
{
    const rvt_server *s = arg;
    struct stat st;

    return stat(s->log, &st) == 0 && rvt_server_log_has(s, "log_reopened");
}

/*
 * PostgreSQL cuts reviewd's idle connections (a restart, a failover, an
 * idle timeout): the next write on each worker finds its connection dead
 * at the BEGIN it sends with its first statement (rv_db_conn_begin_deferred),
 * when nothing of it has run, so it runs again on a new connection and
 * the client sees 201, never 503.
 */
static void writes_survive_postgres_dropping_idle_connections(void **state)
{
    rvt_resp r;

    (void)state;
    for (int round = 0; round < 3; round++) {
        drop_reviewd_connections();
        for (int i = 0; i < 8; i++) {
            rvt_call(srv.port, "POST", "/v1/documents", alice,
                     "{\"title\":\"again\",\"content\":\"x\"}", NULL, &r);
            TK_EXPECT(r.status == 201,
                      "a write after PostgreSQL dropped the "
                      "idle connections is 201, got %d",
                      r.status);
            rvt_resp_free(&r);
        }
    }
}

static void sighup_reopens_the_log_file(void **state)
{
    char moved[700];
    rvt_resp r;

    (void)state;
    snprintf(moved, sizeof(moved), "%s.1", srv.log);
    assert_int_equal(rename(srv.log, moved), 0);
    assert_int_equal(kill(srv.pid, SIGHUP), 0);
    TK_EXPECT(testkit_wait_until(reopened, &srv, 5000),
              "a new log file is opened at the same path");
    rvt_call(srv.port, "GET", "/healthz", NULL, NULL, NULL, &r);
    rvt_resp_free(&r);
    TK_EXPECT(rvt_server_log_shows(&srv, "\"path\":\"/healthz\""),
              "new lines go to the new file");
}

/* A create that the test hook parks for pause_ms inside its transaction;
 * answered is set once its answer is in. */
typedef struct slow_create {
    int port;
    const char *token;
    int pause_ms;
    const char *title;
    atomic_int answered;
    rvt_resp resp;
} slow_create;

static void *slow_create_main(void *arg)
{
    slow_create *s = arg;
    char auth[4200], pause[48], body[160];
    const char *headers[] = {auth, "Content-Type: application/json", pause,
                             NULL};

    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", s->token);
    snprintf(pause, sizeof(pause), "X-Test-Pause-Ms: %d", s->pause_ms);
    snprintf(body, sizeof(body), "{\"title\":\"%s\",\"content\":\"x\"}",
             s->title);
    rvt_http(s->port, "POST", "/v1/documents", headers, body, strlen(body),
             &s->resp);
    atomic_store(&s->answered, 1);
    return NULL;
}

static int in_transaction(void *arg)
{
    return rvt_sql_int(arg, "SELECT count(*) FROM pg_stat_activity WHERE "
                            "datname = current_database() AND application_name"
                            " = 'reviewd' AND state = 'idle in transaction'")
           > 0;
}

typedef struct migrate_run {
    const char *env[2];
    int rc;
    char out[2048];
} migrate_run;

#define MIGRATORS 3

/* The threads a case started and what they write, in static storage: a
 * failed expectation leaves the case by longjmp while they may still
 * run, and end_case, every threaded case's teardown, joins them (a slow
 * create returns within rvt_http's wait, a migrate when its reviewd
 * exits) and frees what they left.  One case at a time uses it. */
typedef struct limits_case {
    slow_create slow;
    migrate_run runs[MIGRATORS];
    testkit_threads threads;
    rvt_server other; /* a second reviewd; pid 0 when not running */
    char env[1100];
    rvt_db fresh;
    int fresh_made; /* fresh was created and not dropped */
} limits_case;

static limits_case the_case;

static limits_case *begin_case(void)
{
    memset(&the_case, 0, sizeof(the_case));
    return &the_case;
}

static int end_case(void **state)
{
    limits_case *lc = &the_case;

    (void)state;
    testkit_threads_join_all(&lc->threads);
    rvt_resp_free(&lc->slow.resp);
    if (lc->other.pid > 0)
        rvt_server_terminate(&lc->other);
    if (lc->fresh_made)
        rvt_db_drop(&lc->fresh);
    memset(lc, 0, sizeof(*lc));
    return 0;
}

/* The one worker (REVIEWD_THREADS=1) is parked for 3 s inside a request's
 * transaction; /healthz, asked again and again on fresh connections,
 * answers every time while that request is still parked: it is answered
 * from memory on the event loop, never queued behind blocked work.  The
 * bound is the block itself, not a machine speed. */
static void healthz_answers_while_every_worker_is_blocked(void **state)
{
    limits_case *lc = begin_case();
    slow_create *const b = &lc->slow;
    rvt_resp r;
    int i, ok = 0;

    (void)state;
    *b = (slow_create){srv.port,  alice, (int)rvt_scaled_ms(3000),
                       "blocker", 0,     {0}};
    assert_int_equal(testkit_threads_start(&lc->threads, slow_create_main, b),
                     0);
    TK_EXPECT(testkit_wait_until(in_transaction, &db, rvt_scaled_ms(5000)),
              "the blocker is parked inside its transaction");
    for (i = 0; i < 10 && !atomic_load(&b->answered); i++) {
        rvt_call(srv.port, "GET", "/healthz", NULL, NULL, NULL, &r);
        ok += r.status == 200;
        rvt_resp_free(&r);
    }
    TK_EXPECT(i == 10 && ok == 10 && !atomic_load(&b->answered),
              "10 /healthz answered 200 while the worker was blocked, got "
              "%d of %d before the blocker's answer",
              ok, i);
    testkit_threads_join_all(&lc->threads);
    TK_EXPECT(b->resp.status == 201, "the blocker then succeeds, got %d",
              b->resp.status);
}

static void sigterm_drains_the_request_in_flight(void **state)
{
    limits_case *lc = begin_case();
    slow_create *const slow = &lc->slow;

    (void)state;
    *slow = (slow_create){srv.port,  alice, (int)rvt_scaled_ms(1000),
                          "drained", 0,     {0}};
    assert_int_equal(testkit_threads_start(&lc->threads, slow_create_main,
                                           slow),
                     0);
    TK_EXPECT(testkit_wait_until(in_transaction, &db, rvt_scaled_ms(5000)),
              "the slow request is inside its transaction");
    assert_int_equal(kill(srv.pid, SIGTERM), 0);
    testkit_threads_join_all(&lc->threads);
    TK_EXPECT(slow->resp.status == 201,
              "the request in flight is answered after SIGTERM, got %d",
              slow->resp.status);
    TK_EXPECT(rvt_server_stop(&srv), "reviewd exits 0 after draining");
    TK_EXPECT(rvt_sql_int(&db, "SELECT count(*) FROM kh_document WHERE "
                               "title = 'drained'")
                  == 1,
              "its work committed");
}

/* Runs reviewd with args and env; checks the exit status and that the
 * output names want. */
static void expect_refusal(const char *const *args, const char *const *env,
                           int status, const char *want)
{
    char out[4096];
    const int rc = rvt_run_reviewd(args, env, out, sizeof(out));

    TK_EXPECT(rc == status && strstr(out, want) != NULL,
              "reviewd %s exits %d naming %s, got %d: %s", args[0], status,
              want, rc, out);
}

static void bad_settings_stop_start_up_with_one_line_naming_them(void **state)
{
    static const char *const serve[] = {"serve", NULL};
    const char *secret = "JWT_SECRET=" RVT_SECRET;
    struct {
        const char *env[5];
        const char *want;
    } cases[] = {
        {{secret, NULL}, "DATABASE_URL"},
        {{env_db, NULL}, "JWT_SECRET"},
        {{env_db, "JWT_SECRET=tooshortsecret", NULL}, "JWT_SECRET"},
        {{"DATABASE_URL=postgresql://[bad", secret, NULL}, "DATABASE_URL"},
        {{env_db, secret, "REDIS_URL=http://127.0.0.1:6379", NULL},
         "REDIS_URL"},
        {{env_db, secret, "REDIS_URL=redis://127.0.0.1:99999/0", NULL},
         "REDIS_URL"},
        {{env_db, secret, "AMQP_URL=amqp://h:port/", NULL}, "AMQP_URL"},
        {{env_db, secret, "LISTEN_ADDR=nowhere", NULL}, "LISTEN_ADDR"},
        {{env_db, secret, "REVIEWD_THREADS=0", NULL}, "REVIEWD_THREADS"},
        {{env_db, secret, "CONTENT_STORE=s3", NULL}, "CONTENT_STORE"},
        {{env_db, secret, "DEV_LOGIN=yes", NULL}, "DEV_LOGIN"},
        {{env_db, secret, "LISTEN_ADDR=0.0.0.0:0", "DEV_LOGIN=1", NULL},
         "DEV_LOGIN=1 signs a token for anyone who asks"},
        {{env_db, secret, "CONTENT_STORE=mongo", NULL}, "MONGO_URL"},
        {{"DATABASE_URL=postgresql://dlock:dlock@127.0.0.1:1/x", secret, NULL},
         "DATABASE_URL"},
    };
    const char *const mongo_pw[] = {
        env_db, secret, "CONTENT_STORE=mongo",
        "MONGO_URL=mongodb://bob:s3c:retPW@127.0.0.1:1/db", NULL};
    char out[4096];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_refusal(serve, cases[i].env, 1, cases[i].want);
    assert_int_equal(rvt_run_reviewd(serve, cases[2].env, out, sizeof(out)),
                     1);
    TK_EXPECT(strstr(out, "tooshortsecret") == NULL,
              "a refused secret is not echoed");
    TK_EXPECT(strchr(out, '\n') == strrchr(out, '\n'),
              "the refusal is one line: %s", out);
    /* libmongoc quotes a password with unescaped characters in its
     * refusal. */
    assert_int_equal(rvt_run_reviewd(serve, mongo_pw, out, sizeof(out)), 1);
    TK_EXPECT(strstr(out, "MONGO_URL: Password \"***\"") != NULL
                  && strstr(out, "retPW") == NULL,
              "a refused MONGO_URL's password is not echoed: %s", out);
}

/* The line of out (stdout and stderr together) that holds a JWT, three
 * base64url parts joined by dots, made a string; "" if none does.  A
 * library may write a line of its own to stderr first. */
static const char *jwt_line(char *out)
{
    char *line = out, *end;

    for (; *line != '\0'; line = *end != '\0' ? end + 1 : end) {
        size_t dots = 0, i;

        end = line + strcspn(line, "\n");
        for (i = 0; line + i < end; i++) {
            const char ch = line[i];

            if (ch == '.')
                dots++;
            else if (!isalnum((unsigned char)ch) && ch != '-' && ch != '_')
                break;
        }
        if (line + i == end && dots == 2 && i > 2) {
            *end = '\0';
            return line;
        }
    }
    return "";
}

static void the_token_command_prints_a_token_the_service_accepts(void **state)
{
    static const char *const args[] = {"token",  "--sub", "zed", "--role",
                                       "author", "--ttl", "60",  NULL};
    static const char *const bad_role[] = {"token",  "--sub", "zed",
                                           "--role", "king",  NULL};
    static const char *const no_sub[] = {"token", "--role", "author", NULL};
    const char *const env[] = {"JWT_SECRET=" RVT_SECRET, NULL};
    char out[4096];
    const char *token;
    rvt_resp r;

    (void)state;
    assert_int_equal(rvt_run_reviewd(args, env, out, sizeof(out)), 0);
    token = jwt_line(out);
    rvt_server_start(&srv, &db, NULL, NULL, "reviewd_limits");
    rvt_call(srv.port, "POST", "/v1/documents", token,
             "{\"title\":\"by zed\",\"content\":\"x\"}", NULL, &r);
    TK_EXPECT(r.status == 201 && strcmp(rvt_field(&r, "author"), "zed") == 0,
              "the printed token authenticates as zed (got %d %s; the "
              "command printed \"%s\")",
              r.status, r.body != NULL ? r.body : "", out);
    rvt_resp_free(&r);
    TK_EXPECT(rvt_server_stop(&srv), "the second server exits 0");
    expect_refusal(bad_role, env, 1, "--role");
    expect_refusal(no_sub, env, 2, "usage");
    expect_refusal(args, NULL, 1, "JWT_SECRET");
}

/*
 * PostgreSQL closing idle connections is not PostgreSQL failing.  A
 * reviewd whose breaker opens at the first call that cannot reach the
 * server (REVIEWD_BREAKER_FAILURES=1) has all its connections dropped,
 * three times, and a write follows each time: the write's worker finds
 * its connection closed, connects again and commits, so every write is
 * 201 and the breaker never opened.  What tells the breaker whether the
 * server can be reached is the new connection, not the one the server
 * closed while it sat idle (the pool's, the sweeper's, the relay's).  So
 * when the database then refuses connections and the connections are
 * dropped once more, the write's connect is refused, the write is 503
 * and the breaker opens (as it does for a server that does not answer:
 * the bulkhead test's proxy).
 */
static void dropped_idle_connections_do_not_open_the_breaker(void **state)
{
    limits_case *lc = begin_case();
    const char *const env[] = {"REVIEWD_THREADS=1",
                               "REVIEWD_BREAKER_FAILURES=1",
                               "REVIEWD_BREAKER_OPEN_MS=5000",
                               "REVIEWD_SWEEP_INTERVAL_S=1",
                               "REVIEWD_PG_TIMEOUT_S=2",
                               "REVIEWD_LOG_FILE=@log",
                               NULL};
    rvt_resp r;

    (void)state;
    assert_int_equal(rvt_server_start(&lc->other, &db, NULL, env,
                                      "reviewd_limits_breaker"),
                     0);
    for (int round = 0; round < 3; round++) {
        drop_reviewd_connections();
        /* Long enough for the sweeper (every second) to find its own
         * connection closed before the write does. */
        usleep((useconds_t)rvt_scaled_ms(1500) * 1000);
        rvt_call(lc->other.port, "POST", "/v1/documents", alice,
                 "{\"title\":\"after the drop\",\"content\":\"x\"}", NULL, &r);
        TK_EXPECT(r.status == 201,
                  "round %d: a write after PostgreSQL dropped every "
                  "connection is 201, got %d %s",
                  round, r.status, r.body != NULL ? r.body : "");
        rvt_resp_free(&r);
    }
    TK_EXPECT(rvt_metric(lc->other.port, "reviewd_pg_breaker_opens_total")
                  == 0,
              "the breaker never opened, it opened %lld times",
              (long long)rvt_metric(lc->other.port,
                                    "reviewd_pg_breaker_opens_total"));
    allow_connections(0);
    drop_reviewd_connections();
    usleep((useconds_t)rvt_scaled_ms(1500) * 1000);
    rvt_call(lc->other.port, "POST", "/v1/documents", alice,
             "{\"title\":\"refused\",\"content\":\"x\"}", NULL, &r);
    allow_connections(1);
    TK_EXPECT(r.status == 503,
              "a write whose connect is refused is 503, got %d", r.status);
    rvt_resp_free(&r);
    TK_EXPECT(rvt_metric(lc->other.port, "reviewd_pg_breaker_opens_total")
                  >= 1,
              "a refused connect opens the breaker");
    TK_EXPECT(rvt_server_stop(&lc->other), "the second server exits 0");
    lc->other.pid = 0;
    TK_EXPECT(rvt_wait_ready(srv.port, "degraded", "off", 10000),
              "the file's reviewd is ready again");
}

static void *migrate_main(void *arg)
{
    static const char *const args[] = {"migrate", NULL};
    migrate_run *m = arg;

    m->rc = rvt_run_reviewd(args, m->env, m->out, sizeof(m->out));
    return NULL;
}

static void migrations_started_together_apply_once(void **state)
{
    limits_case *lc = begin_case();
    migrate_run *runs = lc->runs;
    int i;

    (void)state;
    assert_int_equal(rvt_db_create(&lc->fresh, "migrate"), 0);
    lc->fresh_made = 1;
    snprintf(lc->env, sizeof(lc->env), "DATABASE_URL=%s", lc->fresh.url);
    for (i = 0; i < MIGRATORS; i++) {
        runs[i].env[0] = lc->env;
        runs[i].env[1] = NULL;
        assert_int_equal(testkit_threads_start(&lc->threads, migrate_main,
                                               &runs[i]),
                         0);
    }
    testkit_threads_join_all(&lc->threads);
    for (i = 0; i < MIGRATORS; i++)
        TK_EXPECT(runs[i].rc == 0, "migrate %d exits 0: %s", i, runs[i].out);
    TK_EXPECT(rvt_sql_int(&lc->fresh,
                          "SELECT count(*) FROM kh_schema_migration")
                  == rvt_sql_int(&lc->fresh, "SELECT max(version) FROM "
                                             "kh_schema_migration"),
              "each migration is recorded once");
    TK_EXPECT(rvt_sql_int(&lc->fresh,
                          "SELECT count(*) FROM pg_indexes WHERE "
                          "indexname = 'kh_document_review_one_pending'")
                  == 1,
              "the partial unique index exists");
    rvt_sql(&lc->fresh,
            "UPDATE kh_schema_migration SET checksum = 'edited' "
            "WHERE version = 1",
            NULL, 0);
    migrate_main(&runs[0]);
    TK_EXPECT(runs[0].rc == 1 && strstr(runs[0].out, "changed") != NULL,
              "an edited applied migration is refused: %s", runs[0].out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_connection_limit_holds_further_clients_off),
        cmocka_unit_test(idle_and_slow_clients_are_cut_off),
        cmocka_unit_test(
            expired_idempotency_records_are_swept_and_not_replayed),
        cmocka_unit_test(postgres_going_away_is_503_and_readyz_down),
        cmocka_unit_test(writes_survive_postgres_dropping_idle_connections),
        cmocka_unit_test_teardown(
            dropped_idle_connections_do_not_open_the_breaker, end_case),
        cmocka_unit_test(sighup_reopens_the_log_file),
        cmocka_unit_test_teardown(
            healthz_answers_while_every_worker_is_blocked, end_case),
        cmocka_unit_test_teardown(sigterm_drains_the_request_in_flight,
                                  end_case),
        cmocka_unit_test(bad_settings_stop_start_up_with_one_line_naming_them),
        cmocka_unit_test(the_token_command_prints_a_token_the_service_accepts),
        cmocka_unit_test_teardown(migrations_started_together_apply_once,
                                  end_case),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
