/*
 * bench_json.c: JSON strings and numbers for the benchmarks' output lines
 * (see bench_json.h).
 */
#include "bench_json.h"

#include <math.h>

void bench_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    fputc('"', out);
}

void bench_json_number(FILE *out, double v)
{
    if (isnan(v) || isinf(v))
        fputs("null", out);
    else
        fprintf(out, "%.3f", v);
}
