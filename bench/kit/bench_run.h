/*
 * bench_run.h: what every benchmark program does around its measurements:
 * the "run" JSON line that opens its output, progress for people on
 * stderr, and its numeric options.
 *
 * stdout carries only JSON lines; everything for people goes to stderr.
 * Threads: bench_progress may be called from any thread (one fprintf
 * sequence per call, not atomic across threads); the others run on the
 * main thread.
 */
#ifndef DLOCK_BENCH_RUN_H
#define DLOCK_BENCH_RUN_H

/* Starts a "run" JSON line on stdout: kind, bench, when, online_cpus,
 * loadavg and cpu_pressure_some_avg10.  The caller adds its own fields,
 * each starting with ',', and ends the line with "}\n". */
void bench_print_run_start(const char *bench, const char *when);

/* Writes "who: <message>\n" to stderr: progress for people, kept off
 * stdout, which carries only JSON lines. */
void bench_progress(const char *who, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Parses option name's value s as a whole number in [min, max]; on
 * anything else says so on stderr, as who, and exits with status 2 (a
 * usage error, before anything was started). */
long bench_parse_long(const char *who, const char *name, const char *s,
                      long min, long max);

#endif /* DLOCK_BENCH_RUN_H */
