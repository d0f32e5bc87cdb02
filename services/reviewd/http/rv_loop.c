/*
 * rv_loop.c: one event-loop thread: MHD's epoll descriptor, an eventfd
 * for new connections and stop, and PostgreSQL's socket, in one epoll
 * set (see rv_loop.h).
 *
 * One pass: wait (bounded by MHD's timeout and the connection's next
 * deadline), adopt queued connections, read PostgreSQL (whose callbacks
 * resume the connections they answer), then run MHD once if anything
 * may be waiting for it: its descriptor was ready, its timeout came, or
 * a connection was added or resumed in this pass (MHD_resume_connection
 * wakes the daemon through its eventfd, which the same pass handles).
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

/* epoll tags; PostgreSQL connection i is TAG_PG + i. */
enum { TAG_MHD = 1, TAG_WAKE = 2, TAG_PG = 3 };

/* A connection waiting to be adopted. */
typedef struct pending {
    struct pending *next;
    int fd;
    socklen_t addrlen;
    struct sockaddr_storage addr;
} pending;

struct rv_loop {
    struct MHD_Daemon *daemon;
    rv_loop_adopt_fn adopt;
    void *cls;
    int ndba; /* 0 without a database */
    rv_dba *dba[RV_LOOP_PG];
    int epfd;
    int wakefd;
    int mhd_fd;
    int pg_fd[RV_LOOP_PG];          /* in the epoll set now (-1: none) */
    uint32_t pg_events[RV_LOOP_PG]; /* with these events */
    pthread_t thread;
    int started;
    pthread_mutex_t mu; /* guards queue and stopping */
    pending *queue;
    int stopping;
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

void rv_loop_wake(rv_loop *l)
{
    const uint64_t one = 1;

    /* Cannot fail short of a counter at its maximum. */
    (void)write(l->wakefd, &one, sizeof(one));
}

/* Puts connection i's socket in the epoll set as it wants. */
static void watch_pg(rv_loop *l, int i)
{
    struct epoll_event ev;
    uint32_t events;
    int fd;

    rv_dba_watch(l->dba[i], &fd, &events);
    if (fd == l->pg_fd[i] && events == l->pg_events[i])
        return;
    if (l->pg_fd[i] >= 0 && fd != l->pg_fd[i]) {
        /* Fails harmlessly when libpq already closed the old socket. */
        (void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->pg_fd[i], NULL);
        l->pg_fd[i] = -1;
    }
    l->pg_events[i] = events;
    if (fd < 0)
        return;
    memset(&ev, 0, sizeof(ev));
    ev.events = events;
    ev.data.u32 = TAG_PG + (uint32_t)i;
    if (epoll_ctl(l->epfd, fd == l->pg_fd[i] ? EPOLL_CTL_MOD : EPOLL_CTL_ADD,
                  fd, &ev)
            != 0
        && errno == EEXIST) {
        /* A new socket on the old number, still registered. */
        (void)epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev);
    }
    l->pg_fd[i] = fd;
}

/* Adopts every queued connection; 1 if there was one. */
static int adopt_queued(rv_loop *l)
{
    pending *p, *next;
    uint64_t n;

    if (read(l->wakefd, &n, sizeof(n)) < 0 && errno != EAGAIN)
        return 0;
    pthread_mutex_lock(&l->mu);
    p = l->queue;
    l->queue = NULL;
    pthread_mutex_unlock(&l->mu);
    if (p == NULL)
        return 0;
    for (; p != NULL; p = next) {
        next = p->next;
        l->adopt(l->cls, l->daemon, p->fd, (struct sockaddr *)&p->addr,
                 p->addrlen);
        free(p);
    }
    return 1;
}

/* The wait's bound: MHD's timeout and the connections', -1 for none. */
static int wait_ms(rv_loop *l)
{
    MHD_UNSIGNED_LONG_LONG mhd_ms;
    int i, ms = -1;

    for (i = 0; i < l->ndba; i++) {
        const int t = rv_dba_tick(l->dba[i]);

        if (t >= 0 && (ms < 0 || t < ms))
            ms = t;
    }
    if (MHD_get_timeout(l->daemon, &mhd_ms) == MHD_YES) {
        if (mhd_ms > 60000)
            mhd_ms = 60000;
        if (ms < 0 || (int)mhd_ms < ms)
            ms = (int)mhd_ms;
    }
    return ms;
}

static void *loop_main(void *arg)
{
    rv_loop *l = arg;
    struct epoll_event evs[8];
    int i;

    current = l;
    /* One connection is made at once, so the first reads after a start
     * are the loop's, not the workers'; more follow as reads need them. */
    if (l->ndba > 0)
        rv_dba_want(l->dba[0]);
    while (!atomic_load(&l->stop)) {
        int timeout, n, run = 0, failed = 0;

        /* The statements this pass queued go out, one write per
         * connection; one that fails ends its statements, whose requests
         * were resumed for the workers: MHD must see them now. */
        for (i = 0; i < l->ndba; i++)
            failed |= rv_dba_flush(l->dba[i]) != 0;
        if (failed) {
            MHD_run(l->daemon);
            continue;
        }
        timeout = wait_ms(l);

        for (i = 0; i < l->ndba; i++)
            watch_pg(l, i);
        n = epoll_wait(l->epfd, evs, 8, timeout);
        if (n < 0 && errno != EINTR)
            break; /* not expected: the descriptors are ours */
        if (n == 0)
            run = 1; /* MHD's timeout may be due */
        for (i = 0; i < n; i++) {
            const uint32_t tag = evs[i].data.u32;

            if (tag == TAG_WAKE)
                adopt_queued(l);
            else if (tag >= TAG_PG && tag < TAG_PG + (uint32_t)l->ndba)
                rv_dba_handle(l->dba[tag - TAG_PG]);
            run = 1;
        }
        if (run)
            MHD_run(l->daemon);
    }
    /* Stopping: every statement ends, its connection is resumed, and
     * MHD sees the resumptions once more before the daemon stops. */
    for (i = 0; i < l->ndba; i++)
        rv_dba_close(l->dba[i]);
    MHD_run(l->daemon);
    current = NULL;
    return NULL;
}

rv_loop *rv_loop_start(struct MHD_Daemon *d, rv_db *db, rv_loop_adopt_fn adopt,
                       void *cls, char *errbuf, size_t errlen)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(
        d, MHD_DAEMON_INFO_EPOLL_FD);
    rv_loop *l = calloc(1, sizeof(*l));
    struct epoll_event ev;
    int i, rc;

    if (l == NULL || info == NULL) {
        snprintf(errbuf, errlen, "http: cannot make an event loop%s",
                 l == NULL ? ": out of memory" : " (no epoll in MHD)");
        free(l);
        return NULL;
    }
    l->daemon = d;
    l->adopt = adopt;
    l->cls = cls;
    l->mhd_fd = info->epoll_fd;
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
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.u32 = TAG_MHD;
    rc = l->epfd < 0 || l->wakefd < 0 || (db != NULL && l->ndba < RV_LOOP_PG)
                 || epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->mhd_fd, &ev) != 0
             ? -1
             : 0;
    ev.data.u32 = TAG_WAKE;
    if (rc == 0 && epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wakefd, &ev) != 0)
        rc = -1;
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
    const uint64_t one = 1;

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
    /* Cannot fail short of a counter at its maximum. */
    (void)write(l->wakefd, &one, sizeof(one));
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
        l->adopt(l->cls, NULL, p->fd, (struct sockaddr *)&p->addr, p->addrlen);
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
