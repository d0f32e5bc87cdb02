/*
 * test_pipeline.c: many threads pipelined on a pool of two connections.
 *
 * Each test runs THREADS threads on one client whose pool holds 2
 * connections, so nearly every command rides behind others on a shared
 * connection.  Two threads share each key and wait for it, so the lock has
 * to exclude.  After every acquire the holder checks three things:
 *
 *   - exclusion: a per-key flag that the holder sets on entry must be
 *     clear (two holders at once would find it set);
 *   - replies not crossed: dlock_inspect (another round trip through the
 *     same pipes) must name this lock's own token as the key's holder, and
 *     the fence must be above the key's previous fence: a reply handed to
 *     the wrong thread shows up as another key's fence or token, a false
 *     "held", or a reply of the wrong shape (an error);
 *   - every call succeeds, also where a test kills connections.
 *
 * many_threads_share_two_connections: 64 threads x 250 pairs on the shared
 * stack's Redis (1,000 with DLOCK_TEST_LONG=1).
 *
 * tls_pipes_take_turns_reading_and_writing: 16 threads x 100 pairs over
 * rediss:// on a pool of 1 (a TLS connection cannot read and write at
 * once, so its writer and reader take turns: pipe.c).  One connection,
 * opened by dlock_client_new on the test's thread: OpenSSL keeps a
 * random generator per thread that makes a handshake, which LeakSanitizer
 * reports when a worker thread that made one exits.
 *
 * killed_connections_resolve_every_command: 32 threads on a private
 * redis-server (so that CLIENT KILL reaches only this client), which the
 * test thread kills KILLS times mid-run.  Every command in flight then
 * resolves by the library's rule (re-asked with the same token, or
 * reported); afterwards no key is left held (no orphan), no holder ever
 * overlapped (no double grant), and no inspect denied a granted lock (no
 * false "held").  A release whose reply was lost re-asks and finds its
 * token gone: it reports DLOCK_OK when the server proves its first send
 * ran (the fence counter still holds its fence), else DLOCK_LOST saying it
 * was re-asked (another thread took the key since: nothing proves the
 * lock was still ours), never a guessed DLOCK_OK; such releases are
 * counted apart, and must be rare (at most one per command in flight at a
 * kill).  No other call fails: the kills are spaced, so a command re-asked
 * on another connection finds the server up.
 *
 * a_crowd_on_one_connection_shares_parking_slots: CROWD_THREADS (96)
 * threads on a pool of 1, more than a pipe's 64 parking slots (pipe.c:
 * a thread waiting for its reply sleeps in one of its pipe's slots, never
 * on its own call, which a wake may outlive), so threads share slots and a
 * wake must reach the one it is for among them; same checks as above,
 * and no call may time out.
 *
 * busy_threads_gather_on_few_connections: 16 threads, each on a key of
 * its own, on a client with the default pool (16): once 6 other commands
 * run, a command joins the busiest pipe that carries fewer than 64
 * (pool.c), so at most 6 connections open (a new one only while fewer
 * than 6 others run and none is idle, or every pipe is 64 deep), where a
 * connection per command in flight opened up to 16 before; with the same
 * checks as above.
 *
 * silent_connection_resolves_every_command: SILENT_THREADS threads on a
 * pool of 1 (one connection carries them all, so one read brings many
 * replies: pipe.c hands them out together and wakes their threads after
 * dropping its mutex), through a proxy to a private redis-server.  The
 * test pauses the proxy: every command then in flight must come back by
 * its deadline (DLOCK_TIMEOUT or DLOCK_UNAVAILABLE; a release re-asked
 * may be reported lost), no thread may hang, and once the proxy resumes
 * every thread must be granted again, each grant's token the one the
 * server holds (no reply crossed to another command).  Each pair takes a
 * key of its own, so a timed-out acquire that ran anyway (released in the
 * background) never makes a later one busy.
 *
 * A case's run, workers, client and server live in static storage
 * (pipe_case), and end_case, every case's teardown, stops and joins the
 * workers whether the case passed or failed: a failed expectation leaves
 * by longjmp, and workers holding the case's stack frame corrupted the
 * next case.
 */
