/*
 * cli_run.c: `dlock run KEY -- COMMAND`, flock(1) across machines.  (With
 * --every, the scheduled form runs instead: cli_run_every.c.)
 *
 * The steps, and why they come in this order:
 *   1. Connect with SIGINT/TERM/HUP/CHLD blocked, so the library's
 *      background threads inherit a mask that keeps our handlers off them
 *      (cli_wakeup.h).  With --fail-open, a server that does not answer is
 *      not an error yet: the client starts offline.  The round-trip and
 *      connect timeouts scale with the lease (cli_client.h), so a renewal
 *      stuck on a silent network gives up while the lease still holds.
 *   2. Acquire with the watchdog on (renewal every ttl/3), and an on_lost
 *      callback that only posts CLI_WAKE_LOST to the self-pipe: the
 *      callback runs on the library's thread, which may not wait on
 *      anything, so the main thread does the stopping.  Until the command
 *      runs, signals keep their default actions: Ctrl-C during --wait just
 *      ends dlock, and a lock taken then expires by its TTL.
 *   3. Catch the signals, start the command in a process group of its own
 *      with DLOCK_KEY, DLOCK_TOKEN, DLOCK_FENCE, DLOCK_DEGRADED,
 *      DLOCK_VALID_UNTIL and DLOCK_VALID_UNTIL_FILE in its environment,
 *      and supervise it (cli_supervise.h) until it and everything it
 *      started have ended: the whole group is killed by the lease's
 *      deadline at the latest, whether or not a renewal ever answers.
 *   4. Release, still catching signals so that a late SIGTERM cannot cut
 *      the release short, and exit with the command's status, or 76 when
 *      the lock was lost while it ran.
 * The wakeup pipe outlives the client, because the watchdog may post to it
 * until the lock is released and the client's threads are stopped.
 */
#include <stdint.h>
#include <unistd.h>

#include "cli_client.h"
#include "cli_cmd.h"
#include "cli_env.h"
#include "cli_exit.h"
#include "cli_say.h"
#include "cli_supervise.h"
#include "cli_wakeup.h"

struct run {
    const struct cli_args *a;
    dlock_client *client;
    dlock_lock *lock;
    struct cli_wakeup wakeup;
    struct cli_env env;
    struct cli_lease lease;
    char valid_until_file[CLI_DEADLINE_PATH_MAX];
};

/* The lease as the supervisor sees it: the library's own conservative
 * validity, and its lost flag, read by the main thread at every turn. */
static int64_t lock_valid_ms(void *arg)
{
    return dlock_lock_valid_ms(arg);
}

static int lock_lost(void *arg)
{
    return dlock_lock_lost(arg);
}

/* On the library's watchdog thread: only wake the main thread. */
static void on_lost(dlock_lock *lock, void *arg)
{
    (void)lock;
    cli_wakeup_post(arg, CLI_WAKE_LOST);
}

static int run_connect(struct run *r)
{
    sigset_t old;
    int code;

    cli_wakeup_block_signals(&old);
    code = cli_client_open_for_lease(r->a, r->a->fail_open, &r->client);
    cli_wakeup_restore_mask(&old);
    return code;
}

/* Takes the lock into r->lock; when that fails, r->lock stays NULL and
 * the exit code is returned. */
static int run_acquire(struct run *r)
{
    const struct cli_args *a = r->a;
    dlock_acquire_opts opts;
    dlock_err err;

    dlock_acquire_opts_init(&opts);
    opts.ttl_ms = a->ttl_ms;
    opts.wait_ms = a->wait_ms;
    opts.watchdog = 1;
    opts.fair = a->fair;
    opts.policy = a->fail_open ? DLOCK_FAIL_OPEN : DLOCK_FAIL_CLOSED;
    opts.on_lost = on_lost;
    opts.on_lost_arg = &r->wakeup;
    err = dlock_acquire(r->client, a->key, &opts, &r->lock);
    if (err == DLOCK_BUSY) {
        if (!a->quiet)
            cli_say("%s", dlock_client_errmsg(r->client));
        return a->busy_exit;
    }
    if (err != DLOCK_OK) {
        cli_say("cannot acquire lock %.64s: %s", a->key,
                dlock_client_errmsg(r->client));
        return cli_exit_of(err, a->busy_exit);
    }
    if (dlock_lock_degraded(r->lock) && !a->quiet)
        cli_say("warning: running '%s' without lock %.64s (--fail-open): %s",
                a->command[0], a->key, dlock_client_errmsg(r->client));
    return CLI_EXIT_OK;
}

