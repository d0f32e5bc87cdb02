/*
 * chaos_check.c: the lock-safety checker's orchestrator and nemesis.
 *
 *   chaos_check [--seconds N] [--seed S] [--phases a,b,...|all]
 *               [--clients K] [--cli-clients C] [--dlock PATH]
 *               [--ttl-ms T] [--fencing full|writes|off] [--keep]
 *               [--sabotage split-key|short-ttl] [--fair all|some]
 *
 * Runs one phase per fault kind, one after the other, each for N / phases
 * seconds (default N = 35: the ten phases of the default list, 3.5 s
 * each, which is the CTest form, chaos.short; the default list leaves out
 * "none", whose no-fault baseline every other phase has between its
 * faults, and the long-form phases named below).  A phase starts its own
 * deployment (chaos_deploy.c), K C API clients and C `dlock run` clients
 * on one lock (default 4 and 2; no dlock binary: no cli clients, said at
 * the start), injects its fault on a schedule drawn from the seed, stops
 * everything, and analyses the logs (chaos_analyze.c).  The phases:
 *
 *   none               no fault: the baseline (--phases all or by name);
 *   pause              a holder paused (SIGSTOP) for 1.5-3 x TTL; the C API
 *                      clients run without watchdog, so the lock truly
 *                      expires under the paused holder;
 *   kill               a holder killed (SIGKILL) and started again;
 *   restart-nopersist  redis-server killed and restarted with no
 *                      persistence: lock keys and fence counters are gone;
 *   restart-aof        the same with appendonly yes, appendfsync always;
 *   redis-stop         redis-server stopped (SIGSTOP) for 0.3-2 x TTL;
 *   cpu-hog            clients with watchdog, pinned to one CPU with two
 *                      busy processes for 1-2 s at a time;
 *   net-silence        every client through its own proxy; a holder's
 *                      proxy paused (bytes held, no reset) for 1.5-3 x TTL;
 *   clock-steps        the server's wall clock stepped back by 0.5-3 x TTL
 *                      or forward by at most TTL / 5;
 *   slow-server        a Lua busy loop of 0.1-0.5 x TTL on the server, or
 *                      every client's proxy adding 2-15 % of the TTL to
 *                      each chunk for 1-2 s;
 *   redlock-minority   five masters (redlock://, AOF always), two of them
 *                      killed for 0.5-2 x TTL and restarted;
 *   clock-jump         the server's clock jumped forward by 1-3 x TTL and
 *                      set back 1-2 TTL later: past the lease, which
 *                      docs/guarantees.md does not promise to survive
 *                      (--phases all or by name);
 *   cluster-failover   three masters and three replicas (redis+cluster://),
 *                      the lock's master failed over by CLUSTER FAILOVER or
 *                      SIGKILL (--phases all or by name; reported as not
 *                      run when the client refuses cluster URLs);
 *   mixed              any of the single-server faults (only with --phases
 *                      all).
 *
 * Every phase also measures the unfenced resource touched by the `dlock
 * run` clients' commands (chaos.h); an overlap there fails the phase
 * where dlock promises none (all but pause, restart-nopersist, clock-jump,
 * cluster-failover and mixed: a paused dlock, a server that forgot the
 * lock, a clock past the lease, a failover that lost the grant).
 *
 * It prints one table row per phase and notes under the table, and exits
 * 0 when every phase is within the bounds (chaos_phase_ok), 1 when one is
 * not, 2 for a usage error, 3 when the harness itself could not run (no
 * redis-server).  The logs are kept (and their folder printed) when a
 * phase fails or with --keep: $DLOCK_SOURCE_DIR/var/test/chaos-<pid>/.
 *
 * --fencing writes / off weaken the register (chaos.h) to show that the
 * checker sees what fencing prevents: expect stale writes and lost
 * increments under pause.  --sabotage breaks the lock on purpose, to show
 * that the checker sees a broken lock: split-key gives the odd clients
 * another key (two holders at once, each releasing cleanly), short-ttl
 * makes the C API clients acquire with 1/50 of the TTL they log (the
 * lock is granted again "before the TTL ran out").  Both must fail.
 *
 * --fair all makes every client take a fair lock (opts.fair, `dlock run
 * --fair`: a queue in Redis, the release granting the key to the first
 * waiter by message, docs/fair.md), so the same bounds are checked over
 * the hand-off under every fault; --fair some makes the clients with an
 * even id fair and the others plain, on the same key.  redlock-minority
 * is not run then (fair locks are refused on Redlock).  The CTest form is
 * chaos.fair (DLOCK_TEST_LONG=1 only: scripts/chaos --fair).
 */
