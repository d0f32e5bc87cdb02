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
 * The bounds on time are generous (the machine may be loaded); what they
 * separate is "within the confirm window" from "after the 30 s entry
 * lifetime or the 10 s TTL".
 */
#include "itkit.h"

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

static void waiters_are_served_in_queue_order(void **state)
{
    char key[TESTKIT_KEY_MAX];
    dlock_client *c = fair_client(itkit_shared_url(), WAITERS + 2);
    dlock_acquire_opts first = fair_opts(10000);
    static run r;
    waiter w[WAITERS];
    pthread_t threads[WAITERS];
    dlock_lock *held;

    (void)state;
    memset(&r, 0, sizeof(r));
    r.client = c;
    r.key = testkit_key(key, "fair-order");
    first.wait_ms = 0;
    held = itkit_acquire(c, key, &first);
    for (int i = 0; i < WAITERS; i++) {
        w[i] = (waiter){&r, i, 1, 10000};
        TK_EXPECT(pthread_create(&threads[i], NULL, waiter_main, &w[i]) == 0,
                  "thread %d started", i);
        expect_queue(c, key, i + 1);
    }
    TK_EXPECT(dlock_release(held) == DLOCK_OK, "holder released");
    for (int i = 0; i < WAITERS; i++)
        pthread_join(threads[i], NULL);
    TK_EXPECT(atomic_load(&r.failures) == 0, "no failure: %s", r.failure);
    TK_EXPECT(atomic_load(&r.overlaps) == 0, "no overlap");
    TK_EXPECT(atomic_load(&r.served) == WAITERS, "%d grants",
              atomic_load(&r.served));
    for (int i = 0; i < WAITERS; i++)
        TK_EXPECT(r.order[i] == i, "grant %d went to waiter %d, not %d", i,
                  r.order[i], i);
    expect_fences_increase(&r, WAITERS);
    dlock_client_free(c);
}

static void contended_fair_lock_excludes(void **state)
{
    char key[TESTKIT_KEY_MAX];
    dlock_client *c = fair_client(itkit_shared_url(), LOOP_THREADS);
    static run r;
    waiter w[LOOP_THREADS];
    pthread_t threads[LOOP_THREADS];
    dlock_lock_info info;

    (void)state;
    memset(&r, 0, sizeof(r));
    r.client = c;
    r.key = testkit_key(key, "fair-loop");
    for (int i = 0; i < LOOP_THREADS; i++) {
        w[i] = (waiter){&r, i, LOOP_ROUNDS, 10000};
        TK_EXPECT(pthread_create(&threads[i], NULL, waiter_main, &w[i]) == 0,
                  "thread %d started", i);
    }
    for (int i = 0; i < LOOP_THREADS; i++)
        pthread_join(threads[i], NULL);
    TK_EXPECT(atomic_load(&r.failures) == 0, "no failure: %s", r.failure);
    TK_EXPECT(atomic_load(&r.overlaps) == 0, "no overlap");
    TK_EXPECT(atomic_load(&r.served) == LOOP_THREADS * LOOP_ROUNDS,
              "%d grants", atomic_load(&r.served));
    expect_fences_increase(&r, LOOP_THREADS * LOOP_ROUNDS);
    TK_EXPECT(dlock_inspect(c, key, &info) == DLOCK_OK && !info.held
                  && info.waiters == 0,
              "free and no queue left: held %d, %lld "
              "waiters",
              info.held, (long long)info.waiters);
    dlock_client_free(c);
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

/* The holder releases with a CLI waiter ahead of a thread in the queue;
 * before the release, stop_signal goes to the CLI waiter.  The thread must
 * get the lock within the confirm window plus slack. */
static void cli_waiter_is_skipped(int stop_signal, const char *name)
{
    const char *url = itkit_shared_url();
    char key[TESTKIT_KEY_MAX];
    dlock_client *c = fair_client(url, 4);
    dlock_acquire_opts first = fair_opts(0);
    dlock_lock *held;
    dlock_lock_info info;
    taker t = {0};
    pthread_t thread;
    pid_t pid;
    int status;
    int64_t released_ms;

    testkit_key(key, name);
    first.wait_ms = 0;
    held = itkit_acquire(c, key, &first);
    pid = start_cli_waiter(url, key);
    TK_EXPECT(pid > 0, "dlock run started");
    expect_queue(c, key, 1);
    t = (taker){c, key, NULL, DLOCK_OK, 0};
    TK_EXPECT(pthread_create(&thread, NULL, taker_main, &t) == 0,
              "taker started");
    expect_queue(c, key, 2);
    TK_EXPECT(kill(pid, stop_signal) == 0, "signal %d sent", stop_signal);
    if (stop_signal == SIGKILL)
        TK_EXPECT(waitpid(pid, &status, 0) == pid, "dlock run reaped");
    released_ms = testkit_now_ms();
    TK_EXPECT(dlock_release(held) == DLOCK_OK, "holder released");
    /* The dead or stopped waiter was handed the key with its confirm
     * window as the PX, not the 10 s TTL. */
    TK_EXPECT(dlock_inspect(c, key, &info) == DLOCK_OK, "inspect");
    TK_EXPECT(!info.held || info.ttl_ms <= CLI_CONFIRM_MS,
              "the grant lasts "
              "the confirm window: ttl %lld ms",
              (long long)info.ttl_ms);
    pthread_join(thread, NULL);
    TK_EXPECT(t.err == DLOCK_OK, "the next waiter got the lock: %s",
              dlock_errname(t.err));
    TK_EXPECT(t.got_ms - released_ms <= CLI_CONFIRM_MS + 4000,
              "within the "
              "confirm window plus slack: %lld ms after the release",
              (long long)(t.got_ms - released_ms));
    TK_EXPECT(dlock_release(t.lock) == DLOCK_OK, "next waiter released");
    if (stop_signal != SIGKILL) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    dlock_client_free(c);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(waiters_are_served_in_queue_order),
        cmocka_unit_test(contended_fair_lock_excludes),
        cmocka_unit_test(waiter_killed_while_queued_is_skipped),
        cmocka_unit_test(grant_never_confirmed_lapses),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
