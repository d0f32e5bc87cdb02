/*
 * cli_client.h: the dlock_client a subcommand talks through.
 *
 * Where the server is: --url, else $REDIS_URL, else redis://127.0.0.1:6379
 * (the URL forms are those of dlock_client_new).  The TLS options go to
 * dlock_client_opts unchanged; the library checks them.  Each dlock
 * process makes one client and frees it before it exits.
 */
#ifndef DLOCK_CLI_CLIENT_H
#define DLOCK_CLI_CLIENT_H

#include "cli_args.h"
#include "cli_token.h"
#include "dlock/dlock.h"

/* The URL to use: a->url, else $REDIS_URL (when set and not empty), else
 * CLI_DEFAULT_URL.  Borrowed from a or the environment. */
const char *cli_client_url(const struct cli_args *a);

/*
 * Connects to the server named by a.  With start_offline, a server that
 * does not answer is not an error: the client starts with its breaker open
 * (for run --fail-open).  On failure, says why on stderr (one line) and
 * returns the exit code (64 for a malformed URL or option, 69 when the
 * server cannot be used, 70 otherwise); returns 0 with *out set on success.
 */
int cli_client_open(const struct cli_args *a, int start_offline,
                    dlock_client **out);

/*
 * As cli_client_open, for a client that keeps a lease alive by renewing
 * it every ttl/3 (`dlock run`, `dlock leader`, `run --every`): its
 * connect and round-trip timeouts are a quarter of a->ttl_ms (at most the
 * library's 5 s default, at least 50 ms), so that one stuck call cannot
 * outlast the time left for the next renewal.
 */
int cli_client_open_for_lease(const struct cli_args *a, int start_offline,
                              dlock_client **out);

/* The one call release or extend makes on the lock it attached: it
 * returns the library's answer and leaves l freed (dlock_release frees
 * it; an extend frees it with dlock_lock_free). */
typedef dlock_err (*cli_token_call)(dlock_lock *l, const struct cli_args *a);

/*
 * For release and extend: finds the token (cli_token.h: the operand,
 * stdin or $DLOCK_TOKEN), connects (cli_client_open), attaches the token
 * to a->key and runs call on that lock.  A failure is said on stderr:
 * a token that no longer holds the key as "... any more (it expired or
 * was taken): " followed by lost (what did not happen), another as
 * "cannot VERB lock KEY: " and the client's message.  Returns the exit
 * code (cli_exit_of, CLI_EXIT_BUSY for a lost token); frees everything.
 */
int cli_client_on_token(const struct cli_args *a, cli_token_call call,
                        const char *verb, const char *lost);

#endif /* DLOCK_CLI_CLIENT_H */
