/*
 * scalekit.c: the deployments of scripts/stack for the scale-out tests
 * (see scalekit.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "scalekit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "testkit.h"

/* The group this process started, which scalekit_group_done stops. */
static char started_group[32];

/* Runs scripts/stack with the arguments; returns its exit status. */
static int stack(const char *args)
{
    char cmd[1400];
    int rc;

    snprintf(cmd, sizeof(cmd), "'%.900s/scripts/stack' %.300s",
             testkit_source_dir(), args);
    rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

const char *scalekit_group_url(const char *group)
{
    static char url[2048];
    char cmd[1200], line[2048];
    const char *src = testkit_source_dir();
    FILE *p;
    int found = 0;

    /* A bare env lists the groups of which any node runs: one that is
     * only slow to answer is still not ours to stop. */
    snprintf(line, sizeof(line), "env | grep -qi '^export %.40s_URL='", group);
    if (started_group[0] == '\0' && stack(line) != 0)
        snprintf(started_group, sizeof(started_group), "%s", group);
    snprintf(cmd, sizeof(cmd),
             "'%s/scripts/stack' up %s >&2 && "
             "'%s/scripts/stack' env %s",
             src, group, src, group);
    p = popen(cmd, "r");
    if (p == NULL) {
        fprintf(stderr, "scalekit: cannot run scripts/stack\n");
        return NULL;
    }
    while (fgets(line, sizeof(line), p) != NULL) {
        const char *eq = strchr(line, '=');
        size_t j = 0;

        if (strncmp(line, "export ", 7) != 0 || eq == NULL)
            continue;
        /* The value is printed with %q: drop its backslashes. */
        for (const char *c = eq + 1; *c != '\0' && *c != '\n'; c++)
            if (*c != '\\' && j + 1 < sizeof(url))
                url[j++] = *c;
        url[j] = '\0';
        found = 1;
    }
    if (pclose(p) != 0 || !found) {
        fprintf(stderr, "scalekit: scripts/stack up %s failed\n", group);
        return NULL;
    }
    return url;
}

void scalekit_deployment(const char *url, dlock__deployment *d)
{
    dlock__msg m;

    dlock__msg_clear(&m);
    TK_EXPECT(url != NULL, "the deployment's URL is known");
    TK_EXPECT(dlock__url_parse_deployment(url, d, &m) == DLOCK_OK,
              "%s parses: %s", url, m.text);
}

int scalekit_signal_node(const char *group, int port, int sig)
{
    char path[800], comm[64] = "";
    FILE *f;
    int pid = -1;

    snprintf(path, sizeof(path), "%s/var/stack/%s/%d/redis.pid",
             testkit_source_dir(), group, port);
    f = fopen(path, "r");
    if (f == NULL || fscanf(f, "%d", &pid) != 1)
        pid = -1;
    if (f != NULL)
        fclose(f);
    if (pid <= 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/%d/comm", pid);
    f = fopen(path, "r");
    if (f == NULL || fgets(comm, sizeof(comm), f) == NULL)
        comm[0] = '\0';
    if (f != NULL)
        fclose(f);
    if (strncmp(comm, "redis-server", 12) != 0 || kill(pid, sig) != 0)
        return -1;
    return pid;
}

const char *scalekit_node_url(int port, char *buf, size_t size)
{
    snprintf(buf, size, "redis://127.0.0.1:%d/0", port);
    return buf;
}

void scalekit_group_done(void)
{
    char args[64];

    if (started_group[0] == '\0')
        return;
    snprintf(args, sizeof(args), "down %s >/dev/null", started_group);
    if (stack(args) != 0)
        fprintf(stderr, "scalekit: scripts/stack %s failed\n", args);
    started_group[0] = '\0';
}

/* ---- cluster topology and changes, through redis-server itself --------- */

/* CLUSTER SLOTS from the node on port (the caller frees it), or NULL. */
static redisReply *cluster_slots(int port)
{
    char url[64];
    redisReply *r = testkit_redis_cmd(scalekit_node_url(port, url,
                                                        sizeof(url)),
                                      "CLUSTER SLOTS");

    if (r != NULL && r->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(r);
        r = NULL;
    }
    return r;
}

/* The range of a CLUSTER SLOTS reply that holds slot, or NULL. */
static const redisReply *range_of(const redisReply *r, unsigned slot)
{
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];

        if (e->elements >= 3 && (long long)slot >= e->element[0]->integer
            && (long long)slot <= e->element[1]->integer)
            return e;
    }
    return NULL;
}

int scalekit_cluster_master_of(int any_port, unsigned slot)
{
    redisReply *r = cluster_slots(any_port);
    const redisReply *e = r != NULL ? range_of(r, slot) : NULL;
    int port = e != NULL ? (int)e->element[2]->element[1]->integer : -1;

    freeReplyObject(r);
    return port;
}

int scalekit_cluster_other_master(int any_port, int master_port)
{
    redisReply *r = cluster_slots(any_port);
    int port = -1;

    for (size_t i = 0; r != NULL && i < r->elements && port < 0; i++) {
        int p = (int)r->element[i]->element[2]->element[1]->integer;

        if (p != master_port)
            port = p;
    }
    freeReplyObject(r);
    return port;
}

