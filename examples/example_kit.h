/*
 * example_kit.h: what the runnable examples share.
 *
 * Each example is one program that plays a small distributed system on one
 * machine: it forks N worker processes (each with its own dlock_client,
 * made after the fork, as a real service would), lets them race for
 * something through a libdlock pattern, collects what they did through a
 * pipe or an append-only file, and checks the outcome with hard assertions
 * (exit status 0 = the pattern held, 1 = it did not, 2 = it could not
 * run).  So every example is also an integration test (examples/
 * CMakeLists.txt registers them with CTest).
 *
 * Redis: --redis URL, else $DLOCK_TEST_REDIS_URL, $REDIS_URL, or
 * redis://127.0.0.1:16379/0 (scripts/stack up redis).  Key names carry the
 * coordinator's pid, so runs never collide on a shared server.
 *
 * Threads: the coordinator forks before it starts any thread (a fork of a
 * process with a dlock_client's threads would copy a half-locked library);
 * workers may use threads freely.
 */
#ifndef DLOCK_EXAMPLE_KIT_H
#define DLOCK_EXAMPLE_KIT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dlock/patterns.h"

/* The Redis URL from argv (--redis URL) or the environment. */
const char *ex_redis_url(int argc, char **argv);

/* The integer value of option name ("--procs") in argv, or def. */
long ex_opt_long(int argc, char **argv, const char *name, long def);

/* 1 if flag ("--no-lock") is in argv. */
int ex_opt_flag(int argc, char **argv, const char *flag);

/* A client for url with short timeouts (connect 2 s, I/O 1 s); exits 2
 * with the library's message if it cannot be made. */
dlock_client *ex_client(const char *url);

/* Monotonic and wall-clock microseconds. */
int64_t ex_now_us(void);
int64_t ex_wall_us(void);

/* Sleeps until the wall clock reads wall_us: how the workers start
 * together at a time the coordinator chose (a schedule, not a wait for a
 * condition). */
void ex_sleep_until_wall(int64_t wall_us);

/* Sleeps ms milliseconds: simulated work (a payment gateway's latency). */
void ex_work_ms(int64_t ms);

/* Makes a fresh directory /tmp/dlock-<name>-XXXXXX into dir (size 256);
 * exits 2 on failure. */
void ex_tmpdir(const char *name, char *dir);

/* Removes the files in dir and dir itself. */
void ex_rmdir(const char *dir);

/* Forks n workers; worker i runs fn(i, arg) and exits with its return.
 * pids receives their pids.  Exits 2 if fork fails. */
void ex_spawn(int n, int (*fn)(int i, void *arg), void *arg, pid_t *pids);

/* Waits for the n workers; returns how many did not exit with status 0. */
int ex_wait_all(int n, const pid_t *pids);

/* Appends the line (with a newline) to the file at path in one write(2)
 * on an O_APPEND descriptor, so lines of many processes never mix.
 * Returns 0 or -1. */
int ex_append_line(const char *path, const char *line);

/* Reads the whole file (or, with fd >= 0 and path NULL, a pipe until EOF)
 * and splits it into lines.  *lines is an array of n NUL-terminated
 * strings in one allocation, freed with free(*lines). */
int ex_read_lines(const char *path, int fd, char ***lines, size_t *n);

/* Prints "FAIL: <message>" to stderr; returns 1 (for "return ex_fail"). */
int ex_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* DLOCK_EXAMPLE_KIT_H */
