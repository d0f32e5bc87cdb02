/*
 * bench_figure.c: figures as JSON lines and the run's summary table (see
 * bench_figure.h).
 */
#include "bench_figure.h"

#include <math.h>
#include <string.h>

#include "bench_json.h"

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
    if (isnan(f->value) || isnan(f->limit) || f->limit == 0)
        return NAN;
    return f->value / f->limit;
}

int bench_figure_met(const bench_figure *f)
{
    if (!isnan(f->abs_goal))
        return isnan(f->value) ? 0 : f->value < f->abs_goal;
    if (isnan(f->goal))
        return -1;
    const double r = bench_figure_ratio(f);
    if (isnan(r))
        return 0;
    return f->better == BENCH_LOWER_IS_BETTER ? r <= f->goal : r >= f->goal;
}

const char *bench_figure_target(const bench_figure *f, char *buf, size_t len)
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
    if (f->n >= 0)
        fprintf(out, ",\"n\":%lld", f->n);
    if (f->errors >= 0)
        fprintf(out, ",\"errors\":%lld", f->errors);
    print_number_field(out, "client_cpu_us_per_op", f->client_cpu_us_per_op);
    print_number_field(out, "server_cpu_us_per_op", f->server_cpu_us_per_op);
    print_number_field(out, "round_trips_per_op", f->round_trips_per_op);
    for (int i = 0; i < 2; i++)
        if (f->extra_key[i] != NULL)
            print_number_field(out, f->extra_key[i], f->extra_value[i]);
    fputs("}\n", out);
    fflush(out);
}

void bench_table_add(bench_table *t, FILE *out, const bench_figure *f)
{
    bench_figure_print(out, f);
    const int cap = (int)(sizeof(t->rows) / sizeof(t->rows[0]));
    if (t->n == cap)
        return;
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
                met < 0 ? "-"
                : met   ? "yes"
                        : "NO");
    }
    fflush(out);
}
