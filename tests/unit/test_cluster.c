/*
 * test_cluster.c: the pure parts of Redis Cluster routing (src/lib/
 * cluster.c): key slots with hash tags, MOVED/ASK parsing, the routing
 * decision after a reply, and the slot map built from CLUSTER SHARDS and
 * CLUSTER SLOTS replies.
 *
 * Replies are written as RESP text and read with hiredis's reader, the
 * same reader the library uses, so each case is the bytes a server sends.
 * The slot values are the ones the Redis Cluster specification gives
 * (CRC16 of "123456789" is 0x31C3) and that redis-cli CLUSTER KEYSLOT
 * prints.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <hiredis/read.h>

#include "deploy/cluster.h"
#include "testkit.h"

/* The reply that RESP text resp reads to (the caller frees it). */
static redisReply *reply_of(const char *resp)
{
    redisReply *r = testkit_reply_of(resp);

    TK_EXPECT(r != NULL, "\"%s\" is one complete reply", resp);
    return r;
}

static unsigned slot_of(const char *key)
{
    return dlock__cluster_keyslot(key, strlen(key));
}

static void key_slots_match_redis(void **state)
{
    (void)state;
    TK_EXPECT(slot_of("123456789") == (0x31C3 & 16383),
              "the specification's check value, got %u", slot_of("123456789"));
    TK_EXPECT(slot_of("foo") == 12182, "foo is slot 12182, got %u",
              slot_of("foo"));
    TK_EXPECT(slot_of("bar") == 5061, "bar is slot 5061, got %u",
              slot_of("bar"));
    TK_EXPECT(slot_of("") == 0, "the empty key is slot 0");
}

static void hash_tags_put_keys_in_one_slot(void **state)
{
    (void)state;
    TK_EXPECT(slot_of("{user1000}.following") == slot_of("user1000")
                  && slot_of("{user1000}.followers") == slot_of("user1000"),
              "keys with one tag share the tag's slot");
    TK_EXPECT(slot_of("foo{}{bar}") != slot_of("bar")
                  && slot_of("foo{}{bar}")
                         == dlock__cluster_keyslot("foo{}{bar}", 10),
              "an empty first tag hashes the whole key");
    TK_EXPECT(slot_of("foo{{bar}}zap") == slot_of("{bar"),
              "the tag ends at the first '}' after the first '{'");
    TK_EXPECT(slot_of("foo{bar}{zap}") == slot_of("bar"),
              "only the first tag counts");
    TK_EXPECT(slot_of("{lock:x}") == slot_of("{lock:x}:fence"),
              "a lock and its derived keys share a slot");
    TK_EXPECT(slot_of("a{b") == dlock__cluster_keyslot("a{b", 3),
              "an unclosed tag hashes the whole key");
}

static dlock__redirect parse(const char *text, int expect)
{
    dlock__redirect r;
    int got = dlock__cluster_redirect_parse(text, strlen(text), &r);

    TK_EXPECT(got == expect, "\"%s\" is %sa redirection", text,
              expect ? "" : "not ");
    if (!expect)
        TK_EXPECT(r.kind == DLOCK__REDIRECT_NONE, "no kind for \"%s\"", text);
    return r;
}

static void moved_and_ask_are_parsed(void **state)
{
    dlock__redirect r;

    (void)state;
    r = parse("MOVED 3999 127.0.0.1:6381", 1);
    TK_EXPECT(r.kind == DLOCK__REDIRECT_MOVED && r.slot == 3999
                  && strcmp(r.host, "127.0.0.1") == 0 && r.port == 6381,
              "MOVED to 127.0.0.1:6381 for slot 3999");
    r = parse("ASK 16383 [::1]:7000", 1);
    TK_EXPECT(r.kind == DLOCK__REDIRECT_ASK && r.slot == 16383
                  && strcmp(r.host, "::1") == 0 && r.port == 7000,
              "ASK to [::1]:7000");
    r = parse("MOVED 0 :7001", 1);
    TK_EXPECT(r.host[0] == '\0' && r.port == 7001,
              "an empty host means the node asked");
    r = parse("MOVED 12 redis-3.example:7002", 1);
    TK_EXPECT(strcmp(r.host, "redis-3.example") == 0, "a host name");
}

