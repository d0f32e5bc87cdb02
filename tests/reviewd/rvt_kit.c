/*
 * rvt_kit.c: the reviewd test kit (see rvt_kit.h).
 *
 * The HTTP client is deliberately small: HTTP/1.1 with Connection: close,
 * so a response ends at EOF and no keep-alive state has to be right for
 * the test to be right.  While sending a body it also watches for an
 * early answer (reviewd answers 413 before reading an oversized body, and
 * closes), and stops sending so the answer is not lost to a reset.
 */
#include "rvt_kit.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jwt.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testkit.h"

extern char **environ;

#define RVT_START_TIMEOUT_MS 30000
#define RVT_STOP_TIMEOUT_MS 15000
#define RVT_HTTP_TIMEOUT_MS 20000

/* The kit's own bounds on waits (start, stop, an HTTP answer, readiness,
 * a storm) are multiplied by RVT_TIMEOUT_SCALE (a whole number, 1 to 100;
 * 1 when unset): scripts/chaos --leaks runs reviewd under valgrind
 * memcheck (REVIEWD_BIN names its stand-in), 20-50x slower.  Tests scale
 * their own waits and pauses with it too (rvt_scaled_ms).  A wait whose
 * condition is met still ends at once.  rvt_http_raw's timeout_ms is left
 * as the caller gave it: a test may use it to say "no answer within". */
int64_t rvt_scaled_ms(int64_t ms)
{
    const char *v = getenv("RVT_TIMEOUT_SCALE");
    const long k = v != NULL ? strtol(v, NULL, 10) : 1;

    return k >= 1 && k <= 100 ? ms * k : ms;
}

/* ---- database ------------------------------------------------------------ */

/* Appends keyword='value' (quoted for libpq) to buf. */
static void append_kv(char *buf, size_t len, const char *kw, const char *v)
{
    size_t n = strlen(buf);

    n += (size_t)snprintf(buf + n, len - n, "%s%s='", n > 0 ? " " : "", kw);
    for (; *v != '\0' && n + 3 < len; v++) {
        if (*v == '\'' || *v == '\\')
            buf[n++] = '\\';
        buf[n++] = *v;
    }
    snprintf(buf + n, len - n, "'");
}

/* Rewrites the conninfo url with dbname replaced, as key=value. */
static int with_dbname(const char *url, const char *dbname, char *out,
                       size_t len)
{
    char *err = NULL;
    PQconninfoOption *opts = PQconninfoParse(url, &err);
    PQconninfoOption *o;

    if (opts == NULL) {
        fprintf(stderr, "rvt: bad database URL %s: %s\n", url,
                err != NULL ? err : "?");
        PQfreemem(err);
        return -1;
    }
    out[0] = '\0';
    for (o = opts; o->keyword != NULL; o++)
        if (o->val != NULL && o->val[0] != '\0'
            && strcmp(o->keyword, "dbname") != 0)
            append_kv(out, len, o->keyword, o->val);
    append_kv(out, len, "dbname", dbname);
    PQconninfoFree(opts);
    return 0;
}

static PGconn *connect_quiet(const char *url)
{
    PGconn *c = PQconnectdb(url);

    if (PQstatus(c) != CONNECTION_OK) {
        PQfinish(c);
        return NULL;
    }
    return c;
}

static int stack_answers(void *arg)
{
    PGconn *c = connect_quiet(arg);

    PQfinish(c);
    return c != NULL;
}

/* Connects to the stack's database, starting the stack if need be. */
static PGconn *connect_admin(const char *url)
{
    char cmd[1024];
    PGconn *c = connect_quiet(url);

    if (c != NULL)
        return c;
    snprintf(cmd, sizeof(cmd), "'%s/scripts/stack' up postgres >&2",
             testkit_source_dir());
    if (system(cmd) != 0
        || !testkit_wait_until(stack_answers, (void *)url, 30000)) {
        fprintf(stderr, "rvt: no PostgreSQL at %s\n", url);
        return NULL;
    }
    return connect_quiet(url);
}

static int exec_ok(PGconn *c, const char *sql)
{
    PGresult *res = PQexec(c, sql);
    const int ok = PQresultStatus(res) == PGRES_COMMAND_OK
                   || PQresultStatus(res) == PGRES_TUPLES_OK;

    if (!ok)
        fprintf(stderr, "rvt: %s: %s", sql, PQerrorMessage(c));
    PQclear(res);
    return ok;
}

