/*
 * rv_content.h: where document text lives (CONTENT_STORE).
 *
 * The default store is PostgreSQL (kh_document_content), written on the
 * request's own connection inside its transaction, so a document and its
 * text commit together.  The interface takes the connection for that
 * reason; a MongoDB store (CONTENT_STORE=mongo, libmongoc) would keep
 * its own client in rv_app and write after the row lock, as the original
 * design did.  It is not built yet: start-up refuses CONTENT_STORE=mongo
 * with a clear message rather than half-working.
 *
 * Threads: as rv_conn.
 */
#ifndef RV_CONTENT_H
#define RV_CONTENT_H

#include "rv_db.h"

/* Stores the text of document doc_id (insert or replace). */
rv_db_status rv_content_put(rv_conn *c, const char *doc_id,
                            const char *content);

/*
 * Reads the text of document doc_id.  On RV_DB_OK, *res holds it (the
 * text is rv_content_text(*res); "" when the document has none); the
 * caller PQclears it.
 */
rv_db_status rv_content_get(rv_conn *c, const char *doc_id, PGresult **res);

/* The text held by a result of rv_content_get. */
const char *rv_content_text(const PGresult *res);

/* 1 if this build supports the configured store. */
int rv_content_supported(int kind);

#endif /* RV_CONTENT_H */
