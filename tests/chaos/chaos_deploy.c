/*
 * chaos_deploy.c: the deployments a phase locks on, and the faults that
 * only a multi-server deployment has (chaos_nemesis.h).
 *
 * Every server is a private redis-server started through testkit (its own
 * folder under var/test/, a free loopback port, stopped by its pid), and
 * every proxy a private dlock-test-proxy, so a phase can kill, pause and
 * slow what it owns and nothing else.
 *
 * Whether the client serves a deployment is asked, never assumed: a
 * Redlock or Cluster phase first has chaos_client try the URL kind against
 * a closed port (the library refuses a kind it does not serve with
 * DLOCK_INVALID before it connects anywhere), and then runs `dlock run`
 * once on the real deployment before it lets `dlock run` clients in.  A
 * phase whose kind is not served is reported as not run, with the
 * library's own reason, and lights up in a build that serves it.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chaos_nemesis.h"

#define REDLOCK_MASTERS 5
#define CLUSTER_NODES 6
#define CLUSTER_OK_TIMEOUT_MS 30000
#define CLUSTER_PROMOTE_TIMEOUT_MS 15000
#define PROBE_TIMEOUT_MS 15000

/* Starts one server named "chaos-<phase><suffix>". */
static testkit_redis *start_node(const chaos_nemesis *n, const char *suffix,
                                 int wallclock, const char *extra)
{
    char dir[sizeof(n->dir)], name[64];
    testkit_redis_opts o = {0};

    snprintf(dir, sizeof(dir), "%s", n->dir);
    snprintf(name, sizeof(name), "chaos-%.40s%s", basename(dir), suffix);
    o.name = name;
    o.appendonly = n->persist;
    o.wallclock = wallclock;
    o.extra_conf = extra;
    return testkit_redis_start(&o);
}

/* Appends "127.0.0.1:PORT" of nodes [0, count) to url, comma-separated. */
static void append_hosts(char *url, size_t len, testkit_redis *const *nodes,
                         int count)
{
    for (int i = 0; i < count; i++) {
        size_t used = strlen(url);

        snprintf(url + used, len - used, "%s127.0.0.1:%d", i ? "," : "",
                 nodes[i]->port);
    }
}

static int start_proxies(chaos_nemesis *n)
{
    int total = n->cfg.api_clients + n->cfg.cli_clients;

    for (int i = 0; i < total && i < CHAOS_CLIENTS_MAX; i++) {
        char name[32];

        snprintf(name, sizeof(name), "chaos-proxy-%d", i);
        n->proxies[i] = testkit_proxy_for(name, n->redis->port);
        if (n->proxies[i] == NULL)
            return -1;
    }
    return 0;
}

static int start_redlock(chaos_nemesis *n)
{
    for (int i = 0; i < REDLOCK_MASTERS; i++) {
        char suffix[16];

        snprintf(suffix, sizeof(suffix), "-m%d", i);
        n->nodes[i] = start_node(n, suffix, 0, "appendfsync always");
        if (n->nodes[i] == NULL)
            return -1;
        n->nnodes++;
    }
    n->redis = n->nodes[0];
    snprintf(n->url, sizeof(n->url), "redlock://");
    append_hosts(n->url, sizeof(n->url), n->nodes, n->nnodes);
    return 0;
}

/* 1 when the node answers command with text holding want (and want2,
 * unless it is NULL). */
static int node_says(const testkit_redis *node, const char *command,
                     const char *want, const char *want2)
{
    redisReply *r = testkit_redis_cmd(node->url, command);
    int ok = r != NULL && r->type == REDIS_REPLY_STRING
             && strstr(r->str, want) != NULL
             && (want2 == NULL || strstr(r->str, want2) != NULL);

    freeReplyObject(r);
    return ok;
}

/* 1 when every node of n says cluster_state:ok with every slot served,
 * and every replica has its master's data (link up): a replica that never
 * synchronised would not stand for election. */
