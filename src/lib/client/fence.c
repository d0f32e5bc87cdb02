/*
 * fence.c: fence counter keys, reserved names and the client's fence floor
 * (see fence.h).
 */
#include "client/fence.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

int dlock__fence_has_hash_tag(const char *key)
{
    const char *open = strchr(key, '{');
    const char *close = open != NULL ? strchr(open + 1, '}') : NULL;

    return close != NULL && close > open + 1;
}

/* prefix + K, or prefix + "{K}" when K has no hash tag; then suffix. */
static char *derived(const char *prefix, const char *key, const char *suffix)
{
    size_t len = strlen(prefix) + strlen(key) + strlen(suffix) + 3;
    char *out = dlock__malloc(len);

    if (out == NULL)
        return NULL;
    if (dlock__fence_has_hash_tag(key))
        snprintf(out, len, "%s%s%s", prefix, key, suffix);
    else
        snprintf(out, len, "%s{%s}%s", prefix, key, suffix);
    return out;
}

char *dlock__fence_derived_key(const char *kind, const char *key)
{
    size_t len = sizeof(DLOCK__RESERVED_PREFIX) + strlen(kind) + 2;
    char *prefix = dlock__malloc(len);
    char *out;

    if (prefix == NULL)
        return NULL;
    snprintf(prefix, len, "%s%s:", DLOCK__RESERVED_PREFIX, kind);
    out = derived(prefix, key, "");
    dlock__free(prefix);
    return out;
}

char *dlock__fence_key(const char *key)
{
    return derived(DLOCK__RESERVED_PREFIX "fence:", key, "");
}

char *dlock__fence_legacy_key(const char *key)
{
    return derived("", key, ":fence");
}

const char *const dlock__pattern_kinds[] = {
    "sem", "rw", "leader", "rl", "once", "idem", NULL,
};

int dlock__pattern_owns_key(const char *key)
{
    if (key[0] != '{')
        return 0;
    for (size_t i = 0; dlock__pattern_kinds[i] != NULL; i++) {
        size_t n = strlen(dlock__pattern_kinds[i]);

        if (strncmp(key + 1, dlock__pattern_kinds[i], n) == 0
            && key[n + 1] == ':')
            return 1;
    }
    return 0;
}

int dlock__fence_name_reserved(const char *key)
{
    return strncmp(key, DLOCK__RESERVED_PREFIX,
                   sizeof(DLOCK__RESERVED_PREFIX) - 1)
               == 0
           || dlock__pattern_owns_key(key);
}

uint64_t dlock__fence_floor(dlock_client *c)
{
    return atomic_load(dlock__client_fence_floor(c));
}

void dlock__fence_floor_raise(dlock_client *c, uint64_t seen)
{
    atomic_ullong *floor = dlock__client_fence_floor(c);
    unsigned long long was = atomic_load(floor);

    while (seen > was && !atomic_compare_exchange_weak(floor, &was, seen))
        ;
}
