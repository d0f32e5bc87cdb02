/*
 * chaos_common.c: time, randomness, the event log, the board and argument
 * parsing for the checker's processes (chaos.h).
 *
 * Kept free of libdlock so that the orchestrator, the C API client and the
 * step run by `dlock run` all share one definition of an event line and of
 * the board.
 */
#include "chaos.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int64_t chaos_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void chaos_sleep_until(int64_t t_us)
{
    struct timespec ts = {.tv_sec = t_us / 1000000,
                          .tv_nsec = (t_us % 1000000) * 1000};

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

void chaos_sleep_us(int64_t us)
{
    if (us > 0)
        chaos_sleep_until(chaos_now_us() + us);
}

void chaos_rng_seed(chaos_rng *r, uint64_t seed)
{
    /* splitmix64 of the seed, so that nearby seeds give unrelated streams
     * and the state is never 0. */
    uint64_t z = seed + 0x9e3779b97f4a7c15ull;

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    r->s = (z ^ (z >> 31)) | 1;
}

uint64_t chaos_rng_next(chaos_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545f4914f6cdd1dull;
}

int64_t chaos_rng_range(chaos_rng *r, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)(hi - lo) + 1;

    return lo + (int64_t)(chaos_rng_next(r) % span);
}

int chaos_events_open(const char *dir)
{
    return chaos_log_open(dir, "events.log");
}

int chaos_log_open(const char *dir, const char *file)
{
    char path[1024];
    int fd;

    snprintf(path, sizeof(path), "%s/%s", dir, file);
    fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        fprintf(stderr, "chaos: open %s: %s\n", path, strerror(errno));
    return fd;
}

int64_t chaos_event(int fd, const char *fmt, ...)
{
    char line[CHAOS_LINE_MAX];
    int64_t now = chaos_now_us();
    int n = snprintf(line, sizeof(line), "%lld ", (long long)now);
    va_list ap;

    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    if (write(fd, line, (size_t)n) != n)
        fprintf(stderr, "chaos: writing an event: %s\n", strerror(errno));
    return now;
}

chaos_slot *chaos_board_map(const char *dir, int create)
{
    char path[1024];
    size_t size = CHAOS_CLIENTS_MAX * sizeof(chaos_slot);
    int fd;
    void *map;

    snprintf(path, sizeof(path), "%s/board", dir);
    fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0),
              0644);
    if (fd < 0 || (create && ftruncate(fd, (off_t)size) != 0)) {
        fprintf(stderr, "chaos: board %s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        fprintf(stderr, "chaos: mmap %s: %s\n", path, strerror(errno));
        return NULL;
    }
    return map;
}

void chaos_board_unmap(chaos_slot *board)
{
    if (board != NULL)
        munmap(board, CHAOS_CLIENTS_MAX * sizeof(chaos_slot));
}

void chaos_board_hold(chaos_slot *board, int id, int holding)
{
    if (board == NULL || id < 0 || id >= CHAOS_CLIENTS_MAX)
        return;
    __atomic_store_n(&board[id].since_us, chaos_now_us(), __ATOMIC_RELAXED);
    __atomic_store_n(&board[id].holding, holding, __ATOMIC_RELEASE);
}

int chaos_critical_section(chaos_register *reg, int id, uint64_t fence,
                           int64_t work_us)
{
    uint64_t value = 0;
    int rc = chaos_register_read(reg, id, fence, &value);

    if (rc != 1)
        return rc;
    chaos_sleep_us(work_us);
    return chaos_register_write(reg, id, fence, value + 1);
}

int64_t chaos_arg_int(const char *s, int64_t min, int64_t max,
                      const char *what)
{
    char *end = NULL;
    long long v;

    errno = 0;
    v = s != NULL ? strtoll(s, &end, 10) : 0;
    if (s == NULL || *s == '\0' || *end != '\0' || errno != 0 || v < min
        || v > max) {
        fprintf(stderr,
                "chaos: %s must be a number in %lld..%lld, not "
                "'%s'\n",
                what, (long long)min, (long long)max, s ? s : "(missing)");
        exit(2);
    }
    return v;
}

chaos_fencing chaos_arg_fencing(const char *s)
{
    if (s != NULL && strcmp(s, "full") == 0)
        return CHAOS_FENCE_FULL;
    if (s != NULL && strcmp(s, "writes") == 0)
        return CHAOS_FENCE_WRITES;
    if (s != NULL && strcmp(s, "off") == 0)
        return CHAOS_FENCE_OFF;
    fprintf(stderr, "chaos: --fencing takes full, writes or off, not '%s'\n",
            s ? s : "(missing)");
    exit(2);
}

void chaos_run_args_init(chaos_run_args *r)
{
    r->seconds = 35;
    /* A seed the run prints, and --seed takes back, as a non-negative
     * int64. */
    r->seed = ((uint64_t)chaos_now_us() ^ ((uint64_t)getpid() << 32))
              & INT64_MAX;
    r->keep = 0;
}

int chaos_arg_run(int argc, char **argv, int *i, chaos_run_args *r)
{
    const char *o = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;

    if (strcmp(o, "--keep") == 0) {
        r->keep = 1;
        return 1;
    }
    if (strcmp(o, "--seconds") == 0)
        r->seconds = chaos_arg_int(v, 1, 86400, o);
    else if (strcmp(o, "--seed") == 0)
        r->seed = (uint64_t)chaos_arg_int(v, 0, INT64_MAX, o);
    else
        return 0;
    (*i)++;
    return 1;
}

/* Exits with the list of known names. */
static void unknown_name(const char *name, const char *const *names,
                         size_t count, const char *what)
{
    fprintf(stderr, "chaos: %s: unknown or one too many: '%s'; known:", what,
            name);
    for (size_t i = 0; i < count; i++)
        fprintf(stderr, " %s", names[i]);
    fprintf(stderr, "\n");
    exit(2);
}

size_t chaos_arg_names(const char *list, const char *const *names,
                       size_t count, size_t *out, size_t max, const char *what)
{
    char buf[512];
    size_t n = 0;

    if (strcmp(list, "all") == 0) {
        for (; n < count && n < max; n++)
            out[n] = n;
        return n;
    }
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *p = strtok(buf, ","); p != NULL; p = strtok(NULL, ",")) {
        size_t i = 0;

        while (i < count && strcmp(names[i], p) != 0)
            i++;
        if (i == count || n == max)
            unknown_name(p, names, count, what);
        out[n++] = i;
    }
    if (n == 0)
        unknown_name(list, names, count, what);
    return n;
}
