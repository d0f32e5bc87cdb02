/*
 * test_watchdog.c: automatic renewal, and what happens when it fails.
 *
 * A watchdog lock keeps a short TTL (1 s here) and is renewed every ttl/3
 * by the client's background thread, so it stays held for as long as the
 * holder works (5 s here): another client's try-acquire must be BUSY at
 * every moment, and the client's stats must count the renewals (5 s / 333 ms
 * is 15; at least 12 allows for a loaded machine).
 *
 * When the key disappears behind the holder (a DEL by an operator, a
 * failover that lost it), the next renewal finds the token gone: the lock
 * must be marked lost and the on_lost callback must run, on the background
 * thread.  The test waits for the callback on a condition variable, with a
 * bound.
 */
#include "itkit.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#define HOLD_MS 5000
#define WATCHDOG_TTL_MS 1000

static void watchdog_keeps_a_one_second_lock_for_five_seconds(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *holder = itkit_client(url, NULL);
    dlock_client *other = itkit_client(url, NULL);
    dlock_acquire_opts o = itkit_acquire_opts(WATCHDOG_TTL_MS, 0);
    dlock_acquire_opts try_once = itkit_acquire_opts(WATCHDOG_TTL_MS, 0);
    dlock_client_stats stats;
    char key[TESTKIT_KEY_MAX];
    dlock_lock *l;
    int64_t start;
    int tries = 0;

    (void)state;
    testkit_key(key, "watchdog_holds");
    o.watchdog = 1;
    l = itkit_acquire(holder, key, &o);
    start = testkit_now_ms();
    while (testkit_now_ms() - start < HOLD_MS) {
        dlock_lock *stolen = NULL;
        dlock_err err = dlock_acquire(other, key, &try_once, &stolen);

        TK_EXPECT(err == DLOCK_BUSY,
                  "another client's try-acquire is BUSY "
                  "%lld ms into the watchdog's hold, got %s: %s",
                  (long long)(testkit_now_ms() - start), dlock_errname(err),
                  dlock_client_errmsg(other));
        TK_EXPECT(!dlock_lock_lost(l) && dlock_lock_valid_ms(l) > 0,
                  "the holder's lock is valid %lld ms in",
                  (long long)(testkit_now_ms() - start));
        tries++;
        itkit_pace_ms(50);
    }
    dlock_client_stats_get(holder, &stats);
    print_message("held %d ms with a %d ms TTL: %llu renewals, %d tries by "
                  "another client\n",
                  HOLD_MS, WATCHDOG_TTL_MS, (unsigned long long)stats.renewals,
                  tries);
    TK_EXPECT(stats.renewals >= 12,
              "at least 12 renewals in 5 s at ttl/3, "
              "got %llu",
              (unsigned long long)stats.renewals);
    TK_EXPECT(stats.locks_lost == 0, "no lock lost, got %llu",
              (unsigned long long)stats.locks_lost);
    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, holder,
                  "releasing after 5 s "
                  "of renewals");
    TK_EXPECT(testkit_redis_int(url, "EXISTS %s", key) == 0,
              "the released key is gone, and the watchdog renews it no more");
    testkit_forget_lock(url, key);
    dlock_client_free(other);
    dlock_client_free(holder);
}

/* What the on_lost callback saw; the test thread waits on done. */
typedef struct lost_report {
    pthread_mutex_t mu;
    pthread_cond_t done;
    int calls;
    int lost_flag_seen;
    char key[TESTKIT_KEY_MAX];
    pthread_t thread;
} lost_report;

static void on_lost(dlock_lock *l, void *arg)
{
    lost_report *r = arg;

    pthread_mutex_lock(&r->mu);
    r->calls++;
    r->lost_flag_seen = dlock_lock_lost(l);
    snprintf(r->key, sizeof(r->key), "%s", dlock_lock_key(l));
    r->thread = pthread_self();
    pthread_cond_broadcast(&r->done);
    pthread_mutex_unlock(&r->mu);
}

/* Waits up to timeout_ms for the first callback; returns the call count. */
static int wait_for_callback(lost_report *r, int64_t timeout_ms)
{
    struct timespec deadline;
    int calls;

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->mu);
    while (r->calls == 0)
        if (pthread_cond_timedwait(&r->done, &r->mu, &deadline) != 0)
            break;
    calls = r->calls;
    pthread_mutex_unlock(&r->mu);
    return calls;
}