static int cluster_ok(void *arg)
{
    const chaos_nemesis *n = arg;

    for (int i = 0; i < n->nnodes; i++) {
        if (n->nodes[i]->pid == 0)
            continue;
        if (!node_says(n->nodes[i], "CLUSTER INFO", "cluster_state:ok",
                       "cluster_slots_ok:16384"))
            return 0;
        if (!node_says(n->nodes[i], "INFO replication", "role:master", NULL)
            && !node_says(n->nodes[i], "INFO replication",
                          "master_link_status:up", NULL))
            return 0;
    }
    return 1;
}

static int start_cluster(chaos_nemesis *n)
{
    const char *argv[CLUSTER_NODES + 8];
    char addrs[CLUSTER_NODES][32], log[1024];
    int a = 0;

    for (int i = 0; i < CLUSTER_NODES; i++) {
        char suffix[16], extra[256];
        int bus = testkit_free_port();

        snprintf(suffix, sizeof(suffix), "-c%d", i);
        snprintf(extra, sizeof(extra),
                 "cluster-enabled yes\ncluster-config-file nodes.conf\n"
                 "cluster-port %d\ncluster-node-timeout 1000\n"
                 "cluster-replica-validity-factor 0",
                 bus);
        n->nodes[i] = bus > 0 ? start_node(n, suffix, 0, extra) : NULL;
        if (n->nodes[i] == NULL)
            return -1;
        n->nnodes++;
        snprintf(addrs[i], sizeof(addrs[i]), "127.0.0.1:%d",
                 n->nodes[i]->port);
    }
    argv[a++] = "redis-cli";
    argv[a++] = "--cluster";
    argv[a++] = "create";
    for (int i = 0; i < CLUSTER_NODES; i++)
        argv[a++] = addrs[i];
    argv[a++] = "--cluster-replicas";
    argv[a++] = "1";
    argv[a++] = "--cluster-yes";
    argv[a] = NULL;
    snprintf(log, sizeof(log), "%s/cluster-create.log", n->dir);
    if (testkit_run_logged(argv, log, 60000) != 0
        || !testkit_wait_until(cluster_ok, n, CLUSTER_OK_TIMEOUT_MS)) {
        fprintf(stderr, "chaos: the cluster did not form (see %s)\n", log);
        return -1;
    }
    n->redis = n->nodes[0];
    snprintf(n->url, sizeof(n->url), "redis+cluster://");
    append_hosts(n->url, sizeof(n->url), n->nodes, 3);
    return 0;
}

int chaos_deploy_start(chaos_nemesis *n)
{
    switch (n->topology) {
    case CHAOS_REDLOCK: return start_redlock(n);
    case CHAOS_CLUSTER: return start_cluster(n);
    default: break;
    }
    n->redis = start_node(n, "", n->topology == CHAOS_WALLCLOCK,
                          n->persist ? "appendfsync always" : NULL);
    if (n->redis == NULL)
        return -1;
    n->nodes[0] = n->redis;
    n->nnodes = 1;
    snprintf(n->url, sizeof(n->url), "%s", n->redis->url);
    return n->topology == CHAOS_PROXIED ? start_proxies(n) : 0;
}

void chaos_deploy_stop(chaos_nemesis *n)
{
    /* Told all at once, then waited for one by one: they stop side by
     * side rather than in turn. */
    for (int i = 0; i < CHAOS_CLIENTS_MAX; i++)
        if (n->proxies[i] != NULL && n->proxies[i]->pid > 0)
            kill(n->proxies[i]->pid, SIGTERM);
    for (int i = 0; i < n->nnodes; i++)
        if (n->nodes[i]->pid > 0 && !n->nodes[i]->paused)
            kill(n->nodes[i]->pid, SIGTERM);
    for (int i = 0; i < CHAOS_CLIENTS_MAX; i++) {
        testkit_proxy_free(n->proxies[i]);
        n->proxies[i] = NULL;
    }
    for (int i = 0; i < n->nnodes; i++) {
        testkit_redis_free(n->nodes[i]);
        n->nodes[i] = NULL;
    }
    n->nnodes = 0;
    n->redis = NULL;
}

const char *chaos_deploy_client_url(const chaos_nemesis *n, int id)
{
    if (id >= 0 && id < CHAOS_CLIENTS_MAX && n->proxies[id] != NULL)
        return n->proxies[id]->url;
    return n->url;
}