int rvt_db_create(rvt_db *db, const char *name)
{
    unsigned int r = 0;
    char sql[256];
    PGconn *c;

    memset(db, 0, sizeof(*db));
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
        r = (unsigned)time(NULL);
    snprintf(db->name, sizeof(db->name), "rvt_%s_%d_%08x", name, (int)getpid(),
             r);
    snprintf(db->admin_url, sizeof(db->admin_url), "%s",
             testkit_database_url());
    if (with_dbname(db->admin_url, db->name, db->url, sizeof(db->url)) != 0)
        return -1;
    c = connect_admin(db->admin_url);
    if (c == NULL)
        return -1;
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s", db->name);
    r = exec_ok(c, sql);
    PQfinish(c);
    return r ? 0 : -1;
}

void rvt_db_close(rvt_db *db)
{
    PQfinish(db->conn);
    db->conn = NULL;
}

void rvt_db_drop(rvt_db *db)
{
    char sql[256];
    PGconn *c;

    rvt_db_close(db);
    if (db->name[0] == '\0' || getenv("DLOCK_TEST_KEEP") != NULL)
        return;
    c = connect_quiet(db->admin_url);
    if (c == NULL)
        return;
    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)",
             db->name);
    exec_ok(c, sql);
    PQfinish(c);
    db->name[0] = '\0';
}

int rvt_sql(rvt_db *db, const char *sql, char *out, size_t outlen)
{
    PGconn *c = db->conn;
    PGresult *res;
    int rc = -1;

    if (c == NULL || PQstatus(c) != CONNECTION_OK) {
        PQfinish(c);
        c = db->conn = connect_quiet(db->url);
    }
    if (c == NULL) {
        fprintf(stderr, "rvt: cannot connect to %s\n", db->name);
        return -1;
    }
    res = PQexec(c, sql);
    if (PQresultStatus(res) == PGRES_TUPLES_OK
        || PQresultStatus(res) == PGRES_COMMAND_OK) {
        rc = 0;
        if (out != NULL) {
            snprintf(out, outlen, "%s",
                     PQntuples(res) > 0 && !PQgetisnull(res, 0, 0)
                         ? PQgetvalue(res, 0, 0)
                         : "");
        }
    } else {
        fprintf(stderr, "rvt: %s: %s", sql, PQerrorMessage(c));
    }
    PQclear(res);
    return rc;
}

long long rvt_sql_int(rvt_db *db, const char *sql)
{
    char v[64];

    if (rvt_sql(db, sql, v, sizeof(v)) != 0 || v[0] == '\0')
        return -1;
    return atoll(v);
}

int rvt_db_offset_ids(rvt_db *db)
{
    unsigned int r = 0;
    long long base;
    char sql[256];

    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
        r = (unsigned)time(NULL);
    /* Distinct per process and run, far below 2^63. */
    base = ((long long)getpid() % 1000000) * 1000000000LL
           + (long long)(r % 500000000u) + 1;
    snprintf(sql, sizeof(sql),
             "ALTER TABLE kh_document ALTER COLUMN id "
             "RESTART WITH %lld",
             base);
    if (rvt_sql(db, sql, NULL, 0) != 0)
        return -1;
    snprintf(sql, sizeof(sql),
             "ALTER TABLE kh_document_review ALTER COLUMN "
             "id RESTART WITH %lld",
             base + 7);
    return rvt_sql(db, sql, NULL, 0);
}

/* ---- reviewd processes --------------------------------------------------- */

const char *rvt_reviewd_bin(void)
{
    static char path[600];
    const char *v = getenv("REVIEWD_BIN");

    if (v != NULL && v[0] != '\0')
        return v;
    snprintf(path, sizeof(path), "%s/services/reviewd/reviewd",
             testkit_build_dir());
    return path;
}

/* Adds "NAME=value" to env, replacing an entry of the same name. */
static void env_set(char **env, int *n, int cap, const char *entry)
{
    const size_t klen = strcspn(entry, "=");
    int i;

    for (i = 0; i < *n; i++) {
        if (strncmp(env[i], entry, klen) == 0 && env[i][klen] == '=') {
            env[i] = (char *)entry;
            return;
        }
    }
    if (*n + 1 < cap) {
        env[(*n)++] = (char *)entry;
        env[*n] = NULL;
    }
}

