/*
 * report: 3 scheduler processes, a job every second, and each tick run
 * exactly once, also when the leader is killed (dlock/leader.h).
 *
 * Every scheduler runs a dlock_leader in the background (lease 2 s,
 * renewed every 667 ms).  The one that leads asks dlock_leader_tick at
 * each tick of the server's clock whether the tick is its to run; it runs
 * the "report" (a line in the run log: tick number, pid, term, time) and
 * sleeps until the next tick.  The others stand by.  After 5 s the
 * coordinator kills the leader with SIGKILL, so it cannot resign: its lease
 * runs out within one TTL and a standby takes over and runs the next
 * ticks.  Ticks that fall into the takeover gap are skipped, never run
 * twice.
 *
 * Checked: no tick ran twice; every tick before the kill ran (exactly
 * once, by one process); a new leader, another process with a larger term,
 * took over within one TTL (+ 300 ms for polling and scheduling) of the
 * kill, ran the next tick within one tick period of taking over, and ran
 * every tick after that; the killed process ran nothing after its kill.
 *
 *   report [--redis URL] [--procs 3] [--seconds 10] [--tick-ms 1000]
 *          [--ttl-ms 2000] [--kill-at-ms 5000]
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "example_kit.h"

typedef struct run {
    const char *url;
    char role[128];
    char log[300];
    int64_t tick_ms;
    int64_t ttl_ms;
} run;

static volatile sig_atomic_t stopping;

static void on_term(int sig)
{
    (void)sig;
    stopping = 1;
}

static void log_event(const run *r, const char *what, int64_t tick,
                      uint64_t term)
{
    char line[256];

    snprintf(line, sizeof(line),
             "%s tick=%" PRId64 " pid=%ld term=%" PRIu64 " at_ms=%" PRId64,
             what, tick, (long)getpid(), term, ex_now_us() / 1000);
    ex_append_line(r->log, line);
}

static void on_gained(dlock_leader *l, uint64_t term, void *arg)
{
    (void)l;
    log_event(arg, "gained", -1, term);
}

/* One scheduler: campaign in the background, run the ticks it is given. */
static int scheduler(int index, void *arg)
{
    run *r = arg;
    dlock_client *c = ex_client(r->url);
    dlock_leader_opts o;
    dlock_leader *l;

    (void)index;
    signal(SIGTERM, on_term);
    dlock_leader_opts_init(&o);
    o.ttl_ms = r->ttl_ms;
    o.on_gained = on_gained;
    o.arg = r;
    if (dlock_leader_new(c, r->role, &o, &l) != DLOCK_OK
        || dlock_leader_start(l) != DLOCK_OK) {
        fprintf(stderr, "leader: %s\n", dlock_client_errmsg(c));
        return 2;
    }
    while (!stopping) {
        dlock_leader_tick_info t;
        dlock_err err;

        if (dlock_leader_wait(l, 1, 100) != DLOCK_OK)
            continue; /* standby */
        err = dlock_leader_tick(l, r->tick_ms, &t);
        if (err == DLOCK_OK)
            log_event(r, "tick", t.tick, dlock_leader_term(l));
        if (err == DLOCK_OK || err == DLOCK_BUSY)
            ex_work_ms(t.next_in_ms + 5); /* until the next tick */
    }
    dlock_leader_stop(l); /* resigns: a clean exit hands over at once */
    dlock_leader_free(l);
    dlock_client_free(c);
    return 0;
}

/* ---- reading the run log ------------------------------------------------ */

typedef struct event {
    int tick_event; /* 1: tick, 0: gained */
    int64_t tick;
    long pid;
    uint64_t term;
    int64_t at_ms;
} event;

static int parse_events(const char *path, event **out, size_t *n)
{
    char **lines;
    size_t count;
    event *ev;

    if (ex_read_lines(path, -1, &lines, &count) != 0)
        return -1;
    ev = calloc(count + 1, sizeof(*ev));
    if (ev == NULL) {
        free(lines);
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        char what[16];
        long long tick, at;
        unsigned long long term;

        if (sscanf(lines[i], "%15s tick=%lld pid=%ld term=%llu at_ms=%lld",
                   what, &tick, &ev[i].pid, &term, &at)
            != 5) {
            free(lines);
            free(ev);
            return -1;
        }
        ev[i].tick_event = strcmp(what, "tick") == 0;
        ev[i].tick = tick;
        ev[i].term = term;
        ev[i].at_ms = at;
    }
    free(lines);
    *out = ev;
    *n = count;
    return 0;
}

