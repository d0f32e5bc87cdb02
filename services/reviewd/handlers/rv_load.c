/*
 * rv_load.c: the row the path names, or 404 (see rv_load.h).
 */
#include "handlers/rv_load.h"

int rv_load_document(const rv_request *req, rv_db_conn *c, int lock,
                     char id[RV_LOAD_ID_LEN], rv_doc *d, rv_reply *reply,
                     rv_db_status *st)
{
    int found = 0;

    rv_request_id_text(req, id, RV_LOAD_ID_LEN);
    *st = rv_query_doc_get(c, id, lock, d, &found);
    if (*st == RV_DB_OK && !found) {
        rv_reply_error(reply, 404, "NOT_FOUND", "no such document");
    }
    return *st == RV_DB_OK && found;
}

int rv_load_review(const rv_request *req, rv_db_conn *c, int lock,
                   char id[RV_LOAD_ID_LEN], rv_review *r, rv_reply *reply,
                   rv_db_status *st)
{
    int found = 0;

    rv_request_id_text(req, id, RV_LOAD_ID_LEN);
    *st = rv_query_review_get(c, id, lock, r, &found);
    if (*st == RV_DB_OK && !found) {
        rv_reply_error(reply, 404, "NOT_FOUND", "no such review");
    }
    return *st == RV_DB_OK && found;
}
