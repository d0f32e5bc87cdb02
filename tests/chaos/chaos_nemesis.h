/*
 * chaos_nemesis.h: the processes of one phase and the faults injected into
 * them (chaos_nemesis.c), used by chaos_check.c.
 *
 * A phase owns a private redis-server (through testkit, so it runs from
 * var/test/, on a free loopback port, and is stopped by its pid), the
 * client processes, and while a CPU-hog fault lasts, the hog processes.
 * Every client is the leader of its own process group, so that a fault
 * reaches the whole client: for `dlock run` clients that is the loop, dlock
 * and the step it runs, as a pause or a crash of a machine would.  Nothing
 * is ever signalled by name; every wait is bounded.
 *
 * Fault events, in events.log (chaos_analyze.c reads them):
 *   fault <kind> <client id or 0> <duration ms>   when it starts
 *   fault_end <kind> <client id or 0>             when it is over
 * with kind one of pause, kill, crash_nopersist, crash_aof, redis_stop,
 * hog, net_silence, clock_back, clock_fwd, clock_jump, slow_lua, slow_net,
 * redlock_minority, cluster_failover, cluster_kill.  A killed client is
 * started again at once ("respawn <id>").
 *
 * The deployment a phase locks on (chaos_deploy.c) is one of:
 *   one server   as above;
 *   proxied      one server, each client through its own dlock-test-proxy
 *                (tests/support), so that one holder's network can go
 *                silent (bytes held, no reset) or every client's be slowed;
 *   wallclock    one server under the wall-clock shim, so that its clock
 *                (key expiry, TIME, clock-based fences) can be stepped;
 *   redlock      five independent masters (appendonly, appendfsync
 *                always, as Redlock's fences need), redlock:// URLs;
 *   cluster      three masters with a replica each, redis+cluster://.
 */
#ifndef DLOCK_CHAOS_NEMESIS_H
#define DLOCK_CHAOS_NEMESIS_H

#include <stdint.h>
#include <sys/types.h>

#include "chaos.h"
#include "testkit.h"

struct chaos_phase;

/* Most redis-server processes in one deployment. */
#define CHAOS_NODES_MAX 6

typedef enum chaos_topology {
    CHAOS_ONE_SERVER = 0,
    CHAOS_PROXIED,
    CHAOS_WALLCLOCK,
    CHAOS_REDLOCK,
    CHAOS_CLUSTER
} chaos_topology;

/* How the clients of a phase are started. */
typedef struct chaos_client_cfg {
    const char *client_bin; /* chaos_client */
    const char *step_bin;   /* chaos_step */
    const char *dlock_bin;  /* dlock, or NULL: no cli clients */
    int api_clients, cli_clients;
    int64_t ttl_ms, wait_ms, work_min_ms, work_max_ms;
    int64_t think_min_ms, think_max_ms; /* pause after each release */
    int watchdog;                       /* for api clients */
    int cpu;                            /* pin clients here; -1: no */
    int hog_cpu;                        /* pin CPU hogs here */
    chaos_fencing fencing;
    const char *sabotage; /* NULL, or a way to break the lock */
    /* Fair locks (opts.fair, dlock run --fair): CHAOS_FAIR_NONE, _ALL, or
     * _SOME (the clients with an even id; the others plain, on the same
     * key: the mixed parties docs/fair.md describes). */
    int fair;
    uint64_t seed;
} chaos_client_cfg;

enum { CHAOS_FAIR_NONE, CHAOS_FAIR_ALL, CHAOS_FAIR_SOME };

typedef struct chaos_proc {
    pid_t pid; /* 0: not running */
    int id;
    int cli;
    int killed; /* we sent the SIGKILL that ended it */
} chaos_proc;

/* One phase's running state. */
typedef struct chaos_nemesis {
    char dir[800];
    char key[128];
    chaos_topology topology;
    testkit_redis *redis;                  /* one server, or nodes[0] */
    testkit_redis *nodes[CHAOS_NODES_MAX]; /* redlock / cluster */
    int nnodes;
    testkit_proxy *proxies[CHAOS_CLIENTS_MAX]; /* proxied: by client id */
    char url[1200];   /* what the clients lock on (without proxies) */
    int64_t clock_ms; /* wallclock: the server's offset now */
    int persist;      /* AOF with appendfsync always */
    chaos_slot *board;
    int events; /* events.log */
    chaos_rng rng;
    chaos_client_cfg cfg;
    chaos_proc procs[CHAOS_CLIENTS_MAX];
    int nprocs;
    int64_t until_us; /* clients start no cycle after this */
    int failures;     /* clients that ended on their own badly */
} chaos_nemesis;

