/*
 * rv_documents.c: create, read, list and edit documents.
 *
 * Create and edit are transactions (rv_tx_run): the document row and its
 * text in the content store commit together (with MongoDB: the version's
 * text is written just before the commit, rv_content.h).  An edit locks
 * the row (FOR UPDATE), so it cannot interleave with a submit of the same
 * document: either the edit sees "draft" and bumps the version before the
 * submit reads it, or it sees "pending_review" and is refused with 409.
 * Who may edit is checked first on a plain read, so a caller who is not
 * the author gets 403 without ever holding the row lock (and making the
 * author's own edit or submit wait); the row-locked read checks again.
 *
 * A read with ?include=content reads the row and its text in one snapshot
 * (rv_tx_snapshot): two statements each with a snapshot of its own could
 * show version 3's row with version 4's text, committed in between.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tx/rv_content.h"
#include "handlers/rv_handlers.h"
#include "handlers/rv_load.h"
#include "api/rv_pages.h"
#include "svc_json.h"
#include "db/rv_query.h"
#include "tx/rv_tx.h"
#include "api/rv_views.h"

#define RV_TITLE_MAX 200

/* The content store bounds nothing: the 1 MiB body limit does. */
#define RV_CONTENT_MAX ((size_t)-1)

typedef struct doc_input {
    const char *title;   /* NULL: unchanged (edit) */
    const char *content; /* NULL: unchanged (edit) */
    int with_content;    /* GET ?include=content */
} doc_input;

static const char *const doc_fields[] = {"title", "content", NULL};

/* Reads title and content from body; required: both must be present. */
static int read_doc_fields(const json_t *body, int required, doc_input *in,
                           rv_reply *reply)
{
    char detail[160];
    int t, c;

    t = svc_json_string_field(body, "title", 1, RV_TITLE_MAX, 0, &in->title,
                              detail, sizeof(detail));
    c = t < 0 ? 0
              : svc_json_string_field(body, "content", 0, RV_CONTENT_MAX, 0,
                                      &in->content, detail, sizeof(detail));
    if (t < 0 || c < 0) {
        rv_reply_error(reply, 400, "INVALID_ARGUMENT", detail);
        return -1;
    }
    if (required && (t == 0 || c == 0)) {
        rv_reply_error(reply, 400, "INVALID_ARGUMENT",
                       t == 0 ? "\"title\" is required"
                              : "\"content\" is required");
        return -1;
    }
    if (!required && t == 0 && c == 0) {
        rv_reply_error(reply, 400, "INVALID_ARGUMENT",
                       "nothing to change: give \"title\" or \"content\"");
        return -1;
    }
    return 0;
}

static rv_db_status create_work(rv_request *req, rv_db_conn *c, void *arg,
                                rv_reply *reply)
{
    const doc_input *in = arg;
    rv_doc d;
    rv_db_status st;

    st = rv_query_doc_insert(c, in->title, req->who.sub, in->content, &d);
    if (st != RV_DB_OK)
        return st;
    st = rv_content_put(req, c, d.id, d.version, in->content, reply);
    if (st == RV_DB_OK) {
        rv_reply_json(reply, 201, rv_view_document(&d, NULL));
        snprintf(reply->location, sizeof(reply->location), "/v1/documents/%s",
                 d.id);
    }
    rv_query_doc_clear(&d);
    return st;
}

void rv_handle_document_create(rv_request *req, rv_reply *reply)
{
    doc_input in = {NULL, NULL, 0};
    json_t *body;

    if (!rv_request_require_role(req, RV_ROLE_AUTHOR | RV_ROLE_ADMIN, reply))
        return;
    body = rv_request_body_object(req, 0, doc_fields, reply);
    if (body == NULL)
        return;
    if (read_doc_fields(body, 1, &in, reply) == 0)
        rv_tx_run(req, create_work, &in, reply);
    json_decref(body);
}

static rv_db_status get_work(rv_request *req, rv_db_conn *c, void *arg,
                             rv_reply *reply)
{
    const doc_input *in = arg;
    char id[RV_LOAD_ID_LEN];
    char *content = NULL;
    rv_doc d;
    rv_db_status st;

    if (!rv_load_document(req, c, 0, id, &d, reply, &st))
        return st;
    if (in->with_content)
        st = rv_content_get(req, c, id, d.version, &content, reply);
    if (st == RV_DB_OK)
        rv_reply_json(reply, 200, rv_view_document(&d, content));
    free(content);
    rv_query_doc_clear(&d);
    return st;
}

