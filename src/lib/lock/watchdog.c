/*
 * watchdog.c: the renewer and the timer (see watchdog.h).
 *
 * State, all under mu: the list of watches, the FIFO of requests in flight
 * on the renewer's connection (replies come back in the order sent), and
 * the list of orphans to undo.  A watch whose lock is unwatched while one
 * of its renewals is in flight is detached (lock = NULL) and freed when
 * that request leaves the FIFO; so unwatch never waits on Redis.
 *
 * Renewer loop: open the connection when there is work; send everything
 * due; wait (poll) for replies, the next due time or a wake-up on the
 * pipe; apply each reply under mu; when the oldest request in flight has
 * outlived its lock's validity, replace the connection (its requests end
 * as "unknown": they may have run).  Renewal times are on CLOCK_MONOTONIC
 * (poll and condition variables), validity on CLOCK_BOOTTIME (lease.h).
 *
 * Rounds: a client whose renewals cannot be pipelined (a Redlock round on
 * every master, or a renewal followed by WAIT: dlock__lock_renews_in_rounds)
 * has its locks renewed by the renewer one at a time with mu released,
 * each flagged renewing meanwhile; unwatch waits for that flag, so the
 * round never touches a freed lock.  The renewer's connection then only
 * carries orphans.
 *
 * A fair grant's confirm (watch_confirm) is registered on the hand-off's
 * path: the granted waiter's acquire returns after it.  Waking the
 * renewer and the timer there put both threads (and the confirm's trip
 * to Redis) on the CPUs in the very microseconds the waiter needed them
 * (on 2 cores: a hand-off gap of about 120 us, against 20-70 us without
 * the two wake-ups).  So the waiter wakes neither: it arms the renewer's
 * alarm (a timerfd the renewer polls) CONFIRM_DELAY_US ahead, one system
 * call that wakes nobody now; the renewer, woken by the alarm, tells the
 * timer and sends the confirm.  The grant is taken only with 2 ms of
 * validity left (lock_fair.h), so the confirm is still in time; an alarm
 * already armed is not moved later (a stream of grants cannot postpone
 * it for ever).  Without a timerfd, the wake-ups are immediate as before.
 *
 * Timer loop: sleep on a condition variable until the earliest validity
 * end among live watches; mark each lock past it lost; run pending
 * callbacks with the watch flagged firing (unwatch waits for that flag).
 */
#include "lock/watchdog.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/alloc.h"
#include "transport/tls.h"
#include "base/clock.h"
#include "base/decimal.h"
#include "base/lease.h"
#include "deploy/deploy.h"
#include "deploy/sentinel.h"
#include "lock/lock_internal.h"

/* Most requests sent in one go; more wait for the next turn of the loop. */
#define BATCH_MAX 512
/* A fair grant's confirm that failed is sent again this soon: the grant
 * lasts only its confirm window. */
#define CONFIRM_RETRY_US 50000
/* A fair grant's confirm is sent this long after the grant is taken (see
 * the top of this file): after the waiter's acquire has returned. */
#define CONFIRM_DELAY_US 200
/* Most orphans kept; past it a timed-out request is left to its TTL. */
#define ORPHANS_MAX 1024

struct dlock__watch {
    void *owner; /* NULL: detached, freed when out of flight */
    const dlock__watch_ops *ops;
    dlock_lock *lock; /* owner, when it is a core lock (renewals) */
    int renew;
    int confirming;   /* a fair grant's confirm is due (see watch_confirm) */
    int renew_after;  /* what renew becomes once the confirm lands */
    int inflight;     /* its requests in flight: a renewal, and its ROLE */
    int done;         /* lost: neither renewed nor timed again */
    int fire_pending; /* a renewal marked it lost: run on_lost */
    int firing;
    int renewing; /* rounds: a renewal of it runs with mu released */
    int doubted;  /* Sentinel: a "not held" answer not yet believed (doubt) */
    int64_t next_renew_us; /* monotonic */
    struct dlock__watch *next;
    struct dlock__watch *prev;
};

/* A request that may run on the server unseen (its connection timed
 * out), undone by a script that answers 1 once it has undone it.  The
 * original may still be in flight on its dead connection and run after an
 * undo that found nothing, so the undo is sent again, with backoff, until
 * it answers 1 or the TTL the original asked for is over. */
typedef struct orphan {
    char *cmd;
    size_t len;
    char *key; /* its first key, for a cluster's routing; may be NULL */
    int inflight;
    int64_t next_send_us; /* monotonic */
    int64_t backoff_us;
    int64_t give_up_us; /* CLOCK_BOOTTIME */
    struct orphan *next;
} orphan;

typedef struct flight {
    dlock__watch *watch; /* NULL for an orphan's release */
    int role;            /* the ROLE behind watch's doubted renewal */
    int not_held;        /* role: that renewal was answered "not held"; its
                          * ticket moved here until this answers (confirm) */
    orphan *orphan;
    dlock__lease_ticket ticket;
    int64_t expires_us; /* CLOCK_BOOTTIME: after it, no answer helps */
    struct flight *next;
} flight;