/* Reads the first line of log into why. */
static void first_line(const char *log, char *why, size_t len)
{
    FILE *f = fopen(log, "r");

    why[0] = '\0';
    if (f == NULL)
        return;
    if (fgets(why, (int)len, f) != NULL)
        why[strcspn(why, "\n")] = '\0';
    fclose(f);
}

int chaos_deploy_api_serves(const chaos_client_cfg *cfg,
                            chaos_topology topology, const char *dir,
                            char *why, size_t len)
{
    char url[128], log[1024];
    const char *argv[] = {cfg->client_bin, "--probe-url", url, NULL};
    int port = testkit_free_port(), rc;

    why[0] = '\0';
    if (topology == CHAOS_REDLOCK)
        snprintf(url, sizeof(url),
                 "redlock://127.0.0.1:%d,127.0.0.1:%d,"
                 "127.0.0.1:%d",
                 port, port + 1, port + 2);
    else if (topology == CHAOS_CLUSTER)
        snprintf(url, sizeof(url), "redis+cluster://127.0.0.1:%d", port);
    else
        return 1;
    snprintf(log, sizeof(log), "%s/url-probe.log", dir);
    unlink(log);
    rc = testkit_run_logged(argv, log, PROBE_TIMEOUT_MS);
    first_line(log, why, len);
    unlink(log);
    return rc == 0 ? 1 : rc == 4 ? 0 : -1;
}

int chaos_deploy_cli_serves(chaos_nemesis *n, char *why, size_t len)
{
    char key[200], log[1024];
    const char *argv[] = {
        n->cfg.dlock_bin, "run", "--url", n->url, "--ttl", "2s",
        "--wait",         "2s",  key,     "--",   "true",  NULL};
    int rc;

    snprintf(key, sizeof(key), "%s:probe", n->key);
    snprintf(log, sizeof(log), "%s/dlock-probe.log", n->dir);
    unlink(log);
    rc = testkit_run_logged(argv, log, PROBE_TIMEOUT_MS);
    first_line(log, why, len);
    if (rc != 0 && why[0] == '\0')
        snprintf(why, len, "dlock run exited %d", rc);
    return rc == 0;
}

/* ---- faults ------------------------------------------------------------- */

int chaos_fault_redlock_minority(chaos_nemesis *n)
{
    int64_t ms = chaos_fault_ms(n, n->cfg.ttl_ms / 2, n->cfg.ttl_ms * 2);
    int a = (int)chaos_rng_range(&n->rng, 0, n->nnodes - 1);
    int b = (a + (int)chaos_rng_range(&n->rng, 1, n->nnodes - 1)) % n->nnodes;
    int rc = 0;

    chaos_event(n->events, "fault redlock_minority 0 %lld", (long long)ms);
    kill(n->nodes[a]->pid, SIGKILL);
    kill(n->nodes[b]->pid, SIGKILL);
    chaos_sleep_us(ms * 1000);
    if (testkit_redis_restart(n->nodes[a]) != 0
        || testkit_redis_restart(n->nodes[b]) != 0) {
        fprintf(stderr, "chaos: a Redlock master did not come back\n");
        rc = -1;
    }
    chaos_event(n->events, "fault_end redlock_minority 0");
    return rc == 0 ? 1 : -1;
}

/* The cluster's view from any node that answers: CLUSTER NODES' text,
 * to be freed by the caller, or NULL. */
static char *cluster_nodes(const chaos_nemesis *n)
{
    for (int i = 0; i < n->nnodes; i++) {
        redisReply *r;
        char *text = NULL;

        if (n->nodes[i]->pid == 0)
            continue;
        r = testkit_redis_cmd(n->nodes[i]->url, "CLUSTER NODES");
        if (r != NULL && r->type == REDIS_REPLY_STRING)
            text = strdup(r->str);
        freeReplyObject(r);
        if (text != NULL)
            return text;
    }
    return NULL;
}

/* Whether a CLUSTER NODES slot list (from field 9 on) serves slot. */
static int serves_slot(const char *slots, long slot)
{
    char *copy = strdup(slots), *save = NULL;
    int found = 0;

    for (char *f = copy ? strtok_r(copy, " ", &save) : NULL;
         f != NULL && !found; f = strtok_r(NULL, " ", &save)) {
        long lo, hi;

        if (f[0] == '[')
            continue;
        if (sscanf(f, "%ld-%ld", &lo, &hi) == 2)
            found = lo <= slot && slot <= hi;
        else if (sscanf(f, "%ld", &lo) == 1)
            found = lo == slot;
    }
    free(copy);
    return found;
}

