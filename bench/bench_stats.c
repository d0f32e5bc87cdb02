/*
 * bench_stats.c: clocks, samples, CPU accounting and JSON figure lines for
 * the benchmark programs (see bench_stats.h for why they look this way).
 *
 * JSON is written by hand: the lines are flat objects of numbers and short
 * ASCII strings, and the bench must not pull a JSON library into a program
 * whose point is to measure libdlock alone.
 */
#include "bench_stats.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

int64_t bench_clock_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void bench_sleep_ns(int64_t ns)
{
    struct timespec ts = {
        .tv_sec = (time_t)(ns / 1000000000),
        .tv_nsec = (long)(ns % 1000000000),
    };

    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR) {
        continue;
    }
}

int bench_samples_init(bench_samples *s, size_t cap)
{
    memset(s, 0, sizeof(*s));
    s->v = malloc((cap ? cap : 1) * sizeof(*s->v));
    if (s->v == NULL) {
        return -1;
    }
    s->cap = cap;
    return 0;
}

void bench_samples_add(bench_samples *s, int64_t ns)
{
    if (s->n == s->cap) {
        s->dropped++;
        return;
    }
    s->v[s->n++] = ns;
}

void bench_samples_merge(bench_samples *s, const bench_samples *from)
{
    for (size_t i = 0; i < from->n; i++) {
        bench_samples_add(s, from->v[i]);
    }
    s->dropped += from->dropped;
}

static int compare_int64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a;
    const int64_t y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

void bench_samples_sort(bench_samples *s)
{
    qsort(s->v, s->n, sizeof(*s->v), compare_int64);
}

double bench_samples_quantile_us(const bench_samples *s, double q)
{
    if (s->n == 0) {
        return NAN;
    }
    /* Nearest rank: the smallest sample with at least q of all at or
     * below it. */
    size_t rank = (size_t)ceil(q * (double)s->n);
    if (rank < 1) {
        rank = 1;
    }
    if (rank > s->n) {
        rank = s->n;
    }
    return (double)s->v[rank - 1] / 1000.0;
}

double bench_samples_mean_us(const bench_samples *s)
{
    if (s->n == 0) {
        return NAN;
    }
    double sum = 0;
    for (size_t i = 0; i < s->n; i++) {
        sum += (double)s->v[i];
    }
    return sum / (double)s->n / 1000.0;
}

void bench_samples_free(bench_samples *s)
{
    free(s->v);
    memset(s, 0, sizeof(*s));
}

int64_t bench_cpu_self_us(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
           ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

int64_t bench_cpu_pid_us(pid_t pid)
{
    if (pid <= 0) {
        return -1;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    char buf[1024];
    const size_t len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = '\0';
    /* The command name may hold spaces and parentheses: fields resume
     * after the last ')'.  utime and stime are fields 14 and 15. */
    const char *p = strrchr(buf, ')');
    unsigned long long utime = 0;
    unsigned long long stime = 0;
    if (p == NULL ||
        sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
               &utime, &stime) != 2) {
        return -1;
    }
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
    if (n != 8) {
        return -1;
    }
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
        if (fscanf(f, "some avg10=%lf", &some) != 1) {
            some = NAN;
        }
        fclose(f);
    }
    return some;
}

void bench_print_run_start(const char *bench, const char *when)
{
    char load[128];

    printf("{\"kind\":\"run\",\"bench\":\"%s\",\"when\":\"%s\","
           "\"online_cpus\":%ld,\"loadavg\":", bench, when,
           sysconf(_SC_NPROCESSORS_ONLN));
    bench_json_string(stdout, bench_loadavg(load, sizeof(load)));
    printf(",\"cpu_pressure_some_avg10\":");
    bench_json_number(stdout, bench_cpu_pressure());
}

