/*
 * bench_redis.h: the Redis side of a benchmark run: a private redis-server,
 * a MONITOR tap that learns the exact commands libdlock sends, and
 * redis-benchmark replaying those commands to measure the limit.
 *
 * Why a private server: the integration tests share the stack's Redis and
 * run in parallel; a benchmark on that server would measure their load,
 * and its own load would slow them.  So a run starts its own redis-server
 * on a free loopback port, without persistence, in its own folder, and
 * stops it by pid at the end (it also gets SIGTERM if the benchmark dies,
 * through PR_SET_PDEATHSIG).
 *
 * Why MONITOR: the limit must be the same commands the library sends, and
 * copying the library's Lua into the benchmark would measure the copy.
 * MONITOR shows every command as the server executed it, so one acquire and
 * one release through libdlock give the EVALSHA lines that redis-benchmark
 * then replays verbatim.
 *
 * Threads: bench_server_start forks, so it must run before the program
 * starts any thread.  Everything else may run on any one thread at a time;
 * none of these objects is shared between threads.
 */
#ifndef DLOCK_BENCH_REDIS_H
#define DLOCK_BENCH_REDIS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Where the benchmarked server listens. */
typedef struct bench_target {
    char host[256]; /* "" for a unix socket */
    int port;
    char unix_path[256]; /* "" for TCP */
    int db;
    char url[600]; /* the same server as a libdlock URL */
} bench_target;

/*
 * Parses redis://host[:port][/db] or unix:///path[?db=N] into t.  Passwords
 * are refused: the benchmark runs against private, local test servers.
 * Returns 0, or -1 with a message in err.
 */
int bench_target_parse(const char *url, bench_target *t, char *err,
                       size_t errlen);

/*
 * Forks and execs argv[0] (found on PATH) with argv: stdin from
 * /dev/null, stdout and stderr to log_path (created or truncated; NULL:
 * /dev/null), each "NAME=VALUE" of env (NULL-terminated; env itself may
 * be NULL) set in the child only, and the child sent SIGTERM if this
 * process dies first (PR_SET_PDEATHSIG), so a crashed benchmark leaves no
 * server behind.  The child runs in a session of its own, as a server run
 * as a service does: with Linux's autogroup scheduling (on in Debian's
 * kernels), a server in this program's session would share one group's
 * CPU weight with every thread of the client under test, and N client
 * threads would starve it of all but 1/(N+1) of the group's share.  The
 * child's pid, or -1 if fork failed; a child that cannot exec says why in
 * the log and exits 127.
 */
pid_t bench_spawn(char *const argv[], const char *log_path, char *const env[]);

/* A redis-server this program started. */
typedef struct bench_server {
    pid_t pid;     /* 0 when not running */
    char dir[512]; /* its working folder (log inside) */
    bench_target target;
} bench_server;

/*
 * Starts redis-server (the program named by server_bin, found on PATH) on
 * a free 127.0.0.1 port with no persistence, in a fresh folder under
 * workdir (created if missing), and waits, at most 10 s, until it answers
 * PING.  Returns 0, or -1 with a message in err (nothing left running).
 */
int bench_server_start(bench_server *s, const char *server_bin,
                       const char *workdir, char *err, size_t errlen);

/* Stops the server by its pid (SIGTERM, then SIGKILL after 5 s) and
 * removes its folder when it stopped cleanly.  Does nothing when not
 * running. */
void bench_server_stop(bench_server *s);

/* The options every benchmark of a Redis server takes alike. */
typedef struct bench_redis_opts {
    const char *url;        /* NULL: start a private server */
    const char *workdir;    /* the private server's parent folder */
    const char *server_bin; /* redis-server to start */
    const char *rb_bin;     /* redis-benchmark to run */
} bench_redis_opts;

/* The defaults: a private server under var/bench, both programs from
 * PATH. */
#define BENCH_REDIS_OPTS_DEFAULT \
    ((bench_redis_opts){NULL, "var/bench", "redis-server", "redis-benchmark"})

/* The getopt_long entries for those options (values 'u', 'w', 'S', 'B'),
 * and their lines for a usage text. */
#define BENCH_REDIS_LONGOPTS                            \
    {"url", required_argument, NULL, 'u'},              \
        {"workdir", required_argument, NULL, 'w'},      \
        {"redis-server", required_argument, NULL, 'S'}, \
    {                                                   \
        "redis-benchmark", required_argument, NULL, 'B' \
    }
#define BENCH_REDIS_USAGE                                                  \
    "  --url URL              benchmark this server instead of a private " \
    "one\n"                                                                \
    "  --workdir DIR          folder for the private server (var/bench)\n" \
    "  --redis-server BIN     (redis-server)\n"                            \
    "  --redis-benchmark BIN  (redis-benchmark)\n"

/* Takes option ch's value arg into o if it is one of those; returns 1 if
 * it was, 0 if ch is the caller's. */
int bench_redis_option(bench_redis_opts *o, int ch, const char *arg);

/*
 * The server a run measures: o->url's when given, else a private server
 * started into *server (which the caller stops with bench_server_stop).
 * Says which on stderr as who.  Returns 0 with *target set, or -1 with a
 * message in err.  Forks: call before any thread exists.
 */