struct dlock__watchdog {
    dlock_client *client;
    pthread_mutex_t mu;
    pthread_cond_t timer_wake;
    pthread_cond_t idle; /* a callback ended */
    pthread_t renewer, timer;
    int wake_fd[2];   /* wakes the renewer's poll */
    int alarm_fd;     /* the renewer's alarm (a timerfd), -1 if none */
    int64_t alarm_at; /* monotonic: when it rings; 0 if not armed */
    int stop;
    int rounds; /* renewals one at a time (see the top of this file) */
    dlock__watch *head;
    orphan *orphans;
    flight *fifo, *fifo_tail;
    dlock__conn *conn; /* the renewer's; only it uses it */
    int demoted;       /* Sentinel: conn may be on a demoted master (doubt) */
    int norphans;
    size_t cap; /* of the batch buffer being built */
};

static int64_t mono_of_boot(int64_t boot_us)
{
    int64_t left = boot_us - dlock__boot_us();

    if (boot_us == INT64_MAX)
        return DLOCK__FOREVER;
    return dlock__now_us() + (left > 0 ? left : 0);
}

static void wake_renewer(dlock__watchdog *w)
{
    char b = 1;

    /* A full pipe already holds a wake-up. */
    if (write(w->wake_fd[1], &b, 1) < 0 && errno != EAGAIN)
        return;
}

static void drain_wakes(dlock__watchdog *w)
{
    char buf[64];

    while (read(w->wake_fd[0], buf, sizeof(buf)) > 0)
        ;
}

/* Arms the renewer's alarm for at_us (monotonic) unless it is armed
 * already, which rings sooner (mu held).  0 if there is no alarm: the
 * caller wakes the renewer itself. */
static int alarm_arm(dlock__watchdog *w, int64_t at_us)
{
    struct itimerspec its = {.it_value = dlock__timespec_of(at_us)};

    if (w->alarm_fd < 0)
        return 0;
    /* Rang over a millisecond ago and not heard: the renewer is busy (a
     * connect, a round); the caller wakes both threads as before. */
    if (w->alarm_at != 0)
        return w->alarm_at > dlock__now_us() - 1000;
    if (timerfd_settime(w->alarm_fd, TFD_TIMER_ABSTIME, &its, NULL) != 0)
        return 0;
    w->alarm_at = at_us;
    return 1;
}

/* After the alarm rang (mu held): tells the timer of the watches linked
 * without waking it. */
static void alarm_rang(dlock__watchdog *w)
{
    uint64_t expirations;

    if (read(w->alarm_fd, &expirations, sizeof(expirations)) < 0)
        return; /* not rung yet (EAGAIN) */
    w->alarm_at = 0;
    pthread_cond_signal(&w->timer_wake);
}

/* Takes x off the list of watches (it stays allocated). */
static void detach_watch(dlock__watchdog *w, dlock__watch *x)
{
    if (x->prev != NULL)
        x->prev->next = x->next;
    else
        w->head = x->next;
    if (x->next != NULL)
        x->next->prev = x->prev;
}

static void unlink_watch(dlock__watchdog *w, dlock__watch *x)
{
    detach_watch(w, x);
    dlock__free(x);
}

static int64_t retry_interval_us(int64_t ttl_ms)
{
    int64_t us = ttl_ms * 100; /* ttl / 10, in microseconds */

    return us < 10000 ? 10000 : us;
}

/* --- the renewer ------------------------------------------------------ */

static void fifo_push(dlock__watchdog *w, flight *f)
{
    f->next = NULL;
    if (w->fifo_tail != NULL)
        w->fifo_tail->next = f;
    else
        w->fifo = f;
    w->fifo_tail = f;
}

static flight *fifo_pop(dlock__watchdog *w)
{
    flight *f = w->fifo;

    if (f != NULL) {
        w->fifo = f->next;
        if (w->fifo == NULL)
            w->fifo_tail = NULL;
    }
    return f;
}

/* Schedules x's next renewal after one that ended with err (mu held):
 * a third of the TTL after a renewal, sooner after a failure, never
 * after a loss (marked: this renewal marked it, so on_lost runs). */
static void renewed(dlock__watchdog *w, dlock__watch *x, dlock_err err,
                    int marked)
{
    int64_t ttl = dlock__lease_ttl_ms(dlock__lock_lease(x->lock));

    if (err == DLOCK_OK) {
        dlock__client_count_renewal(w->client);
        x->next_renew_us = dlock__now_us() + ttl * 1000 / 3;
        if (x->confirming) {
            x->confirming = 0;
            x->renew = x->renew_after;
        }
    } else {
        x->next_renew_us = dlock__now_us()
                           + (x->confirming ? CONFIRM_RETRY_US
                                            : retry_interval_us(ttl));
    }
    if (err == DLOCK_LOST) {
        x->done = 1;
        x->fire_pending = marked;
    }
    pthread_cond_signal(&w->timer_wake);
}

static int on_sentinel(const dlock__watchdog *w)
{
    const struct dlock__deploy *dp = dlock__client_deploy(w->client);

    return dp != NULL && dp->kind == DLOCK__SENTINEL;
}

