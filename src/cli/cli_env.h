/*
 * cli_env.h: the environment `dlock run` gives its command.
 *
 * The command gets the caller's environment plus what it needs to know
 * about the lock it runs under:
 *   DLOCK_KEY       the lock's name;
 *   DLOCK_TOKEN     the owner token (32 hex digits), empty when degraded;
 *   DLOCK_FENCE     the fencing token of this grant, 0 when degraded;
 *   DLOCK_DEGRADED  1 when --fail-open ran the command without the lock,
 *                   else 0.
 * Any of these already in the environment (a dlock run inside another)
 * is replaced, never doubled.  The array is built in the parent before
 * fork, because a child of a multithreaded process may only make
 * async-signal-safe calls until it execs, and setenv is not one.
 */
#ifndef DLOCK_CLI_ENV_H
#define DLOCK_CLI_ENV_H

#include <stdint.h>

#define CLI_ENV_VARS 4

struct cli_env {
    char **envp;               /* NULL-terminated, for execve */
    char *owned[CLI_ENV_VARS]; /* our "NAME=value" strings */
};

/*
 * Builds env from base (NULL-terminated, such as environ; its strings are
 * borrowed and must outlive env) and the lock's details.  token may be
 * NULL for an empty one.  Returns 0, or -1 when out of memory (env is then
 * empty and safe to free).
 */
int cli_env_build(struct cli_env *env, char *const *base, const char *key,
                  const char *token, uint64_t fence, int degraded);

/* Frees what cli_env_build made; safe on an empty env. */
void cli_env_free(struct cli_env *env);

#endif /* DLOCK_CLI_ENV_H */
