/*
 * test_restart.c: a Redis restart in the middle of a run.
 *
 * A worker thread acquires and releases a lock in a loop (a fresh key each
 * time, so a release lost in the restart cannot make the next acquire
 * BUSY) while the test restarts the private server under it.  What must
 * hold:
 *   - no call hangs: each returns within connect + I/O timeout + a margin;
 *   - the client reconnects by itself: after the server is back, the loop
 *     succeeds again within a bounded time, and from the first success on
 *     every operation succeeds;
 *   - fences keep growing although the restarted server lost the counter
 *     (no persistence): the next fence is at least the server's clock in
 *     microseconds, above every fence granted before.
 */
#include "itkit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define CONNECT_TIMEOUT_MS 500
#define IO_TIMEOUT_MS 1000
#define CALL_BOUND_MS (CONNECT_TIMEOUT_MS + IO_TIMEOUT_MS + 1000)
#define RECOVERY_MS 5000

typedef struct loop {
    dlock_client *client;
    atomic_int stop;
    atomic_long ok;     /* cycles where acquire and release worked */
    atomic_long failed; /* cycles where one of them did not */
    atomic_llong longest_call_ms;
    atomic_ullong last_fence;
    char last_error[DLOCK_ERRMSG_MAX + 64];
    pthread_mutex_t error_mu;
} loop;

static void note_call_time(loop *lp, int64_t started_ms)
{
    long long took = testkit_now_ms() - started_ms;
    long long longest = atomic_load(&lp->longest_call_ms);

    while (
        took > longest
        && !atomic_compare_exchange_weak(&lp->longest_call_ms, &longest, took))
        ;
}

static void note_failure(loop *lp, const char *what, dlock_err err)
{
    pthread_mutex_lock(&lp->error_mu);
    snprintf(lp->last_error, sizeof(lp->last_error), "%s: %s: %s", what,
             dlock_errname(err), dlock_client_errmsg(lp->client));
    pthread_mutex_unlock(&lp->error_mu);
    atomic_fetch_add(&lp->failed, 1);
}

/* A copy of the worker's last error, taken under its mutex. */
static const char *last_error(loop *lp, char *buf, size_t len)
{
    pthread_mutex_lock(&lp->error_mu);
    snprintf(buf, len, "%s", lp->last_error[0] ? lp->last_error : "none");
    pthread_mutex_unlock(&lp->error_mu);
    return buf;
}

/* One acquire/release cycle; returns 1 if both worked. */
static int cycle(loop *lp)
{
    dlock_acquire_opts o = itkit_acquire_opts(2000, 0);
    char key[TESTKIT_KEY_MAX];
    dlock_lock *l = NULL;
    int64_t t = testkit_now_ms();
    dlock_err err = dlock_acquire(lp->client, testkit_key(key, "restart"), &o,
                                  &l);

    note_call_time(lp, t);
    if (err != DLOCK_OK) {
        note_failure(lp, "acquire", err);
        return 0;
    }
    atomic_store(&lp->last_fence, dlock_lock_fence(l));
    t = testkit_now_ms();
    err = dlock_release(l);
    note_call_time(lp, t);
    if (err != DLOCK_OK) {
        note_failure(lp, "release", err);
        return 0;
    }
    return 1;
}

static void *loop_main(void *arg)
{
    loop *lp = arg;

    while (!atomic_load(&lp->stop))
        if (cycle(lp))
            atomic_fetch_add(&lp->ok, 1);
        else
            itkit_pace_ms(5); /* do not spin while the server is down */
    return NULL;
}

typedef struct target {
    loop *lp;
    long ok;
} target;

static int reached(void *arg)
{
    const target *t = arg;

    return atomic_load(&t->lp->ok) >= t->ok;
}

/* The worker's loop, its thread and the server, in static storage: if an
 * expectation fails while the worker runs, cmocka leaves the case's frame
 * by longjmp, and end_case stops and joins the worker (each of its calls
 * ends within CALL_BOUND_MS) and frees the rest. */
static loop lp;
static pthread_t worker;
static int worker_running;
static testkit_redis *server;