/*
 * 1 if r, the answer to x's renewal on a Sentinel client, may come from a
 * master demoted by a failover that still answers: READONLY or MASTERDOWN
 * (the renewal did not run), or "not held" (0), which a replica says from
 * its copy.  The connection is then dropped and the master looked up
 * again (w->demoted: read_replies), and x is marked doubted: its next
 * renewal goes with a ROLE behind it on the same connection (queue_role),
 * and its "not held" is believed only if that ROLE says master (role_behind,
 * confirm).  A ROLE checked when the connection was opened would not do:
 * the renewal waits for its time on that connection, and its server may
 * be demoted meanwhile.  0 on every other client.
 */
static int doubt(dlock__watchdog *w, dlock__watch *x, const redisReply *r)
{
    if (r == NULL || !on_sentinel(w))
        return 0;
    if (!dlock__deploy_is_readonly(r)
        && (r->type != REDIS_REPLY_INTEGER || r->integer != 0))
        return 0;
    x->doubted = !dlock__deploy_is_readonly(r);
    w->demoted = 1;
    return 1;
}

/* The ROLE flight that judges r, x's doubted renewal's answer, if r is
 * "not held" and that ROLE is next in the FIFO; else NULL. */
static flight *role_behind(const dlock__watchdog *w, const dlock__watch *x,
                           const redisReply *r)
{
    if (x->doubted && r != NULL && r->type == REDIS_REPLY_INTEGER
        && r->integer == 0 && w->fifo != NULL && w->fifo->role
        && w->fifo->watch == x)
        return w->fifo;
    return NULL;
}

/*
 * role, the ROLE behind x's doubted renewal, was answered r (NULL: none
 * came).  If that renewal was answered "not held" (role->not_held, its
 * ticket in role->ticket), the answer is believed only from a master: the
 * lock is lost.  From anything else, or with no answer, nothing is known
 * of the lock: its lease keeps its end, the master is looked up again and
 * the renewal goes again soon.
 */
static void confirm(dlock__watchdog *w, dlock__watch *x, flight *role,
                    const redisReply *r)
{
    int marked = 0;

    if (!role->not_held)
        return; /* the renewal's own answer was landed */
    if (r != NULL && dlock__role_is_master(r)) {
        const redisReply zero = {.type = REDIS_REPLY_INTEGER, .integer = 0};
        dlock_err err = dlock__lock_renew_reply(x->lock, &role->ticket, &zero,
                                                dlock__boot_us(), &marked);

        renewed(w, x, err, marked);
        return;
    }
    dlock__lease_end(dlock__lock_lease(x->lock), &role->ticket,
                     DLOCK__LEASE_NOT_RUN);
    if (r != NULL)
        w->demoted = 1;
    renewed(w, x, DLOCK_SERVER, 0); /* again soon, elsewhere */
}

/* Ends one request in flight with reply r (NULL: none will come). */
static void land(dlock__watchdog *w, flight *f, const redisReply *r)
{
    dlock__watch *x = f->watch;
    flight *role;

    if (f->orphan != NULL) {
        orphan *o = f->orphan;

        o->inflight = 0;
        if (r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1)
            o->give_up_us = 0; /* undone */
        else if (r != NULL && dlock__client_deploy(w->client) != NULL
                 && dlock__deploy_is_readonly(r))
            w->demoted = 1; /* a demoted Sentinel master: go to the new */
        o->next_send_us = dlock__now_us() + o->backoff_us;
        if (o->backoff_us < 2000000)
            o->backoff_us *= 2;
    } else if (x->owner == NULL) {
        if (--x->inflight == 0)
            dlock__free(x); /* detached by unwatch */
    } else if (f->role) {
        x->inflight--;
        confirm(w, x, f, r);
    } else if ((role = role_behind(w, x, r)) != NULL) {
        x->inflight--;
        role->ticket = f->ticket;
        role->not_held = 1;
    } else if (doubt(w, x, r)) {
        dlock__lease_end(dlock__lock_lease(x->lock), &f->ticket,
                         DLOCK__LEASE_NOT_RUN);
        x->inflight--;
        renewed(w, x, DLOCK_SERVER, 0); /* again soon, elsewhere */
    } else {
        int marked = 0;
        dlock_err err = dlock__lock_renew_reply(x->lock, &f->ticket, r,
                                                dlock__boot_us(), &marked);

        x->inflight--;
        if (err == DLOCK_OK)
            x->doubted = 0;
        renewed(w, x, err, marked);
    }
    dlock__free(f);
}

/* Drops the connection: its requests may have run, or may never. */
static void drop_conn(dlock__watchdog *w)
{
    flight *f;

    while ((f = fifo_pop(w)) != NULL)
        land(w, f, NULL);
    dlock__conn_free(w->conn);
    w->conn = NULL;
}

/* Drops orphans that were answered or whose TTL has run out. */
static void prune_orphans(dlock__watchdog *w)
{
    orphan **link = &w->orphans;
    int64_t now = dlock__boot_us();

    while (*link != NULL) {
        orphan *o = *link;

        if (!o->inflight && o->give_up_us <= now) {
            *link = o->next;
            free(o->cmd);
            dlock__free(o->key);
            dlock__free(o);
            w->norphans--;
        } else {
            link = &o->next;
        }
    }
}

