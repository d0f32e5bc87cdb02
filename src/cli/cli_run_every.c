/*
 * cli_run_every.c: `dlock run --every D KEY -- COMMAND`, cron across
 * nodes: every node runs the same line, and each tick of D at most one of
 * them runs COMMAND.
 *
 * Built on the scheduled-job pattern of dlock/leader.h: the nodes campaign
 * for KEY in the background (cli_role.h), and at each tick the node asks
 * dlock_leader_tick whether the tick is its to run: yes only for the
 * leader, and only once per tick across all nodes and terms, so a tick is
 * never run twice, also across a fail-over.  Ticks are counted on the
 * Redis server's clock, floor(server ms / D), so every node wakes at the
 * same boundaries whatever its own clock says.
 *
 * The loop, on the main thread:
 *   ASK    dlock_leader_tick.  OK: run COMMAND for this tick (RUN).  BUSY
 *          (this tick ran already) or LOST (another node leads): sleep to
 *          the next tick.  A failure to reach Redis: said once, not at
 *          every tick, and asked again at the next tick (at most 1 s).
 *   RUN    COMMAND runs with DLOCK_TICK and DLOCK_TERM (= DLOCK_FENCE) in
 *          its environment, supervised (cli_supervise.h); losing the
 *          leadership meanwhile stops it, as `dlock run` stops a command
 *          whose lock is lost, since another node may then run the next
 *          tick.
 *   SLEEP  poll(2) on the wakeup pipe until the next tick boundary, or
 *          until this node becomes the leader (ASK at once: a tick whose
 *          leader died before running it is then run late rather than
 *          skipped), or a signal.
 * A COMMAND that outlives its tick: this node keeps the leadership (the
 * lease is renewed meanwhile) and asks again only at the first boundary
 * after COMMAND ended, so the ticks that began while it ran are skipped
 * on every node (the next start says how many), and two runs never
 * overlap.  SIGINT, SIGTERM or SIGHUP stop a running COMMAND (SIGKILL
 * after --grace), resign, and dlock exits 0.  A COMMAND that cannot be run
 * (126, 127) ends dlock with that status, since it would fail every tick.
 */
#include <inttypes.h>
#include <time.h>

#include "cli_cmd.h"
#include "cli_exit.h"
#include "cli_role.h"
#include "cli_say.h"

/* Past the server's tick boundary when we wake, despite timer slack. */
#define WAKE_MARGIN_MS 5
/* Longest wait before asking again after Redis failed. */
#define RETRY_MAX_MS 1000

struct every {
    struct cli_role role;
    int failing; /* the last ask failed (said once) */
};

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The first tick boundary after now, from one known at boundary_ms. */
static int64_t next_boundary(int64_t boundary_ms, int64_t period_ms)
{
    const int64_t now = now_ms();

    if (boundary_ms > now)
        return boundary_ms;
    return boundary_ms + ((now - boundary_ms) / period_ms + 1) * period_ms;
}

/* Says when asking for a tick starts or stops failing, not every time. */
static void note_ask(struct every *e, dlock_err err)
{
    const struct cli_args *a = e->role.a;

    if (err != DLOCK_OK && err != DLOCK_BUSY && err != DLOCK_LOST) {
        /* The library's message names the leader, the server, the
         * reason. */
        if (!e->failing)
            cli_say("%s; asking again at each tick",
                    dlock_client_errmsg(e->role.client));
        e->failing = 1;
        return;
    }
    if (e->failing)
        cli_say("tick of leader %.64s: redis answers again", a->key);
    e->failing = 0;
}

/* RUN: the command for tick t.  Returns 0 to go on, else the exit code. */
static int run_tick(struct every *e, const dlock_leader_tick_info *t,
                    int64_t *wake_ms, int64_t boundary_ms)
{
    const struct cli_args *a = e->role.a;
    struct cli_outcome out;
    int code;

    if (t->skipped > 0 && !a->quiet)
        cli_say("tick %" PRId64 " of %.64s: %" PRId64 " tick(s) skipped "
                "before it (a run outlasted its tick, or no node led)",
                t->tick, a->key, t->skipped);
    code = cli_role_run_command(&e->role, dlock_leader_term(e->role.leader),
                                t->tick, &out);
    if (code != CLI_EXIT_OK)
        return code;
    *wake_ms = next_boundary(boundary_ms, a->every_ms) + WAKE_MARGIN_MS;
    return CLI_EXIT_OK;
}

/* ASK: claims the current tick and runs it if it is ours; sets *wake_ms
 * to when to ask next.  Returns 0 to go on, else the exit code. */
static int ask(struct every *e, int64_t *wake_ms)
{
    const struct cli_args *a = e->role.a;
    dlock_leader_tick_info t = {0};
    const dlock_err err = dlock_leader_tick(e->role.leader, a->every_ms, &t);

    note_ask(e, err);
    if (err == DLOCK_OK || err == DLOCK_BUSY || err == DLOCK_LOST) {
        /* t is filled in only on these outcomes. */
        const int64_t boundary_ms = now_ms() + t.next_in_ms;

        if (err == DLOCK_OK)
            return run_tick(e, &t, wake_ms, boundary_ms);
        *wake_ms = boundary_ms + WAKE_MARGIN_MS;
        return CLI_EXIT_OK;
    }
    if (err == DLOCK_INVALID) {
        cli_say("run --every of %.64s: %s", a->key,
                dlock_client_errmsg(e->role.client));
        return CLI_EXIT_USAGE;
    }
    *wake_ms = now_ms()
               + (a->every_ms < RETRY_MAX_MS ? a->every_ms : RETRY_MAX_MS);
    return CLI_EXIT_OK;
}

static int every_loop(struct every *e)
{
    struct cli_role *r = &e->role;
    int64_t wake_ms = 0; /* ask at once */
    int code = CLI_EXIT_OK;

    while (r->stop_signal == 0 && code == CLI_EXIT_OK) {
        int64_t left = wake_ms - now_ms();

        if (r->gained) {
            r->gained = 0;
            left = 0;
        }
        if (left <= 0) {
            code = ask(e, &wake_ms);
            continue;
        }
        if (cli_role_wait(r, left) != 0)
            code = CLI_EXIT_INTERNAL;
    }
    return code;
}

int cli_cmd_run_every(const struct cli_args *a)
{
    struct every e = {.failing = 0};
    int code = cli_role_open(&e.role, a);

    if (code == CLI_EXIT_OK)
        code = every_loop(&e);
    cli_role_close(&e.role);
    return code;
}
