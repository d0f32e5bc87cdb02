/*
 * url.c: the Redis URL parser (see url.h).
 *
 * The parser works on a bounded copy of the URL and splits it left to
 * right: scheme, optional userinfo (up to the last '@' before the path),
 * authority or socket path, optional /db, optional query.  Each part is
 * checked where it is cut, so a message can say which part is wrong.  It is
 * a fuzz target (tests/fuzz/fuzz_url.c): no input may crash it or leak.
 *
 * A deployment URL (Sentinel, Cluster, Redlock) is cut the same way, with
 * a comma-separated list where the authority was; each server of the list
 * becomes a complete endpoint of its own (its copy of the user, password,
 * transport and db), so every module that connects to one server keeps
 * working on one dlock__endpoint.
 */
#include "transport/url.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"

static int hex_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Percent-decodes s[0..len) into a new string; *out is NULL on failure. */
static dlock_err percent_decode(const char *s, size_t len, const char *what,
                                char **out, dlock__msg *m)
{
    char *dst = dlock__malloc(len + 1);
    size_t j = 0;

    *out = NULL;
    if (dst == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "decoding the URL's %s", what);
    for (size_t i = 0; i < len; i++) {
        int hi, lo;

        if (s[i] != '%') {
            dst[j++] = s[i];
            continue;
        }
        if (i + 2 >= len) {
            hi = -1;
            lo = -1;
        } else {
            hi = hex_value(s[i + 1]);
            lo = hex_value(s[i + 2]);
        }
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
            dlock__free(dst);
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "bad percent-escape in the URL's %s", what);
        }
        dst[j++] = (char)(hi * 16 + lo);
        i += 2;
    }
    dst[j] = '\0';
    *out = dst;
    return DLOCK_OK;
}

/* Parses a decimal integer in [min, max] from s[0..len). */
static int parse_int(const char *s, size_t len, long min, long max, int *out)
{
    long value = 0;

    if (len == 0 || len > 10)
        return 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        value = value * 10 + (s[i] - '0');
    }
    if (value < min || value > max)
        return 0;
    *out = (int)value;
    return 1;
}

/* Splits "user:pass" (or ":pass", or "user") and decodes both parts. */
static dlock_err parse_userinfo(const char *s, size_t len, dlock__endpoint *ep,
                                dlock__msg *m)
{
    const char *colon = memchr(s, ':', len);
    size_t ulen = colon ? (size_t)(colon - s) : len;
    dlock_err err;

    if (ulen > 0) {
        err = percent_decode(s, ulen, "user name", &ep->user, m);
        if (err != DLOCK_OK)
            return err;
    }
    if (colon == NULL)
        return DLOCK_OK;
    return percent_decode(colon + 1, len - ulen - 1, "password", &ep->password,
                          m);
}

/* Parses "host[:port]" or "[v6]:port"; the port defaults to default_port. */
static dlock_err parse_authority(const char *s, size_t len, int default_port,
                                 dlock__endpoint *ep, dlock__msg *m)
{
    const char *host = s;
    size_t hlen;
    const char *rest;

    ep->port = default_port;
    if (len > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', len);

        if (close == NULL)
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "unclosed '[' in the URL's host");
        host = s + 1;
        hlen = (size_t)(close - host);
        rest = close + 1;
        if (rest < s + len && *rest != ':')
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "unexpected text after ']' in the URL");
    } else {
        const char *colon = memchr(s, ':', len);

        hlen = colon ? (size_t)(colon - s) : len;
        rest = s + hlen;
    }
    if (hlen == 0)
        return dlock__msg_set(m, DLOCK_INVALID, "the URL has no host");
    if (memchr(host, '%', hlen) != NULL || memchr(host, '@', hlen) != NULL)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "unexpected character in the URL's host");
    if (rest < s + len) {
        size_t plen = (size_t)(s + len - rest - 1);

        if (!parse_int(rest + 1, plen, 1, 65535, &ep->port))
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "the URL's port is not 1..65535");
    }
    ep->host = dlock__strndup(host, hlen);
    if (ep->host == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "copying the URL's host");
    return DLOCK_OK;
}

/* The URL's numeric parameters: name=, where it goes, its range. */
typedef struct query_param {
    const char *name;
    size_t offset; /* of the int in dlock__endpoint */
    long max;
} query_param;

