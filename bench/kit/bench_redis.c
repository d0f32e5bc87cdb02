/*
 * bench_redis.c: private redis-server, MONITOR tap and redis-benchmark
 * runner for the benchmarks (see bench_redis.h for why each exists).
 *
 * Invariants:
 * - A bench_server with pid != 0 is a live child of this process; it is
 *   only ever signalled by that pid, and reaped by bench_server_stop.
 * - Every wait is bounded: the server's start (10 s), its stop (5 s, then
 *   SIGKILL), a MONITOR read (the caller's timeout), a redis-benchmark run
 *   (the caller's timeout, then SIGKILL).
 * - This file uses hiredis's blocking client, which aborts on allocation
 *   failure; that is acceptable in a benchmark program and is why the
 *   library itself does not use it.
 */
#include "bench_redis.h"
#include "bench_run.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench_clock.h"
#include "bench_cpu.h"
#include "bench_tool.h"

#define SERVER_START_MS 10000
#define SERVER_STOP_MS 5000

/* ------------------------------------------------------------------------
 * Targets */

static int parse_unix_url(const char *rest, bench_target *t, char *err,
                          size_t errlen)
{
    const char *q = strchr(rest, '?');
    const size_t len = q ? (size_t)(q - rest) : strlen(rest);

    if (len == 0 || len >= sizeof(t->unix_path)) {
        snprintf(err, errlen, "bad unix socket path in URL");
        return -1;
    }
    memcpy(t->unix_path, rest, len);
    t->unix_path[len] = '\0';
    if (q != NULL && sscanf(q, "?db=%d", &t->db) != 1) {
        snprintf(err, errlen, "only ?db=N is understood after the path");
        return -1;
    }
    return 0;
}

static int parse_tcp_url(const char *rest, bench_target *t, char *err,
                         size_t errlen)
{
    if (strchr(rest, '@') != NULL) {
        snprintf(err, errlen,
                 "credentials in the URL are not supported: "
                 "benchmark a private, local server");
        return -1;
    }
    const size_t hostlen = strcspn(rest, ":/");
    if (hostlen == 0 || hostlen >= sizeof(t->host)) {
        snprintf(err, errlen, "bad host in URL");
        return -1;
    }
    memcpy(t->host, rest, hostlen);
    t->host[hostlen] = '\0';
    t->port = 6379;
    const char *p = rest + hostlen;
    if (*p == ':' && sscanf(p + 1, "%d", &t->port) != 1) {
        snprintf(err, errlen, "bad port in URL");
        return -1;
    }
    p = strchr(p, '/');
    if (p != NULL && p[1] != '\0' && sscanf(p + 1, "%d", &t->db) != 1) {
        snprintf(err, errlen, "bad database number in URL");
        return -1;
    }
    return 0;
}

int bench_target_parse(const char *url, bench_target *t, char *err,
                       size_t errlen)
{
    memset(t, 0, sizeof(*t));
    if (strlen(url) >= sizeof(t->url)) {
        snprintf(err, errlen, "URL too long");
        return -1;
    }
    snprintf(t->url, sizeof(t->url), "%s", url);
    if (strncmp(url, "unix://", 7) == 0)
        return parse_unix_url(url + 7, t, err, errlen);
    if (strncmp(url, "redis://", 8) == 0)
        return parse_tcp_url(url + 8, t, err, errlen);
    snprintf(err, errlen,
             "URL must be redis://host:port/db or "
             "unix:///path (rediss:// is not benchmarked)");
    return -1;
}

redisContext *bench_redis_connect(const bench_target *t, int timeout_ms)
{
    const struct timeval tv = {
        .tv_sec = timeout_ms / 1000,
        .tv_usec = (timeout_ms % 1000) * 1000,
    };

    if (t->unix_path[0] != '\0')
        return redisConnectUnixWithTimeout(t->unix_path, tv);
    return redisConnectWithTimeout(t->host, t->port, tv);
}

void bench_server_version(const bench_target *t, char *buf, size_t len)
{
    snprintf(buf, len, "?");
    redisContext *c = bench_redis_connect(t, 1000);
    if (c == NULL || c->err) {
        redisFree(c);
        return;
    }
    redisReply *r = redisCommand(c, "INFO server");
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        const char *v = strstr(r->str, "redis_version:");
        if (v != NULL) {
            v += strlen("redis_version:");
            snprintf(buf, len, "%.*s", (int)strcspn(v, "\r\n"), v);
        }
    }
    freeReplyObject(r);
    redisFree(c);
}

