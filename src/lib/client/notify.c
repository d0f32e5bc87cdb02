/*
 * notify.c: the subscriber thread that wakes waiters (see notify.h).
 *
 * Channel states, moved only by the subscriber thread except where noted:
 *   WANT        someone joined (set by join) or the connection was renewed:
 *               a SUBSCRIBE is to be sent;
 *   SENT        SUBSCRIBE sent, confirmation pending;
 *   SUBSCRIBED  confirmed; releases on it reach us;
 *   LEAVING     refs fell to 0 and UNSUBSCRIBE was sent.
 * A channel with refs == 0 is removed once it is no longer on the server
 * (never sent, or its UNSUBSCRIBE confirmed).  A channel re-joined while
 * LEAVING goes back to WANT when the UNSUBSCRIBE is confirmed.
 *
 * Other threads only change refs and waiter lists under mu and write one
 * byte to the wake pipe; the subscriber thread is the only one that talks
 * to the connection, and it reads it with mu released.
 *
 * The wake-up is on the hand-off's path (a fair grant is held when its
 * message wakes the waiter), so it costs one thread wake-up and no more:
 * a waiter sleeps on its own mutex and condition variable, which a waker
 * holds only to set woken and signal (with mu held too, so the waiter
 * cannot be freed meanwhile).  Sleeping on mu instead, a woken waiter
 * would find mu still held by the subscriber thread (reading the next
 * reply, sending changes) and go back to sleep until it was let go.  A
 * waiter that leaves does not wake the subscriber thread to unsubscribe:
 * that waits for its next turn (a join, a message, or at most
 * IDLE_TURN_MS), so the hand-off's waiter does not wake another
 * thread on its way out.
 *
 * A release made by this client is a second way in (its own releases,
 * dlock__notify_released): the releasing thread knows the key is free
 * the moment its reply arrives, about as soon as the message reaches
 * this thread, and wakes the waiter itself, so the hand-off does not
 * wait for this thread to be scheduled as well.  Both the message and
 * the releaser name the release by its id (the message's payload);
 * whichever of them comes second finds the id among the channel's recent
 * ones and wakes nobody, so one release still wakes one waiter.
 */
#include "client/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "transport/tls.h"
#include "base/clock.h"

/* Direct waiters' connections kept for the next one; more are closed. */
#define DIRECT_IDLE_MAX DLOCK__NOTIFY_KEPT_MAX

enum channel_state { WANT, SENT, SUBSCRIBED, LEAVING };

/* Release ids a channel remembers (see the top of this file): more than
 * the releases that can be on their way while one releaser's reply is,
 * so an id is still there when its other half comes; an id whose other
 * half never comes (a release by another client, a message that was
 * published before the subscription) is overwritten in turn. */
#define SEEN_MAX 8
#define SEEN_ID_MAX 24

/* Which side acted on a release id: an id is matched only by the other
 * side, so two messages with one payload (from some other publisher)
 * both wake a waiter. */
enum seen_side { SEEN_BY_RELEASER, SEEN_BY_MESSAGE };

typedef struct seen_id {
    char id[SEEN_ID_MAX]; /* NUL-terminated; "" is a free slot */
    enum seen_side side;
} seen_id;

/* A direct waiter's subscription (see "Direct waiters" below): its own
 * connection (NULL after a failure, until the next wait reconnects). */
typedef struct direct_sub {
    char *name;
    dlock__conn *conn;
} direct_sub;

/* A kept connection and the channel its last waiter left subscribed
 * (owned; unsubscribed when the connection is next used). */
typedef struct direct_idle {
    dlock__conn *conn;
    char *stale;
} direct_idle;

typedef struct channel {
    char *name;
    int refs;
    enum channel_state state;
    dlock__waiter *head;
    dlock__waiter *tail;
    /* Recent release ids acted on by one side only; seen_next is the
     * slot to overwrite next. */
    seen_id seen[SEEN_MAX];
    int seen_next;
    struct channel *next;
} channel;

struct dlock__waiter {
    channel *ch;        /* NULL for a direct waiter */
    direct_sub *direct; /* a direct waiter's own subscription */
    pthread_mutex_t mu; /* guards woken; a waker holds the notifier's too */
    pthread_cond_t cv;
    int woken;
    int keeps_place; /* a woken waiter stays where it is (set_fifo) */
    size_t msg_len;  /* the last non-empty message that woke it, if kept */
    char msg[DLOCK__NOTIFY_MSG_MAX];
    dlock__waiter *next;
    dlock__waiter *prev;
};

