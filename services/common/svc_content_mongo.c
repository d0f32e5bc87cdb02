/*
 * svc_content_mongo.c: the MongoDB content store (see svc_content_mongo.h).
 *
 * Every call pops a client from the pool, runs one command and pushes the
 * client back.  bson_error_t's domain decides what the caller is told:
 * server selection and stream errors mean the store is unreachable
 * (SVC_STORE_UNAVAILABLE); anything the server answered is SVC_STORE_ERROR.
 * The error API is version 2, so server errors are told apart from
 * client ones.  libmongoc's messages about a URL it refuses can quote the
 * password ('Password "..." must not have unescaped chars'), so each one
 * goes through svc_log_redact_secrets before it reaches err.
 */
#include "svc_content_mongo.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mongoc/mongoc.h>

#include "svc_deadline.h"
#include "svc_log.h"

#define RV_MONGO_COLLECTION "document_content"
#define RV_MONGO_DEFAULT_DB "reviewd"
#define RV_MONGO_SELECT_MS 2000
#define RV_MONGO_CONNECT_MS 2000
#define RV_MONGO_SOCKET_MS 10000

/* Budget classes: pool i's timeouts fit budget_ms >> i (rv_content.h). */
#define RV_MONGO_CLASSES 6
/* A client on loan from one of the pools, and that pool. */
typedef struct lease {
    mongoc_client_pool_t *pool;
    mongoc_client_t *client;
} lease;
#define RV_MONGO_CLASS_MIN_MS 20

struct svc_mongo_store {
    mongoc_uri_t *uri;
    /* One pool per budget class, the widest first; a call takes a client
     * from the widest whose bound fits what its thread's deadline leaves
     * (svc_deadline.h).  Without a budget, one pool. */
    mongoc_client_pool_t *pools[RV_MONGO_CLASSES];
    int class_ms[RV_MONGO_CLASSES]; /* each pool's bound (0: no budget) */
    int classes;
    char db[128];
    char endpoint[512];
    atomic_int index_ready; /* the unique index exists */
};

/* mongoc_init once per process, however many stores are made. */
static pthread_once_t mongoc_once = PTHREAD_ONCE_INIT;

static void init_mongoc(void)
{
    mongoc_init();
}

/* Sets a timeout option the URL does not give; 0 when it was set. */
static int default_timeout(mongoc_uri_t *uri, const char *option, int ms)
{
    if (mongoc_uri_get_option_as_int32(uri, option, 0) != 0)
        return 0;
    return mongoc_uri_set_option_as_int32(uri, option, ms) ? 0 : -1;
}

static void describe_endpoint(svc_mongo_store *m)
{
    const mongoc_host_list_t *h = mongoc_uri_get_hosts(m->uri);

    snprintf(m->endpoint, sizeof(m->endpoint), "%s/%s.%s",
             h != NULL ? h->host_and_port : "?", m->db, RV_MONGO_COLLECTION);
}

svc_mongo_store *svc_mongo_store_new(const char *url, const char *appname,
                                     char *err, size_t errlen)
{
    return svc_mongo_store_open(url, appname, 0, err, errlen);
}

/* Half of bound_ms (at least 10 ms), or dflt without a bound. */
static int half_of(int bound_ms, int dflt)
{
    if (bound_ms <= 0)
        return dflt;
    return bound_ms / 2 >= 10 ? bound_ms / 2 : 10;
}

/* err = "MONGO_URL: " and libmongoc's message about url, its password
 * taken out. */
static void url_error(const char *url, const char *msg, char *err,
                      size_t errlen)
{
    char clean[512];

    svc_log_redact_secrets(url, msg, clean, sizeof(clean));
    snprintf(err, errlen, "MONGO_URL: %s", clean);
}

/*
 * The pool of one budget class: the timeouts the URL leaves unset come
 * from bound_ms (server selection and connect half of it, a socket read
 * the other half, so a call never outlasts the bound) or, with no bound,
 * the defaults; reads are not retried under a bound unless the URL says
 * retryReads.  NULL with the reason in err.
 */
