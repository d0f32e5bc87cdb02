/*
 * chaos_reviewd.c: the reviewd checker's orchestrator and nemesis.
 *
 *   chaos_reviewd [--seconds N] [--seed S] [--phases a,b,...|all]
 *                 [--clients K] [--deciders D] [--keep]
 *                 [--sabotage redecide|drop-event]
 *
 * Starts a private PostgreSQL, redis-server and two reviewd instances
 * (chaos_rv_stack.c), then runs one phase per fault kind, each for
 * N / phases seconds (default N = 35: seven phases of 5 s, the CTest form
 * chaos.reviewd).  In a phase K client threads (default 4) create,
 * submit and race D decisions (default 4) on every review through both
 * instances (chaos_rv_workload.c) while the nemesis injects the phase's
 * fault on a schedule drawn from the seed; then the clients finish their
 * retries and the checker compares the database with their log
 * (chaos_rv_verify.c).  The phases:
 *
 *   none           no fault: the baseline;
 *   redis-stop     redis-server stopped (SIGSTOP) for 1.5-3 x the lock
 *                  TTL: reviewd's lock calls time out and it decides
 *                  degraded, PostgreSQL alone serialising;
 *   redis-restart  redis-server killed (SIGKILL) and started again empty:
 *                  locks and fence counters gone;
 *   pg-fast        pg_ctl restart -m fast: sessions ended, in-flight
 *                  transactions rolled back;
 *   pg-immediate   pg_ctl restart -m immediate: a crash and recovery;
 *   rvd-pause      one reviewd instance, preferably one with decisions in
 *                  flight, stopped (SIGSTOP) for 1.5-3 x the lock TTL: a
 *                  decision-maker whose lock expires under it;
 *   rvd-kill       one reviewd instance killed (SIGKILL) and started
 *                  again;
 *   mixed          any of the faults above (only with --phases all).
 *
 * It prints one table row per phase (columns: chaos_rv_verify.c) and the
 * problems under it, and exits 0 when every phase is within the bounds
 * (chaos_rv_ok) and both instances exit cleanly at the end, 1 when not, 2
 * for a usage error, 3 when the harness itself could not run.  Logs
 * (requests.log and faults in events.log per phase, the servers' logs)
 * are kept in var/test/chaos-rv-<pid>/ when a phase fails or with --keep.
 *
 * --sabotage does, after each phase and behind reviewd's back, what the
 * checker exists to catch, to show that it does: redecide turns one
 * approved review of the phase into a rejection (a second decision, and an
 * acknowledged approval lost), drop-event deletes one decision's outbox
 * row (a missing event).  Both must fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chaos_rv.h"

/* Keyed retries go on this long after the phase, to resolve. */
#define RESOLVE_GRACE_MS 20000
#define TARGET_WAIT_MS 500

typedef enum fault_kind {
    F_NONE = 0,
    F_REDIS_STOP,
    F_REDIS_RESTART,
    F_PG_FAST,
    F_PG_IMMEDIATE,
    F_RVD_PAUSE,
    F_RVD_KILL,
    F_MIXED
} fault_kind;

typedef struct phase_spec {
    const char *name;
    fault_kind fault;
    int gap_min_ms, gap_max_ms; /* between two faults */
} phase_spec;

static const phase_spec phases[] = {
    {"none", F_NONE, 0, 0},
    {"redis-stop", F_REDIS_STOP, 500, 1200},
    {"redis-restart", F_REDIS_RESTART, 600, 1400},
    {"pg-fast", F_PG_FAST, 600, 1400},
    {"pg-immediate", F_PG_IMMEDIATE, 600, 1400},
    {"rvd-pause", F_RVD_PAUSE, 400, 1000},
    {"rvd-kill", F_RVD_KILL, 600, 1400},
    {"mixed", F_MIXED, 500, 1200},
};
#define PHASE_COUNT (sizeof(phases) / sizeof(phases[0]))
#define SHORT_PHASES (PHASE_COUNT - 1)