struct dlock__notifier {
    dlock_client *client;
    pthread_mutex_t mu;
    pthread_t thread;
    int pipe_fds[2];
    int stop;
    channel *channels;
    dlock__conn *conn; /* the subscriber thread's only */
    int64_t backoff_us;
    direct_idle idle[DIRECT_IDLE_MAX]; /* direct waiters' spare ones */
    int nidle;
};

#define BACKOFF_MIN_US 50000
#define BACKOFF_MAX_US 2000000
/* The longest the subscriber thread sleeps with a connection open; a
 * channel nobody waits on stays subscribed at most this long. */
#define IDLE_TURN_MS 1000
/* Replies read in one go before they are handled under mu. */
#define PUSHES_MAX 16
/* A direct waiter whose connection failed tries again this often. */
#define DIRECT_RETRY_US 100000

static int direct_wait(dlock__notifier *n, dlock__waiter *w,
                       int64_t deadline_us);
static void direct_leave(dlock__notifier *n, dlock__waiter *w);

static void poke(dlock__notifier *n)
{
    char byte = 1;
    ssize_t rc = write(n->pipe_fds[1], &byte, 1);

    /* A full pipe already holds a wake-up; nothing else can fail here. */
    (void)rc;
}

static void drain_pipe(dlock__notifier *n)
{
    char buf[64];

    while (read(n->pipe_fds[0], buf, sizeof(buf)) > 0)
        ;
}

static channel *find_channel(dlock__notifier *n, const char *name, size_t len)
{
    for (channel *ch = n->channels; ch != NULL; ch = ch->next)
        if (strlen(ch->name) == len && memcmp(ch->name, name, len) == 0)
            return ch;
    return NULL;
}

/* Wakes w unless it is woken already; returns 1 if this call woke it
 * (the notifier's mu held). */