const char bench_cad_script[] = "if redis.call('GET', KEYS[1]) == ARGV[1] "
                                "then return redis.call('DEL', KEYS[1]) end "
                                "return 0";

int bench_script_load(const bench_target *t, const char *script, char sha[41],
                      char *err, size_t errlen)
{
    redisContext *c = bench_redis_connect(t, 2000);

    if (c == NULL || c->err) {
        snprintf(err, errlen, "SCRIPT LOAD: cannot connect to %s: %s", t->url,
                 c ? c->errstr : "out of memory");
        redisFree(c);
        return -1;
    }
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", script);
    const int ok = r != NULL && r->type == REDIS_REPLY_STRING && r->len == 40;
    if (ok) {
        memcpy(sha, r->str, 40);
        sha[40] = '\0';
    } else {
        snprintf(err, errlen, "SCRIPT LOAD on %s: %s", t->url,
                 r == NULL                      ? c->errstr
                 : r->type == REDIS_REPLY_ERROR ? r->str
                                                : "not a 40-digit SHA-1");
    }
    freeReplyObject(r);
    redisFree(c);
    return ok ? 0 : -1;
}

/* ------------------------------------------------------------------------
 * The private server */

int bench_make_dirs(const char *path)
{
    char buf[1024];

    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* A loopback port that was free a moment ago (the kernel's choice). */
static int pick_free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t alen = sizeof(a);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        return -1;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0
        && getsockname(fd, (struct sockaddr *)&a, &alen) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

pid_t bench_spawn(char *const argv[], const char *log_path, char *const env[])
{
    const pid_t parent = getpid();
    const pid_t pid = fork();

    if (pid != 0)
        return pid;
    /* The child: a parent gone before PR_SET_PDEATHSIG would not be
     * noticed, so check it after. */
    const int in = open("/dev/null", O_RDONLY);
    const int out = log_path != NULL
                        ? open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644)
                        : open("/dev/null", O_WRONLY);

    if (in >= 0)
        dup2(in, STDIN_FILENO);
    if (out >= 0) {
        dup2(out, STDOUT_FILENO);
        dup2(out, STDERR_FILENO);
    }
    for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
        if (putenv(env[i]) != 0) {
            fprintf(stderr, "putenv %s: %s\n", env[i], strerror(errno));
            _exit(127);
        }
    }
    /* Its own session, hence its own scheduling autogroup (see the
     * header); it cannot fail in a fresh child, which leads no group. */
    setsid();
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(127);
    execvp(argv[0], argv);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

static pid_t spawn_server(const char *server_bin, const char *dir, int port)
{
    char portbuf[16];
    snprintf(portbuf, sizeof(portbuf), "%d", port);
    char *const argv[] = {
        (char *)server_bin,
        "--port",
        portbuf,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        (char *)dir,
        "--logfile",
        "redis.log",
        "--daemonize",
        "no",
        "--unixsocket",
        "",
        "--databases",
        "16",
        NULL,
    };
    return bench_spawn(argv, NULL, NULL);
}

int bench_target_answers(const bench_target *t, int timeout_ms)
{
    redisContext *c = bench_redis_connect(t, timeout_ms);
    int ok = 0;

    if (c != NULL && !c->err) {
        redisReply *r = redisCommand(c, "PING");
        ok = r != NULL && r->type == REDIS_REPLY_STATUS
             && strcmp(r->str, "PONG") == 0;
        freeReplyObject(r);
    }
    redisFree(c);
    return ok;
}

/* Waits until the child answers PING (1), exits (0), or time runs out
 * (0, the child still running). */
static int wait_server_ready(bench_server *s)
{
    const int64_t deadline = bench_clock_ns()
                             + (int64_t)SERVER_START_MS * 1000000;

    while (bench_clock_ns() < deadline) {
        int status;
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = 0;
            return 0;
        }
        if (bench_target_answers(&s->target, 200))
            return 1;
        bench_sleep_ns(10 * 1000000);
    }
    return 0;
}

