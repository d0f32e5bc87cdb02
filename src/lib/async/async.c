/*
 * async.c: the non-blocking lock handle (see dlock/async.h).
 *
 * A dlock_async is one connection and one list of operations (ops) in
 * send order.  Submitting an op begins its request (for an acquire or an
 * extend, the lease ticket: lock.c's dlock__lock_acquire_prepare and
 * dlock__lock_extend_prepare, so validity counts from before the write)
 * and appends its RESP bytes to the write buffer.  dlock_async_process
 * writes as much of the buffer as the socket takes in one send, reads
 * every reply there is and completes ops from the head of the list, one
 * reply each (writing what their callbacks queued a few times a batch,
 * EARLY_FLUSH_PARTS), then fails the head if its deadline has passed.  What a
 * reply means is lock.c's (dlock__lock_acquire_finish,
 * dlock__lock_release_reply and _end, dlock__lock_extend_finish), the
 * same code the blocking calls run, so the two APIs cannot disagree
 * about a grant.
 *
 * Invariants:
 *   - replies match ops strictly in order: the list is appended in the
 *     order bytes enter the buffer, the buffer is written in order, and
 *     each reply completes the head;
 *   - an op is "sent" once any of its bytes reached the socket (written
 *     counts every byte ever written, op->start is the offset of its
 *     first): a sent op without an answer may have run, and is never
 *     reported as not run or sent again; the one exception is an answer
 *     of NOSCRIPT, which proves the script did not run: the op then goes
 *     to the tail once more as EVAL with the script's body (resend);
 *   - deadlines are queue time plus the client's io_timeout_ms, so the
 *     head's is the earliest;
 *   - the connection is OPEN (conn set) or CLOSED (conn NULL, list and
 *     buffer empty).  Closing detaches the whole list first, then runs
 *     its callbacks, so a callback that submits sees a closed handle and
 *     no callback sees a list being walked.
 *
 * A sent op that ends without an answer (timeout, dead connection, the
 * handle freed) leaves its token to the watchdog's background release
 * (dlock__lock_leave_no_orphan), as a blocking acquire that timed out
 * does: whatever ran unseen is undone, and nothing is claimed held.
 *
 * A Sentinel master that answers READONLY or MASTERDOWN was demoted (a
 * failover): that op did not run, and every op behind it went to a
 * replica.  The handle closes as after a dead connection, and the
 * deployment is told to look for the master again, so that
 * dlock_async_reconnect reaches the new one (demoted).  A release or
 * extend answered 0 (the key does not hold its token) on a Sentinel
 * handle is held until a ROLE queued behind it says the server is still
 * a master (role_check): a demoted one answers those scripts from its
 * copy, and a DLOCK_LOST from there would claim what nobody knows.
 */
#include "dlock/async.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/breaker.h"
#include "base/clock.h"
#include "base/msg.h"
#include "client/client_internal.h"
#include "deploy/deploy.h"
#include "lock/lock_internal.h"
#include "transport/conn.h"

/* OP_ROLE: a ROLE the handle queued itself, to learn whether the server
 * that answered the ops it holds is still a master (role_check). */
typedef enum op_kind { OP_ACQUIRE, OP_RELEASE, OP_EXTEND, OP_ROLE } op_kind;

/* One acquire, release or extend in flight (the handle's, until
 * completed). */
typedef struct op {
    struct op *next;
    op_kind kind;
    dlock_lock *lock;
    int64_t deadline_us; /* monotonic */
    uint64_t start;      /* its first byte's offset in the write stream */
    void *arg;
    dlock_async_acquire_fn on_acquired;
    dlock_async_release_fn on_released;
    dlock_async_extend_fn on_extended;
    int watchdog;               /* acquire: opts.watchdog */
    int64_t started_us;         /* acquire: for the busy message */
    dlock__acquire_req req;     /* acquire: the request's lease ticket */
    int expired;                /* release: validity had run out at submit */
    int64_t ttl_ms;             /* extend: the TTL asked for */
    dlock__lease_ticket ticket; /* extend: the request's lease ticket */
    /* The command, kept to send it again as EVAL after NOSCRIPT (which
     * proves it did not run): its script, key count and arguments, which
     * point into the lock, req, or buf. */
    const dlock__script *script;
    const char *sha; /* the handle's, "" for none */
    const char *nkeys;
    int nargs;
    const char *args[9];
    char buf[24]; /* release: its id; extend: its TTL */
    int resent;   /* sent again after NOSCRIPT (once at most) */
    /* A release or extend answered 0, held until a ROLE says whether that
     * came from a master: its answer, and the next op the ROLE holds. */
    redisReply *answer;
    struct op *held_next;
    struct op *held; /* OP_ROLE: the ops it holds */
} op;

