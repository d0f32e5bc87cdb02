/*
 * cli_leader.c: `dlock leader KEY -- COMMAND`: COMMAND runs on the one node
 * that leads KEY, and only while it leads.
 *
 * The loop, on the main thread, in two states:
 *   STANDBY  no command runs; sleep on the wakeup pipe until an event
 *            (gained, or a signal), then look at dlock_leader_is_leader.
 *   LEADING  the command runs under the term we lead in (cli_role.h),
 *            supervised until it ends.  Leadership lost (on_lost: the
 *            lease could not be renewed in time, or another node holds
 *            it) stops it, SIGTERM then SIGKILL after --grace, and we go
 *            back to STANDBY and campaign again.
 * The command exiting by itself ends dlock: it resigns, so another node
 * takes over at once, and exits with the command's status, which may be
 * the command saying "nothing left to do".  SIGINT, SIGTERM or SIGHUP, in
 * either state, stop the command, resign and exit 0.  The command never
 * runs while this node does not lead by its own conservative clock, which
 * ends before the server lets the lease go; so two nodes' commands
 * overlap at most by the time the loser takes to die after SIGTERM, and
 * not at all if it dies at once.
 */
#include "cli_cmd.h"
#include "cli_exit.h"
#include "cli_role.h"
#include "cli_say.h"

/* LEADING: runs the command; returns 1 to go on campaigning, 0 when
 * dlock should exit with *code.  *lost_term is the term whose command was
 * stopped for a lost or expiring lease. */
static int lead_once(struct cli_role *r, int *code, uint64_t *lost_term)
{
    const uint64_t term = dlock_leader_term(r->leader);
    struct cli_outcome out;

    *code = cli_role_run_command(r, term, -1, &out);
    if (*code != CLI_EXIT_OK || r->stop_signal != 0)
        return 0;
    if (out.lost) {
        *lost_term = term;
        if (!r->a->quiet)
            cli_say("leader of %.64s: campaigning again", r->a->key);
        return 1;
    }
    *code = cli_exit_of_wait_status(out.wait_status);
    return 0;
}

/*
 * Whether the term whose command was stopped (the lease was running out)
 * has not recovered: the library still counts this node as leader until
 * the lease's last millisecond, but the command must not start again on a
 * lease that is about to end.  Once a renewal brings the lease back above
 * half the TTL, the same term may run the command again.
 */
static int lease_still_failing(const struct cli_role *r, uint64_t lost_term)
{
    return lost_term != 0 && dlock_leader_term(r->leader) == lost_term
           && dlock_leader_valid_ms(r->leader) <= r->a->ttl_ms / 2;
}

static int campaign_and_lead(struct cli_role *r)
{
    uint64_t lost_term = 0;
    int code = CLI_EXIT_OK;

    while (r->stop_signal == 0) {
        if (dlock_leader_is_leader(r->leader)
            && lease_still_failing(r, lost_term)) {
            /* on_lost wakes us when the lease ends; a renewal does not. */
            if (cli_role_wait(r, r->a->ttl_ms / 6 + 1) != 0)
                return CLI_EXIT_INTERNAL;
            continue;
        }
        if (dlock_leader_is_leader(r->leader)) {
            if (!lead_once(r, &code, &lost_term))
                return code;
            continue;
        }
        if (cli_role_wait(r, -1) != 0)
            return CLI_EXIT_INTERNAL;
    }
    return CLI_EXIT_OK;
}

int cli_cmd_leader(const struct cli_args *a)
{
    struct cli_role r;
    int code = cli_role_open(&r, a);

    if (code == CLI_EXIT_OK)
        code = campaign_and_lead(&r);
    cli_role_close(&r);
    return code;
}
