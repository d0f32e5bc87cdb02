/*
 * cli_extend.c: `dlock extend [--ttl D] KEY TOKEN`, the renewal of a lock
 * taken by `dlock acquire`.
 *
 * Like release, it attaches the token (dlock_lock_attach) and lets the
 * library's compare-and-expire decide, so only the holder can extend.
 * The new TTL counts from now, and is always passed explicitly: an
 * attached lock does not know the TTL it was acquired with.
 */
#include "cli_client.h"
#include "cli_cmd.h"
#include "cli_exit.h"
#include "cli_say.h"

int cli_cmd_extend(const struct cli_args *a)
{
    dlock_client *client = NULL;
    dlock_lock *lock = NULL;
    char token[CLI_TOKEN_MAX];
    dlock_err err;
    const int code = cli_client_attach_token(a, &client, &lock, token);

    if (code != CLI_EXIT_OK) {
        dlock_client_free(client);
        return code;
    }
    err = dlock_extend(lock, a->ttl_ms);
    if (err == DLOCK_LOST)
        cli_say("lock %.64s is not held by token %s any more (it expired or "
                "was taken): not extended",
                a->key, token);
    else if (err != DLOCK_OK)
        cli_say("cannot extend lock %.64s: %s", a->key,
                dlock_client_errmsg(client));
    dlock_lock_free(lock);
    dlock_client_free(client);
    return cli_exit_of(err, CLI_EXIT_BUSY);
}
