/*
 * cluster.h: Redis Cluster routing: key slots, the slot map, MOVED/ASK.
 *
 * A cluster splits keys into 16384 slots by CRC16 of the key (or of its
 * hash tag, the part between the first '{' and the next '}' when that part
 * is not empty), and each slot is served by one master.  The core puts a
 * lock's key, fence counter and channel under one hash tag, so one slot
 * (one master) serves everything a lock does.
 *
 * The slot map says which master serves each slot.  It is read from CLUSTER
 * SHARDS (Redis 7) or CLUSTER SLOTS (older servers) and read again when a
 * server answers MOVED (the slot has a new owner: a failover or a finished
 * migration), CLUSTERDOWN or TRYAGAIN, or when a node cannot be reached.
 * ASK (a slot in migration whose key already moved) is followed once, with
 * ASKING first, without changing the map.
 *
 * A dlock__cluster owns the map and a dlock__nodeset of every node it has
 * heard of.  dlock__cluster_call runs one command for a key on the master
 * of the key's slot and follows redirections, each command bounded by the
 * caller's deadline.
 *
 * Ownership: the cluster copies the seed endpoints; it borrows cfg.
 * Threads: every function is thread-safe; the map is replaced under the
 * cluster's mutex and read under it.
 */
#ifndef DLOCK_SRC_CLUSTER_H
#define DLOCK_SRC_CLUSTER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "transport/conn.h"
#include "base/msg.h"
#include "deploy/nodeset.h"
#include "transport/url.h"

#define DLOCK__CLUSTER_SLOTS 16384
/* Redirections followed for one command before giving up. */
#define DLOCK__CLUSTER_HOPS_MAX 5

/* The slot of key[0..len), with hash tags. */
unsigned dlock__cluster_keyslot(const char *key, size_t len);

typedef enum dlock__redirect_kind {
    DLOCK__REDIRECT_NONE = 0,
    DLOCK__REDIRECT_MOVED = 1, /* the slot's owner changed: update map */
    DLOCK__REDIRECT_ASK = 2    /* this key only, this once, with ASKING */
} dlock__redirect_kind;

typedef struct dlock__redirect {
    dlock__redirect_kind kind;
    int slot;
    char host[256]; /* no brackets */
    int port;
} dlock__redirect;

/* Parses an error text such as "MOVED 3999 127.0.0.1:6381" or
 * "ASK 3999 [::1]:6381" (an empty host, as older servers send it for
 * "the address you used", is left empty).  Returns 1 and fills r for a
 * well-formed redirection, 0 otherwise (r->kind is NONE then). */
int dlock__cluster_redirect_parse(const char *text, size_t len,
                                  dlock__redirect *r);

/* What to do after a reply (pure, for tests and for dlock__cluster_call):
 * DONE: the reply is the answer; REDIRECT: r is filled, follow it;
 * REFRESH: the cluster is changing (CLUSTERDOWN, TRYAGAIN, or a transport
 * error), read the map again and retry after a pause. */
typedef enum dlock__route {
    DLOCK__ROUTE_DONE = 0,
    DLOCK__ROUTE_REDIRECT = 1,
    DLOCK__ROUTE_REFRESH = 2
} dlock__route;

dlock__route dlock__cluster_route(dlock_err err, const redisReply *reply,
                                  dlock__redirect *r);

typedef struct dlock__slot_map {
    int nmasters;
    struct {
        char host[256];
        int port;
    } masters[DLOCK__NODESET_MAX];
    int16_t owner[DLOCK__CLUSTER_SLOTS]; /* index in masters, -1: none */
    int nreplicas;                       /* replicas seen, for doctor */
} dlock__slot_map;

/* Builds map from a CLUSTER SHARDS reply (RESP2) or a CLUSTER SLOTS reply.
 * server names the node that answered, for messages.  Returns DLOCK_OK or
 * DLOCK_PROTOCOL (a reply of another shape). */
dlock_err dlock__slot_map_from_shards(const redisReply *r, const char *server,
                                      dlock__slot_map *map, dlock__msg *m);
