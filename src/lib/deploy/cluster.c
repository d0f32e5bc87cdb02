/*
 * cluster.c: Redis Cluster routing (see cluster.h).
 *
 * The pure parts (key slot, redirection parsing, the routing decision, the
 * slot map built from a reply) are functions of their input alone, so the
 * unit tests check them on replies written by hand; dlock__cluster_call
 * puts them together over a dlock__nodeset.
 *
 * Invariant: owner_node[s] is -1 or the nodeset index of the master that
 * the latest map (or a later MOVED) names for slot s; it is written only
 * under c->mu.  A command is repeated after a CLUSTERDOWN/TRYAGAIN or a
 * redirection (it did not run), and after a transport failure only when
 * the caller says it is safe to repeat (the lock scripts are, by token).
 */
#include "deploy/cluster.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/clock.h"

/* CRC16-CCITT (XMODEM), the checksum Redis Cluster takes of keys. */
static const uint16_t crc16_table[256] = {
    0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50a5, 0x60c6, 0x70e7, 0x8108,
    0x9129, 0xa14a, 0xb16b, 0xc18c, 0xd1ad, 0xe1ce, 0xf1ef, 0x1231, 0x0210,
    0x3273, 0x2252, 0x52b5, 0x4294, 0x72f7, 0x62d6, 0x9339, 0x8318, 0xb37b,
    0xa35a, 0xd3bd, 0xc39c, 0xf3ff, 0xe3de, 0x2462, 0x3443, 0x0420, 0x1401,
    0x64e6, 0x74c7, 0x44a4, 0x5485, 0xa56a, 0xb54b, 0x8528, 0x9509, 0xe5ee,
    0xf5cf, 0xc5ac, 0xd58d, 0x3653, 0x2672, 0x1611, 0x0630, 0x76d7, 0x66f6,
    0x5695, 0x46b4, 0xb75b, 0xa77a, 0x9719, 0x8738, 0xf7df, 0xe7fe, 0xd79d,
    0xc7bc, 0x48c4, 0x58e5, 0x6886, 0x78a7, 0x0840, 0x1861, 0x2802, 0x3823,
    0xc9cc, 0xd9ed, 0xe98e, 0xf9af, 0x8948, 0x9969, 0xa90a, 0xb92b, 0x5af5,
    0x4ad4, 0x7ab7, 0x6a96, 0x1a71, 0x0a50, 0x3a33, 0x2a12, 0xdbfd, 0xcbdc,
    0xfbbf, 0xeb9e, 0x9b79, 0x8b58, 0xbb3b, 0xab1a, 0x6ca6, 0x7c87, 0x4ce4,
    0x5cc5, 0x2c22, 0x3c03, 0x0c60, 0x1c41, 0xedae, 0xfd8f, 0xcdec, 0xddcd,
    0xad2a, 0xbd0b, 0x8d68, 0x9d49, 0x7e97, 0x6eb6, 0x5ed5, 0x4ef4, 0x3e13,
    0x2e32, 0x1e51, 0x0e70, 0xff9f, 0xefbe, 0xdfdd, 0xcffc, 0xbf1b, 0xaf3a,
    0x9f59, 0x8f78, 0x9188, 0x81a9, 0xb1ca, 0xa1eb, 0xd10c, 0xc12d, 0xf14e,
    0xe16f, 0x1080, 0x00a1, 0x30c2, 0x20e3, 0x5004, 0x4025, 0x7046, 0x6067,
    0x83b9, 0x9398, 0xa3fb, 0xb3da, 0xc33d, 0xd31c, 0xe37f, 0xf35e, 0x02b1,
    0x1290, 0x22f3, 0x32d2, 0x4235, 0x5214, 0x6277, 0x7256, 0xb5ea, 0xa5cb,
    0x95a8, 0x8589, 0xf56e, 0xe54f, 0xd52c, 0xc50d, 0x34e2, 0x24c3, 0x14a0,
    0x0481, 0x7466, 0x6447, 0x5424, 0x4405, 0xa7db, 0xb7fa, 0x8799, 0x97b8,
    0xe75f, 0xf77e, 0xc71d, 0xd73c, 0x26d3, 0x36f2, 0x0691, 0x16b0, 0x6657,
    0x7676, 0x4615, 0x5634, 0xd94c, 0xc96d, 0xf90e, 0xe92f, 0x99c8, 0x89e9,
    0xb98a, 0xa9ab, 0x5844, 0x4865, 0x7806, 0x6827, 0x18c0, 0x08e1, 0x3882,
    0x28a3, 0xcb7d, 0xdb5c, 0xeb3f, 0xfb1e, 0x8bf9, 0x9bd8, 0xabbb, 0xbb9a,
    0x4a75, 0x5a54, 0x6a37, 0x7a16, 0x0af1, 0x1ad0, 0x2ab3, 0x3a92, 0xfd2e,
    0xed0f, 0xdd6c, 0xcd4d, 0xbdaa, 0xad8b, 0x9de8, 0x8dc9, 0x7c26, 0x6c07,
    0x5c64, 0x4c45, 0x3ca2, 0x2c83, 0x1ce0, 0x0cc1, 0xef1f, 0xff3e, 0xcf5d,
    0xdf7c, 0xaf9b, 0xbfba, 0x8fd9, 0x9ff8, 0x6e17, 0x7e36, 0x4e55, 0x5e74,
    0x2e93, 0x3eb2, 0x0ed1, 0x1ef0,
};

