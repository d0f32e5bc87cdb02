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
 * hog.  A killed client is started again at once ("respawn <id>").
 */
#ifndef DLOCK_CHAOS_NEMESIS_H
#define DLOCK_CHAOS_NEMESIS_H

#include <stdint.h>
#include <sys/types.h>

#include "chaos.h"
#include "testkit.h"

struct chaos_phase;

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
    uint64_t seed;
} chaos_client_cfg;

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
    testkit_redis *redis;
    int persist; /* AOF with appendfsync always */
    chaos_slot *board;
    int events; /* events.log */
    chaos_rng rng;
    chaos_client_cfg cfg;
    chaos_proc procs[CHAOS_CLIENTS_MAX];
    int nprocs;
    int64_t until_us; /* clients start no cycle after this */
    int failures;     /* clients that ended on their own badly */
} chaos_nemesis;

/* Starts the phase's redis-server (with AOF and appendfsync always when
 * persist), names the lock key, opens the logs and the board.  Returns 0
 * or -1 (message on stderr). */
int chaos_nemesis_setup(chaos_nemesis *n, const char *dir, const char *name,
                        int persist);

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

#endif /* DLOCK_CHAOS_NEMESIS_H */
