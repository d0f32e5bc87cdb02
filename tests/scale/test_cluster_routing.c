/*
 * test_cluster_routing.c: Redis Cluster routing (src/lib/deploy/cluster.c) on
 * scripts/stack's cluster group (three masters, three replicas).
 *
 *   - the slot map from the seeds serves all 16384 slots with 3 masters;
 *   - 3000 keys, one hash tag each, spread over the slots, are written and
 *     read back through dlock__cluster_call, and every master serves some;
 *   - a wrong map entry is corrected by the MOVED it causes;
 *   - a slot migration: while the slot is MIGRATING, a moved key is read
 *     through ASK from the importing master; once the slot is assigned,
 *     MOVED sends the client there for good; then the slot goes back;
 *   - failovers: CLUSTER FAILOVER on a replica, then a master killed by
 *     its pid file: writes to a key of the failed master's slots resume on
 *     the promoted replica, the time is printed, and scripts/stack up
 *     cluster brings the killed node back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "deploy/cluster.h"
#include "scalekit.h"
#include "testkit.h"

static dlock__deployment deployment;
static dlock__conn_cfg cfg;
static dlock__cluster cluster;

static int setup(void **state)
{
    dlock__msg m;

    (void)state;
    scalekit_deployment(scalekit_group_url("cluster"), &deployment);
    dlock__msg_clear(&m);
    if (dlock__cluster_init(&cluster, &deployment, &cfg, 4,
                            dlock__deadline_after_ms(10000), &m)
        != DLOCK_OK) {
        fprintf(stderr, "cluster init: %s\n", m.text);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dlock__cluster_destroy(&cluster);
    dlock__deployment_clear(&deployment);
    scalekit_group_done();
    return 0;
}

/* Runs a command on key's master; returns the reply (freed by caller). */
static redisReply *call(const char *key, int argc, const char **argv,
                        int *node)
{
    redisReply *r = NULL;
    dlock__msg m;

    dlock__msg_clear(&m);
    TK_EXPECT(dlock__cluster_call(&cluster, key, strlen(key), argc, argv, NULL,
                                  dlock__deadline_after_ms(10000), &r, node,
                                  &m)
                  == DLOCK_OK,
              "%s %s: %s", argv[0], key, m.text);
    TK_EXPECT(r->type != REDIS_REPLY_ERROR, "%s %s: %s", argv[0], key, r->str);
    return r;
}

static void set_key(const char *key, const char *value)
{
    const char *argv[] = {"SET", key, value};

    freeReplyObject(call(key, 3, argv, NULL));
}

/* GET key through the cluster, expecting value; returns the node. */
static int get_key(const char *key, const char *value)
{
    const char *argv[] = {"GET", key};
    int node = -1;
    redisReply *r = call(key, 2, argv, &node);

    TK_EXPECT(r->type == REDIS_REPLY_STRING && strcmp(r->str, value) == 0,
              "GET %s gives %s", key, value);
    freeReplyObject(r);
    return node;
}

static void seeds_give_a_map_of_every_slot(void **state)
{
    int masters[DLOCK__NODESET_MAX] = {0}, distinct = 0;

    (void)state;
    for (unsigned s = 0; s < DLOCK__CLUSTER_SLOTS; s++) {
        int node = dlock__cluster_slot_node(&cluster, s);

        TK_EXPECT(node >= 0, "slot %u has a master", s);
        if (masters[node]++ == 0)
            distinct++;
    }
    TK_EXPECT(distinct == 3, "three masters, got %d", distinct);
}

static void keys_over_all_slots_go_to_their_masters(void **state)
{
    int served[DLOCK__NODESET_MAX] = {0}, distinct = 0;
    const int64_t start = testkit_now_ms();

    (void)state;
    for (int i = 0; i < 3000; i++) {
        char key[64], value[16];
        int node;

        snprintf(key, sizeof(key), "t:{k%d}:v", i);
        snprintf(value, sizeof(value), "%d", i);
        set_key(key, value);
        node = get_key(key, value);
        TK_EXPECT(node
                      == dlock__cluster_slot_node(
                          &cluster, dlock__cluster_keyslot(key, strlen(key))),
                  "%s was served by its slot's master", key);
        if (served[node]++ == 0)
            distinct++;
    }
    printf("# cluster: 3000 keys written and read in %" PRId64 " ms\n",
           testkit_now_ms() - start);
    TK_EXPECT(distinct == 3, "all three masters served keys, got %d",
              distinct);
}

