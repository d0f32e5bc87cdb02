/*
 * rvt_kit.h: what reviewd's tests share: a fresh database, a reviewd
 * process, an HTTP client, tokens and storms.
 *
 * Every test program drives a real reviewd binary (REVIEWD_BIN, set by
 * CTest) against the stack's PostgreSQL and a Redis, through HTTP on
 * loopback, as an outside client would:
 *
 *   - a database of its own per run, "rvt_<name>_<pid>_<random>", created
 *     on the stack's server and dropped at the end, so parallel runs (the
 *     normal and the sanitizer build) never see each other's rows;
 *   - ids that start at a random offset (the identity sequences are
 *     restarted), because lock keys are lock:doc:submit:{id} exactly as
 *     docs/api.md says, and two test runs sharing the stack's Redis must never
 *     contend for the same key;
 *   - reviewd started on port 0 (the kernel picks a free one) with its
 *     JSON log in var/test/<name>-<pid>/reviewd-N.log, found ready by its
 *     "listening" line, stopped with SIGTERM by pid, and required to exit
 *     0, which rvt_server_stop asserts itself (under ASan that also means
 *     "no leak, no error"), so a crash or an abort at shutdown fails
 *     whichever test stopped it;
 *   - an HTTP/1.1 client on plain sockets (one connection per request,
 *     Connection: close), which also sends raw bytes for the fuzz test;
 *   - HS256 tokens made with libjwt, including wrong ones on purpose.
 *
 * Every wait is bounded.  Threads: rvt_http_* and rvt_call may be used
 * from any thread (storms); process and database functions belong to the
 * main thread.
 */
#ifndef RVT_KIT_H
#define RVT_KIT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The JWT secret every test reviewd uses (32 bytes). */
#define RVT_SECRET "rvt-secret-0123456789abcdefghijk"

typedef struct rvt_db {
    char name[96];
    char url[512];       /* key=value conninfo for reviewd and the test */
    char admin_url[512]; /* the stack's database, to create and drop */
    void *conn;          /* the test's own connection (PGconn), cached */
} rvt_db;

typedef struct rvt_server {
    pid_t pid;
    int port;
    char dir[512]; /* var/test/<name>-<pid> */
    char log[600];
    int exit_status; /* after rvt_server_stop: the wait status */
} rvt_server;

typedef struct rvt_resp {
    int status; /* 0: no response (connection closed or timeout) */
    int timed_out;
    char headers[8192]; /* the raw header block */
    char *body;         /* NUL-terminated */
    size_t body_len;
    json_t *json; /* the body parsed, when it is JSON */
} rvt_resp;

/* ms times RVT_TIMEOUT_SCALE (1 when unset; scripts/chaos --leaks sets 10,
 * since reviewd runs 20-50x slower under valgrind memcheck): for a test's
 * own bounds on waits, and for a pause that must outlast what the test
 * does meanwhile. */
int64_t rvt_scaled_ms(int64_t ms);

/* ---- database ------------------------------------------------------------ */

/* Creates a fresh database (running scripts/stack up postgres if the
 * server does not answer).  Returns 0 or -1 (message on stderr). */
int rvt_db_create(rvt_db *db, const char *name);
/* Closes the cached connection (the next rvt_sql opens another). */
void rvt_db_close(rvt_db *db);
/* Closes it and drops the database (WITH (FORCE)). */
void rvt_db_drop(rvt_db *db);
/* Runs SQL on db (on one cached connection: SCRAM makes connecting
 * costly) and copies the first column of the first row into out (may be
 * NULL).  Returns 0, or -1 with the error on stderr. */
int rvt_sql(rvt_db *db, const char *sql, char *out, size_t outlen);
/* The first value of a query as a number (-1 on error). */
long long rvt_sql_int(rvt_db *db, const char *sql);
/* Restarts the document and review id sequences at a random offset. */
int rvt_db_offset_ids(rvt_db *db);

/* ---- reviewd ------------------------------------------------------------- */

/*
 * Starts reviewd with DATABASE_URL=db->url, JWT_SECRET=RVT_SECRET,
 * LISTEN_ADDR=127.0.0.1:0, REDIS_URL=redis_url (NULL: empty), fast health
 * checks, and extra_env ("NAME=value" strings, NULL-terminated, may be
 * NULL) on top; "REVIEWD_LOG_FILE=@log" makes reviewd write its log file
 * itself, at the path the kit reads.  Waits up to 30 s for its
 * "listening" line.  Returns 0 or -1 (the log's tail on stderr).
 */
