/*
 * testkit_fault.c: the C side of the fault kit (see testkit.h): wall-clock
 * offsets for the LD_PRELOAD shim (dlock_test_wallclock.c) and a pausable
 * proxy process (dlock_test_proxy.c) between a client and its server.
 *
 * The proxy runs as its own program, so shell tests and C tests drive the
 * same code: this file forks and execs it, waits for its port file (which
 * it writes once it listens), and talks to its control socket through
 * "dlock-test-proxy ctl", the same client the shell helpers use.
 * testkit_proxied is the setup most fault tests share (a private
 * redis-server and a proxy in front of it), made and freed in one call.
 *
 * Invariants: a started proxy is our child with PR_SET_PDEATHSIG, so it
 * exits with the test; every wait is bounded; it is signalled only by pid.
 */
#include "testkit.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROXY_START_TIMEOUT_MS 10000
#define PROXY_STOP_TIMEOUT_MS 5000

const char *testkit_wallclock_shim(void)
{
    static char path[1024];

    snprintf(path, sizeof(path), "%s/tests/support/libdlock_test_wallclock.so",
             testkit_build_dir());
    return path;
}

int testkit_wallclock_set(const char *file, int64_t offset_ms)
{
    int fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    int64_t *map;

    if (fd < 0 || ftruncate(fd, sizeof(int64_t)) != 0) {
        fprintf(stderr, "testkit: wall-clock file %s: %s\n", file,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    map = mmap(NULL, sizeof(int64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
               0);
    close(fd);
    if (map == MAP_FAILED) {
        fprintf(stderr, "testkit: mmap %s: %s\n", file, strerror(errno));
        return -1;
    }
    __atomic_store_n(map, offset_ms, __ATOMIC_RELEASE);
    munmap(map, sizeof(int64_t));
    return 0;
}

static const char *proxy_binary(void)
{
    static char path[1024];

    snprintf(path, sizeof(path), "%s/tests/support/dlock-test-proxy",
             testkit_build_dir());
    return path;
}

typedef struct proxy_wait {
    testkit_proxy *p;
    const char *port_file;
    int exited;
} proxy_wait;

static int proxy_ready_or_exited(void *arg)
{
    proxy_wait *w = arg;
    FILE *f;
    int status;

    if (waitpid(w->p->pid, &status, WNOHANG) == w->p->pid) {
        w->p->pid = 0;
        w->exited = 1;
        return 1;
    }
    f = fopen(w->port_file, "r");
    if (f == NULL)
        return 0;
    if (fscanf(f, "%d", &w->p->port) != 1)
        w->p->port = 0;
    fclose(f);
    return w->p->port > 0;
}

static pid_t spawn_proxy(const testkit_proxy *p, const char *target,
                         const char *port_file)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    char log[700];
    int fd;

    if (pid != 0)
        return pid;
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
        _exit(126);
    snprintf(log, sizeof(log), "%s/proxy.log", p->dir);
    fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    execl(proxy_binary(), "dlock-test-proxy", "serve", "--listen", "0",
          "--target", target, "--control", p->control, "--port-file",
          port_file, (char *)NULL);
    _exit(127);
}

testkit_proxy *testkit_proxy_start(const char *name, const char *target)
{
    testkit_proxy *p = calloc(1, sizeof(*p));
    char port_file[700];
    proxy_wait w = {p, port_file, 0};

    if (p == NULL || testkit_scratch_dir(p->dir, sizeof(p->dir), name) == NULL)
        goto fail;
    snprintf(p->control, sizeof(p->control), "%s/proxy.ctl", p->dir);
    snprintf(port_file, sizeof(port_file), "%s/proxy.port", p->dir);
    unlink(port_file);
    p->pid = spawn_proxy(p, target, port_file);
    if (p->pid < 0) {
        p->pid = 0;
        fprintf(stderr, "testkit: fork for the proxy: %s\n", strerror(errno));
        goto fail;
    }
    if (!testkit_wait_until(proxy_ready_or_exited, &w, PROXY_START_TIMEOUT_MS)
        || w.exited) {
        fprintf(stderr, "testkit: proxy %s to %s %s (see %s/proxy.log)\n",
                name, target,
                w.exited ? "exited at start" : "not ready in 10 s", p->dir);
        goto fail;
    }
    snprintf(p->url, sizeof(p->url), "redis://127.0.0.1:%d/0", p->port);
    return p;
fail:
    testkit_proxy_free(p);
    return NULL;
}

int testkit_proxy_ctl(testkit_proxy *p, const char *command)
{
    char buf[1024];
    const char *argv[6] = {proxy_binary(), "ctl", p->control, buf, NULL, NULL};
    char *space;
    pid_t pid;
    int status;

    snprintf(buf, sizeof(buf), "%s", command);
    space = strchr(buf, ' ');
    if (space != NULL) {
        *space = '\0';
        argv[4] = space + 1;
    }
    pid = fork();
    if (pid == 0) {
        /* The answer ("ok ...") says nothing the exit status does not. */
        int null = open("/dev/null", O_WRONLY);

        if (null >= 0)
            dup2(null, 1);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)
        || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "testkit: proxy command \"%s\" failed\n", command);
        return -1;
    }
    return 0;
}

static int proxy_gone(void *arg)
{
    testkit_proxy *p = arg;
    int status;

    return waitpid(p->pid, &status, WNOHANG) != 0;
}

void testkit_proxy_free(testkit_proxy *p)
{
    if (p == NULL)
        return;
    if (p->pid > 0) {
        kill(p->pid, SIGTERM);
        if (!testkit_wait_until(proxy_gone, p, PROXY_STOP_TIMEOUT_MS)) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, NULL, 0);
        }
    }
    if (p->dir[0] != '\0')
        testkit_scratch_remove(p->dir);
    free(p);
}

testkit_proxy *testkit_proxy_for(const char *name, int port)
{
    char target[32];

    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    return testkit_proxy_start(name, target);
}

testkit_proxied *testkit_proxied_start(const testkit_redis_opts *opts)
{
    testkit_proxied *pr = calloc(1, sizeof(*pr));
    char name[128];

    if (pr == NULL) {
        fprintf(stderr, "testkit: no memory for server %s and its proxy\n",
                opts->name);
        return NULL;
    }
    pr->server = testkit_redis_start(opts);
    if (pr->server == NULL)
        goto fail;
    snprintf(name, sizeof(name), "%s-proxy", opts->name);
    pr->proxy = testkit_proxy_for(name, pr->server->port);
    if (pr->proxy == NULL)
        goto fail;
    pr->url = pr->proxy->url;
    return pr;
fail:
    testkit_proxied_free(pr);
    return NULL;
}

void testkit_proxied_free(testkit_proxied *pr)
{
    if (pr == NULL)
        return;
    testkit_proxy_free(pr->proxy);
    testkit_redis_free(pr->server);
    free(pr);
}