/* The pid that ran the latest tick so far, or 0. */
static long current_runner(const char *path)
{
    event *ev;
    size_t n;
    long pid = 0;

    if (parse_events(path, &ev, &n) != 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (ev[i].tick_event)
            pid = ev[i].pid;
    free(ev);
    return pid;
}

typedef struct verdict {
    int failures;
    int64_t before, after, skipped;
    int64_t takeover_ms, first_tick_ms;
} verdict;

/* Ticks must be unique and, within each leader's stretch, consecutive. */
static void check_ticks(const event *ev, size_t n, long killed,
                        int64_t kill_ms, verdict *v)
{
    int64_t last = -1, gained_at = -1;
    uint64_t killed_term = 0;
    long runner = 0;

    for (size_t i = 0; i < n; i++) {
        const event *e = &ev[i];

        if (!e->tick_event) {
            if (e->at_ms > kill_ms && gained_at < 0 && e->pid != killed) {
                gained_at = e->at_ms;
                v->takeover_ms = e->at_ms - kill_ms;
                if (e->term <= killed_term)
                    v->failures += ex_fail(
                        "the new leader's term %" PRIu64
                        " is above the killed one's %" PRIu64,
                        e->term, killed_term);
            }
            continue;
        }
        if (e->tick <= last)
            v->failures += ex_fail("tick %" PRId64 " ran twice or out of "
                                   "order (after %" PRId64 ")",
                                   e->tick, last);
        if (e->pid == killed && e->at_ms > kill_ms)
            v->failures += ex_fail("the killed process ran tick %" PRId64,
                                   e->tick);
        if (e->pid == killed)
            killed_term = e->term;
        if (last >= 0 && e->tick != last + 1 && e->pid == runner)
            v->failures += ex_fail("tick %" PRId64 " was skipped by a "
                                   "leader that kept leading",
                                   last + 1);
        if (last >= 0 && e->pid != runner)
            v->skipped += e->tick - last - 1;
        if (e->at_ms <= kill_ms)
            v->before++;
        else
            v->after++;
        if (e->at_ms > kill_ms && v->first_tick_ms < 0 && e->pid != killed)
            v->first_tick_ms = e->at_ms - kill_ms;
        last = e->tick;
        runner = e->pid;
    }
}

static int check(const run *r, long killed, int64_t kill_ms, int seconds)
{
    event *ev;
    size_t n;
    verdict v = {0, 0, 0, 0, -1, -1};

    if (parse_events(r->log, &ev, &n) != 0)
        return ex_fail("cannot read the run log %s", r->log);
    check_ticks(ev, n, killed, kill_ms, &v);
    free(ev);
    printf("ticks run: %" PRId64 " before the kill, %" PRId64
           " after; %" PRId64 " skipped during the takeover\n",
           v.before, v.after, v.skipped);
    printf("takeover %" PRId64 " ms after the kill (TTL %" PRId64 " ms); "
           "first new tick at +%" PRId64 " ms\n",
           v.takeover_ms, r->ttl_ms, v.first_tick_ms);
    if (v.before < 2)
        v.failures += ex_fail("ticks ran before the kill, got %" PRId64,
                              v.before);
    if (v.takeover_ms < 0 || v.takeover_ms > r->ttl_ms + 300)
        v.failures += ex_fail("another process takes over within one TTL "
                              "(%" PRId64 " ms + 300), took %" PRId64,
                              r->ttl_ms, v.takeover_ms);
    if (v.first_tick_ms < 0
        || v.first_tick_ms > v.takeover_ms + r->tick_ms + 100)
        v.failures += ex_fail("the new leader runs the next tick within one "
                              "period of taking over");
    if (v.before + v.after + v.skipped < seconds * 1000 / r->tick_ms - 2)
        v.failures += ex_fail("about one tick per period over the run");
    return v.failures;
}

int main(int argc, char **argv)
{
    run r;
    char dir[256];
    int procs = (int)ex_opt_long(argc, argv, "--procs", 3);
    int seconds = (int)ex_opt_long(argc, argv, "--seconds", 10);
    int64_t kill_at = ex_opt_long(argc, argv, "--kill-at-ms", 5000);
    int64_t started, kill_ms;
    long killed;
    pid_t *pids;
    int failures;

    memset(&r, 0, sizeof(r));
    r.url = ex_redis_url(argc, argv);
    r.tick_ms = ex_opt_long(argc, argv, "--tick-ms", 1000);
    r.ttl_ms = ex_opt_long(argc, argv, "--ttl-ms", 2000);
    snprintf(r.role, sizeof(r.role), "example:report:%ld", (long)getpid());
    ex_tmpdir("report", dir);
    snprintf(r.log, sizeof(r.log), "%s/runs", dir);
    pids = calloc((size_t)procs, sizeof(*pids));
    if (pids == NULL)
        return 2;
    printf("%d schedulers, a %" PRId64 " ms tick, lease %" PRId64 " ms, for "
           "%d s; the leader is killed at %" PRId64 " ms\n",
           procs, r.tick_ms, r.ttl_ms, seconds, kill_at);
    started = ex_now_us();
    ex_spawn(procs, scheduler, &r, pids);
    ex_work_ms(kill_at);
    killed = current_runner(r.log);
    kill_ms = ex_now_us() / 1000;
    if (killed > 0)
        kill((pid_t)killed, SIGKILL);
    printf("killed the leader, pid %ld\n", killed);
    ex_work_ms(seconds * 1000 - (ex_now_us() - started) / 1000);
    for (int i = 0; i < procs; i++)
        if (pids[i] != (pid_t)killed)
            kill(pids[i], SIGTERM);
    for (int i = 0; i < procs; i++)
        waitpid(pids[i], NULL, 0);
    failures = killed > 0 ? check(&r, killed, kill_ms, seconds)
                          : ex_fail("no leader ran a tick in %" PRId64 " ms",
                                    kill_at);
    free(pids);
    ex_rmdir(dir);
    puts(failures == 0 ? "PASS: every tick once; the fail-over within one "
                         "TTL"
                       : "FAIL");
    return failures == 0 ? 0 : 1;
}
