/*
 * sentinel.h: finding the master of a Sentinel-managed deployment.
 *
 * The sentinels of the URL are asked in turn (SENTINEL
 * GET-MASTER-ADDR-BY-NAME) for the master's address; the first address
 * whose server answers ROLE with "master" is used, so a replica is never
 * taken for a master (a sentinel that has not yet seen a failover, or a
 * demoted master that has not yet been told, both answer wrongly for a
 * while).  A failover is followed in two ways: a subscriber on any
 * sentinel hears +switch-master at once, and a command that answers
 * READONLY or loses its connection makes the caller discover again.
 *
 * Ownership: a dlock__sentinel copies what it needs of the deployment;
 * it borrows cfg, which must outlive it.  The master endpoint that
 * dlock__sentinel_discover fills is the caller's (dlock__endpoint_clear).
 * Threads: every function is thread-safe; a subscribed connection
 * belongs to the thread that reads it.
 */
#ifndef DLOCK_SRC_SENTINEL_H
#define DLOCK_SRC_SENTINEL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "transport/conn.h"
#include "base/msg.h"
#include "deploy/nodeset.h"
#include "transport/url.h"

typedef struct dlock__sentinel {
    dlock__nodeset sentinels;  /* the URL's sentinels, in its order */
    dlock__endpoint master_ep; /* credentials, transport, db; no host */
    char master_name[DLOCK__MASTER_NAME_MAX + 1];
    const dlock__conn_cfg *cfg;
} dlock__sentinel;

/* Prepares discovery over d's sentinels (d->kind DLOCK__SENTINEL); no
 * connection is made yet.  Returns DLOCK_OK, DLOCK_NOMEM or
 * DLOCK_SYSTEM. */
dlock_err dlock__sentinel_init(dlock__sentinel *s, const dlock__deployment *d,
                               const dlock__conn_cfg *cfg, dlock__msg *m);
void dlock__sentinel_destroy(dlock__sentinel *s);

/*
 * Finds the master before deadline_us: each sentinel in turn names it,
 * and its ROLE must say master.  On DLOCK_OK, *master is a complete
 * endpoint of the master (the caller's, to clear).  Returns DLOCK_OK,
 * DLOCK_UNAVAILABLE (no sentinel answered, none knows the name, or what
 * they name is not a master: the message says which), DLOCK_NOMEM, or
 * DLOCK_AUTH.
 */
dlock_err dlock__sentinel_discover(dlock__sentinel *s, int64_t deadline_us,
                                   dlock__endpoint *master, dlock__msg *m);

/* 1 if a ROLE reply says master. */
int dlock__role_is_master(const redisReply *role);

/* Parses a +switch-master payload "<name> <old ip> <old port> <new ip>
 * <new port>": 1 and the new address when it is about master name, else
 * 0. */
int dlock__sentinel_parse_switch(const char *payload, size_t len,
                                 const char *name, char host[256], int *port);

/* Connects to the first sentinel that answers and subscribes it to
 * +switch-master.  *out is the caller's (dlock__conn_free). */
dlock_err dlock__sentinel_subscribe(dlock__sentinel *s, int64_t deadline_us,
                                    dlock__conn **out, dlock__msg *m);

/* Waits on a subscribed connection until deadline_us for a switch of our
 * master: DLOCK_OK with its new address, DLOCK_TIMEOUT when none came (the
 * connection stays usable), or a transport error (then subscribe
 * again). */
dlock_err dlock__sentinel_next_switch(dlock__sentinel *s, dlock__conn *sub,
                                      int64_t deadline_us, char host[256],
                                      int *port, dlock__msg *m);

#endif /* DLOCK_SRC_SENTINEL_H */