/* Copies the last line of the server's log into err, after prefix. */
static void report_log_tail(const bench_server *s, const char *prefix,
                            char *err, size_t errlen)
{
    char path[600];
    char line[512] = "";
    char last[512] = "(no log)";

    snprintf(path, sizeof(path), "%s/redis.log", s->dir);
    FILE *f = fopen(path, "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        snprintf(last, sizeof(last), "%.*s", (int)strcspn(line, "\n"), line);
    if (f != NULL)
        fclose(f);
    snprintf(err, errlen, "%s; its log (%s) ends: %s", prefix, path, last);
}

int bench_server_start(bench_server *s, const char *server_bin,
                       const char *workdir, char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->dir, sizeof(s->dir), "%s/redis-%d", workdir, (int)getpid());
    if (bench_make_dirs(s->dir) != 0) {
        snprintf(err, errlen, "cannot create %s: %s", s->dir, strerror(errno));
        return -1;
    }
    /* The port is free when picked but may be taken before redis-server
     * binds it; then the server exits and another port is tried. */
    for (int attempt = 0; attempt < 5; attempt++) {
        const int port = pick_free_port();
        if (port <= 0) {
            snprintf(err, errlen, "no free loopback port: %s",
                     strerror(errno));
            return -1;
        }
        snprintf(s->target.host, sizeof(s->target.host), "127.0.0.1");
        s->target.port = port;
        snprintf(s->target.url, sizeof(s->target.url),
                 "redis://127.0.0.1:%d/0", port);
        s->pid = spawn_server(server_bin, s->dir, port);
        if (s->pid < 0) {
            s->pid = 0;
            snprintf(err, errlen, "fork: %s", strerror(errno));
            return -1;
        }
        if (wait_server_ready(s))
            return 0;
        if (s->pid != 0) {
            report_log_tail(s, "redis-server did not answer PING in 10 s", err,
                            errlen);
            bench_server_stop(s);
            return -1;
        }
    }
    report_log_tail(s, "redis-server exited at start 5 times", err, errlen);
    return -1;
}

/* Waits up to ms for the child to exit; returns 1 if it was reaped. */
static int reap_within(pid_t pid, int ms)
{
    const int64_t deadline = bench_clock_ns() + (int64_t)ms * 1000000;

    do {
        int status;
        const pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD))
            return 1;
        bench_sleep_ns(5 * 1000000);
    } while (bench_clock_ns() < deadline);
    return 0;
}

void bench_server_stop(bench_server *s)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGTERM);
    const int clean = reap_within(s->pid, SERVER_STOP_MS);
    if (!clean) {
        kill(s->pid, SIGKILL);
        reap_within(s->pid, SERVER_STOP_MS);
    }
    s->pid = 0;
    if (clean) {
        char path[600];
        snprintf(path, sizeof(path), "%s/redis.log", s->dir);
        unlink(path);
        rmdir(s->dir);
    }
}

/* ------------------------------------------------------------------------
 * Commands and the MONITOR tap */

void bench_cmd_free(bench_cmd *c)
{
    for (int i = 0; i < c->argc; i++)
        free(c->argv[i]);
    memset(c, 0, sizeof(*c));
}

