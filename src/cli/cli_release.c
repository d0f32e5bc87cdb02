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

static dlock_err release_call(dlock_lock *l, const struct cli_args *a)
{
    (void)a;
    return dlock_release(l);
}

int cli_cmd_release(const struct cli_args *a)
{
    return cli_client_on_token(a, release_call, "release", "nothing released");
}
