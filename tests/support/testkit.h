/*
 * testkit.h: what every C test of dlock shares.
 *
 * The tests run against real redis-server processes (docs/design.md), in
 * parallel with each other, on a shared 2-core machine.  This kit keeps
 * them honest and out of each other's way:
 *
 *   - the environment contract (DLOCK_TEST_REDIS_URL and friends, with the
 *     defaults of scripts/stack), and a shared Redis that is made to answer
 *     (scripts/stack up redis) before a test relies on it;
 *   - key names unique to the test and the process, "t:<name>:<pid>:<n>",
 *     because every test shares that one Redis and may never flush it;
 *   - private redis-server processes for tests that restart, pause or
 *     reconfigure a server (TLS, ACL, requirepass, SCRIPT FLUSH): each runs
 *     from its own folder under var/test/<name>-<pid>/ on a free loopback
 *     port, and is stopped by its pid, never by name;
 *   - a blocking hiredis helper, testkit_redis_cmd, to act behind the
 *     library's back (DEL a held key, read PTTL, SCRIPT FLUSH);
 *   - bounded condition waits: a test never sleeps and hopes.
 *
 * Failures inside the kit are reported on stderr with what was tried, and
 * the functions return NULL or -1 so that the test's own assertion says
 * what it needed.
 *
 * Threads: testkit_key, testkit_redis_cmd and the clock and wait helpers
 * may be called from any thread.
 * The private-server functions belong to the thread that started the
 * server, which must be the process's main thread: the server is told to
 * exit when that thread ends (PR_SET_PDEATHSIG), so a crashed test never
 * leaves a redis-server behind.
 */
#ifndef DLOCK_TESTKIT_H
#define DLOCK_TESTKIT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

/* ---- assertions --------------------------------------------------------- */

/*
 * TK_EXPECT(cond, "what should have happened", ...): in a cmocka test, fails
 * the test at this line with the message (printf-style) when cond is false.
 * Include <cmocka.h> (after its usual prerequisites) before using it.  Like
 * every cmocka failure it jumps back into the test runner, so it may only
 * be used on the thread that runs the test.
 */