/* 1 if the replica on port has its replication link up. */
static int link_up(int port)
{
    char url[64];
    redisReply *r = testkit_redis_cmd(scalekit_node_url(port, url,
                                                        sizeof(url)),
                                      "INFO replication");
    int up = r != NULL && r->type == REDIS_REPLY_STRING
             && strstr(r->str, "master_link_status:up") != NULL;

    freeReplyObject(r);
    return up;
}

typedef struct replica_probe {
    int any_port;
    int master_port;
    int port;
} replica_probe;

/* Succeeds once the slot map lists a replica of the master whose
 * replication link is up (a demoted master takes a moment). */
static int has_synced_replica(void *arg)
{
    replica_probe *p = arg;
    redisReply *r = cluster_slots(p->any_port);

    p->port = -1;
    for (size_t i = 0; r != NULL && i < r->elements && p->port < 0; i++) {
        const redisReply *e = r->element[i];

        if (e->element[2]->element[1]->integer != p->master_port)
            continue;
        for (size_t j = 3; j < e->elements && p->port < 0; j++)
            if (link_up((int)e->element[j]->element[1]->integer))
                p->port = (int)e->element[j]->element[1]->integer;
    }
    freeReplyObject(r);
    return p->port > 0;
}

int scalekit_cluster_replica_of(int any_port, int master_port)
{
    replica_probe p = {.any_port = any_port, .master_port = master_port};

    TK_EXPECT(testkit_wait_until(has_synced_replica, &p, 30000),
              "master %d has a synced replica", master_port);
    return p.port;
}

/* The node id of the node on port, into id. */
static void node_id(int port, char id[64])
{
    char url[64];
    redisReply *r = testkit_redis_cmd(scalekit_node_url(port, url,
                                                        sizeof(url)),
                                      "CLUSTER MYID");

    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STRING, "CLUSTER MYID on %d",
              port);
    snprintf(id, 64, "%s", r->str);
    freeReplyObject(r);
}

/* CLUSTER SETSLOT slot verb id on the node on port, expecting +OK. */
static void setslot(int port, unsigned slot, const char *verb, const char *id)
{
    char url[64];
    redisReply *r = testkit_redis_cmd(scalekit_node_url(port, url,
                                                        sizeof(url)),
                                      "CLUSTER SETSLOT %u %s %s", slot, verb,
                                      id);

    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS,
              "CLUSTER SETSLOT %u %s on %d: %s", slot, verb, port,
              r != NULL && r->str != NULL ? r->str : "no reply");
    freeReplyObject(r);
}

/* MIGRATEs the keys of slot from `from` to `to` in batches; returns how
 * many moved. */
static int move_keys(unsigned slot, int from, int to)
{
    char url[64];
    int moved = 0;

    for (;;) {
        redisReply *keys = testkit_redis_cmd(scalekit_node_url(from, url,
                                                               sizeof(url)),
                                             "CLUSTER GETKEYSINSLOT %u 100",
                                             slot);
        redisReply *r;

        TK_EXPECT(keys != NULL && keys->type == REDIS_REPLY_ARRAY,
                  "CLUSTER GETKEYSINSLOT %u on %d", slot, from);
        if (keys->elements == 0) {
            freeReplyObject(keys);
            return moved;
        }
        for (size_t i = 0; i < keys->elements; i++) {
            r = testkit_redis_cmd(url, "MIGRATE 127.0.0.1 %d %b 0 5000", to,
                                  keys->element[i]->str,
                                  keys->element[i]->len);
            /* NOKEY: the key expired or was deleted meanwhile. */
            TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS,
                      "MIGRATE %s to %d: %s", keys->element[i]->str, to,
                      r != NULL && r->str != NULL ? r->str : "no reply");
            freeReplyObject(r);
            moved++;
        }
        freeReplyObject(keys);
    }
}

int scalekit_cluster_migrate_slot(int any_port, unsigned slot, int to)
{
    int from = scalekit_cluster_master_of(any_port, slot);
    char from_id[64], to_id[64];
    int moved;

    TK_EXPECT(from > 0 && from != to, "slot %u has a master other than %d",
              slot, to);
    node_id(from, from_id);
    node_id(to, to_id);
    setslot(to, slot, "IMPORTING", from_id);
    setslot(from, slot, "MIGRATING", to_id);
    moved = move_keys(slot, from, to);
    setslot(to, slot, "NODE", to_id);
    setslot(from, slot, "NODE", to_id);
    return moved;
}

int scalekit_cluster_nodes(int any_port, int *ports, int max)
{
    redisReply *r = cluster_slots(any_port);
    int n = 0;

    for (size_t i = 0; r != NULL && i < r->elements; i++) {
        const redisReply *e = r->element[i];

        for (size_t j = 2; j < e->elements; j++) {
            int port = (int)e->element[j]->element[1]->integer, seen = 0;

            for (int k = 0; k < n; k++)
                seen |= ports[k] == port;
            if (!seen && n < max)
                ports[n++] = port;
        }
    }
    freeReplyObject(r);
    return n;
}