static const query_param query_params[] = {
    {"db=", offsetof(dlock__endpoint, db), 2147483647L},
    {"wait_replicas=", offsetof(dlock__endpoint, wait_replicas), 64},
    {"wait_timeout=", offsetof(dlock__endpoint, wait_timeout_ms), 3600000L},
};

/* Parses one "name=N" into ep; 0 if its name is unknown, -1 if its value
 * is not a number in range. */
static int parse_param(const char *s, size_t len, dlock__endpoint *ep)
{
    for (size_t i = 0; i < sizeof(query_params) / sizeof(*query_params); i++) {
        const query_param *q = &query_params[i];
        size_t n = strlen(q->name);

        if (len <= n || memcmp(s, q->name, n) != 0)
            continue;
        return parse_int(s + n, len - n, 0, q->max,
                         (int *)((char *)ep + q->offset))
                   ? 1
                   : -1;
    }
    return 0;
}

/* Parses "db=N", "wait_replicas=N" and "wait_timeout=MS" query
 * parameters joined by '&'. */
static dlock_err parse_query(const char *s, size_t len, dlock__endpoint *ep,
                             dlock__msg *m)
{
    while (len > 0) {
        const char *amp = memchr(s, '&', len);
        size_t plen = amp ? (size_t)(amp - s) : len;
        int known = plen > 0 ? parse_param(s, plen, ep) : 1;

        if (known < 0)
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "the URL parameter '%.*s' is not a "
                                  "number in range",
                                  (int)(plen > 40 ? 40 : plen), s);
        if (known == 0)
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "unknown URL parameter '%.*s' (only db=N, "
                                  "wait_replicas=N and wait_timeout=MS)",
                                  (int)(plen > 40 ? 40 : plen), s);
        if (amp == NULL)
            break;
        len -= plen + 1;
        s = amp + 1;
    }
    return DLOCK_OK;
}

typedef struct scheme {
    const char *prefix; /* with "://" */
    dlock__deploy_kind kind;
    dlock__transport transport;
} scheme;

static const scheme schemes[] = {
    {"redis://", DLOCK__SINGLE, DLOCK__TCP},
    {"rediss://", DLOCK__SINGLE, DLOCK__TLS},
    {"unix://", DLOCK__SINGLE, DLOCK__UNIX},
    {"redis+sentinel://", DLOCK__SENTINEL, DLOCK__TCP},
    {"rediss+sentinel://", DLOCK__SENTINEL, DLOCK__TLS},
    {"redis+cluster://", DLOCK__CLUSTER, DLOCK__TCP},
    {"rediss+cluster://", DLOCK__CLUSTER, DLOCK__TLS},
    {"redlock://", DLOCK__REDLOCK, DLOCK__TCP},
    {"redlocks://", DLOCK__REDLOCK, DLOCK__TLS},
};

/* The scheme url starts with, or NULL. */
static const scheme *find_scheme(const char *url)
{
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
        if (strncasecmp(url, schemes[i].prefix, strlen(schemes[i].prefix))
            == 0)
            return &schemes[i];
    return NULL;
}

/* Checks what every URL must be: not empty, not too long, printable ASCII
 * without spaces, with a known scheme.  Sets *len and *sc. */
static dlock_err check_text(const char *url, size_t *len, const scheme **sc,
                            dlock__msg *m)
{
    if (url == NULL || url[0] == '\0')
        return dlock__msg_set(m, DLOCK_INVALID, "the Redis URL is empty");
    *len = strnlen(url, DLOCK__URL_MAX + 1);
    if (*len > DLOCK__URL_MAX)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "the Redis URL is longer than %d bytes",
                              DLOCK__URL_MAX);
    *sc = find_scheme(url);
    if (*sc == NULL)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "the Redis URL must start with redis://, "
                              "rediss://, unix://, redis+sentinel://, "
                              "redis+cluster:// or redlock://");
    for (size_t i = 0; i < *len; i++) {
        unsigned char ch = (unsigned char)url[i];

        if (ch <= ' ' || ch >= 0x7f)
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "the Redis URL has a space or control "
                                  "character at offset %zu",
                                  i);
    }
    return DLOCK_OK;
}

/* Cuts the userinfo off rest[0..*len), which ends at the last '@' before
 * the first '/' or '?', so a stray '@' later in the URL cannot cut the
 * host; decodes it into ep and advances *rest and *len past it. */