static uint16_t crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;

    for (size_t i = 0; i < len; i++)
        crc = (uint16_t)((crc << 8)
                         ^ crc16_table[((crc >> 8) ^ (uint8_t)buf[i]) & 0xff]);
    return crc;
}

unsigned dlock__cluster_keyslot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);

    if (open != NULL) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);

        /* An empty tag "{}" does not count: the whole key is hashed. */
        if (close != NULL && close > open + 1)
            return crc16(open + 1, (size_t)(close - open - 1))
                   & (DLOCK__CLUSTER_SLOTS - 1);
    }
    return crc16(key, len) & (DLOCK__CLUSTER_SLOTS - 1);
}

/* Parses "host:port" or "[v6]:port" (host may be empty) into r. */
static int parse_address(const char *s, size_t len, dlock__redirect *r)
{
    const char *colon;
    size_t hlen;
    long port = 0;

    if (len > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', len);

        if (close == NULL || close + 1 >= s + len || close[1] != ':')
            return 0;
        hlen = (size_t)(close - s - 1);
        memcpy(r->host, s + 1, hlen < sizeof(r->host) ? hlen : 0);
        colon = close + 1;
    } else {
        colon = NULL;
        for (const char *p = s; p < s + len; p++)
            if (*p == ':')
                colon = p;
        if (colon == NULL)
            return 0;
        hlen = (size_t)(colon - s);
        memcpy(r->host, s, hlen < sizeof(r->host) ? hlen : 0);
    }
    if (hlen >= sizeof(r->host))
        return 0;
    r->host[hlen] = '\0';
    if (colon + 1 >= s + len || s + len - colon - 1 > 5)
        return 0;
    for (const char *p = colon + 1; p < s + len; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        port = port * 10 + (*p - '0');
    }
    if (port < 1 || port > 65535)
        return 0;
    r->port = (int)port;
    return 1;
}

int dlock__cluster_redirect_parse(const char *text, size_t len,
                                  dlock__redirect *r)
{
    const char *p, *space;
    long slot = 0;

    memset(r, 0, sizeof(*r));
    if (len > 6 && memcmp(text, "MOVED ", 6) == 0)
        p = text + 6;
    else if (len > 4 && memcmp(text, "ASK ", 4) == 0)
        p = text + 4;
    else
        return 0;
    space = memchr(p, ' ', (size_t)(text + len - p));
    if (space == NULL || space == p || space - p > 5)
        return 0;
    for (const char *q = p; q < space; q++) {
        if (*q < '0' || *q > '9')
            return 0;
        slot = slot * 10 + (*q - '0');
    }
    if (slot >= DLOCK__CLUSTER_SLOTS
        || !parse_address(space + 1, (size_t)(text + len - space - 1), r)) {
        memset(r, 0, sizeof(*r));
        return 0;
    }
    r->slot = (int)slot;
    r->kind = text[0] == 'M' ? DLOCK__REDIRECT_MOVED : DLOCK__REDIRECT_ASK;
    return 1;
}