/* Appends to the batch *buf (malloc'd, w->cap bytes, grown by
 * doubling); returns 0 when out of memory. */
static int append(dlock__watchdog *w, char **buf, size_t *len, const char *cmd,
                  size_t n)
{
    if (*len + n > w->cap || *buf == NULL) {
        size_t cap = w->cap > 0 && *buf != NULL ? w->cap : 4096;
        char *grown;

        while (cap < *len + n)
            cap *= 2;
        grown = realloc(*buf, cap);
        if (grown == NULL)
            return 0;
        *buf = grown;
        w->cap = cap;
    }
    memcpy(*buf + *len, cmd, n);
    *len += n;
    return 1;
}

/* Queues a ROLE behind x's doubted renewal (see doubt).  Without it (out
 * of memory) that renewal's "not held" is doubted again, never believed. */
static void queue_role(dlock__watchdog *w, dlock__watch *x, int64_t expires_us,
                       char **buf, size_t *len)
{
    static const char role[] = "*1\r\n$4\r\nROLE\r\n";
    flight *f = dlock__calloc(1, sizeof(*f));

    if (f == NULL || !append(w, buf, len, role, sizeof(role) - 1)) {
        dlock__free(f);
        return;
    }
    f->watch = x;
    f->role = 1;
    f->expires_us = expires_us;
    x->inflight++;
    fifo_push(w, f);
}

/* Queues a flight for x, appending its request to *buf. */
static int queue_renewal(dlock__watchdog *w, dlock__watch *x, char **buf,
                         size_t *len)
{
    flight *f = dlock__calloc(1, sizeof(*f));
    char *cmd = NULL;
    long long n;

    if (f == NULL)
        return 0;
    n = dlock__lock_renew_command(x->lock, &cmd, &f->ticket);
    if (n < 0) {
        dlock__free(f);
        return 0;
    }
    if (!append(w, buf, len, cmd, (size_t)n)) {
        free(cmd);
        dlock__lease_end(dlock__lock_lease(x->lock), &f->ticket,
                         DLOCK__LEASE_NOT_RUN);
        dlock__free(f);
        return 0;
    }
    free(cmd);
    f->watch = x;
    f->expires_us = dlock__lease_until(dlock__lock_lease(x->lock),
                                       dlock__client_skew(w->client));
    x->inflight = 1;
    fifo_push(w, f);
    if (x->doubted && on_sentinel(w))
        queue_role(w, x, f->expires_us, buf, len);
    return 1;
}

static int queue_orphan(dlock__watchdog *w, orphan *o, char **buf, size_t *len)
{
    flight *f = dlock__calloc(1, sizeof(*f));

    if (f == NULL || !append(w, buf, len, o->cmd, o->len)) {
        dlock__free(f);
        return 0;
    }
    f->orphan = o;
    f->expires_us = o->give_up_us;
    o->inflight = 1;
    fifo_push(w, f);
    return 1;
}

/* Builds at most max requests due now into *buf; *next gets the next due
 * time. */
static size_t collect_due_max(dlock__watchdog *w, char **buf, size_t *len,
                              int64_t *next, size_t max)
{
    int64_t now = dlock__now_us();
    size_t n = 0;

    for (dlock__watch *x = w->head; x != NULL && n < max; x = x->next) {
        if (w->rounds || !x->renew || x->done || x->inflight
            || x->owner == NULL)
            continue;
        if (x->next_renew_us > now) {
            if (x->next_renew_us < *next)
                *next = x->next_renew_us;
            continue;
        }
        if (dlock__lock_is_lost(x->lock))
            continue; /* the timer marks it */
        if (queue_renewal(w, x, buf, len))
            n++;
        else if (now + 10000 < *next)
            *next = now + 10000; /* out of memory: try again soon */
    }
    for (orphan *o = w->orphans; o != NULL && n < max; o = o->next) {
        if (o->inflight)
            continue;
        if (o->next_send_us > now) {
            if (o->next_send_us < *next)
                *next = o->next_send_us;
        } else if (queue_orphan(w, o, buf, len)) {
            n++;
        }
    }
    return n;
}

static size_t collect_due(dlock__watchdog *w, char **buf, size_t *len,
                          int64_t *next)
{
    return collect_due_max(w, buf, len, next, BATCH_MAX);
}

static size_t collect_due_one(dlock__watchdog *w, char **buf, size_t *len,
                              int64_t *next)
{
    return collect_due_max(w, buf, len, next, 1);
}

/* --- the cluster's renewer ------------------------------------------- */

/*
 * In a cluster each key has its own master, so there is no one connection
 * to pipeline on: the renewer sends each request due through the client's
 * routed path (the master of the key's slot, its pool, redirections and
 * failovers followed) and lands it as the pipelined path would.  A lock
 * unwatched meanwhile is detached as usual (its flight keeps the watch).
 */

/* The first request due now as a flight of its own, its command in *cmd
 * and its key (copied) in *key; NULL when nothing is due (*next then
 * says when). */