struct dlock_async {
    dlock_client *client;
    dlock__conn *conn; /* NULL while closed */
    int64_t io_timeout_ms;
    char sha_acquire[41];
    char sha_release[41];
    char sha_extend[41];
    int use_eval; /* the server lost its script cache: send bodies */
    int freeing;
    int pending;
    op *head, *tail;
    /* The write buffer: bytes [wbase, wbase + wlen) of the stream, of
     * which written - wbase are written. */
    char *wbuf;
    size_t wlen, wcap;
    uint64_t wbase, written;
    dlock__msg msg;  /* the last failure, and each callback's message */
    dlock__msg base; /* why the connection closed, for each op it fails */
};

/* ---- the connection ---------------------------------------------------- */

/* SCRIPT LOAD of s on conn (a new handle's first round trip). */
static dlock_err load_script(dlock_async *a, dlock__conn *conn,
                             const dlock__script *s, dlock__msg *m)
{
    const char *argv[] = {"SCRIPT", "LOAD", s->body};
    int64_t deadline = dlock__deadline_after_ms(a->io_timeout_ms);
    redisReply *r = NULL;
    dlock_err err = dlock__conn_call(conn, 3, argv, NULL, deadline, &r, m);

    if (err != DLOCK_OK)
        return dlock__msg_wrap(m, err, "loading script %s", s->name);
    if (r->type == REDIS_REPLY_ERROR)
        err = dlock__reply_error(r, "SCRIPT LOAD", dlock__conn_desc(conn), m);
    else if (r->type != REDIS_REPLY_STRING || r->len != 40)
        err = dlock__msg_set(m, DLOCK_PROTOCOL,
                             "SCRIPT LOAD %s on %s: expected a 40-digit SHA, "
                             "got %s",
                             s->name, dlock__conn_desc(conn),
                             dlock__reply_type_name(r));
    freeReplyObject(r);
    return err;
}

/* Opens the handle's connection (to the master, for Sentinel) and loads
 * the two scripts on it. */
static dlock_err open_conn(dlock_async *a, dlock__msg *m)
{
    dlock__conn *conn = NULL;
    dlock_err err;

    if (!dlock__breaker_allows(dlock__client_breaker(a->client)))
        return dlock__msg_set(m, DLOCK_UNAVAILABLE,
                              "async handle on %s: the client's circuit "
                              "breaker is open",
                              dlock_client_endpoint(a->client));
    err = dlock__client_connect(a->client, &conn, m);
    if (err != DLOCK_OK) {
        if (err != DLOCK_NOMEM && err != DLOCK_INVALID)
            dlock__client_transport_failed(a->client, m);
        return dlock__msg_wrap(m, err, "async handle");
    }
    if (dlock__conn_tls(conn)) {
        dlock__conn_free(conn);
        return dlock__msg_set(m, DLOCK_INVALID,
                              "async handle on %s: TLS connections are not "
                              "served (dlock/async.h)",
                              dlock_client_endpoint(a->client));
    }
    err = load_script(a, conn, dlock__lock_acquire_script(), m);
    if (err == DLOCK_OK)
        err = load_script(a, conn, dlock__lock_release_script(), m);
    if (err == DLOCK_OK)
        err = load_script(a, conn, dlock__lock_extend_script(), m);
    if (err != DLOCK_OK) {
        dlock__conn_free(conn);
        return err;
    }
    dlock__client_transport_ok(a->client);
    a->conn = conn;
    a->use_eval = 0;
    return DLOCK_OK;
}

/* ---- completing ops ---------------------------------------------------- */

/* An error reply turned into a code (the script did not run to its end),
 * as dlock__client_eval does; r is freed. */
static dlock_err error_reply(dlock_async *a, op *o, redisReply *r)
{
    dlock_err err = dlock__reply_error(r,
                                       o->kind == OP_ACQUIRE ? "script acquire"
                                       : o->kind == OP_RELEASE
                                           ? "script release"
                                           : "script extend",
                                       dlock_client_endpoint(a->client),
                                       &a->msg);
    freeReplyObject(r);
    return err;
}