/* ?include=content is the only parameter GET /v1/documents/{id} takes. */
static int read_include(const rv_request *req, doc_input *in, rv_reply *reply)
{
    const char *key;
    json_t *value;

    if (req->query_dup != NULL) {
        rv_reply_error(reply, 400, "INVALID_ARGUMENT",
                       "a query parameter is given twice");
        return -1;
    }
    json_object_foreach(req->query, key, value)
    {
        if (strcmp(key, "include") != 0) {
            rv_reply_error(reply, 400, "INVALID_ARGUMENT",
                           "unknown query parameter (only include=content)");
            return -1;
        }
        if (strcmp(json_string_value(value), "content") != 0) {
            rv_reply_error(reply, 400, "INVALID_ARGUMENT",
                           "include must be \"content\"");
            return -1;
        }
        in->with_content = 1;
    }
    return 0;
}

void rv_handle_document_get(rv_request *req, rv_reply *reply)
{
    doc_input in = {NULL, NULL, 0};

    if (read_include(req, &in, reply) != 0)
        return;
    if (in.with_content)
        rv_tx_snapshot(req, get_work, &in, reply);
    else
        rv_tx_read(req, get_work, &in, reply);
}

/* author=: a user id as tokens carry it (sub), 1..255 bytes. */
static int author_valid(const char *v)
{
    const size_t n = strlen(v);

    return n >= 1 && n <= 255;
}

static const rv_page_filter author_filter = {
    "author", author_valid, "author must be 1..255 characters"};

static json_t *document_row(PGresult *res, int i)
{
    rv_doc d;

    rv_query_doc_at(res, i, &d);
    return rv_view_document(&d, NULL);
}

static const rv_page_list document_pages = {&author_filter, rv_query_doc_list,
                                            document_row};

/* Any role, like GET /v1/documents/{id}: ?author=alice lists one
 * author's documents (the console's "your documents"). */
void rv_handle_document_list(rv_request *req, rv_reply *reply)
{
    rv_page page;

    if (rv_page_open(req, &document_pages, &page, reply) == 0)
        rv_tx_read(req, rv_page_work, &page, reply);
}

/* Writes an allowed edit: the row (version + 1), then the text of the
 * new version (rv_content.h says why in that order). */
static rv_db_status apply_edit(rv_request *req, rv_db_conn *c, const char *id,
                               const doc_input *in, rv_reply *reply)
{
    rv_doc updated;
    rv_db_status st = rv_query_doc_update(c, id, in->title, in->content,
                                          &updated);

    if (st != RV_DB_OK)
        return st;
    if (in->content != NULL) {
        st = rv_content_put(req, c, id, updated.version, in->content, reply);
    } else {
        st = rv_content_carry(req, c, id, updated.version - 1, updated.version,
                              reply);
    }
    if (st == RV_DB_OK)
        rv_reply_json(reply, 200, rv_view_document(&updated, NULL));
    rv_query_doc_clear(&updated);
    return st;
}

/* Edit: owner only, in draft or rejected, version + 1. */
static rv_db_status update_work(rv_request *req, rv_db_conn *c, void *arg,
                                rv_reply *reply)
{
    const doc_input *in = arg;
    char id[RV_LOAD_ID_LEN];
    rv_doc d;
    rv_db_status st;

    if (!rv_load_own_document(req, c, 1, "edit", id, &d, reply, &st))
        return st;
    if (d.state != RV_DOC_DRAFT && d.state != RV_DOC_REJECTED) {
        rv_reply_error(reply, 409, "INVALID_STATE",
                       "only a draft or rejected document can be edited");
    } else {
        st = apply_edit(req, c, id, in, reply);
    }
    rv_query_doc_clear(&d);
    return st;
}

void rv_handle_document_update(rv_request *req, rv_reply *reply)
{
    doc_input in = {NULL, NULL, 0};
    json_t *body = rv_request_body_object(req, 0, doc_fields, reply);

    if (body == NULL)
        return;
    if (read_doc_fields(body, 0, &in, reply) == 0) {
        /* Before the row lock: only the author may edit. */
        rv_tx_read(req, rv_load_check_author, (void *)"edit", reply);
    }
    if (reply->status == 0)
        rv_tx_run(req, update_work, &in, reply);
    json_decref(body);
}
