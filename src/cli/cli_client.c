/*
 * cli_client.c: builds the dlock_client from the command line
 * (cli_client.h).
 *
 * The library's defaults for timeouts and the pool suit a short-lived tool
 * too (one lock, one connection in use), so only the URL, TLS and the
 * offline start are set here; except for a client that keeps a lease
 * alive, whose timeouts scale with the lease.  Messages never echo the URL, which may
 * hold a password.
 */
#include "cli_client.h"

#include <stdlib.h>

#include "cli_duration.h"
#include "cli_exit.h"
#include "cli_say.h"

const char *cli_client_url(const struct cli_args *a)
{
    const char *env;

    if (a->url != NULL)
        return a->url;
    env = getenv("REDIS_URL");
    if (env != NULL && env[0] != '\0')
        return env;
    return CLI_DEFAULT_URL;
}

/* The library's default round-trip and connect timeouts. */
#define LIBRARY_TIMEOUT_MS 5000
#define LEASE_TIMEOUT_MIN_MS 50

/* The replicas each grant and renewal must reach: --wait-replicas and
 * --wait-replicas-timeout, else DLOCK_WAIT_REPLICAS and
 * DLOCK_WAIT_REPLICAS_TIMEOUT, else the URL's (the library reads
 * those).  Returns 0, or -1 after saying which variable is wrong. */
static int replica_opts(const struct cli_args *a, dlock_client_opts *opts)
{
    const char *n = getenv("DLOCK_WAIT_REPLICAS");
    const char *t = getenv("DLOCK_WAIT_REPLICAS_TIMEOUT");
    int64_t ms = a->wait_replicas_timeout_ms;

    opts->wait_replicas = a->wait_replicas;
    if (opts->wait_replicas == 0 && n != NULL && n[0] != '\0'
        && cli_args_replicas(n, &opts->wait_replicas) != 0) {
        cli_say("DLOCK_WAIT_REPLICAS '%.20s' is not a number 1..64", n);
        return -1;
    }
    if (ms == 0 && t != NULL && t[0] != '\0'
        && (cli_duration_parse(t, &ms) != 0 || ms <= 0 || ms > 3600000)) {
        cli_say("DLOCK_WAIT_REPLICAS_TIMEOUT '%.20s' is not a duration of "
                "1 ms to 1 h",
                t);
        return -1;
    }
    opts->wait_timeout_ms = (int)ms;
    return 0;
}

/* Connects with opts' timeouts (0: the library's) and the TLS options. */
static int open_client(const struct cli_args *a, dlock_client_opts *opts,
                       dlock_client **out)
{
    const char *url = cli_client_url(a);
    char why[DLOCK_ERRMSG_MAX];
    dlock_err err;

    if (replica_opts(a, opts) != 0)
        return CLI_EXIT_USAGE;
    opts->tls_ca_file = a->tls_ca_file;
    opts->tls_cert_file = a->tls_cert_file;
    opts->tls_key_file = a->tls_key_file;
    opts->tls_server_name = a->tls_server_name;
    why[0] = '\0';
    err = dlock_client_new(url, opts, out, why, sizeof(why));
    if (err == DLOCK_OK)
        return CLI_EXIT_OK;
    /* Not the URL: it may carry a password.  The library's message names
     * the host and port. */
    cli_say("cannot use redis: %s",
            why[0] != '\0' ? why : dlock_strerror(err));
    return cli_exit_of(err, CLI_EXIT_BUSY);
}

int cli_client_open(const struct cli_args *a, int start_offline,
                    dlock_client **out)
{
    dlock_client_opts opts;

    dlock_client_opts_init(&opts);
    opts.start_offline = start_offline;
    return open_client(a, &opts, out);
}

int cli_client_open_for_lease(const struct cli_args *a, int start_offline,
                              dlock_client **out)
{
    int64_t timeout_ms = a->ttl_ms / 4;
    dlock_client_opts opts;

    if (timeout_ms > LIBRARY_TIMEOUT_MS)
        timeout_ms = LIBRARY_TIMEOUT_MS;
    if (timeout_ms < LEASE_TIMEOUT_MIN_MS)
        timeout_ms = LEASE_TIMEOUT_MIN_MS;
    dlock_client_opts_init(&opts);
    opts.io_timeout_ms = (int)timeout_ms;
    opts.connect_timeout_ms = (int)timeout_ms;
    opts.start_offline = start_offline;
    return open_client(a, &opts, out);
}

/* Finds the token into token, connects and attaches it to a->key.
 * Returns CLI_EXIT_OK with *client and *lock set; else the exit code,
 * said on stderr, with *lock NULL and *client set or NULL. */
static int attach_token(const struct cli_args *a, dlock_client **client,
                        dlock_lock **lock, char token[CLI_TOKEN_MAX])
{
    char why[160];
    dlock_err err;
    int code;

    *client = NULL;
    *lock = NULL;
    if (cli_token_resolve(a->token, getenv("DLOCK_TOKEN"), stdin, token, why,
                          sizeof(why))
        != 0) {
        cli_say("%s", why);
        return CLI_EXIT_USAGE;
    }
    code = cli_client_open(a, 0, client);
    if (code != CLI_EXIT_OK)
        return code;
    err = dlock_lock_attach(*client, a->key, token, lock);
    if (err == DLOCK_OK)
        return CLI_EXIT_OK;
    cli_say("cannot use that token for lock %.64s: %s", a->key,
            dlock_client_errmsg(*client));
    return cli_exit_of(err, CLI_EXIT_BUSY);
}

int cli_client_on_token(const struct cli_args *a, cli_token_call call,
                        const char *verb, const char *lost)
{
    dlock_client *client = NULL;
    dlock_lock *lock = NULL;
    char token[CLI_TOKEN_MAX];
    dlock_err err;
    const int code = attach_token(a, &client, &lock, token);

    if (code != CLI_EXIT_OK) {
        dlock_client_free(client);
        return code;
    }
    err = call(lock, a);
    if (err == DLOCK_LOST)
        cli_say("lock %.64s is not held by token %s any more (it expired or "
                "was taken): %s",
                a->key, token, lost);
    else if (err != DLOCK_OK)
        cli_say("cannot %s lock %.64s: %s", verb, a->key,
                dlock_client_errmsg(client));
    dlock_client_free(client);
    return cli_exit_of(err, CLI_EXIT_BUSY);
}
