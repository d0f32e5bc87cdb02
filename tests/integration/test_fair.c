/*
 * test_fair.c: the fair lock (opts.fair, `dlock run --fair`) against the
 * shared stack's redis-server.
 *
 *   - 16 waiters, queued one after another while the key is held (each is
 *     seen in dlock_inspect's queue before the next starts), get the lock
 *     in exactly that order when it is released; each holder checks that
 *     nobody else is inside and that its fence is above the previous
 *     holder's.
 *   - 8 threads x 40 rounds of fair acquire/release: no overlap, fences
 *     strictly increase in the order of the grants.
 *   - A waiter killed while queued (a `dlock run --fair` process, SIGKILL)
 *     is skipped: the waiter behind it gets the lock within the confirm
 *     window plus slack, far sooner than the dead entry's 30 s lifetime.
 *   - A waiter handed the lock that never confirms (a `dlock run --fair`
 *     SIGSTOPped while queued) holds the key only for its confirm window,
 *     then the next waiter gets it.
 *   - A plain acquire does not take a free key while a live fair waiter
 *     is queued (an entry written here, as a waiter elsewhere would), and
 *     takes it once that entry's deadline has passed.
 *   - A fair acquire of a free key nobody waits for leaves no queue; a
 *     queued waiter whose try takes the key a plain holder freed leaves
 *     the queue as it takes it.
 *   - `dlock acquire --fair` and `dlock release --fair`: the CLI's lock
 *     is handed to a queued library waiter by its release, long before the
 *     CLI lock's 30 s TTL.
 *   - Nor with 8 waiter threads on one client while another thread of it
 *     keeps making fair tries that will not wait (their replies carry
 *     server times past each grant's fence, which a grant's check must
 *     not count): after the release the waiters send at most one try
 *     each (a fallback try), no confirming acquire.
 *   - A fair acquire on a client whose last fair try on the key found
 *     it busy subscribes to its grant channel before its first try, and
 *     sends that one try in all (no try on the SUBSCRIBE confirmation):
 *     the releaser looping back for a key with waiters sends two requests
 *     in the hand-off window, not three.  And a release that grants the
 *     key wakes only the grantee: nothing is published to the waiter
 *     behind it (which would wake a second thread in the hand-off).
 *     Seen on MONITOR.
 *   - The grant needs no second round trip: a MONITOR connection sees
 *     every command; between the holder's release and the waiter's
 *     return with the lock, the waiter sends no acquire (its first
 *     renewal, the confirm, follows, and its validity then grows past the
 *     confirm window).  Counted in commands, not timed.
 * The bounds on time are generous (the machine may be loaded); what they
 * separate is "within the confirm window" from "after the 30 s entry
 * lifetime or the 10 s TTL".
 *
 * The threads of a case and all they touch live in static storage
 * (fair_case), and end_case, the teardown of every case with threads,
 * lets them in (the holder's release), stops them, joins them and frees
 * what the case opened whether the case passed or failed: a failed TK_EXPECT leaves by longjmp, and
 * threads holding the case's stack frame corrupted the next case.
 */
#include "itkit.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAITERS 16
#define TTL_MS 10000
#define WAIT_MS 60000
#define LOOP_THREADS 8
#define LOOP_ROUNDS 40
/* The CLI waiters' confirm window is the library default: min(TTL, 2 s). */
#define CLI_CONFIRM_MS 2000

typedef struct run {
    dlock_client *client;
    const char *key;
    atomic_int inside;
    atomic_int overlaps;
    atomic_int failures;
    atomic_int served;             /* grants so far */
    int order[WAITERS * 64];       /* grant number -> waiter id */
    uint64_t fences[WAITERS * 64]; /* grant number -> fence */
    char failure[DLOCK_ERRMSG_MAX + 64];
} run;

typedef struct waiter {
    run *r;
    int id;
    int rounds;
    int64_t confirm_ms;
} waiter;

/* A thread making fair tries that will not wait (raiser_main). */
typedef struct raiser {
    run *r;
    atomic_int stop;
    atomic_int tries;
} raiser;

static dlock_acquire_opts fair_opts(int64_t confirm_ms)
{
    dlock_acquire_opts o = itkit_acquire_opts(TTL_MS, WAIT_MS);

    o.fair = 1;
    o.fair_confirm_ms = confirm_ms;
    return o;
}

/* Inside the lock: no one else may be; records the grant's order and
 * fence (written under the lock, read by the test after the joins). */
static void hold(run *r, int id, dlock_lock *l)
{
    int n;

    if (atomic_exchange(&r->inside, 1) != 0)
        atomic_fetch_add(&r->overlaps, 1);
    n = atomic_fetch_add(&r->served, 1);
    if (n < (int)(sizeof(r->order) / sizeof(r->order[0]))) {
        r->order[n] = id;
        r->fences[n] = dlock_lock_fence(l);
    }
    sched_yield();
    atomic_store(&r->inside, 0);
}

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    dlock_acquire_opts o = fair_opts(w->confirm_ms);

    for (int i = 0; i < w->rounds; i++) {
        dlock_lock *l = NULL;
        dlock_err err = dlock_acquire(w->r->client, w->r->key, &o, &l);

        if (err == DLOCK_OK) {
            hold(w->r, w->id, l);
            err = dlock_release(l);
        }
        if (err != DLOCK_OK) {
            if (atomic_fetch_add(&w->r->failures, 1) == 0)
                snprintf(w->r->failure, sizeof(w->r->failure),
                         "waiter %d: "
                         "%s: %s",
                         w->id, dlock_errname(err),
                         dlock_client_errmsg(w->r->client));
            break;
        }
    }
    return NULL;
}

