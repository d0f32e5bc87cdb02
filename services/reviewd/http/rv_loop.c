/*
 * rv_loop.c: one event-loop thread: the HTTP sockets it serves, an
 * eventfd for new connections, posted work and stop, and PostgreSQL's
 * sockets, in one epoll set (see rv_loop.h).
 *
 * One pass: send the statements queued, wait (bounded by the owner's
 * timers and the PostgreSQL connections' own), then handle each event:
 * the eventfd (adopt queued connections, take posted items), a
 * PostgreSQL socket (its callbacks answer requests), an HTTP socket
 * (ops->io); then run the items posted, the loop's own included.
 *
 * An epoll event's data is a tag for the loop's own descriptors (small
 * numbers) or the owner's pointer for an HTTP socket.
 */
#include "http/rv_loop.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* epoll tags; PostgreSQL connection i is TAG_PG + i.  Anything at or
 * above TAG_END is a pointer of rv_loop_watch. */
enum { TAG_WAKE = 1, TAG_PG = 2, TAG_END = TAG_PG + RV_LOOP_PG };

/* A connection waiting to be adopted. */
typedef struct pending {
    struct pending *next;
    int fd;
    socklen_t addrlen;
    struct sockaddr_storage addr;
} pending;

struct rv_loop {
    rv_loop_ops ops;
    void *cls;
    int ndba; /* 0 without a database */
    rv_dba *dba[RV_LOOP_PG];
    int epfd;
    int wakefd;
    atomic_int woken;               /* wakefd was written and not read yet */
    int pg_fd[RV_LOOP_PG];          /* in the epoll set now (-1: none) */
    uint32_t pg_events[RV_LOOP_PG]; /* with these events */
    pthread_t thread;
    int started;
    pthread_mutex_t mu; /* guards queue, posted and stopping */
    pending *queue;
    rv_loop_item *posted; /* from other threads, newest first */
    int stopping;
    rv_loop_item *local; /* the loop's own, in order */
    rv_loop_item **local_tail;
    atomic_int stop; /* read by the thread */
};

static _Thread_local rv_loop *current;

rv_loop *rv_loop_current(void)
{
    return current;
}

/*
 * A pass's reads go out together: a connection that already has reads
 * queued in this pass takes the next one too, so rv_dba_flush sends them
 * all with one sync (one sendmsg, one wake-up of one backend) instead of
 * one per connection.  Otherwise the least loaded ready connection.
 */
rv_dba *rv_loop_db(rv_loop *l)
{
    rv_dba *best = NULL;
    int i, least = -1;

    for (i = 0; i < l->ndba; i++)
        if (rv_dba_open_batch(l->dba[i]) > 0)
            return l->dba[i];
    for (i = 0; i < l->ndba; i++) {
        const int load = rv_dba_load(l->dba[i]);

        if (load >= 0 && (least < 0 || load < least)) {
            least = load;
            best = l->dba[i];
        }
    }
    if (least != 0) {
        /* All busy, or none ready: one more is wanted. */
        for (i = 0; i < l->ndba; i++) {
            if (rv_dba_load(l->dba[i]) < 0) {
                rv_dba_want(l->dba[i]);
                break;
            }
        }
    }
    return best;
}

/* Wakes the loop, once for any number of callers until it reads. */
static void wake(rv_loop *l)
{
    const uint64_t one = 1;

    if (atomic_exchange(&l->woken, 1) == 0) {
        /* Cannot fail short of a counter at its maximum. */
        (void)write(l->wakefd, &one, sizeof(one));
    }
}

void rv_loop_post(rv_loop *l, rv_loop_item *item)
{
    item->next = NULL;
    if (current == l) {
        *l->local_tail = item;
        l->local_tail = &item->next;
        return;
    }
    pthread_mutex_lock(&l->mu);
    item->next = l->posted;
    l->posted = item;
    pthread_mutex_unlock(&l->mu);
    wake(l);
}

/* Runs the loop's own items, those they post included. */
static void run_local(rv_loop *l)
{
    while (l->local != NULL) {
        rv_loop_item *item = l->local;

        l->local = item->next;
        if (l->local == NULL)
            l->local_tail = &l->local;
        item->run(item);
    }
}

