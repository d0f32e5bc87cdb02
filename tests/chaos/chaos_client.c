/*
 * chaos_client.c: one client of the lock-safety checker (chaos.h).
 *
 *   chaos_client --mode api|cli --dir DIR --id N --url URL --key KEY
 *                --ttl-ms T --wait-ms W --work-ms MIN:MAX
 *                [--think-ms MIN:MAX] --watchdog 0|1
 *                --until-us T --max-cycles M --seed S --fencing F
 *                [--cpu C] [--dlock PATH --step PATH]
 *                [--sabotage split-key|short-ttl] [--fair 0|1]
 *
 * Both modes loop until the monotonic time --until-us or --max-cycles
 * cycles, whichever comes first; one cycle is: take the lock (waiting up to
 * W ms), read the register with the fence, work a random time in MIN..MAX
 * ms, write the value + 1 with the fence, release, then "think" a random
 * time in the --think-ms range before the next cycle (0 by default): a
 * client that asks again the instant it released would barge in ahead of
 * the waiters it just woke, and the others would starve.
 *
 * api: through the C API, one dlock_client for the whole run.  Events:
 *   acq_call ID / acq_ok ID FENCE TTL_MS WATCHDOG / acq_err ID ERR /
 *   rel_call ID FENCE / rel_done ID FENCE ERR.
 * cli: each cycle is `dlock run --ttl T --wait W KEY -- chaos_step ...`;
 *   the step logs acq_ok and rel_call (it is the one holding the lock),
 *   this loop logs acq_call before starting dlock and, from dlock's exit
 *   status, rel_done ID 0 EXIT_0 (the command ran and the lock was not
 *   found lost; dlock also exits 0 when the release could not reach Redis,
 *   so this does not say the token was still there), rel_done ID 0
 *   DLOCK_LOST (76), acq_err ID DLOCK_BUSY (75) or DLOCK_UNAVAILABLE (69),
 *   or run_exit ID STATUS.  dlock always renews (its
 *   watchdog), so --watchdog does not apply.
 *
 * Neither a wait nor a hold's work runs past --until-us: a client still
 * waiting when the phase ends gives up then (acq_err), and a hold's work
 * is cut there, so a phase ends with its last releases.
 *
 *   chaos_client --probe-url URL
 *
 * asks the library whether it serves URL's kind of deployment: it makes a
 * client for URL with start_offline (no server needs to answer), exits 0
 * when the library took the URL, 4 when it refused it as DLOCK_INVALID
 * (printing the library's message), 3 on anything else.
 *
 * --fair 1 makes every acquire a fair one (opts.fair, dlock run --fair):
 * the waiters queue in Redis and a release hands the key to the first
 * (docs/fair.md), so the checker's bounds hold over the hand-off too.
 *
 * --sabotage breaks the lock on purpose (chaos_check's self-check): with
 * split-key the odd clients lock KEY:b instead of KEY; with short-ttl an
 * api client acquires with a fiftieth of the TTL it logs.
 *
 * Failures to reach Redis are part of the test: they are logged and the
 * loop goes on after a short pause, so a client never spins on an open
 * breaker.  The exit status is 0 unless the client could not start (bad
 * arguments, no register); chaos_check counts any other ending (a crash, a
 * signal it did not send) as a failure of the run.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dlock/dlock.h>

#include "chaos.h"

/* Pause after a failed acquire, so an open breaker is not spun on. */
#define RETRY_PAUSE_US 30000

typedef struct client_args {
    const char *mode, *dir, *url, *key, *dlock, *step, *sabotage;
    int id, watchdog, cpu, fair;
    int64_t ttl_ms, wait_ms, work_min_ms, work_max_ms, until_us;
    int64_t think_min_ms, think_max_ms;
    int64_t max_cycles, seed;
    chaos_fencing fencing;
} client_args;

typedef struct client {
    client_args a;
    int events;
    int unfenced; /* unfenced.log (chaos.h) */
    chaos_register *reg;
    chaos_slot *board;
    chaos_rng rng;
} client;

static void usage(void)
{
    fprintf(stderr,
            "usage: chaos_client --mode api|cli --dir DIR --id N "
            "--url URL --key KEY --ttl-ms T --wait-ms W --work-ms MIN:MAX "
            "[--think-ms MIN:MAX] --watchdog 0|1 --until-us T "
            "--max-cycles M --seed S --fencing F [--cpu C] "
            "[--dlock PATH --step PATH] [--sabotage split-key|short-ttl] "
            "[--fair 0|1]\n");
    exit(2);
}