typedef struct queue_probe {
    dlock_client *client;
    const char *key;
    int64_t want;
} queue_probe;

static int queue_reached(void *arg)
{
    queue_probe *q = arg;
    dlock_lock_info info;

    return dlock_inspect(q->client, q->key, &info) == DLOCK_OK
           && info.waiters >= q->want;
}

/* Waits (bounded) until key's fair queue holds want waiters. */
static void expect_queue(dlock_client *c, const char *key, int64_t want)
{
    queue_probe q = {c, key, want};

    TK_EXPECT(testkit_wait_until(queue_reached, &q, 20000),
              "%lld waiters queued on %s", (long long)want, key);
}

static dlock_client *fair_client(const char *url, int pool)
{
    dlock_client_opts o = itkit_client_opts();

    o.pool_size = pool;
    return itkit_client(url, &o);
}

static void expect_fences_increase(const run *r, int n)
{
    for (int i = 1; i < n; i++)
        TK_EXPECT(r->fences[i] > r->fences[i - 1],
                  "grant %d's fence %llu "
                  "above grant %d's %llu",
                  i, (unsigned long long)r->fences[i], i - 1,
                  (unsigned long long)r->fences[i - 1]);
}

/* Starts `dlock run --fair --wait 60s KEY -- sleep 30` against url. */
static pid_t start_cli_waiter(const char *url, const char *key)
{
    char path[1024];
    pid_t pid;

    snprintf(path, sizeof(path), "%s/src/cli/dlock", testkit_build_dir());
    pid = fork();
    if (pid == 0) {
        execl(path, "dlock", "run", "--fair", "--quiet", "--wait", "60s",
              "--ttl", "10s", "--url", url, key, "--", "sleep", "30",
              (char *)NULL);
        _exit(127);
    }
    return pid;
}

typedef struct taker {
    dlock_client *client;
    const char *key;
    dlock_lock *lock;
    dlock_err err;
    int64_t got_ms;
} taker;

static void *taker_main(void *arg)
{
    taker *t = arg;
    dlock_acquire_opts o = fair_opts(0);

    t->err = dlock_acquire(t->client, t->key, &o, &t->lock);
    t->got_ms = testkit_now_ms();
    return NULL;
}

/* ---- one case's threads ------------------------------------------------ */

#define CASE_THREADS (WAITERS + 1)
#define SUBS_SEEN 256

/* Everything a case's threads touch (the run, the waiters, the taker, the
 * raiser, the key's name, the clients), the holder's lock and a CLI
 * waiter, in static storage: a failed TK_EXPECT leaves the case by
 * longjmp while its threads still run, so their state must outlive the
 * case's frame until end_case has ended them.  One case at a time uses
 * it. */
typedef struct fair_case {
    char key[TESTKIT_KEY_MAX];
    run r;
    waiter w[WAITERS];
    taker t;
    raiser x;
    dlock_client *clients[2]; /* freed by end_case */
    dlock_lock *held;         /* the holder's, until released */
    pid_t cli_pid;            /* a `dlock run` waiter not yet reaped, or 0 */
    redisContext *mon;        /* a MONITOR connection, freed by end_case */
    /* The tokens whose grant channels MONITOR showed subscribed, the
     * latest SUBS_SEEN of them (mon_note_subscribe). */
    char subs[SUBS_SEEN][128];
    int nsubs;
    pthread_t threads[CASE_THREADS];
    void *(*mains[CASE_THREADS])(void *);
    void *args[CASE_THREADS];
    int nthreads; /* started */
    int joined;   /* the first joined of them */
    atomic_int finished;
} fair_case;

static fair_case the_case;

static fair_case *begin_case(void)
{
    memset(&the_case, 0, sizeof(the_case));
    return &the_case;
}

/* Runs the case's thread number arg and counts it finished. */
static void *case_thread(void *arg)
{
    fair_case *fc = &the_case;
    int i = (int)(intptr_t)arg;

    fc->mains[i](fc->args[i]);
    atomic_fetch_add(&fc->finished, 1);
    return NULL;
}

/* Starts main(arg) as the case's next thread: 0, or -1 if it did not
 * start.  join_case or end_case joins it. */
static int case_start(void *(*main)(void *), void *arg)
{
    fair_case *fc = &the_case;
    int i = fc->nthreads;

    if (i >= CASE_THREADS)
        return -1;
    fc->mains[i] = main;
    fc->args[i] = arg;
    if (pthread_create(&fc->threads[i], NULL, case_thread, (void *)(intptr_t)i)
        != 0)
        return -1;
    fc->nthreads++;
    return 0;
}

/* Joins the case's threads up to (not including) number upto (the case's
 * own, unbounded join). */
static void join_threads(fair_case *fc, int upto)
{
    for (; fc->joined < upto; fc->joined++)
        pthread_join(fc->threads[fc->joined], NULL);
}

/* Joins every thread the case started. */
static void join_case(fair_case *fc)
{
    join_threads(fc, fc->nthreads);
    fc->nthreads = 0;
    fc->joined = 0;
    atomic_store(&fc->finished, 0);
}

/* Releases *l and forgets it, so that end_case does not release it
 * again. */
static dlock_err release_of(dlock_lock **l)
{
    dlock_lock *lock = *l;

    *l = NULL;
    return dlock_release(lock);
}

static int threads_done(void *arg)
{
    const fair_case *fc = arg;

    return atomic_load(&fc->finished) == fc->nthreads;
}

/* Teardown of every case with threads, passed or failed: releases the
 * holder's lock (which lets the waiters in), stops the raiser and a CLI
 * waiter, joins the threads, releases the taker's lock and frees the
 * clients.  Threads that do not return within the bound keep the state
 * (static, clients not freed) and fail the teardown. */