const char *bench_loadavg(char *buf, size_t len)
{
    FILE *f = fopen("/proc/loadavg", "r");

    snprintf(buf, len, "?");
    if (f != NULL) {
        if (fgets(buf, (int)len, f) != NULL) {
            buf[strcspn(buf, "\n")] = '\0';
        }
        fclose(f);
    }
    return buf;
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

double bench_per_op(int64_t cpu_us, long long ops)
{
    if (cpu_us < 0 || ops <= 0) {
        return NAN;
    }
    return (double)cpu_us / (double)ops;
}

void bench_cost_begin(bench_cost *c, pid_t server_pid, uint64_t trips_now)
{
    c->cpu_us = bench_cpu_self_us();
    c->server_cpu_us = bench_cpu_pid_us(server_pid);
    c->trips = trips_now;
}

void bench_cost_end(bench_cost *c, pid_t server_pid, uint64_t trips_now)
{
    const int64_t server = bench_cpu_pid_us(server_pid);

    c->cpu_us = bench_cpu_self_us() - c->cpu_us;
    c->server_cpu_us = server < 0 || c->server_cpu_us < 0
                           ? -1 : server - c->server_cpu_us;
    c->trips = trips_now - c->trips;
}

void bench_cost_apply(const bench_cost *c, long long ops, bench_figure *f)
{
    f->client_cpu_us_per_op = bench_per_op(c->cpu_us, ops);
    f->server_cpu_us_per_op = bench_per_op(c->server_cpu_us, ops);
    f->round_trips_per_op = ops > 0 ? (double)c->trips / (double)ops : NAN;
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

void bench_figure_init(bench_figure *f, const char *name, const char *unit,
                       bench_better better)
{
    memset(f, 0, sizeof(*f));
    f->name = name;
    f->unit = unit;
    f->better = better;
    f->value = NAN;
    f->limit = NAN;
    f->goal = NAN;
    f->abs_goal = NAN;
    f->n = -1;
    f->errors = -1;
    f->client_cpu_us_per_op = NAN;
    f->server_cpu_us_per_op = NAN;
    f->round_trips_per_op = NAN;
}

double bench_figure_ratio(const bench_figure *f)
{
    if (isnan(f->value) || isnan(f->limit) || f->limit == 0) {
        return NAN;
    }
    return f->value / f->limit;
}

int bench_figure_met(const bench_figure *f)
{
    if (!isnan(f->abs_goal)) {
        return isnan(f->value) ? 0 : f->value < f->abs_goal;
    }
    if (isnan(f->goal)) {
        return -1;
    }
    const double r = bench_figure_ratio(f);
    if (isnan(r)) {
        return 0;
    }
    return f->better == BENCH_LOWER_IS_BETTER ? r <= f->goal : r >= f->goal;
}

const char *bench_figure_target(const bench_figure *f, char *buf,
                                size_t len)
{
    if (!isnan(f->abs_goal)) {
        snprintf(buf, len, "value < %.0f %s", f->abs_goal, f->unit);
    } else if (!isnan(f->goal)) {
        snprintf(buf, len, "ratio %s %.2f",
                 f->better == BENCH_LOWER_IS_BETTER ? "<=" : ">=", f->goal);
    } else {
        snprintf(buf, len, "%s", "");
    }
    return buf;
}

void bench_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            fprintf(out, "\\%c", *p);
        } else if (*p < 0x20) {
            fprintf(out, "\\u%04x", *p);
        } else {
            fputc(*p, out);
        }
    }
    fputc('"', out);
}

void bench_json_number(FILE *out, double v)
{
    if (isnan(v) || isinf(v)) {
        fputs("null", out);
    } else {
        fprintf(out, "%.3f", v);
    }
}

/* Prints ,"key":number. */
static void print_number_field(FILE *out, const char *key, double v)
{
    fprintf(out, ",\"%s\":", key);
    bench_json_number(out, v);
}

void bench_figure_print(FILE *out, const bench_figure *f)
{
    char target[96];
    char goal[64];
    const int met = bench_figure_met(f);

    bench_figure_target(f, goal, sizeof(goal));
    snprintf(target, sizeof(target), "%s is better%s%s",
             f->better == BENCH_LOWER_IS_BETTER ? "lower" : "higher",
             goal[0] ? "; issue target: " : "", goal);
    fputs("{\"kind\":\"figure\",\"name\":", out);
    bench_json_string(out, f->name);
    print_number_field(out, "value", f->value);
    fputs(",\"unit\":", out);
    bench_json_string(out, f->unit);
    print_number_field(out, "limit", f->limit);
    print_number_field(out, "ratio", bench_figure_ratio(f));
    fputs(",\"target\":", out);
    bench_json_string(out, target);
    fprintf(out, ",\"met\":%s", met < 0 ? "null" : met ? "true" : "false");
    if (f->limit_from != NULL) {
        fputs(",\"limit_from\":", out);
        bench_json_string(out, f->limit_from);
    }
    if (f->n >= 0) {
        fprintf(out, ",\"n\":%lld", f->n);
    }
    if (f->errors >= 0) {
        fprintf(out, ",\"errors\":%lld", f->errors);
    }
    print_number_field(out, "client_cpu_us_per_op", f->client_cpu_us_per_op);
    print_number_field(out, "server_cpu_us_per_op", f->server_cpu_us_per_op);
    print_number_field(out, "round_trips_per_op", f->round_trips_per_op);
    for (int i = 0; i < 2; i++) {
        if (f->extra_key[i] != NULL) {
            print_number_field(out, f->extra_key[i], f->extra_value[i]);
        }
    }
    fputs("}\n", out);
    fflush(out);
}

void bench_table_add(bench_table *t, FILE *out, const bench_figure *f)
{
    bench_figure_print(out, f);
    const int cap = (int)(sizeof(t->rows) / sizeof(t->rows[0]));
    if (t->n == cap) {
        return;
    }
    t->rows[t->n] = *f;
    snprintf(t->names[t->n], sizeof(t->names[t->n]), "%s", f->name);
    t->rows[t->n].name = t->names[t->n];
    t->rows[t->n].limit_from = NULL;
    t->rows[t->n].extra_key[0] = NULL;
    t->rows[t->n].extra_key[1] = NULL;
    t->n++;
}

void bench_table_print(const bench_table *t, FILE *out)
{
    fprintf(out, "%-33s %10s %10s %-7s %6s  %-16s %s\n", "figure", "value",
            "limit", "unit", "ratio", "issue target", "met");
    for (int i = 0; i < t->n; i++) {
        const bench_figure *f = &t->rows[i];
        char goal[64];
        const int met = bench_figure_met(f);
        bench_figure_target(f, goal, sizeof(goal));
        fprintf(out, "%-33s %10.1f %10.1f %-7s %6.2f  %-16s %s\n", f->name,
                f->value, f->limit, f->unit, bench_figure_ratio(f),
                goal[0] ? goal : "-",
                met < 0 ? "-" : met ? "yes" : "NO");
    }
    fflush(out);
}
