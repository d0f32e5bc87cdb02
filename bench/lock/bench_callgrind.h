/*
 * bench_callgrind.h: a private redis-server run under valgrind's callgrind,
 * for counting the instructions the server executes (bench_server_instr).
 *
 * Why callgrind: timings on the project's shared 2-vCPU machine move by
 * 5-15 % between runs of the same code, while the number of instructions
 * redis-server executes for the same commands is the same from run to run
 * to a fraction of a percent.  callgrind counts every instruction the
 * process runs in user space (all its threads), and writes the total to
 * its output file when the process exits.
 *
 * A server is started on a fixed loopback port in a folder the caller
 * names, with no persistence, and with nothing in the count that depends
 * on how long the run took: the timer runs at its slowest (--hz 1
 * --dynamic-hz no) and is not counted (callgrind's --toggle-collect of
 * serverCron), and the slow log is off (a command slowed down by callgrind
 * or a loaded machine would be logged).  It is stopped by its pid (SIGTERM:
 * redis-server exits cleanly and callgrind writes its file), and dies with
 * this process if this process dies first (PR_SET_PDEATHSIG).
 *
 * Ownership: a bench_cg_server is the caller's, and is either stopped
 * (pid 0) or a live child of this process.  Threads: bench_cg_start forks,
 * so it must run while this process has no other thread.
 */
#ifndef DLOCK_BENCH_CALLGRIND_H
#define DLOCK_BENCH_CALLGRIND_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct bench_cg_server {
    pid_t pid;                /* 0 when not running */
    int port;                 /* 127.0.0.1 */
    char out_path[PATH_MAX];  /* callgrind's output file */
    char log_path[PATH_MAX];  /* valgrind's own messages */
    char rlog_path[PATH_MAX]; /* redis-server's log */
} bench_cg_server;

/* How to start one server; the strings are borrowed for the call. */
typedef struct bench_cg_opts {
    const char *valgrind_bin; /* "valgrind", or a path */
    const char *redis_bin;    /* "redis-server", or a path */
    const char *dir;          /* its files' folder (absolute) */
    const char *name;         /* its files' names */
    int port;
    /* The seed module (bench_seed_preload.c) to load into the server with
     * BENCH_REDIS_SEED=seed, or NULL: the server seeds itself at random. */
    const char *preload;
    unsigned long seed;
} bench_cg_opts;

/*
 * Starts `valgrind --tool=callgrind redis_bin ...` on 127.0.0.1:port, its
 * files in dir (which must exist) named after name (name.callgrind,
 * name.valgrind.log, name.redis.log; earlier ones are replaced), and waits
 * until it answers PING, at most 60 s.  Fails if something already
 * listens on port.  Returns 0, or -1 with a message in err (nothing left
 * running).
 */
int bench_cg_start(bench_cg_server *s, const bench_cg_opts *o, char *err,
                   size_t errlen);

/*
 * Stops the server by its pid (SIGTERM, then SIGKILL after 60 s), reaps it
 * and reads the total of instructions from callgrind's file into *instr.
 * Returns 0, or -1 with a message in err when the server did not exit
 * cleanly or the file has no total.  Does nothing but fail when not
 * running.
 */
int bench_cg_stop(bench_cg_server *s, uint64_t *instr, char *err,
                  size_t errlen);

/* Stops the server by its pid, if running, without reading anything:
 * for the paths that already failed. */
void bench_cg_kill(bench_cg_server *s);

/* Reads the run's total of instructions (the "summary:" line, else
 * "totals:") from a callgrind output file.  Returns 0, or -1 with a
 * message in err.  Exposed so the parser can be tried on its own. */
int bench_cg_read_total(const char *path, uint64_t *instr, char *err,
                        size_t errlen);

#endif /* DLOCK_BENCH_CALLGRIND_H */
