/*
 * cli_env.h: the environment dlock gives the commands it runs.
 *
 * The command gets the caller's environment plus what it needs to know
 * about the lock or leadership it runs under.  `dlock run` sets:
 *   DLOCK_KEY       the lock's name;
 *   DLOCK_TOKEN     the owner token (32 hex digits), empty when degraded;
 *   DLOCK_FENCE     the fencing token of this grant, 0 when degraded;
 *   DLOCK_DEGRADED  1 when --fail-open ran the command without the lock,
 *                   else 0.
 * Both kinds also get, when the lease has a deadline (not a degraded
 * --fail-open run):
 *   DLOCK_VALID_UNTIL       the lease's safe-until deadline when the
 *                           command started, in epoch milliseconds of
 *                           this host's clock: past it, another node may
 *                           hold the lock, and the command has been
 *                           killed by then;
 *   DLOCK_VALID_UNTIL_FILE  a file holding the same number, rewritten as
 *                           renewals move the deadline (and 0 once the
 *                           lock is lost), for long commands to re-read.
 * `dlock leader` and `dlock run --every` run under a leadership instead,
 * whose owner token stays private, and set:
 *   DLOCK_KEY, DLOCK_DEGRADED=0;
 *   DLOCK_TERM      the leadership's term (grows with each new leader);
 *   DLOCK_FENCE     the same number, so a command written for `dlock run`
 *                   passes the right fence on;
 *   DLOCK_TICK      run --every only: the tick number, floor(server
 *                   milliseconds / period).
 * Every one of these names that is already in the caller's environment (a
 * dlock inside another) is removed first, also those this command does
 * not set, so a value is never doubled nor left over from an outer run.
 * The array is built in the parent before fork, because a child of a
 * multithreaded process may only make async-signal-safe calls until it
 * execs, and setenv is not one.
 */
#ifndef DLOCK_CLI_ENV_H
#define DLOCK_CLI_ENV_H

#include <stddef.h>
#include <stdint.h>

/* How many DLOCK_* names there are (see above). */
#define CLI_ENV_VARS 8

struct cli_env {
    char **envp;               /* NULL-terminated, for execve */
    char *owned[CLI_ENV_VARS]; /* our "NAME=value" strings, NULL-padded */
};

/* One variable to set: name must be one of the DLOCK_* names above. */
struct cli_env_var {
    const char *name;
    const char *value;
};

/*
 * Builds env from base (NULL-terminated, such as environ; its strings are
 * borrowed and must outlive env) without any DLOCK_* variable, plus the n
 * (at most CLI_ENV_VARS) variables in vars, which are copied.  Returns 0,
 * or -1 when out of memory or n is too large (env is then empty and safe
 * to free).
 */
int cli_env_build_vars(struct cli_env *env, char *const *base,
                       const struct cli_env_var *vars, size_t n);

/* The lease's deadline for DLOCK_VALID_UNTIL and DLOCK_VALID_UNTIL_FILE:
 * epoch_ms < 0 leaves out the first, file NULL the second. */
struct cli_env_deadline {
    int64_t epoch_ms;
    const char *file;
};

/*
 * `dlock run`'s environment: DLOCK_KEY, DLOCK_TOKEN (token may be NULL
 * for an empty one), DLOCK_FENCE and DLOCK_DEGRADED, and the deadline's
 * variables (deadline may be NULL for none).  As cli_env_build_vars.
 */
int cli_env_build(struct cli_env *env, char *const *base, const char *key,
                  const char *token, uint64_t fence, int degraded,
                  const struct cli_env_deadline *deadline);

/*
 * The environment of a command run under a leadership: DLOCK_KEY,
 * DLOCK_TERM and DLOCK_FENCE (both term), DLOCK_DEGRADED=0, DLOCK_TICK
 * when tick >= 0, and the deadline's variables.  As cli_env_build_vars.
 */
int cli_env_build_leader(struct cli_env *env, char *const *base,
                         const char *key, uint64_t term, int64_t tick,
                         const struct cli_env_deadline *deadline);

/* Frees what the builders made; safe on an empty env. */
void cli_env_free(struct cli_env *env);

#endif /* DLOCK_CLI_ENV_H */
