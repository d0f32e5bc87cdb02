/*
 * chaos_rv.h: the reviewd checker's shared parts (chaos_reviewd and its
 * modules in tests/chaos/).
 *
 * The lock-safety checker (chaos.h) asks whether the lock keeps a register
 * safe under faults; this one asks the same of reviewd, whose safety
 * rests on the Redis lock as a fast refusal and on PostgreSQL row locks as
 * the last word: whatever fails (Redis frozen or restarted empty,
 * PostgreSQL restarted fast or crashed, a reviewd instance paused past its
 * lock's TTL or killed), is every review decided at most once, is every
 * acknowledged decision in the database, and does every committed
 * transition have exactly one outbox event?
 *
 * The parts, one job each:
 *
 *   chaos_rv_stack.c     the private servers of one run: PostgreSQL
 *                        (tests/chaos/pg_private.sh), redis-server
 *                        (testkit) and two reviewd instances (rvt_kit),
 *                        plus the faults done to them;
 *   chaos_rv_workload.c  the clients: threads that create, submit and race
 *                        approve/reject decisions through both instances,
 *                        logging every HTTP attempt;
 *   chaos_rv_verify.c    the checker: the database's final state and
 *                        history (an audit trigger of our own) against
 *                        the clients' log, one table row per phase;
 *   chaos_reviewd.c      the orchestrator and nemesis: phases, schedule,
 *                        the table, the exit status.
 *
 * A run uses one cluster, one Redis and one pair of reviewd processes for
 * every phase (start-up costs seconds on this machine); a phase's
 * documents carry its name in their title ("chaos <phase> ..."), which is
 * how the checker scopes its queries to one phase.
 *
 * Threads: the stack and the faults belong to the main thread (rvt_kit
 * and testkit start servers from it); the workload runs its own threads
 * and only reads the stack's ports (atomics).
 */
#ifndef DLOCK_CHAOS_RV_H
#define DLOCK_CHAOS_RV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "chaos.h"
#include "rvt_kit.h"
#include "testkit.h"

/* reviewd instances in a run. */
#define CHAOS_RV_INSTANCES 2
/* The review lock's TTL given to reviewd (REVIEWD_REVIEW_LOCK_TTL_MS, also
 * the submit lock's): short, so that a pause of a few seconds outlives it. */
#define CHAOS_RV_LOCK_TTL_MS 1000

/* ---- the stack ----------------------------------------------------------- */

typedef struct chaos_rv_stack {
    char dir[512];         /* var/test/chaos-rv-<pid> */
    char pg_dir[600];      /* its PostgreSQL cluster */
    char pg_script[600];   /* tests/chaos/pg_private.sh */
    char pg_template[600]; /* the initdb'd cluster to copy */
    int pg_port;
    int pg_running;
    pid_t guard; /* stops the cluster if we die */
    rvt_db db;   /* the run's database on that cluster */
    testkit_redis *redis;
    rvt_server rvd[CHAOS_RV_INSTANCES];
    /* Where clients send requests: the instance's port, or 0 while it is
     * being restarted (a client then counts a connection error). */
    _Atomic int port[CHAOS_RV_INSTANCES];
    /* Decisions in flight per instance, so a fault can land on an
     * instance that is deciding. */
    _Atomic int inflight[CHAOS_RV_INSTANCES];
    int restarts[CHAOS_RV_INSTANCES];
} chaos_rv_stack;

/* Starts PostgreSQL (from the template, made once per build tree), the
 * database with its audit trigger, redis-server and both reviewd
 * instances.  Returns 0 or -1 (message on stderr); on -1 call
 * chaos_rv_stack_stop anyway. */
int chaos_rv_stack_start(chaos_rv_stack *s);

/* Stops reviewd (SIGTERM; returns how many did not exit 0, which under
 * the sanitizers includes a leak), Redis and PostgreSQL; removes the
 * folder unless keep. */
int chaos_rv_stack_stop(chaos_rv_stack *s, int keep);

/* The faults: each blocks for its whole length and returns 0, or -1 when
 * the harness failed (a server would not come back). */
int chaos_rv_redis_stop(chaos_rv_stack *s, int64_t ms);
int chaos_rv_redis_restart(chaos_rv_stack *s);
/* mode "fast" or "immediate" (pg_ctl restart -m). */
int chaos_rv_pg_restart(chaos_rv_stack *s, const char *mode);
/* SIGSTOP instance i for ms, then SIGCONT. */
int chaos_rv_reviewd_pause(chaos_rv_stack *s, int i, int64_t ms);
/* SIGKILL instance i and start it again (on a new port). */
int chaos_rv_reviewd_kill(chaos_rv_stack *s, int i);

