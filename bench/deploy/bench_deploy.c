/*
 * bench_deploy.c: acquire+release pairs per second and their median for
 * one server, Sentinel, Cluster, and Redlock over 3 and 5 masters, each
 * beside its redis-benchmark limit (issue 14's benchmark).
 *
 *   bench_deploy [--pairs N]
 *
 * It starts scripts/stack's groups (redis, sentinel, cluster, redlock;
 * DLOCK_STACK_PORT_OFFSET applies) and measures, on one thread, N pairs
 * on each, through the library's deployment modules (src/lib/deploy/deploy.c,
 * redlock.c): the client itself does not serve these URLs yet, so this
 * measures the routing and the Redlock rounds as the client will use
 * them.  A pair is SET key token NX PX 10000 then a compare-and-delete
 * script (one server, Sentinel, Cluster: two round trips), or a Redlock
 * acquire round and release round on every master at once.
 *
 * The limit beside each: redis-benchmark -c 1 PING on each server, the
 * slowest server's rate halved (a pair is two round trips; for Redlock the
 * slowest of the N parallel round trips bounds each round).  A line per
 * deployment is printed as JSON, then a table.
 *
 * Then the cost of waiting for replicas: acquire+release pairs through
 * the public client on the Sentinel URL, without and with wait_replicas
 * 1 (WAIT after each grant).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"

#include "bench_clock.h"
#include "bench_redis.h"
#include "bench_samples.h"
#include "base/clock.h"
#include "deploy/deploy.h"
#include "deploy/redlock.h"
#include "transport/url.h"

typedef struct result {
    const char *name;
    double pairs_per_s;
    double p50_us;
    double limit_per_s;
} result;

/* The URL scripts/stack env prints for variable var after starting
 * group; NULL on failure. */
static char *group_url(const char *group, const char *var)
{
    static char url[8][1024];
    static int next;
    char cmd[512], line[1200], *out = url[next++ % 8];
    const char *src = getenv("DLOCK_SOURCE_DIR");
    FILE *p;

    snprintf(cmd, sizeof(cmd),
             "'%s/scripts/stack' up %s >&2 && "
             "'%s/scripts/stack' env %s",
             src ? src : ".", group, src ? src : ".", group);
    p = popen(cmd, "r");
    out[0] = '\0';
    while (p != NULL && fgets(line, sizeof(line), p) != NULL) {
        size_t j = 0, n = strlen(var);

        if (strncmp(line, "export ", 7) != 0 || strncmp(line + 7, var, n) != 0
            || line[7 + n] != '=')
            continue;
        for (const char *c = line + 8 + n; *c && *c != '\n'; c++)
            if (*c != '\\' && j + 1 < sizeof(url[0]))
                out[j++] = *c;
        out[j] = '\0';
    }
    if (p == NULL || pclose(p) != 0 || out[0] == '\0')
        return NULL;
    return out;
}

/* redis-benchmark's PING rate on one connection to port. */
static double ping_rate(int port)
{
    char cmd[200], line[256];
    double rate = 0;
    FILE *p;

    snprintf(cmd, sizeof(cmd),
             "redis-benchmark -h 127.0.0.1 -p %d -c 1 "
             "-n 5000 -q -t ping_mbulk 2>/dev/null",
             port);
    p = popen(cmd, "r");
    /* "PING_MBULK: 12345.68 requests per second, p50=..."; the progress
     * lines carry "rps=" instead. */
    while (p != NULL && fgets(line, sizeof(line), p) != NULL) {
        const char *found = strstr(line, "requests per second");
        const char *colon = found ? strrchr(line, ':') : NULL;

        if (colon != NULL && colon < found)
            rate = atof(colon + 1);
    }
    if (p != NULL)
        pclose(p);
    return rate;
}

/* Half the slowest rate of the nodes of d. */
static double limit_of(const dlock__deployment *d, int nodes)
{
    double slowest = 0;

    for (int i = 0; i < nodes; i++) {
        double r = ping_rate(d->nodes[i].port);

        if (i == 0 || r < slowest)
            slowest = r;
    }
    return slowest / 2;
}