#include <errno.h>
#include <limits.h>
#include <libgen.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chaos.h"
#include "chaos_analyze.h"
#include "chaos_nemesis.h"

typedef int (*fault_fn)(chaos_nemesis *n);

typedef struct phase_spec {
    const char *name;
    fault_fn fault;             /* NULL: no fault */
    int persist;                /* AOF, appendfsync always */
    int watchdog;               /* for the C API clients */
    int pin;                    /* clients on one CPU */
    int work_min, work_max;     /* work per hold, in thousandths of TTL */
    int gap_min_ms, gap_max_ms; /* pause between two faults */
    chaos_topology topology;
    int unfenced_bound; /* dlock promises no overlap on the unfenced
                         * resource under this fault */
    int in_short;       /* in the default list (chaos.short) */
    int cli_half;       /* half the clients run `dlock run` (when there
                         * is a dlock binary), so that the fault lands
                         * on a command as often as on a C API holder */
} phase_spec;

/* Work is short (2-7 % of the TTL) where the fault itself makes holds
 * outlast the lock; the restarts get holds of 30-80 % of the TTL, so that
 * a holder is often still at work when the server comes back, and the
 * CPU hog and the timing faults (net-silence, clock, slow-server) get
 * holds of 0.3-1.5 TTL that only renewals keep, so that the fault lands
 * inside a hold whose renewals it delays or whose key it moves.  The
 * gaps leave the lock time to recover between faults, so that the
 * availability figure says something about recovery and not only about
 * the fault rate. */
static const phase_spec phases[] = {
    /* name, fault, persist, watchdog, pin, work, gaps, topology,
     * unfenced_bound, in_short, cli_half */
    {"none", NULL, 0, 0, 0, 20, 70, 0, 0, CHAOS_ONE_SERVER, 1, 0, 0},
    {"pause", chaos_fault_pause, 0, 0, 0, 20, 70, 300, 800, CHAOS_ONE_SERVER,
     0, 1, 0},
    {"kill", chaos_fault_kill, 0, 0, 0, 20, 70, 1000, 2000, CHAOS_ONE_SERVER,
     1, 1, 0},
    {"restart-nopersist", chaos_fault_crash, 0, 0, 0, 300, 800, 900, 1600,
     CHAOS_ONE_SERVER, 0, 1, 0},
    {"restart-aof", chaos_fault_crash, 1, 0, 0, 300, 800, 900, 1600,
     CHAOS_ONE_SERVER, 1, 1, 0},
    {"redis-stop", chaos_fault_redis_stop, 0, 0, 0, 20, 70, 800, 1600,
     CHAOS_ONE_SERVER, 1, 1, 0},
    {"cpu-hog", chaos_fault_hog, 0, 1, 1, 500, 1500, 300, 800,
     CHAOS_ONE_SERVER, 1, 1, 0},
    {"net-silence", chaos_fault_net_silence, 0, 1, 0, 2000, 4000, 200, 600,
     CHAOS_PROXIED, 1, 1, 1},
    {"clock-steps", chaos_fault_clock_step, 0, 1, 0, 500, 1500, 150, 400,
     CHAOS_WALLCLOCK, 1, 1, 1},
    {"slow-server", chaos_fault_slow, 0, 1, 0, 500, 1500, 200, 600,
     CHAOS_PROXIED, 1, 1, 1},
    {"redlock-minority", chaos_fault_redlock_minority, 1, 0, 0, 20, 70, 300,
     900, CHAOS_REDLOCK, 1, 1, 0},
    {"clock-jump", chaos_fault_clock_jump, 0, 1, 0, 500, 1500, 500, 1000,
     CHAOS_WALLCLOCK, 0, 0, 1},
    {"cluster-failover", chaos_fault_cluster_failover, 0, 1, 0, 300, 800, 1000,
     2000, CHAOS_CLUSTER, 0, 0, 0},
    {"mixed", chaos_fault_mixed, 0, 0, 0, 20, 70, 500, 1500, CHAOS_ONE_SERVER,
     0, 0, 0},
};
#define PHASE_COUNT (sizeof(phases) / sizeof(phases[0]))

