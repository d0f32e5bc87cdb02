/*
 * kh_store.h: kh-indexer's PostgreSQL side: applying one approval event
 * exactly once.
 *
 * kh_store_apply does all of an event's work in ONE transaction:
 *   1. INSERT the event id into kh_processed_event, ON CONFLICT DO
 *      NOTHING: no row inserted means the event was applied before (or
 *      is being applied by another indexer right now, whose commit we
 *      waited for on the primary key), so the answer is KH_DUPLICATE and
 *      nothing else happens;
 *   2. read the document and its text (FOR SHARE, so it cannot change
 *      under us); if it is gone, no longer approved, or at another
 *      version than the event names, the event is stale: it is recorded
 *      as such and no chunk is touched;
 *   3. split the text (kh_chunk.h), embed each chunk when EMBED_COMMAND
 *      is set (kh_embed.h), delete the document's old chunks and insert
 *      the new ones with their tsvector (kh_search_vector, the same SQL
 *      function GET /v1/search tokenises queries with);
 *   4. COMMIT.  Only then does the caller acknowledge the message.
 * A crash or a failure anywhere before the commit rolls all of it back,
 * and the redelivered message does the work once; a crash after the
 * commit but before the ack makes the redelivery a KH_DUPLICATE.  So the
 * effect is exactly once although delivery is at least once.
 *
 * The text is read from the store reviewd writes it to, named by the
 * same CONTENT_STORE and MONGO_URL (svc_content_env.h): kh_document_content
 * for pg, joined to the row in step 2; for mongo, the record (document
 * id, version) once step 2 has found the row approved at that version.
 * A MongoDB record that is missing (deleted, or lost with a restored
 * backup), malformed or unreachable makes the event KH_FAILED: nothing is
 * recorded, the message is retried later, and err names the record.
 *
 * Several events in one transaction: kh_store_batch_* below, event by
 * event in savepoints; or kh_store_apply_many (kh_store_many.h), the
 * whole batch in two round trips, which falls back to kh_store_batch_*.
 *
 * Ownership: kh_store_new / kh_store_free; the connection is made lazily
 * and again after it breaks (kh_store_conn.h).  Threads: one kh_store
 * per thread.
 */
#ifndef KH_STORE_H
#define KH_STORE_H

#include <stdint.h>

#include "kh_chunk.h"
#include "kh_event.h"
#include "svc_content_env.h"

typedef struct kh_store kh_store;

typedef struct kh_store_opts {
    kh_chunk_opts chunk;
    const char *embed_command; /* NULL: no embeddings */
    int embed_timeout_ms;
    int pg_timeout_s; /* connect and statement timeout */
    svc_content_kind content_store;
    const char *mongo_url; /* with SVC_CONTENT_MONGO */
} kh_store_opts;

/* url: a libpq URI (copied); opts: copied (embed_command is borrowed and
 * must outlive the store; mongo_url is used only during the call).
 * Connects to nothing yet.  Returns NULL with the reason in err on
 * allocation failure or a MONGO_URL that libmongoc refuses. */
kh_store *kh_store_new(const char *url, const kh_store_opts *opts, char *err,
                       size_t errlen);
void kh_store_free(kh_store *s);

/* Where the text is read from: "kh_document_content", or MongoDB's
 * "host:port/db.collection", for log lines. */
const char *kh_store_content_where(const kh_store *s);

/*
 * Applies ev as described above, in a transaction of its own.  *chunks
 * receives the number of chunks written (0 unless KH_INDEXED).  On
 * KH_FAILED, err says what failed.
 */
kh_outcome kh_store_apply(kh_store *s, const kh_event *ev, int *chunks,
                          char *err, size_t errlen);

/*
 * The same work for several events in ONE transaction, which is what
 * lets the indexer keep up with a busy relay (a commit per event costs a
 * WAL flush each).  kh_store_batch_begin opens it (0, or -1 with err;
 * it makes sure of the connection, and BEGIN itself goes out with the
 * first event's statements, so a BEGIN that fails makes every event of
 * the batch KH_FAILED and the commit -1);
 * kh_store_batch_apply applies one event inside a savepoint, so a
 * failed event is undone alone and the others stay; kh_store_batch_commit
 * commits (0) or, failing, rolls everything back (-1, err set): every
 * event of the batch must then be treated as KH_FAILED.  The caller acks
 * a batch's messages only after its commit, as for kh_store_apply.
 */
int kh_store_batch_begin(kh_store *s, char *err, size_t errlen);
kh_outcome kh_store_batch_apply(kh_store *s, const kh_event *ev, int *chunks,
                                char *err, size_t errlen);
int kh_store_batch_commit(kh_store *s, char *err, size_t errlen);

#endif /* KH_STORE_H */