static int wake(dlock__waiter *w)
{
    int was;

    pthread_mutex_lock(&w->mu);
    was = w->woken;
    if (!was) {
        w->woken = 1;
        pthread_cond_signal(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return !was;
}

static int is_woken(dlock__waiter *w)
{
    int woken;

    pthread_mutex_lock(&w->mu);
    woken = w->woken;
    pthread_mutex_unlock(&w->mu);
    return woken;
}

static void wake_all(channel *ch)
{
    for (dlock__waiter *w = ch->head; w != NULL; w = w->next)
        wake(w);
}

/* Moves w to the tail of its channel's queue. */
static void requeue(channel *ch, dlock__waiter *w)
{
    if (ch->tail == w)
        return;
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        ch->head = w->next;
    w->next->prev = w->prev;
    w->prev = ch->tail;
    w->next = NULL;
    ch->tail->next = w;
    ch->tail = w;
}

/* Wakes the longest-waiting waiter not already woken, and puts it at the
 * back of the queue: where one release may let in another waiter than
 * the one woken (a writer woken while readers hold), the next release
 * wakes someone else, so no waiter of this client starves.  A waiter that
 * keeps its place (an exclusive lock's, dlock__notify_set_fifo) stays at
 * the front: if it loses the key to a barger, the next release is its
 * again, instead of its going behind every other waiter (the hand-off's
 * longest waits came from such losers sent to the back).  A non-empty
 * payload that fits is kept for the woken waiter (an empty one does not
 * replace what it has not taken yet). */
static void keep_payload(dlock__waiter *w, const redisReply *payload)
{
    if (payload != NULL && payload->type == REDIS_REPLY_STRING
        && payload->len > 0 && payload->len <= sizeof(w->msg)) {
        memcpy(w->msg, payload->str, payload->len);
        w->msg_len = payload->len;
    }
}

static void wake_one(channel *ch, const redisReply *payload)
{
    for (dlock__waiter *w = ch->head; w != NULL; w = w->next) {
        if (wake(w)) {
            keep_payload(w, payload);
            if (!w->keeps_place)
                requeue(ch, w);
            return;
        }
    }
    /* Everyone is awake already (say, by a SUBSCRIBE confirmation): the
     * payload still reaches the one that will look next. */
    if (ch->head != NULL)
        keep_payload(ch->head, payload);
}

/* 1 if id (len bytes) is one of ch's recent release ids that the other
 * side than by acted on, which it then forgets: that side has woken a
 * waiter for this release (mu held). */
static int seen_take(channel *ch, const char *id, size_t len,
                     enum seen_side by)
{
    if (len == 0 || len >= SEEN_ID_MAX)
        return 0;
    for (int i = 0; i < SEEN_MAX; i++) {
        seen_id *s = &ch->seen[i];

        if (s->side != by && strlen(s->id) == len
            && memcmp(s->id, id, len) == 0) {
            s->id[0] = '\0';
            return 1;
        }
    }
    return 0;
}

/* Remembers id (len bytes) as acted on by side by (mu held). */
static void seen_add(channel *ch, const char *id, size_t len,
                     enum seen_side by)
{
    seen_id *s = &ch->seen[ch->seen_next];

    if (len == 0 || len >= SEEN_ID_MAX)
        return;
    memcpy(s->id, id, len);
    s->id[len] = '\0';
    s->side = by;
    ch->seen_next = (ch->seen_next + 1) % SEEN_MAX;
}

/* A release's message: wakes one waiter, unless this client's releaser
 * has woken one for that release already (mu held). */
static void on_message(channel *ch, const redisReply *payload)
{
    if (payload->type == REDIS_REPLY_STRING) {
        if (seen_take(ch, payload->str, payload->len, SEEN_BY_MESSAGE))
            return;
        seen_add(ch, payload->str, payload->len, SEEN_BY_MESSAGE);
    }
    wake_one(ch, payload);
}

static void remove_channel(dlock__notifier *n, channel *victim)
{
    channel **link = &n->channels;

    while (*link != victim)
        link = &(*link)->next;
    *link = victim->next;
    dlock__free(victim->name);
    dlock__free(victim);
}

/* The kind and channel of a pushed reply ["subscribe"|"unsubscribe"|
 * "message", channel, x]; 0 if r is not one. */
static int push_parts(const redisReply *r, const redisReply **kind,
                      const redisReply **name)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3)
        return 0;
    *kind = r->element[0];
    *name = r->element[1];
    return (*kind)->type == REDIS_REPLY_STRING
           && (*name)->type == REDIS_REPLY_STRING;
}

/* Handles one pushed reply on the subscriber's connection. */
static void handle_push(dlock__notifier *n, const redisReply *r)
{
    const redisReply *kind, *name;
    channel *ch;

    if (!push_parts(r, &kind, &name))
        return;
    ch = find_channel(n, name->str, name->len);
    if (ch == NULL)
        return;
    if (strcmp(kind->str, "message") == 0) {
        on_message(ch, r->element[2]);
    } else if (strcmp(kind->str, "subscribe") == 0) {
        if (ch->state == SENT)
            ch->state = SUBSCRIBED;
        /* Releases before this point were not seen: everyone retries. */
        wake_all(ch);
    } else if (strcmp(kind->str, "unsubscribe") == 0 && ch->state == LEAVING) {
        if (ch->refs == 0)
            remove_channel(n, ch);
        else
            ch->state = WANT;
    }
}

/* Marks every channel to be subscribed again on a new connection and wakes
 * all waiters, who fall back to polling until then. */
static void connection_lost(dlock__notifier *n)
{
    channel *ch = n->channels;

    while (ch != NULL) {
        channel *next = ch->next;

        if (ch->refs == 0) {
            remove_channel(n, ch);
        } else {
            ch->state = WANT;
            wake_all(ch);
        }
        ch = next;
    }
}

/* Builds "SUBSCRIBE a b ..." or "UNSUBSCRIBE ..." for channels in state
 * from, moving them to state to; returns the argument count (0: none). */
static int collect(dlock__notifier *n, const char **argv, int max,
                   const char *verb, enum channel_state from, int want_refs,
                   enum channel_state to)
{
    int argc = 1;

    argv[0] = verb;
    for (channel *ch = n->channels; ch != NULL && argc < max; ch = ch->next) {
        int has_refs = ch->refs > 0;

        if (ch->state != from || has_refs != want_refs)
            continue;
        argv[argc++] = ch->name;
        ch->state = to;
    }
    return argc > 1 ? argc : 0;
}

