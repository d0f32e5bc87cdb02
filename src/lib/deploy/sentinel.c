/*
 * sentinel.c: master discovery through Redis Sentinel (see sentinel.h).
 *
 * Discovery is a loop over the sentinels, each given its share of the
 * time left so that one that hangs cannot use it all; what a sentinel
 * names is checked with ROLE on a connection of its own, closed again
 * (the caller's pool connects to the endpoint afterwards).  The parsers of
 * ROLE and of +switch-master are pure and unit-tested.
 */
#include "deploy/sentinel.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"

dlock_err dlock__sentinel_init(dlock__sentinel *s, const dlock__deployment *d,
                               const dlock__conn_cfg *cfg, dlock__msg *m)
{
    dlock_err err;
    int index;

    memset(s, 0, sizeof(*s));
    err = dlock__nodeset_init(&s->sentinels, cfg, 1, m);
    for (int i = 0; i < d->nnodes && err == DLOCK_OK; i++)
        err = dlock__nodeset_add(&s->sentinels, &d->nodes[i], d->nodes[i].host,
                                 d->nodes[i].port, &index, m);
    if (err != DLOCK_OK) {
        dlock__nodeset_destroy(&s->sentinels);
        return err;
    }
    snprintf(s->master_name, sizeof(s->master_name), "%s", d->master_name);
    s->master_ep.transport = d->nodes[0].transport;
    s->master_ep.db = d->db;
    s->cfg = cfg;
    return DLOCK_OK;
}

void dlock__sentinel_destroy(dlock__sentinel *s)
{
    dlock__nodeset_destroy(&s->sentinels);
    memset(s, 0, sizeof(*s));
}

int dlock__role_is_master(const redisReply *role)
{
    const redisReply *first;

    if (role == NULL || role->type != REDIS_REPLY_ARRAY || role->elements < 1)
        return 0;
    first = role->element[0];
    return first->type == REDIS_REPLY_STRING && first->len == 6
           && memcmp(first->str, "master", 6) == 0;
}

/* Cuts the next space-separated word of *p (up to end). */
static size_t next_word(const char **p, const char *end, const char **word)
{
    const char *s = *p, *e;

    while (s < end && *s == ' ')
        s++;
    e = s;
    while (e < end && *e != ' ')
        e++;
    *word = s;
    *p = e;
    return (size_t)(e - s);
}

int dlock__sentinel_parse_switch(const char *payload, size_t len,
                                 const char *name, char host[256], int *port)
{
    const char *p = payload, *end = payload + len, *w[5];
    size_t wl[5];
    char *stop;
    char num[8];
    long value;

    for (int i = 0; i < 5; i++) {
        wl[i] = next_word(&p, end, &w[i]);
        if (wl[i] == 0)
            return 0;
    }
    if (p != end || wl[0] != strlen(name) || memcmp(w[0], name, wl[0]) != 0
        || wl[3] >= 256 || wl[4] >= sizeof(num))
        return 0;
    memcpy(num, w[4], wl[4]);
    num[wl[4]] = '\0';
    value = strtol(num, &stop, 10);
    if (*stop != '\0' || value < 1 || value > 65535)
        return 0;
    memcpy(host, w[3], wl[3]);
    host[wl[3]] = '\0';
    *port = (int)value;
    return 1;
}

/* Sentinel i's answer for the master's address. */
static dlock_err ask_sentinel(dlock__sentinel *s, int i, int64_t deadline_us,
                              char host[256], int *port, dlock__msg *m)
{
    const char *argv[] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                          s->master_name};
    const char *desc = dlock__nodeset_desc(&s->sentinels, i);
    redisReply *r;
    dlock_err err;

    err = dlock__nodeset_call(&s->sentinels, i, 3, argv, NULL, deadline_us, &r,
                              m);
    if (err != DLOCK_OK)
        return err;
    if (r->type == REDIS_REPLY_ERROR) {
        err = dlock__reply_error(r, "SENTINEL GET-MASTER-ADDR-BY-NAME", desc,
                                 m);
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements != 2
               || r->element[0]->type != REDIS_REPLY_STRING
               || r->element[0]->len >= 256
               || r->element[1]->type != REDIS_REPLY_STRING
               || (*port = atoi(r->element[1]->str)) < 1 || *port > 65535) {
        err = dlock__msg_set(m, DLOCK_UNAVAILABLE,
                             "sentinel %s does not "
                             "know master \"%s\" (%s)",
                             desc, s->master_name, dlock__reply_type_name(r));
    } else {
        memcpy(host, r->element[0]->str, r->element[0]->len);
        host[r->element[0]->len] = '\0';
    }
    freeReplyObject(r);
    return err;
}

/* Fills ep as the master at host:port, from the template. */
static dlock_err master_endpoint(const dlock__sentinel *s, const char *host,
                                 int port, dlock__endpoint *ep, dlock__msg *m)
{
    const dlock__endpoint *t = &s->master_ep;

    memset(ep, 0, sizeof(*ep));
    ep->transport = t->transport;
    ep->db = t->db;
    ep->port = port;
    ep->host = dlock__strdup(host);
    if (ep->host == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "copying the master's host");
    snprintf(ep->desc, sizeof(ep->desc),
             strchr(host, ':') != NULL ? "[%s]:%d" : "%s:%d", host, port);
    return DLOCK_OK;
}

