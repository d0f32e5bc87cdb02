/*
 * bench_callgrind.c: a private redis-server under callgrind, started,
 * stopped by pid and its instruction total read (see bench_callgrind.h).
 *
 * Invariants:
 * - A bench_cg_server with pid != 0 is a live child of this process; it is
 *   only ever signalled by that pid, and reaped here.
 * - Every wait is bounded: the start (60 s: valgrind needs a few seconds
 *   before redis-server even opens its port) and the stop (60 s, then
 *   SIGKILL: callgrind writes its file as the process exits).
 * - This file uses hiredis's blocking client only for PING.
 */
#include "bench_callgrind.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench_clock.h"
#include "bench_redis.h"

#define CG_START_MS 60000
#define CG_STOP_MS 60000

/* Whether something accepts TCP connections on 127.0.0.1:port now. */
static int port_in_use(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    const int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        return 0;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    const int used = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return used;
}

/* The last line of the file at path into buf ("(empty)" or "(none)"),
 * valgrind's own lines ("==pid== ...") passed over when there are others:
 * the server's fatal error is the news, not callgrind's summary. */
static const char *last_line(const char *path, char *buf, size_t len)
{
    char line[512];
    FILE *f = fopen(path, "r");

    snprintf(buf, len, "%s", f == NULL ? "(none)" : "(empty)");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (line[0] != '\n' && strncmp(line, "==", 2) != 0)
            snprintf(buf, len, "%.*s", (int)strcspn(line, "\n"), line);
    if (f != NULL)
        fclose(f);
    return buf;
}

static pid_t spawn(const bench_cg_server *s, const bench_cg_opts *o)
{
    char out_arg[PATH_MAX + 32], port[16];

    snprintf(out_arg, sizeof(out_arg), "--callgrind-out-file=%s", s->out_path);
    snprintf(port, sizeof(port), "%d", s->port);
    char *const argv[] = {
        (char *)o->valgrind_bin,
        "--tool=callgrind",
        /* Not the timer (serverCron, once a second at --hz 1): its work
         * (mostly reading jemalloc's statistics) depends on how many
         * seconds the run lasted, not on what was sent.  The toggle turns
         * collecting off from the start, so it is turned on again after
         * it. */
        "--toggle-collect=serverCron",
        "--collect-atstart=yes",
        out_arg,
        (char *)o->redis_bin,
        "--port",
        port,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        (char *)o->dir,
        "--logfile",
        (char *)s->rlog_path,
        "--daemonize",
        "no",
        "--unixsocket",
        "",
        "--hz",
        "1",
        "--dynamic-hz",
        "no",
        /* Under callgrind a command can take the 10 ms that puts it in
         * the slow log, which costs instructions a command that ran as
         * fast would not: time must not change the count. */
        "--slowlog-log-slower-than",
        "-1",
        NULL,
    };
    /* The seed module, when there is one, through valgrind's environment
     * to the redis-server it runs, with the round's seed. */
    char preload[PATH_MAX + 16], seed[48];
    char *const env[] = {preload, seed, NULL};

    snprintf(preload, sizeof(preload), "LD_PRELOAD=%s",
             o->preload != NULL ? o->preload : "");
    snprintf(seed, sizeof(seed), "BENCH_REDIS_SEED=%lu", o->seed);
    return bench_spawn(argv, s->log_path, o->preload != NULL ? env : NULL);
}

/* Waits up to ms for pid to exit; 1 with *status set if it did. */
static int wait_exit(pid_t pid, int ms, int *status)
{
    const int64_t deadline = bench_clock_ns() + (int64_t)ms * 1000000;

    for (;;) {
        const pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD))
            return 1;
        if (bench_clock_ns() >= deadline)
            return 0;
        bench_sleep_ns(20 * 1000000);
    }
}

void bench_cg_kill(bench_cg_server *s)
{
    int status;

    if (s->pid <= 0)
        return;
    kill(s->pid, SIGTERM);
    if (!wait_exit(s->pid, CG_STOP_MS, &status)) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, &status, 0);
    }
    s->pid = 0;
}

