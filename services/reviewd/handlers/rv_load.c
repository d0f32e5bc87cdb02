/*
 * rv_load.c: the row the path names, or 404, and who may change it, or
 * 403 (see rv_load.h).
 */
#include "handlers/rv_load.h"

#include <stdio.h>
#include <string.h>

int rv_load_document(const rv_request *req, rv_db_conn *c, int lock,
                     char id[RV_LOAD_ID_LEN], rv_doc *d, rv_reply *reply,
                     rv_db_status *st)
{
    int found = 0;

    rv_request_id_text(req, id, RV_LOAD_ID_LEN);
    *st = rv_query_doc_get(c, id, lock, d, &found);
    if (*st == RV_DB_OK && !found)
        rv_reply_error(reply, 404, "NOT_FOUND", "no such document");
    return *st == RV_DB_OK && found;
}

int rv_load_review(const rv_request *req, rv_db_conn *c,
                   char id[RV_LOAD_ID_LEN], rv_review *r, rv_reply *reply,
                   rv_db_status *st)
{
    int found = 0;

    rv_request_id_text(req, id, RV_LOAD_ID_LEN);
    *st = rv_query_review_get(c, id, r, &found);
    if (*st == RV_DB_OK && !found)
        rv_reply_error(reply, 404, "NOT_FOUND", "no such review");
    return *st == RV_DB_OK && found;
}

int rv_load_own_document(const rv_request *req, rv_db_conn *c, int lock,
                         const char *verb, char id[RV_LOAD_ID_LEN], rv_doc *d,
                         rv_reply *reply, rv_db_status *st)
{
    char detail[64];

    if (!rv_load_document(req, c, lock, id, d, reply, st))
        return 0;
    if (strcmp(d->author, req->who.sub) == 0)
        return 1;
    snprintf(detail, sizeof(detail), "only the document's author may %s it",
             verb);
    rv_reply_error(reply, 403, "FORBIDDEN", detail);
    rv_query_doc_clear(d);
    return 0;
}

rv_db_status rv_load_check_author(rv_request *req, rv_db_conn *c, void *verb,
                                  rv_reply *reply)
{
    char id[RV_LOAD_ID_LEN];
    rv_doc d;
    rv_db_status st;

    if (rv_load_own_document(req, c, 0, verb, id, &d, reply, &st))
        rv_query_doc_clear(&d);
    return st;
}

int rv_load_decidable(const rv_request *req, rv_db_conn *c, int lock,
                      char id[RV_LOAD_ID_LEN], rv_review *r, rv_doc *d,
                      rv_reply *reply, rv_db_status *st)
{
    int found = 0;

    rv_request_id_text(req, id, RV_LOAD_ID_LEN);
    *st = rv_query_review_doc_get(c, id, lock, r, d, &found);
    if (*st != RV_DB_OK)
        return 0;
    if (!found) {
        rv_reply_error(reply, 404, "NOT_FOUND", "no such review");
        return 0;
    }
    if (strcmp(r->submitted_by, req->who.sub) != 0
        && strcmp(d->author, req->who.sub) != 0)
        return 1;
    rv_reply_error(reply, 403, "FORBIDDEN",
                   "four-eyes rule: you may not "
                   "decide a review of your own document");
    rv_query_doc_clear(d);
    rv_query_review_clear(r);
    return 0;
}
