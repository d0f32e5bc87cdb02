/*
 * rv_request.c: the checks every handler shares (see rv_request.h): the
 * caller's role, the body as a JSON object of known fields, and the
 * path's id as text.  They answer with the reply themselves, so a handler
 * only returns when one fails.
 */
#include "api/rv_request.h"

#include <stdio.h>

#include "svc_json.h"

int rv_request_require_role(const rv_request *req, unsigned roles,
                            rv_reply *reply)
{
    if ((unsigned)req->who.role & roles)
        return 1;
    rv_reply_error(reply, 403, "FORBIDDEN", "your role may not do this");
    return 0;
}

json_t *rv_request_body_object(const rv_request *req, int optional,
                               const char *const *allowed, rv_reply *reply)
{
    char detail[256];
    json_t *obj;

    if (req->body_len == 0 && optional) {
        obj = json_object();
        if (obj == NULL)
            rv_reply_error(reply, 500, "INTERNAL", "out of memory");
        return obj;
    }
    obj = svc_json_parse_object(req->body, req->body_len, detail,
                                sizeof(detail));
    if (obj == NULL) {
        rv_reply_error(reply, 400, "INVALID_JSON", detail);
        return NULL;
    }
    if (svc_json_only_fields(obj, allowed, detail, sizeof(detail)) != 0) {
        rv_reply_error(reply, 400, "INVALID_ARGUMENT", detail);
        json_decref(obj);
        return NULL;
    }
    return obj;
}

void rv_request_id_text(const rv_request *req, char *out, size_t outlen)
{
    snprintf(out, outlen, "%lld", (long long)req->match.id);
}