static int end_case(void **state)
{
    (void)state;
    if (worker_running) {
        atomic_store(&lp.stop, 1);
        pthread_join(worker, NULL);
        worker_running = 0;
    }
    if (lp.client != NULL) {
        dlock_client_free(lp.client);
        pthread_mutex_destroy(&lp.error_mu);
    }
    if (server != NULL)
        testkit_redis_free(server);
    server = NULL;
    memset(&lp, 0, sizeof(lp));
    return 0;
}

static void client_reconnects_after_a_restart_mid_run(void **state)
{
    testkit_redis_opts so = {.name = "restart"};
    dlock_client_opts co = itkit_client_opts();
    target t = {&lp, 50};
    uint64_t fence_before;
    int64_t restarted_at, recovered_at;
    long failed_at_recovery;
    char err[sizeof(lp.last_error)];

    (void)state;
    server = testkit_redis_start(&so);
    TK_EXPECT(server != NULL, "a private redis-server starts");
    co.connect_timeout_ms = CONNECT_TIMEOUT_MS;
    co.io_timeout_ms = IO_TIMEOUT_MS;
    co.breaker_probe_ms = 100;
    pthread_mutex_init(&lp.error_mu, NULL);
    lp.client = itkit_client(server->url, &co);
    TK_EXPECT(pthread_create(&worker, NULL, loop_main, &lp) == 0,
              "the worker thread starts");
    worker_running = 1;

    TK_EXPECT(testkit_wait_until(reached, &t, 10000),
              "50 cycles before the "
              "restart, got %ld (%s)",
              atomic_load(&lp.ok), last_error(&lp, err, sizeof(err)));
    TK_EXPECT(atomic_load(&lp.failed) == 0,
              "no failure before the restart: "
              "%s",
              last_error(&lp, err, sizeof(err)));
    fence_before = atomic_load(&lp.last_fence);
    TK_EXPECT(testkit_redis_restart(server) == 0,
              "the server restarts on "
              "port %d",
              server->port);
    restarted_at = testkit_now_ms();

    t.ok = atomic_load(&lp.ok) + 1;
    TK_EXPECT(testkit_wait_until(reached, &t, RECOVERY_MS),
              "the loop "
              "succeeds again within %d ms of the server's return; last "
              "error: %s",
              RECOVERY_MS, last_error(&lp, err, sizeof(err)));
    recovered_at = testkit_now_ms();
    failed_at_recovery = atomic_load(&lp.failed);
    t.ok = atomic_load(&lp.ok) + 50;
    TK_EXPECT(testkit_wait_until(reached, &t, 10000),
              "50 more cycles after "
              "recovery within 10 s; at %ld of %ld",
              atomic_load(&lp.ok), t.ok);
    atomic_store(&lp.stop, 1);
    pthread_join(worker, NULL);
    worker_running = 0;

    print_message("recovered %lld ms after the restart; %ld failed cycles; "
                  "longest call %lld ms; last error: %s\n",
                  (long long)(recovered_at - restarted_at),
                  atomic_load(&lp.failed),
                  (long long)atomic_load(&lp.longest_call_ms),
                  last_error(&lp, err, sizeof(err)));
    TK_EXPECT(atomic_load(&lp.failed) == failed_at_recovery,
              "every cycle "
              "after the first success succeeds; %ld failed, last: %s",
              atomic_load(&lp.failed) - failed_at_recovery,
              last_error(&lp, err, sizeof(err)));
    TK_EXPECT(atomic_load(&lp.longest_call_ms) < CALL_BOUND_MS,
              "no call "
              "took longer than connect + I/O timeout + 1 s (%d ms), the "
              "longest took %lld ms",
              CALL_BOUND_MS, (long long)atomic_load(&lp.longest_call_ms));
    TK_EXPECT(atomic_load(&lp.last_fence) > fence_before,
              "fences after the "
              "restart (%llu) are above those before it (%llu)",
              (unsigned long long)atomic_load(&lp.last_fence),
              (unsigned long long)fence_before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(client_reconnects_after_a_restart_mid_run,
                                  end_case),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
