/*
 * cli_env.c: the command's environment (cli_env.h).
 *
 * The array is the base's entries minus our four names, then our four, then
 * NULL.  Only our four strings and the array are allocated; the rest point
 * into the base.
 */
#include "cli_env.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[CLI_ENV_VARS] = {
    "DLOCK_KEY", "DLOCK_TOKEN", "DLOCK_FENCE", "DLOCK_DEGRADED",
};

/* Whether entry ("NAME=value") sets one of our names. */
static int is_ours(const char *entry)
{
    for (size_t i = 0; i < CLI_ENV_VARS; i++) {
        const size_t n = strlen(names[i]);

        if (strncmp(entry, names[i], n) == 0 && entry[n] == '=')
            return 1;
    }
    return 0;
}

/* "NAME=value" in fresh memory, or NULL. */
static char *entry_new(const char *name, const char *value)
{
    const size_t len = strlen(name) + 1 + strlen(value) + 1;
    char *s = malloc(len);

    if (s != NULL)
        snprintf(s, len, "%s=%s", name, value);
    return s;
}

static int make_owned(struct cli_env *env, const char *key,
                      const char *token, uint64_t fence, int degraded)
{
    char fence_text[24];
    const char *values[CLI_ENV_VARS];

    snprintf(fence_text, sizeof(fence_text), "%" PRIu64, fence);
    values[0] = key;
    values[1] = token != NULL ? token : "";
    values[2] = fence_text;
    values[3] = degraded ? "1" : "0";
    for (size_t i = 0; i < CLI_ENV_VARS; i++) {
        env->owned[i] = entry_new(names[i], values[i]);
        if (env->owned[i] == NULL)
            return -1;
    }
    return 0;
}

int cli_env_build(struct cli_env *env, char *const *base, const char *key,
                  const char *token, uint64_t fence, int degraded)
{
    size_t n_base = 0, n = 0;

    memset(env, 0, sizeof(*env));
    while (base != NULL && base[n_base] != NULL)
        n_base++;
    if (make_owned(env, key, token, fence, degraded) != 0)
        goto fail;
    env->envp = calloc(n_base + CLI_ENV_VARS + 1, sizeof(char *));
    if (env->envp == NULL)
        goto fail;
    for (size_t i = 0; i < n_base; i++)
        if (!is_ours(base[i]))
            env->envp[n++] = base[i];
    for (size_t i = 0; i < CLI_ENV_VARS; i++)
        env->envp[n++] = env->owned[i];
    env->envp[n] = NULL;
    return 0;
fail:
    cli_env_free(env);
    return -1;
}

void cli_env_free(struct cli_env *env)
{
    for (size_t i = 0; i < CLI_ENV_VARS; i++) {
        free(env->owned[i]);
        env->owned[i] = NULL;
    }
    free(env->envp);
    env->envp = NULL;
}
