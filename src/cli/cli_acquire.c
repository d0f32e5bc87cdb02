/*
 * cli_acquire.c: `dlock acquire KEY`, for scripts that hold a lock across
 * several commands.
 *
 * It takes the lock, prints "token=<hex> fence=<n> ttl_ms=<n>" on one line
 * of stdout and exits, leaving the lock held in Redis: nothing renews it,
 * so the script must `dlock extend` it before the TTL runs out and
 * `dlock release` it with the printed token.  The lock object is therefore
 * freed without a release.  If the line cannot be written, the token is
 * lost to the caller, so the lock is released again and dlock exits 70.
 *
 * --fair queues in the fair lock's line.  A fair waiter may hold the lock
 * on the grant message with only its confirm window set in Redis, the
 * full TTL following from the watchdog, which exits with this process; so
 * a fair acquire is extended to --ttl before the line is printed.
 */
#include <inttypes.h>
#include <stdio.h>

#include "cli_client.h"
#include "cli_cmd.h"
#include "cli_exit.h"
#include "cli_say.h"

static int print_grant(const dlock_lock *lock, int64_t ttl_ms)
{
    if (printf("token=%s fence=%" PRIu64 " ttl_ms=%" PRId64 "\n",
               dlock_lock_token(lock), dlock_lock_fence(lock), ttl_ms)
            < 0
        || fflush(stdout) != 0)
        return -1;
    return 0;
}

int cli_cmd_acquire(const struct cli_args *a)
{
    dlock_client *client = NULL;
    dlock_lock *lock = NULL;
    dlock_acquire_opts opts;
    dlock_err err;
    int code = cli_client_open(a, 0, &client);

    if (code != CLI_EXIT_OK)
        return code;
    dlock_acquire_opts_init(&opts);
    opts.ttl_ms = a->ttl_ms;
    opts.wait_ms = a->wait_ms;
    opts.fair = a->fair;
    err = dlock_acquire(client, a->key, &opts, &lock);
    if (err == DLOCK_OK && a->fair)
        err = dlock_extend(lock, a->ttl_ms);
    if (err == DLOCK_BUSY) {
        cli_say("%s", dlock_client_errmsg(client));
    } else if (err != DLOCK_OK) {
        cli_say("cannot acquire lock %.64s: %s", a->key,
                dlock_client_errmsg(client));
    } else if (print_grant(lock, a->ttl_ms) != 0) {
        cli_say("cannot print the token of lock %.64s: %m; releasing it",
                a->key);
        dlock_release(lock);
        lock = NULL;
        err = DLOCK_SYSTEM;
    }
    code = cli_exit_of(err, CLI_EXIT_BUSY);
    dlock_lock_free(lock);
    dlock_client_free(client);
    return code;
}
