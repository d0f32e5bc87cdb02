/*
 * cli_role.h: what `dlock leader` and `dlock run --every` share: a
 * candidate for a role (dlock/leader.h) campaigning in the background, the
 * wakeup pipe its callbacks and dlock's signal handlers post to, and
 * running the command under the leadership.
 *
 * The candidate's thread campaigns, renews the lease every ttl/3 and calls
 * on_gained / on_lost, which only post CLI_WAKE_GAINED / CLI_WAKE_LOST to
 * the pipe (they run on the library's thread, which must not wait on
 * anything); the main thread sleeps in poll(2) on the pipe and decides
 * from dlock_leader_is_leader, never from the bytes alone.  Signals are
 * blocked while the client and the candidate start their threads, so the
 * handlers run on the main thread only (cli_wakeup.h).
 *
 * Lifetime: cli_role_open builds everything or nothing; cli_role_close
 * stops the candidate, resigning if it leads (so another node takes over
 * at once), then frees the candidate, the client and the pipe, in that
 * order, because the candidate's thread posts to the pipe until it stops.
 */
#ifndef DLOCK_CLI_ROLE_H
#define DLOCK_CLI_ROLE_H

#include <stdint.h>

#include "cli_args.h"
#include "cli_supervise.h"
#include "cli_wakeup.h"
#include "dlock/dlock.h"
#include "dlock/leader.h"

struct cli_role {
    const struct cli_args *a;
    dlock_client *client;
    dlock_leader *leader;
    struct cli_wakeup wakeup;
    int started;     /* the candidate's thread runs */
    int stop_signal; /* SIGINT/TERM/HUP received: end the loop */
    int gained;      /* CLI_WAKE_GAINED read since the last clear */
};

/*
 * Connects to Redis (cli_client_open_for_lease), makes the candidate for
 * a->key with a lease of a->ttl_ms, catches the signals and starts the
 * campaign.  Returns 0, or the exit code after saying why on stderr (r is
 * then safe to close).
 */
int cli_role_open(struct cli_role *r, const struct cli_args *a);

/*
 * Sleeps until an event arrives on the pipe or timeout_ms passes (< 0:
 * no limit), then reads every pending event: a stop signal sets
 * r->stop_signal, a gained event r->gained.  Returns 0, or -1 when poll
 * or read failed (said on stderr).
 */
int cli_role_wait(struct cli_role *r, int64_t timeout_ms);

/*
 * Runs a->command under the leadership's term (and for run --every, tick;
 * -1 for none), with DLOCK_KEY, DLOCK_TERM, DLOCK_FENCE, DLOCK_DEGRADED
 * and DLOCK_TICK in its environment; says when it starts and ends (unless
 * --quiet) and supervises it until it has ended, stopping it when the
 * leadership is lost or dlock is told to stop.  Fills *out, and sets
 * r->stop_signal when a stop signal came meanwhile.  Returns 0 once the
 * command has run and ended, else the exit code (126/127 not runnable, 70
 * internal), said on stderr.
 */
int cli_role_run_command(struct cli_role *r, uint64_t term, int64_t tick,
                         struct cli_outcome *out);

/* Stops the campaign (resigning when leading) and frees everything. */
void cli_role_close(struct cli_role *r);

#endif /* DLOCK_CLI_ROLE_H */
