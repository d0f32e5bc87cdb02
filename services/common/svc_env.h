/*
 * svc_env.h: reading one environment variable, the same way in every
 * service.
 *
 * Both services take their settings from the environment, and an operator
 * who sets KH_BATCH=+5 or REVIEWD_THREADS=" 8" must get the same answer
 * from each: so one reader of strings and one of integers live here,
 * linked into both, instead of a copy per service that could drift.
 * An unset variable and an empty one are the same (a default applies),
 * so that `VAR= reviewd` clears a setting as an operator expects.
 *
 * Threads: call these before any thread starts (they read the
 * environment, which setenv elsewhere could change under them).
 */
#ifndef SVC_ENV_H
#define SVC_ENV_H

#include <stddef.h>

/* The value of name (borrowed from the environment), or NULL when it is
 * unset or empty. */
const char *svc_env_str(const char *name);

/*
 * Reads name as a decimal integer in [lo, hi] into *out, or leaves *out
 * (the default) alone when the variable is unset or empty.  Only digits
 * are accepted: no sign, blank or suffix.  Returns 0, or -1 with
 * "NAME: expected an integer in LO..HI, got \"VALUE\"" in err (at most
 * errlen bytes, the value cut at 64 characters).
 */
int svc_env_int(const char *name, long long lo, long long hi, long long *out,
                char *err, size_t errlen);

#endif /* SVC_ENV_H */