static void report(result *r, bench_samples *s, int64_t elapsed_ns, int pairs)
{
    bench_samples_sort(s);
    r->pairs_per_s = pairs / (elapsed_ns / 1e9);
    r->p50_us = bench_samples_quantile_us(s, 0.5);
    printf("{\"kind\":\"figure\",\"bench\":\"deploy\",\"deployment\":\"%s\","
           "\"pairs_per_s\":%.0f,\"p50_us\":%.0f,\"limit_pairs_per_s\":"
           "%.0f}\n",
           r->name, r->pairs_per_s, r->p50_us, r->limit_per_s);
    fflush(stdout);
}

/* Runs one command for key on the deployment under test. */
typedef dlock_err (*call_fn)(void *target, const char *key, int argc,
                             const char **argv, redisReply **r, dlock__msg *m);

static dlock_err call_routed(void *target, const char *key, int argc,
                             const char **argv, redisReply **r, dlock__msg *m)
{
    return dlock__deploy_call(target, key, strlen(key), argc, argv, NULL, 1,
                              dlock__deadline_after_ms(5000), r, m);
}

static dlock_err call_single(void *target, const char *key, int argc,
                             const char **argv, redisReply **r, dlock__msg *m)
{
    (void)key;
    return dlock__nodeset_call(target, 0, argc, argv, NULL,
                               dlock__deadline_after_ms(5000), r, m);
}

/* One pair: SET NX PX, then compare-and-delete; 0 when both did it. */
static int pair(call_fn call, void *target, const char *key)
{
    const char *set[] = {"SET", key, "tok", "NX", "PX", "10000"};
    const char *del[] = {"EVAL", bench_cad_script, "1", key, "tok"};
    redisReply *r;
    dlock__msg m;
    int ok;

    if (call(target, key, 6, set, &r, &m) != DLOCK_OK)
        return -1;
    ok = r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    if (call(target, key, 5, del, &r, &m) != DLOCK_OK)
        return -1;
    ok = ok && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return ok ? 0 : -1;
}

static int redlock_pair(dlock__redlock *rl, const char *key)
{
    int64_t validity;
    uint64_t fence;
    dlock__msg m;

    if (dlock__redlock_acquire(rl, key, NULL, "tok", 10000, 50, &validity,
                               &fence, NULL, &m)
        != DLOCK_OK)
        return -1;
    return dlock__redlock_release(rl, key, "tok", NULL, 50, &m) == DLOCK_OK
               ? 0
               : -1;
}

typedef enum kind { SINGLE, ROUTED, REDLOCK } kind;

/* Runs pairs pairs on one deployment and fills r. */
static int run(result *r, const char *url, int nodes_for_limit, kind k,
               int pairs)
{
    static const dlock__conn_cfg cfg;
    dlock__deployment d;
    dlock__deploy *dp = NULL;
    dlock__nodeset ns;
    dlock__redlock rl;
    bench_samples s;
    dlock__msg m;
    int64_t start;
    int failed = 0, index;

    if (url == NULL || dlock__url_parse_deployment(url, &d, &m) != DLOCK_OK)
        return -1;
    if (k == REDLOCK)
        d.nnodes = nodes_for_limit;
    r->limit_per_s = limit_of(&d, nodes_for_limit);
    if (bench_samples_init(&s, (size_t)pairs) != 0)
        return -1;
    if (k == SINGLE) {
        dlock__nodeset_init(&ns, &cfg, 1, &m);
        dlock__nodeset_add(&ns, &d.nodes[0], d.nodes[0].host, d.nodes[0].port,
                           &index, &m);
    } else if (k == ROUTED
               && dlock__deploy_new(&d, &cfg, 1,
                                    dlock__deadline_after_ms(10000), &dp, &m)
                      != DLOCK_OK) {
        fprintf(stderr, "bench_deploy: %s: %s\n", r->name, m.text);
        return -1;
    } else if (k == REDLOCK) {
        dlock__redlock_init(&rl, &d, &cfg, 1, &m);
    }
    start = bench_clock_ns();
    for (int i = 0; i < pairs; i++) {
        char key[64];
        int64_t t0 = bench_clock_ns();

        snprintf(key, sizeof(key), "b:{%d}:lock", i % 1000);
        failed += (k == SINGLE   ? pair(call_single, &ns, key)
                   : k == ROUTED ? pair(call_routed, dp, key)
                                 : redlock_pair(&rl, key))
                  != 0;
        bench_samples_add(&s, bench_clock_ns() - t0);
    }
    report(r, &s, bench_clock_ns() - start, pairs);
    if (failed)
        fprintf(stderr, "bench_deploy: %s: %d pairs failed\n", r->name,
                failed);
    bench_samples_free(&s);
    if (k == SINGLE)
        dlock__nodeset_destroy(&ns);
    if (k == REDLOCK)
        dlock__redlock_destroy(&rl);
    dlock__deploy_free(dp);
    dlock__deployment_clear(&d);
    return 0;
}

