/*
 * nodeset.c: servers of a multi-server deployment, each with its own pool
 * (see nodeset.h).
 *
 * A server is allocated once and never moved or freed before the set, so
 * a pointer taken under the set's mutex stays valid outside it, and each
 * call holds the set's mutex only to find its server: the round trip runs
 * on a borrowed connection with no lock held, as in client.c.
 */
#include "deploy/nodeset.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"

dlock_err dlock__nodeset_init(dlock__nodeset *ns, const dlock__conn_cfg *cfg,
                              int pool_size, dlock__msg *m)
{
    memset(ns, 0, sizeof(*ns));
    if (pthread_mutex_init(&ns->mu, NULL) != 0)
        return dlock__msg_set(m, DLOCK_SYSTEM,
                              "creating a server set's "
                              "mutex");
    ns->cfg = cfg;
    ns->pool_size = pool_size > 0 ? pool_size : 1;
    return DLOCK_OK;
}

static void node_free(dlock__node *n)
{
    if (n == NULL)
        return;
    dlock__pool_destroy(&n->pool);
    dlock__endpoint_clear(&n->ep);
    dlock__free(n);
}

void dlock__nodeset_destroy(dlock__nodeset *ns)
{
    for (int i = 0; i < ns->count; i++)
        node_free(ns->nodes[i]);
    pthread_mutex_destroy(&ns->mu);
    memset(ns, 0, sizeof(*ns));
}

/* Copies template_ep's shared parts with host and port into a new node. */
static dlock_err node_new(const dlock__endpoint *template_ep, const char *host,
                          int port, int pool_size, dlock__node **out,
                          dlock__msg *m)
{
    dlock__node *n = dlock__calloc(1, sizeof(*n));
    dlock_err err;

    *out = NULL;
    if (n == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "adding server %s:%d", host,
                              port);
    n->ep.transport = template_ep->transport;
    n->ep.port = port;
    n->ep.db = template_ep->db;
    n->ep.host = dlock__strdup(host);
    n->ep.user = template_ep->user ? dlock__strdup(template_ep->user) : NULL;
    n->ep.password = template_ep->password
                         ? dlock__strdup(template_ep->password)
                         : NULL;
    if (n->ep.host == NULL || (template_ep->user != NULL && n->ep.user == NULL)
        || (template_ep->password != NULL && n->ep.password == NULL)) {
        dlock__endpoint_clear(&n->ep);
        dlock__free(n);
        return dlock__msg_set(m, DLOCK_NOMEM, "adding server %s:%d", host,
                              port);
    }
    if (strchr(host, ':') != NULL)
        snprintf(n->ep.desc, sizeof(n->ep.desc), "[%s]:%d", host, port);
    else
        snprintf(n->ep.desc, sizeof(n->ep.desc), "%s:%d", host, port);
    err = dlock__pool_init(&n->pool, pool_size);
    if (err != DLOCK_OK) {
        dlock__endpoint_clear(&n->ep);
        dlock__free(n);
        return dlock__msg_set(m, err, "creating the pool of %s:%d", host,
                              port);
    }
    *out = n;
    return DLOCK_OK;
}

static int node_is(const dlock__node *n, const char *host, int port)
{
    return n->ep.port == port && strcasecmp(n->ep.host, host) == 0;
}

dlock_err dlock__nodeset_add(dlock__nodeset *ns,
                             const dlock__endpoint *template_ep,
                             const char *host, int port, int *index,
                             dlock__msg *m)
{
    dlock__node *n;
    dlock_err err;

    *index = -1;
    pthread_mutex_lock(&ns->mu);
    for (int i = 0; i < ns->count; i++) {
        if (node_is(ns->nodes[i], host, port)) {
            *index = i;
            pthread_mutex_unlock(&ns->mu);
            return DLOCK_OK;
        }
    }
    if (ns->count == DLOCK__NODESET_MAX) {
        pthread_mutex_unlock(&ns->mu);
        return dlock__msg_set(m, DLOCK_INVALID,
                              "more than %d servers in "
                              "one deployment (adding %s:%d)",
                              DLOCK__NODESET_MAX, host, port);
    }
    err = node_new(template_ep, host, port, ns->pool_size, &n, m);
    if (err == DLOCK_OK) {
        *index = ns->count;
        ns->nodes[ns->count++] = n;
    }
    pthread_mutex_unlock(&ns->mu);
    return err;
}

