/*
 * test_fair_faults.c: the fair lock (opts.fair) under faults, against
 * private redis-servers behind pausable proxies.  test_fair.c shows the
 * hand-off on a healthy loopback; here the network goes silent, the
 * server's clock steps and a waiter is stopped, and the fair lock must
 * still claim only what it can know:
 *
 *   - A fair acquire that may wait 200 ms, whose direct waiter's new
 *     connection gets no answer to its handshake (a SELECT behind a
 *     silent peer), ends BUSY within its wait plus slack, far sooner
 *     than the client's 5 s connect timeout.
 *   - A grant whose message is held up (the waiter's own connection
 *     silenced) until the confirm window has run out, and the key taken
 *     by another owner, is not taken: the waiter does not report held.
 *   - A grant whose message is held up for half its confirm window and
 *     whose confirm then stalls (every new connection silent) claims
 *     only what is left of the window, never more than the key's PTTL in
 *     Redis, and is lost when the window ends; the next owner's fence is
 *     above it.
 *   - The server's clock steps forward after the grant and before the
 *     held-up message is taken, while another lock of the same client
 *     sees the step: the grant's validity is shrunk by the step (never
 *     above the key's PTTL), or the grant is declined and a try decides.
 *   - A queued `dlock run --fair` SIGSTOPped past its queue deadline: the
 *     waiters behind it are granted in order with rising fences, and
 *     when it is continued it does not run its command (it does not
 *     believe it holds the lock), while another holds it.
 *   - A `dlock run --fair` killed while first in the queue, with the
 *     holder gone without a release (so no release skips or grants its
 *     entry): the next waiter gets the free key after the holder's TTL
 *     and one confirm window, not at the dead entry's deadline 21 s
 *     later.
 *
 * Topology.  The client under test connects to proxy P1 and opens its
 * pool connection through it first; then P1's target moves to proxy P2
 * (in front of the same server), so the connections opened later (the
 * direct waiter's, the watchdog renewer's) go through P2 too, and pausing
 * P2 silences them alone.  A target that is a socket listening but never
 * accepting (a "black hole") makes every new connection silent while the
 * pool's stays healthy.
 *
 * The waiter threads and all they touch live in static storage (the_rig,
 * the_behind), and a per-case teardown (end_rig, end_behind) lets them
 * in, joins them and frees the case whether it passed or failed: a failed
 * TK_EXPECT leaves by longjmp, and threads holding the case's stack frame
 * corrupted the next case.
 */
#include "itkit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TTL_MS 10000

/* A socket on 127.0.0.1 that listens and never accepts: connections to
 * it complete in the kernel and then hear nothing. */
typedef struct black_hole {
    int fd;
    int port;
} black_hole;

static black_hole black_hole_open(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);
    black_hole bh = {socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), 0};

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    TK_EXPECT(bh.fd >= 0 && bind(bh.fd, (struct sockaddr *)&a, sizeof(a)) == 0
                  && listen(bh.fd, 64) == 0
                  && getsockname(bh.fd, (struct sockaddr *)&a, &len) == 0,
              "a black-hole listener on 127.0.0.1");
    bh.port = ntohs(a.sin_port);
    return bh;
}

/* Closing it resets the connections waiting in its backlog, so nothing
 * blocked on one outlives the test. */
static void black_hole_close(black_hole *bh)
{
    close(bh->fd);
}

static void retarget(testkit_proxy *p, int port)
{
    char cmd[64];

    snprintf(cmd, sizeof(cmd), "target 127.0.0.1:%d", port);
    TK_EXPECT(testkit_proxy_ctl(p, cmd) == 0, "proxy: %s", cmd);
}

static void proxy_do(testkit_proxy *p, const char *cmd)
{
    TK_EXPECT(testkit_proxy_ctl(p, cmd) == 0, "proxy: %s", cmd);
}

/* A client with one pooled connection (opened by its warm-up, now) and
 * the given connect timeout. */
static dlock_client *one_conn_client(const char *url, int connect_timeout_ms)
{
    dlock_client_opts o = itkit_client_opts();

    o.pool_size = 1;
    o.connect_timeout_ms = connect_timeout_ms;
    return itkit_client(url, &o);
}

