/*
 * bench_wakeup: the most calls per second that threads blocking for their
 * own answers can make on this machine, with no network and no Redis.
 *
 * Issue 17 asks libdlock's 8- and 32-thread throughput for 0.9 of
 * redis-benchmark's pipelined limit (`-c 1 -P N`: one thread writes N
 * commands in one system call and reads N replies in one).  However a
 * client gathers its threads' commands onto connections, each call ends
 * with its thread put to sleep and woken again; this program measures
 * that alone (wake_ceiling.h).  Nothing is sent anywhere, so the figure
 * is an upper bound for any client with this API on this machine: with
 * the network and redis-server sharing the same CPUs the real ceiling is
 * lower (bench_lock puts the two together: "the blocking ceiling").
 *
 *   bench_wakeup [--threads N]... [--duration-ms MS]
 *
 * Prints one JSON line per thread count, {"kind":"ceiling","threads":N,
 * "calls_per_s":..,"pairs_per_s":..,"wakes_per_call":..,
 * "cpu_us_per_call":..}, and a line for people on stderr.  A pair is two
 * calls (acquire and release).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wake_ceiling.h"

static int run(int threads, int64_t duration_ms)
{
    wake_ceiling w;
    double per_s;

    if (wake_ceiling_run(threads, duration_ms, &w) != 0) {
        fprintf(stderr, "bench_wakeup: %d threads: %s\n", threads,
                strerror(errno));
        return -1;
    }
    per_s = wake_ceiling_calls_per_s(&w);
    printf("{\"kind\":\"ceiling\",\"threads\":%d,\"calls_per_s\":%.0f,"
           "\"pairs_per_s\":%.0f,\"wakes_per_call\":%.2f,"
           "\"cpu_us_per_call\":%.2f}\n",
           threads, per_s, per_s / 2,
           (double)w.wakes / (double)(w.calls > 0 ? w.calls : 1),
           wake_ceiling_cpu_us_per_call(&w));
    fprintf(stderr,
            "bench_wakeup: %d blocking threads, no network: %.0f calls/s, "
            "%.0f pairs/s at most, %.1f us of CPU a call\n",
            threads, per_s, per_s / 2, wake_ceiling_cpu_us_per_call(&w));
    return 0;
}

int main(int argc, char **argv)
{
    int threads[16], n = 0;
    int64_t duration_ms = 2000;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc && n < 16) {
            threads[n] = atoi(argv[++i]);
            if (threads[n] < 1 || threads[n] > WAKE_CEILING_THREADS_MAX) {
                fprintf(stderr, "bench_wakeup: --threads 1..%d\n",
                        WAKE_CEILING_THREADS_MAX);
                return 2;
            }
            n++;
        } else if (strcmp(argv[i], "--duration-ms") == 0 && i + 1 < argc) {
            duration_ms = atoll(argv[++i]);
            if (duration_ms < 100 || duration_ms > 600000) {
                fprintf(stderr, "bench_wakeup: --duration-ms 100..600000\n");
                return 2;
            }
        } else {
            fprintf(
                stderr,
                "usage: bench_wakeup [--threads N]... [--duration-ms MS]\n");
            return 2;
        }
    }
    if (n == 0) {
        threads[n++] = 8;
        threads[n++] = 32;
    }
    for (int i = 0; i < n; i++)
        if (run(threads[i], duration_ms) != 0)
            return 1;
    return 0;
}