static int end_case(void **state)
{
    fair_case *fc = &the_case;
    int status;

    (void)state;
    if (fc->held != NULL)
        (void)release_of(&fc->held);
    atomic_store(&fc->x.stop, 1);
    if (fc->cli_pid > 0) {
        kill(fc->cli_pid, SIGKILL);
        waitpid(fc->cli_pid, &status, 0);
    }
    if (!testkit_wait_until(threads_done, fc, 30000)) {
        fprintf(stderr, "# %d of %d threads did not return; leaking them\n",
                fc->nthreads - atomic_load(&fc->finished), fc->nthreads);
        return -1;
    }
    join_case(fc);
    if (fc->t.lock != NULL)
        (void)release_of(&fc->t.lock);
    for (int i = 0; i < 2; i++)
        if (fc->clients[i] != NULL)
            dlock_client_free(fc->clients[i]);
    if (fc->mon != NULL)
        redisFree(fc->mon);
    memset(fc, 0, sizeof(*fc));
    return 0;
}

static void waiters_are_served_in_queue_order(void **state)
{
    fair_case *fc = begin_case();
    char *key = fc->key;
    dlock_client *c = fc->clients[0] = fair_client(itkit_shared_url(),
                                                   WAITERS + 2);
    dlock_acquire_opts first = fair_opts(10000);
    run *const r = &fc->r;

    (void)state;
    r->client = c;
    r->key = testkit_key(key, "fair-order");
    first.wait_ms = 0;
    fc->held = itkit_acquire(c, key, &first);
    for (int i = 0; i < WAITERS; i++) {
        fc->w[i] = (waiter){r, i, 1, 10000};
        TK_EXPECT(case_start(waiter_main, &fc->w[i]) == 0, "thread %d started",
                  i);
        expect_queue(c, key, i + 1);
    }
    TK_EXPECT(release_of(&fc->held) == DLOCK_OK, "holder released");
    join_case(fc);
    TK_EXPECT(atomic_load(&r->failures) == 0, "no failure: %s", r->failure);
    TK_EXPECT(atomic_load(&r->overlaps) == 0, "no overlap");
    TK_EXPECT(atomic_load(&r->served) == WAITERS, "%d grants",
              atomic_load(&r->served));
    for (int i = 0; i < WAITERS; i++)
        TK_EXPECT(r->order[i] == i, "grant %d went to waiter %d, not %d", i,
                  r->order[i], i);
    expect_fences_increase(r, WAITERS);
}

static void contended_fair_lock_excludes(void **state)
{
    fair_case *fc = begin_case();
    char *key = fc->key;
    dlock_client *c = fc->clients[0] = fair_client(itkit_shared_url(),
                                                   LOOP_THREADS);
    run *const r = &fc->r;
    dlock_lock_info info;

    (void)state;
    r->client = c;
    r->key = testkit_key(key, "fair-loop");
    for (int i = 0; i < LOOP_THREADS; i++) {
        fc->w[i] = (waiter){r, i, LOOP_ROUNDS, 10000};
        TK_EXPECT(case_start(waiter_main, &fc->w[i]) == 0, "thread %d started",
                  i);
    }
    join_case(fc);
    TK_EXPECT(atomic_load(&r->failures) == 0, "no failure: %s", r->failure);
    TK_EXPECT(atomic_load(&r->overlaps) == 0, "no overlap");
    TK_EXPECT(atomic_load(&r->served) == LOOP_THREADS * LOOP_ROUNDS,
              "%d grants", atomic_load(&r->served));
    expect_fences_increase(r, LOOP_THREADS * LOOP_ROUNDS);
    TK_EXPECT(dlock_inspect(c, key, &info) == DLOCK_OK && !info.held
                  && info.waiters == 0,
              "free and no queue left: held %d, %lld "
              "waiters",
              info.held, (long long)info.waiters);
}

/* The confirm (the first renewal) landed: more validity than the
 * default confirm window (2 s) can give. */
static int confirmed(void *arg)
{
    return dlock_lock_valid_ms(arg) > CLI_CONFIRM_MS + 500;
}

/* The holder releases with a CLI waiter ahead of a thread in the queue;
 * before the release, stop_signal goes to the CLI waiter.  The thread must
 * get the lock within the confirm window plus slack. */
static void cli_waiter_is_skipped(int stop_signal, const char *name)
{
    fair_case *fc = begin_case();
    const char *url = itkit_shared_url();
    char *key = fc->key;
    dlock_client *c = fc->clients[0] = fair_client(url, 4);
    dlock_acquire_opts first = fair_opts(0);
    dlock_lock_info info;
    taker *const t = &fc->t;
    pid_t pid;
    int status;
    int64_t released_ms;

    testkit_key(key, name);
    first.wait_ms = 0;
    fc->held = itkit_acquire(c, key, &first);
    pid = fc->cli_pid = start_cli_waiter(url, key);
    TK_EXPECT(pid > 0, "dlock run started");
    expect_queue(c, key, 1);
    *t = (taker){c, key, NULL, DLOCK_OK, 0};
    TK_EXPECT(case_start(taker_main, t) == 0, "taker started");
    expect_queue(c, key, 2);
    TK_EXPECT(kill(pid, stop_signal) == 0, "signal %d sent", stop_signal);
    if (stop_signal == SIGKILL) {
        TK_EXPECT(waitpid(pid, &status, 0) == pid, "dlock run reaped");
        fc->cli_pid = 0;
    }
    released_ms = testkit_now_ms();
    TK_EXPECT(release_of(&fc->held) == DLOCK_OK, "holder released");
    /* The dead or stopped waiter was handed the key with its confirm
     * window as the PX, not the 10 s TTL. */
    TK_EXPECT(dlock_inspect(c, key, &info) == DLOCK_OK, "inspect");
    TK_EXPECT(!info.held || info.ttl_ms <= CLI_CONFIRM_MS,
              "the grant lasts "
              "the confirm window: ttl %lld ms",
              (long long)info.ttl_ms);
    join_case(fc);
    TK_EXPECT(t->err == DLOCK_OK, "the next waiter got the lock: %s",
              dlock_errname(t->err));
    TK_EXPECT(t->got_ms - released_ms <= CLI_CONFIRM_MS + 4000,
              "within the "
              "confirm window plus slack: %lld ms after the release",
              (long long)(t->got_ms - released_ms));
    TK_EXPECT(release_of(&t->lock) == DLOCK_OK, "next waiter released");
    if (stop_signal != SIGKILL) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fc->cli_pid = 0;
    }
}