static mongoc_client_pool_t *class_pool(const mongoc_uri_t *base,
                                        const char *url, const char *appname,
                                        int bound_ms, char *err, size_t errlen)
{
    bson_error_t error;
    mongoc_uri_t *uri = mongoc_uri_copy(base);
    mongoc_client_pool_t *pool = NULL;

    if (uri == NULL
        || default_timeout(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS,
                           half_of(bound_ms, RV_MONGO_SELECT_MS))
               != 0
        || default_timeout(uri, MONGOC_URI_CONNECTTIMEOUTMS,
                           half_of(bound_ms, RV_MONGO_CONNECT_MS))
               != 0
        || default_timeout(uri, MONGOC_URI_SOCKETTIMEOUTMS,
                           half_of(bound_ms, RV_MONGO_SOCKET_MS))
               != 0
        || !mongoc_uri_set_appname(uri, appname)
        || (bound_ms > 0 && !mongoc_uri_has_option(uri, MONGOC_URI_RETRYREADS)
            && !mongoc_uri_set_option_as_bool(uri, MONGOC_URI_RETRYREADS,
                                              false))) {
        snprintf(err, errlen,
                 "MONGO_URL: cannot set default timeouts or "
                 "the appname");
        mongoc_uri_destroy(uri);
        return NULL;
    }
    pool = mongoc_client_pool_new_with_error(uri, &error);
    mongoc_uri_destroy(uri);
    if (pool == NULL) {
        url_error(url, error.message, err, errlen);
        return NULL;
    }
    if (!mongoc_client_pool_set_error_api(pool, MONGOC_ERROR_API_VERSION_2)) {
        snprintf(err, errlen, "MONGO_URL: cannot set the error API");
        mongoc_client_pool_destroy(pool);
        return NULL;
    }
    return pool;
}

svc_mongo_store *svc_mongo_store_open(const char *url, const char *appname,
                                      int budget_ms, char *err, size_t errlen)
{
    bson_error_t error;
    svc_mongo_store *m;
    const char *db;

    pthread_once(&mongoc_once, init_mongoc);
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        snprintf(err, errlen, "MONGO_URL: out of memory");
        return NULL;
    }
    m->uri = mongoc_uri_new_with_error(url, &error);
    if (m->uri == NULL) {
        url_error(url, error.message, err, errlen);
        goto fail;
    }
    db = mongoc_uri_get_database(m->uri);
    if (db == NULL || *db == '\0')
        db = RV_MONGO_DEFAULT_DB;
    if (strlen(db) >= sizeof(m->db)) {
        snprintf(err, errlen, "MONGO_URL: database name too long");
        goto fail;
    }
    strcpy(m->db, db);
    do {
        const int bound = budget_ms > 0 ? budget_ms >> m->classes : 0;

        m->class_ms[m->classes] = bound;
        m->pools[m->classes] = class_pool(m->uri, url, appname, bound, err,
                                          errlen);
        if (m->pools[m->classes] == NULL)
            goto fail;
        m->classes++;
    } while (budget_ms > 0 && m->classes < RV_MONGO_CLASSES
             && (budget_ms >> m->classes) >= RV_MONGO_CLASS_MIN_MS);
    describe_endpoint(m);
    return m;
fail:
    svc_mongo_store_free(m);
    return NULL;
}

void svc_mongo_store_free(svc_mongo_store *m)
{
    int i;

    if (m == NULL)
        return;
    for (i = 0; i < m->classes; i++)
        mongoc_client_pool_destroy(m->pools[i]);
    mongoc_uri_destroy(m->uri);
    free(m);
}

const char *svc_mongo_store_endpoint(const svc_mongo_store *m)
{
    return m->endpoint;
}

/* Which rc a libmongoc failure is, with its message into err. */
static svc_store_rc failure(const svc_mongo_store *m, const char *what,
                            const bson_error_t *error, char *err,
                            size_t errlen)
{
    const int unreachable = error->domain == MONGOC_ERROR_SERVER_SELECTION
                            || error->domain == MONGOC_ERROR_STREAM;

    snprintf(err, errlen, "mongo %s at %s: %s (domain %u, code %u)", what,
             m->endpoint, error->message, (unsigned)error->domain,
             (unsigned)error->code);
    return unreachable ? SVC_STORE_UNAVAILABLE : SVC_STORE_ERROR;
}