static void a_wrong_map_entry_is_corrected_by_moved(void **state)
{
    const char *key = "t:{moved}:v";
    unsigned slot = dlock__cluster_keyslot(key, strlen(key));
    int right, wrong = -1;
    uint64_t refreshes;

    (void)state;
    set_key(key, "here");
    right = dlock__cluster_slot_node(&cluster, slot);
    for (unsigned s = 0; s < DLOCK__CLUSTER_SLOTS && wrong < 0; s++) {
        int n = dlock__cluster_slot_node(&cluster, s);

        if (n != right)
            wrong = n;
    }
    pthread_mutex_lock(&cluster.mu);
    cluster.owner_node[slot] = wrong;
    refreshes = cluster.refreshes;
    pthread_mutex_unlock(&cluster.mu);
    TK_EXPECT(get_key(key, "here") == right, "the value comes from the "
                                             "right master after MOVED");
    TK_EXPECT(dlock__cluster_slot_node(&cluster, slot) == right,
              "the map points at the right master again");
    TK_EXPECT(cluster.refreshes == refreshes, "MOVED fixed one slot "
                                              "without reading the whole map");
}

static char *node_id(int port, char *buf, size_t size)
{
    char url[64];
    redisReply *r = testkit_redis_cmd(scalekit_node_url(port, url,
                                                        sizeof(url)),
                                      "CLUSTER MYID");

    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STRING,
              "CLUSTER MYID on "
              "%d",
              port);
    snprintf(buf, size, "%s", r->str);
    freeReplyObject(r);
    return buf;
}

static void ok_reply(int port, const char *fmt, const char *a, const char *b)
{
    char url[64];
    redisReply *r = testkit_redis_cmd(scalekit_node_url(port, url,
                                                        sizeof(url)),
                                      fmt, a, b);

    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS,
              "\"%s\" on %d: "
              "%s",
              fmt, port, r ? r->str : "no reply");
    freeReplyObject(r);
}

static int port_of(int node)
{
    return dlock__nodeset_endpoint(&cluster.nodes, node)->port;
}

/* Moves key (alone in its slot) from master `from` to master `to`; with
 * check, reads it through ASK halfway. */
static void migrate(const char *key, int from, int to, int check)
{
    unsigned slot = dlock__cluster_keyslot(key, strlen(key));
    char from_id[64], to_id[64], slot_s[16], port_s[16], url[64];
    redisReply *r;

    snprintf(slot_s, sizeof(slot_s), "%u", slot);
    snprintf(port_s, sizeof(port_s), "%d", port_of(to));
    node_id(port_of(from), from_id, sizeof(from_id));
    node_id(port_of(to), to_id, sizeof(to_id));
    ok_reply(port_of(to), "CLUSTER SETSLOT %s IMPORTING %s", slot_s, from_id);
    ok_reply(port_of(from), "CLUSTER SETSLOT %s MIGRATING %s", slot_s, to_id);
    r = testkit_redis_cmd(scalekit_node_url(port_of(from), url, sizeof(url)),
                          "MIGRATE 127.0.0.1 %s %s 0 5000", port_s, key);
    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS, "MIGRATE %s", key);
    freeReplyObject(r);
    if (check) {
        TK_EXPECT(get_key(key, "moving") == to,
                  "during the migration the "
                  "key is read through ASK from the importing master");
        TK_EXPECT(dlock__cluster_slot_node(&cluster, slot) == from,
                  "ASK does not change the map");
    }
    ok_reply(port_of(to), "CLUSTER SETSLOT %s NODE %s", slot_s, to_id);
    ok_reply(port_of(from), "CLUSTER SETSLOT %s NODE %s", slot_s, to_id);
}

static void slot_migration_is_followed_by_ask_then_moved(void **state)
{
    const char *key = "t:{migrating}:v";
    unsigned slot = dlock__cluster_keyslot(key, strlen(key));
    int from, to = -1;

    (void)state;
    set_key(key, "moving");
    from = dlock__cluster_slot_node(&cluster, slot);
    for (unsigned s = 0; s < DLOCK__CLUSTER_SLOTS && to < 0; s++) {
        int n = dlock__cluster_slot_node(&cluster, s);

        if (n != from)
            to = n;
    }
    migrate(key, from, to, 1);
    TK_EXPECT(get_key(key, "moving") == to,
              "after the migration MOVED "
              "sends the client to the new owner");
    TK_EXPECT(dlock__cluster_slot_node(&cluster, slot) == to,
              "the map follows the slot");
    migrate(key, to, from, 0);
    TK_EXPECT(get_key(key, "moving") == from, "and back again");
}