/* Completes an acquire with err (no reply: r NULL) or its reply r. */
static void finish_acquire(dlock_async *a, op *o, dlock_err err, redisReply *r,
                           int sent)
{
    dlock_acquire_opts opts;
    dlock_lock *l = o->lock;
    int64_t holder_ttl_ms = 0;
    int answered = r != NULL;

    if (r != NULL && r->type == REDIS_REPLY_ERROR) {
        err = error_reply(a, o, r);
        r = NULL;
    }
    err = dlock__lock_acquire_finish(l, &o->req, err, r, 0, 0, &holder_ttl_ms,
                                     &a->msg);
    if (err == DLOCK_OK) {
        dlock_acquire_opts_init(&opts);
        opts.watchdog = o->watchdog;
        err = dlock__lock_held(l, &opts, &a->msg);
    } else if (err == DLOCK_BUSY) {
        dlock__lock_busy_message(l, holder_ttl_ms, o->started_us, &a->msg);
    } else if (!answered && sent) {
        dlock__lock_leave_no_orphan(l); /* it may have run */
    }
    if (err != DLOCK_OK) {
        dlock_lock_free(l);
        l = NULL;
    } else {
        dlock__msg_clear(&a->msg);
    }
    o->on_acquired(a, err, l, a->msg.text, o->arg);
}

/* Completes a release with err (no reply: r NULL) or its reply r. */
static void finish_release(dlock_async *a, op *o, dlock_err err, redisReply *r)
{
    dlock_lock *l = o->lock;

    if (r != NULL && r->type == REDIS_REPLY_ERROR) {
        err = error_reply(a, o, r);
        r = NULL;
    }
    /* Unanswered, the token may still hold the key: undone in the
     * background (release_end does it itself after a timeout). */
    if (r == NULL && err != DLOCK_TIMEOUT)
        dlock__lock_leave_no_orphan(l);
    err = dlock__lock_release_reply(l, err, r, 0, &a->msg);
    err = dlock__lock_release_end(l, o->expired, err, &a->msg);
    dlock_lock_free(l);
    if (err == DLOCK_OK)
        dlock__msg_clear(&a->msg);
    o->on_released(a, err, a->msg.text, o->arg);
}

/* Completes an extend with err (no reply: r NULL) or its reply r; the
 * lock stays the caller's. */
static void finish_extend(dlock_async *a, op *o, dlock_err err, redisReply *r)
{
    if (r != NULL && r->type == REDIS_REPLY_ERROR) {
        err = error_reply(a, o, r);
        r = NULL;
    }
    err = dlock__lock_extend_finish(o->lock, &o->ticket, o->ttl_ms, err, r,
                                    &a->msg);
    if (err == DLOCK_OK)
        dlock__msg_clear(&a->msg);
    o->on_extended(a, err, o->lock, a->msg.text, o->arg);
}

static void finish(dlock_async *a, op *o, dlock_err err, redisReply *r,
                   int sent)
{
    if (o->kind == OP_ROLE) {
        /* Unanswered (the connection closed): the ops it holds are as
         * unknown as any sent op, whatever they were answered. */
        while (o->held != NULL) {
            op *h = o->held;

            o->held = h->held_next;
            freeReplyObject(h->answer);
            h->answer = NULL;
            finish(a, h, err, NULL, 1);
        }
        freeReplyObject(r);
        dlock__free(o);
        return;
    }
    a->pending--;
    if (o->kind == OP_ACQUIRE)
        finish_acquire(a, o, err, r, sent);
    else if (o->kind == OP_RELEASE)
        finish_release(a, o, err, r);
    else
        finish_extend(a, o, err, r);
    dlock__free(o);
}

/*
 * Closes the connection and completes every op: the sent ones with
 * sent_err (they may have run), the others with unsent_err (they never
 * left), each with a->base's text as its message.  Counts one failure in
 * the breaker unless the handle is being freed.
 */
static void close_all(dlock_async *a, dlock_err sent_err, dlock_err unsent_err)
{
    op *o = a->head;
    uint64_t written = a->written;

    a->head = a->tail = NULL;
    if (a->conn != NULL) {
        if (!a->freeing)
            dlock__client_transport_failed(a->client, &a->base);
        dlock__conn_free(a->conn);
        a->conn = NULL;
    }
    a->wlen = 0;
    a->wbase = a->written;
    while (o != NULL) {
        op *next = o->next;
        int sent = o->start < written;

        a->msg = a->base;
        finish(a, o, sent ? sent_err : unsent_err, NULL, sent);
        o = next;
    }
}

/*
 * o, taken off the head, was answered READONLY or MASTERDOWN by the
 * Sentinel master: the server was demoted (a failover), so o did not run,
 * and every command behind it went to the same replica.  The handle
 * closes as for a broken connection (one failure in the breaker; a sent
 * command behind o may have run, for all the handle knows), o first and
 * as not run, which its answer proves.  The deployment forgets the
 * master, so dlock_async_reconnect finds the new one through the
 * sentinels, as the blocking client does before it sends again
 * (client.c, run_command).  r is freed.
 */