/* The variables a child inherits: the sanitizers', the paths, and
 * libmongoc's switch for its shared-memory counters (scripts/test says
 * why it is off). */
static void env_inherit(char **env, int *n, int cap)
{
    static const char *const keep[] = {"PATH=",
                                       "HOME=",
                                       "ASAN_OPTIONS=",
                                       "UBSAN_OPTIONS=",
                                       "LSAN_OPTIONS=",
                                       "TSAN_OPTIONS=",
                                       "LD_LIBRARY_PATH=",
                                       "MONGOC_DISABLE_SHM=",
                                       NULL};
    char **e;
    int k;

    for (e = environ; *e != NULL; e++) {
        for (k = 0; keep[k] != NULL; k++)
            if (strncmp(*e, keep[k], strlen(keep[k])) == 0)
                env_set(env, n, cap, *e);
    }
}

/* Forks and execs bin with argv and env; output to fd. */
static pid_t spawn_bin(const char *bin, const char *const *argv, char **env,
                       int fd)
{
    const pid_t pid = fork();

    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execve(bin, (char *const *)argv, env);
    fprintf(stderr, "rvt: cannot run %s: %s\n", bin, strerror(errno));
    _exit(127);
}

/* Forks and execs the reviewd binary with argv and env; output to fd. */
static pid_t spawn(const char *const *argv, char **env, int fd)
{
    return spawn_bin(rvt_reviewd_bin(), argv, env, fd);
}

pid_t rvt_spawn(const char *bin, const char *const *argv,
                const char *const *extra_env, const char *out_path)
{
    char *env[96];
    int n = 0, i, fd;
    pid_t pid;

    env[0] = NULL;
    env_inherit(env, &n, 96);
    for (i = 0; extra_env != NULL && extra_env[i] != NULL; i++)
        env_set(env, &n, 96, extra_env[i]);
    fd = open(out_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "rvt: cannot open %s: %s\n", out_path,
                strerror(errno));
        return -1;
    }
    pid = spawn_bin(bin, argv, env, fd);
    close(fd);
    return pid;
}