int dlock__nodeset_count(dlock__nodeset *ns)
{
    int count;

    pthread_mutex_lock(&ns->mu);
    count = ns->count;
    pthread_mutex_unlock(&ns->mu);
    return count;
}

static dlock__node *node_at(dlock__nodeset *ns, int i)
{
    dlock__node *n = NULL;

    pthread_mutex_lock(&ns->mu);
    if (i >= 0 && i < ns->count)
        n = ns->nodes[i];
    pthread_mutex_unlock(&ns->mu);
    return n;
}

const dlock__endpoint *dlock__nodeset_endpoint(dlock__nodeset *ns, int i)
{
    dlock__node *n = node_at(ns, i);

    return n != NULL ? &n->ep : NULL;
}

const char *dlock__nodeset_desc(dlock__nodeset *ns, int i)
{
    dlock__node *n = node_at(ns, i);

    return n != NULL ? n->ep.desc : "?";
}

/* Borrows a connection of n, opening one when the pool lends a slot;
 * *reused says whether it had been used before. */
static dlock_err borrow(dlock__nodeset *ns, dlock__node *n,
                        int64_t deadline_us, dlock__conn **conn, int *reused,
                        dlock__msg *m)
{
    dlock_err err = dlock__pool_borrow(&n->pool, deadline_us, conn);

    if (err != DLOCK_OK)
        return dlock__msg_set(m, err, "waiting for a connection to %s",
                              n->ep.desc);
    *reused = *conn != NULL;
    if (*conn != NULL)
        return DLOCK_OK;
    err = dlock__conn_open(&n->ep, ns->cfg, deadline_us, conn, m);
    if (err != DLOCK_OK) {
        dlock__pool_return(&n->pool, NULL);
        /* The other idle connections likely died with the server. */
        dlock__pool_drop_idle(&n->pool);
    }
    return err;
}

dlock_err dlock__nodeset_call(dlock__nodeset *ns, int i, int argc,
                              const char **argv, const size_t *lens,
                              int64_t deadline_us, redisReply **reply,
                              dlock__msg *m)
{
    return dlock__nodeset_call_after(ns, i, NULL, argc, argv, lens,
                                     deadline_us, reply, m);
}

/* Sends first (if not NULL) and the formatted command cmd[0..len) in one
 * write, and reads the first's reply, which must be +OK. */
static dlock_err send_both(dlock__conn *c, const char *desc, const char *first,
                           const char *cmd, size_t len, const char *what,
                           int64_t deadline_us, dlock__msg *m)
{
    size_t flen = first ? strlen(first) : 0;
    char *both;
    redisReply *r;
    dlock_err err;

    if (first == NULL)
        return dlock__conn_send(c, cmd, len, deadline_us, m);
    both = dlock__malloc(flen + len);
    if (both == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "formatting %s for %s", what,
                              desc);
    memcpy(both, first, flen);
    memcpy(both + flen, cmd, len);
    err = dlock__conn_send(c, both, flen + len, deadline_us, m);
    dlock__free(both);
    if (err != DLOCK_OK)
        return err;
    err = dlock__conn_recv(c, deadline_us, &r, m);
    if (err != DLOCK_OK)
        return err;
    if (r->type != REDIS_REPLY_STATUS) {
        err = r->type == REDIS_REPLY_ERROR
                  ? dlock__reply_error(r, "ASKING", desc, m)
                  : dlock__msg_set(m, DLOCK_PROTOCOL,
                                   "ASKING on %s: %s "
                                   "instead of +OK",
                                   desc, dlock__reply_type_name(r));
    }
    freeReplyObject(r);
    return err;
}