typedef struct check_args {
    chaos_run_args run_args; /* --seconds, --seed, --keep */
    const phase_spec *run[PHASE_COUNT];
    size_t nrun;
    int api_clients, cli_clients;
    const char *dlock;
    int64_t ttl_ms;
    chaos_fencing fencing;
    const char *sabotage;
    int fair; /* CHAOS_FAIR_* */
    char bin_dir[512];
    char client_bin[600], step_bin[600];
    char out[800];
} check_args;

static const chaos_phase_table phase_table = {
    phases, PHASE_COUNT, sizeof(phases[0]),
    "usage: chaos_check [--seconds N] [--seed S] [--phases a,b,...|all] "
    "[--clients K] [--cli-clients C] [--dlock PATH] [--ttl-ms T] "
    "[--fencing full|writes|off] [--keep] "
    "[--sabotage split-key|short-ttl] [--fair all|some]"};

/* chaos_client and chaos_step are built next to chaos_check. */
static void find_binaries(check_args *a)
{
    char self[512];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

    if (n <= 0) {
        fprintf(stderr, "chaos_check: cannot find myself: %s\n",
                strerror(errno));
        exit(3);
    }
    self[n] = '\0';
    snprintf(a->bin_dir, sizeof(a->bin_dir), "%s", dirname(self));
    snprintf(a->client_bin, sizeof(a->client_bin), "%s/chaos_client",
             a->bin_dir);
    snprintf(a->step_bin, sizeof(a->step_bin), "%s/chaos_step", a->bin_dir);
}

/* One of chaos_check's own options (chaos_own_option). */
static int check_option(const char *o, const char *v, void *ctx)
{
    check_args *a = ctx;

    if (strcmp(o, "--clients") == 0)
        a->api_clients = (int)chaos_arg_int(v, 0, 16, o);
    else if (strcmp(o, "--cli-clients") == 0)
        a->cli_clients = (int)chaos_arg_int(v, 0, 16, o);
    else if (strcmp(o, "--dlock") == 0)
        a->dlock = v;
    else if (strcmp(o, "--ttl-ms") == 0)
        a->ttl_ms = chaos_arg_int(v, 50, 60000, o);
    else if (strcmp(o, "--fencing") == 0)
        a->fencing = chaos_arg_fencing(v);
    else if (strcmp(o, "--fair") == 0 && strcmp(v, "all") == 0)
        a->fair = CHAOS_FAIR_ALL;
    else if (strcmp(o, "--fair") == 0 && strcmp(v, "some") == 0)
        a->fair = CHAOS_FAIR_SOME;
    else if (strcmp(o, "--sabotage") == 0
             && (strcmp(v, "split-key") == 0 || strcmp(v, "short-ttl") == 0))
        a->sabotage = v;
    else
        return 0;
    return 1;
}

static void parse_args(int argc, char **argv, check_args *a)
{
    size_t idx[PHASE_COUNT], n = 0;

    memset(a, 0, sizeof(*a));
    chaos_run_args_init(&a->run_args);
    a->api_clients = 4;
    a->cli_clients = 2;
    a->ttl_ms = 600;
    for (size_t i = 0; i < PHASE_COUNT; i++)
        if (phases[i].in_short)
            idx[n++] = i;
    n = chaos_phases_args(argc, argv, &phase_table, &a->run_args, idx, n,
                          check_option, a);
    for (a->nrun = 0; a->nrun < n; a->nrun++)
        a->run[a->nrun] = &phases[idx[a->nrun]];
    if (a->dlock == NULL || access(a->dlock, X_OK) != 0)
        a->cli_clients = 0;
    if (a->api_clients + a->cli_clients < 2)
        chaos_phases_usage(&phase_table);
    find_binaries(a);
}

/* The first CPU we may run on, for pinning. */
static int first_cpu(void)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 0;
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &set))
            return i;
    return 0;
}

/* Makes path and the folders above it that are missing: a fresh checkout
 * has no var/test/ until something made it. */