static void malformed_redirections_are_not_followed(void **state)
{
    static const char *const bad[] = {
        "MOVED 16384 h:1",   "MOVED x h:1",
        "MOVED 1 h:99999",   "MOVED 1 h",
        "MOVED 1 h:",        "MOVED  h:1",
        "MOVED 1",           "MOVEDX 1 h:1",
        "ASK 123456 h:1",    "ERR wrong",
        "ASK 1 [::1:7000",   "MOVED 1 h:1x",
        "MOVED 1 [::1]7000", "",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        (void)parse(bad[i], 0);
}

static void routing_decision_after_a_reply(void **state)
{
    static const struct {
        dlock_err err;     /* what the call returned */
        const char *reply; /* the reply it read, or NULL */
        dlock__route want;
        int slot; /* of a redirect */
        const char *what;
    } cases[] = {
        {DLOCK_OK, "-MOVED 5 127.0.0.1:7000\r\n", DLOCK__ROUTE_REDIRECT, 5,
         "MOVED is followed"},
        {DLOCK_OK, "-CLUSTERDOWN The cluster is down\r\n",
         DLOCK__ROUTE_REFRESH, 0, "CLUSTERDOWN refreshes the map"},
        {DLOCK_OK, "-TRYAGAIN Multiple keys request\r\n", DLOCK__ROUTE_REFRESH,
         0, "TRYAGAIN refreshes and retries"},
        {DLOCK_OK, "-WRONGTYPE Operation\r\n", DLOCK__ROUTE_DONE, 0,
         "another error is the answer"},
        {DLOCK_OK, "+OK\r\n", DLOCK__ROUTE_DONE, 0, "a reply is the answer"},
        {DLOCK_UNAVAILABLE, NULL, DLOCK__ROUTE_REFRESH, 0,
         "an unreachable node refreshes"},
        {DLOCK_TIMEOUT, NULL, DLOCK__ROUTE_REFRESH, 0,
         "a silent node refreshes"},
        {DLOCK_AUTH, NULL, DLOCK__ROUTE_DONE, 0,
         "a refused password is not retried"},
    };
    dlock__redirect r;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        redisReply *reply = cases[i].reply ? reply_of(cases[i].reply) : NULL;

        TK_EXPECT(dlock__cluster_route(cases[i].err, reply, &r)
                          == cases[i].want
                      && (cases[i].want != DLOCK__ROUTE_REDIRECT
                          || r.slot == cases[i].slot),
                  "%s", cases[i].what);
        freeReplyObject(reply);
    }
}

/* CLUSTER SLOTS of a cluster of two masters with a replica each. */
static const char slots_reply[] =
    "*2\r\n"
    "*4\r\n:0\r\n:8191\r\n"
    "*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n"
    "*3\r\n$9\r\n127.0.0.1\r\n:7003\r\n$2\r\nid\r\n"
    "*4\r\n:8192\r\n:16383\r\n"
    "*3\r\n$9\r\n127.0.0.1\r\n:7001\r\n$2\r\nid\r\n"
    "*3\r\n$9\r\n127.0.0.1\r\n:7004\r\n$2\r\nid\r\n";

/* A node of CLUSTER SHARDS (RESP2): port, ip, role. */
#define SHARD_NODE(port, role)                                         \
    "*6\r\n$4\r\nport\r\n:" port "\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n" \
    "$4\r\nrole\r\n$" role

/* CLUSTER SHARDS: slots 0-99 and 200-16383 on 7001, 100-199 on 7002, each
 * shard listing its replica first. */
static const char shards_reply[] =
    "*2\r\n"
    "*4\r\n$5\r\nslots\r\n*4\r\n:0\r\n:99\r\n:200\r\n:16383\r\n"
    "$5\r\nnodes\r\n*2\r\n" SHARD_NODE("7004", "7\r\nreplica\r\n") SHARD_NODE(
        "7001",
        "6\r\nmaster\r\n") "*4\r\n$5\r\nslots\r\n*2\r\n:100\r\n:199\r\n"
                           "$5\r\nnodes\r\n*2\r\n" SHARD_NODE(
                               "7002", "6\r\nmaster\r\n")
                               SHARD_NODE("7005", "7\r\nreplica\r\n");

