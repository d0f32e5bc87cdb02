/*
 * svc_env.c: one environment variable as a string or an integer (see
 * svc_env.h).
 */
#include "svc_env.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

const char *svc_env_str(const char *name)
{
    const char *v = getenv(name);

    return v != NULL && v[0] != '\0' ? v : NULL;
}

int svc_env_int(const char *name, long long lo, long long hi, long long *out,
                char *err, size_t errlen)
{
    const char *v = svc_env_str(name);
    char *end = NULL;
    long long n;

    if (v == NULL)
        return 0;
    errno = 0;
    /* strtoll alone would take " 8" and "+8": the first character must
     * be a digit, so a value means what it says in every service. */
    n = strtoll(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || !isdigit((unsigned char)v[0])
        || n < lo || n > hi) {
        snprintf(err, errlen,
                 "%s: expected an integer in %lld..%lld, "
                 "got \"%.64s\"",
                 name, lo, hi, v);
        return -1;
    }
    *out = n;
    return 0;
}
