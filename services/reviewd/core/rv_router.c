/*
 * rv_router.c: path and method matching for reviewd.
 *
 * The API has fifteen path shapes, so a table of literal segments is
 * clearer than a general router: each entry is a prefix, whether an {id}
 * segment follows, and an optional verb segment after it.  The console's
 * files are one more shape, "/" plus a name ending in .html, .js or .css
 * (the names rv_embed_console.cmake accepts); whether such a file exists
 * is the console handler's question, answered with 404.  Matching walks
 * the table once; the method then picks the operation or leaves
 * RV_OP_NONE for a 405 with the entry's Allow list.
 */
#include "core/rv_router.h"

#include <string.h>

typedef struct route_entry {
    rv_path path;
    const char *prefix; /* the path up to the id (or the whole path) */
    int has_id;
    const char *suffix; /* after the id: "" or "/submit" ... */
    rv_op ops[RV_METHOD_COUNT];
    const char *allow;
    const char *label;
} route_entry;

/* ops[] is indexed by rv_method: GET, HEAD, POST, PUT, OTHER. */
static const route_entry routes[] = {
    {RV_PATH_DOCUMENTS,
     "/v1/documents",
     0,
     "",
     {RV_OP_DOCUMENT_LIST, RV_OP_DOCUMENT_LIST, RV_OP_DOCUMENT_CREATE, 0, 0},
     "GET, HEAD, POST",
     "/v1/documents"},
    {RV_PATH_DOCUMENT,
     "/v1/documents/",
     1,
     "",
     {RV_OP_DOCUMENT_GET, RV_OP_DOCUMENT_GET, 0, RV_OP_DOCUMENT_UPDATE, 0},
     "GET, HEAD, PUT",
     "/v1/documents/{id}"},
    {RV_PATH_DOCUMENT_SUBMIT,
     "/v1/documents/",
     1,
     "/submit",
     {0, 0, RV_OP_DOCUMENT_SUBMIT, 0, 0},
     "POST",
     "/v1/documents/{id}/submit"},
    {RV_PATH_DOCUMENT_REVIEWS,
     "/v1/documents/",
     1,
     "/reviews",
     {RV_OP_DOCUMENT_REVIEWS, RV_OP_DOCUMENT_REVIEWS, 0, 0, 0},
     "GET, HEAD",
     "/v1/documents/{id}/reviews"},
    {RV_PATH_DEV_TOKEN,
     "/v1/dev/token",
     0,
     "",
     {RV_OP_DEV_TOKEN_INFO, RV_OP_DEV_TOKEN_INFO, RV_OP_DEV_TOKEN_ISSUE, 0, 0},
     "GET, HEAD, POST",
     "/v1/dev/token"},
    /* "/" only here; the console's other files by console_file_shape. */
    {RV_PATH_CONSOLE,
     "/",
     0,
     "",
     {RV_OP_CONSOLE, RV_OP_CONSOLE, 0, 0, 0},
     "GET, HEAD",
     "/{console file}"},
    {RV_PATH_REVIEWS,
     "/v1/reviews",
     0,
     "",
     {RV_OP_REVIEW_LIST, RV_OP_REVIEW_LIST, 0, 0, 0},
     "GET, HEAD",
     "/v1/reviews"},
    {RV_PATH_REVIEW,
     "/v1/reviews/",
     1,
     "",
     {RV_OP_REVIEW_GET, RV_OP_REVIEW_GET, 0, 0, 0},
     "GET, HEAD",
     "/v1/reviews/{id}"},
    {RV_PATH_REVIEW_APPROVE,
     "/v1/reviews/",
     1,
     "/approve",
     {0, 0, RV_OP_REVIEW_APPROVE, 0, 0},
     "POST",
     "/v1/reviews/{id}/approve"},
    {RV_PATH_REVIEW_REJECT,
     "/v1/reviews/",
     1,
     "/reject",
     {0, 0, RV_OP_REVIEW_REJECT, 0, 0},
     "POST",
     "/v1/reviews/{id}/reject"},
    {RV_PATH_HEALTHZ,
     "/healthz",
     0,
     "",
     {RV_OP_HEALTHZ, RV_OP_HEALTHZ, 0, 0, 0},
     "GET, HEAD",
     "/healthz"},
    {RV_PATH_READYZ,
     "/readyz",
     0,
     "",
     {RV_OP_READYZ, RV_OP_READYZ, 0, 0, 0},
     "GET, HEAD",
     "/readyz"},
    {RV_PATH_METRICS,
     "/metrics",
     0,
     "",
     {RV_OP_METRICS, RV_OP_METRICS, 0, 0, 0},
     "GET, HEAD",
     "/metrics"},
    {RV_PATH_SEARCH,
     "/v1/search",
     0,
     "",
     {RV_OP_SEARCH, RV_OP_SEARCH, 0, 0, 0},
     "GET, HEAD",
     "/v1/search"},
};

