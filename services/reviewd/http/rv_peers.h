/*
 * rv_peers.h: open connections per client address, for
 * REVIEWD_MAX_CONNECTIONS_PER_IP.
 *
 * reviewd runs several event loops (rv_loop.h); a count per loop would
 * allow each address the limit once per loop.  This count is the
 * process's: the listener asks before handing a connection on, and the
 * connection's close gives its slot back.
 *
 * Ownership: rv_peers_new / rv_peers_free.  Threads: any (one mutex,
 * held for a scan of the addresses connected now).
 */
#ifndef RV_PEERS_H
#define RV_PEERS_H

#include <sys/socket.h>

typedef struct rv_peers rv_peers;

/* limit: connections per address (0: no limit).  NULL out of memory. */
rv_peers *rv_peers_new(unsigned limit);
void rv_peers_free(rv_peers *p);

/* Takes a slot for addr: 1, or 0 when its addresses' limit is reached
 * (or out of memory). */
int rv_peers_add(rv_peers *p, const struct sockaddr *addr);

/* Gives back a slot that rv_peers_add took for addr. */
void rv_peers_remove(rv_peers *p, const struct sockaddr *addr);

#endif /* RV_PEERS_H */