static flight *take_due(dlock__watchdog *w, char **cmd, size_t *len,
                        char **key, int64_t *next)
{
    size_t n = collect_due_one(w, cmd, len, next);
    flight *f;

    if (n == 0)
        return NULL;
    f = fifo_pop(w);
    assert(f != NULL && w->fifo == NULL);
    if (f->orphan != NULL)
        *key = f->orphan->key ? dlock__strdup(f->orphan->key) : NULL;
    else
        *key = dlock__strdup(dlock__lock_key(f->watch->lock));
    return f;
}

static void renew_routed(dlock__watchdog *w, int64_t *next)
{
    for (int sent = 0; sent < BATCH_MAX && !w->stop; sent++) {
        char *cmd = NULL, *key = NULL;
        size_t len = 0;
        redisReply *r = NULL;
        dlock__msg m;
        flight *f = take_due(w, &cmd, &len, &key, next);
        dlock_err err;

        if (f == NULL)
            return;
        pthread_mutex_unlock(&w->mu);
        err = dlock__client_call_routed(w->client, key, key ? strlen(key) : 0,
                                        cmd, len, "renewal", 1, &r, &m);
        pthread_mutex_lock(&w->mu);
        land(w, f, err == DLOCK_OK ? r : NULL);
        if (r != NULL)
            freeReplyObject(r);
        free(cmd);
        dlock__free(key);
    }
    *next = dlock__now_us(); /* a full batch: more may be due */
}

/* The earliest expiry of the requests in flight that are still worth an
 * answer; the connection is replaced when the oldest outlives its own. */
static int oldest_expired(dlock__watchdog *w)
{
    return w->fifo != NULL && w->fifo->expires_us <= dlock__boot_us();
}

/* The earliest end of validity among the locks the renewer serves
 * (monotonic), or DLOCK__FOREVER. */
static int64_t earliest_end(dlock__watchdog *w)
{
    dlock__skew *skew = dlock__client_skew(w->client);
    int64_t end = DLOCK__FOREVER;

    for (dlock__watch *x = w->head; x != NULL; x = x->next) {
        int64_t until;

        if (!x->renew || x->done || x->owner == NULL)
            continue;
        until = dlock__lease_until(dlock__lock_lease(x->lock), skew);
        if (until != 0 && mono_of_boot(until) < end)
            end = mono_of_boot(until);
    }
    return end;
}

/* Opens the renewer's connection (mu held on entry and return), giving
 * up when the first lease it serves ends: a connect that takes longer
 * cannot save it, and the next try may. */
static void connect_renewer(dlock__watchdog *w)
{
    dlock__conn *conn = NULL;
    dlock__msg m;
    int64_t until = earliest_end(w);
    dlock_err err;

    if (until != DLOCK__FOREVER && until < dlock__now_us() + 20000)
        until = dlock__now_us() + 20000; /* at least 20 ms */
    pthread_mutex_unlock(&w->mu);
    err = dlock__client_connect_until(w->client, until, &conn, &m);
    pthread_mutex_lock(&w->mu);
    if (err == DLOCK_OK)
        w->conn = conn;
}

/* Reads every reply that has arrived (mu held). */
static void read_replies(dlock__watchdog *w)
{
    while (w->conn != NULL && w->fifo != NULL) {
        redisReply *r = NULL;
        dlock__msg m;
        dlock_err err = dlock__conn_recv(w->conn, 0, &r, &m);

        if (err != DLOCK_OK) {
            drop_conn(w);
            return;
        }
        if (r == NULL)
            return;
        land(w, fifo_pop(w), r);
        freeReplyObject(r);
        if (w->demoted) {
            /* The rest of the batch went to the same server. */
            w->demoted = 0;
            dlock__deploy_master_failed(dlock__client_deploy(w->client));
            drop_conn(w);
            return;
        }
    }
}

/* 1 if the renewer's connection has something to carry. */
static int has_work(dlock__watchdog *w)
{
    for (dlock__watch *x = w->head; x != NULL && !w->rounds; x = x->next)
        if (x->renew && !x->done && x->owner != NULL)
            return 1;
    return w->orphans != NULL;
}

/* Rounds: the first watch whose renewal is due now, or NULL with *next
 * lowered to the earliest due time (mu held). */
static dlock__watch *due_round(dlock__watchdog *w, int64_t *next)
{
    int64_t now = dlock__now_us();

    for (dlock__watch *x = w->head; x != NULL; x = x->next) {
        if (!x->renew || x->done || x->lock == NULL)
            continue;
        if (x->next_renew_us > now) {
            if (x->next_renew_us < *next)
                *next = x->next_renew_us;
            continue;
        }
        if (!dlock__lock_is_lost(x->lock))
            return x; /* a lost one is the timer's to mark */
    }
    return NULL;
}

/* Rounds: renews one due lock with mu released; returns 1 if it did (the
 * list may have changed meanwhile), else 0 with *next lowered. */
static int renew_one_round(dlock__watchdog *w, int64_t *next)
{
    dlock__watch *x = due_round(w, next);
    int marked = 0;
    dlock_err err;

    if (x == NULL)
        return 0;
    x->renewing = 1;
    pthread_mutex_unlock(&w->mu);
    err = dlock__lock_renew_sync(x->lock, &marked);
    pthread_mutex_lock(&w->mu);
    x->renewing = 0;
    renewed(w, x, err, marked);
    pthread_cond_broadcast(&w->idle);
    return 1;
}