typedef struct replica_probe {
    int master_port;
    int port;
} replica_probe;

/* Succeeds once the master lists a replica whose replication link is up
 * (after a failover the old master takes a moment to become one). */
static int has_synced_replica(void *arg)
{
    replica_probe *p = arg;
    char id[64], url[64];
    redisReply *r;
    const char *colon = NULL;

    node_id(p->master_port, id, sizeof(id));
    r = testkit_redis_cmd(scalekit_node_url(p->master_port, url, sizeof(url)),
                          "CLUSTER REPLICAS %s", id);
    /* "<id> 127.0.0.1:18415@18425 slave <master id> ..." */
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0)
        colon = strchr(r->element[0]->str, ':');
    p->port = colon != NULL ? atoi(colon + 1) : -1;
    freeReplyObject(r);
    if (p->port <= 0)
        return 0;
    r = testkit_redis_cmd(scalekit_node_url(p->port, url, sizeof(url)),
                          "INFO replication");
    colon = r != NULL && r->type == REDIS_REPLY_STRING
                ? strstr(r->str, "master_link_status:up")
                : NULL;
    freeReplyObject(r);
    return colon != NULL;
}

/* The port of a synced replica of the master on port master_port. */
static int replica_of(int master_port)
{
    replica_probe p = {.master_port = master_port};

    TK_EXPECT(testkit_wait_until(has_synced_replica, &p, 30000),
              "master %d has a synced replica", master_port);
    return p.port;
}

typedef struct write_probe {
    const char *key;
    int old_node;
    int node;
} write_probe;

/* Succeeds once a SET of the probe's key is acknowledged by a master other
 * than the old one. */
static int write_moved_on(void *arg)
{
    write_probe *w = arg;
    const char *argv[] = {"SET", w->key, "after"};
    redisReply *r = NULL;
    dlock__msg m;
    dlock_err err = dlock__cluster_call(&cluster, w->key, strlen(w->key), 3,
                                        argv, NULL,
                                        dlock__deadline_after_ms(1000), &r,
                                        &w->node, &m);
    int ok = err == DLOCK_OK && r->type == REDIS_REPLY_STATUS
             && w->node != w->old_node;

    freeReplyObject(r);
    return ok;
}

/* Fails over the master of key (by CLUSTER FAILOVER on its replica, or by
 * killing it) and waits for writes to move on; returns the time taken. */
static int64_t fail_over(const char *key, int kill_master)
{
    write_probe w = {.key = key};
    int master_port, replica_port;
    int64_t start;
    char url[64];

    set_key(key, "before");
    w.old_node = dlock__cluster_slot_node(&cluster,
                                          dlock__cluster_keyslot(key,
                                                                 strlen(key)));
    master_port = port_of(w.old_node);
    replica_port = replica_of(master_port);
    start = testkit_now_ms();
    if (kill_master) {
        TK_EXPECT(scalekit_signal_node("cluster", master_port, SIGKILL) > 0,
                  "master %d is killed", master_port);
    } else {
        redisReply *r = testkit_redis_cmd(scalekit_node_url(replica_port, url,
                                                            sizeof(url)),
                                          "CLUSTER FAILOVER");

        TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS,
                  "CLUSTER FAILOVER on %d", replica_port);
        freeReplyObject(r);
    }
    TK_EXPECT(testkit_wait_until(write_moved_on, &w, 30000),
              "writes to %s "
              "resume on another master",
              key);
    TK_EXPECT(port_of(w.node) == replica_port,
              "the replica %d took over, "
              "writes went to %d",
              replica_port, port_of(w.node));
    return testkit_now_ms() - start;
}

static void failovers_are_followed(void **state)
{
    int64_t manual, killed;

    (void)state;
    manual = fail_over("t:{failover}:a", 0);
    killed = fail_over("t:{failover}:a", 1);
    printf("# cluster: writes resumed %" PRId64 " ms after CLUSTER FAILOVER, "
           "%" PRId64 " ms after a master was killed\n",
           manual, killed);
    TK_EXPECT(scalekit_group_url("cluster") != NULL, "the killed node "
                                                     "comes back");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(seeds_give_a_map_of_every_slot),
        cmocka_unit_test(keys_over_all_slots_go_to_their_masters),
        cmocka_unit_test(a_wrong_map_entry_is_corrected_by_moved),
        cmocka_unit_test(slot_migration_is_followed_by_ask_then_moved),
        cmocka_unit_test(failovers_are_followed),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
