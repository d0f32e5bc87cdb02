/*
 * rv_content.c: the PostgreSQL content store (see rv_content.h).
 */
#include "rv_content.h"

#include "rv_config.h"
#include "rv_queries.h"

rv_db_status rv_content_put(rv_conn *c, const char *doc_id,
                            const char *content)
{
    return rv_q_content_put(c, doc_id, content);
}

rv_db_status rv_content_get(rv_conn *c, const char *doc_id, PGresult **res)
{
    int found = 0;

    return rv_q_content_get(c, doc_id, res, &found);
}

const char *rv_content_text(const PGresult *res)
{
    return PQntuples(res) > 0 ? PQgetvalue(res, 0, 0) : "";
}

int rv_content_supported(int kind)
{
    return kind == RV_CONTENT_PG;
}