/* The earliest renewal due among the watches not in flight. */
static int64_t next_due(dlock__watchdog *w)
{
    int64_t next = DLOCK__FOREVER;

    for (dlock__watch *x = w->head; x != NULL; x = x->next)
        if (x->renew && !x->done && !x->inflight && x->owner != NULL
            && x->next_renew_us < next)
            next = x->next_renew_us;
    for (orphan *o = w->orphans; o != NULL; o = o->next)
        if (!o->inflight && o->next_send_us < next)
            next = o->next_send_us;
    return next;
}

/* Sleeps in poll(2) until a reply, a wake-up, the next renewal due or
 * next (mu released).  Replies read since next was computed may have
 * scheduled renewals: the list is read again here. */
static void wait_renewer(dlock__watchdog *w, int64_t next)
{
    struct pollfd p[3];
    nfds_t n = 1;
    int timeout, alarm = -1;

    if (w->conn != NULL && next_due(w) < next)
        next = next_due(w);
    if (w->fifo != NULL) {
        int64_t expiry = mono_of_boot(w->fifo->expires_us);

        if (expiry < next)
            next = expiry;
    }
    timeout = dlock__ms_left(next);
    p[0].fd = w->wake_fd[0];
    p[0].events = POLLIN;
    if (w->alarm_fd >= 0) {
        alarm = (int)n;
        p[n].fd = w->alarm_fd;
        p[n++].events = POLLIN;
    }
    if (w->conn != NULL && w->fifo != NULL) {
        if (dlock__conn_buffered(w->conn))
            timeout = 0;
        p[n].fd = dlock__conn_fd(w->conn);
        p[n++].events = POLLIN;
    }
    pthread_mutex_unlock(&w->mu);
    if (poll(p, n, timeout) < 0)
        p[0].revents = 0;
    drain_wakes(w);
    pthread_mutex_lock(&w->mu);
    if (alarm >= 0 && (p[alarm].revents & POLLIN))
        alarm_rang(w);
}

static void *renewer_main(void *arg)
{
    dlock__watchdog *w = arg;

    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        int64_t next = DLOCK__FOREVER;
        char *buf = NULL;
        size_t len = 0;
        int connect_failed = 0;

        prune_orphans(w);
        if (w->rounds && renew_one_round(w, &next))
            continue;
        if (dlock__client_is_cluster(w->client)) {
            renew_routed(w, &next);
            if (w->stop)
                break;
            wait_renewer(w, next);
            continue;
        }
        if (w->conn == NULL && has_work(w)) {
            connect_renewer(w);
            connect_failed = w->conn == NULL;
        }
        if (w->conn != NULL && collect_due(w, &buf, &len, &next) > 0) {
            dlock__msg m;
            dlock__conn *conn = w->conn;
            int64_t deadline = mono_of_boot(w->fifo_tail->expires_us);

            pthread_mutex_unlock(&w->mu);
            /* Only this thread frees the connection. */
            if (dlock__conn_send(conn, buf, len, deadline, &m) != DLOCK_OK)
                len = 0;
            pthread_mutex_lock(&w->mu);
            if (len == 0)
                drop_conn(w);
        }
        free(buf);
        read_replies(w);
        if (oldest_expired(w))
            drop_conn(w);
        if (w->stop)
            break;
        /* No connection, and work to do: the connect failed (try again
         * in 100 ms), or the connection was dropped since next was
         * computed (a send that failed, a reply that found it closed or
         * on a demoted master, a request that outlived its lock): connect
         * again at once, or nothing would wake this thread before the
         * leases it serves run out. */
        if (w->conn == NULL && has_work(w)) {
            int64_t at = dlock__now_us() + (connect_failed ? 100000 : 0);

            if (at < next)
                next = at;
        }
        wait_renewer(w, next);
        read_replies(w);
    }
    if (w->conn != NULL)
        drop_conn(w);
    pthread_mutex_unlock(&w->mu);
    dlock__tls_thread_end();
    return NULL;
}

/* --- the timer -------------------------------------------------------- */

/* Runs x's callback with mu released; x stays linked while firing. */
static void fire(dlock__watchdog *w, dlock__watch *x)
{
    x->firing = 1;
    pthread_mutex_unlock(&w->mu);
    x->ops->fire_lost(x->owner);
    pthread_mutex_lock(&w->mu);
    x->firing = 0;
    pthread_cond_broadcast(&w->idle);
}

/* Marks what is past its validity, fires one pending callback; returns 1
 * if it fired (the list may have changed), else 0 with *next set. */
static int timer_pass(dlock__watchdog *w, int64_t *next)
{
    dlock__skew *skew = dlock__client_skew(w->client);

    for (dlock__watch *x = w->head; x != NULL; x = x->next) {
        dlock__lease *lease;
        int64_t until;

        if (x->owner == NULL || x->firing)
            continue;
        if (x->fire_pending) {
            x->fire_pending = 0;
            fire(w, x);
            return 1;
        }
        if (x->done)
            continue;
        lease = x->ops->lease(x->owner);
        if (dlock__lease_lost(lease, skew)) {
            x->done = 1;
            if (x->ops->mark_lost(x->owner)) {
                fire(w, x);
                return 1;
            }
            continue;
        }
        until = dlock__lease_until(lease, skew);
        if (until != 0 && mono_of_boot(until) < *next)
            *next = mono_of_boot(until);
    }
    return 0;
}