typedef struct rv_args {
    chaos_run_args run_args; /* --seconds, --seed, --keep */
    const phase_spec *run[PHASE_COUNT];
    size_t nrun;
    int clients, deciders;
    const char *sabotage;
} rv_args;

static const chaos_phase_table phase_table = {
    phases, PHASE_COUNT, sizeof(phases[0]),
    "usage: chaos_reviewd [--seconds N] [--seed S] [--phases a,b,...|all] "
    "[--clients K] [--deciders D] [--keep] "
    "[--sabotage redecide|drop-event]"};

/* One of chaos_reviewd's own options (chaos_own_option). */
static int rv_option(const char *o, const char *v, void *ctx)
{
    rv_args *a = ctx;

    if (strcmp(o, "--clients") == 0)
        a->clients = (int)chaos_arg_int(v, 1, 16, o);
    else if (strcmp(o, "--deciders") == 0)
        a->deciders = (int)chaos_arg_int(v, 2, 8, o);
    else if (strcmp(o, "--sabotage") == 0
             && (strcmp(v, "redecide") == 0 || strcmp(v, "drop-event") == 0))
        a->sabotage = v;
    else
        return 0;
    return 1;
}

static void parse_args(int argc, char **argv, rv_args *a)
{
    size_t idx[PHASE_COUNT], n = 0;

    memset(a, 0, sizeof(*a));
    chaos_run_args_init(&a->run_args);
    a->clients = 4;
    a->deciders = 4;
    for (; n < SHORT_PHASES; n++)
        idx[n] = n;
    n = chaos_phases_args(argc, argv, &phase_table, &a->run_args, idx, n,
                          rv_option, a);
    for (a->nrun = 0; a->nrun < n; a->nrun++)
        a->run[a->nrun] = &phases[idx[a->nrun]];
}

/* ---- the nemesis --------------------------------------------------------- */

typedef struct nemesis {
    chaos_rv_stack *stack;
    chaos_rng rng;
    int events; /* the phase's events.log */
} nemesis;

/* An instance with decisions in flight (waiting a little for one), else
 * any. */
static int pick_instance(nemesis *n)
{
    const int64_t until = chaos_now_us() + TARGET_WAIT_MS * 1000;
    const int first = (int)chaos_rng_range(&n->rng, 0, CHAOS_RV_INSTANCES - 1);

    while (chaos_now_us() < until) {
        for (int k = 0; k < CHAOS_RV_INSTANCES; k++) {
            const int i = (first + k) % CHAOS_RV_INSTANCES;

            if (atomic_load(&n->stack->inflight[i]) > 0)
                return i;
        }
        chaos_sleep_us(2000);
    }
    return first;
}

static int64_t past_ttl_ms(nemesis *n)
{
    return chaos_rng_range(&n->rng, CHAOS_RV_LOCK_TTL_MS * 3 / 2,
                           CHAOS_RV_LOCK_TTL_MS * 3);
}

/* Injects one fault of kind k, logging it; 0 or -1 (harness failure). */
static int inject(nemesis *n, fault_kind k)
{
    int64_t ms;
    int i, rc = -1;

    switch (k) {
    case F_NONE: return 0;
    case F_REDIS_STOP:
        ms = past_ttl_ms(n);
        chaos_event(n->events, "fault redis_stop 0 %lld", (long long)ms);
        rc = chaos_rv_redis_stop(n->stack, ms);
        break;
    case F_REDIS_RESTART:
        chaos_event(n->events, "fault redis_restart 0 0");
        rc = chaos_rv_redis_restart(n->stack);
        break;
    case F_PG_FAST:
    case F_PG_IMMEDIATE:
        chaos_event(n->events, "fault pg_restart_%s 0 0",
                    k == F_PG_FAST ? "fast" : "immediate");
        rc = chaos_rv_pg_restart(n->stack,
                                 k == F_PG_FAST ? "fast" : "immediate");
        break;
    case F_RVD_PAUSE:
        i = pick_instance(n);
        ms = past_ttl_ms(n);
        chaos_event(n->events, "fault rvd_pause %d %lld", i, (long long)ms);
        rc = chaos_rv_reviewd_pause(n->stack, i, ms);
        break;
    case F_RVD_KILL:
        i = pick_instance(n);
        chaos_event(n->events, "fault rvd_kill %d 0", i);
        rc = chaos_rv_reviewd_kill(n->stack, i);
        break;
    case F_MIXED:
        return inject(n, (fault_kind)chaos_rng_range(&n->rng, F_REDIS_STOP,
                                                     F_RVD_KILL));
    }
    chaos_event(n->events, "fault_end %d", rc);
    return rc;
}