/* Parses "MIN:MAX" milliseconds. */
static void parse_range(const char *s, int64_t *lo, int64_t *hi,
                        const char *what)
{
    const char *colon = s != NULL ? strchr(s, ':') : NULL;
    char min[32];

    if (colon == NULL || (size_t)(colon - s) >= sizeof(min))
        usage();
    memcpy(min, s, (size_t)(colon - s));
    min[colon - s] = '\0';
    *lo = chaos_arg_int(min, 0, 60000, what);
    *hi = chaos_arg_int(colon + 1, *lo, 60000, what);
}

/* The options that take a string, kept as given (argv outlives us). */
static const struct {
    const char *name;
    size_t offset;
} string_options[] = {
    {"--mode", offsetof(client_args, mode)},
    {"--dir", offsetof(client_args, dir)},
    {"--url", offsetof(client_args, url)},
    {"--key", offsetof(client_args, key)},
    {"--dlock", offsetof(client_args, dlock)},
    {"--step", offsetof(client_args, step)},
    {"--sabotage", offsetof(client_args, sabotage)},
};

static int parse_string_option(client_args *a, const char *name, const char *v)
{
    for (size_t i = 0; i < sizeof(string_options) / sizeof(string_options[0]);
         i++) {
        if (strcmp(name, string_options[i].name) == 0) {
            *(const char **)((char *)a + string_options[i].offset) = v;
            return 1;
        }
    }
    return 0;
}

/* Takes one "--name value" pair; returns 0 if name is unknown. */
static int parse_option(client_args *a, const char *name, const char *v)
{
    if (parse_string_option(a, name, v))
        return 1;
    if (strcmp(name, "--id") == 0)
        a->id = (int)chaos_arg_int(v, 0, CHAOS_CLIENTS_MAX - 1, name);
    else if (strcmp(name, "--watchdog") == 0)
        a->watchdog = (int)chaos_arg_int(v, 0, 1, name);
    else if (strcmp(name, "--fair") == 0)
        a->fair = (int)chaos_arg_int(v, 0, 1, name);
    else if (strcmp(name, "--cpu") == 0)
        a->cpu = (int)chaos_arg_int(v, -1, 4095, name);
    else if (strcmp(name, "--ttl-ms") == 0)
        a->ttl_ms = chaos_arg_int(v, 1, 3600000, name);
    else if (strcmp(name, "--wait-ms") == 0)
        a->wait_ms = chaos_arg_int(v, 0, 3600000, name);
    else if (strcmp(name, "--until-us") == 0)
        a->until_us = chaos_arg_int(v, 0, INT64_MAX, name);
    else if (strcmp(name, "--max-cycles") == 0)
        a->max_cycles = chaos_arg_int(v, 1, 100000000, name);
    else if (strcmp(name, "--seed") == 0)
        a->seed = chaos_arg_int(v, 0, INT64_MAX, name);
    else if (strcmp(name, "--work-ms") == 0)
        parse_range(v, &a->work_min_ms, &a->work_max_ms, name);
    else if (strcmp(name, "--think-ms") == 0)
        parse_range(v, &a->think_min_ms, &a->think_max_ms, name);
    else if (strcmp(name, "--fencing") == 0)
        a->fencing = chaos_arg_fencing(v);
    else
        return 0;
    return 1;
}

static void parse_args(int argc, char **argv, client_args *a)
{
    memset(a, 0, sizeof(*a));
    a->id = -1;
    a->cpu = -1;
    for (int i = 1; i < argc; i += 2)
        if (i + 1 >= argc || !parse_option(a, argv[i], argv[i + 1]))
            usage();
    if (a->mode == NULL || a->dir == NULL || a->url == NULL || a->key == NULL
        || a->id < 0 || a->ttl_ms == 0 || a->until_us == 0
        || a->max_cycles == 0)
        usage();
    if (strcmp(a->mode, "cli") == 0 && (a->dlock == NULL || a->step == NULL))
        usage();
    if (a->sabotage != NULL && strcmp(a->sabotage, "split-key") == 0
        && a->id % 2 == 1) {
        static char split[1100];

        snprintf(split, sizeof(split), "%s:b", a->key);
        a->key = split;
    }
}

/* The TTL asked of Redis: the logged one, unless sabotaged. */
static int64_t acquire_ttl(const client_args *a)
{
    if (a->sabotage != NULL && strcmp(a->sabotage, "short-ttl") == 0)
        return a->ttl_ms / 50 > 0 ? a->ttl_ms / 50 : 1;
    return a->ttl_ms;
}