int rvt_server_start(rvt_server *s, const rvt_db *db, const char *redis_url,
                     const char *const *extra_env, const char *name);
/*
 * SIGTERM, waits up to 15 s (then SIGKILL), and requires a clean exit:
 * status 0, no signal (a crash, an abort, or under the sanitizers an
 * error or a leak), else the running cmocka test fails there, naming
 * the status and the log (its tail on stderr), and saying so when the
 * log holds a sanitizer's report.  Returns 1 (the return is kept for
 * callers that test it).
 */
int rvt_server_stop(rvt_server *s);
/* rvt_server_stop without the requirement, for cleanup that must finish
 * before a test fails and for programs that are not cmocka tests:
 * returns 1 if it exited 0, else 0 with the status and the log's tail on
 * stderr. */
int rvt_server_terminate(rvt_server *s);
/* Fails the running cmocka test unless the stopped server exited 0. */
void rvt_server_expect_clean(const rvt_server *s);
/* Removes the server's folder (kept with DLOCK_TEST_KEEP). */
void rvt_server_remove_dir(const rvt_server *s);
/* 1 if the server's log contains text. */
int rvt_server_log_has(const rvt_server *s, const char *text);
/* 1 if the server's log (its stderr too) holds a report of ASan, LSan or
 * UBSan, whatever the exit status they left. */
int rvt_server_log_has_sanitizer_report(const rvt_server *s);
/* 1 once the server's log contains text, 0 if it did not within 5 s:
 * for the access log's lines, which reviewd writes in batches
 * (REVIEWD_LOG_FLUSH_MS), so a request's line may come a little after
 * its response. */
int rvt_server_log_shows(const rvt_server *s, const char *text);
/* Prints the log's last lines to stderr (after a failure). */
void rvt_server_log_tail(const rvt_server *s);

/*
 * Runs the reviewd binary with args and env ("NAME=value", NULL-terminated)
 * in a clean environment, captures stdout+stderr into out (truncated) and
 * returns the exit status (-1 if it could not run or took over 30 s).
 */
int rvt_run_reviewd(const char *const *args, const char *const *env, char *out,
                    size_t outlen);

/*
 * Starts bin with argv (argv[0] included, NULL-terminated) in the clean
 * environment reviewd gets (PATH, HOME, the sanitizers' options) plus
 * extra_env ("NAME=value", NULL-terminated, may be NULL), stdout and
 * stderr appended to out_path.  The child gets SIGKILL if the test dies.
 * Returns its pid (the caller reaps it), or -1 with the reason on stderr.
 * For the other services the tests drive (kh-indexer).
 */
pid_t rvt_spawn(const char *bin, const char *const *argv,
                const char *const *extra_env, const char *out_path);

/* ---- the usual fixture: one database, one reviewd ------------------------ */

/*
 * Creates the database name, starts reviewd on it as rvt_server_start
 * does (the server named "reviewd_<name>"), and with offset_ids restarts
 * the id sequences at a random offset (rvt_db_offset_ids).  Returns 0 or
 * -1 (the reason on stderr).  The opening of most test programs' setup.
 */
int rvt_fixture_start(rvt_db *db, rvt_server *srv, const char *name,
                      const char *redis_url, const char *const *extra_env,
                      int offset_ids);
/* Stops reviewd, removes its folder when it exited 0 (its log's tail is
 * on stderr when not), drops the database, then requires the clean exit
 * as rvt_server_stop does.  Returns 1. */
int rvt_fixture_stop(rvt_db *db, rvt_server *srv);

/* The reviewd binary (REVIEWD_BIN, or build/services/reviewd/reviewd). */
const char *rvt_reviewd_bin(void);

/* ---- HTTP ---------------------------------------------------------------- */

/* Sends len raw bytes and reads the answer until EOF or timeout_ms. */
int rvt_http_raw(int port, const char *bytes, size_t len, int timeout_ms,
                 rvt_resp *out);

/*
 * Sends one request.  headers: "Name: value" strings, NULL-terminated (may
 * be NULL); Content-Length is added when body is not NULL; Host and
 * Connection: close always.  Returns 0 when a response came, else -1.
 */
