/*
 * scalekit.h: what the scale-out tests share: the multi-server
 * deployments of scripts/stack (redlock, sentinel, cluster), started on
 * demand, and signals to one of their nodes by its pid file.
 *
 * The tests of this folder check the library's internal modules
 * (sentinel.c, cluster.c, redlock.c) against real servers, so they link
 * dlock_testing and include src/lib headers, as the unit tests do.
 */
#ifndef DLOCK_SCALEKIT_H
#define DLOCK_SCALEKIT_H

#include <signal.h>

#include "transport/url.h"

/*
 * The URL of deployment group ("sentinel", "cluster", "redlock"): runs
 * scripts/stack up <group> (which leaves running nodes alone and restarts
 * missing ones, all with bounded waits) and reads the URL from
 * scripts/stack env <group>.  Returns a static buffer, or NULL with the
 * reason on stderr.
 */
const char *scalekit_group_url(const char *group);

/* Stops the group if scalekit_group_url started it (it was not running
 * before this process asked), so a test run leaves what it found. */
void scalekit_group_done(void);

/* Parses url into d, failing the test when it does not parse. */
void scalekit_deployment(const char *url, dlock__deployment *d);

/* Sends sig to the node of group on port, found through its pid file in
 * var/stack/<group>/<port>/ and checked to be a redis-server in /proc.
 * Returns the pid signalled, or -1. */
int scalekit_signal_node(const char *group, int port, int sig);

/* "redis://127.0.0.1:<port>/0", for testkit_redis_cmd. */
const char *scalekit_node_url(int port, char *buf, size_t size);

/*
 * The cluster group's topology and changes, through the nodes themselves
 * (CLUSTER SLOTS from the node on any_port):
 *   scalekit_cluster_master_of      the port of slot's master, or -1;
 *   scalekit_cluster_other_master   a master other than master_port;
 *   scalekit_cluster_replica_of     a replica of master_port whose link
 *                                   is up, waiting up to 30 s (fails the
 *                                   test otherwise);
 *   scalekit_cluster_migrate_slot   moves slot and its keys to the master
 *                                   on port to (IMPORTING, MIGRATING,
 *                                   MIGRATE in batches, SETSLOT NODE);
 *                                   returns the number of keys moved;
 *   scalekit_cluster_nodes          the ports of every master and replica
 *                                   (at most max), returns how many.
 */
int scalekit_cluster_master_of(int any_port, unsigned slot);
int scalekit_cluster_other_master(int any_port, int master_port);
int scalekit_cluster_replica_of(int any_port, int master_port);
int scalekit_cluster_migrate_slot(int any_port, unsigned slot, int to);
int scalekit_cluster_nodes(int any_port, int *ports, int max);

#endif /* DLOCK_SCALEKIT_H */