static void waiter_killed_while_queued_is_skipped(void **state)
{
    (void)state;
    cli_waiter_is_skipped(SIGKILL, "fair-killed");
}

static void grant_never_confirmed_lapses(void **state)
{
    (void)state;
    cli_waiter_is_skipped(SIGSTOP, "fair-stopped");
}

/* The server's clock in milliseconds. */
static long long server_ms(const char *url)
{
    redisReply *r = testkit_redis_cmd(url, "TIME");
    long long ms = 0;

    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        ms = atoll(r->element[0]->str) * 1000
             + atoll(r->element[1]->str) / 1000;
    if (r != NULL)
        freeReplyObject(r);
    TK_EXPECT(ms > 0, "TIME answered");
    return ms;
}

/* Writes a queue entry for token on key that lives until deadline_ms
 * (server time), as a fair waiter's try would. */
static void write_entry(const char *url, const char *key, const char *token,
                        long long deadline_ms)
{
    char queue[TESTKIT_KEY_MAX + 32], waiters[TESTKIT_KEY_MAX + 32];
    char entry[64];
    redisReply *r;

    snprintf(queue, sizeof(queue), "#dlock:queue:{%s}", key);
    snprintf(waiters, sizeof(waiters), "#dlock:waiters:{%s}", key);
    snprintf(entry, sizeof(entry), "%lld:2000:1", deadline_ms);
    r = testkit_redis_cmd(url, "ZADD %s 1 %s", queue, token);
    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_INTEGER, "ZADD");
    freeReplyObject(r);
    r = testkit_redis_cmd(url, "HSET %s %s %s", waiters, token, entry);
    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_INTEGER, "HSET");
    freeReplyObject(r);
    r = testkit_redis_cmd(url, "PEXPIRE %s 60000", queue);
    freeReplyObject(r);
    r = testkit_redis_cmd(url, "PEXPIRE %s 60000", waiters);
    freeReplyObject(r);
}

static void plain_acquire_does_not_jump_the_queue(void **state)
{
    const char *url = itkit_shared_url();
    const char *token = "00112233445566778899aabbccddeeff";
    char key[TESTKIT_KEY_MAX];
    dlock_client *c = fair_client(url, 2);
    dlock_acquire_opts plain = itkit_acquire_opts(TTL_MS, 0);
    dlock_lock *l = NULL;
    dlock_err err;

    (void)state;
    testkit_key(key, "fair-plain");
    write_entry(url, key, token, server_ms(url) + 30000);
    err = dlock_acquire(c, key, &plain, &l);
    TK_EXPECT(err == DLOCK_BUSY,
              "a plain acquire of a free key with a "
              "fair waiter queued is busy, got %s",
              dlock_errname(err));
    TK_EXPECT(strstr(dlock_client_errmsg(c), "fair waiters") != NULL,
              "the message says why: %s", dlock_client_errmsg(c));
    TK_EXPECT(testkit_redis_int(url, "EXISTS %s", key) == 0,
              "the refused acquire left the key free for the waiter");
    /* The waiter gave up (its entry's deadline passed): the key is free
     * for anyone. */
    write_entry(url, key, token, server_ms(url) - 1);
    err = dlock_acquire(c, key, &plain, &l);
    TK_EXPECT(err == DLOCK_OK,
              "a plain acquire behind a dead entry takes "
              "the key: %s",
              dlock_client_errmsg(c));
    TK_EXPECT(dlock_release(l) == DLOCK_OK, "released");
    dlock_client_free(c);
}

/* Waiters on key's queue, counted in both of its keys: the order (a
 * sorted set) and the entries (a hash). */
static long long queued_on(const char *url, const char *key)
{
    return testkit_redis_int(url, "ZCARD #dlock:queue:{%s}", key)
           + testkit_redis_int(url, "HLEN #dlock:waiters:{%s}", key);
}

static void head_that_takes_the_free_key_leaves_the_queue(void **state)
{
    fair_case *fc = begin_case();
    const char *url = itkit_shared_url();
    dlock_client *c = fc->clients[0] = fair_client(url, 4);
    dlock_acquire_opts plain = itkit_acquire_opts(TTL_MS, 0);
    dlock_acquire_opts alone = fair_opts(0);
    dlock_lock *l;

    (void)state;
    testkit_key(fc->key, "fair-leave");
    alone.wait_ms = 0;
    l = itkit_acquire(c, fc->key, &alone);
    TK_EXPECT(queued_on(url, fc->key) == 0,
              "a fair acquire of a free key nobody waits for queues nothing");
    TK_EXPECT(dlock_release(l) == DLOCK_OK, "released");
    /* A plain holder's release frees the key and nudges the head, whose
     * own try then takes it. */
    fc->held = itkit_acquire(c, fc->key, &plain);
    fc->t = (taker){.client = c, .key = fc->key};
    TK_EXPECT(case_start(taker_main, &fc->t) == 0, "waiter started");
    expect_queue(c, fc->key, 1);
    TK_EXPECT(release_of(&fc->held) == DLOCK_OK, "plain holder released");
    join_case(fc);
    TK_EXPECT(fc->t.err == DLOCK_OK, "the head took the key: %s",
              dlock_errname(fc->t.err));
    TK_EXPECT(queued_on(url, fc->key) == 0,
              "the head that took the free key left the queue, got %lld",
              queued_on(url, fc->key));
    TK_EXPECT(release_of(&fc->t.lock) == DLOCK_OK, "released");
}