static dlock_err demoted(dlock_async *a, op *o, redisReply *r)
{
    const int shown = r->len > 120 ? 120 : (int)r->len;

    dlock__msg_set(&a->base, DLOCK_UNAVAILABLE,
                   "%s answered \"%.*s\": no longer a writable master (a "
                   "failover?); connection closed, dlock_async_reconnect "
                   "finds the master through the sentinels",
                   dlock__conn_desc(a->conn), shown, r->str);
    freeReplyObject(r);
    dlock__deploy_master_failed(dlock__client_deploy(a->client));
    o->start = a->written; /* answered, not run: as if never sent */
    o->next = a->head;
    a->head = o;
    if (a->tail == NULL)
        a->tail = o;
    close_all(a, DLOCK_UNAVAILABLE, DLOCK_UNAVAILABLE);
    return DLOCK_UNAVAILABLE;
}

/* ---- writing ----------------------------------------------------------- */

/* Appends one command to the write buffer; DLOCK_NOMEM if it cannot. */
static dlock_err append_command(dlock_async *a, int argc, const char **argv,
                                const size_t *lens)
{
    size_t room = a->wcap - a->wlen;
    size_t n = dlock__resp_format(a->wbuf + a->wlen, room, argc, argv, lens);

    if (n > room) {
        size_t cap = a->wcap * 2 > a->wlen + n ? a->wcap * 2 : a->wlen + n;
        char *b = dlock__realloc(a->wbuf, cap);

        if (b == NULL)
            return dlock__msg_set(&a->msg, DLOCK_NOMEM,
                                  "buffering a command for %s",
                                  dlock_client_endpoint(a->client));
        a->wbuf = b;
        a->wcap = cap;
        n = dlock__resp_format(a->wbuf + a->wlen, cap - a->wlen, argc, argv,
                               lens);
    }
    a->wlen += n;
    return DLOCK_OK;
}

/* Writes what the socket takes of the buffer, in one send. */
static dlock_err flush(dlock_async *a)
{
    size_t off = (size_t)(a->written - a->wbase), sent = 0;
    dlock_err err;

    if (a->conn == NULL || off == a->wlen)
        return DLOCK_OK;
    err = dlock__conn_send_some(a->conn, a->wbuf + off, a->wlen - off, &sent,
                                &a->base);
    if (err != DLOCK_OK) {
        close_all(a, err, DLOCK_UNAVAILABLE);
        return err;
    }
    a->written += sent;
    if (a->written - a->wbase == a->wlen) {
        a->wbase = a->written;
        a->wlen = 0;
    }
    return DLOCK_OK;
}

/* A new op of kind for lock, or NULL with a->msg saying why. */
static op *op_new(dlock_async *a, op_kind kind, dlock_lock *lock, void *arg)
{
    op *o = dlock__calloc(1, sizeof(*o));

    if (o == NULL) {
        dlock__msg_set(&a->msg, DLOCK_NOMEM, "queueing %s of %.64s",
                       kind == OP_ACQUIRE   ? "acquire"
                       : kind == OP_RELEASE ? "release"
                                            : "extend",
                       dlock_lock_key(lock));
        return NULL;
    }
    o->kind = kind;
    o->lock = lock;
    o->arg = arg;
    return o;
}

/* Appends o's command (EVALSHA of its script, or EVAL of the body when
 * there is no SHA or the server lost its scripts) to the write buffer and
 * o to the tail of the list, with a deadline from now. */
static dlock_err enqueue(dlock_async *a, op *o)
{
    const char *argv[3 + sizeof(o->args) / sizeof(*o->args)];
    const int eval = a->use_eval || o->sha[0] == '\0';
    dlock_err err;

    argv[0] = eval ? "EVAL" : "EVALSHA";
    argv[1] = eval ? o->script->body : o->sha;
    argv[2] = o->nkeys;
    memcpy(&argv[3], o->args, (size_t)o->nargs * sizeof(*o->args));
    o->start = a->wbase + a->wlen;
    err = append_command(a, o->nargs + 3, argv, NULL);
    if (err != DLOCK_OK)
        return err;
    o->deadline_us = dlock__deadline_after_ms(a->io_timeout_ms);
    o->next = NULL;
    if (a->tail != NULL)
        a->tail->next = o;
    else
        a->head = o;
    a->tail = o;
    return DLOCK_OK;
}

/*
 * o, a release or extend of a Sentinel handle taken off the head, was
 * answered r, 0: the key does not hold its token.  A master demoted by a
 * failover that still answers says that from its replica's copy (the
 * scripts write only once they find the token, so it never answers
 * READONLY to them), and only the server's role tells the two apart: o
 * is held with r until a ROLE, queued behind it now (or already queued:
 * every op behind o is answered after it), is answered (role_answer).
 * Only on that answer, so no other path pays a round trip.
 */