/* "<id>:<version>", the record's name in messages. */
static void record_name(char *buf, size_t len, long long id, int version)
{
    snprintf(buf, len, "%lld:%d", id, version);
}

/* The filter that selects record (id, version). */
static bson_t *record_filter(long long id, int version)
{
    return BCON_NEW("document_id", BCON_INT64(id), "version",
                    BCON_INT32(version));
}

/* The document id as a number; -1 when doc_id is not one. */
static long long parse_id(const char *doc_id)
{
    char *end = NULL;
    const long long id = strtoll(doc_id, &end, 10);

    return end == doc_id || *end != '\0' || id < 0 ? -1 : id;
}

/* Makes the unique index on (document_id, version) once per process, so
 * that no two records can claim one version whatever a client does. */
static svc_store_rc ensure_index(svc_mongo_store *m, mongoc_client_t *client,
                                 char *err, size_t errlen)
{
    bson_error_t error;
    bson_t *cmd;
    int ok;

    if (atomic_load(&m->index_ready))
        return SVC_STORE_OK;
    cmd = BCON_NEW("createIndexes", BCON_UTF8(RV_MONGO_COLLECTION), "indexes",
                   "[", "{", "key", "{", "document_id", BCON_INT32(1),
                   "version", BCON_INT32(1), "}", "name",
                   BCON_UTF8("document_version"), "unique", BCON_BOOL(true),
                   "}", "]");
    if (cmd == NULL) {
        snprintf(err, errlen, "mongo createIndexes: out of memory");
        return SVC_STORE_ERROR;
    }
    ok = mongoc_client_command_simple(client, m->db, cmd, NULL, NULL, &error);
    bson_destroy(cmd);
    if (!ok) {
        return failure(m, "createIndexes document_version", &error, err,
                       errlen);
    }
    atomic_store(&m->index_ready, 1);
    return SVC_STORE_OK;
}

/* Pops a client from the widest class whose bound fits what the
 * thread's deadline leaves (the narrowest when none does: a spent budget
 * is refused before the call, by the caller). */
static void lease_take(svc_mongo_store *m, lease *l)
{
    const int left = svc_deadline_left_ms(0);
    int i = 0;

    if (left >= 0)
        while (i + 1 < m->classes && m->class_ms[i] > left)
            i++;
    l->pool = m->pools[i];
    l->client = mongoc_client_pool_pop(l->pool);
}

static void lease_give_back(lease *l)
{
    if (l->client != NULL)
        mongoc_client_pool_push(l->pool, l->client);
    l->client = NULL;
}

/* The collection on a client popped from the pool, or NULL. */
static mongoc_collection_t *collection(svc_mongo_store *m, lease *client)
{
    lease_take(m, client);
    if (client->client == NULL)
        return NULL;
    return mongoc_client_get_collection(client->client, m->db,
                                        RV_MONGO_COLLECTION);
}

static void release(lease *client, mongoc_collection_t *coll)
{
    mongoc_collection_destroy(coll);
    lease_give_back(client);
}

/* Frees what a find built, in reverse order; NULLs are fine. */
static void release_find(lease *client, mongoc_collection_t *coll,
                         mongoc_cursor_t *cursor, bson_t *filter, bson_t *opts)
{
    mongoc_cursor_destroy(cursor);
    release(client, coll);
    bson_destroy(filter);
    bson_destroy(opts);
}

