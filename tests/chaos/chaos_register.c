/*
 * chaos_register.c: the resource the lock protects, kept outside Redis.
 *
 * The register is one integer that the clients increment under the lock.
 * It is stored as an append-only log, register.log: each access (read or
 * write, accepted or refused) appends one line that ends with the state
 * after it, so the last line is the current state and the whole file is
 * the history the analysis replays:
 *
 *   <t_us> <seq> <id> <fence> <r|w|init> <ok 1|0> <arg> <value> <floor>
 *   <last_write> <writes>
 *
 * (arg: the value a write asked for; value, floor, last_write, writes: the
 * state after the access, see chaos_register_state.)  Appending the state
 * with the same write(2) that logs the access is what makes an access
 * atomic against SIGKILL: a client killed in the middle either wrote the
 * line (the access happened) or did not (it did not); there is no state
 * file that could disagree with the log.
 *
 * Each access runs under flock(2) on the log (its own lock, not the one
 * under test), and takes its timestamp inside it, so file order, time
 * order and the order of the accesses are the same.
 *
 * Fencing (chaos_fencing): with FULL the register remembers the highest
 * fence it has seen in an accepted access (the floor) and refuses any read
 * or write below it, and a write also needs a fence above the last
 * accepted write's.  Reads are fenced too because the clients
 * read-modify-write: if only writes were checked, a holder paused between
 * its read and its write could, on waking, write just before the new
 * holder writes (its fence is still above the last write's), and the new
 * holder's increment, based on the same read, would then overwrite it: an
 * increment lost although every write carried a growing fence.
 */
#include "chaos.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct chaos_register {
    int fd;
    chaos_fencing fencing;
};

static void register_path(const char *dir, char *path, size_t size)
{
    snprintf(path, size, "%s/register.log", dir);
}

/* Parses the state out of one register line. */
static int parse_state(const char *line, chaos_register_state *st)
{
    long long t;
    int id, ok;
    char op[8];
    uint64_t fence, arg;

    return sscanf(line,
                  "%lld %" SCNu64 " %d %" SCNu64 " %7s %d %" SCNu64 " %" SCNu64
                  " %" SCNu64 " %" SCNu64 " %" SCNu64,
                  &t, &st->seq, &id, &fence, op, &ok, &arg, &st->value,
                  &st->floor, &st->last_write, &st->writes)
                   == 11
               ? 0
               : -1;
}

/* Reads the state from the last complete line of the log open on fd. */
static int read_last_state(int fd, chaos_register_state *st)
{
    char buf[2 * CHAOS_LINE_MAX + 1];
    struct stat sb;
    off_t from;
    ssize_t n;
    char *end, *start;

    if (fstat(fd, &sb) != 0 || sb.st_size == 0)
        return -1;
    from = sb.st_size > (off_t)sizeof(buf) - 1
               ? sb.st_size - (off_t)sizeof(buf) + 1
               : 0;
    n = pread(fd, buf, sizeof(buf) - 1, from);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    end = strrchr(buf, '\n');
    if (end == NULL)
        return -1;
    *end = '\0';
    start = strrchr(buf, '\n');
    start = start != NULL ? start + 1 : buf;
    return parse_state(start, st);
}

static int append_line(int fd, int64_t t, const chaos_register_state *st,
                       int id, uint64_t fence, const char *op, int ok,
                       uint64_t arg)
{
    char line[CHAOS_LINE_MAX];
    int n = snprintf(line, sizeof(line),
                     "%lld %" PRIu64 " %d %" PRIu64 " %s %d %" PRIu64
                     " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
                     (long long)t, st->seq, id, fence, op, ok, arg, st->value,
                     st->floor, st->last_write, st->writes);

    return write(fd, line, (size_t)n) == n ? 0 : -1;
}

int chaos_register_create(const char *dir)
{
    char path[1024];
    chaos_register_state st = {0};
    int fd, rc;

    register_path(dir, path, sizeof(path));
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "chaos: create %s: %s\n", path, strerror(errno));
        return -1;
    }
    rc = append_line(fd, chaos_now_us(), &st, -1, 0, "init", 1, 0);
    close(fd);
    return rc;
}

chaos_register *chaos_register_open(const char *dir, chaos_fencing fencing)
{
    char path[1024];
    chaos_register *reg = calloc(1, sizeof(*reg));

    if (reg == NULL)
        return NULL;
    register_path(dir, path, sizeof(path));
    reg->fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC);
    reg->fencing = fencing;
    if (reg->fd < 0) {
        fprintf(stderr, "chaos: open %s: %s\n", path, strerror(errno));
        free(reg);
        return NULL;
    }
    return reg;
}

void chaos_register_close(chaos_register *reg)
{
    if (reg == NULL)
        return;
    close(reg->fd);
    free(reg);
}

/* Whether the register takes an access with fence (write: a write). */
static int fence_admits(chaos_fencing fencing, const chaos_register_state *st,
                        uint64_t fence, int write)
{
    switch (fencing) {
    case CHAOS_FENCE_FULL:
        return fence >= st->floor && (!write || fence > st->last_write);
    case CHAOS_FENCE_WRITES: return !write || fence > st->last_write;
    case CHAOS_FENCE_OFF: return 1;
    }
    return 0;
}

/* One access under the flock: decide, apply, log.  Returns 1, 0 or -1. */
static int access_register(chaos_register *reg, int id, uint64_t fence,
                           int write, uint64_t arg, uint64_t *value)
{
    chaos_register_state st;
    int ok, rc = -1;

    while (flock(reg->fd, LOCK_EX) != 0)
        if (errno != EINTR)
            return -1;
    if (read_last_state(reg->fd, &st) != 0)
        goto out;
    ok = fence_admits(reg->fencing, &st, fence, write);
    st.seq++;
    if (ok && fence > st.floor)
        st.floor = fence;
    if (ok && write) {
        st.value = arg;
        st.last_write = fence;
        st.writes++;
    }
    if (append_line(reg->fd, chaos_now_us(), &st, id, fence, write ? "w" : "r",
                    ok, arg)
        != 0)
        goto out;
    if (value != NULL)
        *value = st.value;
    rc = ok;
out:
    flock(reg->fd, LOCK_UN);
    if (rc < 0)
        fprintf(stderr, "chaos: register access by client %d failed: %s\n", id,
                strerror(errno));
    return rc;
}

int chaos_register_read(chaos_register *reg, int id, uint64_t fence,
                        uint64_t *value)
{
    return access_register(reg, id, fence, 0, 0, value);
}

int chaos_register_write(chaos_register *reg, int id, uint64_t fence,
                         uint64_t value)
{
    return access_register(reg, id, fence, 1, value, NULL);
}

int chaos_register_state_read(const char *dir, chaos_register_state *st)
{
    char path[1024];
    int fd, rc;

    register_path(dir, path, sizeof(path));
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    rc = read_last_state(fd, st);
    close(fd);
    return rc;
}
