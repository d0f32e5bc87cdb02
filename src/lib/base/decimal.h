/*
 * decimal.h: integers written as decimal text, for the commands libdlock
 * sends on every call (a TTL, a fence, a floor, a count of keys, and each
 * argument's length in RESP).
 *
 * snprintf("%llu") costs 630 to 950 instructions a call (its format
 * parser, its FILE machinery) and ran six times a lock pair; these write the
 * digits straight into the caller's buffer, last digit first, once their
 * count is known (docs/benchmarks.md, "Session 24").  They allocate
 * nothing and cannot fail.
 */
#ifndef DLOCK_SRC_DECIMAL_H
#define DLOCK_SRC_DECIMAL_H

#include <stddef.h>
#include <stdint.h>

/* Room for any int64_t or uint64_t in decimal, its sign and a NUL. */
#define DLOCK__DECIMAL_MAX 22

/* How many digits v has in decimal (1 for 0, at most 20). */
size_t dlock__decimal_len(uint64_t v);

/* Writes v's dlock__decimal_len(v) digits at out, then a NUL; returns
 * the number of digits. */
size_t dlock__decimal_u64(char *out, uint64_t v);

/* The same when the caller already has n = dlock__decimal_len(v) (to
 * check that the digits fit first): writes them and a NUL, counts
 * nothing again. */
void dlock__decimal_put(char *out, uint64_t v, size_t n);

/* Writes v at out with a '-' when negative, then a NUL (at most
 * DLOCK__DECIMAL_MAX bytes in all); returns the length. */
size_t dlock__decimal_i64(char *out, int64_t v);

#endif /* DLOCK_SRC_DECIMAL_H */