static int starts_with(const redisReply *reply, const char *word)
{
    size_t n = strlen(word);

    return reply->len >= n && memcmp(reply->str, word, n) == 0;
}

dlock__route dlock__cluster_route(dlock_err err, const redisReply *reply,
                                  dlock__redirect *r)
{
    memset(r, 0, sizeof(*r));
    if (err == DLOCK_UNAVAILABLE || err == DLOCK_TIMEOUT)
        return DLOCK__ROUTE_REFRESH;
    if (err != DLOCK_OK || reply == NULL || reply->type != REDIS_REPLY_ERROR)
        return DLOCK__ROUTE_DONE;
    if (dlock__cluster_redirect_parse(reply->str, reply->len, r))
        return DLOCK__ROUTE_REDIRECT;
    if (starts_with(reply, "CLUSTERDOWN") || starts_with(reply, "TRYAGAIN"))
        return DLOCK__ROUTE_REFRESH;
    return DLOCK__ROUTE_DONE;
}

/* ---- the slot map ------------------------------------------------------ */

static dlock_err bad_shape(dlock__msg *m, const char *cmd, const char *server,
                           const char *what)
{
    return dlock__msg_set(m, DLOCK_PROTOCOL, "%s on %s: %s", cmd, server,
                          what);
}

static void map_reset(dlock__slot_map *map)
{
    memset(map, 0, sizeof(*map));
    for (int s = 0; s < DLOCK__CLUSTER_SLOTS; s++)
        map->owner[s] = -1;
}

/* The index of master host:port in map, added if new; -1 when full. */
static int map_master(dlock__slot_map *map, const char *host, size_t hlen,
                      long long port)
{
    for (int i = 0; i < map->nmasters; i++)
        if (map->masters[i].port == port
            && strlen(map->masters[i].host) == hlen
            && strncasecmp(map->masters[i].host, host, hlen) == 0)
            return i;
    if (map->nmasters == DLOCK__NODESET_MAX || hlen == 0
        || hlen >= sizeof(map->masters[0].host) || port < 1 || port > 65535)
        return -1;
    memcpy(map->masters[map->nmasters].host, host, hlen);
    map->masters[map->nmasters].host[hlen] = '\0';
    map->masters[map->nmasters].port = (int)port;
    return map->nmasters++;
}

/* Marks slots first..last as served by master i. */
static int map_assign(dlock__slot_map *map, long long first, long long last,
                      int i)
{
    if (i < 0 || first < 0 || last < first || last >= DLOCK__CLUSTER_SLOTS)
        return 0;
    for (long long s = first; s <= last; s++)
        map->owner[s] = (int16_t)i;
    return 1;
}

static int reply_integer(const redisReply *r, long long *out)
{
    char *end;

    if (r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
        return 1;
    }
    if (r->type != REDIS_REPLY_STRING || r->len == 0 || r->len > 10)
        return 0;
    *out = strtoll(r->str, &end, 10);
    return end == r->str + r->len;
}

/* In a flat RESP2 map [k1, v1, k2, v2, ...], the value of key name. */
static const redisReply *field(const redisReply *flat, const char *name)
{
    if (flat == NULL || flat->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < flat->elements; i += 2) {
        const redisReply *k = flat->element[i];

        if ((k->type == REDIS_REPLY_STRING || k->type == REDIS_REPLY_STATUS)
            && k->len == strlen(name) && memcmp(k->str, name, k->len) == 0)
            return flat->element[i + 1];
    }
    return NULL;
}

static int field_is(const redisReply *flat, const char *name,
                    const char *value)
{
    const redisReply *v = field(flat, name);

    return v != NULL && v->type == REDIS_REPLY_STRING
           && v->len == strlen(value) && memcmp(v->str, value, v->len) == 0;
}

/* The master of one shard of CLUSTER SHARDS, as an index in map; -1 if the
 * shard names none.  Counts the replicas. */
static int shard_master(const redisReply *nodes, dlock__slot_map *map)
{
    int found = -1;

    for (size_t j = 0; j < nodes->elements; j++) {
        const redisReply *node = nodes->element[j];
        const redisReply *ip = field(node, "ip");
        const redisReply *port = field(node, "port");
        long long p;

        if (!field_is(node, "role", "master")) {
            map->nreplicas++;
            continue;
        }
        if (ip == NULL || ip->type != REDIS_REPLY_STRING || port == NULL
            || !reply_integer(port, &p))
            continue;
        found = map_master(map, ip->str, ip->len, p);
    }
    return found;
}