int bench_cg_start(bench_cg_server *s, const bench_cg_opts *o, char *err,
                   size_t errlen)
{
    const char *dir = o->dir, *name = o->name;
    const char *valgrind_bin = o->valgrind_bin, *redis_bin = o->redis_bin;
    const int port = o->port;
    char tail[512];

    memset(s, 0, sizeof(*s));
    s->port = port;
    const size_t size = sizeof(s->out_path);
    if ((size_t)snprintf(s->out_path, size, "%s/%s.callgrind", dir, name)
            >= size
        || (size_t)snprintf(s->log_path, size, "%s/%s.valgrind.log", dir, name)
               >= size
        || (size_t)snprintf(s->rlog_path, size, "%s/%s.redis.log", dir, name)
               >= size) {
        snprintf(err, errlen, "the server's files under %s: path too long",
                 dir);
        return -1;
    }
    if (port_in_use(port)) {
        snprintf(err, errlen,
                 "127.0.0.1:%d is in use already: another run, or another "
                 "DLOCK_STACK_PORT_OFFSET's (pick one with --port)",
                 port);
        return -1;
    }
    unlink(s->out_path);
    unlink(s->rlog_path);
    s->pid = spawn(s, o);
    if (s->pid < 0) {
        snprintf(err, errlen, "fork for %s: %s", valgrind_bin,
                 strerror(errno));
        s->pid = 0;
        return -1;
    }
    const bench_target target = {.host = "127.0.0.1", .port = port};
    const int64_t t0 = bench_clock_ns();
    const int64_t deadline = t0 + (int64_t)CG_START_MS * 1000000;
    while (bench_clock_ns() < deadline) {
        int status;
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = 0;
            snprintf(err, errlen,
                     "%s --tool=callgrind %s on port %d exited at once "
                     "(%s %d); valgrind's log %s ends: %s",
                     valgrind_bin, redis_bin, port,
                     WIFEXITED(status) ? "exit status" : "signal",
                     WIFEXITED(status) ? WEXITSTATUS(status)
                                       : WTERMSIG(status),
                     s->log_path, last_line(s->log_path, tail, sizeof(tail)));
            return -1;
        }
        if (bench_target_answers(&target, 500))
            return 0;
        bench_sleep_ns(100 * 1000000);
    }
    bench_cg_kill(s);
    snprintf(err, errlen,
             "redis-server under callgrind on port %d did not answer PING "
             "within %d s (stopped again); its log %s ends: %s",
             port, CG_START_MS / 1000, s->rlog_path,
             last_line(s->rlog_path, tail, sizeof(tail)));
    return -1;
}

int bench_cg_read_total(const char *path, uint64_t *instr, char *err,
                        size_t errlen)
{
    char line[512];
    uint64_t summary = 0, totals = 0;
    int have_summary = 0, have_totals = 0;
    FILE *f = fopen(path, "r");

    *instr = 0;
    if (f == NULL) {
        snprintf(err, errlen, "cannot open callgrind's file %s: %s", path,
                 strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL)
        if (!have_summary && sscanf(line, "summary: %" SCNu64, &summary) == 1)
            have_summary = 1;
        else if (!have_totals
                 && sscanf(line, "totals: %" SCNu64, &totals) == 1)
            have_totals = 1;
    fclose(f);
    if (!have_summary && !have_totals) {
        snprintf(err, errlen,
                 "callgrind's file %s has neither a summary: nor a totals: "
                 "line",
                 path);
        return -1;
    }
    *instr = have_summary ? summary : totals;
    return 0;
}

int bench_cg_stop(bench_cg_server *s, uint64_t *instr, char *err,
                  size_t errlen)
{
    char tail[512];
    int status = 0;

    *instr = 0;
    if (s->pid <= 0) {
        snprintf(err, errlen, "no server to stop on port %d", s->port);
        return -1;
    }
    if (kill(s->pid, SIGTERM) != 0) {
        snprintf(err, errlen, "SIGTERM to the server's pid %d: %s",
                 (int)s->pid, strerror(errno));
        bench_cg_kill(s);
        return -1;
    }
    const pid_t pid = s->pid;
    if (!wait_exit(pid, CG_STOP_MS, &status)) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        s->pid = 0;
        snprintf(err, errlen,
                 "the server (pid %d, port %d) did not exit within %d s of "
                 "SIGTERM (killed); valgrind's log %s ends: %s",
                 (int)pid, s->port, CG_STOP_MS / 1000, s->log_path,
                 last_line(s->log_path, tail, sizeof(tail)));
        return -1;
    }
    s->pid = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(err, errlen,
                 "the server (pid %d, port %d) ended with status 0x%x after "
                 "SIGTERM; valgrind's log %s ends: %s",
                 (int)pid, s->port, (unsigned)status, s->log_path,
                 last_line(s->log_path, tail, sizeof(tail)));
        return -1;
    }
    return bench_cg_read_total(s->out_path, instr, err, errlen);
}