/* The node of n on port, or -1. */
static int node_on(const chaos_nemesis *n, int port)
{
    for (int i = 0; i < n->nnodes; i++)
        if (n->nodes[i]->port == port)
            return i;
    return -1;
}

/* Finds the master serving the lock key's slot and one of its replicas,
 * as indexes into n->nodes.  Returns 0 or -1. */
static int slot_owner(const chaos_nemesis *n, int *master, int *replica)
{
    char *text = cluster_nodes(n), master_id[64] = "";
    long slot = -1;
    char *save = NULL;

    for (int i = 0; i < n->nnodes && slot < 0; i++)
        if (n->nodes[i]->pid != 0)
            slot = (long)testkit_redis_int(n->nodes[i]->url,
                                           "CLUSTER KEYSLOT %s", n->key);

    *master = *replica = -1;
    if (text == NULL || slot < 0) {
        free(text);
        return -1;
    }
    for (int pass = 0; pass < 2; pass++) {
        char *copy = strdup(text);

        for (char *line = copy ? strtok_r(copy, "\n", &save) : NULL;
             line != NULL; line = strtok_r(NULL, "\n", &save)) {
            char id[64], addr[64], flags[128], of[64];
            int port, used = 0;

            if (sscanf(line, "%63s %63s %127s %63s %*s %*s %*s %*s%n", id,
                       addr, flags, of, &used)
                    < 4
                || strstr(flags, "fail") != NULL
                || sscanf(strchr(addr, ':') ? strchr(addr, ':') + 1 : "", "%d",
                          &port)
                       != 1)
                continue;
            if (pass == 0 && strstr(flags, "master") != NULL && used > 0
                && serves_slot(line + used, slot)) {
                snprintf(master_id, sizeof(master_id), "%s", id);
                *master = node_on(n, port);
            } else if (pass == 1 && strstr(flags, "slave") != NULL
                       && strcmp(of, master_id) == 0) {
                *replica = node_on(n, port);
            }
        }
        free(copy);
    }
    free(text);
    return *master >= 0 && *replica >= 0 ? 0 : -1;
}

typedef struct promotion {
    const testkit_redis *node;
} promotion;

/* 1 once the node answers ROLE with "master". */
static int promoted(void *arg)
{
    const promotion *p = arg;
    redisReply *r = testkit_redis_cmd(p->node->url, "ROLE");
    int yes = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0
              && r->element[0]->type == REDIS_REPLY_STRING
              && strcmp(r->element[0]->str, "master") == 0;

    freeReplyObject(r);
    return yes;
}

int chaos_fault_cluster_failover(chaos_nemesis *n)
{
    int master, replica, hard = (int)chaos_rng_range(&n->rng, 0, 1);
    const char *kind = hard ? "cluster_kill" : "cluster_failover";
    promotion p;
    int ok = 1;

    if (slot_owner(n, &master, &replica) != 0) {
        fprintf(stderr, "chaos: no master and replica for the lock's slot\n");
        return 0;
    }
    p.node = n->nodes[replica];
    chaos_event(n->events, "fault %s 0 0", kind);
    if (hard) {
        kill(n->nodes[master]->pid, SIGKILL);
    } else {
        redisReply *r = testkit_redis_cmd(n->nodes[replica]->url,
                                          "CLUSTER FAILOVER");

        ok = r != NULL && r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
    }
    ok = ok && testkit_wait_until(promoted, &p, CLUSTER_PROMOTE_TIMEOUT_MS);
    if (hard && testkit_redis_restart(n->nodes[master]) != 0)
        ok = 0;
    ok = ok && testkit_wait_until(cluster_ok, n, CLUSTER_OK_TIMEOUT_MS);
    chaos_event(n->events, "fault_end %s 0", kind);
    if (!ok)
        fprintf(stderr, "chaos: the cluster did not recover from %s\n", kind);
    return ok ? 1 : -1;
}