/* Runs `dlock acquire --fair --ttl 30s KEY` against url and reads the
 * token it prints into token. */
static void cli_acquire_fair(const char *url, const char *key,
                             char token[DLOCK_TOKEN_LEN + 1])
{
    char cmd[2048], line[256];
    FILE *p;
    const char *t = NULL;

    snprintf(cmd, sizeof(cmd),
             "%s/src/cli/dlock acquire --fair --ttl 30s "
             "--url '%s' '%.*s'",
             testkit_build_dir(), url, TESTKIT_KEY_MAX - 1, key);
    p = popen(cmd, "r");
    TK_EXPECT(p != NULL, "dlock acquire started");
    if (fgets(line, sizeof(line), p) != NULL)
        t = strstr(line, "token=");
    TK_EXPECT(pclose(p) == 0 && t != NULL, "dlock acquire --fair printed a "
                                           "token and exited 0");
    snprintf(token, DLOCK_TOKEN_LEN + 1, "%s", t + 6);
}

static void cli_fair_acquire_and_release(void **state)
{
    fair_case *fc = begin_case();
    const char *url = itkit_shared_url();
    char *key = fc->key, token[DLOCK_TOKEN_LEN + 1], cmd[2048];
    dlock_client *c = fc->clients[0] = fair_client(url, 2);
    dlock_lock_info info;
    taker *const t = &fc->t;
    int64_t released_ms;

    (void)state;
    testkit_key(key, "fair-cli");
    cli_acquire_fair(url, key, token);
    TK_EXPECT(dlock_inspect(c, key, &info) == DLOCK_OK && info.held
                  && info.ttl_ms > CLI_CONFIRM_MS,
              "held with the full TTL, not the confirm window: %lld ms",
              (long long)info.ttl_ms);
    *t = (taker){c, key, NULL, DLOCK_OK, 0};
    TK_EXPECT(case_start(taker_main, t) == 0, "waiter started");
    expect_queue(c, key, 1);
    snprintf(cmd, sizeof(cmd),
             "%s/src/cli/dlock release --fair --url '%s' "
             "'%.*s' %s",
             testkit_build_dir(), url, TESTKIT_KEY_MAX - 1, key, token);
    released_ms = testkit_now_ms();
    TK_EXPECT(system(cmd) == 0, "dlock release --fair exited 0");
    join_case(fc);
    TK_EXPECT(t->err == DLOCK_OK, "the queued waiter got the lock: %s",
              dlock_errname(t->err));
    TK_EXPECT(t->got_ms - released_ms < 10000,
              "handed over by the release, "
              "not at the CLI lock's 30 s TTL: %lld ms",
              (long long)(t->got_ms - released_ms));
    TK_EXPECT(release_of(&t->lock) == DLOCK_OK, "waiter released");
}

/* ---- the grant travels in the notification ----------------------------- */

#define MON_ARGS 16

/* A MONITOR line split into its quoted arguments (lua's own calls are
 * marked lua and skipped by the callers). */
typedef struct mon_line {
    int lua;
    int argc;
    char argv[MON_ARGS][128];
} mon_line;

static void mon_parse(const char *s, mon_line *out)
{
    memset(out, 0, sizeof(*out));
    out->lua = strstr(s, " lua]") != NULL;
    s = strchr(s, ']');
    while (s != NULL && out->argc < MON_ARGS) {
        size_t n = 0;

        s = strchr(s, '"');
        if (s == NULL)
            break;
        for (s++; *s != '\0' && *s != '"'; s++) {
            if (*s == '\\' && s[1] != '\0')
                s++;
            if (n + 1 < sizeof(out->argv[0]))
                out->argv[out->argc][n++] = *s;
        }
        out->argv[out->argc++][n] = '\0';
        if (*s == '"')
            s++;
    }
}

/* Reads the next MONITOR line (the connection has a read timeout);
 * 0 when none came. */
static int mon_next(redisContext *mon, mon_line *line)
{
    redisReply *r = NULL;

    if (redisGetReply(mon, (void **)&r) != REDIS_OK || r == NULL)
        return 0;
    if (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_STRING)
        mon_parse(r->str, line);
    else
        memset(line, 0, sizeof(*line));
    freeReplyObject(r);
    return 1;
}

/* The fair scripts' calls: EVALSHA sha 5 K fence legacy queue waiters
 * TOKEN ...; 1 if line is one on key by token (any script). */
static int mon_fair_call(const mon_line *l, const char *key, const char *token)
{
    return !l->lua && l->argc > 8 && strcmp(l->argv[2], "5") == 0
           && strcmp(l->argv[3], key) == 0
           && (token == NULL || strcmp(l->argv[8], token) == 0);
}

/* Reads MONITOR until the first fair call on key by token, and copies the
 * script's SHA (the fair acquire's, when token just acquired) into sha. */
static void mon_acquire_sha(redisContext *mon, const char *key,
                            const char *token, char *sha, size_t len)
{
    mon_line line;

    while (sha[0] == '\0' && mon_next(mon, &line))
        if (mon_fair_call(&line, key, token))
            snprintf(sha, len, "%s", line.argv[1]);
}