static void pin_to_cpu(int cpu)
{
    cpu_set_t set;

    if (cpu < 0)
        return;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
        fprintf(stderr, "chaos_client: pinning to CPU %d: %s\n", cpu,
                strerror(errno));
}

/* The wait left before --until-us, at most --wait-ms. */
static int64_t wait_ms(const client *c)
{
    int64_t left = (c->a.until_us - chaos_now_us()) / 1000;

    if (left < 0)
        left = 0;
    return left < c->a.wait_ms ? left : c->a.wait_ms;
}

/* A random work time, cut at --until-us (a hold that starts near the
 * end of the phase still reads and writes, only sooner). */
static int64_t work_us(client *c)
{
    int64_t us = 1000
                 * chaos_rng_range(&c->rng, c->a.work_min_ms,
                                   c->a.work_max_ms);
    int64_t left = c->a.until_us - chaos_now_us();

    return us < left ? us : left > 0 ? left : 0;
}

static void think(client *c)
{
    chaos_sleep_us(
        1000 * chaos_rng_range(&c->rng, c->a.think_min_ms, c->a.think_max_ms));
}

/* ---- api mode --------------------------------------------------------- */

static dlock_client *connect_api(client *c)
{
    dlock_client_opts o;
    dlock_client *dc = NULL;
    char err[DLOCK_ERRMSG_MAX];

    dlock_client_opts_init(&o);
    o.connect_timeout_ms = 400;
    o.io_timeout_ms = 400;
    o.breaker_threshold = 2;
    o.breaker_probe_ms = 100;
    /* A client respawned while Redis restarts must still start. */
    o.start_offline = 1;
    if (dlock_client_new(c->a.url, &o, &dc, err, sizeof(err)) != DLOCK_OK)
        fprintf(stderr, "chaos_client %d: dlock_client_new: %s\n", c->a.id,
                err);
    return dc;
}

/* Touches the unfenced resource as a C API holder: at the start and the
 * end of its work, so that the resource sees when a newer hold began; a
 * late touch of a C API holder is not counted (nothing stops it: only
 * `dlock run` promises that), see chaos_analyze.c. */
static void touch_unfenced(client *c, uint64_t fence)
{
    chaos_event(c->unfenced, "%d %llu %ld api", c->a.id,
                (unsigned long long)fence, (long)getpid());
}

/* One api cycle; returns 1 if the lock was taken. */
static int api_cycle(client *c, dlock_client *dc)
{
    dlock_acquire_opts o;
    dlock_lock *lock = NULL;
    dlock_err err;
    uint64_t fence;

    dlock_acquire_opts_init(&o);
    o.ttl_ms = acquire_ttl(&c->a);
    o.wait_ms = wait_ms(c);
    o.watchdog = c->a.watchdog;
    o.fair = c->a.fair;
    chaos_event(c->events, "acq_call %d", c->a.id);
    err = dlock_acquire(dc, c->a.key, &o, &lock);
    if (err != DLOCK_OK) {
        chaos_event(c->events, "acq_err %d %s", c->a.id, dlock_errname(err));
        chaos_sleep_us(RETRY_PAUSE_US);
        return 0;
    }
    fence = dlock_lock_fence(lock);
    chaos_event(c->events, "acq_ok %d %llu %lld %d", c->a.id,
                (unsigned long long)fence, (long long)c->a.ttl_ms,
                c->a.watchdog);
    chaos_board_hold(c->board, c->a.id, 1);
    touch_unfenced(c, fence);
    chaos_critical_section(c->reg, c->a.id, fence, work_us(c));
    touch_unfenced(c, fence);
    chaos_board_hold(c->board, c->a.id, 0);
    chaos_event(c->events, "rel_call %d %llu", c->a.id,
                (unsigned long long)fence);
    err = dlock_release(lock);
    chaos_event(c->events, "rel_done %d %llu %s", c->a.id,
                (unsigned long long)fence, dlock_errname(err));
    think(c);
    return 1;
}

static int64_t run_api(client *c)
{
    dlock_client *dc = connect_api(c);
    int64_t cycles = 0;

    if (dc == NULL)
        return -1;
    while (cycles < c->a.max_cycles && chaos_now_us() < c->a.until_us) {
        api_cycle(c, dc);
        cycles++;
    }
    dlock_client_free(dc);
    return cycles;
}

/* ---- cli mode --------------------------------------------------------- */

/* Starts `dlock run ... -- chaos_step ...` and returns its exit status
 * (128 + N for signal N, -1 if it could not be started). */