static dlock_err cut_userinfo(const char **rest, size_t *len,
                              dlock__endpoint *ep, dlock__msg *m)
{
    const char *at = NULL;
    dlock_err err;

    for (size_t i = 0; i < *len && (*rest)[i] != '/' && (*rest)[i] != '?'; i++)
        if ((*rest)[i] == '@')
            at = *rest + i;
    if (at == NULL)
        return DLOCK_OK;
    err = parse_userinfo(*rest, (size_t)(at - *rest), ep, m);
    if (err != DLOCK_OK)
        return err;
    *len -= (size_t)(at - *rest) + 1;
    *rest = at + 1;
    return DLOCK_OK;
}

static void describe(dlock__endpoint *ep)
{
    if (ep->transport == DLOCK__UNIX)
        snprintf(ep->desc, sizeof(ep->desc), "unix:%s", ep->path);
    else if (strchr(ep->host, ':') != NULL)
        snprintf(ep->desc, sizeof(ep->desc), "[%s]:%d", ep->host, ep->port);
    else
        snprintf(ep->desc, sizeof(ep->desc), "%s:%d", ep->host, ep->port);
}

/* Parses what follows the userinfo: a socket path or an authority with an
 * optional /db, then the query. */
static dlock_err parse_location(const char *s, size_t len, dlock__endpoint *ep,
                                dlock__msg *m)
{
    const char *query = memchr(s, '?', len);
    size_t loclen = query ? (size_t)(query - s) : len;
    dlock_err err;

    if (ep->transport == DLOCK__UNIX) {
        if (loclen < 2 || s[0] != '/')
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "a unix:// URL needs an absolute socket "
                                  "path, as in unix:///run/redis.sock");
        ep->path = dlock__strndup(s, loclen);
        if (ep->path == NULL)
            return dlock__msg_set(m, DLOCK_NOMEM, "copying the socket path");
    } else {
        const char *slash = memchr(s, '/', loclen);
        size_t alen = slash ? (size_t)(slash - s) : loclen;

        err = parse_authority(s, alen, 6379, ep, m);
        if (err != DLOCK_OK)
            return err;
        if (slash != NULL && loclen - alen > 1
            && !parse_int(slash + 1, loclen - alen - 1, 0, 2147483647L,
                          &ep->db))
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "the URL's path must be a database "
                                  "number, as in redis://host/2");
    }
    if (query == NULL)
        return DLOCK_OK;
    return parse_query(query + 1, len - loclen - 1, ep, m);
}

dlock_err dlock__url_parse(const char *url, dlock__endpoint *ep, dlock__msg *m)
{
    size_t len;
    const scheme *sc = NULL;
    const char *rest;
    dlock_err err;

    memset(ep, 0, sizeof(*ep));
    err = check_text(url, &len, &sc, m);
    if (err != DLOCK_OK)
        return err;
    if (sc->kind != DLOCK__SINGLE)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "a %s URL names several servers (a %s "
                              "deployment), where one server is expected: "
                              "use redis://, rediss:// or unix://",
                              sc->prefix, dlock__deploy_kind_name(sc->kind));
    ep->transport = sc->transport;
    rest = url + strlen(sc->prefix);
    len -= strlen(sc->prefix);
    err = cut_userinfo(&rest, &len, ep, m);
    if (err != DLOCK_OK)
        goto fail;
    err = parse_location(rest, len, ep, m);
    if (err != DLOCK_OK)
        goto fail;
    describe(ep);
    return DLOCK_OK;
fail:
    dlock__endpoint_clear(ep);
    return err;
}

void dlock__endpoint_clear(dlock__endpoint *ep)
{
    dlock__free(ep->host);
    dlock__free(ep->path);
    dlock__free(ep->user);
    if (ep->password != NULL) {
        /* The password should not linger in freed memory. */
        explicit_bzero(ep->password, strlen(ep->password));
        dlock__free(ep->password);
    }
    memset(ep, 0, sizeof(*ep));
}

const char *dlock__deploy_kind_name(dlock__deploy_kind kind)
{
    switch (kind) {
    case DLOCK__SINGLE: return "single-server";
    case DLOCK__SENTINEL: return "Sentinel";
    case DLOCK__CLUSTER: return "Cluster";
    case DLOCK__REDLOCK: return "Redlock";
    }
    return "unknown";
}