static dlock_err role_check(dlock_async *a, op *o, redisReply *r)
{
    const char *argv[] = {"ROLE"};
    op *role = a->head;
    dlock_err err;

    while (role != NULL && role->kind != OP_ROLE)
        role = role->next;
    if (role == NULL) {
        role = dlock__calloc(1, sizeof(*role));
        if (role == NULL) {
            freeReplyObject(r);
            dlock__msg_set(&a->msg, DLOCK_NOMEM,
                           "queueing ROLE after %.64s's answer",
                           dlock_lock_key(o->lock));
            finish(a, o, DLOCK_NOMEM, NULL, 1);
            return DLOCK_OK;
        }
        role->kind = OP_ROLE;
        role->start = a->wbase + a->wlen;
        err = append_command(a, 1, argv, NULL);
        if (err != DLOCK_OK) {
            dlock__free(role);
            freeReplyObject(r);
            finish(a, o, err, NULL, 1);
            return DLOCK_OK;
        }
        role->deadline_us = dlock__deadline_after_ms(a->io_timeout_ms);
        if (a->tail != NULL)
            a->tail->next = role;
        else
            a->head = role;
        a->tail = role;
    }
    o->answer = r;
    o->held_next = role->held;
    role->held = o;
    return flush(a);
}

/*
 * The ROLE that role_check queued is answered r.  From a master, the ops
 * it holds complete with their answers (the lock is gone: DLOCK_LOST).
 * From anything else the master was demoted: they fail with
 * DLOCK_UNAVAILABLE (what became of each lock is not known; a release's
 * token goes to the background release, which follows the master), and
 * the handle closes as in demoted(), so that dlock_async_reconnect finds
 * the new master through the sentinels.  r is freed.
 */
static dlock_err role_answer(dlock_async *a, op *role, redisReply *r)
{
    if (dlock__role_is_master(r)) {
        freeReplyObject(r);
        while (role->held != NULL) {
            op *h = role->held;

            role->held = h->held_next;
            finish(a, h, DLOCK_OK, h->answer, 1);
        }
        dlock__free(role);
        return DLOCK_OK;
    }
    dlock__msg_set(&a->base, DLOCK_UNAVAILABLE,
                   "%s answered that a key does not hold its token, and is "
                   "no longer a writable master (a failover?): it answered "
                   "from a replica's copy, so the lock is not known to be "
                   "lost; connection closed, dlock_async_reconnect finds the "
                   "master through the sentinels",
                   dlock__conn_desc(a->conn));
    freeReplyObject(r);
    dlock__deploy_master_failed(dlock__client_deploy(a->client));
    role->next = a->head; /* close_all fails the ops it holds */
    a->head = role;
    if (a->tail == NULL)
        a->tail = role;
    close_all(a, DLOCK_UNAVAILABLE, DLOCK_UNAVAILABLE);
    return DLOCK_UNAVAILABLE;
}

/* Queues o (its args set) as script s with nkeys of its nargs arguments. */
static dlock_err queue_script(dlock_async *a, op *o, const dlock__script *s,
                              const char *sha, const char *nkeys, int nargs)
{
    dlock_err err;

    o->script = s;
    o->sha = sha;
    o->nkeys = nkeys;
    o->nargs = nargs;
    err = enqueue(a, o);
    if (err == DLOCK_OK)
        a->pending++;
    return err;
}

/*
 * o, just answered NOSCRIPT (the server lost its script cache: the script
 * did not run), goes to the tail again as EVAL with its body (use_eval is
 * set), at most once, with a new deadline (it is queued again now, and
 * deadlines must grow along the list: expire looks at the head only) but
 * its lease ticket, which began before the first send, so validity still
 * counts from then.  The blocking path re-asks the same way (client.c).
 * DLOCK_NOMEM if it cannot be buffered.
 */
static dlock_err resend(dlock_async *a, op *o)
{
    o->resent = 1;
    return enqueue(a, o);
}

/* 1 if r is a NOSCRIPT error that o may be sent again for. */
static int noscript(const op *o, const redisReply *r)
{
    return !o->resent && r->type == REDIS_REPLY_ERROR && r->len >= 8
           && memcmp(r->str, "NOSCRIPT", 8) == 0;
}

/* ---- reading and deadlines --------------------------------------------- */

/*
 * Replies come in batches (the server answers all it read at once), and
 * each completion usually queues the caller's next command.  Writing what
 * is queued a few times while a batch is completed, rather than after the
 * whole batch, lets the server start on those while the rest of the batch
 * is completed here, so the two CPUs of a small machine work at once
 * rather than in turn.  A pass writes every 1/EARLY_FLUSH_PARTS of the ops
 * that were in flight when it began, and never more often than every
 * EARLY_FLUSH_MIN completions (each write costs a system call here and
 * wakes the server).  Measured on one handle (2 CPUs, docs/benchmarks.md,
 * "Session 14: callers on an event loop"): at 8 callers, 24-27k pairs/s
 * with a write every 8 (or 3 or 4, or only after the first completion),
 * 36-40k with a write every 2; at 32 callers, 43k pairs/s with one write
 * per batch, 57-60k with a write every 8, and on a loaded machine a write
 * every 2 lost a tenth of that.
 */
