/*
 * replwait.c: a write followed by WAIT on the same connection, and the
 * client's options that ask for it (see replwait.h).
 */
#include "transport/replwait.h"

#include <stdio.h>

#include "base/alloc.h"

dlock_err dlock__call_with_wait(dlock__conn *conn, int argc, const char **argv,
                                const size_t *lens, int replicas,
                                int timeout_ms, int64_t deadline_us,
                                redisReply **reply, int *acked, dlock__msg *m)
{
    char n[16], t[16];
    const char *wait_argv[] = {"WAIT", n, t};
    size_t len = 0;
    char *both;
    redisReply *w = NULL;
    dlock_err err;

    *reply = NULL;
    *acked = 0;
    snprintf(n, sizeof(n), "%d", replicas);
    snprintf(t, sizeof(t), "%d", timeout_ms);
    both = dlock__resp_format_pair(argc, argv, lens, 3, wait_argv, &len);
    if (both == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "formatting %s with WAIT",
                              argv[0]);
    err = dlock__conn_call_pair(conn, both, len, deadline_us, reply, &w, m);
    dlock__free(both);
    if (err == DLOCK_OK && w->type == REDIS_REPLY_ERROR
        && (*reply)->type == REDIS_REPLY_ERROR) {
        /* The command was refused (READONLY from a demoted master, whose
         * WAIT is refused too): its own answer is the one that tells the
         * caller what happened, and nothing ran for WAIT to count. */
        freeReplyObject(w);
        return DLOCK_OK;
    }
    if (err == DLOCK_OK && w->type != REDIS_REPLY_INTEGER)
        err = dlock__msg_set(m, DLOCK_PROTOCOL,
                             "WAIT %d %d after %s: %s "
                             "instead of a count of replicas",
                             replicas, timeout_ms, argv[0],
                             w->type == REDIS_REPLY_ERROR
                                 ? w->str
                                 : dlock__reply_type_name(w));
    else if (err == DLOCK_OK)
        *acked = (int)w->integer;
    freeReplyObject(w);
    if (err != DLOCK_OK) {
        freeReplyObject(*reply);
        *reply = NULL;
        *acked = 0;
    }
    return err;
}

dlock_err dlock__replwait_opts(dlock_client_opts *o,
                               const dlock__deployment *d, dlock__msg *m)
{
    if (o->wait_replicas == 0)
        o->wait_replicas = d->wait_replicas;
    if (o->wait_timeout_ms == 0)
        o->wait_timeout_ms = d->wait_timeout_ms;
    if (o->wait_timeout_ms == 0)
        o->wait_timeout_ms = DLOCK__WAIT_TIMEOUT_MS;
    if (o->wait_replicas > 0 && d->kind == DLOCK__REDLOCK)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "wait_replicas %d on a Redlock URL: its "
                              "masters are independent and each grant is "
                              "on a majority of them already; use it with "
                              "redis:// or redis+sentinel://",
                              o->wait_replicas);
    return DLOCK_OK;
}

int dlock__replwait_short(const dlock_client_opts *o, int acked)
{
    return o->wait_replicas > 0 && acked < o->wait_replicas;
}