/* Faults until until_us; returns how many, or -1. */
static int run_nemesis(nemesis *n, const phase_spec *ph, int64_t until_us)
{
    int injected = 0;

    while (ph->fault != F_NONE) {
        const int64_t gap = 1000
                            * chaos_rng_range(&n->rng, ph->gap_min_ms,
                                              ph->gap_max_ms);

        if (chaos_now_us() + gap >= until_us)
            break;
        chaos_sleep_us(gap);
        if (inject(n, ph->fault) != 0)
            return -1;
        injected++;
    }
    chaos_sleep_until(until_us);
    return injected;
}

/* ---- phases -------------------------------------------------------------- */

/* --sabotage: breaks the phase's outcome in the database (see the top of
 * the file); 0 or -1. */
static int sabotage(chaos_rv_stack *s, const char *how, const char *phase)
{
    char sql[1024];

    if (strcmp(how, "redecide") == 0) {
        snprintf(sql, sizeof(sql),
                 "WITH r AS (UPDATE kh_document_review SET status ="
                 " 'rejected', comment = 'sabotage' WHERE id = (SELECT"
                 " r.id FROM kh_document_review r JOIN kh_document d ON"
                 " d.id = r.document_id WHERE d.title LIKE 'chaos %s %%'"
                 " AND r.status = 'approved' ORDER BY r.id DESC LIMIT 1)"
                 " RETURNING document_id) UPDATE kh_document SET status ="
                 " 'rejected' WHERE id IN (SELECT document_id FROM r)",
                 phase);
    } else {
        snprintf(sql, sizeof(sql),
                 "DELETE FROM kh_outbox WHERE id = (SELECT o.id FROM"
                 " kh_outbox o JOIN kh_document d ON d.id = o.document_id"
                 " WHERE d.title LIKE 'chaos %s %%' AND o.routing_key <>"
                 " 'document.submitted' ORDER BY o.id DESC LIMIT 1)",
                 phase);
    }
    return rvt_sql(&s->db, sql, NULL, 0);
}

/* The phase's workload: from start_us for its share of the run. */
static void workload_cfg(const rv_args *a, const phase_spec *ph,
                         chaos_rng *rng, int64_t start_us,
                         chaos_rv_workload_cfg *wc)
{
    memset(wc, 0, sizeof(*wc));
    wc->phase = ph->name;
    wc->clients = a->clients;
    wc->deciders = a->deciders;
    wc->seed = chaos_rng_next(rng);
    wc->until_us = start_us + a->run_args.seconds * 1000000 / (int64_t)a->nrun;
    wc->resolve_us = wc->until_us + RESOLVE_GRACE_MS * 1000;
}