/* Sends pending SUBSCRIBE/UNSUBSCRIBE commands (mu held; the connection is
 * the subscriber thread's alone, and writes are small). */
static dlock_err send_changes(dlock__notifier *n, dlock__msg *m)
{
    const char *argv[65];
    channel *ch = n->channels;
    dlock_err err = DLOCK_OK;
    int argc;

    /* Channels left before their SUBSCRIBE went out need nothing. */
    while (ch != NULL) {
        channel *next = ch->next;

        if (ch->refs == 0 && ch->state == WANT)
            remove_channel(n, ch);
        ch = next;
    }
    for (;;) {
        char *cmd = NULL;
        int len;

        argc = collect(n, argv, 65, "SUBSCRIBE", WANT, 1, SENT);
        if (argc == 0)
            argc = collect(n, argv, 65, "UNSUBSCRIBE", SUBSCRIBED, 0, LEAVING);
        if (argc == 0)
            return DLOCK_OK;
        len = redisFormatCommandArgv(&cmd, argc, argv, NULL);
        if (len < 0)
            return dlock__msg_set(m, DLOCK_NOMEM, "formatting SUBSCRIBE");
        err = dlock__conn_send(n->conn, cmd, (size_t)len,
                               dlock__client_io_deadline(n->client), m);
        free(cmd); /* hiredis allocates with malloc */
        if (err != DLOCK_OK)
            return err;
    }
}

/* Reads every complete reply available now (mu held on entry and exit,
 * released while reading: the connection is this thread's alone), and
 * handles them under mu. */
static dlock_err read_pushes(dlock__notifier *n, dlock__msg *m)
{
    for (;;) {
        redisReply *r[PUSHES_MAX];
        dlock_err err = DLOCK_OK;
        int got = 0;

        pthread_mutex_unlock(&n->mu);
        while (got < PUSHES_MAX) {
            err = dlock__conn_recv(n->conn, 0, &r[got], m);
            if (err != DLOCK_OK || r[got] == NULL)
                break;
            got++;
        }
        pthread_mutex_lock(&n->mu);
        for (int i = 0; i < got; i++) {
            handle_push(n, r[i]);
            freeReplyObject(r[i]);
        }
        if (err != DLOCK_OK || got < PUSHES_MAX)
            return err;
    }
}

/* Waits for the connection or the wake pipe (mu not held). */
static void wait_events(dlock__notifier *n, int conn_fd, int timeout_ms)
{
    struct pollfd fds[2] = {
        {.fd = n->pipe_fds[0], .events = POLLIN},
        {.fd = conn_fd, .events = POLLIN},
    };

    if (poll(fds, conn_fd >= 0 ? 2 : 1, timeout_ms) < 0 && errno != EINTR)
        return;
    if (fds[0].revents & POLLIN)
        drain_pipe(n);
}

/* One turn with a live connection: send changes, wait, read (mu held). */
static void serve(dlock__notifier *n)
{
    dlock__msg m;
    int fd = dlock__conn_fd(n->conn);
    int buffered;
    dlock_err err = send_changes(n, &m);

    if (err == DLOCK_OK) {
        buffered = dlock__conn_buffered(n->conn);
        pthread_mutex_unlock(&n->mu);
        if (!buffered)
            wait_events(n, fd, IDLE_TURN_MS);
        pthread_mutex_lock(&n->mu);
        if (!n->stop)
            err = read_pushes(n, &m);
    }
    if (err != DLOCK_OK) {
        dlock__conn_free(n->conn);
        n->conn = NULL;
        connection_lost(n);
    }
}

/* Connects with back-off (mu held on entry and exit). */
static void reconnect(dlock__notifier *n)
{
    dlock__msg m;
    dlock__conn *conn = NULL;
    dlock_err err;

    pthread_mutex_unlock(&n->mu);
    err = dlock__client_connect(n->client, &conn, &m);
    if (err != DLOCK_OK)
        wait_events(n, -1, (int)(n->backoff_us / 1000));
    pthread_mutex_lock(&n->mu);
    if (err != DLOCK_OK) {
        n->backoff_us = n->backoff_us * 2 > BACKOFF_MAX_US ? BACKOFF_MAX_US
                                                           : n->backoff_us * 2;
        return;
    }
    n->backoff_us = BACKOFF_MIN_US;
    n->conn = conn;
    /* Every channel is WANT already (joined since, or reset when the last
     * connection was lost): serve() subscribes them, and the confirmation
     * wakes their waiters.  Waking them now would only cost each a try. */
}

