/*
 * rv_reply.c: building replies (see rv_reply.h).
 *
 * Allocation failure on the request path fails that request, never the
 * process (STYLE.md): a reply whose body cannot be built becomes a 500
 * with a static body that needs no allocation to describe.
 */
#include "api/rv_reply.h"

#include <stdlib.h>
#include <string.h>

#include "svc_json.h"

static const char oom_body[] =
    "{\"code\":\"INTERNAL\",\"detail\":\"out of memory\"}";

static void reply_oom(rv_reply *reply)
{
    reply->status = 500;
    reply->code = "INTERNAL";
    reply->body = strdup(oom_body);
}

void rv_reply_error(rv_reply *reply, unsigned status, const char *code,
                    const char *detail)
{
    rv_reply_clear(reply);
    reply->status = status;
    reply->code = code;
    reply->body = svc_json_error_body(code, detail);
    if (reply->body == NULL)
        reply_oom(reply);
}

void rv_reply_json(rv_reply *reply, unsigned status, json_t *obj)
{
    rv_reply_clear(reply);
    reply->status = status;
    reply->body = svc_json_dump_steal(obj);
    if (reply->body == NULL)
        reply_oom(reply);
}

void rv_reply_location_from_id(rv_reply *reply, const char *prefix)
{
    json_t *obj;
    const char *id;

    reply->location[0] = '\0';
    if (reply->body == NULL)
        return;
    obj = json_loads(reply->body, 0, NULL);
    id = json_string_value(json_object_get(obj, "id"));
    if (id != NULL && strlen(prefix) + strlen(id) < sizeof(reply->location)) {
        memcpy(reply->location, prefix, strlen(prefix));
        memcpy(reply->location + strlen(prefix), id, strlen(id) + 1);
    }
    json_decref(obj);
}

void rv_reply_clear(rv_reply *reply)
{
    free(reply->body);
    memset(reply, 0, sizeof(*reply));
}