/* Runs one phase and fills res; 0, or -1 when the harness failed. */
static int run_phase(const rv_args *a, chaos_rv_stack *s, const phase_spec *ph,
                     size_t index, chaos_rv_result *res)
{
    char dir[700], path[800];
    chaos_rv_workload_cfg wc;
    chaos_rv_workload *w;
    chaos_rv_log log;
    nemesis n;
    int64_t start;
    int rc = 0;

    memset(res, 0, sizeof(*res));
    snprintf(res->name, sizeof(res->name), "%s", ph->name);
    snprintf(dir, sizeof(dir), "%s/%s", s->dir, ph->name);
    mkdir(dir, 0755);
    snprintf(path, sizeof(path), "%s/requests.log", dir);
    n.stack = s;
    chaos_rng_seed(&n.rng,
                   a->run_args.seed ^ (0x9e3779b97f4a7c15ull * (index + 1)));
    n.events = chaos_events_open(dir);
    if (n.events < 0 || chaos_rv_log_init(&log, path) != 0)
        return -1;
    start = chaos_now_us();
    workload_cfg(a, ph, &n.rng, start, &wc);
    chaos_event(n.events, "phase_start %s", ph->name);
    w = chaos_rv_workload_start(&wc, s, &log);
    res->faults = w != NULL ? run_nemesis(&n, ph, wc.until_us) : -1;
    chaos_event(n.events, "phase_stop %s", ph->name);
    res->unresolved = w != NULL ? chaos_rv_workload_join(w) : 0;
    if (w == NULL || res->faults < 0
        || (a->sabotage != NULL && sabotage(s, a->sabotage, ph->name) != 0)
        || chaos_rv_verify(&s->db, ph->name, &log, start, wc.until_us, res)
               != 0)
        rc = -1;
    chaos_rv_log_free(&log);
    close(n.events);
    return rc;
}

int main(int argc, char **argv)
{
    chaos_rv_result results[PHASE_COUNT];
    chaos_rv_stack stack;
    rv_args a;
    int all_ok = 1, unclean;
    size_t done = 0;

    parse_args(argc, argv, &a);
    printf("chaos-reviewd: seed %llu, %zu phases x %.1f s, %d clients x %d "
           "concurrent decisions, 2 reviewd, lock TTL %d ms%s%s\n",
           (unsigned long long)a.run_args.seed, a.nrun,
           (double)a.run_args.seconds / (double)a.nrun, a.clients, a.deciders,
           CHAOS_RV_LOCK_TTL_MS, a.sabotage ? ", SABOTAGE " : "",
           a.sabotage ? a.sabotage : "");
    fflush(stdout);
    if (chaos_rv_stack_start(&stack) != 0) {
        fprintf(stderr, "chaos-reviewd: the servers did not start\n");
        chaos_rv_stack_stop(&stack, 1);
        return 3;
    }
    for (; done < a.nrun; done++) {
        if (run_phase(&a, &stack, a.run[done], done, &results[done]) != 0) {
            fprintf(stderr,
                    "chaos-reviewd: phase %s could not run; logs in "
                    "%s\n",
                    a.run[done]->name, stack.dir);
            chaos_rv_stack_stop(&stack, 1);
            return 3;
        }
        all_ok &= chaos_rv_ok(&results[done]);
    }
    chaos_rv_print_header();
    for (size_t i = 0; i < done; i++)
        chaos_rv_print_row(&results[i]);
    for (size_t i = 0; i < done; i++) {
        if (results[i].problems[0] != '\0') {
            printf("  %s: PROBLEMS: %s\n", results[i].name,
                   results[i].problems);
        }
    }
    printf("  reviewd restarts after SIGKILL: %d and %d\n", stack.restarts[0],
           stack.restarts[1]);
    if (!all_ok || a.run_args.keep)
        printf("chaos-reviewd: logs kept in %s\n", stack.dir);
    unclean = chaos_rv_stack_stop(&stack, !all_ok || a.run_args.keep);
    if (unclean > 0) {
        printf("chaos-reviewd: %d reviewd instance(s) did not exit cleanly "
               "at the end\n",
               unclean);
        all_ok = 0;
    }
    chaos_print_verdict("chaos-reviewd", all_ok, a.run_args.seed);
    return all_ok ? 0 : 1;
}
