/*
 * svc_content_mongo.h: document text in MongoDB (CONTENT_STORE=mongo),
 * one immutable record per document version.
 *
 * A record is {_id (an ObjectId), document_id (int64), version (int32),
 * content, written_at} in the collection "document_content" of the
 * database named in MONGO_URL (default "reviewd"), found by (document_id,
 * version), on which a unique index is made before the first write.
 * reviewd's content module says how the records and PostgreSQL's rows are
 * kept from disagreeing unnoticed; this module only moves one record in or out, and
 * says plainly whether the store could not be reached, answered with an
 * error, or has no such record.
 *
 * The store owns a mongoc_client_pool_t, libmongoc's thread-safe way to
 * share connections: each call pops a client for its duration and pushes
 * it back, so any number of reviewd's worker threads may call at
 * once.  Timeouts the URL leaves unset get short defaults (server
 * selection 2 s, connect 2 s, socket 10 s) so that an outage fails a
 * request in seconds instead of holding its row lock.
 *
 * reviewd writes and reads records through it; kh-indexer links the
 * same module to read the approved version's text (kh_store.h).
 *
 * Created by svc_mongo_store_new at start-up, freed by svc_mongo_store_free
 * (NULL is fine).  Strings passed in are copied or used only during the
 * call; *content from svc_mongo_store_get is the caller's, to free().
 */
#ifndef SVC_CONTENT_MONGO_H
#define SVC_CONTENT_MONGO_H

#include <stddef.h>

typedef struct svc_mongo_store svc_mongo_store;

typedef enum svc_store_rc {
    SVC_STORE_OK = 0,
    SVC_STORE_MISSING = 1,     /* no record for (id, version) */
    SVC_STORE_UNAVAILABLE = 2, /* no server could be selected, or the
                                 connection broke: 503 */
    SVC_STORE_ERROR = 3        /* the server said no, or the record is
                                 malformed */
} svc_store_rc;

/*
 * Parses url (mongodb://...) and builds the client pool; it does not
 * connect yet.  appname ("reviewd", "kh-indexer") is what the server's
 * logs and currentOp name the connections by.  Returns NULL with the
 * reason in err.
 */
svc_mongo_store *svc_mongo_store_new(const char *url, const char *appname,
                                     char *err, size_t errlen);
/* The same, with the timeouts the URL leaves unset cut from a request's
 * budget_ms instead of the defaults above.  libmongoc fixes a client's
 * timeouts when its pool is made, so the store keeps one pool per budget
 * class (bounds budget_ms, budget_ms / 2, ... down to 20 ms; server
 * selection and connect half a bound, a socket read the other half), and
 * each call takes a client from the widest class that fits what the
 * calling thread's deadline leaves (svc_deadline.h): a call made late in
 * a request never outlasts the request's budget by more than the
 * narrowest bound.  For the same reason a read is not retried unless the
 * URL says retryReads (budget_ms <= 0: one pool, the defaults). */
svc_mongo_store *svc_mongo_store_open(const char *url, const char *appname,
                                      int budget_ms, char *err, size_t errlen);
void svc_mongo_store_free(svc_mongo_store *m);

/* Writes the record (doc_id, version) with content, replacing any earlier
 * one at that key (an orphan of a rolled-back transaction, see
 * reviewd's content module).  Acknowledged by the server before it returns. */
svc_store_rc svc_mongo_store_put(svc_mongo_store *m, const char *doc_id,
                                 int version, const char *content, char *err,
                                 size_t errlen);

/* Reads the record (doc_id, version): on SVC_STORE_OK *content is a
 * malloc'ed copy of its text, else NULL. */
svc_store_rc svc_mongo_store_get(svc_mongo_store *m, const char *doc_id,
                                 int version, char **content, char *err,
                                 size_t errlen);

/* Calls each(document id, version, written_at, arg) for every record, in
 * no set order, until it returns non-zero (then SVC_STORE_OK is still
 * returned).  written_at is the record's write time in ms since the
 * epoch, or -1 when the record has none. */
svc_store_rc svc_mongo_store_each(svc_mongo_store *m,
                                  int (*each)(long long id, int version,
                                              long long written_at, void *arg),
                                  void *arg, char *err, size_t errlen);
/* Deletes the record (id, version) if it was written before before_ms
 * (ms since the epoch): a record rewritten since (svc_mongo_store_put
 * sets written_at again) is left alone.  *deleted is set to 1 if it went,
 * 0 if not.  Acknowledged by the server before it returns. */
svc_store_rc svc_mongo_store_delete_older(svc_mongo_store *m, long long id,
                                          int version, long long before_ms,
                                          int *deleted, char *err,
                                          size_t errlen);

/* Sends "ping"; SVC_STORE_OK when the server answered. */
svc_store_rc svc_mongo_store_ping(svc_mongo_store *m, char *err,
                                  size_t errlen);

/* "host:port/db.collection", for log lines. */
const char *svc_mongo_store_endpoint(const svc_mongo_store *m);

#endif /* SVC_CONTENT_MONGO_H */
