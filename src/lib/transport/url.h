/*
 * url.h: Redis URLs parsed into an endpoint.
 *
 * The accepted forms (see dlock_client_new):
 *   redis://[user[:pass]@]host[:port][/db][?db=N]
 *   (every form also takes ?wait_replicas=N&wait_timeout=MS, replwait.h)
 *   rediss://...            the same over TLS
 *   unix://[user[:pass]@]/absolute/path.sock[?db=N]
 * The scheme is case-insensitive; user and password are percent-decoded;
 * an IPv6 host is written in brackets.  Anything else is DLOCK_INVALID with
 * a message naming the part that is wrong (never the password).
 *
 * Deployments of several servers (docs/deployments.md) have URLs of their
 * own, parsed by dlock__url_parse_deployment:
 *   redis+sentinel://[user[:pass]@]host[:port],host[:port].../MASTER[?db=N]
 *       sentinels (default port 26379) that name the master MASTER
 *   redis+cluster://[user[:pass]@]host[:port],...      cluster seed nodes
 *   redlock://[user[:pass]@]host[:port],host[:port],...[/db][?db=N]
 *       3 or more independent masters
 * and rediss+sentinel://, rediss+cluster://, redlocks:// over TLS.  The
 * user, password, TLS and db apply to every server of the list; a server
 * named twice is refused (it would count twice towards a Redlock majority),
 * and so is a db other than 0 for a cluster (it has no other).
 */
#ifndef DLOCK_SRC_URL_H
#define DLOCK_SRC_URL_H

#include "base/msg.h"

typedef enum dlock__transport {
    DLOCK__TCP = 0,
    DLOCK__TLS = 1,
    DLOCK__UNIX = 2
} dlock__transport;

/* Longest URL accepted, in bytes. */
#define DLOCK__URL_MAX 4096

typedef struct dlock__endpoint {
    dlock__transport transport;
    char *host;          /* TCP and TLS: host name or address, no brackets */
    int port;            /* TCP and TLS: 1..65535 */
    char *path;          /* UNIX: socket path */
    char *user;          /* NULL when absent */
    char *password;      /* NULL when absent */
    int db;              /* 0.. */
    int wait_replicas;   /* ?wait_replicas=N (replwait.h); 0 when absent */
    int wait_timeout_ms; /* ?wait_timeout=MS; 0 when absent */
    char desc[300]; /* "host:port", "[::1]:port" or "unix:/path", for logs */
} dlock__endpoint;

/* Parses a single-server url (redis://, rediss:// or unix://) into ep
 * (whose previous contents are ignored).  A deployment URL is refused with
 * a message that says so.  On failure ep holds nothing that needs freeing.
 * Returns DLOCK_OK, DLOCK_INVALID or DLOCK_NOMEM. */
dlock_err dlock__url_parse(const char *url, dlock__endpoint *ep,
                           dlock__msg *m);

/* Frees what ep owns and zeroes it; safe on a zeroed endpoint. */
void dlock__endpoint_clear(dlock__endpoint *ep);

/* Makes dst a deep copy of src.  On failure dst holds nothing to free.
 * Returns DLOCK_OK or DLOCK_NOMEM. */
dlock_err dlock__endpoint_copy(dlock__endpoint *dst,
                               const dlock__endpoint *src, dlock__msg *m);

typedef enum dlock__deploy_kind {
    DLOCK__SINGLE = 0,   /* redis://, rediss://, unix://: one server */
    DLOCK__SENTINEL = 1, /* nodes are sentinels; master_name is set */
    DLOCK__CLUSTER = 2,  /* nodes are seeds of one cluster */
    DLOCK__REDLOCK = 3   /* nodes are independent masters */
} dlock__deploy_kind;

/* Most servers one URL may name. */
#define DLOCK__NODES_MAX 16
/* Fewest masters a Redlock URL may name. */
#define DLOCK__REDLOCK_MIN 3
/* Longest Sentinel master name, in bytes. */
#define DLOCK__MASTER_NAME_MAX 128

typedef struct dlock__deployment {
    dlock__deploy_kind kind;
    int nnodes;                              /* 1..DLOCK__NODES_MAX */
    dlock__endpoint nodes[DLOCK__NODES_MAX]; /* each owns its strings */
    char *master_name;                       /* DLOCK__SENTINEL only */
    int db; /* the locks' database: every node's, or the Sentinel master's
              * (the sentinels' own endpoints have db 0) */
    int wait_replicas;   /* the URL's ?wait_replicas=N, else 0 */
    int wait_timeout_ms; /* the URL's ?wait_timeout=MS, else 0 */
} dlock__deployment;

/* Parses any URL above into d (whose previous contents are ignored): a
 * single-server URL gives kind DLOCK__SINGLE and one node, parsed as by
 * dlock__url_parse.  On failure d holds nothing that needs freeing.
 * Returns DLOCK_OK, DLOCK_INVALID or DLOCK_NOMEM. */
dlock_err dlock__url_parse_deployment(const char *url, dlock__deployment *d,
                                      dlock__msg *m);

/* Frees what d owns and zeroes it; safe on a zeroed deployment. */
void dlock__deployment_clear(dlock__deployment *d);

/* "single", "sentinel", "cluster" or "redlock", for messages. */
const char *dlock__deploy_kind_name(dlock__deploy_kind kind);

#endif /* DLOCK_SRC_URL_H */