#define TK_EXPECT(cond, ...)                           \
    do {                                               \
        if (!(cond)) {                                 \
            print_error("expected: " __VA_ARGS__);     \
            print_error("\n  (%s is false)\n", #cond); \
            _fail(__FILE__, __LINE__);                 \
        }                                              \
    } while (0)

/* TK_FAIL("what should have happened", ...): fails the test at this line
 * with the message, as TK_EXPECT does when its condition is false; for a
 * check that must release something between deciding and failing (the
 * failure leaves by longjmp, past the caller's clean-up). */
#define TK_FAIL(...)                           \
    do {                                       \
        print_error("expected: " __VA_ARGS__); \
        print_error("\n");                     \
        _fail(__FILE__, __LINE__);             \
    } while (0)

/* TK_EXPECT_ERR(got, want, client, "doing what"): a dlock_err comparison
 * that prints both names and the client's message. */
#define TK_EXPECT_ERR(got, want, client, what)                             \
    do {                                                                   \
        dlock_err tk_got_ = (got), tk_want_ = (want);                      \
        TK_EXPECT(tk_got_ == tk_want_, "%s gives %s, got %s (\"%s\")",     \
                  (what), dlock_errname(tk_want_), dlock_errname(tk_got_), \
                  (client) != NULL ? dlock_client_errmsg(client) : "");    \
    } while (0)

/* ---- environment ------------------------------------------------------ */

/* DLOCK_TEST_REDIS_URL, or redis://127.0.0.1:16379/0. */
const char *testkit_redis_url(void);
/* DLOCK_TEST_REDIS_UNIX_URL, or unix://<source>/var/stack/redis/redis.sock. */
const char *testkit_redis_unix_url(void);
/* DLOCK_TEST_DATABASE_URL, or the stack's PostgreSQL URL. */
const char *testkit_database_url(void);
/* DLOCK_TEST_AMQP_URL, or the stack's RabbitMQ URL. */
const char *testkit_amqp_url(void);
/* DLOCK_SOURCE_DIR, or the source tree this kit was compiled from. */
const char *testkit_source_dir(void);
/* DLOCK_BUILD_DIR, or the build tree this kit was compiled in. */
const char *testkit_build_dir(void);

/*
 * Makes the shared stack's Redis answer: PINGs testkit_redis_url() and, if
 * that fails, runs "$DLOCK_SOURCE_DIR/scripts/stack up redis" and PINGs
 * again for up to 20 s.  Returns the URL, or NULL (with a message on
 * stderr) when no Redis could be had.
 */
const char *testkit_shared_redis(void);

/* Makes var/test/<name>-<pid>/ under the source tree (and its parents)
 * and writes its path into buf; returns buf, or NULL with the reason on
 * stderr.  For files a test keeps outside Redis. */
char *testkit_scratch_dir(char *buf, size_t len, const char *name);

/* Removes a folder made by testkit_scratch_dir and what is in it (kept when
 * DLOCK_TEST_KEEP is set, for a look after a failure). */
void testkit_scratch_remove(const char *dir);

/* ---- names and time --------------------------------------------------- */

/* Size of a buffer for testkit_key. */
#define TESTKIT_KEY_MAX 256

/* Writes "t:<name>:<pid>:<counter>" into buf and returns buf; the counter
 * is process-wide, so every call gives a new name. */
char *testkit_key(char buf[TESTKIT_KEY_MAX], const char *name);

/* Microseconds and milliseconds on CLOCK_MONOTONIC. */
int64_t testkit_now_us(void);
int64_t testkit_now_ms(void);

/* Microseconds since the epoch on this host's wall clock (to compare with
 * a server's TIME or a fence). */
int64_t testkit_wall_us(void);

/*
 * Calls cond(arg) until it returns non-zero or timeout_ms has passed,
 * sleeping 1 ms at first and at most 10 ms between calls.  Returns 1 if
 * the condition held (it is checked once more at the deadline), 0 if the
 * wait ran out.
 */
int testkit_wait_until(int (*cond)(void *arg), void *arg, int64_t timeout_ms);

/* ---- a blocking Redis client for the tests' own commands --------------- */

/*
 * Connects to url (redis://[user:pass@]host:port[/db] or
 * unix:///path[?db=N]; no TLS), runs one command formatted as for hiredis's
 * redisCommand (%s, %b, %d ...), and disconnects.  Returns the reply, to be
 * freed with freeReplyObject, or NULL when the server could not be reached
 * (message on stderr).  An error reply is returned as a reply.
 */
redisReply *testkit_redis_cmd(const char *url, const char *fmt, ...);

/* The same, answering an integer reply's value, or INT64_MIN when the reply
 * is missing or not an integer. */
long long testkit_redis_int(const char *url, const char *fmt, ...);

/* 1 if the server at url answers PING with PONG within 1 s. */
int testkit_redis_ping(const char *url);

/* The reply hiredis's reader makes of RESP text resp, as the library gets
 * it from a server (for tests of the code that reads replies): freed with
 * freeReplyObject; NULL, with why on stderr, unless resp is exactly one
 * complete reply. */
redisReply *testkit_reply_of(const char *resp);

/* Deletes a lock's key and its fence counters (#dlock:fence:{key}, and the
 * legacy {key}:fence), for a key without a hash tag, to leave the
 * shared server tidy. */
void testkit_forget_lock(const char *url, const char *key);

/* ---- private redis-server --------------------------------------------- */

/* What a private server is started with; zero means "not wanted". */
typedef struct testkit_redis_opts {
    /* Folder name under var/test/ (with "-<pid>" appended); required. */
    const char *name;
    /* Also listen on var/test/<name>-<pid>/redis.sock. */
    int unix_socket;
    /* Listen for TLS on a second free port with certificates made for the
     * test (see testkit_certs); the plain port stays open for the kit. */
    int tls;
    /* With tls: require a client certificate (tls-auth-clients yes). */
    int tls_auth_clients;
    /* requirepass: a password for the default user. */
    const char *requirepass;
    /* An ACL user "user NAME on >PASS ~* &* +@all". */
    const char *acl_user;
    const char *acl_pass;
    /* appendonly yes (fsync everysec), so a restart keeps the data. */
    int appendonly;
    /* Run the server under the wall-clock shim (dlock_test_wallclock.c):
     * its CLOCK_REALTIME is shifted by the offset in r->wallclock_file
     * (made at 0 here), which testkit_redis_clock_step changes while the
     * server runs.  Key expiry and TIME follow it. */
    int wallclock;
    /* More redis.conf directives, one a line, written after the others
     * (cluster-enabled, appendfsync ...).  Copied at start. */
    const char *extra_conf;
} testkit_redis_opts;

/* Certificates that testkit_redis_start makes with the openssl command when
 * opts.tls is set (PEM files in the server's folder). */
typedef struct testkit_certs {
    char ca_file[512];     /* the CA that signed server and client */
    char server_cert[512]; /* CN=localhost, SAN DNS:localhost,
                                 * IP:127.0.0.1 */
    char server_key[512];
    char client_cert[512]; /* CN=dlock-test-client, clientAuth */
    char client_key[512];
    char other_ca_file[512]; /* an unrelated CA, for the wrong-CA case */
} testkit_certs;

typedef struct testkit_redis {
    char name[64];
    char dir[400];  /* var/test/<name>-<pid> */
    char conf[600]; /* its redis.conf */
    char log[600];  /* its log file */
    int port;       /* plain TCP port on 127.0.0.1 */
    int tls_port;   /* TLS port, 0 without TLS */
    pid_t pid;      /* 0 while stopped */
    int paused;
    /* redis://[:pass@ or user:pass@]127.0.0.1:port/0, for the library;
     * admin_url carries the server's password so the kit can always get
     * in.  tls_url is rediss://127.0.0.1:tls_port/0. */
    char url[700];
    char admin_url[700];
    char tls_url[700];
    char unix_path[600];
    char unix_url[700];
    testkit_certs certs;
    testkit_redis_opts opts;
    char requirepass[128];
    char acl_user[64];
    char acl_pass[128];
    char wallclock_file[600]; /* with opts.wallclock: the offset file */
    char extra_conf[1024];    /* opts.extra_conf, kept for restarts */
} testkit_redis;

/*
 * Makes var/test/<name>-<pid>/, writes its redis.conf (and certificates),
 * starts redis-server on free loopback ports and waits up to 10 s until it
 * answers PING.  Returns the server, or NULL with the reason and the tail
 * of the server's log on stderr.
 */
testkit_redis *testkit_redis_start(const testkit_redis_opts *opts);

/* SIGTERM (SIGKILL after 5 s), then waits for the process to exit.  The
 * folder, ports and configuration are kept for testkit_redis_restart.
 * Returns 0, or -1 if the process would not go. */
int testkit_redis_stop(testkit_redis *r);

/* Stops the server if it runs and starts it again on the same ports,
 * waiting until it answers.  Returns 0 or -1. */
int testkit_redis_restart(testkit_redis *r);

/* SIGSTOP and SIGCONT: the server keeps its sockets but answers nothing
 * while paused.  Return 0 or -1. */
/* Stops r, sets its wall clock offset_ms away from the host's (a server
 * started with opts.wallclock) and starts it again; without persistence it
 * comes back empty.  Returns 0, or -1 with the reason on stderr. */
int testkit_redis_restart_at(testkit_redis *r, int64_t offset_ms);

int testkit_redis_pause(testkit_redis *r);
int testkit_redis_resume(testkit_redis *r);

/* Stops the server, removes its folder and frees r.  NULL is fine. */
void testkit_redis_free(testkit_redis *r);

/* With opts.wallclock: sets the server's wall clock to run offset_ms
 * milliseconds away from the host's (absolute, not added to the last
 * step; negative is behind).  Takes effect at the server's next clock
 * reading.  Returns 0 or -1. */
int testkit_redis_clock_step(testkit_redis *r, int64_t offset_ms);

/*
 * Runs argv (searched in PATH) with stdout and stderr appended to log and
 * waits for it, at most timeout_ms when that is above 0 (then SIGKILL).
 * Returns its exit status, or -1 when it could not be run, was killed by
 * a signal or ran out of time.
 */
int testkit_run_logged(const char *const *argv, const char *log,
                       int64_t timeout_ms);

/* A port on 127.0.0.1 that nothing listens on right now (bound to port 0,
 * read back, closed), or -1. */
int testkit_free_port(void);

/* ---- faults: wall-clock offsets and a pausable proxy ------------------ */

/* The shim's path: <build>/tests/support/libdlock_test_wallclock.so. */
const char *testkit_wallclock_shim(void);

/*
 * Writes offset_ms into the 8-byte offset file read by the wall-clock shim
 * (creating it if needed), with one atomic store through a shared mapping
 * so a running process sees the old or the new value, never a mix.
 * Returns 0, or -1 with the reason on stderr.
 */
int testkit_wallclock_set(const char *file, int64_t offset_ms);

/* A running dlock-test-proxy (dlock_test_proxy.c). */
typedef struct testkit_proxy {
    pid_t pid;         /* 0 once stopped */
    int port;          /* listens on 127.0.0.1:port */
    char dir[400];     /* var/test/<name>-<pid>/ */
    char control[600]; /* its control socket */
    char url[700];     /* redis://127.0.0.1:port/0 */
} testkit_proxy;

/*
 * Starts a proxy on a free loopback port forwarding to target
 * ("HOST:PORT"), in var/test/<name>-<pid>/, and waits until it is ready.
 * The proxy dies with the calling thread (PR_SET_PDEATHSIG).  Returns it,
 * or NULL with the reason on stderr.
 */
testkit_proxy *testkit_proxy_start(const char *name, const char *target);

/*
 * Sends one control command and waits for its answer: "pause", "resume",
 * "reset", "delay MS", "target HOST:PORT", "stats".  The command has taken
 * effect when this returns 0; -1 means it was refused or the proxy could
 * not be reached (message on stderr).
 */
int testkit_proxy_ctl(testkit_proxy *p, const char *command);

/* SIGTERM, waits for exit, removes its folder and frees p.  NULL is fine. */
void testkit_proxy_free(testkit_proxy *p);

/* testkit_proxy_start in front of a server listening on 127.0.0.1:port
 * (a private redis-server's port, a MongoDB's, a master's). */
testkit_proxy *testkit_proxy_for(const char *name, int port);

/*
 * A private redis-server with a proxy in front of it: what a test needs
 * to silence, delay or reset the link between a client and its server
 * while the test itself still reaches the server directly.
 */
typedef struct testkit_proxied {
    testkit_redis *server; /* owned; the test's own way in (server->url) */
    testkit_proxy *proxy;  /* owned; forwards to server's plain port */
    const char *url;       /* proxy->url: for the client under test */
} testkit_proxied;

/*
 * Starts a private redis-server with *opts (as testkit_redis_start) and a
 * proxy named "<opts->name>-proxy" in front of it.  Returns both, or NULL
 * with the reason on stderr (whatever had started is stopped again).
 */
testkit_proxied *testkit_proxied_start(const testkit_redis_opts *opts);

/* Stops the proxy, then the server (testkit_proxy_free, then
 * testkit_redis_free), and frees pr.  NULL is fine. */
void testkit_proxied_free(testkit_proxied *pr);

#endif /* DLOCK_TESTKIT_H */
