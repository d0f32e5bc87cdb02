/*
 * test_cli_env.c: the environment `dlock run`, `dlock leader` and
 * `dlock run --every` give their command (src/cli/cli_env.c).
 *
 * The command must find exactly one of each DLOCK_* variable with the
 * lock's values, even when dlock itself runs under another dlock run, and
 * everything else from the caller's environment unchanged and in order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "cli_env.h"
#include "testkit.h"

static int count_prefix(char *const *envp, const char *prefix)
{
    int n = 0;

    for (; *envp != NULL; envp++)
        if (strncmp(*envp, prefix, strlen(prefix)) == 0)
            n++;
    return n;
}

static const char *value_of(char *const *envp, const char *name)
{
    const size_t n = strlen(name);

    for (; *envp != NULL; envp++)
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
            return *envp + n + 1;
    return NULL;
}

static void lock_variables_are_added(void **state)
{
    char *base[] = {"PATH=/bin", "HOME=/root", NULL};
    struct cli_env env;

    (void)state;
    TK_EXPECT(cli_env_build(&env, base, "job",
                            "0123456789abcdef0123456789ab"
                            "cdef",
                            42, 0, NULL)
                  == 0,
              "the environment is built");
    TK_EXPECT(strcmp(env.envp[0], "PATH=/bin") == 0
                  && strcmp(env.envp[1], "HOME=/root") == 0,
              "the caller's variables come first, unchanged");
    TK_EXPECT(strcmp(value_of(env.envp, "DLOCK_KEY"), "job") == 0,
              "DLOCK_KEY=job");
    TK_EXPECT(strcmp(value_of(env.envp, "DLOCK_TOKEN"),
                     "0123456789abcdef0123456789abcdef")
                  == 0,
              "DLOCK_TOKEN is the token");
    TK_EXPECT(strcmp(value_of(env.envp, "DLOCK_FENCE"), "42") == 0,
              "DLOCK_FENCE=42");
    TK_EXPECT(strcmp(value_of(env.envp, "DLOCK_DEGRADED"), "0") == 0,
              "DLOCK_DEGRADED=0");
    TK_EXPECT(env.envp[6] == NULL, "2 + 4 entries, then NULL");
    cli_env_free(&env);
}

static void outer_lock_variables_are_replaced_not_doubled(void **state)
{
    char *base[] = {
        "DLOCK_KEY=outer",  "DLOCK_FENCE=7",    "X=1", "DLOCK_TOKEN=old",
        "DLOCK_DEGRADED=1", "DLOCK_KEYS=other", NULL};
    struct cli_env env;

    (void)state;
    TK_EXPECT(cli_env_build(&env, base, "inner", "t", 8, 0, NULL) == 0,
              "the environment is built");
    TK_EXPECT(count_prefix(env.envp, "DLOCK_KEY=") == 1
                  && count_prefix(env.envp, "DLOCK_FENCE=") == 1
                  && count_prefix(env.envp, "DLOCK_TOKEN=") == 1
                  && count_prefix(env.envp, "DLOCK_DEGRADED=") == 1,
              "one of each DLOCK_* variable");
    TK_EXPECT(strcmp(value_of(env.envp, "DLOCK_KEY"), "inner") == 0,
              "the inner key wins");
    TK_EXPECT(strcmp(value_of(env.envp, "DLOCK_DEGRADED"), "0") == 0,
              "the inner degraded flag wins");
    TK_EXPECT(value_of(env.envp, "DLOCK_KEYS") != NULL
                  && value_of(env.envp, "X") != NULL,
              "variables that only share a prefix are kept");
    cli_env_free(&env);
}

static void degraded_lock_has_empty_token_and_fence_zero(void **state)
{
    char *base[] = {NULL};
    struct cli_env env;

    (void)state;
    TK_EXPECT(cli_env_build(&env, base, "job", NULL, 0, 1, NULL) == 0,
              "the environment is built");
    TK_EXPECT(strcmp(value_of(env.envp, "DLOCK_TOKEN"), "") == 0,
              "DLOCK_TOKEN is empty");
    TK_EXPECT(strcmp(value_of(env.envp, "DLOCK_FENCE"), "0") == 0,
              "DLOCK_FENCE=0");
    TK_EXPECT(strcmp(value_of(env.envp, "DLOCK_DEGRADED"), "1") == 0,
              "DLOCK_DEGRADED=1");
    cli_env_free(&env);
    cli_env_free(&env);
}

static void leadership_gives_term_as_fence_and_tick(void **state)
{
    char *base[] = {"DLOCK_TOKEN=outer", "DLOCK_TICK=1", "PATH=/bin", NULL};
    struct cli_env env;

    (void)state;
    TK_EXPECT(cli_env_build_leader(&env, base, "role", 17, 99, NULL) == 0,
              "the environment is built");
    TK_EXPECT(strcmp(value_of(env.envp, "DLOCK_TERM"), "17") == 0
                  && strcmp(value_of(env.envp, "DLOCK_FENCE"), "17") == 0,
              "DLOCK_TERM and DLOCK_FENCE are the term");
    TK_EXPECT(strcmp(value_of(env.envp, "DLOCK_TICK"), "99") == 0
                  && count_prefix(env.envp, "DLOCK_TICK=") == 1,
              "one DLOCK_TICK, this tick's");
    TK_EXPECT(strcmp(value_of(env.envp, "DLOCK_KEY"), "role") == 0
                  && strcmp(value_of(env.envp, "DLOCK_DEGRADED"), "0") == 0,
              "DLOCK_KEY=role, DLOCK_DEGRADED=0");
    TK_EXPECT(value_of(env.envp, "DLOCK_TOKEN") == NULL,
              "an outer DLOCK_TOKEN is removed, not passed on");
    TK_EXPECT(strcmp(env.envp[0], "PATH=/bin") == 0 && env.envp[6] == NULL,
              "the caller's PATH, then our 5, then NULL");
    cli_env_free(&env);
}

static void leadership_without_tick_has_no_dlock_tick(void **state)
{
    char *base[] = {"DLOCK_TICK=5", NULL};
    struct cli_env env;

    (void)state;
    TK_EXPECT(cli_env_build_leader(&env, base, "role", 3, -1, NULL) == 0,
              "the environment is built");
    TK_EXPECT(value_of(env.envp, "DLOCK_TICK") == NULL,
              "no DLOCK_TICK outside run --every, not even an outer one");
    TK_EXPECT(strcmp(value_of(env.envp, "DLOCK_TERM"), "3") == 0,
              "DLOCK_TERM=3");
    cli_env_free(&env);
}

static void deadline_is_exported_and_outer_one_replaced(void **state)
{
    char *base[] = {"DLOCK_VALID_UNTIL=1", "DLOCK_VALID_UNTIL_FILE=/old",
                    NULL};
    const struct cli_env_deadline d = {1790000000123, "/run/x/valid_until"};
    const struct cli_env_deadline file_only = {-1, "/f"};
    struct cli_env env;

    (void)state;
    TK_EXPECT(cli_env_build(&env, base, "job", "t", 1, 0, &d) == 0,
              "the environment is built");
    TK_EXPECT(strcmp(value_of(env.envp, "DLOCK_VALID_UNTIL"), "1790000000123")
                      == 0
                  && count_prefix(env.envp, "DLOCK_VALID_UNTIL=") == 1,
              "one DLOCK_VALID_UNTIL, the deadline in epoch ms");
    TK_EXPECT(strcmp(value_of(env.envp, "DLOCK_VALID_UNTIL_FILE"),
                     "/run/x/valid_until")
                      == 0
                  && count_prefix(env.envp, "DLOCK_VALID_UNTIL_FILE=") == 1,
              "one DLOCK_VALID_UNTIL_FILE, ours");
    cli_env_free(&env);
    TK_EXPECT(cli_env_build_leader(&env, base, "role", 3, 7, &file_only) == 0,
              "the leader's environment is built");
    TK_EXPECT(value_of(env.envp, "DLOCK_VALID_UNTIL") == NULL
                  && strcmp(value_of(env.envp, "DLOCK_VALID_UNTIL_FILE"), "/f")
                         == 0
                  && strcmp(value_of(env.envp, "DLOCK_TICK"), "7") == 0,
              "no deadline number when unbounded; the file and tick stay");
    cli_env_free(&env);
}

static void too_many_variables_are_refused(void **state)
{
    const struct cli_env_var vars[CLI_ENV_VARS + 1] = {{"DLOCK_KEY", "k"}};
    struct cli_env env;

    (void)state;
    TK_EXPECT(cli_env_build_vars(&env, NULL, vars, CLI_ENV_VARS + 1) == -1,
              "more variables than DLOCK_* names is refused");
    TK_EXPECT(env.envp == NULL, "and leaves the environment empty");
    cli_env_free(&env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lock_variables_are_added),
        cmocka_unit_test(outer_lock_variables_are_replaced_not_doubled),
        cmocka_unit_test(degraded_lock_has_empty_token_and_fence_zero),
        cmocka_unit_test(leadership_gives_term_as_fence_and_tick),
        cmocka_unit_test(leadership_without_tick_has_no_dlock_tick),
        cmocka_unit_test(deadline_is_exported_and_outer_one_replaced),
        cmocka_unit_test(too_many_variables_are_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