dlock_err dlock__slot_map_from_shards(const redisReply *r, const char *server,
                                      dlock__slot_map *map, dlock__msg *m)
{
    map_reset(map);
    if (r->type != REDIS_REPLY_ARRAY)
        return bad_shape(m, "CLUSTER SHARDS", server, "not an array");
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *slots = field(r->element[i], "slots");
        const redisReply *nodes = field(r->element[i], "nodes");
        int master;

        if (slots == NULL || nodes == NULL || slots->type != REDIS_REPLY_ARRAY
            || nodes->type != REDIS_REPLY_ARRAY || slots->elements % 2 != 0)
            return bad_shape(m, "CLUSTER SHARDS", server,
                             "a shard without slots or nodes");
        master = shard_master(nodes, map);
        for (size_t k = 0; k < slots->elements && master >= 0; k += 2) {
            long long first, last;

            if (!reply_integer(slots->element[k], &first)
                || !reply_integer(slots->element[k + 1], &last)
                || !map_assign(map, first, last, master))
                return bad_shape(m, "CLUSTER SHARDS", server,
                                 "a slot range out of 0..16383");
        }
    }
    return DLOCK_OK;
}

dlock_err dlock__slot_map_from_slots(const redisReply *r, const char *server,
                                     dlock__slot_map *map, dlock__msg *m)
{
    map_reset(map);
    if (r->type != REDIS_REPLY_ARRAY)
        return bad_shape(m, "CLUSTER SLOTS", server, "not an array");
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        const redisReply *node;
        long long first, last, port;
        int master;

        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3
            || !reply_integer(e->element[0], &first)
            || !reply_integer(e->element[1], &last))
            return bad_shape(m, "CLUSTER SLOTS", server, "a malformed range");
        node = e->element[2];
        if (node->type != REDIS_REPLY_ARRAY || node->elements < 2
            || node->element[0]->type != REDIS_REPLY_STRING
            || !reply_integer(node->element[1], &port))
            return bad_shape(m, "CLUSTER SLOTS", server, "a malformed node");
        master = map_master(map, node->element[0]->str, node->element[0]->len,
                            port);
        if (!map_assign(map, first, last, master))
            return bad_shape(m, "CLUSTER SLOTS", server,
                             "a slot range out of 0..16383");
        map->nreplicas += (int)e->elements - 3;
    }
    return DLOCK_OK;
}

int dlock__slot_map_unserved(const dlock__slot_map *map)
{
    int n = 0;

    for (int s = 0; s < DLOCK__CLUSTER_SLOTS; s++)
        n += map->owner[s] < 0;
    return n;
}

/* ---- the cluster client ------------------------------------------------ */

/* Asks node i for the slot map: CLUSTER SHARDS, or SLOTS on a server that
 * does not know SHARDS (before 7.0). */
static dlock_err fetch_map(dlock__cluster *c, int i, int64_t deadline_us,
                           dlock__slot_map *map, dlock__msg *m)
{
    const char *shards[] = {"CLUSTER", "SHARDS"};
    const char *slots[] = {"CLUSTER", "SLOTS"};
    const char *desc = dlock__nodeset_desc(&c->nodes, i);
    redisReply *r;
    dlock_err err;

    err = dlock__nodeset_call(&c->nodes, i, 2, shards, NULL, deadline_us, &r,
                              m);
    if (err != DLOCK_OK)
        return err;
    if (r->type == REDIS_REPLY_ERROR
        && strcasestr(r->str, "unknown") != NULL) {
        freeReplyObject(r);
        err = dlock__nodeset_call(&c->nodes, i, 2, slots, NULL, deadline_us,
                                  &r, m);
        if (err != DLOCK_OK)
            return err;
        if (r->type != REDIS_REPLY_ERROR)
            err = dlock__slot_map_from_slots(r, desc, map, m);
    } else if (r->type != REDIS_REPLY_ERROR) {
        err = dlock__slot_map_from_shards(r, desc, map, m);
    }
    if (r->type == REDIS_REPLY_ERROR)
        err = dlock__reply_error(r, "reading the slot map", desc, m);
    freeReplyObject(r);
    return err;
}