static dlock_acquire_opts fair_opts(int64_t wait_ms, int64_t confirm_ms)
{
    dlock_acquire_opts o = itkit_acquire_opts(TTL_MS, wait_ms);

    o.fair = 1;
    o.fair_confirm_ms = confirm_ms;
    return o;
}

/* ---- 1: the direct waiter's connect ends with the caller's wait ------- */

static void fair_wait_is_bounded_behind_a_silent_connect(void **state)
{
    testkit_proxied *pr = itkit_proxied("fair-silent-connect");
    black_hole bh = black_hole_open();
    char key[TESTKIT_KEY_MAX], direct_url[128], proxy_url[128];
    dlock_client *holder, *c;
    dlock_acquire_opts o = fair_opts(200, 0);
    dlock_lock *held, *l = NULL;
    dlock_err err;
    int64_t started, took;

    (void)state;
    /* Database 1: every new connection sends SELECT, and waits for its
     * answer. */
    snprintf(direct_url, sizeof(direct_url), "redis://127.0.0.1:%d/1",
             pr->server->port);
    snprintf(proxy_url, sizeof(proxy_url), "redis://127.0.0.1:%d/1",
             pr->proxy->port);
    holder = itkit_client(direct_url, NULL);
    c = one_conn_client(proxy_url, 5000);
    testkit_key(key, "fair-silent-connect");
    o.wait_ms = 0;
    held = itkit_acquire(holder, key, &o);
    retarget(pr->proxy, bh.port);
    o.wait_ms = 200;
    started = testkit_now_ms();
    err = dlock_acquire(c, key, &o, &l);
    took = testkit_now_ms() - started;
    print_message("fair acquire, wait 200 ms, direct waiter's connect "
                  "silent: %s after %lld ms\n",
                  dlock_errname(err), (long long)took);
    TK_EXPECT_ERR(err, DLOCK_BUSY, c, "a fair acquire of a held key");
    TK_EXPECT(took < 2000,
              "the wait ends near its 200 ms, not at the 5 s "
              "connect timeout: %lld ms",
              (long long)took);
    black_hole_close(&bh);
    TK_EXPECT(dlock_release(held) == DLOCK_OK, "holder released");
    dlock_client_free(c);
    dlock_client_free(holder);
    testkit_proxied_free(pr);
}

/* ---- a waiter whose own connections go through a second proxy --------- */

typedef struct rig {
    testkit_proxied *pr;   /* the server, and P1 (the client's URL) */
    testkit_proxy *direct; /* P2: the waiter's later connections */
    black_hole bh;         /* where P1 sends new connections at the end */
    dlock_client *c;       /* under test, through P1 */
    dlock_client *other;   /* the holders, straight to the server */
    char key[TESTKIT_KEY_MAX];
    dlock_lock *held; /* the other client's, until released */
    /* The fair waiter's thread. */
    pthread_t thread;
    int running; /* started, not yet joined */
    atomic_int finished;
    dlock_acquire_opts o;
    dlock_lock *lock;
    dlock_err err;
    int64_t valid_ms; /* dlock_lock_valid_ms right after the acquire */
} rig;

/* The rig of the case that runs: static, so that a waiter left running
 * by a failed expectation never touches a dead frame. */
static rig the_rig;

static void rig_start(rig *g, const char *name, int wallclock)
{
    memset(g, 0, sizeof(*g));
    g->pr = testkit_proxied_start(
        &(testkit_redis_opts){.name = name, .wallclock = wallclock});
    TK_EXPECT(g->pr != NULL, "a private redis-server %s and a proxy", name);
    g->direct = testkit_proxy_for("fair-faults-direct", g->pr->server->port);
    TK_EXPECT(g->direct != NULL, "the waiter's own proxy started");
    g->bh = black_hole_open();
    g->c = one_conn_client(g->pr->url, 1000);
    g->other = itkit_client(g->pr->server->url, NULL);
    testkit_key(g->key, name);
    retarget(g->pr->proxy, g->direct->port);
}

