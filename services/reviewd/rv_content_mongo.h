/*
 * rv_content_mongo.h: document text in MongoDB (CONTENT_STORE=mongo),
 * one immutable record per document version.
 *
 * A record is {_id (an ObjectId), document_id (int64), version (int32),
 * content, written_at} in the collection "document_content" of the
 * database named in MONGO_URL (default "reviewd"), found by (document_id,
 * version), on which a unique index is made before the first write.
 * rv_content.h says how the records and PostgreSQL's rows are kept from
 * disagreeing unnoticed; this module only moves one record in or out, and
 * says plainly whether the store could not be reached, answered with an
 * error, or has no such record.
 *
 * The store owns a mongoc_client_pool_t, libmongoc's thread-safe way to
 * share connections: each call pops a client for its duration and pushes
 * it back, so any number of libmicrohttpd worker threads may call at
 * once.  Timeouts the URL leaves unset get short defaults (server
 * selection 2 s, connect 2 s, socket 10 s) so that an outage fails a
 * request in seconds instead of holding its row lock.
 *
 * reviewd writes and reads records through it; kh-indexer compiles the
 * same module in to read the approved version's text (kh_store.h).
 *
 * Created by rv_mongo_store_new at start-up, freed by rv_mongo_store_free
 * (NULL is fine).  Strings passed in are copied or used only during the
 * call; *content from rv_mongo_store_get is the caller's, to free().
 */
#ifndef RV_CONTENT_MONGO_H
#define RV_CONTENT_MONGO_H

#include <stddef.h>

typedef struct rv_mongo_store rv_mongo_store;

typedef enum rv_store_rc {
    RV_STORE_OK = 0,
    RV_STORE_MISSING = 1,     /* no record for (id, version) */
    RV_STORE_UNAVAILABLE = 2, /* no server could be selected, or the
                                 connection broke: 503 */
    RV_STORE_ERROR = 3        /* the server said no, or the record is
                                 malformed */
} rv_store_rc;

/*
 * Parses url (mongodb://...) and builds the client pool; it does not
 * connect yet.  appname ("reviewd", "kh-indexer") is what the server's
 * logs and currentOp name the connections by.  Returns NULL with the
 * reason in err.
 */
rv_mongo_store *rv_mongo_store_new(const char *url, const char *appname,
                                   char *err, size_t errlen);
void rv_mongo_store_free(rv_mongo_store *m);

/* Writes the record (doc_id, version) with content, replacing any earlier
 * one at that key (an orphan of a rolled-back transaction, see
 * rv_content.h).  Acknowledged by the server before it returns. */
rv_store_rc rv_mongo_store_put(rv_mongo_store *m, const char *doc_id,
                               int version, const char *content, char *err,
                               size_t errlen);

/* Reads the record (doc_id, version): on RV_STORE_OK *content is a
 * malloc'ed copy of its text, else NULL. */
rv_store_rc rv_mongo_store_get(rv_mongo_store *m, const char *doc_id,
                               int version, char **content, char *err,
                               size_t errlen);

/* Calls each(document id, version, arg) for every record, in no set
 * order, until it returns non-zero (then RV_STORE_OK is still returned). */
rv_store_rc rv_mongo_store_each(rv_mongo_store *m,
                                int (*each)(long long id, int version,
                                            void *arg),
                                void *arg, char *err, size_t errlen);

/* Sends "ping"; RV_STORE_OK when the server answered. */
rv_store_rc rv_mongo_store_ping(rv_mongo_store *m, char *err, size_t errlen);

/* "host:port/db.collection", for log lines. */
const char *rv_mongo_store_endpoint(const rv_mongo_store *m);

#endif /* RV_CONTENT_MONGO_H */
