/*
 * bench_run.c: the run line, progress and option parsing of the benchmark
 * programs (see bench_run.h).
 */
#include "bench_run.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench_cpu.h"
#include "bench_json.h"

void bench_print_run_start(const char *bench, const char *when)
{
    char load[128];

    printf("{\"kind\":\"run\",\"bench\":\"%s\",\"when\":\"%s\","
           "\"online_cpus\":%ld,\"loadavg\":",
           bench, when, sysconf(_SC_NPROCESSORS_ONLN));
    bench_json_string(stdout, bench_loadavg(load, sizeof(load)));
    printf(",\"cpu_pressure_some_avg10\":");
    bench_json_number(stdout, bench_cpu_pressure());
}

void bench_progress(const char *who, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fprintf(stderr, "%s: ", who);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

long bench_parse_long(const char *who, const char *name, const char *s,
                      long min, long max)
{
    char *end = NULL;

    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        fprintf(stderr, "%s: %s wants a whole number in %ld..%ld, not %s\n",
                who, name, min, max, s);
        exit(2);
    }
    return v;
}