dlock_err dlock__nodeset_call_after(dlock__nodeset *ns, int i,
                                    const char *first, int argc,
                                    const char **argv, const size_t *lens,
                                    int64_t deadline_us, redisReply **reply,
                                    dlock__msg *m)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    dlock_err err;

    *reply = NULL;
    if (len < 0)
        return dlock__msg_set(m, DLOCK_NOMEM, "formatting %s for %s", argv[0],
                              dlock__nodeset_desc(ns, i));
    err = dlock__nodeset_call_raw(ns, i, first, cmd, (size_t)len, argv[0],
                                  deadline_us, reply, m);
    free(cmd); /* hiredis allocates with malloc */
    return err;
}

dlock_err dlock__nodeset_call_raw(dlock__nodeset *ns, int i, const char *first,
                                  const char *cmd, size_t len,
                                  const char *what, int64_t deadline_us,
                                  redisReply **reply, dlock__msg *m)
{
    dlock__node *n = node_at(ns, i);
    dlock__conn *c = NULL;
    char raw[64];
    int broken, reused = 0;
    dlock_err err;

    *reply = NULL;
    if (n == NULL)
        return dlock__msg_set(m, DLOCK_INVALID, "no server %d in the set", i);
    if (first != NULL) {
        /* first is one word with no arguments, such as ASKING. */
        snprintf(raw, sizeof(raw), "*1\r\n$%zu\r\n%s\r\n", strlen(first),
                 first);
        first = raw;
    }
    for (int attempt = 0;; attempt++) {
        err = borrow(ns, n, deadline_us, &c, &reused, m);
        if (err != DLOCK_OK)
            return err;
        err = send_both(c, n->ep.desc, first, cmd, len, what, deadline_us, m);
        if (err == DLOCK_OK)
            err = dlock__conn_recv(c, deadline_us, reply, m);
        broken = dlock__conn_broken(c);
        dlock__pool_return(&n->pool, c);
        if (!broken)
            return err;
        /* The other idle connections likely died with this one. */
        dlock__pool_drop_idle(&n->pool);
        /* An idle connection that the server closed (a restart, an idle
         * timeout) gets one more try on a fresh one; a timeout does not,
         * as the server may be merely slow. */
        if (attempt > 0 || !reused || err != DLOCK_UNAVAILABLE)
            return err;
    }
}

int dlock__nodeset_take_idle(dlock__nodeset *ns, int i, dlock__conn **conn)
{
    dlock__node *n = node_at(ns, i);

    *conn = NULL;
    if (n == NULL || dlock__pool_borrow(&n->pool, 0, conn) != DLOCK_OK)
        return 0;
    if (*conn == NULL) {
        /* A free slot, not an idle connection: give it back. */
        dlock__pool_return(&n->pool, NULL);
        return 0;
    }
    return 1;
}

void dlock__nodeset_put(dlock__nodeset *ns, int i, dlock__conn *conn,
                        int discard)
{
    dlock__node *n = node_at(ns, i);

    assert(n != NULL);
    if (discard) {
        dlock__conn_free(conn);
        conn = NULL;
    }
    dlock__pool_return(&n->pool, conn);
}

void dlock__nodeset_drop_idle(dlock__nodeset *ns, int i)
{
    dlock__node *n = node_at(ns, i);

    if (n != NULL)
        dlock__pool_drop_idle(&n->pool);
}

dlock_err dlock__nodeset_connect(dlock__nodeset *ns, int i,
                                 int64_t deadline_us, dlock__conn **out,
                                 dlock__msg *m)
{
    dlock__node *n = node_at(ns, i);

    *out = NULL;
    if (n == NULL)
        return dlock__msg_set(m, DLOCK_INVALID, "no server %d in the set", i);
    return dlock__conn_open(&n->ep, ns->cfg, deadline_us, out, m);
}