/* Frees what rig_start made (the waiter joined); the rig is then empty,
 * and a second call does nothing. */
static void rig_free(rig *g)
{
    if (g->pr == NULL)
        return;
    black_hole_close(&g->bh);
    dlock_lock_free(g->held);
    dlock_lock_free(g->lock);
    dlock_client_free(g->c);
    dlock_client_free(g->other);
    testkit_proxy_free(g->direct);
    testkit_proxied_free(g->pr);
    memset(g, 0, sizeof(*g));
}

static void *fair_waiter_main(void *arg)
{
    rig *g = arg;

    g->err = dlock_acquire(g->c, g->key, &g->o, &g->lock);
    if (g->err == DLOCK_OK)
        g->valid_ms = dlock_lock_valid_ms(g->lock);
    atomic_store(&g->finished, 1);
    return NULL;
}

/* Joins the waiter (the case's own, unbounded join). */
static void rig_join(rig *g)
{
    pthread_join(g->thread, NULL);
    g->running = 0;
}

/* Releases *l and forgets it, so that a teardown does not release it
 * again. */
static dlock_err release_of(dlock_lock **l)
{
    dlock_lock *lock = *l;

    *l = NULL;
    return dlock_release(lock);
}

static int rig_waiter_done(void *arg)
{
    rig *g = arg;

    return atomic_load(&g->finished);
}

/* Teardown of the cases with a rig, passed or failed: lets the waiter in
 * (P2 resumed, the holder's lock released; its own wait is bounded),
 * joins it and frees the rig.  A waiter that does not return within the
 * bound keeps the rig (static) and fails the teardown. */
static int end_rig(void **state)
{
    rig *g = &the_rig;

    (void)state;
    if (g->pr == NULL)
        return 0;
    if (g->running) {
        testkit_proxy_ctl(g->direct, "resume");
        if (g->held != NULL)
            (void)release_of(&g->held);
        if (!testkit_wait_until(rig_waiter_done, g, 30000)) {
            fprintf(stderr, "# the fair waiter did not return; leaking it\n");
            return -1;
        }
        rig_join(g);
    }
    rig_free(g);
    return 0;
}

/* 1 if key's fair queue has one entry, written by its waiter's 2nd try
 * or a later one: the try made on the SUBSCRIBE confirmation, so the
 * waiter is subscribed (and about to sleep on its channel). */
static int one_entry_retried(const char *url, const char *key)
{
    redisReply *vals = testkit_redis_cmd(url, "HVALS #dlock:waiters:{%s}",
                                         key);
    int retried = 0;

    if (vals != NULL && vals->type == REDIS_REPLY_ARRAY
        && vals->elements == 1) {
        const char *last = strrchr(vals->element[0]->str, ':');

        retried = last != NULL && atoi(last + 1) >= 2;
    }
    freeReplyObject(vals);
    return retried;
}

/* The waiter is asleep on its channel (one_entry_retried), on its own
 * connection. */
static int waiter_asleep(void *arg)
{
    rig *g = arg;

    return one_entry_retried(g->pr->server->url, g->key);
}

/* The other client holds the key (g->held); the waiter (opts o) queues
 * and sleeps on its own connection through P2. */
static void rig_queue_waiter(rig *g, dlock_acquire_opts o)
{
    dlock_acquire_opts first = fair_opts(0, 0);

    g->held = itkit_acquire(g->other, g->key, &first);
    g->o = o;
    TK_EXPECT(pthread_create(&g->thread, NULL, fair_waiter_main, g) == 0,
              "waiter started");
    g->running = 1;
    TK_EXPECT(testkit_wait_until(waiter_asleep, g, 30000),
              "the waiter queued, subscribed and tried again");
}

static int key_gone(void *arg)
{
    rig *g = arg;

    return testkit_redis_int(g->pr->server->url, "EXISTS %s", g->key) == 0;
}

/* Reads the key's PTTL, then the lock's validity: read in that order, a
 * validity that is true never exceeds the PTTL. */