static int master_port(const dlock__slot_map *map, int slot)
{
    return map->owner[slot] < 0 ? -1 : map->masters[map->owner[slot]].port;
}

/* How a map is read: dlock__slot_map_from_slots or _from_shards. */
typedef dlock_err (*map_reader)(const redisReply *r, const char *server,
                                dlock__slot_map *map, dlock__msg *m);

/* Reads the reply text with from into map, which must then hold the two
 * masters and two replicas of slots_reply and shards_reply. */
static void read_two_by_two(map_reader from, const char *text,
                            dlock__slot_map *map)
{
    redisReply *r = reply_of(text);
    dlock__msg m;

    TK_EXPECT(from(r, "t", map, &m) == DLOCK_OK, "the map is read: %s",
              m.text);
    TK_EXPECT(map->nmasters == 2 && map->nreplicas == 2,
              "2 masters, 2 "
              "replicas, got %d and %d",
              map->nmasters, map->nreplicas);
    freeReplyObject(r);
}

static void slot_map_from_cluster_slots(void **state)
{
    static dlock__slot_map map;

    (void)state;
    read_two_by_two(dlock__slot_map_from_slots, slots_reply, &map);
    TK_EXPECT(master_port(&map, 0) == 7000 && master_port(&map, 8191) == 7000
                  && master_port(&map, 8192) == 7001
                  && master_port(&map, 16383) == 7001,
              "the ranges' masters");
    TK_EXPECT(dlock__slot_map_unserved(&map) == 0, "every slot is served");
}

static void slot_map_from_cluster_shards(void **state)
{
    static dlock__slot_map map;

    (void)state;
    read_two_by_two(dlock__slot_map_from_shards, shards_reply, &map);
    TK_EXPECT(master_port(&map, 99) == 7001 && master_port(&map, 100) == 7002
                  && master_port(&map, 199) == 7002
                  && master_port(&map, 200) == 7001,
              "the replica is not a master "
              "and each range has its shard's master");
    TK_EXPECT(dlock__slot_map_unserved(&map) == 0, "every slot is served");
}

/* Each of the n replies in bad is refused by from as DLOCK_PROTOCOL; what
 * names the command in the message. */
static void expect_protocol_errors(map_reader from, const char *const *bad,
                                   size_t n, const char *what)
{
    static dlock__slot_map map;
    dlock__msg m;

    for (size_t i = 0; i < n; i++) {
        redisReply *r = reply_of(bad[i]);

        TK_EXPECT(from(r, "t", &map, &m) == DLOCK_PROTOCOL,
                  "%s case %zu is refused", what, i);
        freeReplyObject(r);
    }
}

static void malformed_maps_are_protocol_errors(void **state)
{
    static const char *const bad_slots[] = {
        "+OK\r\n",
        "*1\r\n*2\r\n:0\r\n:1\r\n",
        "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n",
        "*1\r\n*3\r\n:5\r\n:4\r\n*2\r\n$1\r\nh\r\n:1\r\n",
        "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n:0\r\n",
    };
    static const char *const bad_shards[] = {
        "$3\r\nabc\r\n",
        "*1\r\n*2\r\n$5\r\nslots\r\n*1\r\n:0\r\n",
        "*1\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:99999\r\n$5\r\nnodes\r\n*"
        "1\r\n" SHARD_NODE("7000", "6\r\nmaster\r\n"),
    };

    (void)state;
    expect_protocol_errors(dlock__slot_map_from_slots, bad_slots,
                           sizeof(bad_slots) / sizeof(*bad_slots), "SLOTS");
    expect_protocol_errors(dlock__slot_map_from_shards, bad_shards,
                           sizeof(bad_shards) / sizeof(*bad_shards), "SHARDS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(key_slots_match_redis),
        cmocka_unit_test(hash_tags_put_keys_in_one_slot),
        cmocka_unit_test(moved_and_ask_are_parsed),
        cmocka_unit_test(malformed_redirections_are_not_followed),
        cmocka_unit_test(routing_decision_after_a_reply),
        cmocka_unit_test(slot_map_from_cluster_slots),
        cmocka_unit_test(slot_map_from_cluster_shards),
        cmocka_unit_test(malformed_maps_are_protocol_errors),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
