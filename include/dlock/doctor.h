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

/* One server of a deployment as dlock_doctor_nodes saw it. */
typedef struct dlock_doctor_node {
    char node[280]; /* "host:port" */
    char role[16];  /* "sentinel", "master" or "replica" */
    int answered;   /* 0: it could not be asked (note says why) */
    int checked;    /* 1: report holds the five checks (masters) */
    dlock_doctor_report report;
    char note[320]; /* sentinel: the master it names and what it counts;
                     * replica: its link state, lag and bytes behind;
                     * cluster: the shard (and a replica's master) */
} dlock_doctor_node;

/* Most servers dlock_doctor_nodes reports. */
#define DLOCK_DOCTOR_NODES_MAX 64

/*
 * For a deployment of several servers: a redis+sentinel:// client gives
 * every sentinel (SENTINEL MASTER: the master it names, its replicas and
 * sentinels), the current master (the five checks) and each replica the
 * master lists (state, lag, bytes behind); a redlock:// client gives
 * every master with the five checks; a redis+cluster:// client gives every
 * master and replica of every shard (CLUSTER SHARDS, Redis 7.0 or later),
 * each with the five checks, a replica's replication check judging its
 * link to its master (it takes over after a failover).  Each server is asked in turn,
 * bounded by the I/O timeout.  out[0..max) receives the servers, *n how
 * many.  Returns DLOCK_OK (a server that did not answer says so in its
 * entry), or DLOCK_INVALID for a single server (use dlock_doctor_run).
 */
DLOCK_API dlock_err dlock_doctor_nodes(dlock_client *client,
                                       dlock_doctor_node *out, int max,
                                       int *n);

/* "safe", "unsafe" or "unknown". */
DLOCK_API const char *dlock_doctor_verdict_name(dlock_doctor_verdict v);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_DOCTOR_H */