int rv_loop_watch(rv_loop *l, int fd, void *ptr)
{
    struct epoll_event ev;

    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.ptr = ptr;
    return epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* Puts connection i's socket in the epoll set as it wants.
 *
 * pg_fd[i] is only a number: the socket behind it is libpq's, and libpq
 * closes it (PQfinish, or PQconnectPoll moving on to the next address)
 * before it opens another, so by the time the number differs here the
 * old socket is closed, and closing it took it out of the epoll set
 * (nothing here dups it).  Its number is then free for any thread to
 * reuse: the listener's accept4 may already have given it to a client
 * that this loop or another serves.  So the old number is never passed
 * to epoll_ctl again (an EPOLL_CTL_DEL on it removed that client's
 * registration, and ThreadSanitizer reported the use of a descriptor
 * another thread had created).  For the same reason the same number may
 * be a new socket, no longer in the set: EPOLL_CTL_MOD then fails with
 * ENOENT and the socket is added. */
static void watch_pg(rv_loop *l, int i)
{
    struct epoll_event ev;
    uint32_t events;
    int fd, rc;

    rv_dba_watch(l->dba[i], &fd, &events);
    if (fd == l->pg_fd[i] && events == l->pg_events[i])
        return;
    if (fd != l->pg_fd[i])
        l->pg_fd[i] = -1; /* closed, so already out of the set */
    l->pg_events[i] = events;
    if (fd < 0)
        return;
    memset(&ev, 0, sizeof(ev));
    ev.events = events;
    ev.data.u64 = TAG_PG + (uint64_t)i;
    if (fd == l->pg_fd[i]) {
        rc = epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev);
        if (rc != 0 && errno == ENOENT) /* a new socket on the number */
            rc = epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev);
    } else {
        rc = epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev);
        if (rc != 0 && errno == EEXIST) /* already in, as this socket */
            rc = epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev);
    }
    /* As before, a socket that cannot be watched is left to its
     * statements' deadlines (rv_dba_tick). */
    (void)rc;
    l->pg_fd[i] = fd;
}

/* The eventfd: adopts every queued connection and takes the posted
 * items (in the order they were posted) for run_local. */
static void take_queued(rv_loop *l)
{
    pending *p, *next;
    rv_loop_item *posted, *rev = NULL;
    uint64_t n;

    if (read(l->wakefd, &n, sizeof(n)) < 0 && errno != EAGAIN)
        return;
    atomic_store(&l->woken, 0);
    pthread_mutex_lock(&l->mu);
    p = l->queue;
    l->queue = NULL;
    posted = l->posted;
    l->posted = NULL;
    pthread_mutex_unlock(&l->mu);
    for (; p != NULL; p = next) {
        next = p->next;
        l->ops.adopt(l->cls, l, p->fd, (struct sockaddr *)&p->addr,
                     p->addrlen);
        free(p);
    }
    while (posted != NULL) {
        rv_loop_item *item = posted;

        posted = item->next;
        item->next = rev;
        rev = item;
    }
    if (rev != NULL) {
        *l->local_tail = rev;
        while (rev->next != NULL)
            rev = rev->next;
        l->local_tail = &rev->next;
    }
}

/* The wait's bound: the owner's timers and the connections', -1 for
 * none; 0 when items wait to run. */
static int wait_ms(rv_loop *l)
{
    int i, ms = l->ops.tick(l->cls);

    if (l->local != NULL)
        return 0;
    for (i = 0; i < l->ndba; i++) {
        const int t = rv_dba_tick(l->dba[i]);

        if (t >= 0 && (ms < 0 || t < ms))
            ms = t;
    }
    return ms;
}