/* Sends "ECHO <what>-mark-<pid>" through url (the marker into marker):
 * a MONITOR reader that sees it has read every command sent before. */
static void mon_send_marker(const char *url, const char *what, char *marker,
                            size_t len)
{
    snprintf(marker, len, "%s-mark-%d", what, (int)getpid());
    freeReplyObject(testkit_redis_cmd(url, "ECHO %s", marker));
}

/* 1 if l is the ECHO of marker. */
static int mon_is_marker(const mon_line *l, const char *marker)
{
    return !l->lua && l->argc == 2 && strcmp(l->argv[0], "ECHO") == 0
           && strcmp(l->argv[1], marker) == 0;
}

/* Notes a SUBSCRIBE of a fair grant channel (dlock:granted:TOKEN) in the
 * case's list of subscribed tokens. */
static void mon_note_subscribe(const mon_line *l)
{
    fair_case *fc = &the_case;
    const size_t plen = strlen("dlock:granted:");

    if (l->lua || l->argc != 2 || strcmp(l->argv[0], "SUBSCRIBE") != 0
        || strncmp(l->argv[1], "dlock:granted:", plen) != 0)
        return;
    snprintf(fc->subs[fc->nsubs++ % SUBS_SEEN], sizeof(fc->subs[0]), "%s",
             l->argv[1] + plen);
}

/* 1 if MONITOR showed token's grant channel subscribed. */
static int mon_subscribed(const char *token)
{
    const fair_case *fc = &the_case;
    int n = fc->nsubs < SUBS_SEEN ? fc->nsubs : SUBS_SEEN;

    for (int i = 0; i < n; i++)
        if (strcmp(fc->subs[i], token) == 0)
            return 1;
    return 0;
}

static redisContext *monitor_connect(const char *url)
{
    char host[64] = "127.0.0.1";
    int port = 6379;
    const char *at = strstr(url, "://");
    struct timeval tv = {10, 0};
    redisContext *mon;
    redisReply *r;

    if (at != NULL)
        sscanf(at + 3, "%63[^:]:%d", host, &port);
    mon = redisConnectWithTimeout(host, port, tv);
    TK_EXPECT(mon != NULL && mon->err == 0, "MONITOR connection to %s:%d",
              host, port);
    TK_EXPECT(redisSetTimeout(mon, tv) == REDIS_OK, "read timeout set");
    r = redisCommand(mon, "MONITOR");
    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS, "MONITOR started");
    freeReplyObject(r);
    return mon;
}

static void grant_needs_no_second_round_trip(void **state)
{
    fair_case *fc = begin_case();
    const char *url = itkit_shared_url();
    char *key = fc->key, marker[64], holder_token[DLOCK_TOKEN_LEN + 1];
    char acquire_sha[128] = "", waiter_token[128] = "";
    redisContext *mon = fc->mon = monitor_connect(url);
    dlock_client *holder_client = fc->clients[0] = fair_client(url, 2);
    dlock_client *waiter_client = fc->clients[1] = fair_client(url, 1);
    dlock_acquire_opts first = fair_opts(0);
    taker *const t = &fc->t;
    mon_line line;
    int waiter_tries = 0, released = 0, after_release = 0, marked = 0;
    uint64_t held_fence;

    (void)state;
    testkit_key(key, "fair-grant-message");
    first.wait_ms = 0;
    fc->held = itkit_acquire(holder_client, key, &first);
    held_fence = dlock_lock_fence(fc->held);
    snprintf(holder_token, sizeof(holder_token), "%s",
             dlock_lock_token(fc->held));
    *t = (taker){waiter_client, key, NULL, DLOCK_OK, 0};
    TK_EXPECT(case_start(taker_main, t) == 0, "waiter started");
    /* The holder's acquire names the fair acquire script; the waiter
     * tries once, subscribes, and tries again on the confirmation: after
     * that try it is asleep on its channel, and its entry is the one the
     * release grants. */
    while (waiter_tries < 2 && mon_next(mon, &line)) {
        if (!mon_fair_call(&line, key, NULL))
            continue;
        if (acquire_sha[0] == '\0'
            && strcmp(line.argv[8], holder_token) == 0) {
            snprintf(acquire_sha, sizeof(acquire_sha), "%s", line.argv[1]);
        } else if (acquire_sha[0] != '\0'
                   && strcmp(line.argv[1], acquire_sha) == 0
                   && strcmp(line.argv[8], holder_token) != 0) {
            snprintf(waiter_token, sizeof(waiter_token), "%s", line.argv[8]);
            waiter_tries++;
        }
    }
    TK_EXPECT(waiter_tries == 2,
              "the waiter queued and tried again once "
              "subscribed (saw %d tries)",
              waiter_tries);
    TK_EXPECT(release_of(&fc->held) == DLOCK_OK, "holder released");
    join_case(fc);
    TK_EXPECT(t->err == DLOCK_OK, "the waiter got the lock: %s",
              dlock_errname(t->err));
    mon_send_marker(url, "fair-grant", marker, sizeof(marker));
    while (!marked && mon_next(mon, &line))
        if (mon_is_marker(&line, marker))
            marked = 1;
        else if (mon_fair_call(&line, key, holder_token)
                 && strcmp(line.argv[1], acquire_sha) != 0)
            released = 1;
        else if (released && mon_fair_call(&line, key, waiter_token)
                 && strcmp(line.argv[1], acquire_sha) == 0)
            after_release++;
    TK_EXPECT(marked && released,
              "MONITOR showed the release (%d) and "
              "the marker (%d)",
              released, marked);
    TK_EXPECT(after_release == 0,
              "the waiter held the lock on the grant message alone: it "
              "sent %d acquire(s) after the release",
              after_release);
    TK_EXPECT(dlock_lock_fence(t->lock) > held_fence,
              "fence %llu above the holder's %llu",
              (unsigned long long)dlock_lock_fence(t->lock),
              (unsigned long long)held_fence);
    TK_EXPECT(testkit_wait_until(confirmed, t->lock, 5000),
              "the confirm set the full TTL: %lld ms valid",
              (long long)dlock_lock_valid_ms(t->lock));
    TK_EXPECT(release_of(&t->lock) == DLOCK_OK, "waiter released");
}