static int is_master_name_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
           || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.';
}

/* Parses the path of a deployment URL, s[0..len) after its '/': the
 * Sentinel master name, or the db of the others ("" is none). */
static dlock_err parse_deployment_path(const char *s, size_t len,
                                       dlock__deployment *d,
                                       dlock__endpoint *shared, dlock__msg *m)
{
    if (d->kind != DLOCK__SENTINEL) {
        if (len > 0 && !parse_int(s, len, 0, 2147483647L, &shared->db))
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "the URL's path must be a database "
                                  "number, as in redlock://h1,h2,h3/2");
        return DLOCK_OK;
    }
    if (len == 0)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "a Sentinel URL needs the master's name as "
                              "its path, as in redis+sentinel://h1,h2,h3/"
                              "mymaster");
    if (len > DLOCK__MASTER_NAME_MAX)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "the URL's master name is longer than %d "
                              "bytes",
                              DLOCK__MASTER_NAME_MAX);
    for (size_t i = 0; i < len; i++) {
        if (!is_master_name_char(s[i]))
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "the URL's master name may hold only "
                                  "letters, digits, '-', '_' and '.'");
    }
    d->master_name = dlock__strndup(s, len);
    if (d->master_name == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "copying the master name");
    return DLOCK_OK;
}

/* Cuts the comma-separated server list s[0..len) into d->nodes. */
static dlock_err parse_node_list(const char *s, size_t len,
                                 dlock__deployment *d, dlock__msg *m)
{
    const int default_port = d->kind == DLOCK__SENTINEL ? 26379 : 6379;

    for (;;) {
        const char *comma = memchr(s, ',', len);
        size_t plen = comma ? (size_t)(comma - s) : len;
        dlock_err err;

        if (d->nnodes == DLOCK__NODES_MAX)
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "the URL names more than %d servers",
                                  DLOCK__NODES_MAX);
        if (plen == 0)
            return dlock__msg_set(m, DLOCK_INVALID,
                                  "the URL's server list has an empty "
                                  "entry (server %d)",
                                  d->nnodes + 1);
        err = parse_authority(s, plen, default_port, &d->nodes[d->nnodes], m);
        d->nnodes++;
        if (err != DLOCK_OK)
            return dlock__msg_wrap(m, err, "server %d of the URL", d->nnodes);
        if (comma == NULL)
            return DLOCK_OK;
        len -= plen + 1;
        s = comma + 1;
    }
}

/* Gives node ep its copy of what every node shares, and its description. */
static dlock_err complete_node(dlock__deployment *d, dlock__endpoint *ep,
                               const dlock__endpoint *shared, dlock__msg *m)
{
    ep->transport = shared->transport;
    /* A sentinel has no databases: the db is the master's (d->db). */
    ep->db = d->kind == DLOCK__SENTINEL ? 0 : shared->db;
    if (shared->user != NULL) {
        ep->user = dlock__strdup(shared->user);
        if (ep->user == NULL)
            return dlock__msg_set(m, DLOCK_NOMEM, "copying the user name");
    }
    if (shared->password != NULL) {
        ep->password = dlock__strdup(shared->password);
        if (ep->password == NULL)
            return dlock__msg_set(m, DLOCK_NOMEM, "copying the password");
    }
    describe(ep);
    return DLOCK_OK;
}

/* Refuses what the kind of deployment cannot serve: a server named twice
 * (it would count twice towards a Redlock majority), too few Redlock
 * masters, a cluster database other than 0. */
static dlock_err check_deployment(const dlock__deployment *d, int db,
                                  dlock__msg *m)
{
    for (int i = 0; i < d->nnodes; i++) {
        for (int j = 0; j < i; j++) {
            if (d->nodes[i].port == d->nodes[j].port
                && strcasecmp(d->nodes[i].host, d->nodes[j].host) == 0)
                return dlock__msg_set(m, DLOCK_INVALID,
                                      "the URL names %s twice",
                                      d->nodes[i].desc);
        }
    }
    if (d->kind == DLOCK__REDLOCK && d->nnodes < DLOCK__REDLOCK_MIN)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "a Redlock URL needs at least %d independent "
                              "masters, not %d",
                              DLOCK__REDLOCK_MIN, d->nnodes);
    if (d->kind == DLOCK__CLUSTER && db != 0)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "a Redis Cluster has only database 0, not %d",
                              db);
    return DLOCK_OK;
}