static void expect_validity_within_pttl(rig *g, const char *when)
{
    long long pttl = testkit_redis_int(g->pr->server->url, "PTTL %s", g->key);
    int64_t valid = dlock_lock_valid_ms(g->lock);
    redisReply *owner = testkit_redis_cmd(g->pr->server->url, "GET %s",
                                          g->key);
    int ours = owner != NULL && owner->type == REDIS_REPLY_STRING
               && strcmp(owner->str, dlock_lock_token(g->lock)) == 0;

    freeReplyObject(owner);
    print_message("%s: valid %lld ms, PTTL %lld ms, key ours %d\n", when,
                  (long long)valid, pttl, ours);
    TK_EXPECT(valid == 0 || (ours && valid <= pttl),
              "%s: the lock claims %lld ms; the key is ours (%d) with "
              "PTTL %lld ms",
              when, (long long)valid, ours, pttl);
}

/* ---- 2a: a grant that arrives after its confirm window ---------------- */

static void grant_arriving_after_its_window_is_not_taken(void **state)
{
    rig *const g = &the_rig;
    dlock_lock *next;
    dlock_acquire_opts later = fair_opts(0, 0);

    (void)state;
    rig_start(g, "fair-late-grant", 0);
    rig_queue_waiter(g, fair_opts(2500, 400));
    proxy_do(g->direct, "pause");
    TK_EXPECT(release_of(&g->held) == DLOCK_OK, "holder released");
    /* The grant (PX 400) runs out in Redis; another owner takes the
     * key.  The message is still held by P2. */
    TK_EXPECT(testkit_wait_until(key_gone, g, 5000),
              "the unconfirmed grant lapsed in Redis");
    next = itkit_acquire(g->other, g->key, &later);
    proxy_do(g->direct, "resume");
    rig_join(g);
    TK_EXPECT(g->err != DLOCK_OK,
              "the waiter does not hold the lock another owner holds "
              "(fence %llu): it reported %s with %lld ms valid, fence %llu",
              (unsigned long long)dlock_lock_fence(next),
              dlock_errname(g->err), (long long)g->valid_ms,
              (unsigned long long)(g->lock ? dlock_lock_fence(g->lock) : 0));
    TK_EXPECT_ERR(g->err, DLOCK_BUSY, g->c, "the waiter's acquire");
    TK_EXPECT(dlock_release(next) == DLOCK_OK, "next owner released");
    rig_free(g);
}

/* ---- 2a: a grant taken whose confirm stalls ---------------------------- */

static int lost(void *arg)
{
    return dlock_lock_lost(arg);
}

/* The key's fence counter: after a release that granted the key, the
 * grant's fence. */
static uint64_t fence_counter(rig *g)
{
    redisReply *r = testkit_redis_cmd(g->pr->server->url,
                                      "GET #dlock:fence:{%s}", g->key);
    uint64_t fence = 0;

    if (r != NULL && r->type == REDIS_REPLY_STRING)
        fence = strtoull(r->str, NULL, 10);
    freeReplyObject(r);
    TK_EXPECT(fence > 0, "the key's fence counter is set");
    return fence;
}

static int pttl_below_600(void *arg)
{
    rig *g = arg;

    return testkit_redis_int(g->pr->server->url, "PTTL %s", g->key) < 600;
}