static void *notifier_main(void *arg)
{
    dlock__notifier *n = arg;

    pthread_mutex_lock(&n->mu);
    while (!n->stop) {
        if (n->channels == NULL && n->conn == NULL) {
            /* Nobody waits: do not hold a connection open for nothing. */
            pthread_mutex_unlock(&n->mu);
            wait_events(n, -1, -1);
            pthread_mutex_lock(&n->mu);
        } else if (n->conn == NULL) {
            reconnect(n);
        } else {
            serve(n);
        }
    }
    pthread_mutex_unlock(&n->mu);
    dlock__tls_thread_end();
    return NULL;
}

dlock_err dlock__notifier_new(dlock_client *c, dlock__notifier **out)
{
    dlock__notifier *n = dlock__calloc(1, sizeof(*n));

    *out = NULL;
    if (n == NULL)
        return DLOCK_NOMEM;
    n->client = c;
    n->backoff_us = BACKOFF_MIN_US;
    if (pipe2(n->pipe_fds, O_NONBLOCK | O_CLOEXEC) != 0)
        goto fail_pipe;
    if (pthread_mutex_init(&n->mu, NULL) != 0)
        goto fail_mutex;
    if (dlock__thread_start(&n->thread, notifier_main, n) != 0)
        goto fail_thread;
    *out = n;
    return DLOCK_OK;
fail_thread:
    pthread_mutex_destroy(&n->mu);
fail_mutex:
    close(n->pipe_fds[0]);
    close(n->pipe_fds[1]);
fail_pipe:
    dlock__free(n);
    return DLOCK_SYSTEM;
}

void dlock__notifier_free(dlock__notifier *n)
{
    if (n == NULL)
        return;
    pthread_mutex_lock(&n->mu);
    n->stop = 1;
    pthread_mutex_unlock(&n->mu);
    poke(n);
    pthread_join(n->thread, NULL);
    while (n->channels != NULL)
        remove_channel(n, n->channels);
    dlock__conn_free(n->conn);
    while (n->nidle > 0) {
        n->nidle--;
        dlock__conn_free(n->idle[n->nidle].conn);
        dlock__free(n->idle[n->nidle].stale);
    }
    close(n->pipe_fds[0]);
    close(n->pipe_fds[1]);
    pthread_mutex_destroy(&n->mu);
    dlock__free(n);
}

/* Finds or creates the channel entry (mu held). */
static channel *join_channel(dlock__notifier *n, const char *name)
{
    channel *ch = find_channel(n, name, strlen(name));

    if (ch != NULL)
        return ch;
    ch = dlock__calloc(1, sizeof(*ch));
    if (ch == NULL)
        return NULL;
    ch->name = dlock__strdup(name);
    if (ch->name == NULL) {
        dlock__free(ch);
        return NULL;
    }
    ch->state = WANT;
    ch->next = n->channels;
    n->channels = ch;
    return ch;
}

/* A condition variable on the monotonic clock, as dlock__notify_wait's
 * deadlines are.  Returns 0 or an errno value. */
static int monotonic_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);

    if (rc != 0)
        return rc;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

dlock_err dlock__notify_join(dlock__notifier *n, const char *name,
                             dlock__waiter **out, int *subscribed)
{
    dlock__waiter *w = dlock__calloc(1, sizeof(*w));
    channel *ch;
    int need_send;

    *out = NULL;
    *subscribed = 0;
    if (w == NULL)
        return DLOCK_NOMEM;
    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        dlock__free(w);
        return DLOCK_SYSTEM;
    }
    if (monotonic_cond_init(&w->cv) != 0) {
        pthread_mutex_destroy(&w->mu);
        dlock__free(w);
        return DLOCK_SYSTEM;
    }
    pthread_mutex_lock(&n->mu);
    ch = join_channel(n, name);
    if (ch == NULL) {
        pthread_mutex_unlock(&n->mu);
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        dlock__free(w);
        return DLOCK_NOMEM;
    }
    w->ch = ch;
    w->prev = ch->tail;
    if (ch->tail != NULL)
        ch->tail->next = w;
    else
        ch->head = w;
    ch->tail = w;
    ch->refs++;
    *subscribed = ch->state == SUBSCRIBED;
    /* Only a SUBSCRIBE to send needs the subscriber thread now. */
    need_send = ch->state == WANT;
    pthread_mutex_unlock(&n->mu);
    if (need_send)
        poke(n);
    *out = w;
    return DLOCK_OK;
}