static void *loop_main(void *arg)
{
    rv_loop *l = arg;
    struct epoll_event evs[64];
    int i;

    current = l;
    /* One connection is made at once, so the first reads after a start
     * are the loop's, not the workers'; more follow as reads need them. */
    if (l->ndba > 0)
        rv_dba_want(l->dba[0]);
    while (!atomic_load(&l->stop)) {
        int timeout, n;

        /* The statements this pass queued go out, one write per
         * connection; one that fails ends its statements, whose
         * callbacks hand their requests to the workers. */
        for (i = 0; i < l->ndba; i++)
            (void)rv_dba_flush(l->dba[i]);
        run_local(l);
        timeout = wait_ms(l);
        for (i = 0; i < l->ndba; i++)
            watch_pg(l, i);
        n = epoll_wait(l->epfd, evs, 64, timeout);
        if (n < 0 && errno != EINTR)
            break; /* not expected: the descriptors are ours */
        for (i = 0; i < n; i++) {
            const uint64_t tag = evs[i].data.u64;

            if (tag == TAG_WAKE)
                take_queued(l);
            else if (tag >= TAG_PG && tag < TAG_PG + (uint64_t)l->ndba)
                rv_dba_handle(l->dba[tag - TAG_PG]);
            else if (tag >= TAG_END)
                l->ops.io(l->cls, evs[i].data.ptr, evs[i].events);
        }
        run_local(l);
    }
    /* Stopping: every statement ends (its callback answers, or hands
     * the request to the stopped pool, which refuses it), what was
     * posted runs, and the owner closes what is left. */
    for (i = 0; i < l->ndba; i++)
        rv_dba_close(l->dba[i]);
    take_queued(l);
    run_local(l);
    l->ops.stopped(l->cls);
    run_local(l);
    current = NULL;
    return NULL;
}

rv_loop *rv_loop_start(rv_db *db, const rv_loop_ops *ops, void *cls,
                       char *errbuf, size_t errlen)
{
    rv_loop *l = calloc(1, sizeof(*l));
    struct epoll_event ev;
    int i, rc;

    if (l == NULL) {
        snprintf(errbuf, errlen,
                 "http: cannot make an event loop: out of "
                 "memory");
        return NULL;
    }
    l->ops = *ops;
    l->cls = cls;
    l->local_tail = &l->local;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    for (i = 0; db != NULL && i < RV_LOOP_PG; i++) {
        l->pg_fd[i] = -1;
        l->dba[i] = rv_dba_new(db);
        if (l->dba[i] == NULL)
            break;
        l->ndba++;
    }
    pthread_mutex_init(&l->mu, NULL);
    atomic_init(&l->stop, 0);
    atomic_init(&l->woken, 0);
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.u64 = TAG_WAKE;
    rc = l->epfd < 0 || l->wakefd < 0 || (db != NULL && l->ndba < RV_LOOP_PG)
                 || epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wakefd, &ev) != 0
             ? -1
             : 0;
    if (rc == 0) {
        rc = pthread_create(&l->thread, NULL, loop_main, l);
        l->started = rc == 0;
    }
    if (rc != 0) {
        snprintf(errbuf, errlen, "http: cannot start an event loop: %s",
                 strerror(rc > 0 ? rc : errno));
        rv_loop_free(l);
        return NULL;
    }
    return l;
}

int rv_loop_hand(rv_loop *l, int fd, const struct sockaddr *addr,
                 socklen_t addrlen)
{
    pending *p = malloc(sizeof(*p));

    if (p == NULL || addrlen > sizeof(p->addr)) {
        free(p);
        return -1;
    }
    p->fd = fd;
    p->addrlen = addrlen;
    memcpy(&p->addr, addr, addrlen);
    pthread_mutex_lock(&l->mu);
    if (l->stopping) {
        pthread_mutex_unlock(&l->mu);
        free(p);
        return -1;
    }
    p->next = l->queue;
    l->queue = p;
    pthread_mutex_unlock(&l->mu);
    wake(l);
    return 0;
}

void rv_loop_stop(rv_loop *l)
{
    const uint64_t one = 1;
    pending *p, *next;

    if (l == NULL || !l->started)
        return;
    pthread_mutex_lock(&l->mu);
    l->stopping = 1;
    p = l->queue;
    l->queue = NULL;
    pthread_mutex_unlock(&l->mu);
    atomic_store(&l->stop, 1);
    (void)write(l->wakefd, &one, sizeof(one));
    pthread_join(l->thread, NULL);
    l->started = 0;
    for (; p != NULL; p = next) {
        next = p->next;
        l->ops.adopt(l->cls, NULL, p->fd, (struct sockaddr *)&p->addr,
                     p->addrlen);
        free(p);
    }
}

void rv_loop_free(rv_loop *l)
{
    int i;

    if (l == NULL)
        return;
    rv_loop_stop(l);
    for (i = 0; i < l->ndba; i++)
        rv_dba_free(l->dba[i]);
    if (l->epfd >= 0)
        close(l->epfd);
    if (l->wakefd >= 0)
        close(l->wakefd);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