static void grant_whose_confirm_stalls_claims_only_its_window(void **state)
{
    rig *const g = &the_rig;
    dlock_lock *next;
    dlock_acquire_opts later = fair_opts(5000, 0);
    int64_t granted_ms;
    uint64_t grant_fence;

    (void)state;
    rig_start(g, "fair-stalled-confirm", 0);
    rig_queue_waiter(g, fair_opts(5000, 1200));
    /* The confirm goes out on the renewer's connection, opened after
     * the grant: through a black hole. */
    retarget(g->pr->proxy, g->bh.port);
    /* The grant message is held up for half its window: what is left is
     * all the waiter may claim. */
    proxy_do(g->direct, "pause");
    granted_ms = testkit_now_ms();
    TK_EXPECT(release_of(&g->held) == DLOCK_OK, "holder released");
    grant_fence = fence_counter(g);
    TK_EXPECT(testkit_wait_until(pttl_below_600, g, 5000),
              "half the grant's window has run out");
    proxy_do(g->direct, "resume");
    rig_join(g);
    TK_EXPECT_ERR(g->err, DLOCK_OK, g->c, "the waiter's acquire");
    if (dlock_lock_fence(g->lock) != grant_fence || g->valid_ms > 1200) {
        /* So slow a machine that the window ran out before the message
         * was read: declined, and a try decided, on a connection made
         * before the black hole: it took the free key afresh (a new
         * fence), or found the grant's key its own and renewed it for the
         * whole TTL (the grant's fence, more than the 1200 ms window could
         * ever give).  Either way the claim must be what Redis holds. */
        print_message("the grant lapsed before it was read; a try "
                      "decided (%lld ms valid)\n",
                      (long long)g->valid_ms);
        expect_validity_within_pttl(g, "taken by a try");
        rig_free(g);
        return;
    }
    TK_EXPECT(g->valid_ms > 0 && g->valid_ms <= 600,
              "at most what is left of the confirm window is claimed: "
              "%lld ms",
              (long long)g->valid_ms);
    expect_validity_within_pttl(g, "confirm stalled");
    TK_EXPECT(testkit_wait_until(lost, g->lock, 5000),
              "the lock is lost when its confirm window ends");
    TK_EXPECT(testkit_now_ms() - granted_ms < 1200 + 2000,
              "lost at about the window's end");
    next = itkit_acquire(g->other, g->key, &later);
    TK_EXPECT(dlock_lock_fence(next) > dlock_lock_fence(g->lock),
              "the next owner's fence %llu is above the lapsed grant's %llu",
              (unsigned long long)dlock_lock_fence(next),
              (unsigned long long)dlock_lock_fence(g->lock));
    TK_EXPECT(dlock_release(next) == DLOCK_OK, "next owner released");
    rig_free(g);
}

/* ---- 2b: the server's clock steps while the grant is on its way ------- */

static void grant_after_clock_step(int64_t step_ms, const char *name)
{
    rig *const g = &the_rig;
    char other_key[TESTKIT_KEY_MAX];
    dlock_acquire_opts plain = itkit_acquire_opts(30000, 0);
    dlock_lock *b;

    rig_start(g, name, 1);
    plain.watchdog = 0;
    /* Another lock of the client under test, on its pooled connection:
     * its extend reads the server's clock after the step. */
    b = itkit_acquire(g->c, testkit_key(other_key, name), &plain);
    rig_queue_waiter(g, fair_opts(5000, 3000));
    retarget(g->pr->proxy, g->bh.port); /* the confirm stalls */
    proxy_do(g->direct, "pause");
    TK_EXPECT(release_of(&g->held) == DLOCK_OK, "holder released");
    TK_EXPECT(testkit_redis_clock_step(g->pr->server, step_ms) == 0,
              "server clock +%lld ms", (long long)step_ms);
    TK_EXPECT_ERR(dlock_extend(b, 0), DLOCK_OK, g->c,
                  "extend of the other lock, which sees the step");
    proxy_do(g->direct, "resume");
    rig_join(g);
    print_message("grant after a +%lld ms step: %s, %lld ms valid\n",
                  (long long)step_ms, dlock_errname(g->err),
                  (long long)g->valid_ms);
    if (g->err == DLOCK_OK) {
        TK_EXPECT(g->valid_ms > 0, "a lock reported held has validity left");
        expect_validity_within_pttl(g, "after the step");
    } else
        TK_EXPECT_ERR(g->err, DLOCK_BUSY, g->c, "the waiter's acquire");
    TK_EXPECT(dlock_release(b) == DLOCK_OK, "other lock released");
    rig_free(g);
}

static void clock_step_after_grant_shrinks_it(void **state)
{
    (void)state;
    grant_after_clock_step(2500, "fair-step-short");
}

static void clock_step_past_the_window_declines_the_grant(void **state)
{
    (void)state;
    grant_after_clock_step(4000, "fair-step-past");
}

/* ---- 2c: a queued waiter stopped past its queue deadline -------------- */