int dlock__notify_released(dlock__notifier *n, const char *name,
                           const char *id)
{
    const size_t len = strlen(id);
    channel *ch;
    int woke = 0;

    if (len == 0 || len >= SEEN_ID_MAX)
        return 0;
    pthread_mutex_lock(&n->mu);
    ch = find_channel(n, name, strlen(name));
    /* Nobody waiting: the message wakes whoever joins meanwhile. */
    if (ch != NULL && ch->head != NULL
        && !seen_take(ch, id, len, SEEN_BY_RELEASER)) {
        seen_add(ch, id, len, SEEN_BY_RELEASER);
        wake_one(ch, NULL);
        woke = 1;
    }
    pthread_mutex_unlock(&n->mu);
    return woke;
}

int dlock__notify_has_waiters(dlock__notifier *n, const char *name)
{
    channel *ch;
    int has;

    pthread_mutex_lock(&n->mu);
    ch = find_channel(n, name, strlen(name));
    has = ch != NULL && ch->head != NULL;
    pthread_mutex_unlock(&n->mu);
    return has;
}

int dlock__notify_wait(dlock__notifier *n, dlock__waiter *w,
                       int64_t deadline_us)
{
    struct timespec ts = dlock__timespec_of(deadline_us);
    int woken;

    if (w->direct != NULL)
        return direct_wait(n, w, deadline_us);
    pthread_mutex_lock(&w->mu);
    while (!w->woken)
        if (pthread_cond_timedwait(&w->cv, &w->mu, &ts) == ETIMEDOUT)
            break;
    woken = w->woken;
    w->woken = 0;
    pthread_mutex_unlock(&w->mu);
    return woken;
}

size_t dlock__notify_take_message(dlock__notifier *n, dlock__waiter *w,
                                  char *buf, size_t cap)
{
    size_t len;

    /* A direct waiter's payload is written by its own thread only. */
    if (w->direct == NULL)
        pthread_mutex_lock(&n->mu);
    len = w->msg_len <= cap ? w->msg_len : 0;
    memcpy(buf, w->msg, len);
    w->msg_len = 0;
    if (w->direct == NULL)
        pthread_mutex_unlock(&n->mu);
    return len;
}

void dlock__notify_leave(dlock__notifier *n, dlock__waiter *w)
{
    channel *ch;

    if (w == NULL)
        return;
    if (w->direct != NULL) {
        direct_leave(n, w);
        return;
    }
    pthread_mutex_lock(&n->mu);
    ch = w->ch;
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        ch->head = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    else
        ch->tail = w->prev;
    /* A wake-up this waiter did not use belongs to the next one. */
    if (is_woken(w))
        wake_one(ch, NULL);
    /* The last one out leaves the UNSUBSCRIBE to the subscriber thread's
     * next turn (see the top of this file): no poke. */
    ch->refs--;
    pthread_mutex_unlock(&n->mu);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    dlock__free(w);
}

/*
 * Direct waiters.  A fair waiter holds the lock when its grant message
 * arrives (lock_fair.h), so the message's way to the waiting thread is the
 * whole hand-off.  Through the subscriber thread it is two thread
 * wake-ups, one after the other (the subscriber's, then the waiter's); a
 * direct waiter subscribes its own channel on a connection of its own and
 * sleeps in poll(2) on that socket, so the message wakes the waiting
 * thread itself, at the moment the release's reply wakes the releaser.
 * The price is one connection per direct waiter at a time; they are kept
 * (up to DIRECT_IDLE_MAX) for the next one.
 *
 * Between the message and the waiter's return nothing else goes over the
 * wire: a waiter that leaves sends no UNSUBSCRIBE (a loopback send wakes
 * Redis and runs its TCP path on the waiter's time, on the hand-off's
 * path).  Its channel stays subscribed, named in the kept connection's
 * entry, until the next direct waiter takes the connection and sends
 * "UNSUBSCRIBE old" and "SUBSCRIBE new" in one write, or the connection
 * is closed.  A grant channel is one token's, so nothing is published on
 * it after its wait ends but a stray nudge; replies about other channels
 * (late messages, the UNSUBSCRIBE's confirmation) are skipped by name.
 */

