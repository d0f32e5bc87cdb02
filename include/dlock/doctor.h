/*
 * dlock/doctor.h: is this Redis server safe for locks?
 *
 * dlock's guarantees (docs/guarantees.md) hold only on a server set up for
 * them.  dlock_doctor_run asks the server (INFO and TIME, two round trips,
 * nothing written) and judges five things, each SAFE, UNSAFE or UNKNOWN
 * with one sentence saying what was found and why it matters:
 *   version      the scripts need Redis DLOCK_REDIS_MIN_VERSION or later
 *                (they read TIME before they write, which needs script
 *                effects replication, the default since 5.0);
 *   eviction     maxmemory-policy must be noeviction: any other policy may
 *                drop a held lock or a fence counter once memory is full;
 *   persistence  AOF must be on: without it a restart forgets held locks
 *                (another client can take one still in use) and counters;
 *   replication  the server must be a primary, and its replicas in sync: a
 *                failover to a lagging replica loses the last grants;
 *   clock        the server's wall clock within 1 s of ours: fences come
 *                from it and keys expire by it.
 * UNKNOWN means the server's answer did not say (a field missing).
 *
 * The report is the caller's (a plain struct, no allocation).  Threads: as
 * any call on a dlock_client.
 */
#ifndef DLOCK_DOCTOR_H
#define DLOCK_DOCTOR_H

#include "dlock/client.h"
#include "dlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The oldest Redis the library's scripts run on. */
#define DLOCK_REDIS_MIN_VERSION "5.0.0"

/* The largest server clock offset from ours that is judged safe. */
#define DLOCK_DOCTOR_CLOCK_MAX_MS 1000

typedef enum dlock_doctor_verdict {
    DLOCK_DOCTOR_SAFE = 0,
    DLOCK_DOCTOR_UNSAFE = 1,
    DLOCK_DOCTOR_UNKNOWN = 2
} dlock_doctor_verdict;

typedef struct dlock_doctor_check {
    const char *name; /* static: "version", "eviction", ... */
    dlock_doctor_verdict verdict;
    char found[64]; /* what the server said: "7.0.15" */
    char why[320];  /* one sentence for people */
} dlock_doctor_check;

#define DLOCK_DOCTOR_CHECKS 5

typedef struct dlock_doctor_report {
    dlock_doctor_check checks[DLOCK_DOCTOR_CHECKS];
    int unsafe;  /* how many checks are UNSAFE */
    int unknown; /* how many are UNKNOWN */
} dlock_doctor_report;

/*
 * Fills *report.  Returns DLOCK_OK when the server answered (whatever the
 * verdicts), or the error of the round trip that failed
 * (DLOCK_UNAVAILABLE, DLOCK_TIMEOUT, DLOCK_AUTH when INFO or TIME is not
 * allowed, ...; dlock_client_errmsg says more), with *report zeroed.
 */
DLOCK_API dlock_err dlock_doctor_run(dlock_client *client,
                                     dlock_doctor_report *report);

/* Most servers dlock_doctor_run_cluster judges. */
#define DLOCK_DOCTOR_NODES_MAX 64

/* One server of a Redis Cluster, judged on its own. */
typedef struct dlock_doctor_node {
    char server[280]; /* "127.0.0.1:7001" */
    char role[320];   /* "master (shard 0)", "replica of ... (shard 0)" */
    dlock_err err;    /* DLOCK_OK: report is filled; else why not in error */
    char error[DLOCK_ERRMSG_MAX];
    dlock_doctor_report report;
} dlock_doctor_node;

/*
 * For a client of a Redis Cluster (redis+cluster://): lists every master
 * and replica of every shard (CLUSTER SHARDS, Redis 7.0 or later) and
 * judges each on its own as dlock_doctor_run does, except that a replica's
 * replication check looks at its link to its master (it takes over after a
 * failover).  Fills nodes[0..*count) with at most max servers (at most
 * DLOCK_DOCTOR_NODES_MAX); a server that cannot be asked gets its error
 * in its own entry.  Returns DLOCK_OK when the list was read (whatever
 * the verdicts), DLOCK_INVALID for a client of another deployment or bad
 * arguments, or the error of reading the list.
 */
DLOCK_API dlock_err dlock_doctor_run_cluster(dlock_client *client,
                                             dlock_doctor_node *nodes, int max,
                                             int *count);

/* "safe", "unsafe" or "unknown". */
DLOCK_API const char *dlock_doctor_verdict_name(dlock_doctor_verdict v);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_DOCTOR_H */
