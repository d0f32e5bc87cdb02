/*
 * dlock_test_wallclock.c: libdlock_test_wallclock.so, an LD_PRELOAD shim
 * that moves a process's wall clock while it runs (issue 13).
 *
 * Redis expires keys by its wall clock, so a clock step on the Redis host
 * changes when a lock's key disappears.  To test that, redis-server runs
 * with
 *
 *   LD_PRELOAD=.../libdlock_test_wallclock.so
 *   DLOCK_TEST_WALLCLOCK_FILE=/path/to/offset     (8 bytes: int64 ms)
 *
 * and every CLOCK_REALTIME reading (clock_gettime with CLOCK_REALTIME or
 * CLOCK_REALTIME_COARSE, gettimeofday, time) is shifted by the offset in
 * the file, read again at each call, so a test steps the clock of a
 * running server by rewriting the file (testkit_wallclock_set, or
 * `dlock-test-clock FILE MS`).  Monotonic and boot-time clocks are left
 * alone: a real clock step does not move them either.
 *
 * Why not libfaketime: it clashes with Redis's jemalloc at start-up.  This
 * shim allocates nothing: the file is mapped once (MAP_SHARED, read-only)
 * in a constructor, the real functions are looked up there with
 * dlsym(RTLD_NEXT), and a call that comes before (or without) the mapping
 * reads offset 0 and goes straight to the system call.  The offset is one
 * aligned int64 read with an atomic load, so a writer's atomic store is
 * seen whole.  The writer must create the file (8 bytes) before the server
 * starts; a missing file leaves the clock untouched and says so on stderr.
 *
 * Built without sanitizers whatever the build: it is loaded into a
 * redis-server that has no sanitizer runtime.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static const int64_t *offset_map;
static clock_gettime_fn real_clock_gettime;

__attribute__((constructor)) static void wallclock_init(void)
{
    const char *path = getenv("DLOCK_TEST_WALLCLOCK_FILE");
    void *map;
    int fd;

    real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    if (path == NULL)
        return;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr,
                "dlock_test_wallclock: cannot open %s: the wall "
                "clock stays as it is\n",
                path);
        return;
    }
    map = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        fprintf(stderr, "dlock_test_wallclock: cannot map %s\n", path);
        return;
    }
    offset_map = map;
}

static int64_t offset_ms(void)
{
    const int64_t *m = offset_map;

    return m != NULL ? __atomic_load_n(m, __ATOMIC_ACQUIRE) : 0;
}

static int raw_clock_gettime(clockid_t id, struct timespec *ts)
{
    if (real_clock_gettime != NULL)
        return real_clock_gettime(id, ts);
    return (int)syscall(SYS_clock_gettime, id, ts);
}

static void shift(struct timespec *ts, int64_t off)
{
    int64_t ns = (int64_t)ts->tv_nsec + (off % 1000) * 1000000;

    ts->tv_sec += off / 1000;
    if (ns < 0) {
        ns += 1000000000;
        ts->tv_sec--;
    } else if (ns >= 1000000000) {
        ns -= 1000000000;
        ts->tv_sec++;
    }
    ts->tv_nsec = (long)ns;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    int rc = raw_clock_gettime(id, ts);

    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
        shift(ts, offset_ms());
    return rc;
}

/* glibc declares tv nonnull; the kernel accepts NULL, and so do we. */
#pragma GCC diagnostic ignored "-Wnonnull-compare"
int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    struct timespec ts;

    if (tz != NULL)
        ((struct timezone *)tz)->tz_minuteswest = ((struct timezone *)tz)
                                                      ->tz_dsttime = 0;
    if (tv == NULL)
        return 0;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out)
{
    struct timespec ts;
    time_t t = (time_t)-1;

    if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
        t = ts.tv_sec;
    if (out != NULL)
        *out = t;
    return t;
}
