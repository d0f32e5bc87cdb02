/*
 * testkit_env.c: the environment contract, unique key names, clocks and
 * bounded waits (see testkit.h).
 *
 * The test runner (scripts/test, CTest's ENVIRONMENT) sets the variables;
 * the defaults are scripts/stack's fixed ports, so that a test binary run
 * by hand against `scripts/stack up` behaves the same.  The source and
 * build directories fall back to the paths CMake compiled in.
 */
#include "testkit.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef TESTKIT_SOURCE_DIR
#define TESTKIT_SOURCE_DIR "."
#endif
#ifndef TESTKIT_BUILD_DIR
#define TESTKIT_BUILD_DIR "."
#endif

static const char *env_or(const char *name, const char *fallback)
{
    const char *value = getenv(name);

    return value != NULL && value[0] != '\0' ? value : fallback;
}

const char *testkit_source_dir(void)
{
    return env_or("DLOCK_SOURCE_DIR", TESTKIT_SOURCE_DIR);
}

const char *testkit_build_dir(void)
{
    return env_or("DLOCK_BUILD_DIR", TESTKIT_BUILD_DIR);
}

const char *testkit_redis_url(void)
{
    return env_or("DLOCK_TEST_REDIS_URL", "redis://127.0.0.1:16379/0");
}

const char *testkit_redis_unix_url(void)
{
    /* Built once per process; the source dir does not change under us. */
    static char fallback[600];

    if (fallback[0] == '\0')
        snprintf(fallback, sizeof(fallback),
                 "unix://%s/var/stack/redis/redis.sock", testkit_source_dir());
    return env_or("DLOCK_TEST_REDIS_UNIX_URL", fallback);
}

const char *testkit_database_url(void)
{
    return env_or("DLOCK_TEST_DATABASE_URL",
                  "postgresql://dlock:dlock@127.0.0.1:15432/dlock");
}

const char *testkit_amqp_url(void)
{
    return env_or("DLOCK_TEST_AMQP_URL",
                  "amqp://dlock:dlock@127.0.0.1:15673/%2f");
}

/* Runs scripts/stack up redis; returns its exit status (-1 if it could
 * not be run). */
static int stack_up_redis(void)
{
    char script[600];
    pid_t pid;
    int status;

    snprintf(script, sizeof(script), "%s/scripts/stack", testkit_source_dir());
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execl(script, script, "up", "redis", (char *)NULL);
        fprintf(stderr, "testkit: cannot run %s: %s\n", script,
                strerror(errno));
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int shared_redis_answers(void *arg)
{
    (void)arg;
    return testkit_redis_ping(testkit_redis_url());
}

const char *testkit_shared_redis(void)
{
    const char *url = testkit_redis_url();
    int rc;

    if (testkit_redis_ping(url))
        return url;
    fprintf(stderr,
            "testkit: %s does not answer; running scripts/stack up "
            "redis\n",
            url);
    rc = stack_up_redis();
    if (rc != 0)
        fprintf(stderr, "testkit: scripts/stack up redis exited %d\n", rc);
    if (testkit_wait_until(shared_redis_answers, NULL, 20000))
        return url;
    fprintf(stderr,
            "testkit: no Redis at %s after scripts/stack up and "
            "20 s of waiting\n",
            url);
    return NULL;
}

char *testkit_key(char buf[TESTKIT_KEY_MAX], const char *name)
{
    static atomic_ulong counter;
    unsigned long n = atomic_fetch_add(&counter, 1) + 1;

    snprintf(buf, TESTKIT_KEY_MAX, "t:%s:%ld:%lu", name, (long)getpid(), n);
    return buf;
}

int64_t testkit_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t testkit_now_ms(void)
{
    return testkit_now_us() / 1000;
}

int64_t testkit_wall_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_us(int64_t us)
{
    struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int testkit_wait_until(int (*cond)(void *arg), void *arg, int64_t timeout_ms)
{
    int64_t deadline = testkit_now_us() + timeout_ms * 1000;
    int64_t step = 1000;

    for (;;) {
        int64_t now;

        if (cond(arg))
            return 1;
        now = testkit_now_us();
        if (now >= deadline)
            return cond(arg) ? 1 : 0;
        sleep_us(step < deadline - now ? step : deadline - now);
        if (step < 10000)
            step += 1000;
    }
}