#define BEHIND 3

typedef struct behind {
    dlock_client *c;
    const char *key;
    int id;
    pthread_mutex_t *mu;
    int *order;
    uint64_t *fences;
    int *served;
    int *inside;
    int overlap;
    int keep; /* the last one keeps the lock until told */
    dlock_lock *lock;
    dlock_err err;
} behind;

static void *behind_main(void *arg)
{
    behind *b = arg;
    dlock_acquire_opts o = fair_opts(15000, 0);
    int n;

    b->err = dlock_acquire(b->c, b->key, &o, &b->lock);
    if (b->err != DLOCK_OK)
        return NULL;
    pthread_mutex_lock(b->mu);
    b->overlap = (*b->inside)++ != 0;
    n = (*b->served)++;
    b->order[n] = b->id;
    b->fences[n] = dlock_lock_fence(b->lock);
    pthread_mutex_unlock(b->mu);
    if (b->keep)
        return NULL;
    pthread_mutex_lock(b->mu);
    (*b->inside)--;
    pthread_mutex_unlock(b->mu);
    b->err = dlock_release(b->lock);
    b->lock = NULL;
    return NULL;
}

typedef struct queue_probe {
    const char *url;
    const char *key;
    long long want;
} queue_probe;

static int queue_holds(void *arg)
{
    queue_probe *q = arg;

    return testkit_redis_int(q->url, "ZCARD #dlock:queue:{%s}", q->key)
           >= q->want;
}

static int entry_retried(void *arg)
{
    queue_probe *q = arg;

    return one_entry_retried(q->url, q->key);
}

static void expect_queue(const char *url, const char *key, long long want)
{
    queue_probe q = {url, key, want};

    TK_EXPECT(testkit_wait_until(queue_holds, &q, 30000),
              "%lld waiters queued on %s", want, key);
}

/* Everything the waiters behind a stopped one touch (the key's name, the
 * client, the shared tallies, the waiters) and the holder's lock and the
 * `dlock run` process, in static storage until end_behind has ended
 * them. */
typedef struct behind_case {
    char key[TESTKIT_KEY_MAX];
    dlock_client *c;
    dlock_lock *held; /* the holder's, until released */
    pid_t pid;        /* the stopped `dlock run`, until reaped */
    pthread_mutex_t mu;
    int order[BEHIND], served, inside;
    uint64_t fences[BEHIND];
    behind b[BEHIND];
    pthread_t threads[BEHIND];
    int nthreads; /* started */
    int joined;   /* the first joined of them */
    atomic_int finished;
} behind_case;

static behind_case the_behind;

static void *behind_thread(void *arg)
{
    behind_main(arg);
    atomic_fetch_add(&the_behind.finished, 1);
    return NULL;
}

/* Joins the waiters up to (not including) number upto (the case's own,
 * unbounded join). */
static void behind_join(behind_case *bc, int upto)
{
    for (; bc->joined < upto; bc->joined++)
        pthread_join(bc->threads[bc->joined], NULL);
}

static int behind_done(void *arg)
{
    behind_case *bc = arg;

    return atomic_load(&bc->finished) == bc->nthreads;
}

/* Teardown of stopped_waiter_past_its_deadline_holds_nothing, passed or
 * failed: kills the `dlock run`, releases the holder's lock (the waiters'
 * own wait is bounded), joins the waiters, releases the lock the last
 * one keeps and frees the client.  Waiters that do not return within the
 * bound keep the state (static) and fail the teardown. */
static int end_behind(void **state)
{
    behind_case *bc = &the_behind;
    int status;

    (void)state;
    if (bc->pid > 0) {
        kill(bc->pid, SIGKILL);
        waitpid(bc->pid, &status, 0);
    }
    if (bc->held != NULL)
        (void)release_of(&bc->held);
    if (!testkit_wait_until(behind_done, bc, 30000)) {
        fprintf(stderr, "# %d of %d waiters did not return; leaking them\n",
                bc->nthreads - atomic_load(&bc->finished), bc->nthreads);
        return -1;
    }
    behind_join(bc, bc->nthreads);
    for (int i = 0; i < bc->nthreads; i++)
        if (bc->b[i].lock != NULL)
            (void)release_of(&bc->b[i].lock);
    if (bc->c != NULL)
        dlock_client_free(bc->c);
    pthread_mutex_destroy(&bc->mu);
    memset(bc, 0, sizeof(*bc));
    return 0;
}

