/*
 * svc_content_env.c: reading CONTENT_STORE and MONGO_URL (see
 * svc_content_env.h).
 *
 * An empty variable counts as unset, as everywhere in reviewd's
 * configuration, so `CONTENT_STORE= reviewd` means the default.
 */
#include "svc_content_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "svc_env.h"

static int mongodb_scheme(const char *url)
{
    return strncmp(url, "mongodb://", 10) == 0
           || strncmp(url, "mongodb+srv://", 14) == 0;
}

int svc_content_env_load(svc_content_kind *kind, char **mongo_url, char *err,
                         size_t errlen)
{
    const char *store = svc_env_str("CONTENT_STORE");
    const char *mongo = svc_env_str("MONGO_URL");

    *kind = SVC_CONTENT_PG;
    *mongo_url = NULL;
    if (store == NULL || strcmp(store, "pg") == 0)
        return 0;
    if (strcmp(store, "mongo") != 0) {
        snprintf(err, errlen,
                 "CONTENT_STORE: expected pg or mongo, got "
                 "\"%.32s\"",
                 store);
        return -1;
    }
    if (mongo == NULL || !mongodb_scheme(mongo)) {
        snprintf(err, errlen,
                 "MONGO_URL: required with CONTENT_STORE="
                 "mongo (mongodb://host:port/db)");
        return -1;
    }
    *mongo_url = strdup(mongo);
    if (*mongo_url == NULL) {
        snprintf(err, errlen, "MONGO_URL: out of memory");
        return -1;
    }
    *kind = SVC_CONTENT_MONGO;
    return 0;
}