svc_store_rc svc_mongo_store_put(svc_mongo_store *m, const char *doc_id,
                                 int version, const char *content, char *err,
                                 size_t errlen)
{
    char key[64];
    bson_error_t error;
    bson_t *filter = NULL, *update = NULL, *opts = NULL;
    lease client = {NULL, NULL};
    mongoc_collection_t *coll = NULL;
    svc_store_rc rc = SVC_STORE_ERROR;
    const long long id = parse_id(doc_id);

    if (id < 0) {
        snprintf(err, errlen, "mongo put: bad document id \"%s\"", doc_id);
        return SVC_STORE_ERROR;
    }
    record_name(key, sizeof(key), id, version);
    filter = record_filter(id, version);
    /* written_at is wall-clock time, for a person reading the records. */
    update = BCON_NEW("$set", "{", "content", BCON_UTF8(content), "written_at",
                      BCON_DATE_TIME((int64_t)time(NULL) * 1000), "}");
    opts = BCON_NEW("upsert", BCON_BOOL(true));
    coll = filter != NULL && update != NULL && opts != NULL
               ? collection(m, &client)
               : NULL;
    if (coll == NULL) {
        snprintf(err, errlen, "mongo put %s: out of memory", key);
        goto done;
    }
    rc = ensure_index(m, client.client, err, errlen);
    if (rc != SVC_STORE_OK)
        goto done;
    if (!mongoc_collection_update_one(coll, filter, update, opts, NULL,
                                      &error)) {
        char what[96];

        snprintf(what, sizeof(what), "put %s", key);
        rc = failure(m, what, &error, err, errlen);
    }
done:
    release(&client, coll);
    bson_destroy(filter);
    bson_destroy(update);
    bson_destroy(opts);
    return rc;
}

/* Copies the "content" string of a found record into *content. */
static svc_store_rc take_content(const bson_t *doc, const char *key,
                                 char **content, char *err, size_t errlen)
{
    bson_iter_t it;
    uint32_t len = 0;
    const char *text;

    if (!bson_iter_init_find(&it, doc, "content")
        || !BSON_ITER_HOLDS_UTF8(&it)) {
        snprintf(err, errlen, "mongo record %s has no content string", key);
        return SVC_STORE_ERROR;
    }
    text = bson_iter_utf8(&it, &len);
    *content = malloc((size_t)len + 1);
    if (*content == NULL) {
        snprintf(err, errlen, "mongo get %s: out of memory", key);
        return SVC_STORE_ERROR;
    }
    memcpy(*content, text, len);
    (*content)[len] = '\0';
    return SVC_STORE_OK;
}

svc_store_rc svc_mongo_store_get(svc_mongo_store *m, const char *doc_id,
                                 int version, char **content, char *err,
                                 size_t errlen)
{
    char key[64];
    bson_error_t error;
    bson_t *filter = NULL, *opts = NULL;
    const bson_t *doc = NULL;
    lease client = {NULL, NULL};
    mongoc_collection_t *coll = NULL;
    mongoc_cursor_t *cursor = NULL;
    svc_store_rc rc = SVC_STORE_ERROR;
    const long long id = parse_id(doc_id);

    *content = NULL;
    if (id < 0) {
        snprintf(err, errlen, "mongo get: bad document id \"%s\"", doc_id);
        return SVC_STORE_ERROR;
    }
    record_name(key, sizeof(key), id, version);
    filter = record_filter(id, version);
    opts = BCON_NEW("limit", BCON_INT64(1));
    coll = filter != NULL && opts != NULL ? collection(m, &client) : NULL;
    if (coll == NULL) {
        snprintf(err, errlen, "mongo get %s: out of memory", key);
        goto done;
    }
    cursor = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
    if (cursor != NULL && mongoc_cursor_next(cursor, &doc)) {
        rc = take_content(doc, key, content, err, errlen);
    } else if (cursor != NULL && mongoc_cursor_error(cursor, &error)) {
        char what[96];

        snprintf(what, sizeof(what), "get %s", key);
        rc = failure(m, what, &error, err, errlen);
    } else if (cursor != NULL) {
        snprintf(err, errlen, "mongo record %s not found at %s", key,
                 m->endpoint);
        rc = SVC_STORE_MISSING;
    } else {
        snprintf(err, errlen, "mongo get %s: out of memory", key);
    }
done:
    release_find(&client, coll, cursor, filter, opts);
    return rc;
}