dlock_err dlock__slot_map_from_slots(const redisReply *r, const char *server,
                                     dlock__slot_map *map, dlock__msg *m);

/* Slots of map with no master. */
int dlock__slot_map_unserved(const dlock__slot_map *map);

typedef struct dlock__cluster {
    dlock__nodeset nodes;        /* seeds first, then every node heard of */
    dlock__endpoint template_ep; /* credentials, transport for new nodes */
    pthread_mutex_t mu;
    dlock__slot_map *map;                 /* NULL until the first refresh */
    int owner_node[DLOCK__CLUSTER_SLOTS]; /* nodeset index, -1: unknown */
    uint64_t refreshes;
} dlock__cluster;

/* Prepares a cluster client from d's seeds (d->kind DLOCK__CLUSTER) and
 * reads the slot map from the first seed that answers, before
 * deadline_us.  On failure c holds nothing to free.  Returns DLOCK_OK,
 * DLOCK_UNAVAILABLE (no seed answered), DLOCK_NOMEM, DLOCK_PROTOCOL, ... */
dlock_err dlock__cluster_init(dlock__cluster *c, const dlock__deployment *d,
                              const dlock__conn_cfg *cfg, int pool_size,
                              int64_t deadline_us, dlock__msg *m);

void dlock__cluster_destroy(dlock__cluster *c);

/* Reads the slot map again, from the nodes it knows in turn. */
dlock_err dlock__cluster_refresh(dlock__cluster *c, int64_t deadline_us,
                                 dlock__msg *m);

/* The nodeset index of the master serving slot, or -1 if none. */
int dlock__cluster_slot_node(dlock__cluster *c, unsigned slot);

/* Runs one command about the key key[0..keylen) on the master of its slot,
 * following MOVED (with a map refresh), ASK, CLUSTERDOWN and TRYAGAIN up
 * to DLOCK__CLUSTER_HOPS_MAX times, all before deadline_us.  Error replies
 * other than redirections come back as replies, as from
 * dlock__nodeset_call.  *node (may be NULL) is the nodeset index that
 * answered. */
dlock_err dlock__cluster_call(dlock__cluster *c, const char *key,
                              size_t keylen, int argc, const char **argv,
                              const size_t *lens, int64_t deadline_us,
                              redisReply **reply, int *node, dlock__msg *m);

/* The same for a command formatted in RESP, cmd[0..len) (borrowed), named
 * what in messages.  After a transport failure the command may have run:
 * it is sent again only if retry_safe (dlock__cluster_call always is). */
dlock_err dlock__cluster_call_raw(dlock__cluster *c, const char *key,
                                  size_t keylen, const char *cmd, size_t len,
                                  const char *what, int retry_safe,
                                  int64_t deadline_us, redisReply **reply,
                                  int *node, dlock__msg *m);

/* One node of the cluster as CLUSTER SHARDS lists it, for the doctor. */
typedef struct dlock__member {
    int node;        /* nodeset index: send it commands with that */
    int master;      /* 1: a master; 0: a replica */
    int master_node; /* a replica's master (nodeset index), else -1 */
    int shard;       /* index of its shard in the listing */
    char health[16]; /* "online", "failed", "loading", "" */
} dlock__member;

/* Lists every master and replica (at most max) from CLUSTER SHARDS on
 * slot 0's master, adding each to the nodeset.  Returns DLOCK_OK, a
 * transport error, DLOCK_PROTOCOL or the server's refusal (before Redis
 * 7.0 CLUSTER SHARDS does not exist: DLOCK_SERVER). */
dlock_err dlock__cluster_members(dlock__cluster *c, int64_t deadline_us,
                                 dlock__member *out, int max, int *count,
                                 dlock__msg *m);

/* Runs a command on node (a nodeset index) itself, master or replica,
 * without routing; error replies come back as replies. */
dlock_err dlock__cluster_node_call(dlock__cluster *c, int node, int argc,
                                   const char **argv, int64_t deadline_us,
                                   redisReply **reply, dlock__msg *m);

#endif /* DLOCK_SRC_CLUSTER_H */