static void make_dir(const char *path)
{
    char p[PATH_MAX];

    if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p)) {
        fprintf(stderr, "chaos_check: mkdir %s: path too long\n", path);
        exit(3);
    }
    for (char *slash = strchr(p + 1, '/');; slash = strchr(slash + 1, '/')) {
        if (slash != NULL)
            *slash = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "chaos_check: mkdir %s: %s\n", p, strerror(errno));
            exit(3);
        }
        if (slash == NULL)
            break;
        *slash = '/';
    }
}

static void remove_tree(const char *path)
{
    pid_t pid;

    if (strstr(path, "/var/test/") == NULL)
        return;
    pid = fork();
    if (pid == 0) {
        execlp("rm", "rm", "-rf", "--", path, (char *)NULL);
        _exit(127);
    }
    if (pid > 0)
        waitpid(pid, NULL, 0);
}

static void client_cfg(const check_args *a, const phase_spec *ph, size_t index,
                       chaos_client_cfg *c)
{
    memset(c, 0, sizeof(*c));
    c->client_bin = a->client_bin;
    c->step_bin = a->step_bin;
    c->dlock_bin = a->dlock;
    c->api_clients = a->api_clients;
    c->cli_clients = a->cli_clients;
    if (ph->cli_half && c->cli_clients > 0
        && c->cli_clients < c->api_clients) {
        int total = c->api_clients + c->cli_clients;

        c->cli_clients = total / 2;
        c->api_clients = total - c->cli_clients;
    }
    c->ttl_ms = a->ttl_ms;
    /* Long enough to outwait a pause past the TTL, short enough to end. */
    c->wait_ms = 5 * a->ttl_ms;
    c->work_min_ms = a->ttl_ms * ph->work_min / 1000;
    c->work_max_ms = a->ttl_ms * ph->work_max / 1000;
    c->think_min_ms = a->ttl_ms * 10 / 1000;
    c->think_max_ms = a->ttl_ms * 60 / 1000;
    c->watchdog = ph->watchdog;
    c->hog_cpu = first_cpu();
    c->cpu = ph->pin ? c->hog_cpu : -1;
    c->fencing = a->fencing;
    c->sabotage = a->sabotage;
    c->fair = a->fair;
    c->seed = a->run_args.seed ^ (index * 0x9e3779b97f4a7c15ull);
}

/* Injects the phase's faults until until_us, paced by the generator. */
static int run_nemesis(chaos_nemesis *n, const phase_spec *ph,
                       int64_t until_us)
{
    int injected = 0;

    for (;;) {
        int64_t gap = 1000
                      * chaos_rng_range(&n->rng, ph->gap_min_ms,
                                        ph->gap_max_ms);

        chaos_nemesis_reap(n);
        if (ph->fault == NULL || chaos_now_us() + gap >= until_us)
            break;
        chaos_sleep_us(gap);
        if (ph->fault(n) < 0)
            return -1;
        injected++;
    }
    chaos_sleep_until(until_us);
    return injected;
}

/* Whether the client serves the phase's deployment; 0 with res->not_run
 * set when it does not, -1 when that could not be asked. */
static int deployment_served(const check_args *a, const chaos_client_cfg *cfg,
                             const phase_spec *ph, chaos_phase_result *res)
{
    static const char *const kinds[] = {
        [CHAOS_REDLOCK] = "Redlock", [CHAOS_CLUSTER] = "cluster"};
    char why[CHAOS_NOTE_MAX - 100];
    int served;

    if (a->fair != CHAOS_FAIR_NONE && ph->topology == CHAOS_REDLOCK) {
        snprintf(res->not_run, sizeof(res->not_run),
                 "fair locks are refused on Redlock (--fair)");
        return 0;
    }
    served = chaos_deploy_api_serves(cfg, ph->topology, a->out, why,
                                     sizeof(why));
    if (served == 0)
        snprintf(res->not_run, sizeof(res->not_run),
                 "%s URLs not supported by this build (%s)",
                 kinds[ph->topology], why);
    return served;
}

/* Leaves the dlock run clients out of a deployment dlock run does not
 * serve, and says so under the table. */
static void check_cli_served(chaos_nemesis *n, chaos_phase_result *res)
{
    char why[CHAOS_NOTE_MAX - 120];

    if (n->cfg.cli_clients == 0 || n->topology == CHAOS_ONE_SERVER
        || n->topology == CHAOS_PROXIED || n->topology == CHAOS_WALLCLOCK
        || chaos_deploy_cli_serves(n, why, sizeof(why)))
        return;
    snprintf(res->remark, sizeof(res->remark),
             "dlock run clients not run: dlock run does not serve %.16s "
             "URLs (%s)",
             n->url, why);
    n->cfg.cli_clients = 0;
}

