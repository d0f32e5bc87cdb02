/*
 * fuzz_target.h: what every fuzz target in tests/fuzz/ provides.
 *
 * Each target is one file defining LLVMFuzzerTestOneInput, the entry point
 * of clang's libFuzzer.  The same file is linked two ways:
 *
 *   - with -fsanitize=fuzzer (scripts/fuzz, build-fuzz/): libFuzzer's own
 *     main() mutates inputs and calls the target millions of times;
 *   - with fuzz_replay.c (every normal build): a small main() that runs
 *     each file of the target's seed corpus once, so the corpus is a
 *     regression test in the gcc and the sanitizer builds alike.
 *
 * A target reports a bug by crashing (abort() after a message on stderr),
 * which both mains turn into a failure: libFuzzer saves the input as a
 * crash-<sha1> artifact, and the replay test exits non-zero.
 *
 * fuzz_target_selftest is optional: a target may define it for fixed
 * checks that are too slow to run on every fuzzed input (the replay main
 * calls it once, libFuzzer never does).
 */
#ifndef DLOCK_FUZZ_TARGET_H
#define DLOCK_FUZZ_TARGET_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Weak: NULL when the target has no fixed checks. */
void fuzz_target_selftest(void) __attribute__((weak));

/* Prints "fuzz: <target>: <message>" on stderr and aborts, so that both
 * mains see a crash (and libFuzzer keeps the input). */
static inline __attribute__((format(printf, 2, 3), noreturn)) void fuzz_fail(
    const char *target, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "fuzz: %s: ", target);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

#endif /* DLOCK_FUZZ_TARGET_H */