static void *timer_main(void *arg)
{
    dlock__watchdog *w = arg;

    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        int64_t next = DLOCK__FOREVER;
        struct timespec ts;

        if (timer_pass(w, &next))
            continue;
        /* Wake a little after the deadline, never before it. */
        if (next != DLOCK__FOREVER)
            next += 200;
        ts = dlock__timespec_of(next);
        pthread_cond_timedwait(&w->timer_wake, &w->mu, &ts);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* --- the interface ---------------------------------------------------- */

static int init_cond(pthread_cond_t *cv)
{
    pthread_condattr_t attr;
    int rc;

    if (pthread_condattr_init(&attr) != 0)
        return -1;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
    return rc == 0 ? 0 : -1;
}

static dlock_err init_sync(dlock__watchdog *w, dlock__msg *m)
{
    if (pthread_mutex_init(&w->mu, NULL) != 0)
        return dlock__msg_set(m, DLOCK_SYSTEM, "initialising a mutex");
    if (init_cond(&w->timer_wake) != 0) {
        pthread_mutex_destroy(&w->mu);
        return dlock__msg_set(m, DLOCK_SYSTEM, "initialising a condition");
    }
    if (init_cond(&w->idle) != 0) {
        pthread_cond_destroy(&w->timer_wake);
        pthread_mutex_destroy(&w->mu);
        return dlock__msg_set(m, DLOCK_SYSTEM, "initialising a condition");
    }
    if (pipe2(w->wake_fd, O_NONBLOCK | O_CLOEXEC) != 0) {
        pthread_cond_destroy(&w->idle);
        pthread_cond_destroy(&w->timer_wake);
        pthread_mutex_destroy(&w->mu);
        return dlock__msg_set(m, DLOCK_SYSTEM,
                              "creating the watchdog's "
                              "wake-up pipe: %s",
                              strerror(errno));
    }
    /* Without it, confirms wake the renewer at once (see the top). */
    w->alarm_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    return DLOCK_OK;
}

static void destroy_sync(dlock__watchdog *w)
{
    if (w->alarm_fd >= 0)
        close(w->alarm_fd);
    close(w->wake_fd[0]);
    close(w->wake_fd[1]);
    pthread_cond_destroy(&w->idle);
    pthread_cond_destroy(&w->timer_wake);
    pthread_mutex_destroy(&w->mu);
}

dlock_err dlock__watchdog_new(dlock_client *c, dlock__watchdog **out,
                              dlock__msg *m)
{
    dlock__watchdog *w = dlock__calloc(1, sizeof(*w));
    dlock_err err;
    int rc;

    *out = NULL;
    if (w == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "allocating the watchdog");
    w->client = c;
    w->rounds = dlock__lock_renews_in_rounds(c);
    err = init_sync(w, m);
    if (err != DLOCK_OK) {
        dlock__free(w);
        return err;
    }
    rc = dlock__thread_start(&w->renewer, renewer_main, w);
    if (rc == 0) {
        rc = dlock__thread_start(&w->timer, timer_main, w);
        if (rc != 0) {
            pthread_mutex_lock(&w->mu);
            w->stop = 1;
            pthread_mutex_unlock(&w->mu);
            wake_renewer(w);
            pthread_join(w->renewer, NULL);
        }
    }
    if (rc != 0) {
        destroy_sync(w);
        dlock__free(w);
        return dlock__msg_set(m, DLOCK_SYSTEM,
                              "starting the watchdog's "
                              "threads: %s",
                              strerror(rc));
    }
    *out = w;
    return DLOCK_OK;
}

void dlock__watchdog_free(dlock__watchdog *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->timer_wake);
    pthread_mutex_unlock(&w->mu);
    wake_renewer(w);
    pthread_join(w->renewer, NULL);
    pthread_join(w->timer, NULL);
    while (w->head != NULL)
        unlink_watch(w, w->head);
    while (w->orphans != NULL) {
        orphan *o = w->orphans;

        w->orphans = o->next;
        free(o->cmd);
        dlock__free(o->key);
        dlock__free(o);
    }
    destroy_sync(w);
    dlock__free(w);
}

/* The timer's view of a core lock. */
static dlock__lease *lock_lease(void *lock)
{
    return dlock__lock_lease(lock);
}

static int lock_mark_lost(void *lock)
{
    return dlock__lock_mark_lost(lock);
}

static void lock_fire_lost(void *lock)
{
    if (dlock__lock_has_callback(lock))
        dlock__lock_fire_lost(lock);
}

static const dlock__watch_ops lock_ops = {lock_lease, lock_mark_lost,
                                          lock_fire_lost};

/* Links a new watch of owner (renew: a core lock the renewer serves;
 * confirming: its first renewal is due now, and renewals go on after it
 * only if renew_after). */
