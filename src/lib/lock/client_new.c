/*
 * client_new.c: dlock_client_new and dlock_client_free, the public
 * constructor and destructor of a client.
 *
 * A client is the client layer's (client/client.c: URL, pool or
 * deployment, breaker, scripts, run_command) plus two parts of the lock
 * layer: the watchdog that renews held locks and times their validity,
 * and the registry of reentrant locks.  The constructor lives here, above
 * both layers, so that the client layer never includes the lock's: it
 * builds the client, attaches the lock's parts, makes the first round
 * trip and loads the lock's scripts, so that a first acquire costs one
 * round trip.  docs/architecture.md has the layers.
 */
#include <stdio.h>

#include "client/client_internal.h"
#include "lock/lock_internal.h"
#include "lock/watchdog.h"

/* The lock layer's parts, then the first round trip. */
static dlock_err attach_and_warm(dlock_client *c, dlock__msg *m)
{
    dlock__reentry *reentry = NULL;
    dlock__watchdog *watchdog = NULL;
    dlock_err err = dlock__reentry_new(&reentry, m);

    if (err == DLOCK_OK)
        err = dlock__watchdog_new(c, &watchdog, m);
    dlock__client_attach(c, watchdog, reentry);
    if (err != DLOCK_OK)
        return err;
    err = dlock__client_warm_up(c, m);
    /* Redlock masters load their scripts with EVAL as they go. */
    if (err == DLOCK_OK && dlock__client_redlock(c) == NULL)
        err = dlock__lock_load_scripts(c, m);
    /* A transport error may still start the client offline. */
    return dlock__client_start_offline(c, err);
}

dlock_err dlock_client_new(const char *url, const dlock_client_opts *opts,
                           dlock_client **out, char *errbuf, size_t errlen)
{
    dlock__msg m;
    dlock_client *c = NULL;
    dlock_err err;

    dlock__msg_clear(&m);
    if (out == NULL)
        return DLOCK_INVALID;
    *out = NULL;
    err = dlock__client_build(url, opts, &c, &m);
    if (err == DLOCK_OK)
        err = attach_and_warm(c, &m);
    if (err != DLOCK_OK) {
        if (errbuf != NULL && errlen > 0)
            snprintf(errbuf, errlen, "%s", m.text);
        dlock_client_free(c);
        return err;
    }
    *out = c;
    return DLOCK_OK;
}

void dlock_client_free(dlock_client *c)
{
    dlock__reentry *reentry;

    if (c == NULL)
        return;
    reentry = dlock__client_reentry(c);
    /* The watchdog first: it renews through the client's connections. */
    dlock__watchdog_free(dlock__client_watchdog(c));
    dlock__client_destroy(c);
    dlock__reentry_free(reentry);
}