const char *bench_cmd_format(const bench_cmd *c, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i < c->argc && used < len; i++) {
        const int w = snprintf(buf + used, len - used, "%s%s", i ? " " : "",
                               c->argv[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return buf;
}

/* The value of one hex digit, or -1. */
static int hex_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Decodes one escape of Redis's sdscatrepr at *pp (just after the
 * backslash) and advances *pp; returns the byte, or -1. */
static int decode_escape(const char **pp)
{
    const char *p = *pp;
    int ch;

    switch (*p) {
    case 'n': ch = '\n'; break;
    case 'r': ch = '\r'; break;
    case 't': ch = '\t'; break;
    case 'a': ch = '\a'; break;
    case 'b': ch = '\b'; break;
    case '"': ch = '"'; break;
    case '\\': ch = '\\'; break;
    case 'x': {
        const int hi = hex_value(p[1]);
        const int lo = hi < 0 ? -1 : hex_value(p[2]);
        if (lo < 0)
            return -1;
        *pp = p + 3;
        return hi * 16 + lo;
    }
    default: return -1;
    }
    *pp = p + 1;
    return ch;
}

/* Parses one "quoted" argument at *pp into a new string; NULL on error. */
static char *parse_quoted(const char **pp)
{
    const char *p = *pp;
    char *out = malloc(strlen(p) + 1);
    size_t n = 0;

    if (out == NULL || *p++ != '"') {
        free(out);
        return NULL;
    }
    while (*p != '"') {
        int ch = (unsigned char)*p++;
        if (ch == '\0') {
            free(out);
            return NULL;
        }
        if (ch == '\\')
            ch = decode_escape(&p);
        if (ch < 0) {
            free(out);
            return NULL;
        }
        out[n++] = (char)ch;
    }
    out[n] = '\0';
    *pp = p + 1;
    return out;
}

int bench_monitor_parse_line(const char *line, bench_cmd *out, int *from_lua)
{
    memset(out, 0, sizeof(*out));
    const char *open = strchr(line, '[');
    const char *close = open ? strchr(open, ']') : NULL;
    if (close == NULL || close[1] != ' ')
        return -1;
    /* "[db client]": the client is "lua" for commands a script ran. */
    const char *space = memchr(open, ' ', (size_t)(close - open));
    *from_lua = space != NULL && close - space - 1 == 3
                && strncmp(space + 1, "lua", 3) == 0;
    const char *p = close + 2;
    while (*p == '"') {
        if (out->argc == BENCH_CMD_MAX_ARGS) {
            bench_cmd_free(out);
            return -1;
        }
        char *arg = parse_quoted(&p);
        if (arg == NULL) {
            bench_cmd_free(out);
            return -1;
        }
        out->argv[out->argc++] = arg;
        if (*p == ' ')
            p++;
    }
    if (out->argc == 0 || *p != '\0') {
        bench_cmd_free(out);
        return -1;
    }
    return 0;
}

struct bench_monitor {
    redisContext *c;
};

int bench_monitor_open(const bench_target *t, bench_monitor **out, char *err,
                       size_t errlen)
{
    *out = NULL;
    bench_monitor *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    m->c = bench_redis_connect(t, 2000);
    if (m->c == NULL || m->c->err) {
        snprintf(err, errlen, "MONITOR connection to %s: %s", t->url,
                 m->c ? m->c->errstr : "out of memory");
        bench_monitor_close(m);
        return -1;
    }
    redisReply *r = redisCommand(m->c, "MONITOR");
    const int ok = r != NULL && r->type == REDIS_REPLY_STATUS
                   && strcmp(r->str, "OK") == 0;
    if (!ok) {
        snprintf(err, errlen, "MONITOR on %s: %s", t->url,
                 r && r->type == REDIS_REPLY_ERROR ? r->str : m->c->errstr);
    }
    freeReplyObject(r);
    if (!ok) {
        bench_monitor_close(m);
        return -1;
    }
    *out = m;
    return 0;
}

/* Whether cmd is a client's EVALSHA whose first key is key. */
static int is_evalsha_on(const bench_cmd *cmd, const char *key)
{
    return cmd->argc >= 4 && strcasecmp(cmd->argv[0], "EVALSHA") == 0
           && atoi(cmd->argv[2]) >= 1 && strcmp(cmd->argv[3], key) == 0;
}

/* Reads one MONITOR line with the time left until deadline; returns the
 * reply (the caller frees it) or NULL on timeout or error. */
static redisReply *read_monitor_line(bench_monitor *m, int64_t deadline)
{
    const int64_t left_us = (deadline - bench_clock_ns()) / 1000;
    if (left_us <= 0)
        return NULL;
    const struct timeval tv = {
        .tv_sec = (time_t)(left_us / 1000000),
        .tv_usec = (suseconds_t)(left_us % 1000000),
    };
    redisSetTimeout(m->c, tv);
    void *reply = NULL;
    if (redisGetReply(m->c, &reply) != REDIS_OK)
        return NULL;
    return reply;
}

int bench_monitor_find_evalsha(bench_monitor *m, const char *key,
                               int timeout_ms, bench_cmd *out, char *err,
                               size_t errlen)
{
    const int64_t deadline = bench_clock_ns() + (int64_t)timeout_ms * 1000000;
    memset(out, 0, sizeof(*out));

    for (;;) {
        redisReply *r = read_monitor_line(m, deadline);
        if (r == NULL) {
            snprintf(err, errlen,
                     "no EVALSHA on key %s in the MONITOR feed "
                     "within %d ms (%s)",
                     key, timeout_ms, m->c->err ? m->c->errstr : "timeout");
            return -1;
        }
        int from_lua = 0;
        const int parsed = r->type == REDIS_REPLY_STATUS
                           && bench_monitor_parse_line(r->str, out, &from_lua)
                                  == 0;
        freeReplyObject(r);
        if (parsed && !from_lua && is_evalsha_on(out, key))
            return 0;
        if (parsed)
            bench_cmd_free(out);
    }
}

void bench_monitor_close(bench_monitor *m)
{
    if (m == NULL)
        return;
    redisFree(m->c);
    free(m);
}

/* ------------------------------------------------------------------------
 * redis-benchmark */

/* Reads the fields after the "latency summary (msec):" header:
 * avg min p50 p95 p99 max, in milliseconds. */
static int parse_latency_summary(const char *text, bench_rb_result *out)
{
    const char *p = strstr(text, "latency summary (msec):");
    if (p == NULL)
        return -1;
    p = strstr(p, "max");
    double avg, min, p50, p95, p99, max;
    if (p == NULL
        || sscanf(p + 3, "%lf %lf %lf %lf %lf %lf", &avg, &min, &p50, &p95,
                  &p99, &max)
               != 6)
        return -1;
    out->p50_us = p50 * 1000;
    out->p99_us = p99 * 1000;
    return 0;
}

/* Reads "Latency by percentile distribution:" down to the first line at
 * or above 99.9 %: "99.902% <= 0.215 milliseconds (...)". */
static int parse_p999(const char *text, bench_rb_result *out)
{
    const char *p = strstr(text, "Latency by percentile distribution:");
    if (p == NULL)
        return -1;
    p = strchr(p, '\n');
    while (p != NULL && p[1] != '\n' && p[1] != '\0') {
        double pct, ms;
        if (sscanf(p + 1, "%lf%% <= %lf milliseconds", &pct, &ms) == 2
            && pct >= 99.9) {
            out->p999_us = ms * 1000;
            return 0;
        }
        p = strchr(p + 1, '\n');
    }
    return -1;
}

int bench_rb_parse_report(const char *text, bench_rb_result *out)
{
    const char *p = strstr(text, "throughput summary:");
    if (p == NULL
        || sscanf(p, "throughput summary: %lf requests per second", &out->rps)
               != 1)
        return -1;
    if (parse_latency_summary(text, out) != 0)
        return -1;
    return parse_p999(text, out);
}

int bench_rb_parse_csv(const char *text, bench_rb_result *out)
{
    /* "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",
     * "p95_latency_ms","p99_latency_ms","max_latency_ms", then one row.
     * The test name is the command itself, so the row is read from the
     * right, where the seven numbers are. */
    const char *row = strstr(text, "\"max_latency_ms\"");
    row = row ? strchr(row, '\n') : NULL;
    if (row == NULL)
        return -1;
    row++;
    const char *end = strchr(row, '\n');
    if (end == NULL)
        end = row + strlen(row);
    double v[7];
    const char *p = end;
    for (int i = 6; i >= 0; i--) {
        /* Step back over ,"number" to the comma before it. */
        while (p > row && *p != ',')
            p--;
        if (p == row || sscanf(p, ",\"%lf\"", &v[i]) != 1)
            return -1;
        p--;
    }
    out->rps = v[0];
    out->p50_us = v[3] * 1000;
    out->p99_us = v[5] * 1000;
    return 0;
}

/* Builds redis-benchmark's argv into argv (caller's array of cap), with
 * numbers formatted into bufs.  Returns the count, or -1 if cap is small. */
static int build_rb_argv(const char *rb_bin, const bench_target *t,
                         int clients, int pipeline, long requests,
                         const bench_cmd *cmd, char bufs[5][32], char **argv,
                         int cap)
{
    int n = 0;

    argv[n++] = (char *)rb_bin;
    if (t->unix_path[0] != '\0') {
        argv[n++] = "-s";
        argv[n++] = (char *)t->unix_path;
    } else {
        snprintf(bufs[0], 32, "%d", t->port);
        argv[n++] = "-h";
        argv[n++] = (char *)t->host;
        argv[n++] = "-p";
        argv[n++] = bufs[0];
    }
    snprintf(bufs[1], 32, "%d", t->db);
    snprintf(bufs[2], 32, "%d", clients);
    snprintf(bufs[3], 32, "%ld", requests);
    argv[n++] = "--dbnum";
    argv[n++] = bufs[1];
    argv[n++] = "-c";
    argv[n++] = bufs[2];
    argv[n++] = "-n";
    argv[n++] = bufs[3];
    if (pipeline > 1) {
        snprintf(bufs[4], 32, "%d", pipeline);
        argv[n++] = "-P";
        argv[n++] = bufs[4];
    }
    if (clients != 1 || pipeline > 1)
        argv[n++] = "--csv";
    if (n + cmd->argc + 1 > cap)
        return -1;
    for (int i = 0; i < cmd->argc; i++)
        argv[n++] = cmd->argv[i];
    argv[n] = NULL;
    return n;
}

/* Parses a finished run's output into out; -1 with a message on failure. */
static int parse_rb_output(const char *text, int status, int clients,
                           bench_rb_result *out, char *err, size_t errlen)
{
    const int parsed = clients == 1 ? bench_rb_parse_report(text, out)
                                    : bench_rb_parse_csv(text, out);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || parsed != 0
        || strstr(text, "Error from server") != NULL) {
        const size_t len = strlen(text);
        snprintf(err, errlen,
                 "redis-benchmark (status %d) gave an "
                 "unexpected report; it ends: %s",
                 status, len > 300 ? text + len - 300 : text);
        return -1;
    }
    return 0;
}