#define EARLY_FLUSH_PARTS 4
#define EARLY_FLUSH_MIN 2

/* Completes the ops whose replies have come; DLOCK_OK or the failure
 * that closed the connection. */
static dlock_err read_replies(dlock_async *a)
{
    int got = 0;
    int every = a->pending / EARLY_FLUSH_PARTS;

    if (every < EARLY_FLUSH_MIN)
        every = EARLY_FLUSH_MIN;

    while (a->conn != NULL) {
        redisReply *r = NULL;
        dlock_err err = dlock__conn_recv(a->conn, 0, &r, &a->base);
        op *o;

        if (err != DLOCK_OK) {
            close_all(a, err, DLOCK_UNAVAILABLE);
            return err;
        }
        if (r == NULL)
            break;
        o = a->head;
        if (o == NULL || o->start >= a->written) {
            freeReplyObject(r);
            err = dlock__msg_set(&a->base, DLOCK_PROTOCOL,
                                 "a reply from %s that no command asked for",
                                 dlock_client_endpoint(a->client));
            close_all(a, err, DLOCK_UNAVAILABLE);
            return err;
        }
        a->head = o->next;
        if (a->head == NULL)
            a->tail = NULL;
        if (o->kind == OP_ROLE) {
            err = role_answer(a, o, r);
            if (err != DLOCK_OK)
                return err;
            continue;
        }
        if (dlock__client_deploy(a->client) != NULL
            && dlock__deploy_is_readonly(r))
            return demoted(a, o, r);
        if (dlock__client_deploy(a->client) != NULL && o->kind != OP_ACQUIRE
            && r->type == REDIS_REPLY_INTEGER && r->integer == 0) {
            err = role_check(a, o, r);
            if (err != DLOCK_OK)
                return err;
            continue;
        }
        if (noscript(o, r)) {
            a->use_eval = 1; /* the next commands carry the bodies */
            freeReplyObject(r);
            if (resend(a, o) == DLOCK_OK)
                continue;
            r = NULL; /* not buffered: it fails, not run */
            finish(a, o, DLOCK_NOMEM, NULL, 0);
            continue;
        }
        finish(a, o, DLOCK_OK, r, 1);
        if (++got % every == 0) {
            err = flush(a);
            if (err != DLOCK_OK)
                return err;
        }
    }
    if (got)
        dlock__client_transport_ok(a->client);
    return DLOCK_OK;
}

/* Fails everything when the head's deadline has passed. */
static dlock_err expire(dlock_async *a)
{
    op *o = a->head;

    if (o == NULL || dlock__now_us() < o->deadline_us)
        return DLOCK_OK;
    dlock__msg_set(&a->base, DLOCK_TIMEOUT,
                   "no reply from %s within %lld ms; connection closed",
                   dlock_client_endpoint(a->client),
                   (long long)a->io_timeout_ms);
    close_all(a, DLOCK_TIMEOUT, DLOCK_UNAVAILABLE);
    return DLOCK_TIMEOUT;
}

/* ---- the public calls -------------------------------------------------- */

/* Why a client cannot have a handle, or DLOCK_OK. */
static dlock_err refuse_client(dlock_client *c, dlock__msg *m)
{
    const char *why = NULL;

    if (dlock__client_redlock(c) != NULL)
        why = "Redlock (redlock://) is not served";
    else if (dlock__client_is_cluster(c))
        why = "Redis Cluster (redis+cluster://) is not served";
    else if (dlock__client_opts(c)->wait_replicas > 0)
        why = "wait_replicas is not served (a grant's WAIT would hold up "
              "every command behind it)";
    if (why == NULL)
        return DLOCK_OK;
    return dlock__msg_set(m, DLOCK_INVALID,
                          "async handle on %s: %s "
                          "(dlock/async.h)",
                          dlock_client_endpoint(c), why);
}

dlock_err dlock_async_new(dlock_client *c, dlock_async **out)
{
    dlock_async *a;
    dlock__msg *m;
    dlock_err err;

    if (out == NULL || c == NULL)
        return DLOCK_INVALID;
    *out = NULL;
    m = dlock__client_begin(c);
    err = refuse_client(c, m);
    if (err != DLOCK_OK)
        return err;
    a = dlock__calloc(1, sizeof(*a));
    if (a == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "allocating an async handle");
    a->client = c;
    a->io_timeout_ms = dlock__client_opts(c)->io_timeout_ms;
    dlock__client_script_sha(c, dlock__lock_acquire_script(), a->sha_acquire);
    dlock__client_script_sha(c, dlock__lock_release_script(), a->sha_release);
    dlock__client_script_sha(c, dlock__lock_extend_script(), a->sha_extend);
    err = open_conn(a, m);
    if (err != DLOCK_OK) {
        dlock_async_free(a);
        return err;
    }
    *out = a;
    return DLOCK_OK;
}