/* Connects to ep and checks with ROLE that it is a master. */
static dlock_err verify_master(dlock__sentinel *s, const dlock__endpoint *ep,
                               int64_t deadline_us, dlock__msg *m)
{
    const char *argv[] = {"ROLE"};
    dlock__conn *c;
    redisReply *r;
    dlock_err err;

    err = dlock__conn_open(ep, s->cfg, deadline_us, &c, m);
    if (err != DLOCK_OK)
        return err;
    err = dlock__conn_call(c, 1, argv, NULL, deadline_us, &r, m);
    dlock__conn_free(c);
    if (err != DLOCK_OK)
        return err;
    if (!dlock__role_is_master(r))
        err = dlock__msg_set(m, DLOCK_UNAVAILABLE,
                             "%s, named master by "
                             "the sentinels, is not a master (ROLE: %s)",
                             ep->desc,
                             r->type == REDIS_REPLY_ARRAY && r->elements
                                     && r->element[0]->type
                                            == REDIS_REPLY_STRING
                                 ? r->element[0]->str
                                 : dlock__reply_type_name(r));
    freeReplyObject(r);
    return err;
}

/* One sentinel's turn: its answer, checked. */
static dlock_err try_sentinel(dlock__sentinel *s, int i, int64_t deadline_us,
                              dlock__endpoint *master, dlock__msg *m)
{
    char host[256];
    int port = 0;
    dlock_err err;

    err = ask_sentinel(s, i, deadline_us, host, &port, m);
    if (err != DLOCK_OK)
        return err;
    err = master_endpoint(s, host, port, master, m);
    if (err == DLOCK_OK)
        err = verify_master(s, master, deadline_us, m);
    if (err != DLOCK_OK)
        dlock__endpoint_clear(master);
    return err;
}

dlock_err dlock__sentinel_discover(dlock__sentinel *s, int64_t deadline_us,
                                   dlock__endpoint *master, dlock__msg *m)
{
    const int count = dlock__nodeset_count(&s->sentinels);
    dlock_err err = DLOCK_UNAVAILABLE;
    dlock__msg last;

    memset(master, 0, sizeof(*master));
    dlock__msg_clear(&last);
    for (int i = 0; i < count; i++) {
        int64_t now = dlock__now_us(), left = deadline_us - now;
        int64_t share = left / (count - i);

        if (left <= 0)
            break;
        err = try_sentinel(s, i, now + (share < 50000 ? left : share), master,
                           &last);
        /* A refused password or an exhausted heap will not get better at
         * the next sentinel. */
        if (err == DLOCK_OK || err == DLOCK_NOMEM || err == DLOCK_AUTH)
            break;
    }
    if (err == DLOCK_OK)
        return DLOCK_OK;
    if (m != NULL)
        *m = last;
    return dlock__msg_wrap(
        m, err == DLOCK_AUTH || err == DLOCK_NOMEM ? err : DLOCK_UNAVAILABLE,
        "finding master \"%s\" through %d sentinels", s->master_name, count);
}

dlock_err dlock__sentinel_subscribe(dlock__sentinel *s, int64_t deadline_us,
                                    dlock__conn **out, dlock__msg *m)
{
    const char *argv[] = {"SUBSCRIBE", "+switch-master"};
    const int count = dlock__nodeset_count(&s->sentinels);
    dlock_err err = DLOCK_UNAVAILABLE;

    *out = NULL;
    for (int i = 0; i < count; i++) {
        redisReply *r;

        err = dlock__nodeset_connect(&s->sentinels, i, deadline_us, out, m);
        if (err != DLOCK_OK)
            continue;
        err = dlock__conn_call(*out, 2, argv, NULL, deadline_us, &r, m);
        if (err == DLOCK_OK
            && (r->type != REDIS_REPLY_ARRAY || r->elements != 3)) {
            err = dlock__msg_set(m, DLOCK_PROTOCOL, "SUBSCRIBE on %s: %s",
                                 dlock__nodeset_desc(&s->sentinels, i),
                                 dlock__reply_type_name(r));
        }
        freeReplyObject(r);
        if (err == DLOCK_OK)
            return DLOCK_OK;
        dlock__conn_free(*out);
        *out = NULL;
    }
    return dlock__msg_wrap(m, err,
                           "subscribing to +switch-master on %d "
                           "sentinels",
                           count);
}

/* Waits until sub has bytes to read or deadline_us passes, without
 * breaking the connection as a timed-out read would (conn.h). */
static int readable(dlock__conn *sub, int64_t deadline_us)
{
    struct pollfd p = {.fd = dlock__conn_fd(sub), .events = POLLIN};

    if (dlock__conn_buffered(sub))
        return 1;
    return poll(&p, 1, dlock__ms_left(deadline_us)) > 0;
}

dlock_err dlock__sentinel_next_switch(dlock__sentinel *s, dlock__conn *sub,
                                      int64_t deadline_us, char host[256],
                                      int *port, dlock__msg *m)
{
    for (;;) {
        redisReply *r;
        dlock_err err;
        int found;

        if (!readable(sub, deadline_us))
            return dlock__msg_set(m, DLOCK_TIMEOUT,
                                  "no +switch-master for "
                                  "\"%s\"",
                                  s->master_name);
        err = dlock__conn_recv(sub, 0, &r, m);
        if (err != DLOCK_OK)
            return err;
        if (r == NULL)
            continue;
        found = r->type == REDIS_REPLY_ARRAY && r->elements == 3
                && r->element[2]->type == REDIS_REPLY_STRING
                && dlock__sentinel_parse_switch(r->element[2]->str,
                                                r->element[2]->len,
                                                s->master_name, host, port);
        freeReplyObject(r);
        if (found)
            return DLOCK_OK;
    }
}
