/*
 * rv_views.c: rendering documents and reviews as API.md's JSON.
 *
 * Rows arrive as text from PostgreSQL (ids and timestamps already in
 * their API form), so rendering is a matter of names and nulls.
 * json_pack's "s?" makes a NULL pointer a JSON null, which is exactly the
 * contract's rule for optional fields.
 */
#include "api/rv_views.h"

json_t *rv_view_document(const rv_doc *d, const char *content)
{
    json_t *obj = json_pack("{s:s,s:s,s:s,s:s,s:i,s:s,s:s?,s:s,s:s}", "id",
                            d->id, "title", d->title, "status", d->status,
                            "author", d->author, "version", d->version,
                            "preview", d->preview, "current_review_id",
                            d->current_review_id, "created_at", d->created_at,
                            "updated_at", d->updated_at);

    if (obj != NULL && content != NULL
        && json_object_set_new(obj, "content", json_string(content)) != 0) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

json_t *rv_view_review(const rv_review *r)
{
    return json_pack("{s:s,s:s,s:i,s:s,s:s,s:s?,s:s?,s:s?,s:s,s:s?}", "id",
                     r->id, "document_id", r->document_id, "document_version",
                     r->document_version, "status", r->status, "submitted_by",
                     r->submitted_by, "reviewer", r->reviewer, "comment",
                     r->comment, "fence", r->fence, "created_at",
                     r->created_at, "decided_at",
                     r->decided_at[0] != '\0' ? r->decided_at : NULL);
}

json_t *rv_view_decision(const rv_doc *d, const rv_review *r)
{
    return json_pack("{s:o,s:o}", "document", rv_view_document(d, NULL),
                     "review", rv_view_review(r));
}