/* Reads the whole file (up to 4 MiB) into a malloc'd string. */
static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    size_t n;

    if (f == NULL)
        return NULL;
    buf = malloc(4 << 20);
    if (buf == NULL) {
        fclose(f);
        return NULL;
    }
    n = fread(buf, 1, (4 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

typedef struct start_wait {
    rvt_server *s;
    int exited;
} start_wait;

/* Ready when the log has the "listening" line; gives up if it exited. */
static int server_listening(void *arg)
{
    start_wait *w = arg;
    char *log;
    const char *p;
    int status;

    if (waitpid(w->s->pid, &status, WNOHANG) == w->s->pid) {
        w->exited = 1;
        w->s->exit_status = status;
        w->s->pid = 0;
        return 1;
    }
    log = read_file(w->s->log);
    p = log != NULL ? strstr(log, "\"msg\":\"listening\"") : NULL;
    p = p != NULL ? strstr(p, "\"port\":") : NULL;
    if (p != NULL)
        w->s->port = atoi(p + 7);
    free(log);
    return w->s->port > 0;
}

int rvt_server_start(rvt_server *s, const rvt_db *db, const char *redis_url,
                     const char *const *extra_env, const char *name)
{
    static int counter;
    static char env_db[600], env_redis[600], env_logfile[700];
    char *env[96];
    const char *const argv[] = {"reviewd", "serve", NULL};
    start_wait w = {s, 0};
    int n = 0, fd, i;

    memset(s, 0, sizeof(*s));
    env[0] = NULL;
    if (testkit_scratch_dir(s->dir, sizeof(s->dir), name) == NULL)
        return -1;
    snprintf(s->log, sizeof(s->log), "%s/reviewd-%d.log", s->dir, ++counter);
    snprintf(env_db, sizeof(env_db), "DATABASE_URL=%s", db->url);
    snprintf(env_redis, sizeof(env_redis), "REDIS_URL=%s",
             redis_url != NULL ? redis_url : "");
    env_inherit(env, &n, 96);
    env_set(env, &n, 96, env_db);
    env_set(env, &n, 96, env_redis);
    env_set(env, &n, 96, "JWT_SECRET=" RVT_SECRET);
    env_set(env, &n, 96, "LISTEN_ADDR=127.0.0.1:0");
    env_set(env, &n, 96, "REVIEWD_THREADS=4");
    env_set(env, &n, 96, "REVIEWD_REDIS_CHECK_MS=200");
    env_set(env, &n, 96, "REVIEWD_REDIS_TIMEOUT_MS=500");
    for (i = 0; extra_env != NULL && extra_env[i] != NULL; i++) {
        if (strcmp(extra_env[i], "REVIEWD_LOG_FILE=@log") == 0) {
            snprintf(env_logfile, sizeof(env_logfile), "REVIEWD_LOG_FILE=%s",
                     s->log);
            env_set(env, &n, 96, env_logfile);
        } else {
            env_set(env, &n, 96, extra_env[i]);
        }
    }
    fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    s->pid = spawn(argv, env, fd);
    close(fd);
    if (s->pid < 0
        || !testkit_wait_until(server_listening, &w,
                               rvt_scaled_ms(RVT_START_TIMEOUT_MS))
        || w.exited) {
        fprintf(stderr, "rvt: reviewd did not start (%s)\n",
                w.exited ? "it exited" : "no listening line");
        rvt_server_log_tail(s);
        rvt_server_terminate(s);
        return -1;
    }
    return 0;
}

static int server_reaped(void *arg)
{
    rvt_server *s = arg;
    int status;

    if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
        s->exit_status = status;
        s->pid = 0;
        return 1;
    }
    return 0;
}

static int exited_clean(const rvt_server *s)
{
    return WIFEXITED(s->exit_status) && WEXITSTATUS(s->exit_status) == 0;
}

int rvt_server_terminate(rvt_server *s)
{
    if (s->pid <= 0)
        return exited_clean(s);
    kill(s->pid, SIGTERM);
    if (!testkit_wait_until(server_reaped, s,
                            rvt_scaled_ms(RVT_STOP_TIMEOUT_MS))) {
        fprintf(stderr, "rvt: reviewd pid %d ignored SIGTERM\n", (int)s->pid);
        kill(s->pid, SIGKILL);
        testkit_wait_until(server_reaped, s, 5000);
        return 0;
    }
    if (!exited_clean(s)) {
        fprintf(stderr, "rvt: reviewd exited with status 0x%x\n",
                s->exit_status);
        rvt_server_log_tail(s);
        return 0;
    }
    return 1;
}

void rvt_server_expect_clean(const rvt_server *s)
{
    const char *report;

    if (exited_clean(s))
        return;
    report = rvt_server_log_has_sanitizer_report(s)
                 ? ": its log holds a sanitizer's report"
                 : "";
    if (WIFSIGNALED(s->exit_status)) {
        fail_msg("reviewd (log %s) was killed by signal %d (%s)%s", s->log,
                 WTERMSIG(s->exit_status), strsignal(WTERMSIG(s->exit_status)),
                 report);
    }
    fail_msg("reviewd (log %s) exited with status %d, not 0%s", s->log,
             WIFEXITED(s->exit_status) ? WEXITSTATUS(s->exit_status) : -1,
             report);
}

int rvt_server_stop(rvt_server *s)
{
    rvt_server_terminate(s);
    rvt_server_expect_clean(s);
    return 1;
}

void rvt_server_remove_dir(const rvt_server *s)
{
    if (s->dir[0] != '\0')
        testkit_scratch_remove(s->dir);
}

int rvt_fixture_start(rvt_db *db, rvt_server *srv, const char *name,
                      const char *redis_url, const char *const *extra_env,
                      int offset_ids)
{
    char srv_name[96];

    snprintf(srv_name, sizeof(srv_name), "reviewd_%s", name);
    if (rvt_db_create(db, name) != 0
        || rvt_server_start(srv, db, redis_url, extra_env, srv_name) != 0)
        return -1;
    return offset_ids ? rvt_db_offset_ids(db) : 0;
}

int rvt_fixture_stop(rvt_db *db, rvt_server *srv)
{
    const int clean = rvt_server_terminate(srv);

    if (clean)
        rvt_server_remove_dir(srv);
    rvt_db_drop(db);
    rvt_server_expect_clean(srv);
    return clean;
}

int rvt_server_log_has(const rvt_server *s, const char *text)
{
    char *log = read_file(s->log);
    const int has = log != NULL && strstr(log, text) != NULL;

    free(log);
    return has;
}

int rvt_server_log_has_sanitizer_report(const rvt_server *s)
{
    /* "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", ThreadSanitizer's
     * "WARNING: ThreadSanitizer" (a race, a lock-order inversion), and
     * UBSan's "runtime error:" line (its summary names
     * UndefinedBehaviorSanitizer only with print_summary). */
    return rvt_server_log_has(s, "ERROR: AddressSanitizer")
           || rvt_server_log_has(s, "ERROR: LeakSanitizer")
           || rvt_server_log_has(s, "WARNING: ThreadSanitizer")
           || rvt_server_log_has(s, "runtime error:");
}

typedef struct log_wait {
    const rvt_server *s;
    const char *text;
} log_wait;

static int log_has_text(void *arg)
{
    const log_wait *w = arg;

    return rvt_server_log_has(w->s, w->text);
}

int rvt_server_log_shows(const rvt_server *s, const char *text)
{
    log_wait w = {s, text};

    return testkit_wait_until(log_has_text, &w, 5000);
}

void rvt_server_log_tail(const rvt_server *s)
{
    char *log = read_file(s->log);
    const char *p;
    int lines = 0;

    if (log == NULL)
        return;
    p = log + strlen(log);
    while (p > log && lines < 25) {
        p--;
        if (*p == '\n')
            lines++;
    }
    fprintf(stderr, "==> %s (tail) <==\n%s\n", s->log, p);
    free(log);
}

typedef struct run_wait {
    pid_t pid;
    int status;
} run_wait;

static int child_done(void *arg)
{
    run_wait *w = arg;

    return waitpid(w->pid, &w->status, WNOHANG) == w->pid;
}

int rvt_run_reviewd(const char *const *args, const char *const *extra,
                    char *out, size_t outlen)
{
    const char *argv[16];
    char *env[64];
    char path[] = "/tmp/rvt-run-XXXXXX";
    run_wait w = {0, 0};
    char *text;
    int n = 0, i, fd;

    env[0] = NULL;
    argv[0] = "reviewd";
    for (i = 0; args[i] != NULL && i < 14; i++)
        argv[i + 1] = args[i];
    argv[i + 1] = NULL;
    env_inherit(env, &n, 64);
    for (i = 0; extra != NULL && extra[i] != NULL; i++)
        env_set(env, &n, 64, extra[i]);
    fd = mkstemp(path);
    if (fd < 0)
        return -1;
    w.pid = spawn(argv, env, fd);
    close(fd);
    if (w.pid < 0 || !testkit_wait_until(child_done, &w, 30000)) {
        if (w.pid > 0) {
            kill(w.pid, SIGKILL);
            waitpid(w.pid, NULL, 0);
        }
        unlink(path);
        return -1;
    }
    text = read_file(path);
    unlink(path);
    snprintf(out, outlen, "%s", text != NULL ? text : "");
    free(text);
    return WIFEXITED(w.status) ? WEXITSTATUS(w.status) : -1;
}

/* ---- HTTP ---------------------------------------------------------------- */

static int connect_port(int port)
{
    struct sockaddr_in addr;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends bytes, stopping early if the server has answered already. */
static void send_all(int fd, const char *p, size_t len)
{
    struct pollfd pfd = {fd, POLLIN, 0};

    while (len > 0) {
        const size_t chunk = len < 65536 ? len : 65536;
        ssize_t n;

        if (poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLIN | POLLHUP)))
            return;
        n = send(fd, p, chunk, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        p += n;
        len -= (size_t)n;
    }
}

static int64_t now_ms(void)
{
    return testkit_now_ms();
}

/* Reads until EOF or the deadline into a malloc'd buffer. */
static char *recv_all(int fd, int timeout_ms, size_t *len, int *timed_out)
{
    size_t cap = 16384, n = 0;
    char *buf = malloc(cap);
    const int64_t deadline = now_ms() + timeout_ms;
    struct pollfd pfd = {fd, POLLIN, 0};

    *timed_out = 0;
    while (buf != NULL) {
        const int64_t left = deadline - now_ms();
        ssize_t got;

        if (left <= 0 || poll(&pfd, 1, (int)left) == 0) {
            *timed_out = 1;
            break;
        }
        if (n + 4096 > cap) {
            char *p = realloc(buf, cap * 2);

            if (p == NULL)
                break;
            buf = p;
            cap *= 2;
        }
        got = recv(fd, buf + n, cap - n - 1, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        n += (size_t)got;
    }
    if (buf != NULL)
        buf[n] = '\0';
    *len = n;
    return buf;
}

/* Splits a raw response into status, headers and body. */
static void parse_response(char *raw, size_t len, rvt_resp *out)
{
    char *end = strstr(raw, "\r\n\r\n");
    char ct[128];
    size_t hlen;

    if (strncmp(raw, "HTTP/1.", 7) != 0 || end == NULL) {
        free(raw);
        return;
    }
    out->status = atoi(raw + 9);
    hlen = (size_t)(end - raw);
    snprintf(out->headers, sizeof(out->headers), "%.*s", (int)hlen, raw);
    out->body_len = len - hlen - 4;
    memmove(raw, end + 4, out->body_len + 1);
    out->body = raw;
    if (rvt_header(out, "Content-Type", ct, sizeof(ct)) != NULL
        && strncmp(ct, "application/json", 16) == 0)
        out->json = json_loadb(out->body, out->body_len, 0, NULL);
}

int rvt_http_raw(int port, const char *bytes, size_t len, int timeout_ms,
                 rvt_resp *out)
{
    size_t got = 0;
    char *raw;
    int fd = connect_port(port);

    memset(out, 0, sizeof(*out));
    if (fd < 0)
        return -1;
    send_all(fd, bytes, len);
    raw = recv_all(fd, timeout_ms, &got, &out->timed_out);
    close(fd);
    if (raw == NULL)
        return -1;
    parse_response(raw, got, out);
    return out->status > 0 ? 0 : -1;
}

int rvt_http(int port, const char *method, const char *path,
             const char *const *headers, const char *body, size_t body_len,
             rvt_resp *out)
{
    size_t cap = 4096 + body_len, n;
    char *req = malloc(cap);
    int rc, i;

    if (req == NULL)
        return -1;
    n = (size_t)snprintf(req, cap,
                         "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                         "Connection: close\r\n",
                         method, path, port);
    for (i = 0; headers != NULL && headers[i] != NULL && n < cap; i++)
        n += (size_t)snprintf(req + n, cap - n, "%s\r\n", headers[i]);
    if (body != NULL && n < cap) {
        n += (size_t)snprintf(req + n, cap - n, "Content-Length: %zu\r\n",
                              body_len);
    }
    n += (size_t)snprintf(req + n, cap - n, "\r\n");
    if (body != NULL && n + body_len <= cap) {
        memcpy(req + n, body, body_len);
        n += body_len;
    }
    rc = rvt_http_raw(port, req, n, (int)rvt_scaled_ms(RVT_HTTP_TIMEOUT_MS),
                      out);
    free(req);
    return rc;
}

int rvt_call(int port, const char *method, const char *path, const char *token,
             const char *json_body, const char *idem_key, rvt_resp *out)
{
    char auth[4200], idem[400];
    const char *headers[4];
    int n = 0;

    if (token != NULL) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        headers[n++] = auth;
    }
    if (json_body != NULL)
        headers[n++] = "Content-Type: application/json";
    if (idem_key != NULL) {
        snprintf(idem, sizeof(idem), "Idempotency-Key: %s", idem_key);
        headers[n++] = idem;
    }
    headers[n] = NULL;
    return rvt_http(port, method, path, headers, json_body,
                    json_body != NULL ? strlen(json_body) : 0, out);
}

const char *rvt_header(const rvt_resp *r, const char *name, char *buf,
                       size_t len)
{
    const size_t nlen = strlen(name);
    const char *p = strstr(r->headers, "\r\n");

    for (; p != NULL; p = strstr(p, "\r\n")) {
        p += 2;
        if (strncasecmp(p, name, nlen) == 0 && p[nlen] == ':') {
            const char *v = p + nlen + 1;

            while (*v == ' ')
                v++;
            snprintf(buf, len, "%.*s", (int)strcspn(v, "\r\n"), v);
            return buf;
        }
    }
    return NULL;
}

long long rvt_metric(int port, const char *name)
{
    char key[128];
    rvt_resp r;
    const char *p;
    long long v = -1;

    snprintf(key, sizeof(key), "\n%s ", name);
    if (rvt_call(port, "GET", "/metrics", NULL, NULL, NULL, &r) == 0
        && r.status == 200 && r.body != NULL
        && (p = strstr(r.body, key)) != NULL)
        v = strtoll(p + strlen(key), NULL, 10);
    rvt_resp_free(&r);
    return v;
}

const char *rvt_field(const rvt_resp *r, const char *path)
{
    char part[64];
    const json_t *v = r->json;

    while (v != NULL && *path != '\0') {
        const size_t n = strcspn(path, ".");

        snprintf(part, sizeof(part), "%.*s", (int)n, path);
        v = json_object_get(v, part);
        path += n + (path[n] == '.');
    }
    return json_string_value(v);
}

void rvt_expect_status(rvt_resp *r, int status, const char *code,
                       const char *what)
{
    const char *got = rvt_field(r, "code");
    char why[1024];

    if (r->status != status)
        snprintf(why, sizeof(why), "%s answers %d, got %d: %s", what, status,
                 r->status, r->body != NULL ? r->body : "(no body)");
    else if (code != NULL && (got == NULL || strcmp(got, code) != 0))
        snprintf(why, sizeof(why), "%s gives %s, got %s", what, code,
                 got != NULL ? got : "(none)");
    else
        return;
    rvt_resp_free(r); /* why holds the words; got pointed into r */
    TK_FAIL("%s", why);
}

void rvt_resp_free(rvt_resp *r)
{
    json_decref(r->json);
    free(r->body);
    memset(r, 0, sizeof(*r));
}

/* ---- tokens -------------------------------------------------------------- */

char *rvt_token(const char *sub, const char *role, long ttl_s)
{
    jwt_t *jwt = NULL;
    char *tok = NULL;

    if (jwt_new(&jwt) != 0)
        return NULL;
    if (jwt_add_grant(jwt, "sub", sub) == 0
        && jwt_add_grant(jwt, "role", role) == 0
        && jwt_add_grant_int(jwt, "exp", (long)time(NULL) + ttl_s) == 0
        && jwt_set_alg(jwt, JWT_ALG_HS256, (const unsigned char *)RVT_SECRET,
                       (int)strlen(RVT_SECRET))
               == 0)
        tok = jwt_encode_str(jwt);
    jwt_free(jwt);
    return tok;
}

int rvt_people_mint(const rvt_person *people)
{
    for (const rvt_person *p = people; p->token != NULL; p++) {
        *p->token = rvt_token(p->sub, p->role, 3600);
        if (*p->token == NULL) {
            fprintf(stderr, "rvt: no token for %s (%s)\n", p->sub, p->role);
            return -1;
        }
    }
    return 0;
}

void rvt_people_free(const rvt_person *people)
{
    for (const rvt_person *p = people; p->token != NULL; p++) {
        free(*p->token);
        *p->token = NULL;
    }
}

int rvt_fixture_end(rvt_db *db, rvt_server *srv, const rvt_person *people)
{
    const int clean = rvt_fixture_stop(db, srv);

    if (people != NULL)
        rvt_people_free(people);
    return clean ? 0 : -1;
}

int rvt_setup_shared(const char **redis_url, const rvt_person *people)
{
    *redis_url = testkit_shared_redis(); /* says why on stderr if not */
    return *redis_url != NULL ? rvt_people_mint(people) : -1;
}

/* ---- fixtures ------------------------------------------------------------ */

int rvt_create_doc(int port, const char *author_token, const char *title,
                   char *id)
{
    char body[512];
    rvt_resp r;
    int rc = -1;

    snprintf(body, sizeof(body),
             "{\"title\":\"%s\",\"content\":\"Text of "
             "%s.\"}",
             title, title);
    if (rvt_call(port, "POST", "/v1/documents", author_token, body, NULL, &r)
            == 0
        && r.status == 201 && rvt_field(&r, "id") != NULL) {
        snprintf(id, 24, "%s", rvt_field(&r, "id"));
        rc = 0;
    } else {
        fprintf(stderr, "rvt: create gave %d %s\n", r.status,
                r.body != NULL ? r.body : "");
    }
    rvt_resp_free(&r);
    return rc;
}

int rvt_create_pending(int port, const char *author_token, char *doc_id,
                       char *review_id)
{
    char path[96];
    rvt_resp r;
    int rc = -1;

    if (rvt_create_doc(port, author_token, "pending", doc_id) != 0)
        return -1;
    snprintf(path, sizeof(path), "/v1/documents/%s/submit", doc_id);
    if (rvt_call(port, "POST", path, author_token, NULL, NULL, &r) == 0
        && r.status == 201 && rvt_field(&r, "review.id") != NULL) {
        snprintf(review_id, 24, "%s", rvt_field(&r, "review.id"));
        rc = 0;
    } else {
        fprintf(stderr, "rvt: submit gave %d %s\n", r.status,
                r.body != NULL ? r.body : "");
    }
    rvt_resp_free(&r);
    return rc;
}

/* ---- storms -------------------------------------------------------------- */

typedef struct storm {
    int port;
    rvt_storm_req *reqs;
    pthread_barrier_t barrier;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int answered;
} storm;

typedef struct storm_arg {
    storm *st;
    int i;
} storm_arg;

static void *storm_main(void *p)
{
    storm_arg *a = p;
    storm *st = a->st;
    rvt_storm_req *q = &st->reqs[a->i];
    rvt_resp r;
    const char *code;

    pthread_barrier_wait(&st->barrier);
    rvt_call(st->port, q->method, q->path, q->token, q->body, NULL, &r);
    q->status = r.status;
    code = rvt_field(&r, "code");
    snprintf(q->code, sizeof(q->code), "%s", code != NULL ? code : "");
    rvt_resp_free(&r);
    pthread_mutex_lock(&st->mu);
    st->answered++;
    pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

/* Waits until half the answers are in (bounded), then runs on_half. */
static void storm_half(storm *st, int n, void (*on_half)(void *), void *arg)
{
    struct timespec deadline;

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += rvt_scaled_ms(60000) / 1000;
    pthread_mutex_lock(&st->mu);
    while (st->answered < n / 2
           && pthread_cond_timedwait(&st->cv, &st->mu, &deadline) == 0) {
    }
    pthread_mutex_unlock(&st->mu);
    on_half(arg);
}

int rvt_storm(int port, rvt_storm_req *reqs, int n, void (*on_half)(void *arg),
              void *arg)
{
    pthread_t *threads = calloc((size_t)n, sizeof(*threads));
    storm_arg *args = calloc((size_t)n, sizeof(*args));
    storm st;
    int i, started = 0;

    memset(&st, 0, sizeof(st));
    st.port = port;
    st.reqs = reqs;
    if (threads == NULL || args == NULL
        || pthread_barrier_init(&st.barrier, NULL, (unsigned)n) != 0) {
        free(threads);
        free(args);
        return -1;
    }
    pthread_mutex_init(&st.mu, NULL);
    pthread_cond_init(&st.cv, NULL);
    for (i = 0; i < n; i++) {
        args[i].st = &st;
        args[i].i = i;
        if (pthread_create(&threads[i], NULL, storm_main, &args[i]) != 0) {
            /* The barrier would never open: this is fatal for the test. */
            fprintf(stderr, "rvt: cannot start storm thread %d\n", i);
            abort();
        }
        started++;
    }
    if (on_half != NULL)
        storm_half(&st, n, on_half, arg);
    for (i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&st.barrier);
    pthread_mutex_destroy(&st.mu);
    pthread_cond_destroy(&st.cv);
    free(threads);
    free(args);
    return 0;
}

/* ---- waiting ------------------------------------------------------------- */

typedef struct ready_wait {
    int port;
    const char *want;
    const char *redis_want;
} ready_wait;

static int ready_is(void *arg)
{
    ready_wait *w = arg;
    rvt_resp r;
    const char *st, *redis;
    int ok;

    if (rvt_http(w->port, "GET", "/readyz", NULL, NULL, 0, &r) != 0) {
        rvt_resp_free(&r);
        return 0;
    }
    st = rvt_field(&r, "status");
    redis = rvt_field(&r, "redis");
    ok = st != NULL && strcmp(st, w->want) == 0
         && (w->redis_want == NULL
             || (redis != NULL && strcmp(redis, w->redis_want) == 0));
    rvt_resp_free(&r);
    return ok;
}

int rvt_wait_ready(int port, const char *want, const char *redis_want,
                   int64_t timeout_ms)
{
    ready_wait w = {port, want, redis_want};

    return testkit_wait_until(ready_is, &w, rvt_scaled_ms(timeout_ms));
}
