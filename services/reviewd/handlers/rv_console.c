/*
 * rv_console.c: the review console's server side: its files at / and
 * the development sign-in at /v1/dev/token.
 *
 * The files come from the binary (rv_console.h), so what is served is
 * what was built and tested.  Every console response carries the CSP of
 * RV_CONSOLE_CSP (no inline script: the console inserts user text as
 * text, and even a slip could not run a script), nosniff, no referrer
 * and no framing; it is cached as "no-cache" with an ETag, so a browser
 * revalidates each load and gets a 304 without the body until reviewd
 * is rebuilt with a changed file.
 *
 * /v1/dev/token exists only with DEV_LOGIN=1, which rv_config.c allows
 * on a loopback listener only: GET says the sign-in is offered (the
 * console shows its form), POST {"sub","role"} signs a one-hour token
 * with JWT_SECRET exactly as `reviewd token` does.  With DEV_LOGIN off
 * both answer 404 like any unknown path.
 */
#include "handlers/rv_console.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/rv_auth.h"
#include "core/rv_config.h"
#include "handlers/rv_handlers.h"
#include "svc_json.h"

#define RV_DEV_TOKEN_TTL_S 3600

const rv_console_file *rv_console_find(const char *path)
{
    size_t i;

    if (strcmp(path, "/") == 0)
        path = "/index.html";
    for (i = 0; i < rv_console_files_count; i++)
        if (strcmp(rv_console_files[i].path, path) == 0)
            return &rv_console_files[i];
    return NULL;
}

/* 1 if the If-None-Match list names etag (or is "*"). */
static int etag_matches(const char *if_none_match, const char *etag)
{
    const size_t n = strlen(etag);
    const char *p = if_none_match;

    if (p == NULL)
        return 0;
    if (strcmp(p, "*") == 0)
        return 1;
    for (p = strstr(p, etag); p != NULL; p = strstr(p + 1, etag))
        if (p[n] == '\0' || p[n] == ',' || p[n] == ' ')
            return 1;
    return 0;
}

void rv_handle_console(rv_request *req, rv_reply *reply)
{
    const rv_console_file *f = rv_console_find(req->path);

    if (f == NULL) {
        rv_reply_error(reply, 404, "NOT_FOUND", "no such path");
        return;
    }
    rv_reply_clear(reply);
    reply->console_headers = 1;
    reply->etag = f->etag;
    reply->cache_control = "no-cache";
    reply->content_type = f->content_type;
    if (etag_matches(req->if_none_match, f->etag)) {
        reply->status = 304;
        return;
    }
    reply->status = 200;
    reply->static_body = f->data;
    reply->static_len = f->len;
}

static int dev_login_on(const rv_request *req, rv_reply *reply)
{
    if (req->app->cfg->dev_login)
        return 1;
    rv_reply_error(reply, 404, "NOT_FOUND",
                   "no such path (the development "
                   "sign-in needs DEV_LOGIN=1)");
    return 0;
}

void rv_handle_dev_token_info(rv_request *req, rv_reply *reply)
{
    if (dev_login_on(req, reply)) {
        rv_reply_json(reply, 200,
                      json_pack("{s:b,s:[sss]}", "dev_login", 1, "roles",
                                "author", "reviewer", "admin"));
    }
}

/* Reads {"sub","role"}: sub 1..255 characters, role a known one. */
static int read_dev_request(const json_t *body, const char **sub,
                            const char **role, rv_reply *reply)
{
    char detail[160];

    if (svc_json_string_field(body, "sub", 1, RV_SUB_MAX, 0, sub, detail,
                              sizeof(detail))
            <= 0
        || svc_json_string_field(body, "role", 1, 16, 0, role, detail,
                                 sizeof(detail))
               <= 0) {
        rv_reply_error(reply, 400, "INVALID_ARGUMENT",
                       "give \"sub\" (1..255 characters) and \"role\"");
        return -1;
    }
    if (rv_auth_role_parse(*role) == RV_ROLE_NONE) {
        rv_reply_error(reply, 400, "INVALID_ARGUMENT",
                       "\"role\" must be author, reviewer or admin");
        return -1;
    }
    return 0;
}

void rv_handle_dev_token_issue(rv_request *req, rv_reply *reply)
{
    static const char *const fields[] = {"sub", "role", NULL};
    const rv_config *cfg = req->app->cfg;
    const int64_t now = (int64_t)time(NULL);
    const char *sub, *role;
    json_t *body;
    char *token;

    if (!dev_login_on(req, reply))
        return;
    body = rv_request_body_object(req, 0, fields, reply);
    if (body == NULL || read_dev_request(body, &sub, &role, reply) != 0) {
        json_decref(body);
        return;
    }
    token = rv_auth_issue((const unsigned char *)cfg->jwt_secret,
                          cfg->jwt_secret_len, sub, role, now,
                          RV_DEV_TOKEN_TTL_S);
    if (token == NULL) {
        rv_reply_error(reply, 500, "INTERNAL", "signing the token failed");
    } else {
        rv_reply_json(reply, 200,
                      json_pack("{s:s,s:s,s:s,s:I}", "token", token, "sub",
                                sub, "role", role, "exp",
                                (json_int_t)(now + RV_DEV_TOKEN_TTL_S)));
    }
    free(token);
    json_decref(body);
}