void dlock_async_free(dlock_async *a)
{
    if (a == NULL)
        return;
    a->freeing = 1;
    dlock__msg_set(&a->base, DLOCK_STATE,
                   "the async handle on %s was freed first",
                   dlock_client_endpoint(a->client));
    close_all(a, DLOCK_STATE, DLOCK_STATE);
    dlock__free(a->wbuf);
    dlock__free(a);
}

int dlock_async_fd(const dlock_async *a)
{
    return a->conn != NULL ? dlock__conn_fd(a->conn) : -1;
}

int dlock_async_events(const dlock_async *a)
{
    if (a->conn == NULL)
        return 0;
    if (a->written - a->wbase < a->wlen)
        return DLOCK_ASYNC_READ | DLOCK_ASYNC_WRITE;
    return DLOCK_ASYNC_READ;
}

int dlock_async_timeout_ms(const dlock_async *a)
{
    int64_t left;

    if (a->head == NULL)
        return -1;
    left = a->head->deadline_us - dlock__now_us();
    if (left <= 0)
        return 0;
    return (int)((left + 999) / 1000);
}

int dlock_async_pending(const dlock_async *a)
{
    return a->pending;
}

dlock_err dlock_async_process(dlock_async *a, int revents)
{
    dlock_err err = flush(a);

    if (err == DLOCK_OK && (revents & DLOCK_ASYNC_READ) && a->conn != NULL)
        err = read_replies(a);
    /* Callbacks may have queued commands: out they go now. */
    if (err == DLOCK_OK)
        err = flush(a);
    if (err == DLOCK_OK)
        err = expire(a);
    return err;
}

dlock_err dlock_async_poll(dlock_async *a, int max_ms)
{
    const int want = dlock_async_events(a);
    const int due = dlock_async_timeout_ms(a);
    struct pollfd p = {.fd = dlock_async_fd(a), .events = 0};
    int wait = due < 0 || (max_ms >= 0 && max_ms < due) ? max_ms : due;
    int revents = 0;

    if (want & DLOCK_ASYNC_READ)
        p.events |= POLLIN;
    if (want & DLOCK_ASYNC_WRITE)
        p.events |= POLLOUT;
    /* A signal or a failed poll is a turn with no events: process still
     * writes what it can and expires what is due. */
    if (p.fd >= 0 && poll(&p, 1, wait) > 0) {
        if (p.revents & (POLLIN | POLLHUP | POLLERR))
            revents |= DLOCK_ASYNC_READ;
        if (p.revents & POLLOUT)
            revents |= DLOCK_ASYNC_WRITE;
    }
    return dlock_async_process(a, revents);
}

dlock_err dlock_async_reconnect(dlock_async *a)
{
    if (a->conn != NULL)
        return DLOCK_OK;
    dlock__msg_clear(&a->msg);
    return open_conn(a, &a->msg);
}

/* DLOCK_OK when a takes new commands now. */
static dlock_err accepting(dlock_async *a)
{
    if (a->freeing)
        return dlock__msg_set(&a->msg, DLOCK_STATE,
                              "the async handle is being freed");
    if (a->conn == NULL)
        return dlock__msg_set(&a->msg, DLOCK_UNAVAILABLE,
                              "the async handle on %s is closed after a "
                              "failure (dlock_async_reconnect opens it)",
                              dlock_client_endpoint(a->client));
    if (!dlock__breaker_allows(dlock__client_breaker(a->client)))
        return dlock__msg_set(&a->msg, DLOCK_UNAVAILABLE,
                              "circuit breaker open for %s",
                              dlock_client_endpoint(a->client));
    return DLOCK_OK;
}

/* The options an async acquire refuses, or DLOCK_OK. */
static dlock_err refuse_opts(const dlock_acquire_opts *o, dlock__msg *m)
{
    if (o->wait_ms != 0)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "an async acquire does not wait (wait_ms "
                              "%lld): it tries once",
                              (long long)o->wait_ms);
    if (o->fair || o->reentrant)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "fair and reentrant locks are not served by "
                              "the async API");
    if (o->policy == DLOCK_FAIL_OPEN)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "DLOCK_FAIL_OPEN is not served by the async "
                              "API: its failures are reported");
    return DLOCK_OK;
}