/* Sends "UNSUBSCRIBE stale" (if stale is not NULL) and "SUBSCRIBE name" in
 * one write on conn, giving up at the I/O timeout or deadline_us
 * (clock.h), whichever comes first. */
static dlock_err direct_send(dlock__notifier *n, dlock__conn *conn,
                             const char *stale, const char *name,
                             int64_t deadline_us, dlock__msg *m)
{
    const char *unsub[] = {"UNSUBSCRIBE", stale};
    const char *sub[] = {"SUBSCRIBE", name};
    enum { HALF = 512 };
    char buf[2 * HALF];
    size_t len = 0, more;
    int64_t io = dlock__client_io_deadline(n->client);

    /* Both names were accepted here once: stale fits if name does. */
    if (stale != NULL
        && (len = dlock__resp_format(buf, HALF, 2, unsub, NULL)) > HALF)
        len = 0;
    more = dlock__resp_format(buf + len, HALF, 2, sub, NULL);
    if (more > HALF)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "channel name of %zu bytes is too long",
                              strlen(name));
    len += more;
    return dlock__conn_send(conn, buf, len,
                            deadline_us < io ? deadline_us : io, m);
}

/* Gives d a connection (a kept one, else a new one) with its SUBSCRIBE
 * sent, by deadline_us (the waiter's own: a connect or handshake behind a
 * silent network must not hold it past the end of its wait); d->conn
 * stays NULL on failure. */
static dlock_err direct_subscribe(dlock__notifier *n, direct_sub *d,
                                  int64_t deadline_us, dlock__msg *m)
{
    direct_idle kept = {NULL, NULL};
    dlock_err err;

    pthread_mutex_lock(&n->mu);
    if (n->nidle > 0)
        kept = n->idle[--n->nidle];
    pthread_mutex_unlock(&n->mu);
    /* Not counted as a reconnect in the client's stats: nothing failed. */
    if (kept.conn == NULL) {
        err = dlock__client_connect_until(n->client, deadline_us, &kept.conn,
                                          m);
        if (err != DLOCK_OK)
            return err;
    }
    err = direct_send(n, kept.conn, kept.stale, d->name, deadline_us, m);
    dlock__free(kept.stale);
    if (err != DLOCK_OK) {
        dlock__conn_free(kept.conn);
        return err;
    }
    d->conn = kept.conn;
    return DLOCK_OK;
}

dlock_err dlock__notify_join_direct(dlock__notifier *n, const char *name,
                                    int64_t deadline_us, dlock__waiter **out)
{
    dlock__waiter *w = dlock__calloc(1, sizeof(*w));
    direct_sub *d = dlock__calloc(1, sizeof(*d));
    dlock__msg m;
    dlock_err err = DLOCK_NOMEM;

    *out = NULL;
    if (w != NULL && d != NULL)
        d->name = dlock__strdup(name);
    if (d != NULL && d->name != NULL)
        err = direct_subscribe(n, d, deadline_us, &m);
    if (err != DLOCK_OK) {
        if (d != NULL)
            dlock__free(d->name);
        dlock__free(d);
        dlock__free(w);
        return err;
    }
    w->direct = d;
    *out = w;
    return DLOCK_OK;
}

/* Handles one reply on a direct waiter's connection: 1 if it wakes the
 * waiter (its SUBSCRIBE confirmed: a release before it was missed; or a
 * message on its channel, whose payload is kept). */
static int direct_push(dlock__waiter *w, const redisReply *r)
{
    const redisReply *kind, *name;

    if (!push_parts(r, &kind, &name) || name->len != strlen(w->direct->name)
        || memcmp(name->str, w->direct->name, name->len) != 0)
        return 0;
    if (strcmp(kind->str, "subscribe") == 0)
        return 1;
    if (strcmp(kind->str, "message") != 0)
        return 0;
    keep_payload(w, r->element[2]);
    return 1;
}