static void key_deleted_behind_the_holder_is_detected_as_lost(void **state)
{
    const char *url = itkit_shared_url();
    dlock_client *c = itkit_client(url, NULL);
    dlock_acquire_opts o = itkit_acquire_opts(600, 0);
    lost_report report;
    dlock_client_stats stats;
    char key[TESTKIT_KEY_MAX];
    dlock_lock *l;
    int64_t deleted_at, noticed_after;

    (void)state;
    memset(&report, 0, sizeof(report));
    pthread_mutex_init(&report.mu, NULL);
    pthread_cond_init(&report.done, NULL);
    testkit_key(key, "watchdog_lost");
    o.watchdog = 1;
    o.on_lost = on_lost;
    o.on_lost_arg = &report;
    l = itkit_acquire(c, key, &o);
    TK_EXPECT(testkit_redis_int(url, "DEL %s", key) == 1,
              "the test deletes "
              "the held key behind the holder's back");
    deleted_at = testkit_now_ms();
    TK_EXPECT(wait_for_callback(&report, 3000) == 1,
              "on_lost runs once "
              "within 3 s of the key's deletion (renewals every 200 ms), "
              "ran %d times",
              report.calls);
    noticed_after = testkit_now_ms() - deleted_at;
    print_message("lost lock noticed %lld ms after the DEL\n",
                  (long long)noticed_after);
    TK_EXPECT(report.lost_flag_seen, "the lock is already marked lost when "
                                     "the callback runs");
    TK_EXPECT(strcmp(report.key, key) == 0,
              "the callback is given the lost "
              "lock (%s), got %s",
              key, report.key);
    TK_EXPECT(!pthread_equal(report.thread, pthread_self()),
              "the callback "
              "runs on the client's background thread, not the holder's");
    TK_EXPECT(dlock_lock_lost(l) == 1 && dlock_lock_valid_ms(l) == 0,
              "the holder sees its lock lost, with no validity left");
    dlock_client_stats_get(c, &stats);
    TK_EXPECT(stats.locks_lost == 1,
              "the client counts 1 lost lock, got "
              "%llu",
              (unsigned long long)stats.locks_lost);
    TK_EXPECT_ERR(dlock_extend(l, 0), DLOCK_STATE, c,
                  "extending a lock the "
                  "watchdog found lost");
    TK_EXPECT_ERR(dlock_release(l), DLOCK_LOST, c,
                  "releasing a lock whose "
                  "key was deleted");
    TK_EXPECT(wait_for_callback(&report, 0) == 1, "on_lost ran exactly once");
    testkit_forget_lock(url, key);
    dlock_client_free(c);
    pthread_cond_destroy(&report.done);
    pthread_mutex_destroy(&report.mu);
}

/* The holder's renewals counted so far. */
static uint64_t renewals_of(dlock_client *c)
{
    dlock_client_stats st;

    dlock_client_stats_get(c, &st);
    return st.renewals;
}

/*
 * The server closes every connection of the holder's client while the
 * renewer's is idle (as a server's `timeout`, an idle-closing proxy or an
 * operator's CLIENT KILL does): the renewer learns it at its next renewal,
 * which it sends and then finds the connection closed.  It must connect
 * again and go on renewing, not wait for a wake-up that may never come
 * while the lease runs out: three kills in a 5 s hold, the lock valid
 * throughout and renewed after each.
 */
static void a_renewer_connection_closed_by_the_server_is_replaced(void **state)
{
    testkit_proxied *pr = itkit_proxied("watchdog-kill");
    dlock_client *holder = NULL;
    dlock_acquire_opts o = itkit_acquire_opts(WATCHDOG_TTL_MS, 0);
    char key[TESTKIT_KEY_MAX];
    dlock_lock *l;

    (void)state;
    TK_EXPECT(pr != NULL, "a private server");
    holder = itkit_client(pr->server->url, NULL);
    testkit_key(key, "watchdog_conn_closed");
    o.watchdog = 1;
    l = itkit_acquire(holder, key, &o);
    for (int kill = 0; kill < 3; kill++) {
        uint64_t before = renewals_of(holder);
        int64_t start = testkit_now_ms();
        long long killed;

        /* Renewed on a connection of its own first. */
        while (renewals_of(holder) < before + 2
               && testkit_now_ms() - start < 10000 && !dlock_lock_lost(l))
            itkit_pace_ms(20);
        killed = testkit_redis_int(pr->server->url,
                                   "CLIENT KILL TYPE normal SKIPME yes");
        TK_EXPECT(killed >= 1,
                  "kill %d closed the holder's connections "
                  "(%lld)",
                  kill + 1, killed);
        before = renewals_of(holder);
        start = testkit_now_ms();
        while (renewals_of(holder) < before + 2 && !dlock_lock_lost(l)
               && testkit_now_ms() - start < 10000)
            itkit_pace_ms(20);
        TK_EXPECT(!dlock_lock_lost(l),
                  "the lock is not lost after kill %d (%llu renewals "
                  "since)",
                  kill + 1,
                  (unsigned long long)(renewals_of(holder) - before));
        TK_EXPECT(renewals_of(holder) >= before + 2,
                  "renewed again after kill %d", kill + 1);
    }
    TK_EXPECT(testkit_redis_int(pr->server->url, "EXISTS %s", key) == 1,
              "the key is still there");
    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, holder, "releasing");
    dlock_client_free(holder);
    testkit_proxied_free(pr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(watchdog_keeps_a_one_second_lock_for_five_seconds),
        cmocka_unit_test(key_deleted_behind_the_holder_is_detected_as_lost),
        cmocka_unit_test(
            a_renewer_connection_closed_by_the_server_is_replaced),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