/* Pairs through the public client on url: dlock_acquire (whose script
 * also advances the fence) and dlock_release, each grant acknowledged by
 * wait_replicas replicas (WAIT) when that is not 0: what the option
 * costs.  The limit is the one of the deployment measured before. */
static int run_client(result *r, const char *url, int wait_replicas,
                      double limit, int pairs)
{
    dlock_client_opts o;
    dlock_acquire_opts a;
    dlock_client *c = NULL;
    bench_samples s;
    char err[512];
    int64_t start;
    int failed = 0;

    dlock_client_opts_init(&o);
    o.wait_replicas = wait_replicas;
    dlock_acquire_opts_init(&a);
    a.ttl_ms = 10000;
    r->limit_per_s = limit;
    if (url == NULL || bench_samples_init(&s, (size_t)pairs) != 0)
        return -1;
    if (dlock_client_new(url, &o, &c, err, sizeof(err)) != DLOCK_OK) {
        fprintf(stderr, "bench_deploy: %s: %s\n", r->name, err);
        bench_samples_free(&s);
        return -1;
    }
    start = bench_clock_ns();
    for (int i = 0; i < pairs; i++) {
        char key[64];
        int64_t t0 = bench_clock_ns();
        dlock_lock *l = NULL;

        snprintf(key, sizeof(key), "b:client:%d", i % 1000);
        failed += dlock_acquire(c, key, &a, &l) != DLOCK_OK
                  || dlock_release(l) != DLOCK_OK;
        bench_samples_add(&s, bench_clock_ns() - t0);
    }
    report(r, &s, bench_clock_ns() - start, pairs);
    if (failed)
        fprintf(stderr, "bench_deploy: %s: %d pairs failed\n", r->name,
                failed);
    bench_samples_free(&s);
    dlock_client_free(c);
    return 0;
}

int main(int argc, char **argv)
{
    int pairs = 2000;
    result rs[] = {
        {.name = "single"},
        {.name = "sentinel"},
        {.name = "cluster"},
        {.name = "redlock-3"},
        {.name = "redlock-5"},
        {.name = "sentinel-client"},
        {.name = "sentinel-client-wait-1"},
    };

    if (argc == 3 && strcmp(argv[1], "--pairs") == 0)
        pairs = atoi(argv[2]);
    if (pairs < 1) {
        fprintf(stderr, "usage: bench_deploy [--pairs N]\n");
        return 2;
    }
    if (run(&rs[0], group_url("redis", "REDIS_URL"), 1, SINGLE, pairs)
        || run(&rs[1], group_url("sentinel", "SENTINEL_URL"), 3, ROUTED, pairs)
        || run(&rs[2], group_url("cluster", "CLUSTER_URL"), 3, ROUTED, pairs)
        || run(&rs[3], group_url("redlock", "REDLOCK_URL"), 3, REDLOCK, pairs)
        || run(&rs[4], group_url("redlock", "REDLOCK_URL"), 5, REDLOCK, pairs)
        || run_client(&rs[5], group_url("sentinel", "SENTINEL_URL"), 0,
                      rs[1].limit_per_s, pairs)
        || run_client(&rs[6], group_url("sentinel", "SENTINEL_URL"), 1,
                      rs[1].limit_per_s, pairs))
        return 1;
    printf("\n| deployment | pairs/s | p50 (us) | limit (pairs/s) |\n"
           "| --- | ---: | ---: | ---: |\n");
    for (size_t i = 0; i < sizeof(rs) / sizeof(rs[0]); i++)
        printf("| %s | %.0f | %.0f | %.0f |\n", rs[i].name, rs[i].pairs_per_s,
               rs[i].p50_us, rs[i].limit_per_s);
    return 0;
}
