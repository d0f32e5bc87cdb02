/*
 * bench_seed_preload.c: an LD_PRELOAD module for the redis-server that
 * bench_server_instr counts, so that its random seed is a fixed one.
 *
 * Why: redis-server seeds its hash tables' hash function (and its run id)
 * with bytes read from /dev/urandom at start.  The seed decides which
 * command names and keys share a bucket, so the compares per lookup, and
 * the instructions per lock pair, differ by up to 1-1.5 % from one start
 * to the next.  With BENCH_REDIS_SEED=N in its environment, the server's
 * fopen("/dev/urandom") reads a stream made from N instead (splitmix64),
 * so the same N gives the same layout, and a count is the same from run
 * to run; counting over several N averages over layouts.  Without
 * BENCH_REDIS_SEED, or for any other file, fopen is the C library's.
 *
 * Only redis-server under bench_server_instr loads this (bench_callgrind.c
 * sets LD_PRELOAD in the server's environment alone); the server's work
 * is otherwise unchanged.  Threads: each open fills one static buffer
 * with the same bytes; redis-server opens /dev/urandom once, at start,
 * before its other threads exist.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

FILE *fopen(const char *path, const char *mode);
FILE *fopen64(const char *path, const char *mode);

static unsigned char seed_bytes[4096];

/* A stream of bytes made from BENCH_REDIS_SEED, or NULL when it is not
 * set (or a stream cannot be made: then the real file is opened). */
static FILE *seeded_stream(void)
{
    const char *s = getenv("BENCH_REDIS_SEED");

    if (s == NULL || *s == '\0')
        return NULL;
    uint64_t x = strtoull(s, NULL, 10);
    for (size_t i = 0; i < sizeof(seed_bytes); i += sizeof(uint64_t)) {
        x += 0x9e3779b97f4a7c15ULL;
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        memcpy(seed_bytes + i, &z, sizeof(z));
    }
    return fmemopen(seed_bytes, sizeof(seed_bytes), "r");
}

typedef FILE *(*fopen_fn)(const char *, const char *);

static FILE *open_file(const char *name, const char *path, const char *mode)
{
    if (path != NULL && strcmp(path, "/dev/urandom") == 0) {
        FILE *f = seeded_stream();
        if (f != NULL)
            return f;
    }
    fopen_fn real;
    void *sym = dlsym(RTLD_NEXT, name);
    memcpy(&real, &sym, sizeof(real));
    return real != NULL ? real(path, mode) : NULL;
}

FILE *fopen(const char *path, const char *mode)
{
    return open_file("fopen", path, mode);
}

FILE *fopen64(const char *path, const char *mode)
{
    return open_file("fopen64", path, mode);
}
