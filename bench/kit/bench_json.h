/*
 * bench_json.h: the two JSON values the benchmarks' output lines hold,
 * strings and numbers.
 *
 * JSON is written by hand: the lines are flat objects of numbers and short
 * ASCII strings, and a benchmark must not pull a JSON library into a
 * program whose point is to measure libdlock alone.  Each function writes
 * to the FILE given; a FILE is not shared between threads.
 */
#ifndef DLOCK_BENCH_JSON_H
#define DLOCK_BENCH_JSON_H

#include <stdio.h>

/* Writes s as a JSON string literal, quotes included. */
void bench_json_string(FILE *out, const char *s);

/* Writes a double as a JSON number (3 decimals), or null for NAN. */
void bench_json_number(FILE *out, double v);

#endif /* DLOCK_BENCH_JSON_H */