#define ROUTE_COUNT (sizeof(routes) / sizeof(routes[0]))

rv_method rv_router_method(const char *method)
{
    static const char *const names[] = {"GET", "HEAD", "POST", "PUT"};
    size_t i;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(method, names[i]) == 0)
            return (rv_method)i;
    return RV_METHOD_OTHER;
}

int rv_router_parse_id(const char *s, size_t len, int64_t *out)
{
    uint64_t v = 0;
    size_t i;

    *out = 0;
    if (len == 0 || len > 19 || s[0] == '0')
        return -1;
    for (i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    /* 19 digits fit in uint64_t; the API's range ends at INT64_MAX. */
    if (v > (uint64_t)INT64_MAX)
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* Matches entry e against path; on success fills the id fields of m. */
static int entry_matches(const route_entry *e, const char *path, rv_match *m)
{
    const size_t plen = strlen(e->prefix);
    const char *seg;
    size_t seglen;

    if (strncmp(path, e->prefix, plen) != 0)
        return 0;
    if (!e->has_id)
        return path[plen] == '\0';
    seg = path + plen;
    seglen = strcspn(seg, "/");
    if (seglen == 0 || strcmp(seg + seglen, e->suffix) != 0)
        return 0;
    m->has_id = 1;
    m->id_ok = rv_router_parse_id(seg, seglen, &m->id) == 0;
    return 1;
}

/* "/name.html", "/name.js" or "/name.css", name of [a-z0-9_-]. */
static int console_file_shape(const char *path)
{
    static const char *const exts[] = {".html", ".js", ".css"};
    size_t name, i;

    /* An empty path has no byte after its first: test before reading. */
    if (path[0] != '/')
        return 0;
    name = strspn(path + 1, "abcdefghijklmnopqrstuvwxyz0123456789_-");
    if (name == 0)
        return 0;
    for (i = 0; i < sizeof(exts) / sizeof(exts[0]); i++)
        if (strcmp(path + 1 + name, exts[i]) == 0)
            return 1;
    return 0;
}

void rv_router_match(const char *path, rv_method method, rv_match *m)
{
    size_t i;

    memset(m, 0, sizeof(*m));
    for (i = 0; i < ROUTE_COUNT; i++) {
        if (entry_matches(&routes[i], path, m)) {
            m->path = routes[i].path;
            m->op = routes[i].ops[method];
            return;
        }
        m->has_id = 0;
        m->id_ok = 0;
        m->id = 0;
    }
    if (console_file_shape(path)) {
        rv_router_match("/", method, m);
        return;
    }
    m->path = RV_PATH_UNKNOWN;
    m->op = RV_OP_NONE;
}

static const route_entry *entry_for(rv_path path)
{
    size_t i;

    for (i = 0; i < ROUTE_COUNT; i++)
        if (routes[i].path == path)
            return &routes[i];
    return NULL;
}

const char *rv_router_allow(rv_path path)
{
    const route_entry *e = entry_for(path);

    return e != NULL ? e->allow : "";
}

const char *rv_router_path_label(rv_path path)
{
    const route_entry *e = entry_for(path);

    return e != NULL ? e->label : "unmatched";
}

const char *rv_router_method_label(rv_method method)
{
    static const char *const labels[RV_METHOD_COUNT] = {"GET", "HEAD", "POST",
                                                        "PUT", "OTHER"};

    return labels[method];
}