/* Installs map: every master gets a nodeset index, then owner_node is
 * rewritten under the mutex. */
static dlock_err install_map(dlock__cluster *c, dlock__slot_map *map,
                             dlock__msg *m)
{
    int index[DLOCK__NODESET_MAX];
    dlock_err err;

    for (int i = 0; i < map->nmasters; i++) {
        err = dlock__nodeset_add(&c->nodes, &c->template_ep,
                                 map->masters[i].host, map->masters[i].port,
                                 &index[i], m);
        if (err != DLOCK_OK)
            return err;
    }
    pthread_mutex_lock(&c->mu);
    for (int s = 0; s < DLOCK__CLUSTER_SLOTS; s++)
        c->owner_node[s] = map->owner[s] < 0 ? -1 : index[map->owner[s]];
    dlock__free(c->map);
    c->map = map;
    c->refreshes++;
    pthread_mutex_unlock(&c->mu);
    return DLOCK_OK;
}

dlock_err dlock__cluster_refresh(dlock__cluster *c, int64_t deadline_us,
                                 dlock__msg *m)
{
    dlock__slot_map *map = dlock__malloc(sizeof(*map));
    int count = dlock__nodeset_count(&c->nodes);
    dlock_err err = DLOCK_UNAVAILABLE;

    if (map == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "allocating a slot map");
    for (int i = 0; i < count; i++) {
        /* Each node gets its share of the time left, so one that hangs
         * cannot use it all. */
        int64_t now = dlock__now_us(), left = deadline_us - now;
        int64_t share = left / (count - i);
        int64_t sub = now + (share < 50000 ? 50000 : share);

        if (left <= 0)
            break;
        err = fetch_map(c, i, sub < deadline_us ? sub : deadline_us, map, m);
        if (err == DLOCK_OK && dlock__slot_map_unserved(map) == 0)
            return install_map(c, map, m);
    }
    dlock__free(map);
    if (err == DLOCK_OK)
        return dlock__msg_set(m, DLOCK_UNAVAILABLE,
                              "no node of the cluster "
                              "has a map that serves every slot");
    return dlock__msg_wrap(m, err,
                           "reading the cluster's slot map from %d "
                           "nodes",
                           count);
}

dlock_err dlock__cluster_init(dlock__cluster *c, const dlock__deployment *d,
                              const dlock__conn_cfg *cfg, int pool_size,
                              int64_t deadline_us, dlock__msg *m)
{
    dlock_err err;
    int index;

    memset(c, 0, sizeof(*c));
    err = dlock__nodeset_init(&c->nodes, cfg, pool_size, m);
    if (err != DLOCK_OK)
        return err;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        dlock__nodeset_destroy(&c->nodes);
        return dlock__msg_set(m, DLOCK_SYSTEM, "creating a cluster's mutex");
    }
    for (int s = 0; s < DLOCK__CLUSTER_SLOTS; s++)
        c->owner_node[s] = -1;
    c->template_ep = d->nodes[0];
    /* The template borrows the seed's strings only while seeds are added;
     * it keeps its own copies afterwards (below). */
    c->template_ep.host = NULL;
    c->template_ep.user = NULL;
    c->template_ep.password = NULL;
    c->template_ep.path = NULL;
    err = DLOCK_OK;
    if (d->nodes[0].user != NULL) {
        c->template_ep.user = dlock__strdup(d->nodes[0].user);
        if (c->template_ep.user == NULL)
            err = DLOCK_NOMEM;
    }
    if (err == DLOCK_OK && d->nodes[0].password != NULL) {
        c->template_ep.password = dlock__strdup(d->nodes[0].password);
        if (c->template_ep.password == NULL)
            err = DLOCK_NOMEM;
    }
    if (err != DLOCK_OK) {
        err = dlock__msg_set(m, err, "copying the cluster's credentials");
        goto fail;
    }
    for (int i = 0; i < d->nnodes && err == DLOCK_OK; i++)
        err = dlock__nodeset_add(&c->nodes, &c->template_ep, d->nodes[i].host,
                                 d->nodes[i].port, &index, m);
    if (err == DLOCK_OK)
        err = dlock__cluster_refresh(c, deadline_us, m);
    if (err == DLOCK_OK)
        return DLOCK_OK;