static int run_prepare_env(struct run *r)
{
    const int degraded = dlock_lock_degraded(r->lock);
    struct cli_env_deadline deadline = {cli_valid_until_epoch_ms(
                                            dlock_lock_valid_ms(r->lock)),
                                        NULL};

    r->lease = (struct cli_lease){
        .ttl_ms = r->a->ttl_ms,
        .valid_ms = lock_valid_ms,
        .lost = lock_lost,
        .arg = r->lock,
    };
    if (!degraded && cli_deadline_file_make(r->valid_until_file) == 0)
        deadline.file = r->lease.valid_until_file = r->valid_until_file;
    if (cli_env_build(&r->env, environ, r->a->key,
                      degraded ? NULL : dlock_lock_token(r->lock),
                      dlock_lock_fence(r->lock), degraded, &deadline)
        != 0) {
        cli_say("cannot start '%s': out of memory", r->a->command[0]);
        return CLI_EXIT_INTERNAL;
    }
    return CLI_EXIT_OK;
}

/* Starts the command and waits for it; returns its exit code, or ours
 * when it could not be started or supervised. */
static int run_command(struct run *r, struct cli_outcome *out)
{
    struct cli_supervision s = {
        .wakeup = &r->wakeup,
        .lease = &r->lease,
        .grace_ms = r->a->grace_ms,
        .key = r->a->key,
        .command = r->a->command[0],
    };
    int code;

    if (dlock_lock_lost(r->lock)) {
        cli_say("lock %.64s was lost before '%s' started", r->a->key,
                r->a->command[0]);
        out->lost = 1;
        return CLI_EXIT_LOST;
    }
    code = cli_supervise_command(&s, r->a->command, r->env.envp, out);
    if (code != 0)
        return code;
    return cli_exit_of_wait_status(out->wait_status);
}

/* Releases the lock and decides the final exit code. */
static int run_release(struct run *r, const struct cli_outcome *out, int code)
{
    dlock_err err = dlock_release(r->lock);

    r->lock = NULL;
    if (out->lost)
        return CLI_EXIT_LOST;
    if (err == DLOCK_LOST) {
        cli_say("lock %.64s was gone when '%s' ended (exit %d): its work may "
                "have overlapped another holder's",
                r->a->key, r->a->command[0], code);
        return CLI_EXIT_LOST;
    }
    if (err != DLOCK_OK)
        cli_say("warning: lock %.64s not released, it expires by its TTL: %s",
                r->a->key, dlock_client_errmsg(r->client));
    return code;
}

/* Runs the command under the held lock; releases it whatever happens. */
static int run_under_lock(struct run *r)
{
    struct cli_outcome out = {0};
    int code = run_prepare_env(r);

    if (code == CLI_EXIT_OK && cli_wakeup_catch_signals(&r->wakeup) != 0) {
        cli_say("cannot catch signals: %m");
        code = CLI_EXIT_INTERNAL;
    }
    if (code == CLI_EXIT_OK)
        code = run_command(r, &out);
    code = run_release(r, &out, code);
    cli_wakeup_release_signals(&r->wakeup);
    return code;
}

int cli_cmd_run(const struct cli_args *a)
{
    struct run r = {.a = a, .wakeup = {.read_fd = -1, .write_fd = -1}};
    int code;

    if (a->every_ms > 0)
        return cli_cmd_run_every(a);
    code = run_connect(&r);
    if (code != CLI_EXIT_OK)
        return code;
    if (cli_wakeup_open(&r.wakeup) != 0) {
        cli_say("cannot make the wakeup pipe: %m");
        code = CLI_EXIT_INTERNAL;
        goto done;
    }
    code = run_acquire(&r);
    /* Not "code == 0": --conflict-exit-code 0 makes a busy lock exit 0. */
    if (r.lock != NULL)
        code = run_under_lock(&r);
done:
    dlock_lock_free(r.lock);
    cli_env_free(&r.env);
    cli_deadline_file_remove(r.valid_until_file);
    dlock_client_free(r.client);
    cli_wakeup_close(&r.wakeup);
    return code;
}