static int served_all(void *arg)
{
    behind *b = arg;
    int n;

    pthread_mutex_lock(b->mu);
    n = *b->served;
    pthread_mutex_unlock(b->mu);
    return n == BEHIND;
}

static void stopped_waiter_past_its_deadline_holds_nothing(void **state)
{
    behind_case *bc = &the_behind;
    const char *url = itkit_shared_url();
    char *key = bc->key, dir[512], marker[700], cli[600], cmd[800];
    dlock_client *c;
    dlock_acquire_opts first = fair_opts(0, 0);
    int *order = bc->order, status = 0;
    uint64_t *fences = bc->fences;
    behind *b = bc->b;
    struct stat st;
    queue_probe q = {url, key, 1};
    int64_t forked_ms;
    pid_t pid;

    (void)state;
    memset(bc, 0, sizeof(*bc));
    pthread_mutex_init(&bc->mu, NULL);
    c = bc->c = itkit_client(url, NULL);
    testkit_key(key, "fair-stopped-past");
    TK_EXPECT(testkit_scratch_dir(dir, sizeof(dir), "fair-stopped-past")
                  != NULL,
              "a scratch folder");
    snprintf(marker, sizeof(marker), "%s/ran", dir);
    snprintf(cli, sizeof(cli), "%s/src/cli/dlock", testkit_build_dir());
    snprintf(cmd, sizeof(cmd), "echo $DLOCK_FENCE > '%s'", marker);
    bc->held = itkit_acquire(c, key, &first);
    forked_ms = testkit_now_ms();
    pid = bc->pid = fork();
    if (pid == 0) {
        /* TTL 1 s: its confirm window, min(TTL, 2 s), is 1 s. */
        execl(cli, "dlock", "run", "--fair", "--quiet", "--wait", "1s",
              "--ttl", "1s", "--url", url, key, "--", "sh", "-c", cmd,
              (char *)NULL);
        _exit(127);
    }
    TK_EXPECT(pid > 0, "dlock run started");
    /* Stopped asleep on its channel, so the grant reaches it. */
    TK_EXPECT(testkit_wait_until(entry_retried, &q, 30000),
              "dlock run queued, subscribed and tried again");
    TK_EXPECT(kill(pid, SIGSTOP) == 0, "dlock run stopped while queued");
    for (int i = 0; i < BEHIND; i++) {
        b[i] = (behind){
            c,           key,         i, &bc->mu,         order, fences,
            &bc->served, &bc->inside, 0, i == BEHIND - 1, NULL,  DLOCK_OK};
        TK_EXPECT(pthread_create(&bc->threads[i], NULL, behind_thread, &b[i])
                      == 0,
                  "waiter %d started", i);
        bc->nthreads++;
        expect_queue(url, key, i + 2);
    }
    /* The stopped waiter is first: it is granted and never confirms, or
     * (on a slow machine) already past its entry's deadline and skipped. */
    TK_EXPECT(release_of(&bc->held) == DLOCK_OK, "holder released");
    TK_EXPECT(testkit_wait_until(served_all, &b[0], 30000),
              "the %d waiters behind the stopped one were served", BEHIND);
    behind_join(bc, BEHIND - 1);
    /* The last waiter holds the key while the stopped one goes on, past
     * the end of its wait (1 s) and its queue entry's deadline (the end
     * of its wait plus 1 s): a deadline, not a condition, so paced. */
    while (testkit_now_ms() < forked_ms + 1000 + 1000 + 300)
        itkit_pace_ms(10);
    TK_EXPECT(kill(pid, SIGCONT) == 0, "dlock run continued");
    TK_EXPECT(waitpid(pid, &status, 0) == pid, "dlock run exited");
    bc->pid = 0;
    TK_EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 75,
              "dlock run, continued, exits 75 (busy), got status %d", status);
    TK_EXPECT(stat(marker, &st) != 0,
              "its command never ran: it did not believe it held the lock");
    behind_join(bc, BEHIND);
    for (int i = 0; i < BEHIND; i++) {
        TK_EXPECT(b[i].err == DLOCK_OK && !b[i].overlap,
                  "waiter %d served alone: %s", i, dlock_errname(b[i].err));
        TK_EXPECT(order[i] == i, "grant %d went to waiter %d", i, order[i]);
        TK_EXPECT(i == 0 || fences[i] > fences[i - 1],
                  "grant %d's fence %llu above the one before", i,
                  (unsigned long long)fences[i]);
    }
    TK_EXPECT(release_of(&b[BEHIND - 1].lock) == DLOCK_OK,
              "last waiter released");
    testkit_scratch_remove(dir);
}

