/*
 * replwait.c: a write followed by WAIT on the same connection, and the
 * client's options that ask for it (see replwait.h).
 */
#include "transport/replwait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

/* Formats argv and "WAIT replicas timeout_ms" into one buffer (the
 * caller frees it with dlock__free); NULL when out of memory. */
static char *format_both(int argc, const char **argv, const size_t *lens,
                         int replicas, int timeout_ms, size_t *len)
{
    char n[16], t[16], *cmd = NULL, *wait_cmd = NULL, *both = NULL;
    const char *wait_argv[] = {"WAIT", n, t};
    int clen, wlen;

    snprintf(n, sizeof(n), "%d", replicas);
    snprintf(t, sizeof(t), "%d", timeout_ms);
    clen = redisFormatCommandArgv(&cmd, argc, argv, lens);
    wlen = redisFormatCommandArgv(&wait_cmd, 3, wait_argv, NULL);
    if (clen >= 0 && wlen >= 0)
        both = dlock__malloc((size_t)clen + (size_t)wlen);
    if (both != NULL) {
        memcpy(both, cmd, (size_t)clen);
        memcpy(both + clen, wait_cmd, (size_t)wlen);
        *len = (size_t)clen + (size_t)wlen;
    }
    /* hiredis allocates with malloc. */
    free(cmd);
    free(wait_cmd);
    return both;
}

dlock_err dlock__call_with_wait(dlock__conn *conn, int argc, const char **argv,
                                const size_t *lens, int replicas,
                                int timeout_ms, int64_t deadline_us,
                                redisReply **reply, int *acked, dlock__msg *m)
{
    size_t len = 0;
    char *both = format_both(argc, argv, lens, replicas, timeout_ms, &len);
    redisReply *w = NULL;
    dlock_err err;

    *reply = NULL;
    *acked = 0;
    if (both == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "formatting %s with WAIT",
                              argv[0]);
    err = dlock__conn_send(conn, both, len, deadline_us, m);
    dlock__free(both);
    if (err == DLOCK_OK)
        err = dlock__conn_recv(conn, deadline_us, reply, m);
    if (err == DLOCK_OK)
        err = dlock__conn_recv(conn, deadline_us, &w, m);
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