/* Parses what follows the scheme and userinfo of a deployment URL. */
static dlock_err parse_deployment_rest(const char *s, size_t len,
                                       dlock__deployment *d,
                                       dlock__endpoint *shared, dlock__msg *m)
{
    const char *query = memchr(s, '?', len);
    size_t loclen = query ? (size_t)(query - s) : len;
    const char *slash = memchr(s, '/', loclen);
    size_t alen = slash ? (size_t)(slash - s) : loclen;
    dlock_err err;

    err = parse_node_list(s, alen, d, m);
    if (err != DLOCK_OK)
        return err;
    if (slash != NULL) {
        err = parse_deployment_path(slash + 1, loclen - alen - 1, d, shared,
                                    m);
    } else if (d->kind == DLOCK__SENTINEL) {
        err = parse_deployment_path("", 0, d, shared, m);
    }
    if (err != DLOCK_OK)
        return err;
    if (query != NULL) {
        err = parse_query(query + 1, len - loclen - 1, shared, m);
        if (err != DLOCK_OK)
            return err;
    }
    /* The duplicate check names a node by its description. */
    for (int i = 0; i < d->nnodes; i++)
        describe(&d->nodes[i]);
    return check_deployment(d, shared->db, m);
}

dlock_err dlock__url_parse_deployment(const char *url, dlock__deployment *d,
                                      dlock__msg *m)
{
    dlock__endpoint shared;
    const scheme *sc = NULL;
    const char *rest;
    size_t len;
    dlock_err err;

    memset(d, 0, sizeof(*d));
    memset(&shared, 0, sizeof(shared));
    err = check_text(url, &len, &sc, m);
    if (err != DLOCK_OK)
        return err;
    d->kind = sc->kind;
    if (sc->kind == DLOCK__SINGLE) {
        err = dlock__url_parse(url, &d->nodes[0], m);
        d->nnodes = err == DLOCK_OK ? 1 : 0;
        d->db = d->nodes[0].db;
        d->wait_replicas = d->nodes[0].wait_replicas;
        d->wait_timeout_ms = d->nodes[0].wait_timeout_ms;
        return err;
    }
    shared.transport = sc->transport;
    rest = url + strlen(sc->prefix);
    len -= strlen(sc->prefix);
    err = cut_userinfo(&rest, &len, &shared, m);
    if (err == DLOCK_OK)
        err = parse_deployment_rest(rest, len, d, &shared, m);
    d->db = shared.db;
    d->wait_replicas = shared.wait_replicas;
    d->wait_timeout_ms = shared.wait_timeout_ms;
    for (int i = 0; i < d->nnodes && err == DLOCK_OK; i++)
        err = complete_node(d, &d->nodes[i], &shared, m);
    dlock__endpoint_clear(&shared);
    if (err != DLOCK_OK)
        dlock__deployment_clear(d);
    return err;
}

void dlock__deployment_clear(dlock__deployment *d)
{
    for (int i = 0; i < DLOCK__NODES_MAX; i++)
        dlock__endpoint_clear(&d->nodes[i]);
    dlock__free(d->master_name);
    memset(d, 0, sizeof(*d));
}

/* Copies src (may be NULL) into *dst; 0 when out of memory. */
static int copy_string(char **dst, const char *src)
{
    *dst = src != NULL ? dlock__strdup(src) : NULL;
    return src == NULL || *dst != NULL;
}

dlock_err dlock__endpoint_copy(dlock__endpoint *dst,
                               const dlock__endpoint *src, dlock__msg *m)
{
    *dst = *src;
    if (copy_string(&dst->host, src->host)
        && copy_string(&dst->path, src->path)
        && copy_string(&dst->user, src->user)
        && copy_string(&dst->password, src->password))
        return DLOCK_OK;
    /* The pointers not yet copied are still src's: forget them first. */
    if (dst->host == src->host)
        dst->host = NULL;
    if (dst->path == src->path)
        dst->path = NULL;
    if (dst->user == src->user)
        dst->user = NULL;
    if (dst->password == src->password)
        dst->password = NULL;
    dlock__endpoint_clear(dst);
    return dlock__msg_set(m, DLOCK_NOMEM, "copying an endpoint");
}