int dlock__notify_direct_confirmed(dlock__notifier *n, dlock__waiter *w,
                                   int64_t deadline_us)
{
    direct_sub *d;
    int64_t io = dlock__client_io_deadline(n->client);
    dlock__msg m;

    if (w == NULL || w->direct == NULL || w->direct->conn == NULL)
        return 0;
    d = w->direct;
    if (io < deadline_us)
        deadline_us = io;
    for (;;) {
        const redisReply *kind, *name;
        redisReply *r;
        int confirmed;

        /* Replies about a kept connection's old channel come first (the
         * UNSUBSCRIBE's, late messages): skipped by name. */
        if (dlock__now_us() >= deadline_us)
            return 0;
        if (dlock__conn_recv(d->conn, deadline_us, &r, &m) != DLOCK_OK) {
            dlock__conn_free(d->conn);
            d->conn = NULL;
            return 0;
        }
        confirmed = push_parts(r, &kind, &name)
                    && strcmp(kind->str, "subscribe") == 0
                    && name->len == strlen(d->name)
                    && memcmp(name->str, d->name, name->len) == 0;
        freeReplyObject(r);
        if (confirmed)
            return 1;
    }
}

/* dlock__notify_wait for a direct waiter.  A failed connection wakes it
 * (a message may have been lost: the caller tries again); the next wait
 * connects and subscribes anew, whose confirmation wakes it again. */
static int direct_wait(dlock__notifier *n, dlock__waiter *w,
                       int64_t deadline_us)
{
    direct_sub *d = w->direct;
    dlock__msg m;

    if (d->conn == NULL
        && direct_subscribe(n, d, deadline_us, &m) != DLOCK_OK) {
        int64_t retry = dlock__now_us() + DIRECT_RETRY_US;
        struct timespec ts = dlock__timespec_of(
            retry < deadline_us ? retry : deadline_us);

        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        return 0;
    }
    for (;;) {
        struct pollfd pfd = {.fd = dlock__conn_fd(d->conn), .events = POLLIN};
        int woken = 0;
        int64_t left;

        for (;;) {
            redisReply *r;

            if (dlock__conn_recv(d->conn, 0, &r, &m) != DLOCK_OK) {
                dlock__conn_free(d->conn);
                d->conn = NULL;
                return 1;
            }
            if (r == NULL)
                break;
            woken |= direct_push(w, r);
            freeReplyObject(r);
            /* What is already read is handled; another read(2), which
             * would find nothing, is not worth its time on the hand-off's
             * path: a later reply waits for the next wait or taker. */
            if (woken && !dlock__conn_buffered(d->conn))
                break;
        }
        if (woken)
            return 1;
        left = deadline_us - dlock__now_us();
        if (left <= 0)
            return 0;
        if (dlock__conn_buffered(d->conn))
            continue;
        /* Rounded up: never wake before the deadline. */
        left = (left + 999) / 1000;
        if (poll(&pfd, 1, left < IDLE_TURN_MS ? (int)left : IDLE_TURN_MS) < 0
            && errno != EINTR)
            return 0;
    }
}

/* Leaves a direct waiter's channel: its connection is kept for the next
 * one with the channel still subscribed (see above), or closed. */
static void direct_leave(dlock__notifier *n, dlock__waiter *w)
{
    direct_sub *d = w->direct;

    if (d->conn != NULL) {
        pthread_mutex_lock(&n->mu);
        if (n->nidle < DIRECT_IDLE_MAX) {
            n->idle[n->nidle++] = (direct_idle){d->conn, d->name};
            d->conn = NULL;
            d->name = NULL;
        }
        pthread_mutex_unlock(&n->mu);
    }
    dlock__conn_free(d->conn);
    dlock__free(d->name);
    dlock__free(d);
    dlock__free(w);
}

int dlock__notify_kept(dlock__notifier *n)
{
    int kept;

    pthread_mutex_lock(&n->mu);
    kept = n->nidle;
    pthread_mutex_unlock(&n->mu);
    return kept;
}

void dlock__notify_set_fifo(dlock__notifier *n, dlock__waiter *w)
{
    pthread_mutex_lock(&n->mu);
    w->keeps_place = 1;
    pthread_mutex_unlock(&n->mu);
}