int bench_rb_run(const char *rb_bin, const bench_target *t, pid_t server_pid,
                 int clients, long requests, const bench_cmd *cmd,
                 int timeout_ms, bench_rb_result *out, char *err,
                 size_t errlen)
{
    return bench_rb_run_pipelined(rb_bin, t, server_pid, clients, 1, requests,
                                  cmd, timeout_ms, out, err, errlen);
}

int bench_rb_run_pipelined(const char *rb_bin, const bench_target *t,
                           pid_t server_pid, int clients, int pipeline,
                           long requests, const bench_cmd *cmd, int timeout_ms,
                           bench_rb_result *out, char *err, size_t errlen)
{
    char bufs[5][32];
    char *argv[BENCH_CMD_MAX_ARGS + 16];
    memset(out, 0, sizeof(*out));
    out->p999_us = NAN;
    out->clients = clients;
    out->pipeline = pipeline;
    out->requests = requests;
    if (build_rb_argv(rb_bin, t, clients, pipeline, requests, cmd, bufs, argv,
                      (int)(sizeof(argv) / sizeof(argv[0])))
        < 0) {
        snprintf(err, errlen, "command has too many arguments");
        return -1;
    }
    const int64_t server_cpu0 = bench_cpu_pid_us(server_pid);
    char *text = NULL;
    int status = 0;
    int rc = bench_tool_run(argv, timeout_ms, &text, &status, &out->rb_cpu_us,
                            err, errlen);
    const int64_t server_cpu1 = bench_cpu_pid_us(server_pid);
    out->server_cpu_us = server_cpu0 < 0 || server_cpu1 < 0
                             ? -1
                             : server_cpu1 - server_cpu0;
    if (rc == 0) {
        rc = parse_rb_output(text, status, pipeline > 1 ? 0 : clients, out,
                             err, errlen);
    }
    free(text);
    return rc;
}

int bench_redis_option(bench_redis_opts *o, int ch, const char *arg)
{
    switch (ch) {
    case 'u': o->url = arg; return 1;
    case 'w': o->workdir = arg; return 1;
    case 'S': o->server_bin = arg; return 1;
    case 'B': o->rb_bin = arg; return 1;
    default: return 0;
    }
}

int bench_redis_setup(const bench_redis_opts *o, const char *who,
                      bench_server *server, bench_target *target, char *err,
                      size_t errlen)
{
    if (o->url != NULL)
        return bench_target_parse(o->url, target, err, errlen);
    if (bench_server_start(server, o->server_bin, o->workdir, err, errlen)
        != 0)
        return -1;
    *target = server->target;
    bench_progress(who, "private redis-server pid %d on %s", (int)server->pid,
                   target->url);
    return 0;
}