/* Starts the phase's deployment (with AOF and appendfsync always when
 * persist), names the lock key, opens the logs and the board.  Returns 0
 * or -1 (message on stderr). */
int chaos_nemesis_setup(chaos_nemesis *n, const char *dir, const char *name,
                        int persist, chaos_topology topology);

/* ---- deployments (chaos_deploy.c) ---- */

/* Starts n->topology's servers (and proxies) and sets n->url. */
int chaos_deploy_start(chaos_nemesis *n);
/* Stops everything chaos_deploy_start started. */
void chaos_deploy_stop(chaos_nemesis *n);
/* The URL client id locks on: its proxy's, or n->url. */
const char *chaos_deploy_client_url(const chaos_nemesis *n, int id);

/*
 * Whether this build's client serves a URL of the topology's kind, asked
 * of the library itself before any server is started (chaos_client
 * --probe-url against a closed port, its answer in dir/url-probe.log):
 * 1 yes, 0 no with the library's reason in why, -1 when the probe could
 * not run.
 */
int chaos_deploy_api_serves(const chaos_client_cfg *cfg,
                            chaos_topology topology, const char *dir,
                            char *why, size_t len);

/* Whether `dlock run` works over n->url (one run of `true` under a lock):
 * 1 yes, 0 no with dlock's first line of stderr in why. */
int chaos_deploy_cli_serves(chaos_nemesis *n, char *why, size_t len);

/* Starts every client, to stop starting cycles at until_us. */
int chaos_nemesis_start_clients(chaos_nemesis *n, int64_t until_us);

/* Reaps clients that ended (counting those we did not end as failures,
 * and starting them again if the phase runs on). */
void chaos_nemesis_reap(chaos_nemesis *n);

/* Waits until every client has ended, at most until deadline_us; then
 * kills what is left (counted as failures: a client that does not stop is
 * stuck). */
void chaos_nemesis_wait_clients(chaos_nemesis *n, int64_t deadline_us);

/* Stops everything still running and frees the server; keeps the logs. */
void chaos_nemesis_teardown(chaos_nemesis *n);

/* A running client that holds the lock now, waiting up to 500 ms for one;
 * NULL if none. */
chaos_proc *chaos_pick_holder(chaos_nemesis *n);

/* A fault's duration drawn in [lo_ms, hi_ms], cut to end when the clients
 * stop (until_us), so that no fault outlasts its phase. */
int64_t chaos_fault_ms(chaos_nemesis *n, int64_t lo_ms, int64_t hi_ms);

/* The faults.  Each logs its fault/fault_end events and returns 1 when it
 * was injected, 0 when it could not be (no holder in time), -1 when the
 * harness itself failed (the server would not restart). */
int chaos_fault_pause(chaos_nemesis *n);
int chaos_fault_kill(chaos_nemesis *n);
int chaos_fault_crash(chaos_nemesis *n);
int chaos_fault_redis_stop(chaos_nemesis *n);
int chaos_fault_hog(chaos_nemesis *n);
/* One of the above, chosen by the phase's generator. */
int chaos_fault_mixed(chaos_nemesis *n);

/* Timing faults (chaos_timing.c). */
/* proxied: a holder's proxy paused (no byte through, no reset) for
 * 1.5..3 x TTL. */
int chaos_fault_net_silence(chaos_nemesis *n);
/* wallclock: the server's clock stepped back by 0.5..3 x TTL, or forward
 * by at most TTL / 5 (less than a renewal leaves), chosen by the
 * generator. */
int chaos_fault_clock_step(chaos_nemesis *n);
/* wallclock: the server's clock jumped forward by 1..3 x TTL, past any
 * lease, and set back 1..2 TTL later (docs/guarantees.md: not promised). */
int chaos_fault_clock_jump(chaos_nemesis *n);
/* proxied: a Lua busy loop of 0.1..0.5 x TTL on the server, or every
 * proxy delaying each chunk by 0.02..0.15 x TTL for 1..2 s. */
int chaos_fault_slow(chaos_nemesis *n);

/* Deployment faults (chaos_deploy.c). */
/* redlock: two of the five masters killed (SIGKILL), kept down for
 * 0.5..2 x TTL and started again (with their AOF). */
int chaos_fault_redlock_minority(chaos_nemesis *n);
/* cluster: the master serving the lock's slot fails over to its replica,
 * by CLUSTER FAILOVER or by SIGKILL (restarted as a replica after). */
int chaos_fault_cluster_failover(chaos_nemesis *n);

#endif /* DLOCK_CHAOS_NEMESIS_H */