/* Runs one phase and fills res; returns 0, or -1 if the harness failed. */
static int run_phase(const check_args *a, const phase_spec *ph, size_t index,
                     int64_t ms, chaos_phase_result *res)
{
    chaos_nemesis n;
    char dir[1024];
    int64_t start, until;
    int rc = 0, served;

    memset(&n, 0, sizeof(n));
    n.events = -1;
    snprintf(res->name, sizeof(res->name), "%s", ph->name);
    res->unfenced_bound = ph->unfenced_bound;
    client_cfg(a, ph, index, &n.cfg);
    served = deployment_served(a, &n.cfg, ph, res);
    if (served <= 0)
        return served;
    snprintf(dir, sizeof(dir), "%s/%s", a->out, ph->name);
    make_dir(dir);
    chaos_rng_seed(&n.rng, n.cfg.seed);
    if (chaos_nemesis_setup(&n, dir, ph->name, ph->persist, ph->topology)
        != 0) {
        chaos_nemesis_teardown(&n);
        return -1;
    }
    check_cli_served(&n, res);
    start = chaos_now_us();
    until = start + ms * 1000;
    chaos_event(n.events, "phase_start %s", ph->name);
    if (chaos_nemesis_start_clients(&n, until) != 0
        || run_nemesis(&n, ph, until) < 0)
        rc = -1;
    chaos_event(n.events, "phase_stop %s %lld", ph->name, (long long)until);
    chaos_nemesis_wait_clients(
        &n, until + 1000 * (n.cfg.wait_ms + n.cfg.work_max_ms + 5000));
    chaos_nemesis_teardown(&n);
    res->client_failures = n.failures;
    if (rc == 0 && chaos_analyze_phase(dir, res) != 0)
        rc = -1;
    return rc;
}

int main(int argc, char **argv)
{
    check_args a;
    chaos_phase_result results[PHASE_COUNT];
    int64_t per_phase_ms;
    int all_ok = 1;

    parse_args(argc, argv, &a);
    per_phase_ms = a.run_args.seconds * 1000 / (int64_t)a.nrun;
    snprintf(a.out, sizeof(a.out), "%s/var/test/chaos-%ld",
             testkit_source_dir(), (long)getpid());
    make_dir(a.out);
    printf("chaos: seed %llu, %zu phases x %.1f s, %d C API + %d dlock run "
           "clients%s, TTL %lld ms, fencing %s%s%s%s\n",
           (unsigned long long)a.run_args.seed, a.nrun,
           (double)per_phase_ms / 1000, a.api_clients, a.cli_clients,
           a.cli_clients == 0 ? " (no dlock binary: --dlock PATH)" : "",
           (long long)a.ttl_ms,
           a.fencing == CHAOS_FENCE_FULL     ? "full"
           : a.fencing == CHAOS_FENCE_WRITES ? "writes only"
                                             : "off",
           a.sabotage ? ", SABOTAGE " : "", a.sabotage ? a.sabotage : "",
           a.fair == CHAOS_FAIR_ALL    ? ", fair locks"
           : a.fair == CHAOS_FAIR_SOME ? ", fair locks (even ids)"
                                       : "");
    fflush(stdout);
    memset(results, 0, sizeof(results));
    for (size_t i = 0; i < a.nrun; i++) {
        if (run_phase(&a, a.run[i], i, per_phase_ms, &results[i]) != 0) {
            fprintf(stderr, "chaos: phase %s could not run; logs in %s\n",
                    a.run[i]->name, a.out);
            return 3;
        }
        all_ok &= chaos_phase_ok(&results[i]);
    }
    chaos_print_header();
    for (size_t i = 0; i < a.nrun; i++)
        chaos_print_row(&results[i]);
    chaos_print_notes(results, a.nrun);
    if (!all_ok || a.run_args.keep)
        printf("chaos: logs kept in %s\n", a.out);
    else
        remove_tree(a.out);
    chaos_print_verdict("chaos", all_ok, a.run_args.seed);
    return all_ok ? 0 : 1;
}
