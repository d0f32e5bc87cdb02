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
#include "cli_token.h"

#include <stdlib.h>

int cli_cmd_release(const struct cli_args *a)
{
    dlock_client *client = NULL;
    dlock_lock *lock = NULL;
    char token[CLI_TOKEN_MAX], why[160];
    dlock_err err;
    int code;

    if (cli_token_resolve(a->token, getenv("DLOCK_TOKEN"), stdin, token, why,
                          sizeof(why)) != 0) {
        cli_say("%s", why);
        return CLI_EXIT_USAGE;
    }
    code = cli_client_open(a, 0, &client);
    if (code != CLI_EXIT_OK)
        return code;
    err = dlock_lock_attach(client, a->key, token, &lock);
    if (err == DLOCK_OK)
        err = dlock_release(lock);
    if (err == DLOCK_LOST)
        cli_say("lock %.64s is not held by token %s any more (it expired or "
                "was taken): nothing released", a->key, token);
    else if (err != DLOCK_OK)
        cli_say("cannot release lock %.64s: %s", a->key,
                dlock_client_errmsg(client));
    dlock_client_free(client);
    return cli_exit_of(err, CLI_EXIT_BUSY);
}