/* ---- the clients' log ---------------------------------------------------- */

typedef enum chaos_rv_kind {
    CHAOS_RV_CREATE = 0,
    CHAOS_RV_SUBMIT,
    CHAOS_RV_APPROVE,
    CHAOS_RV_REJECT,
    CHAOS_RV_GET
} chaos_rv_kind;

/* One HTTP attempt.  Attempts of one logical request (the retries of a
 * request with an Idempotency-Key) share req_no. */
typedef struct chaos_rv_attempt {
    int64_t t0_us, t1_us; /* sent, answered (CLOCK_MONOTONIC) */
    int64_t req_no;
    int64_t doc_id, review_id; /* what it was about (0: not yet known) */
    int status;                /* 0: no answer (connection error) */
    int instance;
    int attempt; /* 1, 2, ... */
    chaos_rv_kind kind;
    int keyed;         /* sent with an Idempotency-Key */
    char reviewer[16]; /* for decisions */
    char code[24];     /* error code of the answer */
    /* From a 2xx answer: the ids it names and the review it shows. */
    int64_t got_doc_id, got_review_id;
    char got_status[16]; /* review.status */
    char got_reviewer[16];
    char got_fence[24]; /* "" for a null fence */
} chaos_rv_attempt;

/* Everything the clients of one phase did, appended from many threads. */
typedef struct chaos_rv_log {
    pthread_mutex_t mu;
    chaos_rv_attempt *a;
    size_t n, cap;
    _Atomic int64_t next_req;
    int fd; /* requests.log, one line per attempt */
} chaos_rv_log;

/* 1 when an answer leaves the outcome unknown: no answer, or a 5xx. */
int chaos_rv_ambiguous(int status);

/* ---- the workload -------------------------------------------------------- */

typedef struct chaos_rv_workload_cfg {
    const char *phase;  /* goes into every title */
    int clients;        /* client threads */
    int deciders;       /* concurrent decisions per review */
    int64_t until_us;   /* no new document after this */
    int64_t resolve_us; /* keyed retries give up after this */
    uint64_t seed;
} chaos_rv_workload_cfg;

typedef struct chaos_rv_workload chaos_rv_workload;

/* Starts the client threads; they log into log.  NULL on failure. */
chaos_rv_workload *chaos_rv_workload_start(const chaos_rv_workload_cfg *cfg,
                                           chaos_rv_stack *stack,
                                           chaos_rv_log *log);
/* Joins every thread (they end by themselves after until/resolve) and
 * frees w; returns the number of keyed requests left unresolved. */
int chaos_rv_workload_join(chaos_rv_workload *w);

/* ---- the checker --------------------------------------------------------- */

typedef struct chaos_rv_result {
    char name[32];
    int64_t duration_ms;
    int faults;
    /* answers, over every attempt */
    int attempts, ok, lock_busy, state_conflict, unavailable, other_5xx,
        conn_errors, unexpected;
    /* the database */
    int reviews, decided, no_fence;
    /* the invariants (each must be 0 but unacked and unresolved) */
    int double_decisions; /* > 1 decision of one review (DB history
                                 * or two acknowledged requests) */
    int lost_acks;        /* a 2xx whose decision or submission is
                                 * not what the database holds */
    int phantoms;         /* decided, and no request could have */
    int unacked;          /* decided by a request whose answer was
                                 * lost (5xx or no answer): allowed */
    int doc_mismatch;     /* document status != its review's */
    int events_missing, events_extra, duplicate_event_ids;
    int unresolved;      /* keyed requests never answered */
    double availability; /* share of 250 ms windows with a 2xx */
    int64_t longest_gap_ms;
    char problems[512];
} chaos_rv_result;

/* Checks one phase: the database (titles "chaos <phase> ...") against
 * log.  Fills res (but name, faults and unresolved); returns 0, or -1
 * when the database could not be read. */
int chaos_rv_verify(rvt_db *db, const char *phase, const chaos_rv_log *log,
                    int64_t start_us, int64_t until_us, chaos_rv_result *res);

/* 1 when res is within the bounds; else 0 with res->problems saying
 * why. */
int chaos_rv_ok(chaos_rv_result *res);

void chaos_rv_print_header(void);
void chaos_rv_print_row(const chaos_rv_result *res);

/* Log management (chaos_rv_workload.c). */
int chaos_rv_log_init(chaos_rv_log *log, const char *path);
void chaos_rv_log_free(chaos_rv_log *log);
void chaos_rv_log_add(chaos_rv_log *log, const chaos_rv_attempt *a);

#endif /* DLOCK_CHAOS_RV_H */