#define SHARED_WAITERS 8

/* Reads MONITOR until key's fair acquires (sha) carry n distinct tokens
 * other than holder, each seen in a try sent after its grant channel's
 * SUBSCRIBE (the try on the confirmation, or the one try of a waiter
 * that subscribed first): after it the waiter sleeps. */
static int mon_until_waiters(redisContext *mon, const char *key,
                             const char *sha, const char *holder, int n)
{
    static char tokens[SHARED_WAITERS][128];
    int known = 0;
    mon_line line;

    while (known < n && mon_next(mon, &line)) {
        int i;

        mon_note_subscribe(&line);
        if (!mon_fair_call(&line, key, NULL) || strcmp(line.argv[1], sha) != 0
            || strcmp(line.argv[8], holder) == 0
            || !mon_subscribed(line.argv[8]))
            continue;
        for (i = 0; i < known && strcmp(tokens[i], line.argv[8]) != 0; i++)
            ;
        if (i == known)
            snprintf(tokens[known++], sizeof(tokens[0]), "%s", line.argv[8]);
    }
    return known;
}

/* Fair tries that will not wait, on the waiters' client, until stopped
 * or it got the key (the queue was empty): each reply raises the client's
 * floor to the server's time. */
static void *raiser_main(void *arg)
{
    raiser *x = arg;
    dlock_acquire_opts o = fair_opts(0);

    o.wait_ms = 0;
    while (!atomic_load(&x->stop)) {
        dlock_lock *l = NULL;

        atomic_fetch_add(&x->tries, 1);
        if (dlock_acquire(x->r->client, x->r->key, &o, &l) == DLOCK_OK) {
            dlock_release(l);
            break;
        }
    }
    return NULL;
}

/* The raiser is trying in a loop (its first tries answered). */
static int raiser_running(void *arg)
{
    raiser *x = arg;

    return atomic_load(&x->tries) > 2;
}

static void grants_by_message_on_one_client(void **state)
{
    fair_case *fc = begin_case();
    const char *url = itkit_shared_url();
    char *key = fc->key, marker[64], holder_token[DLOCK_TOKEN_LEN + 1];
    char acquire_sha[128] = "";
    redisContext *mon = fc->mon = monitor_connect(url);
    dlock_client *c = fc->clients[0] = fair_client(url, SHARED_WAITERS + 2);
    dlock_acquire_opts first = fair_opts(10000);
    run *const r = &fc->r;
    raiser *const x = &fc->x;
    mon_line line;
    int released = 0, after_release = 0, marked = 0;

    (void)state;
    x->r = r;
    r->client = c;
    r->key = testkit_key(key, "fair-one-client");
    first.wait_ms = 0;
    fc->held = itkit_acquire(c, key, &first);
    snprintf(holder_token, sizeof(holder_token), "%s",
             dlock_lock_token(fc->held));
    mon_acquire_sha(mon, key, holder_token, acquire_sha, sizeof(acquire_sha));
    for (int i = 0; i < SHARED_WAITERS; i++) {
        fc->w[i] = (waiter){r, i, 1, 2000};
        TK_EXPECT(case_start(waiter_main, &fc->w[i]) == 0, "thread %d started",
                  i);
    }
    TK_EXPECT(mon_until_waiters(mon, key, acquire_sha, holder_token,
                                SHARED_WAITERS)
                  == SHARED_WAITERS,
              "every waiter queued and tried again once subscribed");
    TK_EXPECT(case_start(raiser_main, x) == 0, "raiser started");
    /* The hand-offs take a few round trips in all: a raiser not yet
     * running at the release could miss them all. */
    TK_EXPECT(testkit_wait_until(raiser_running, x, 10000),
              "the raiser is trying");
    TK_EXPECT(release_of(&fc->held) == DLOCK_OK, "holder released");
    join_threads(fc, SHARED_WAITERS);
    atomic_store(&x->stop, 1);
    join_case(fc);
    TK_EXPECT(atomic_load(&r->failures) == 0, "no failure: %s", r->failure);
    TK_EXPECT(atomic_load(&r->served) == SHARED_WAITERS, "%d grants",
              atomic_load(&r->served));
    mon_send_marker(url, "fair-one-client", marker, sizeof(marker));
    while (!marked && mon_next(mon, &line))
        if (mon_is_marker(&line, marker))
            marked = 1;
        else if (mon_fair_call(&line, key, holder_token)
                 && strcmp(line.argv[1], acquire_sha) != 0)
            released = 1;
        else if (released && mon_fair_call(&line, key, NULL)
                 && strcmp(line.argv[1], acquire_sha) == 0 && line.argc > 12
                 && strcmp(line.argv[12], "1") == 0)
            after_release++; /* a waiting try: not the raiser's */
    TK_EXPECT(marked && released, "MONITOR showed the release and marker");
    TK_EXPECT(atomic_load(&x->tries) > 1, "the raiser tried %d times",
              atomic_load(&x->tries));
    TK_EXPECT(after_release <= SHARED_WAITERS - 1,
              "after the release the waiters tried at most once each (at most "
              "%d), got %d acquires: a grant was declined",
              SHARED_WAITERS - 1, after_release);
    expect_fences_increase(r, SHARED_WAITERS);
}

