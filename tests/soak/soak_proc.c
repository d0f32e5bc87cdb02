/*
 * soak_proc.c: VmRSS and the descriptor count of a process, from /proc
 * (see soak_proc.h).
 *
 * The descriptor count is the number of entries of /proc/PID/fd other
 * than "." and "..": the kernel lists exactly the open descriptors there.
 * Our own opendir() of that folder opens a descriptor in this process,
 * not in the one being counted, so the count is not disturbed.
 */
#include "soak_proc.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long read_rss_kb(pid_t pid)
{
    char path[64], line[256];
    long kb = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb;
}

/* Calls each(name, arg) for every open descriptor of pid ("0", "1", ...).
 * Returns how many there were, or -1 when /proc/PID/fd is unreadable. */
static int for_each_fd(pid_t pid, void (*each)(const char *, void *),
                       void *arg)
{
    char path[64];
    struct dirent *e;
    int n = 0;
    DIR *d;

    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    d = opendir(path);
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.') {
            n++;
            if (each != NULL)
                each(e->d_name, arg);
        }
    }
    closedir(d);
    return n;
}

static int count_fds(pid_t pid)
{
    return for_each_fd(pid, NULL, NULL);
}

int soak_proc_read(pid_t pid, soak_proc_sample *out)
{
    out->rss_kb = read_rss_kb(pid);
    out->fds = count_fds(pid);
    return out->rss_kb >= 0 && out->fds >= 0 ? 0 : -1;
}

static void sleep_ms(int ms)
{
    const struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

int soak_proc_settle(pid_t pid, int stable_ms, int timeout_ms,
                     soak_proc_sample *out)
{
    int waited = 0, still = 0, last;

    if (soak_proc_read(pid, out) != 0)
        return -1;
    last = out->fds;
    while (still < stable_ms) {
        if (waited >= timeout_ms)
            return 1;
        sleep_ms(100);
        waited += 100;
        if (soak_proc_read(pid, out) != 0)
            return -1;
        still = out->fds == last ? still + 100 : 0;
        last = out->fds;
    }
    return 0;
}

/* "0100007F:1F90" (or the 32-digit IPv6 form) as "127.0.0.1:8080"; IPv6
 * is shown as its hex digits, which is enough to compare two listings. */
static void format_addr(const char *hex, char *out, size_t len)
{
    unsigned a, port;

    if (strlen(hex) == 13 && sscanf(hex, "%8x:%4x", &a, &port) == 2) {
        snprintf(out, len, "%u.%u.%u.%u:%u", a & 0xff, (a >> 8) & 0xff,
                 (a >> 16) & 0xff, a >> 24, port);
        return;
    }
    snprintf(out, len, "[%s]", hex);
}

/* Finds socket inode in /proc/PID/net/FILE and describes it into out;
 * 1 when found. */
static int describe_tcp(pid_t pid, const char *file, unsigned long inode,
                        char *out, size_t len)
{
    char path[64], line[512], local[64], remote[64], l[48], r[48];
    unsigned long ino;
    unsigned st;
    int found = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/net/%s", (int)pid, file);
    f = fopen(path, "r");
    if (f == NULL)
        return 0;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, " %*d: %47s %47s %x %*s %*s %*s %*s %*s %lu", l, r,
                   &st, &ino)
                == 4
            && ino == inode) {
            format_addr(l, local, sizeof(local));
            format_addr(r, remote, sizeof(remote));
            snprintf(out, len, "%s %s -> %s state %02X", file, local, remote,
                     st);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

typedef struct listing {
    pid_t pid;
    FILE *out;
} listing;

static void list_one(const char *fd, void *arg)
{
    const listing *l = arg;
    char fdpath[320], link[4096], target[4200];
    unsigned long inode;
    ssize_t n;

    snprintf(fdpath, sizeof(fdpath), "/proc/%d/fd/%s", (int)l->pid, fd);
    n = readlink(fdpath, link, sizeof(link) - 1);
    if (n < 0)
        return; /* closed since the folder was read */
    link[n] = '\0';
    snprintf(target, sizeof(target), "%s", link);
    if (sscanf(link, "socket:[%lu]", &inode) == 1
        && !describe_tcp(l->pid, "tcp", inode, target, sizeof(target)))
        describe_tcp(l->pid, "tcp6", inode, target, sizeof(target));
    fprintf(l->out, "%s %s\n", fd, target);
}

int soak_proc_list_fds(pid_t pid, FILE *out)
{
    listing l = {pid, out};

    return for_each_fd(pid, list_one, &l) < 0 ? -1 : 0;
}
