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

static dlock_err extend_call(dlock_lock *l, const struct cli_args *a)
{
    const dlock_err err = dlock_extend(l, a->ttl_ms);

    dlock_lock_free(l);
    return err;
}

int cli_cmd_extend(const struct cli_args *a)
{
    return cli_client_on_token(a, extend_call, "extend", "not extended");
}