static int run_dlock(client *c)
{
    /* Not fair: the slot says --quiet once more. */
    const char *fair = c->a.fair ? "--fair" : "--quiet";
    char ttl[32], ttl_ms[32], wait[32], id[16], work[32], fencing[8];
    const char *argv[] = {
        c->a.dlock, "run",      "--url",   c->a.url,    "--ttl",  ttl,
        "--wait",   wait,       "--grace", "100ms",     "-q",     fair,
        c->a.key,   "--",       c->a.step, "--dir",     c->a.dir, "--id",
        id,         "--ttl-ms", ttl_ms,    "--work-us", work,     "--fencing",
        fencing,    NULL,
    };
    static const char *const fencing_names[] = {"full", "writes", "off"};
    int status;
    pid_t pid;

    snprintf(ttl, sizeof(ttl), "%lldms", (long long)c->a.ttl_ms);
    snprintf(ttl_ms, sizeof(ttl_ms), "%lld", (long long)c->a.ttl_ms);
    snprintf(wait, sizeof(wait), "%lldms", (long long)wait_ms(c));
    snprintf(id, sizeof(id), "%d", c->a.id);
    snprintf(work, sizeof(work), "%lld", (long long)work_us(c));
    snprintf(fencing, sizeof(fencing), "%s", fencing_names[c->a.fencing]);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Logs what dlock's exit status says about the cycle. */
static void log_run_exit(client *c, int status)
{
    switch (status) {
    case 0: chaos_event(c->events, "rel_done %d 0 EXIT_0", c->a.id); break;
    case 76:
        chaos_event(c->events, "rel_done %d 0 DLOCK_LOST", c->a.id);
        break;
    case 75: chaos_event(c->events, "acq_err %d DLOCK_BUSY", c->a.id); break;
    case 69:
        chaos_event(c->events, "acq_err %d DLOCK_UNAVAILABLE", c->a.id);
        break;
    default: chaos_event(c->events, "run_exit %d %d", c->a.id, status);
    }
}

static int64_t run_cli(client *c)
{
    int64_t cycles = 0;

    while (cycles < c->a.max_cycles && chaos_now_us() < c->a.until_us) {
        int status;

        chaos_event(c->events, "acq_call %d", c->a.id);
        status = run_dlock(c);
        log_run_exit(c, status);
        if (status != 0 && status != 76)
            chaos_sleep_us(RETRY_PAUSE_US);
        else
            think(c);
        cycles++;
    }
    return cycles;
}

/* --probe-url (see the top of the file). */
static int probe_url(const char *url)
{
    dlock_client_opts o;
    dlock_client *dc = NULL;
    char err[DLOCK_ERRMSG_MAX] = "";
    dlock_err rc;

    dlock_client_opts_init(&o);
    o.connect_timeout_ms = 200;
    o.io_timeout_ms = 200;
    o.start_offline = 1;
    rc = dlock_client_new(url, &o, &dc, err, sizeof(err));
    dlock_client_free(dc);
    printf("%s: %s\n", dlock_errname(rc), err[0] ? err : "served");
    if (rc == DLOCK_INVALID)
        return 4;
    return rc == DLOCK_OK || rc == DLOCK_UNAVAILABLE || rc == DLOCK_TIMEOUT
               ? 0
               : 3;
}

int main(int argc, char **argv)
{
    client c;
    int64_t cycles;

    if (argc == 3 && strcmp(argv[1], "--probe-url") == 0)
        return probe_url(argv[2]);
    memset(&c, 0, sizeof(c));
    parse_args(argc, argv, &c.a);
    chaos_rng_seed(&c.rng, (uint64_t)c.a.seed);
    pin_to_cpu(c.a.cpu);
    c.events = chaos_events_open(c.a.dir);
    c.unfenced = chaos_log_open(c.a.dir, "unfenced.log");
    c.reg = chaos_register_open(c.a.dir, c.a.fencing);
    c.board = chaos_board_map(c.a.dir, 0);
    if (c.events < 0 || c.unfenced < 0 || c.reg == NULL || c.board == NULL)
        return 3;
    chaos_event(c.events, "start %d %ld %s", c.a.id, (long)getpid(), c.a.mode);
    cycles = strcmp(c.a.mode, "cli") == 0 ? run_cli(&c) : run_api(&c);
    chaos_event(c.events, "exit %d %lld", c.a.id, (long long)cycles);
    chaos_board_unmap(c.board);
    chaos_register_close(c.reg);
    close(c.events);
    close(c.unfenced);
    return cycles < 0 ? 3 : 0;
}
