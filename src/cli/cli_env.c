/*
 * cli_env.c: the command's environment (cli_env.h).
 *
 * The array is the base's entries minus every DLOCK_* name, then the
 * variables asked for, then NULL.  Only our strings and the array are
 * allocated; the rest point into the base.
 */
#include "cli_env.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[CLI_ENV_VARS] = {
    "DLOCK_KEY",  "DLOCK_TOKEN", "DLOCK_FENCE",       "DLOCK_DEGRADED",
    "DLOCK_TERM", "DLOCK_TICK",  "DLOCK_VALID_UNTIL", "DLOCK_VALID_UNTIL_FILE",
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

int cli_env_build_vars(struct cli_env *env, char *const *base,
                       const struct cli_env_var *vars, size_t n_vars)
{
    size_t n_base = 0, n = 0;

    memset(env, 0, sizeof(*env));
    if (n_vars > CLI_ENV_VARS)
        return -1;
    while (base != NULL && base[n_base] != NULL)
        n_base++;
    for (size_t i = 0; i < n_vars; i++) {
        env->owned[i] = entry_new(vars[i].name, vars[i].value);
        if (env->owned[i] == NULL)
            goto fail;
    }
    env->envp = calloc(n_base + n_vars + 1, sizeof(char *));
    if (env->envp == NULL)
        goto fail;
    for (size_t i = 0; i < n_base; i++)
        if (!is_ours(base[i]))
            env->envp[n++] = base[i];
    for (size_t i = 0; i < n_vars; i++)
        env->envp[n++] = env->owned[i];
    env->envp[n] = NULL;
    return 0;
fail:
    cli_env_free(env);
    return -1;
}

/* Appends the deadline's variables to vars (n so far, room for two
 * more); text holds DLOCK_VALID_UNTIL's digits.  Returns the new n. */
static size_t add_deadline(struct cli_env_var *vars, size_t n,
                           const struct cli_env_deadline *d, char *text,
                           size_t textlen)
{
    if (d == NULL)
        return n;
    if (d->epoch_ms >= 0) {
        snprintf(text, textlen, "%" PRId64, d->epoch_ms);
        vars[n++] = (struct cli_env_var){"DLOCK_VALID_UNTIL", text};
    }
    if (d->file != NULL)
        vars[n++] = (struct cli_env_var){"DLOCK_VALID_UNTIL_FILE", d->file};
    return n;
}

int cli_env_build(struct cli_env *env, char *const *base, const char *key,
                  const char *token, uint64_t fence, int degraded,
                  const struct cli_env_deadline *deadline)
{
    char fence_text[24], until_text[24];
    struct cli_env_var vars[CLI_ENV_VARS] = {
        {"DLOCK_KEY", key},
        {"DLOCK_TOKEN", token != NULL ? token : ""},
        {"DLOCK_FENCE", fence_text},
        {"DLOCK_DEGRADED", degraded ? "1" : "0"},
    };
    size_t n = add_deadline(vars, 4, deadline, until_text, sizeof(until_text));

    snprintf(fence_text, sizeof(fence_text), "%" PRIu64, fence);
    return cli_env_build_vars(env, base, vars, n);
}

int cli_env_build_leader(struct cli_env *env, char *const *base,
                         const char *key, uint64_t term, int64_t tick,
                         const struct cli_env_deadline *deadline)
{
    char term_text[24], tick_text[24], until_text[24];
    struct cli_env_var vars[CLI_ENV_VARS] = {
        {"DLOCK_KEY", key},
        {"DLOCK_TERM", term_text},
        {"DLOCK_FENCE", term_text},
        {"DLOCK_DEGRADED", "0"},
    };
    size_t n = 4;

    snprintf(term_text, sizeof(term_text), "%" PRIu64, term);
    snprintf(tick_text, sizeof(tick_text), "%" PRId64, tick);
    if (tick >= 0)
        vars[n++] = (struct cli_env_var){"DLOCK_TICK", tick_text};
    n = add_deadline(vars, n, deadline, until_text, sizeof(until_text));
    return cli_env_build_vars(env, base, vars, n);
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
