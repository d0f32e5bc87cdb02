/*
 * bench_cpu.c: CPU time and machine load from getrusage and /proc, for the
 * benchmarks (see bench_cpu.h).
 */
#include "bench_cpu.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int64_t bench_cpu_self_us(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000
           + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

int64_t bench_cpu_pid_us(pid_t pid)
{
    if (pid <= 0)
        return -1;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    char buf[1024];
    const size_t len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = '\0';
    /* The command name may hold spaces and parentheses: fields resume
     * after the last ')'.  utime and stime are fields 14 and 15. */
    const char *p = strrchr(buf, ')');
    unsigned long long utime = 0;
    unsigned long long stime = 0;
    if (p == NULL
        || sscanf(p + 1,
                  " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                  &utime, &stime)
               != 2)
        return -1;
    const long hz = sysconf(_SC_CLK_TCK);
    return (int64_t)((utime + stime) * 1000000ULL / (unsigned long long)hz);
}

int64_t bench_cpu_machine_us(void)
{
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = {0};
    int n = 0;

    if (f != NULL) {
        n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
        fclose(f);
    }
    if (n != 8)
        return -1;
    /* user nice system idle iowait irq softirq steal: all but idle and
     * iowait is busy. */
    const unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    const long hz = sysconf(_SC_CLK_TCK);
    return (int64_t)(busy * 1000000ULL / (unsigned long long)hz);
}

double bench_cpu_pressure(void)
{
    FILE *f = fopen("/proc/pressure/cpu", "r");
    double some = NAN;

    if (f != NULL) {
        if (fscanf(f, "some avg10=%lf", &some) != 1)
            some = NAN;
        fclose(f);
    }
    return some;
}

/* The second field of a schedstat file (run-queue wait, nanoseconds) in
 * microseconds; -1 when unreadable. */
static int64_t schedstat_wait_us(const char *path)
{
    FILE *f = fopen(path, "r");
    unsigned long long run_ns = 0, wait_ns = 0;
    int n = 0;

    if (f != NULL) {
        n = fscanf(f, "%llu %llu", &run_ns, &wait_ns);
        fclose(f);
    }
    return n == 2 ? (int64_t)(wait_ns / 1000) : -1;
}

int64_t bench_cpu_thread_runq_us(void)
{
    return schedstat_wait_us("/proc/thread-self/schedstat");
}

int64_t bench_cpu_pid_runq_us(pid_t pid)
{
    char path[96];
    DIR *d;
    const struct dirent *e;
    int64_t sum = 0;
    int found = 0;

    if (pid <= 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    d = opendir(path);
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        int64_t us;

        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%.16s/schedstat", (int)pid,
                 e->d_name);
        us = schedstat_wait_us(path);
        if (us >= 0) {
            sum += us;
            found = 1;
        }
    }
    closedir(d);
    return found ? sum : -1;
}

const char *bench_loadavg(char *buf, size_t len)
{
    FILE *f = fopen("/proc/loadavg", "r");

    snprintf(buf, len, "?");
    if (f != NULL) {
        if (fgets(buf, (int)len, f) != NULL)
            buf[strcspn(buf, "\n")] = '\0';
        fclose(f);
    }
    return buf;
}