#include "itkit.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 64
#define KILL_THREADS 32
#define PAIRS_SHORT 250
#define PAIRS_LONG 1000
#define KILL_PAIRS 200
#define KILLS 5
#define TLS_THREADS 16
#define TLS_PAIRS 100
#define GATHER_THREADS 16
#define GATHER_PAIRS 300
#define CROWD_THREADS 96
#define CROWD_PAIRS 60
#define MAX_THREADS CROWD_THREADS
#define SILENT_THREADS 48
#define SILENT_IO_MS 2000
#define TTL_MS 10000
#define WAIT_MS 20000
#define RUN_TIMEOUT_MS 40000
/* The silent case's locks outlive its longest wait: a lock taken before
 * the pause may be released only after it (up to RUN_TIMEOUT_MS later
 * under valgrind), and with a shorter TTL the release rightly answers
 * DLOCK_LOST, its validity gone, which the case would count as a fault. */
#define SILENT_TTL_MS (2 * RUN_TIMEOUT_MS)

typedef struct key_state {
    char name[TESTKIT_KEY_MAX];
    atomic_int inside;
    uint64_t last_fence; /* written only by the key's holder */
} key_state;

typedef struct run {
    dlock_client *client;
    key_state *keys;
    int nkeys;
    int pairs;
    atomic_int overlaps;
    atomic_int crossed;
    atomic_int failures;
    atomic_int unproven; /* re-asked releases reported DLOCK_LOST */
    atomic_long grants;
    atomic_int finished; /* workers done */
    atomic_int stop;     /* a problem was seen: workers stop early */
    atomic_int claimed;
    char first[DLOCK_ERRMSG_MAX + 128];
    /* silent_connection_resolves_every_command's, per worker: */
    atomic_long ok[SILENT_THREADS];     /* pairs that went through */
    atomic_long failed[SILENT_THREADS]; /* calls failed as allowed */
} run;

typedef struct worker {
    run *r;
    int index;
    pthread_t thread;
} worker;