fail:
    dlock__cluster_destroy(c);
    return err;
}

void dlock__cluster_destroy(dlock__cluster *c)
{
    dlock__nodeset_destroy(&c->nodes);
    dlock__endpoint_clear(&c->template_ep);
    pthread_mutex_destroy(&c->mu);
    dlock__free(c->map);
    memset(c, 0, sizeof(*c));
}

int dlock__cluster_slot_node(dlock__cluster *c, unsigned slot)
{
    int node;

    pthread_mutex_lock(&c->mu);
    node = c->owner_node[slot & (DLOCK__CLUSTER_SLOTS - 1)];
    pthread_mutex_unlock(&c->mu);
    return node;
}

/* Follows a redirection: the node it names (added if new; an empty host
 * means the one asked).  MOVED also updates the slot's owner at once, so
 * other threads go straight there. */
static dlock_err follow(dlock__cluster *c, const dlock__redirect *r, int asked,
                        int *target, dlock__msg *m)
{
    const dlock__endpoint *asked_ep = dlock__nodeset_endpoint(&c->nodes,
                                                              asked);
    const char *host = r->host;
    dlock_err err;

    if (host[0] == '\0' && asked_ep != NULL)
        host = asked_ep->host;
    if (host[0] == '\0')
        return dlock__msg_set(m, DLOCK_PROTOCOL,
                              "a redirection to slot %d "
                              "names no host",
                              r->slot);
    err = dlock__nodeset_add(&c->nodes, &c->template_ep, host, r->port, target,
                             m);
    if (err != DLOCK_OK || r->kind != DLOCK__REDIRECT_MOVED)
        return err;
    pthread_mutex_lock(&c->mu);
    c->owner_node[r->slot] = *target;
    pthread_mutex_unlock(&c->mu);
    return DLOCK_OK;
}

/* Waits a little before retrying a cluster that is changing (a failover
 * takes a node timeout or more), never past deadline_us. */
static void pause_before_retry(int hop, int64_t deadline_us)
{
    int64_t wait_us = (int64_t)50000 << hop;

    if (dlock__now_us() + wait_us > deadline_us)
        wait_us = deadline_us - dlock__now_us();
    if (wait_us > 0)
        poll(NULL, 0, (int)(wait_us / 1000));
}

dlock_err dlock__cluster_call(dlock__cluster *c, const char *key,
                              size_t keylen, int argc, const char **argv,
                              const size_t *lens, int64_t deadline_us,
                              redisReply **reply, int *node, dlock__msg *m)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    dlock_err err;

    *reply = NULL;
    if (len < 0)
        return dlock__msg_set(m, DLOCK_NOMEM, "formatting %s", argv[0]);
    err = dlock__cluster_call_raw(c, key, keylen, cmd, (size_t)len, argv[0], 1,
                                  deadline_us, reply, node, m);
    free(cmd); /* hiredis allocates with malloc */
    return err;
}

