/*
 * rv_content_orphans.h: `reviewd content-orphans`, the list of MongoDB
 * content records that no committed PostgreSQL row points at.
 *
 * rv_content.h explains how they arise (a transaction that failed or
 * died after its MongoDB write) and why they are harmless.  A record
 * (id, v) is an orphan when kh_document has no row id ("no_row") or the
 * row's version is below v ("above_version"); records at or below the
 * row's version are the document's history and are kept.  A record
 * written by a request still in flight looks like an orphan for the few
 * seconds before its commit, so the list is for a person or a sweep that
 * waits, not for deleting on sight; nothing here deletes.
 *
 * One run, on its own PostgreSQL connection and MongoDB client; not for
 * use from the HTTP server's threads.
 */
#ifndef RV_CONTENT_ORPHANS_H
#define RV_CONTENT_ORPHANS_H

#include <stddef.h>
#include <stdio.h>

#include "core/rv_config.h"

/*
 * Writes one line "DOCUMENT_ID VERSION REASON" per orphan to out.
 * Returns the number listed, or -1 with the reason in err (including
 * CONTENT_STORE not being mongo).
 */
long rv_content_orphans_list(const rv_config *cfg, FILE *out, char *err,
                             size_t errlen);

#endif /* RV_CONTENT_ORPHANS_H */