static void note(run *r, atomic_int *counter, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void note(run *r, atomic_int *counter, const char *fmt, ...)
{
    int unclaimed = 0;
    va_list ap;

    atomic_fetch_add(counter, 1);
    atomic_store(&r->stop, 1);
    if (!atomic_compare_exchange_strong(&r->claimed, &unclaimed, 1))
        return;
    va_start(ap, fmt);
    vsnprintf(r->first, sizeof(r->first), fmt, ap);
    va_end(ap);
}

/* What a holder checks while it holds l on k. */
static void check_held(run *r, key_state *k, dlock_lock *l)
{
    dlock_lock_info info;
    dlock_err err;

    if (atomic_exchange(&k->inside, 1) != 0)
        note(r, &r->overlaps,
             "two holders of %s at once (fence %llu, the key's last %llu)",
             k->name, (unsigned long long)dlock_lock_fence(l),
             (unsigned long long)k->last_fence);
    if (dlock_lock_fence(l) <= k->last_fence)
        note(r, &r->crossed, "fence %llu of %s not above its last %llu",
             (unsigned long long)dlock_lock_fence(l), k->name,
             (unsigned long long)k->last_fence);
    k->last_fence = dlock_lock_fence(l);
    err = dlock_inspect(r->client, k->name, &info);
    if (err == DLOCK_OK && strcmp(info.token, dlock_lock_token(l)) != 0)
        note(r, &r->crossed, "%s is held by \"%s\", not by our \"%s\"",
             k->name, info.token, dlock_lock_token(l));
    else if (err != DLOCK_OK)
        note(r, &r->failures, "inspect %s: %s: %s", k->name,
             dlock_errname(err), dlock_client_errmsg(r->client));
    sched_yield();
    atomic_store(&k->inside, 0);
}

static void call_failed(run *r, const char *what, const key_state *k,
                        dlock_err err)
{
    note(r, &r->failures, "%s %s: %s: %s", what, k->name, dlock_errname(err),
         dlock_client_errmsg(r->client));
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    run *r = w->r;
    key_state *k = &r->keys[w->index % r->nkeys];
    dlock_acquire_opts o = itkit_acquire_opts(TTL_MS, WAIT_MS);

    for (int i = 0; i < r->pairs && !atomic_load(&r->stop); i++) {
        dlock_lock *l = NULL;
        dlock_err err = dlock_acquire(r->client, k->name, &o, &l);

        if (err != DLOCK_OK) {
            call_failed(r, "acquire", k, err);
            continue;
        }
        atomic_fetch_add(&r->grants, 1);
        check_held(r, k, l);
        err = dlock_release(l);
        if (err == DLOCK_LOST
            && strstr(dlock_client_errmsg(r->client), "re-asked") != NULL)
            atomic_fetch_add(&r->unproven, 1);
        else if (err != DLOCK_OK)
            call_failed(r, "release", k, err);
    }
    atomic_fetch_add(&r->finished, 1);
    return NULL;
}

static dlock_client *pooled_client(const char *url, const char *ca_file,
                                   int pool_size)
{
    dlock_client_opts o = itkit_client_opts();

    o.tls_ca_file = ca_file;
    o.pool_size = pool_size;
    o.io_timeout_ms = 15000; /* a loaded machine under ASan is slow */
    return itkit_client(url, &o);
}

static void run_init(run *r, dlock_client *c, int nkeys, int pairs)
{
    memset(r, 0, sizeof(*r));
    r->client = c;
    r->nkeys = nkeys;
    r->pairs = pairs;
    r->keys = calloc((size_t)nkeys, sizeof(*r->keys));
    assert_non_null(r->keys);
    for (int i = 0; i < nkeys; i++)
        testkit_key(r->keys[i].name, "pipeline");
}

/* One case's run, workers, client and server, in static storage: a
 * failed expectation leaves the case by longjmp while its workers still
 * run, so what they touch must outlive the case's frame until end_case
 * has stopped and joined them.  One case at a time uses it. */
typedef struct pipe_case {
    run r;
    worker w[MAX_THREADS];
    int started; /* workers started, not yet joined */
    dlock_client *c;
    testkit_redis *srv;
    testkit_proxied *link;
} pipe_case;

static pipe_case the_case;

static pipe_case *begin_case(void)
{
    memset(&the_case, 0, sizeof(the_case));
    return &the_case;
}

static void start_workers(run *r, worker *w, int n)
{
    for (int i = 0; i < n; i++) {
        w[i] = (worker){.r = r, .index = i};
        assert_int_equal(pthread_create(&w[i].thread, NULL, worker_main,
                                        &w[i]),
                         0);
        the_case.started = i + 1;
    }
}

typedef struct finish_line {
    run *r;
    int n;
} finish_line;

static int all_finished(void *arg)
{
    finish_line *f = arg;

    return atomic_load(&f->r->finished) == f->n;
}

/* Joins the workers, failing the test (and leaving them) if they have not
 * all finished within RUN_TIMEOUT_MS: a crossed reply can leave a thread
 * waiting for a lock that it holds itself. */
static void join_workers(run *r, worker *w, int n)
{
    finish_line f = {r, n};

    TK_EXPECT(testkit_wait_until(all_finished, &f, RUN_TIMEOUT_MS),
              "%d of %d threads finished within %d ms (first problem: %s)",
              atomic_load(&r->finished), n, RUN_TIMEOUT_MS, r->first);
    for (int i = 0; i < n; i++)
        pthread_join(w[i].thread, NULL);
    the_case.started = 0;
}

static int started_finished(void *arg)
{
    pipe_case *pc = arg;

    return atomic_load(&pc->r.finished) == pc->started;
}

/* Teardown of every case, passed or failed: stops the workers (each
 * returns after its call in flight: a wait of at most WAIT_MS, a reply
 * within the 15 s I/O timeout), joins them and frees the client, the keys
 * and the server.  Workers that do not return within the bound keep the
 * state (static, client not freed) and fail the teardown. */
static int end_case(void **state)
{
    pipe_case *pc = &the_case;

    (void)state;
    if (pc->started > 0) {
        atomic_store(&pc->r.stop, 1);
        if (!testkit_wait_until(started_finished, pc, 2 * RUN_TIMEOUT_MS)) {
            fprintf(stderr, "# %d of %d workers did not return; leaking\n",
                    pc->started - atomic_load(&pc->r.finished), pc->started);
            return -1;
        }
        for (int i = 0; i < pc->started; i++)
            pthread_join(pc->w[i].thread, NULL);
    }
    if (pc->c != NULL)
        dlock_client_free(pc->c);
    free(pc->r.keys);
    if (pc->srv != NULL) {
        testkit_redis_stop(pc->srv);
        testkit_redis_free(pc->srv);
    }
    testkit_proxied_free(pc->link);
    memset(pc, 0, sizeof(*pc));
    return 0;
}

static void expect_clean(run *r)
{
    if (r->first[0] != '\0')
        fprintf(stderr,
                "first problem: %s\n(%d overlaps, %d crossed, %d failed)\n",
                r->first, atomic_load(&r->overlaps), atomic_load(&r->crossed),
                atomic_load(&r->failures));
    TK_EXPECT(atomic_load(&r->overlaps) == 0, "%d overlapping holders",
              atomic_load(&r->overlaps));
    TK_EXPECT(atomic_load(&r->crossed) == 0,
              "%d replies that belonged to another command",
              atomic_load(&r->crossed));
    TK_EXPECT(atomic_load(&r->failures) == 0, "%d failed calls, first: %s",
              atomic_load(&r->failures), r->first);
    TK_EXPECT(atomic_load(&r->unproven) <= KILLS * KILL_THREADS,
              "%d re-asked releases reported lost: more than the commands "
              "in flight at the kills",
              atomic_load(&r->unproven));
}

/* threads x pairs on the shared Redis through one client whose pool holds
 * pool_size connections, two threads a key, with run's checks. */
static void run_on_pool(int pool_size, int threads, int pairs)
{
    pipe_case *pc = begin_case();
    const char *url = itkit_shared_url();
    dlock_client *c = pc->c = pooled_client(url, NULL, pool_size);
    worker *w = pc->w;
    dlock_client_stats st;
    run *const r = &pc->r;

    run_init(r, c, threads / 2, pairs);
    start_workers(r, w, threads);
    join_workers(r, w, threads);
    dlock_client_stats_get(c, &st);
    expect_clean(r);
    TK_EXPECT(atomic_load(&r->grants) == (long)threads * pairs,
              "%ld grants of %ld", atomic_load(&r->grants),
              (long)threads * pairs);
    TK_EXPECT(st.pool_open <= pool_size, "%d connections open on a pool of %d",
              st.pool_open, pool_size);
    for (int i = 0; i < r->nkeys; i++)
        testkit_forget_lock(url, r->keys[i].name);
}

static void many_threads_share_two_connections(void **state)
{
    const int pairs = getenv("DLOCK_TEST_LONG") != NULL
                              && strcmp(getenv("DLOCK_TEST_LONG"), "1") == 0
                          ? PAIRS_LONG
                          : PAIRS_SHORT;

    (void)state;
    run_on_pool(2, THREADS, pairs);
}

static void a_crowd_on_one_connection_shares_parking_slots(void **state)
{
    (void)state;
    run_on_pool(1, CROWD_THREADS, CROWD_PAIRS);
}

static void busy_threads_gather_on_few_connections(void **state)
{
    pipe_case *pc = begin_case();
    const char *url = itkit_shared_url();
    dlock_client *c = pc->c = itkit_client(url, NULL);
    worker *w = pc->w;
    dlock_client_stats st;
    run *const r = &pc->r;

    (void)state;
    run_init(r, c, GATHER_THREADS, GATHER_PAIRS);
    start_workers(r, w, GATHER_THREADS);
    join_workers(r, w, GATHER_THREADS);
    dlock_client_stats_get(c, &st);
    expect_clean(r);
    TK_EXPECT(atomic_load(&r->grants) == (long)GATHER_THREADS * GATHER_PAIRS,
              "%ld grants of %ld", atomic_load(&r->grants),
              (long)GATHER_THREADS * GATHER_PAIRS);
    TK_EXPECT(st.pool_open <= 6,
              "%d connections open for %d threads: their commands did not "
              "gather on few connections",
              st.pool_open, GATHER_THREADS);
    for (int i = 0; i < r->nkeys; i++)
        testkit_forget_lock(url, r->keys[i].name);
}

static void tls_pipes_take_turns_reading_and_writing(void **state)
{
    testkit_redis_opts so = {.name = "pipeline-tls", .tls = 1};
    pipe_case *pc = begin_case();
    testkit_redis *srv = pc->srv = testkit_redis_start(&so);
    worker *w = pc->w;
    dlock_client *c;
    run *const r = &pc->r;

    (void)state;
    TK_EXPECT(srv != NULL, "a private redis-server with TLS");
    c = pc->c = pooled_client(srv->tls_url, srv->certs.ca_file, 1);
    run_init(r, c, TLS_THREADS / 2, TLS_PAIRS);
    start_workers(r, w, TLS_THREADS);
    join_workers(r, w, TLS_THREADS);
    expect_clean(r);
    TK_EXPECT(atomic_load(&r->grants) == (long)TLS_THREADS * TLS_PAIRS,
              "%ld grants of %ld", atomic_load(&r->grants),
              (long)TLS_THREADS * TLS_PAIRS);
}

typedef struct progress {
    run *r;
    long target;
} progress;

static int grants_reached(void *arg)
{
    progress *p = arg;

    return atomic_load(&p->r->grants) >= p->target;
}

typedef struct key_probe {
    const char *url;
    run *r;
} key_probe;

/* 1 when no key of the run is held (a timed-out acquire's clean-up runs
 * on the watchdog, so it may come a little later). */
static int no_key_held(void *arg)
{
    key_probe *kp = arg;

    for (int i = 0; i < kp->r->nkeys; i++)
        if (testkit_redis_int(kp->url, "EXISTS %s", kp->r->keys[i].name) != 0)
            return 0;
    return 1;
}

static void killed_connections_resolve_every_command(void **state)
{
    testkit_redis_opts so = {.name = "pipeline"};
    pipe_case *pc = begin_case();
    testkit_redis *srv = pc->srv = testkit_redis_start(&so);
    const long total = (long)KILL_THREADS * KILL_PAIRS;
    worker *w = pc->w;
    dlock_client_stats st;
    dlock_client *c;
    key_probe kp;
    int kills = 0;
    run *const r = &pc->r;

    (void)state;
    TK_EXPECT(srv != NULL, "a private redis-server");
    c = pc->c = pooled_client(srv->url, NULL, 2);
    run_init(r, c, KILL_THREADS / 2, KILL_PAIRS);
    start_workers(r, w, KILL_THREADS);
    for (int i = 1; i <= KILLS; i++) {
        progress p = {r, total * i / (KILLS + 1)};
        redisReply *reply;

        if (!testkit_wait_until(grants_reached, &p, RUN_TIMEOUT_MS))
            break;
        reply = testkit_redis_cmd(srv->admin_url,
                                  "CLIENT KILL TYPE normal SKIPME yes");
        if (reply != NULL && reply->type == REDIS_REPLY_INTEGER)
            kills += reply->integer > 0;
        freeReplyObject(reply);
    }
    join_workers(r, w, KILL_THREADS);
    dlock_client_stats_get(c, &st);
    fprintf(stderr,
            "%d kills hit; %ld grants, %llu transport errors, %d re-asked "
            "releases unproven (reported lost)\n",
            kills, atomic_load(&r->grants),
            (unsigned long long)st.transport_errors,
            atomic_load(&r->unproven));
    expect_clean(r);
    TK_EXPECT(kills == KILLS, "%d of %d kills found connections", kills,
              KILLS);
    TK_EXPECT(st.transport_errors > 0, "the kills broke no command");
    TK_EXPECT(atomic_load(&r->grants) == total, "%ld grants of %ld",
              atomic_load(&r->grants), total);
    kp = (key_probe){srv->url, r};
    TK_EXPECT(testkit_wait_until(no_key_held, &kp, 5000),
              "a key is still held after every thread released");
}

/* A failure the silent case allows: the command's deadline passed, or
 * its connection failed with it, or a release re-asked on another
 * connection found its token gone and says so. */
static int silent_failure_allowed(dlock_err err, const char *msg)
{
    return err == DLOCK_TIMEOUT || err == DLOCK_UNAVAILABLE
           || (err == DLOCK_LOST && strstr(msg, "re-asked") != NULL);
}

static void silent_failed(run *r, int index, const char *what, const char *key,
                          dlock_err err)
{
    const char *msg = dlock_client_errmsg(r->client);

    if (silent_failure_allowed(err, msg)) {
        atomic_fetch_add(&r->failed[index], 1);
        return;
    }
    note(r, &r->failures, "%s %s: %s: %s", what, key, dlock_errname(err), msg);
}

/* A silent case's worker: a new key per pair, tried once, its token
 * checked against the server's while held. */
static void *silent_worker_main(void *arg)
{
    worker *w = arg;
    run *r = w->r;
    dlock_acquire_opts o = itkit_acquire_opts(SILENT_TTL_MS, 0);

    while (!atomic_load(&r->stop)) {
        char key[TESTKIT_KEY_MAX];
        dlock_lock_info info;
        dlock_lock *l = NULL;
        dlock_err err;

        testkit_key(key, "pipeline-silent");
        err = dlock_acquire(r->client, key, &o, &l);
        if (err != DLOCK_OK) {
            silent_failed(r, w->index, "acquire", key, err);
            continue;
        }
        err = dlock_inspect(r->client, key, &info);
        if (err == DLOCK_OK && strcmp(info.token, dlock_lock_token(l)) != 0)
            note(r, &r->crossed, "%s is held by \"%s\", not by our \"%s\"",
                 key, info.token, dlock_lock_token(l));
        else if (err != DLOCK_OK)
            silent_failed(r, w->index, "inspect", key, err);
        err = dlock_release(l);
        if (err != DLOCK_OK)
            silent_failed(r, w->index, "release", key, err);
        else
            atomic_fetch_add(&r->ok[w->index], 1);
    }
    atomic_fetch_add(&r->finished, 1);
    return NULL;
}

typedef struct silent_mark {
    run *r;
    long since[SILENT_THREADS];
    atomic_long *count; /* r->ok or r->failed */
} silent_mark;

static void silent_mark_now(silent_mark *m, run *r, atomic_long *count)
{
    m->r = r;
    m->count = count;
    for (int i = 0; i < SILENT_THREADS; i++)
        m->since[i] = atomic_load(&count[i]);
}

/* 1 once every worker's count has moved since the mark. */
static int every_worker_moved(void *arg)
{
    silent_mark *m = arg;

    for (int i = 0; i < SILENT_THREADS; i++)
        if (atomic_load(&m->count[i]) == m->since[i])
            return 0;
    return 1;
}

static int workers_moved(const silent_mark *m)
{
    int n = 0;

    for (int i = 0; i < SILENT_THREADS; i++)
        n += atomic_load(&m->count[i]) != m->since[i];
    return n;
}

static void silent_connection_resolves_every_command(void **state)
{
    pipe_case *pc = begin_case();
    testkit_proxied *link = pc->link = itkit_proxied("pipeline-silent");
    dlock_client_opts o = itkit_client_opts();
    worker *w = pc->w;
    silent_mark failed, ok;
    dlock_client_stats st;
    run *const r = &pc->r;

    (void)state;
    o.pool_size = 1;
    o.io_timeout_ms = SILENT_IO_MS;
    pc->c = itkit_client(link->url, &o);
    run_init(r, pc->c, 1, 0);
    silent_mark_now(&ok, r, r->ok);
    for (int i = 0; i < SILENT_THREADS; i++) {
        w[i] = (worker){.r = r, .index = i};
        assert_int_equal(pthread_create(&w[i].thread, NULL, silent_worker_main,
                                        &w[i]),
                         0);
        the_case.started = i + 1;
    }
    TK_EXPECT(testkit_wait_until(every_worker_moved, &ok, RUN_TIMEOUT_MS),
              "%d of %d threads got a pair through before the pause (first "
              "problem: %s)",
              workers_moved(&ok), SILENT_THREADS, r->first);
    silent_mark_now(&failed, r, r->failed);
    TK_EXPECT(testkit_proxy_ctl(link->proxy, "pause") == 0, "proxy paused");
    TK_EXPECT(testkit_wait_until(every_worker_moved, &failed, RUN_TIMEOUT_MS),
              "%d of %d threads saw a call fail within %d ms of the pause "
              "(first problem: %s)",
              workers_moved(&failed), SILENT_THREADS, RUN_TIMEOUT_MS,
              r->first);
    TK_EXPECT(testkit_proxy_ctl(link->proxy, "resume") == 0, "proxy resumed");
    silent_mark_now(&ok, r, r->ok);
    TK_EXPECT(testkit_wait_until(every_worker_moved, &ok, RUN_TIMEOUT_MS),
              "%d of %d threads got a pair through after the resume (first "
              "problem: %s)",
              workers_moved(&ok), SILENT_THREADS, r->first);
    atomic_store(&r->stop, 1);
    join_workers(r, w, SILENT_THREADS);
    dlock_client_stats_get(pc->c, &st);
    expect_clean(r);
    TK_EXPECT(st.pool_open <= 1, "%d connections open on a pool of 1",
              st.pool_open);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(many_threads_share_two_connections,
                                  end_case),
        cmocka_unit_test_teardown(
            a_crowd_on_one_connection_shares_parking_slots, end_case),
        cmocka_unit_test_teardown(busy_threads_gather_on_few_connections,
                                  end_case),
        cmocka_unit_test_teardown(tls_pipes_take_turns_reading_and_writing,
                                  end_case),
        cmocka_unit_test_teardown(killed_connections_resolve_every_command,
                                  end_case),
        cmocka_unit_test_teardown(silent_connection_resolves_every_command,
                                  end_case),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
