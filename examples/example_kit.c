/*
 * example_kit.c: processes, clocks, files and messages for the examples
 * (see example_kit.h).
 */
#include "example_kit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *ex_redis_url(int argc, char **argv)
{
    const char *env;

    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--redis") == 0)
            return argv[i + 1];
    env = getenv("DLOCK_TEST_REDIS_URL");
    if (env == NULL || env[0] == '\0')
        env = getenv("REDIS_URL");
    return env != NULL && env[0] != '\0' ? env : "redis://127.0.0.1:16379/0";
}

long ex_opt_long(int argc, char **argv, const char *name, long def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return strtol(argv[i + 1], NULL, 10);
    return def;
}

int ex_opt_flag(int argc, char **argv, const char *flag)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], flag) == 0)
            return 1;
    return 0;
}

dlock_client *ex_client(const char *url)
{
    dlock_client_opts o;
    dlock_client *c = NULL;
    char errbuf[DLOCK_ERRMSG_MAX] = "";

    dlock_client_opts_init(&o);
    o.connect_timeout_ms = 2000;
    o.io_timeout_ms = 1000;
    if (dlock_client_new(url, &o, &c, errbuf, sizeof(errbuf)) != DLOCK_OK) {
        fprintf(stderr,
                "cannot connect to %s: %s\n(start it with "
                "scripts/stack up redis, or pass --redis URL)\n",
                url, errbuf);
        exit(2);
    }
    return c;
}

static int64_t clock_us(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t ex_now_us(void)
{
    return clock_us(CLOCK_MONOTONIC);
}

int64_t ex_wall_us(void)
{
    return clock_us(CLOCK_REALTIME);
}

void ex_sleep_until_wall(int64_t wall_us)
{
    struct timespec ts = {(time_t)(wall_us / 1000000),
                          (long)(wall_us % 1000000) * 1000};

    while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

void ex_work_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void ex_tmpdir(const char *name, char *dir)
{
    snprintf(dir, 256, "/tmp/dlock-%s-XXXXXX", name);
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "mkdtemp %s: %s\n", dir, strerror(errno));
        exit(2);
    }
}

void ex_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[512];

    if (d == NULL)
        return;
    for (e = readdir(d); e != NULL; e = readdir(d)) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

void ex_spawn(int n, int (*fn)(int i, void *arg), void *arg, pid_t *pids)
{
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();

        if (pid < 0) {
            perror("fork");
            exit(2);
        }
        if (pid == 0) {
            int rc = fn(i, arg);

            fflush(NULL);
            _exit(rc);
        }
        pids[i] = pid;
    }
}

int ex_wait_all(int n, const pid_t *pids)
{
    int failed = 0;

    for (int i = 0; i < n; i++) {
        int status;

        if (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status)
            || WEXITSTATUS(status) != 0)
            failed++;
    }
    return failed;
}

int ex_append_line(const char *path, const char *line)
{
    char buf[1024];
    int len = snprintf(buf, sizeof(buf), "%s\n", line);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    ssize_t w;

    if (fd < 0)
        return -1;
    w = write(fd, buf, (size_t)len);
    close(fd);
    return w == len ? 0 : -1;
}

/* Reads everything from fd into a NUL-terminated buffer. */
static char *slurp(int fd, size_t *size)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);

    while (buf != NULL) {
        ssize_t n;

        if (len + 1 >= cap) {
            char *bigger = realloc(buf, cap * 2);

            if (bigger == NULL)
                break;
            buf = bigger;
            cap *= 2;
        }
        n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            buf[len] = '\0';
            *size = len;
            return buf;
        }
        len += (size_t)n;
    }
    free(buf);
    return NULL;
}

int ex_read_lines(const char *path, int fd, char ***lines, size_t *n)
{
    size_t size = 0, count = 0, k = 0;
    int own = path != NULL;
    char *text, **out;

    *lines = NULL;
    *n = 0;
    if (own)
        fd = open(path, O_RDONLY);
    if (fd < 0)
        return own && errno == ENOENT ? 0 : -1;
    text = slurp(fd, &size);
    if (own)
        close(fd);
    if (text == NULL)
        return -1;
    for (size_t i = 0; i < size; i++)
        count += text[i] == '\n';
    /* One block: the pointers, then the text. */
    out = malloc((count + 1) * sizeof(char *) + size + 1);
    if (out == NULL) {
        free(text);
        return -1;
    }
    memcpy((char *)(out + count + 1), text, size + 1);
    free(text);
    text = (char *)(out + count + 1);
    for (char *line = text, *nl = strchr(line, '\n'); nl != NULL;
         line = nl + 1, nl = strchr(line, '\n')) {
        *nl = '\0';
        out[k++] = line;
    }
    *lines = out;
    *n = k;
    return 0;
}

int ex_fail(const char *fmt, ...)
{
    va_list ap;

    fputs("FAIL: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}