int rvt_http(int port, const char *method, const char *path,
             const char *const *headers, const char *body, size_t body_len,
             rvt_resp *out);

/*
 * The common case: token (NULL: no Authorization), a JSON body (NULL:
 * none; sent as application/json), and an optional Idempotency-Key.
 */
int rvt_call(int port, const char *method, const char *path, const char *token,
             const char *json_body, const char *idem_key, rvt_resp *out);

/* The value of a response header (case-insensitive name) into buf, or
 * NULL when absent. */
const char *rvt_header(const rvt_resp *r, const char *name, char *buf,
                       size_t len);

/* In a cmocka test: fails unless r has status and, when code is not
 * NULL, that error code; the message names what was asked and shows the
 * body.  On failure it frees r first (the test leaves by longjmp, past
 * the caller's rvt_resp_free, and scripts/chaos --leaks would count the
 * response as lost). */
void rvt_expect_status(rvt_resp *r, int status, const char *code,
                       const char *what);

/* A string field of the response JSON (nested with "a.b"), or NULL. */
const char *rvt_field(const rvt_resp *r, const char *path);

/* The value of a /metrics family without labels ("name value" on a line
 * of its own) from the server on port, or -1 when it is absent or
 * /metrics did not answer 200. */
long long rvt_metric(int port, const char *name);

void rvt_resp_free(rvt_resp *r);

/* ---- tokens -------------------------------------------------------------- */

/* A valid HS256 token for sub/role, valid for ttl_s (negative: expired). */
char *rvt_token(const char *sub, const char *role, long ttl_s);

/* One person a test program acts as: rvt_people_mint writes a token for
 * sub and role, valid for an hour, into *token (a static of the program,
 * owned until rvt_people_free). */
typedef struct rvt_person {
    char **token;
    const char *sub;
    const char *role;
} rvt_person;

/* Mints the token of each person of people, a list ended by an entry
 * whose token is NULL.  Returns 0, or -1 when one could not be made (a
 * setup's result). */
int rvt_people_mint(const rvt_person *people);

/* Frees each person's token and sets it to NULL. */
void rvt_people_free(const rvt_person *people);

/* The usual teardown: rvt_fixture_stop, then rvt_people_free (people may
 * be NULL).  Returns 0 if reviewd exited 0, else -1 (a teardown's
 * result). */
int rvt_fixture_end(rvt_db *db, rvt_server *srv, const rvt_person *people);

/* The opening of a setup whose cases start their own reviewd: makes the
 * stack's Redis answer (testkit_shared_redis), its URL into *redis_url,
 * then mints people's tokens (rvt_people_mint).  Returns 0, or -1 (a
 * setup's result) when either failed. */
int rvt_setup_shared(const char **redis_url, const rvt_person *people);

/* ---- fixtures ------------------------------------------------------------ */

/* Creates a draft by the author token; writes its id into id (24 bytes).
 * Returns 0 or -1. */
int rvt_create_doc(int port, const char *author_token, const char *title,
                   char *id);
/* Creates and submits a document; writes the review id. */
int rvt_create_pending(int port, const char *author_token, char *doc_id,
                       char *review_id);

/* ---- storms -------------------------------------------------------------- */

/* One request of a storm. */
typedef struct rvt_storm_req {
    const char *method;
    char path[128];
    const char *token;
    const char *body;
    int status;    /* filled in */
    char code[32]; /* the error code, if any */
} rvt_storm_req;

/*
 * Sends every request of reqs from its own thread, all released at once
 * by a barrier.  When on_half is not NULL it is called (from the main
 * thread) once half of the answers are in, e.g. to stop Redis in the
 * middle of the storm.  Returns 0, or -1 if threads could not start.
 */
int rvt_storm(int port, rvt_storm_req *reqs, int n, void (*on_half)(void *arg),
              void *arg);

/* ---- waiting ------------------------------------------------------------- */

/* Polls GET /readyz until its "status" is want (and "redis" is redis_want
 * when not NULL), up to timeout_ms.  Returns 1 if it got there. */
int rvt_wait_ready(int port, const char *want, const char *redis_want,
                   int64_t timeout_ms);

#endif /* RVT_KIT_H */