dlock_err dlock_async_acquire(dlock_async *a, const char *key,
                              const dlock_acquire_opts *opts,
                              dlock_async_acquire_fn cb, void *arg)
{
    dlock_acquire_opts defaults;
    dlock_lock *l = NULL;
    op *o;
    dlock_err err;

    if (a == NULL || cb == NULL)
        return DLOCK_INVALID;
    dlock__msg_clear(&a->msg);
    if (opts == NULL) {
        dlock_acquire_opts_init(&defaults);
        opts = &defaults;
    }
    err = refuse_opts(opts, &a->msg);
    if (err == DLOCK_OK)
        err = accepting(a);
    if (err == DLOCK_OK)
        err = dlock__lock_create(a->client, key, opts, &l, &a->msg);
    if (err != DLOCK_OK)
        return err;
    o = op_new(a, OP_ACQUIRE, l, arg);
    if (o == NULL) {
        dlock_lock_free(l);
        return DLOCK_NOMEM;
    }
    o->on_acquired = cb;
    o->watchdog = opts->watchdog;
    o->started_us = dlock__now_us();
    dlock__lock_acquire_prepare(l, &o->req);
    memcpy(o->args, o->req.argv, sizeof(o->req.argv));
    err = queue_script(a, o, dlock__lock_acquire_script(), a->sha_acquire, "5",
                       9);
    if (err != DLOCK_OK) {
        dlock__msg scratch; /* a->msg says why */
        int64_t unused;

        /* Never sent: the ticket ends as not run. */
        dlock__lock_acquire_finish(l, &o->req, DLOCK_NOMEM, NULL, 0, 0,
                                   &unused, &scratch);
        dlock_lock_free(l);
        dlock__free(o);
    }
    return err;
}

dlock_err dlock_async_release(dlock_async *a, dlock_lock *lock,
                              dlock_async_release_fn cb, void *arg)
{
    op *o;
    dlock_err err;

    if (a == NULL || lock == NULL || cb == NULL)
        return DLOCK_INVALID;
    dlock__msg_clear(&a->msg);
    if (dlock__lock_client(lock) != a->client
        || !dlock__lock_release_plain(lock))
        return dlock__msg_set(&a->msg, DLOCK_INVALID,
                              "release of lock %.64s: not a plain lock of "
                              "this handle's client (fair, reentrant, "
                              "degraded and Redlock locks are released with "
                              "dlock_release)",
                              dlock_lock_key(lock));
    err = accepting(a);
    if (err != DLOCK_OK)
        return err;
    o = op_new(a, OP_RELEASE, lock, arg);
    if (o == NULL)
        return DLOCK_NOMEM;
    o->on_released = cb;
    dlock__lock_release_args(lock, o->buf, o->args);
    err = queue_script(a, o, dlock__lock_release_script(), a->sha_release, "2",
                       5);
    if (err != DLOCK_OK) {
        dlock__free(o);
        return err;
    }
    /* From here on the release is under way: the lock leaves the
     * watchdog, as dlock_release takes it off before its request. */
    o->expired = dlock__lock_release_begin(lock);
    return DLOCK_OK;
}

dlock_err dlock_async_extend(dlock_async *a, dlock_lock *lock, int64_t ttl_ms,
                             dlock_async_extend_fn cb, void *arg)
{
    op *o;
    dlock_err err;

    if (a == NULL || lock == NULL || cb == NULL)
        return DLOCK_INVALID;
    dlock__msg_clear(&a->msg);
    if (dlock__lock_client(lock) != a->client
        || dlock__client_redlock(a->client) != NULL)
        return dlock__msg_set(&a->msg, DLOCK_INVALID,
                              "extend of lock %.64s: not a lock of this "
                              "handle's client",
                              dlock_lock_key(lock));
    err = accepting(a);
    if (err == DLOCK_OK)
        err = dlock__lock_extend_check(lock, &ttl_ms, &a->msg);
    if (err != DLOCK_OK)
        return err;
    o = op_new(a, OP_EXTEND, lock, arg);
    if (o == NULL)
        return DLOCK_NOMEM;
    o->on_extended = cb;
    o->ttl_ms = ttl_ms;
    o->ticket = dlock__lock_extend_prepare(lock, ttl_ms, o->buf, o->args);
    err = queue_script(a, o, dlock__lock_extend_script(), a->sha_extend, "1",
                       3);
    if (err != DLOCK_OK) {
        dlock__msg scratch; /* a->msg says why */

        /* Never sent: the ticket ends as not run. */
        dlock__lock_extend_finish(lock, &o->ticket, ttl_ms, DLOCK_NOMEM, NULL,
                                  &scratch);
        dlock__free(o);
    }
    return err;
}

const char *dlock_async_errmsg(const dlock_async *a)
{
    return a->msg.text;
}
