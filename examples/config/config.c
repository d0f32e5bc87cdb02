/*
 * config: 20 threads in 4 processes find their configuration stale at the
 * same moment, and it is fetched once (dlock/once.h).
 *
 * Each process holds "version 1" of its configuration.  At one instant all
 * 20 threads decide it is stale and call dlock_once_do on the flight
 * "config": exactly one of them (the leader) fetches the new version from
 * the origin (300 ms, and a line in the origin's request log), and the
 * other 19 wait for its result, stored in Redis, and apply the same bytes.
 *
 * Checked: the origin saw exactly one request; all 20 threads got a value;
 * all values are the same, are the new version, and name the process
 * whose fetch is in the origin's log.
 *
 *   config [--redis URL] [--procs 4] [--threads 5]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "example_kit.h"

typedef struct run {
    const char *url;
    char flight[128];
    char origin_log[300];
    int threads;
    int out_fd;
    int64_t start_wall_us;
} run;

typedef struct instance {
    run *run;
    dlock_client *client;
    char config[128];  /* what this thread uses: stale at first */
    char fetched[128]; /* the origin's answer, if this thread led */
} instance;

/* The origin: slow, and it logs every request it serves. */
static int fetch_config(void *arg, const void **value, size_t *len)
{
    instance *in = arg;
    char line[128];

    snprintf(line, sizeof(line), "GET /config from pid=%ld", (long)getpid());
    ex_append_line(in->run->origin_log, line);
    ex_work_ms(300);
    snprintf(in->fetched, sizeof(in->fetched), "version 2 fetched-by=%ld",
             (long)getpid());
    *value = in->fetched;
    *len = strlen(in->fetched);
    return 0;
}

static void *refresh(void *arg)
{
    instance *in = arg;
    dlock_once_opts o;
    dlock_once *fl;
    char line[160];
    size_t len;

    dlock_once_opts_init(&o);
    o.lease_ms = 5000;
    o.wait_ms = 5000;
    o.keep_ms = 10000;
    ex_sleep_until_wall(in->run->start_wall_us);
    if (dlock_once_do(in->client, in->run->flight, &o, fetch_config, in, NULL,
                      &fl)
        == DLOCK_OK) {
        const char *v = dlock_once_value(fl, &len);

        snprintf(in->config, sizeof(in->config), "%.*s", (int)len, v);
        dlock_once_free(fl);
    } /* else: keep using the old configuration */
    snprintf(line, sizeof(line), "%s\n", in->config);
    if (write(in->run->out_fd, line, strlen(line)) < 0)
        perror("write");
    return NULL;
}

static int process(int index, void *arg)
{
    run *r = arg;
    dlock_client *c = ex_client(r->url);
    pthread_t *t = calloc((size_t)r->threads, sizeof(*t));
    instance *in = calloc((size_t)r->threads, sizeof(*in));

    (void)index;
    if (t == NULL || in == NULL)
        return 2;
    for (int i = 0; i < r->threads; i++) {
        in[i].run = r;
        in[i].client = c;
        snprintf(in[i].config, sizeof(in[i].config), "version 1");
        pthread_create(&t[i], NULL, refresh, &in[i]);
    }
    for (int i = 0; i < r->threads; i++)
        pthread_join(t[i], NULL);
    dlock_client_free(c);
    free(t);
    free(in);
    return 0;
}

static int check(const run *r, char **seen, size_t n, size_t expected)
{
    char **requests;
    size_t nreq;
    int failures = 0;

    if (ex_read_lines(r->origin_log, -1, &requests, &nreq) != 0)
        return ex_fail("cannot read the origin's log");
    printf("origin requests: %zu; threads that answered: %zu\n", nreq, n);
    if (nreq != 1)
        failures += ex_fail("exactly one refresh, the origin saw %zu", nreq);
    if (n != expected)
        failures += ex_fail("%zu threads answer, got %zu", expected, n);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(seen[i], seen[0]) != 0
            || strncmp(seen[i], "version 2", 9) != 0) {
            failures += ex_fail("every thread has the new version: \"%s\" "
                                "and \"%s\"",
                                seen[0], seen[i]);
            break;
        }
    }
    if (n > 0 && nreq == 1
        && strstr(requests[0], strstr(seen[0], "=") + 1) == NULL)
        failures += ex_fail("the value \"%s\" came from the logged fetch "
                            "\"%s\"",
                            seen[0], requests[0]);
    if (n > 0)
        printf("all see: %s\n", seen[0]);
    free(requests);
    return failures;
}

int main(int argc, char **argv)
{
    run r;
    char dir[256], **seen;
    size_t n;
    int procs = (int)ex_opt_long(argc, argv, "--procs", 4);
    int fds[2], failures;
    pid_t *pids;

    memset(&r, 0, sizeof(r));
    r.url = ex_redis_url(argc, argv);
    r.threads = (int)ex_opt_long(argc, argv, "--threads", 5);
    snprintf(r.flight, sizeof(r.flight), "example:config:%ld", (long)getpid());
    ex_tmpdir("config", dir);
    snprintf(r.origin_log, sizeof(r.origin_log), "%s/origin.log", dir);
    pids = calloc((size_t)procs, sizeof(*pids));
    if (pids == NULL || pipe(fds) != 0)
        return 2;
    r.out_fd = fds[1];
    r.start_wall_us = ex_wall_us() + 500000;
    printf("%d processes x %d threads see stale configuration at once\n",
           procs, r.threads);
    ex_spawn(procs, process, &r, pids);
    close(fds[1]);
    if (ex_read_lines(NULL, fds[0], &seen, &n) != 0)
        return 2;
    failures = ex_wait_all(procs, pids);
    if (failures > 0)
        ex_fail("%d processes failed", failures);
    failures += check(&r, seen, n, (size_t)procs * (size_t)r.threads);
    free(seen);
    free(pids);
    ex_rmdir(dir);
    puts(failures == 0 ? "PASS: one refresh, everyone has its value" : "FAIL");
    return failures == 0 ? 0 : 1;
}
