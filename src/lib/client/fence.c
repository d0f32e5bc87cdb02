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

/* Copies n bytes of s to *at and moves *at past them. */
static void put(char **at, const char *s, size_t n)
{
    memcpy(*at, s, n);
    *at += n;
}

/* derived() without snprintf: head + K + tail, K in braces when it has
 * no hash tag, and a NUL, written at *at; returns where it starts. */
static char *put_derived(char **at, const char *head, const char *key,
                         size_t key_len, int tagged, const char *tail)
{
    char *const start = *at;

    put(at, head, strlen(head));
    if (!tagged)
        put(at, "{", 1);
    put(at, key, key_len);
    if (!tagged)
        put(at, "}", 1);
    put(at, tail, strlen(tail) + 1);
    return start;
}

int dlock__fence_lock_names(const char *key, const char *channel_prefix,
                            dlock__lock_names *names)
{
    /* The heads and tails of the derived keys, as in the functions
     * above: fence, legacy fence, queue, waiters. */
    static const char *const heads[4] = {DLOCK__RESERVED_PREFIX "fence:", "",
                                         DLOCK__RESERVED_PREFIX "queue:",
                                         DLOCK__RESERVED_PREFIX "waiters:"};
    static const char *const tails[4] = {"", ":fence", "", ""};
    const size_t key_len = strlen(key);
    const size_t prefix_len = strlen(channel_prefix);
    const int tagged = dlock__fence_has_hash_tag(key);
    size_t size = (key_len + 1) + (prefix_len + key_len + 1);
    char *derived_at[4];
    char *block, *at;

    memset(names, 0, sizeof(*names));
    for (int i = 0; i < 4; i++)
        size += strlen(heads[i]) + key_len + (tagged ? 0 : 2)
                + strlen(tails[i]) + 1;
    block = dlock__malloc(size);
    if (block == NULL)
        return -1;
    at = block;
    names->key = at;
    put(&at, key, key_len + 1);
    for (int i = 0; i < 4; i++)
        derived_at[i] = put_derived(&at, heads[i], key, key_len, tagged,
                                    tails[i]);
    names->channel = at;
    put(&at, channel_prefix, prefix_len);
    put(&at, key, key_len + 1);
    names->fence = derived_at[0];
    names->legacy_fence = derived_at[1];
    names->queue = derived_at[2];
    names->waiters = derived_at[3];
    return 0;
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
