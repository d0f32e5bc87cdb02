/*
 * bench_tool.h: runs a reference tool (redis-benchmark, pgbench) as a
 * child process and captures what it printed and the CPU it used.
 *
 * The tools measure the limit a benchmark compares its figures with, so
 * their own CPU time is part of the figure: it is read from the child's
 * rusage when it is reaped.  Every run is bounded: a tool that does not
 * finish in time is killed (SIGKILL) and reaped before the call returns,
 * so nothing is left running.
 *
 * Threads: bench_tool_run spawns with posix_spawnp and reaps only its own
 * child, by pid, so it may run on any thread.
 */
#ifndef DLOCK_BENCH_TOOL_H
#define DLOCK_BENCH_TOOL_H

#include <stddef.h>
#include <stdint.h>

/*
 * Runs argv (argv[0] found on PATH) with stdin from /dev/null and stdout
 * and stderr captured together, for at most timeout_ms (then SIGKILL).
 * On 0, *text is the output (NUL-terminated, at most 1 MiB; the caller
 * frees it), *status the wait status and *cpu_us the tool's CPU time.
 * Returns -1 with a message when it could not run or did not finish.
 * Shared by the redis-benchmark runner and the benchmarks' other
 * reference tools (pgbench).
 */
int bench_tool_run(char **argv, int timeout_ms, char **text, int *status,
                   int64_t *cpu_us, char *err, size_t errlen);

#endif /* DLOCK_BENCH_TOOL_H */
