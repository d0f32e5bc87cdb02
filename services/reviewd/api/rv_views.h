/*
 * rv_views.h: the JSON forms of API.md's resources.
 *
 * One function per resource, so the field names and the null rules of the
 * contract (ids as strings, current_review_id, reviewer, comment, fence
 * and decided_at null until set) are written down once.  Each returns a
 * new jansson reference, or NULL on allocation failure.
 * Threads: reentrant.
 */
#ifndef RV_VIEWS_H
#define RV_VIEWS_H

#include <jansson.h>

#include "db/rv_query.h"

/* The Document; content, when not NULL, is added as "content". */
json_t *rv_view_document(const rv_doc *d, const char *content);

/* The Review. */
json_t *rv_view_review(const rv_review *r);

/* {"document": ..., "review": ...}, the answer of submit and decisions. */
json_t *rv_view_decision(const rv_doc *d, const rv_review *r);

#endif /* RV_VIEWS_H */
