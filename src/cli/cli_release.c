/*
 * cli_release.c: `dlock release KEY TOKEN`, the end of a lock taken by
 * `dlock acquire`.
 *
 * The token is attached to a lock object (dlock_lock_attach) and released
 * with the library's compare-and-delete, so a token that no longer holds
 * the key deletes nothing: the key may belong to the next holder by now.
 * That case exits 76, so a script learns that its work was not protected
 * to the end.
 */
#include "cli_client.h"
#include "cli_cmd.h"
#include "cli_exit.h"
#include "cli_say.h"

int cli_cmd_release(const struct cli_args *a)
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
    err = dlock_release(lock);
    if (err == DLOCK_LOST)
        cli_say("lock %.64s is not held by token %s any more (it expired or "
                "was taken): nothing released",
                a->key, token);
    else if (err != DLOCK_OK)
        cli_say("cannot release lock %.64s: %s", a->key,
                dlock_client_errmsg(client));
    dlock_client_free(client);
    return cli_exit_of(err, CLI_EXIT_BUSY);
}
