/*
 * kh_store_conn.h: what the store's two apply paths share, private to
 * store/: the kh_store object, its PostgreSQL connection with every
 * statement prepared, and the pipeline that sends several prepared
 * statements in one round trip.
 *
 * The event-by-event path (kh_store.c) and the batched path
 * (kh_store_many.c) run on the same connection, so a new connection
 * prepares the statements of both (kh_store_connect): neither pays for
 * preparing on its first use, and each path keeps its SQL beside the code
 * that runs it, in a kh_stmt table of its own declared below.
 *
 * A connection whose state is unknown (a pipeline that failed half way,
 * a libpq error) is dropped and made again on the next kh_store_connect.
 *
 * Ownership: the kh_store owns its connection and MongoDB store
 * (kh_store_new/kh_store_free in kh_store.h).  Threads: one kh_store per
 * thread, as kh_store.h says.
 */
#ifndef KH_STORE_CONN_H
#define KH_STORE_CONN_H

#include <libpq-fe.h>

#include "kh_store.h"
#include "svc_content_mongo.h"

struct kh_store {
    char *url;
    kh_store_opts opts;
    PGconn *pg;
    svc_mongo_store *mongo; /* NULL: the text is in kh_document_content */
    int begin_pending;      /* the batch's BEGIN goes with its first event */
    int begin_failed;       /* ... and it failed: the batch cannot commit */
};

/* One statement to prepare on each new connection: sql, or mongo_sql
 * when it is not NULL and the text is in MongoDB. */
typedef struct kh_stmt {
    const char *name;
    const char *sql;
    const char *mongo_sql;
    int nparams;
} kh_stmt;

/* The transaction's ends, which both paths use. */
#define KH_STMT_BEGIN "kh_begin"
#define KH_STMT_COMMIT "kh_commit"

/* The event-by-event path's statements (kh_store.c) and the batched
 * path's (kh_store_many.c). */
extern const kh_stmt kh_store_tx_stmts[];
extern const size_t kh_store_tx_nstmts;
extern const kh_stmt kh_store_many_stmts[];
extern const size_t kh_store_many_nstmts;

/* Connects when there is no usable connection, sets the session up and
 * prepares every statement on a new one.  Returns 0, or -1 with err set
 * and no connection. */
int kh_store_connect(kh_store *s, char *err, size_t errlen);

/* Closes the connection; the next kh_store_connect makes a new one. */
void kh_store_drop_connection(kh_store *s);

/* A ROLLBACK whose result does not matter: the transaction is being
 * given up, and a connection that cannot even do this is dropped by the
 * next statement that fails. */
void kh_store_rollback_quietly(kh_store *s);

/* Writes "what: msg" to err, without libpq's trailing newline and with
 * the password of s's connection string taken out of msg wherever it
 * shows (svc_log_redact_secrets): every error of the store can reach a
 * log line. */
void kh_store_set_err(const kh_store *s, char *err, size_t errlen,
                      const char *what, const char *msg);

/* One statement of a pipeline (kh_store_run_steps). */
typedef struct kh_step {
    const char *what; /* for the error message */
    const char *name; /* of the prepared statement */
    int n;
    const char *const *params;
} kh_step;

/*
 * Sends the n steps in one pipeline (one round trip) and reads every
 * result.  Returns 0 with *kept the result of step keep (-1: none kept;
 * the caller clears it), or -1 with err naming the first step that
 * failed; the steps after a failed one did not run.  *failed_at gets
 * the index of that step (n when none failed).  A pipeline that cannot
 * be sent or whose connection fails drops the connection.
 */
int kh_store_run_steps(kh_store *s, const kh_step *steps, int n, int keep,
                       PGresult **kept, int *failed_at, char *err,
                       size_t errlen);

#endif /* KH_STORE_CONN_H */
