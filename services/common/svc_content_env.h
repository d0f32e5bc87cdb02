/*
 * svc_content_env.h: CONTENT_STORE and MONGO_URL, read the same way by
 * every process that touches document text.
 *
 * reviewd writes the text into the store these variables name, and
 * kh-indexer reads the approved version back from it, so both must agree
 * on what the variables mean: one parser in svc_common, linked
 * into both, instead of two that could drift apart.
 *
 *   CONTENT_STORE   pg (the default, also when unset or empty) or mongo
 *   MONGO_URL       required with mongo: mongodb://host:port/db or
 *                   mongodb+srv://...; the full check is libmongoc's, at
 *                   start-up (svc_content_mongo.h)
 *
 * Threads: call it before any thread starts (it reads the environment).
 */
#ifndef SVC_CONTENT_ENV_H
#define SVC_CONTENT_ENV_H

#include <stddef.h>

typedef enum svc_content_kind {
    SVC_CONTENT_PG = 0,
    SVC_CONTENT_MONGO = 1
} svc_content_kind;

/*
 * Reads the two variables.  On success returns 0 with *kind set and
 * *mongo_url a malloc'd copy of MONGO_URL for mongo (NULL for pg; the
 * caller frees it).  Returns -1 with "NAME: what is wrong" in err for an
 * unknown store, a missing or non-mongodb MONGO_URL, or out of memory;
 * *mongo_url is then NULL.
 */
int svc_content_env_load(svc_content_kind *kind, char **mongo_url, char *err,
                         size_t errlen);

#endif /* SVC_CONTENT_ENV_H */