svc_store_rc svc_mongo_store_each(svc_mongo_store *m,
                                  int (*each)(long long id, int version,
                                              long long written_at, void *arg),
                                  void *arg, char *err, size_t errlen)
{
    bson_error_t error;
    bson_t *filter = bson_new();
    bson_t *opts = BCON_NEW("projection", "{", "document_id", BCON_INT32(1),
                            "version", BCON_INT32(1), "written_at",
                            BCON_INT32(1), "}");
    const bson_t *doc = NULL;
    lease client = {NULL, NULL};
    mongoc_collection_t *coll = NULL;
    mongoc_cursor_t *cursor = NULL;
    svc_store_rc rc = SVC_STORE_OK;

    coll = filter != NULL && opts != NULL ? collection(m, &client) : NULL;
    cursor = coll != NULL
                 ? mongoc_collection_find_with_opts(coll, filter, opts, NULL)
                 : NULL;
    if (cursor == NULL) {
        snprintf(err, errlen, "mongo list: out of memory");
        rc = SVC_STORE_ERROR;
        goto done;
    }
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t id, version, at;
        long long written_at = -1;

        if (!bson_iter_init_find(&id, doc, "document_id")
            || !BSON_ITER_HOLDS_NUMBER(&id)
            || !bson_iter_init_find(&version, doc, "version")
            || !BSON_ITER_HOLDS_NUMBER(&version)) {
            snprintf(err, errlen,
                     "mongo list: a record at %s has no "
                     "numeric document_id and version",
                     m->endpoint);
            rc = SVC_STORE_ERROR;
            goto done;
        }
        if (bson_iter_init_find(&at, doc, "written_at")
            && BSON_ITER_HOLDS_DATE_TIME(&at))
            written_at = bson_iter_date_time(&at);
        /* as_int64: a store may hand int64 back as a double. */
        if (each(bson_iter_as_int64(&id), (int)bson_iter_as_int64(&version),
                 written_at, arg)
            != 0)
            goto done;
    }
    if (mongoc_cursor_error(cursor, &error))
        rc = failure(m, "list", &error, err, errlen);
done:
    release_find(&client, coll, cursor, filter, opts);
    return rc;
}

svc_store_rc svc_mongo_store_delete_older(svc_mongo_store *m, long long id,
                                          int version, long long before_ms,
                                          int *deleted, char *err,
                                          size_t errlen)
{
    char key[64];
    bson_error_t error;
    bson_t reply;
    bson_iter_t it;
    bson_t *filter = BCON_NEW("document_id", BCON_INT64(id), "version",
                              BCON_INT32(version), "written_at", "{", "$lt",
                              BCON_DATE_TIME(before_ms), "}");
    lease client = {NULL, NULL};
    mongoc_collection_t *coll = filter != NULL ? collection(m, &client) : NULL;
    svc_store_rc rc = SVC_STORE_ERROR;

    *deleted = 0;
    record_name(key, sizeof(key), id, version);
    bson_init(&reply);
    if (coll == NULL) {
        snprintf(err, errlen, "mongo delete %s: out of memory", key);
    } else if (!mongoc_collection_delete_one(coll, filter, NULL, &reply,
                                             &error)) {
        char what[96];

        snprintf(what, sizeof(what), "delete %s", key);
        rc = failure(m, what, &error, err, errlen);
    } else {
        *deleted = bson_iter_init_find(&it, &reply, "deletedCount")
                   && bson_iter_as_int64(&it) > 0;
        rc = SVC_STORE_OK;
    }
    bson_destroy(&reply);
    release_find(&client, coll, NULL, filter, NULL);
    return rc;
}

svc_store_rc svc_mongo_store_ping(svc_mongo_store *m, char *err, size_t errlen)
{
    bson_error_t error;
    bson_t *cmd = BCON_NEW("ping", BCON_INT32(1));
    lease client = {NULL, NULL};
    svc_store_rc rc = SVC_STORE_ERROR;

    lease_take(m, &client);
    if (cmd == NULL || client.client == NULL)
        snprintf(err, errlen, "mongo ping: out of memory");
    else if (!mongoc_client_command_simple(client.client, m->db, cmd, NULL,
                                           NULL, &error))
        rc = failure(m, "ping", &error, err, errlen);
    else
        rc = SVC_STORE_OK;
    lease_give_back(&client);
    bson_destroy(cmd);
    return rc;
}