/* ---- a dead waiter at the head of the queue of a free key ------------ */

static void dead_head_of_a_free_key_costs_one_confirm_window(void **state)
{
    const char *url = itkit_shared_url();
    char key[TESTKIT_KEY_MAX], cli[600], cmd[1600];
    dlock_client *c = itkit_client(url, NULL);
    dlock_acquire_opts o = fair_opts(8000, 0);
    dlock_lock *l = NULL;
    queue_probe q = {url, key, 1};
    dlock_err err;
    int64_t started, took;
    int status;
    pid_t pid;

    (void)state;
    testkit_key(key, "fair-dead-head");
    snprintf(cli, sizeof(cli), "%s/src/cli/dlock", testkit_build_dir());
    /* A holder that exits without releasing: the key lives 1 s more. */
    snprintf(cmd, sizeof(cmd),
             "'%s' acquire --fair --ttl 1s --url '%s' '%s' >/dev/null", cli,
             url, key);
    TK_EXPECT(system(cmd) == 0, "dlock acquire --fair took the key");
    /* A waiter whose entry lives 21 s, killed while queued: nothing
     * releases the key, so no release skips or grants its entry. */
    pid = fork();
    if (pid == 0) {
        execl(cli, "dlock", "run", "--fair", "--quiet", "--wait", "20s",
              "--ttl", "1s", "--url", url, key, "--", "true", (char *)NULL);
        _exit(127);
    }
    TK_EXPECT(pid > 0, "dlock run started");
    TK_EXPECT(testkit_wait_until(entry_retried, &q, 30000),
              "dlock run queued and asleep");
    TK_EXPECT(kill(pid, SIGKILL) == 0 && waitpid(pid, &status, 0) == pid,
              "dlock run killed while queued");
    started = testkit_now_ms();
    err = dlock_acquire(c, key, &o, &l);
    took = testkit_now_ms() - started;
    print_message("behind a dead head: %s after %lld ms\n", dlock_errname(err),
                  (long long)took);
    TK_EXPECT_ERR(err, DLOCK_OK, c,
                  "the next waiter gets the free key behind the dead one");
    /* 1 s of the holder's TTL, then the dead waiter's grant for its 1 s
     * confirm window (min(TTL, 2 s)); its entry would have lived 21 s. */
    TK_EXPECT(took < 1000 + 1000 + 3000,
              "within the holder's TTL and one confirm window plus slack: "
              "%lld ms",
              (long long)took);
    TK_EXPECT(dlock_release(l) == DLOCK_OK, "released");
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fair_wait_is_bounded_behind_a_silent_connect),
        cmocka_unit_test_teardown(grant_arriving_after_its_window_is_not_taken,
                                  end_rig),
        cmocka_unit_test_teardown(
            grant_whose_confirm_stalls_claims_only_its_window, end_rig),
        cmocka_unit_test_teardown(clock_step_after_grant_shrinks_it, end_rig),
        cmocka_unit_test_teardown(
            clock_step_past_the_window_declines_the_grant, end_rig),
        cmocka_unit_test_teardown(
            stopped_waiter_past_its_deadline_holds_nothing, end_behind),
        cmocka_unit_test(dead_head_of_a_free_key_costs_one_confirm_window),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