int bench_redis_setup(const bench_redis_opts *o, const char *who,
                      bench_server *server, bench_target *target, char *err,
                      size_t errlen);

/* 1 if the server at t answers PING with PONG now, connecting within
 * timeout_ms; 0 otherwise. */
int bench_target_answers(const bench_target *t, int timeout_ms);

/* A plain blocking hiredis connection to t, made within timeout_ms
 * (NULL or one with err set when it could not be made; the caller frees
 * it with redisFree either way). */
struct redisContext *bench_redis_connect(const bench_target *t,
                                         int timeout_ms);

/* Asks the server for INFO's redis_version into buf ("?" on failure). */
void bench_server_version(const bench_target *t, char *buf, size_t len);

/* The floor's compare-and-delete: DEL KEYS[1] if it holds ARGV[1]; 1 if
 * it deleted, 0 if not (the release every benchmark's floor pairs with
 * SET NX PX). */
extern const char bench_cad_script[];

/*
 * Loads script (SCRIPT LOAD) on the server at t and writes its SHA-1, 40
 * hex digits and a NUL, into sha.  Returns 0, or -1 with a message in err.
 */
int bench_script_load(const bench_target *t, const char *script, char sha[41],
                      char *err, size_t errlen);

#define BENCH_CMD_MAX_ARGS 32

/* A command as its arguments, each a NUL-terminated copy. */
typedef struct bench_cmd {
    int argc;
    char *argv[BENCH_CMD_MAX_ARGS];
} bench_cmd;

/* Frees the arguments; a zeroed bench_cmd is fine. */
void bench_cmd_free(bench_cmd *c);

/* The command as one line, arguments separated by spaces, into buf. */
const char *bench_cmd_format(const bench_cmd *c, char *buf, size_t len);

typedef struct bench_monitor bench_monitor;

/* Connects to t and sends MONITOR.  Returns 0, or -1 with a message. */
int bench_monitor_open(const bench_target *t, bench_monitor **out, char *err,
                       size_t errlen);

/*
 * Reads the MONITOR feed until a line shows a client (not a Lua script)
 * sending EVALSHA whose first key is key, and stores that command's
 * arguments in out.  Waits at most timeout_ms in all.  Returns 0, or -1
 * with a message (the tap is then unusable: close it).
 */
int bench_monitor_find_evalsha(bench_monitor *m, const char *key,
                               int timeout_ms, bench_cmd *out, char *err,
                               size_t errlen);

/* Closes the tap; NULL is fine. */
void bench_monitor_close(bench_monitor *m);

/*
 * Parses one MONITOR line ("1700000000.123456 [0 127.0.0.1:5000] "SET"
 * "k" "v"") into out; from_lua is set to 1 when a script sent it.  Returns
 * 0, or -1 when the line is not in that form.  Exposed for the self-check.
 */
int bench_monitor_parse_line(const char *line, bench_cmd *out, int *from_lua);

/* What one redis-benchmark run measured. */
typedef struct bench_rb_result {
    double rps; /* requests per second */
    double p50_us;
    double p99_us;
    double p999_us; /* NAN when not measured (--csv runs) */
    long requests;
    int clients;
    int pipeline;          /* -P; 1 without */
    int64_t rb_cpu_us;     /* redis-benchmark's own CPU time */
    int64_t server_cpu_us; /* the server's CPU during the run, or -1 */
} bench_rb_result;

/*
 * Runs `rb_bin -c clients -n requests CMD...` against t and parses its
 * output: with clients == 1 the default report (it alone has the percentile
 * distribution, for p99.9), otherwise --csv.  server_pid, when > 0, is the
 * server whose CPU time is read before and after.  Gives up after
 * timeout_ms.  Returns 0, or -1 with a message.
 */
int bench_rb_run(const char *rb_bin, const bench_target *t, pid_t server_pid,
                 int clients, long requests, const bench_cmd *cmd,
                 int timeout_ms, bench_rb_result *out, char *err,
                 size_t errlen);

/* The same with `-P pipeline` (always --csv when pipeline > 1): one
 * connection can carry pipeline requests at a time, the limit a client
 * that coalesces its threads' commands could reach. */
int bench_rb_run_pipelined(const char *rb_bin, const bench_target *t,
                           pid_t server_pid, int clients, int pipeline,
                           long requests, const bench_cmd *cmd, int timeout_ms,
                           bench_rb_result *out, char *err, size_t errlen);

/* Parsers of redis-benchmark's two output forms, exposed for the
 * self-check.  Both return 0, or -1 when a field is missing. */
int bench_rb_parse_report(const char *text, bench_rb_result *out);
int bench_rb_parse_csv(const char *text, bench_rb_result *out);

/* Creates path and its missing parents, like mkdir -p: 0, or -1 with
 * errno (ENAMETOOLONG past 1023 bytes).  For the private servers'
 * folders, and the benchmarks' other work folders. */
int bench_make_dirs(const char *path);

#endif /* DLOCK_BENCH_REDIS_H */