/* A fair acquire on a client whose last fair try on the key found it
 * busy (the releaser looping back for a key with waiters) subscribes to
 * its grant channel and has the SUBSCRIBE confirmed before its first try,
 * so it sends one try in all: no try on the confirmation. */
static void reentry_subscribes_before_its_try(void **state)
{
    fair_case *fc = begin_case();
    const char *url = itkit_shared_url();
    char *key = fc->key, marker[64], holder_token[DLOCK_TOKEN_LEN + 1];
    char acquire_sha[128] = "", first_token[128] = "", second[128] = "";
    redisContext *mon = fc->mon = monitor_connect(url);
    dlock_client *holder_client = fc->clients[0] = fair_client(url, 2);
    dlock_client *c = fc->clients[1] = fair_client(url, 2);
    dlock_acquire_opts first = fair_opts(0);
    taker *const t = &fc->t;
    run *const r = &fc->r;
    mon_line line;
    int asleep = 0, subscribed_first = 0, second_tries = 0, marked = 0;
    int second_woken = 0;
    char second_channel[160];

    (void)state;
    testkit_key(key, "fair-reentry");
    first.wait_ms = 0;
    fc->held = itkit_acquire(holder_client, key, &first);
    snprintf(holder_token, sizeof(holder_token), "%s",
             dlock_lock_token(fc->held));
    mon_acquire_sha(mon, key, holder_token, acquire_sha, sizeof(acquire_sha));
    /* The first waiter's busy answer marks the key contended on c. */
    *t = (taker){c, key, NULL, DLOCK_OK, 0};
    TK_EXPECT(case_start(taker_main, t) == 0, "first waiter started");
    while (!asleep && mon_next(mon, &line)) {
        mon_note_subscribe(&line);
        if (!mon_fair_call(&line, key, NULL)
            || strcmp(line.argv[1], acquire_sha) != 0
            || strcmp(line.argv[8], holder_token) == 0)
            continue;
        snprintf(first_token, sizeof(first_token), "%s", line.argv[8]);
        asleep = mon_subscribed(first_token);
    }
    TK_EXPECT(asleep, "the first waiter queued and sleeps on its channel");
    r->client = c;
    r->key = key;
    fc->w[0] = (waiter){r, 0, 1, 0};
    TK_EXPECT(case_start(waiter_main, &fc->w[0]) == 0,
              "second waiter started");
    while (second[0] == '\0' && mon_next(mon, &line)) {
        mon_note_subscribe(&line);
        if (!mon_fair_call(&line, key, NULL)
            || strcmp(line.argv[1], acquire_sha) != 0
            || strcmp(line.argv[8], holder_token) == 0
            || strcmp(line.argv[8], first_token) == 0)
            continue;
        snprintf(second, sizeof(second), "%s", line.argv[8]);
        subscribed_first = mon_subscribed(second);
        second_tries = 1;
    }
    TK_EXPECT(second[0] != '\0', "MONITOR showed the second waiter's try");
    TK_EXPECT(subscribed_first,
              "the second waiter, on a client that found the key busy, "
              "subscribed to its grant channel before its first try");
    TK_EXPECT(release_of(&fc->held) == DLOCK_OK, "holder released");
    join_threads(fc, 1);
    TK_EXPECT(t->err == DLOCK_OK, "the first waiter got the lock: %s",
              dlock_errname(t->err));
    TK_EXPECT(release_of(&t->lock) == DLOCK_OK, "first waiter released");
    join_case(fc);
    TK_EXPECT(atomic_load(&r->failures) == 0, "no failure: %s", r->failure);
    TK_EXPECT(atomic_load(&r->served) == 1, "the second waiter got the lock");
    mon_send_marker(url, "fair-reentry", marker, sizeof(marker));
    snprintf(second_channel, sizeof(second_channel), "dlock:granted:%s",
             second);
    while (!marked && mon_next(mon, &line))
        if (mon_is_marker(&line, marker))
            marked = 1;
        else if (mon_fair_call(&line, key, second)
                 && strcmp(line.argv[1], acquire_sha) == 0)
            second_tries++;
        else if (line.lua && line.argc == 3
                 && strcmp(line.argv[0], "PUBLISH") == 0
                 && strcmp(line.argv[1], second_channel) == 0
                 && strchr(line.argv[2], ':') == NULL)
            second_woken++; /* anything but its grant */
    TK_EXPECT(marked, "MONITOR showed the marker");
    TK_EXPECT(second_woken == 0,
              "the holder's release, which granted the first waiter, "
              "published nothing to the second: %d message(s)",
              second_woken);
    TK_EXPECT(second_tries == 1,
              "the second waiter sent one try in all (queued, then "
              "granted by message), got %d",
              second_tries);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(waiters_are_served_in_queue_order, end_case),
        cmocka_unit_test_teardown(contended_fair_lock_excludes, end_case),
        cmocka_unit_test_teardown(waiter_killed_while_queued_is_skipped,
                                  end_case),
        cmocka_unit_test_teardown(grant_never_confirmed_lapses, end_case),
        cmocka_unit_test_teardown(grant_needs_no_second_round_trip, end_case),
        cmocka_unit_test_teardown(grants_by_message_on_one_client, end_case),
        cmocka_unit_test_teardown(reentry_subscribes_before_its_try, end_case),
        cmocka_unit_test(plain_acquire_does_not_jump_the_queue),
        cmocka_unit_test_teardown(
            head_that_takes_the_free_key_leaves_the_queue, end_case),
        cmocka_unit_test_teardown(cli_fair_acquire_and_release, end_case),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