dlock_err dlock__cluster_call_raw(dlock__cluster *c, const char *key,
                                  size_t keylen, const char *cmd, size_t len,
                                  const char *what, int retry_safe,
                                  int64_t deadline_us, redisReply **reply,
                                  int *node, dlock__msg *m)
{
    unsigned slot = dlock__cluster_keyslot(key, keylen);
    int ask_node = -1, target = -1, unanswered;
    dlock_err err = DLOCK_UNAVAILABLE;
    dlock__redirect r;

    *reply = NULL;
    for (int hop = 0; hop <= DLOCK__CLUSTER_HOPS_MAX; hop++) {
        target = ask_node >= 0 ? ask_node : dlock__cluster_slot_node(c, slot);
        if (target < 0) {
            err = dlock__msg_set(m, DLOCK_UNAVAILABLE,
                                 "no master serves "
                                 "slot %u",
                                 slot);
        } else {
            err = dlock__nodeset_call_raw(&c->nodes, target,
                                          ask_node >= 0 ? "ASKING" : NULL, cmd,
                                          len, what, deadline_us, reply, m);
        }
        ask_node = -1;
        switch (dlock__cluster_route(err, *reply, &r)) {
        case DLOCK__ROUTE_DONE:
            if (node != NULL)
                *node = target;
            return err;
        case DLOCK__ROUTE_REDIRECT:
            freeReplyObject(*reply);
            *reply = NULL;
            err = follow(c, &r, target, &ask_node, m);
            if (err != DLOCK_OK)
                return err;
            if (r.kind == DLOCK__REDIRECT_MOVED)
                ask_node = -1;
            break;
        case DLOCK__ROUTE_REFRESH:
            /* A transport error leaves unknown whether the command ran;
             * CLUSTERDOWN and TRYAGAIN say it did not. */
            unanswered = *reply == NULL && target >= 0;
            if (*reply != NULL)
                err = dlock__reply_error(
                    *reply, what, dlock__nodeset_desc(&c->nodes, target), m);
            freeReplyObject(*reply);
            *reply = NULL;
            if (dlock__now_us() >= deadline_us || (unanswered && !retry_safe))
                return err;
            pause_before_retry(hop, deadline_us);
            (void)dlock__cluster_refresh(c, deadline_us, NULL);
            break;
        }
    }
    return dlock__msg_wrap(m, err,
                           "slot %u after %d redirections or "
                           "retries",
                           slot, DLOCK__CLUSTER_HOPS_MAX);
}

/* ---- members, for the doctor -------------------------------------------- */

/* Adds one node of a CLUSTER SHARDS shard to out (and to the nodeset, so
 * commands can be sent to it); shard_master is its master's index in out
 * or -1 for a master itself.  Returns 0 when the node has no address. */
static int add_member(dlock__cluster *c, const redisReply *node,
                      dlock__member *out, dlock__msg *m)
{
    const redisReply *ip = field(node, "ip");
    const redisReply *port = field(node, "port");
    const redisReply *health = field(node, "health");
    long long p;

    memset(out, 0, sizeof(*out));
    if (ip == NULL || ip->type != REDIS_REPLY_STRING || port == NULL
        || !reply_integer(port, &p) || p < 1 || p > 65535)
        return 0;
    out->master = field_is(node, "role", "master");
    if (health != NULL && health->type == REDIS_REPLY_STRING)
        snprintf(out->health, sizeof(out->health), "%s", health->str);
    if (dlock__nodeset_add(&c->nodes, &c->template_ep, ip->str, (int)p,
                           &out->node, m)
        != DLOCK_OK)
        return 0;
    return 1;
}

dlock_err dlock__cluster_members(dlock__cluster *c, int64_t deadline_us,
                                 dlock__member *out, int max, int *count,
                                 dlock__msg *m)
{
    const char *argv[] = {"CLUSTER", "SHARDS"};
    redisReply *r;
    dlock_err err = dlock__cluster_call(c, "", 0, 2, argv, NULL, deadline_us,
                                        &r, NULL, m);

    *count = 0;
    if (err != DLOCK_OK)
        return err;
    if (r->type != REDIS_REPLY_ARRAY) {
        err = r->type == REDIS_REPLY_ERROR
                  ? dlock__reply_error(r, "CLUSTER SHARDS", "the cluster", m)
                  : bad_shape(m, "CLUSTER SHARDS", "the cluster",
                              "not an array");
        freeReplyObject(r);
        return err;
    }
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *nodes = field(r->element[i], "nodes");
        int first = *count;

        for (size_t j = 0; nodes != NULL && nodes->type == REDIS_REPLY_ARRAY
                           && j < nodes->elements && *count < max;
             j++)
            *count += add_member(c, nodes->element[j], &out[*count], m);
        /* Each replica names its shard's master (the first listed). */
        for (int k = first; k < *count; k++) {
            out[k].shard = (int)i;
            out[k].master_node = -1;
            for (int j = first; j < *count; j++)
                if (!out[k].master && out[j].master)
                    out[k].master_node = out[j].node;
        }
    }
    freeReplyObject(r);
    return DLOCK_OK;
}

dlock_err dlock__cluster_node_call(dlock__cluster *c, int node, int argc,
                                   const char **argv, int64_t deadline_us,
                                   redisReply **reply, dlock__msg *m)
{
    return dlock__nodeset_call(&c->nodes, node, argc, argv, NULL, deadline_us,
                               reply, m);
}