static dlock_err watch_new(dlock__watchdog *w, const dlock__watch_ops *ops,
                           void *owner, dlock_lock *renew, int confirming,
                           int renew_after, dlock__watch **out, dlock__msg *m)
{
    dlock__watch *x = dlock__calloc(1, sizeof(*x));
    int64_t ttl = dlock__lease_ttl_ms(ops->lease(owner));
    int alarmed = 0;

    *out = NULL;
    if (x == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM,
                              "allocating the watchdog's "
                              "entry for a lease");
    x->owner = owner;
    x->ops = ops;
    x->lock = renew;
    x->renew = renew != NULL;
    x->confirming = confirming;
    x->renew_after = renew_after;
    pthread_mutex_lock(&w->mu);
    x->next_renew_us = dlock__now_us()
                       + (confirming ? CONFIRM_DELAY_US : ttl * 1000 / 3);
    x->next = w->head;
    if (w->head != NULL)
        w->head->prev = x;
    w->head = x;
    /* A confirm rings the renewer's alarm instead (see the top). */
    if (confirming)
        alarmed = alarm_arm(w, x->next_renew_us);
    if (!alarmed)
        pthread_cond_signal(&w->timer_wake);
    pthread_mutex_unlock(&w->mu);
    if (x->renew && !alarmed)
        wake_renewer(w);
    *out = x;
    return DLOCK_OK;
}

dlock_err dlock__watchdog_watch(dlock__watchdog *w, dlock_lock *lock,
                                int renew, dlock__watch **out, dlock__msg *m)
{
    return watch_new(w, &lock_ops, lock, renew ? lock : NULL, 0, renew, out,
                     m);
}

dlock_err dlock__watchdog_watch_lease(dlock__watchdog *w,
                                      const dlock__watch_ops *ops, void *owner,
                                      dlock__watch **out, dlock__msg *m)
{
    return watch_new(w, ops, owner, NULL, 0, 0, out, m);
}

dlock_err dlock__watchdog_watch_confirm(dlock__watchdog *w, dlock_lock *lock,
                                        int renew, dlock__watch **out,
                                        dlock__msg *m)
{
    return watch_new(w, &lock_ops, lock, lock, 1, renew, out, m);
}

void dlock__watchdog_unwatch(dlock__watchdog *w, dlock__watch *x)
{
    if (x == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    while (x->firing || x->renewing)
        pthread_cond_wait(&w->idle, &w->mu);
    if (x->inflight) {
        /* The flight frees it; off the list now. */
        detach_watch(w, x);
        x->owner = NULL;
        x->lock = NULL;
    } else {
        unlink_watch(w, x);
    }
    pthread_mutex_unlock(&w->mu);
}

void dlock__watchdog_reschedule(dlock__watchdog *w, dlock__watch *x)
{
    pthread_mutex_lock(&w->mu);
    if (x->owner != NULL)
        x->next_renew_us = dlock__now_us()
                           + dlock__lease_ttl_ms(x->ops->lease(x->owner))
                                 * 1000 / 3;
    pthread_cond_signal(&w->timer_wake);
    pthread_mutex_unlock(&w->mu);
    wake_renewer(w);
}

void dlock__watchdog_recheck(dlock__watchdog *w)
{
    pthread_mutex_lock(&w->mu);
    pthread_cond_signal(&w->timer_wake);
    pthread_mutex_unlock(&w->mu);
}

void dlock__watchdog_cleanup(dlock__watchdog *w, const dlock__script *s,
                             int nkeys, int argc, const char **argv,
                             int64_t ttl_ms)
{
    const char *av[16]; /* EVAL, body, numkeys and the script's args */
    char nk[DLOCK__DECIMAL_MAX];
    orphan *o;
    int len;

    if (argc + 3 > (int)(sizeof(av) / sizeof(*av)))
        return;
    pthread_mutex_lock(&w->mu);
    if (w->norphans >= ORPHANS_MAX) {
        pthread_mutex_unlock(&w->mu);
        return;
    }
    pthread_mutex_unlock(&w->mu);
    o = dlock__calloc(1, sizeof(*o));
    if (o == NULL)
        return;
    dlock__decimal_i64(nk, nkeys);
    av[0] = "EVAL";
    av[1] = s->body;
    av[2] = nk;
    for (int i = 0; i < argc; i++)
        av[i + 3] = argv[i];
    len = redisFormatCommandArgv(&o->cmd, argc + 3, av, NULL);
    if (len < 0 || o->cmd == NULL) {
        dlock__free(o);
        return;
    }
    o->len = (size_t)len;
    /* Best effort like the rest: without its key a cluster's undo goes to
     * slot 0's master, where it finds nothing and the TTL ends it. */
    o->key = nkeys > 0 ? dlock__strdup(argv[0]) : NULL;
    o->give_up_us = dlock__boot_us() + ttl_ms * 1000;
    o->next_send_us = dlock__now_us();
    o->backoff_us = 50000;
    pthread_mutex_lock(&w->mu);
    o->next = w->orphans;
    w->orphans = o;
    w->norphans++;
    pthread_mutex_unlock(&w->mu);
    wake_renewer(w);
}
