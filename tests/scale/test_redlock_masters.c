/*
 * test_redlock_masters.c: Redlock (src/lib/deploy/redlock.c) over five private
 * redis-server processes on loopback, started, stopped and paused by pid
 * through testkit.
 *
 *   - 4 processes of 8 threads take one lock 4 times each: never two
 *     inside at once, every grant's fence above the one before, the
 *     counter equal to the grants (the checks live in shared memory).
 *     Redlock promises no fairness, so on a machine loaded enough some
 *     contender may starve for the 30 s the phase is given: that is
 *     counted and printed, not failed;
 *   - with 2 of 5 masters killed, the lock is still granted, and the
 *     release names both dead masters;
 *   - with 3 of 5 killed, acquire fails closed with DLOCK_UNAVAILABLE
 *     within the per-node timeout, naming the three;
 *   - restarted masters take part again (the key is set on all five);
 *   - a SIGSTOPped master does not hold an acquire past the per-node
 *     timeout.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "deploy/redlock.h"
#include "scalekit.h"
#include "testkit.h"
#include "base/token.h"

#define MASTERS 5
#define TTL_MS 5000
#define NODE_TIMEOUT_MS 300
/* 32 contenders start 128 threads a round between them: on a loaded
 * machine a master's answer can take longer than 300 ms to be read. */
#define CONTENDED_NODE_TIMEOUT_MS 1000
#define PROCESSES 4
#define THREADS 8
#define GRANTS_PER_THREAD 4

static testkit_redis *servers[MASTERS];
static dlock__deployment deployment;
static dlock__conn_cfg cfg;
static dlock__redlock redlock;
static uint64_t last_fence;
/* When set, no acquire retries past it (the contended phase's end). */
static int64_t phase_end_ms;

static int setup(void **state)
{
    char url[1024] = "redlock://";
    dlock__msg m;

    (void)state;
    for (int i = 0; i < MASTERS; i++) {
        char name[32];
        testkit_redis_opts opts = {.name = name};
        size_t at = strlen(url);

        snprintf(name, sizeof(name), "redlock%d", i);
        servers[i] = testkit_redis_start(&opts);
        if (servers[i] == NULL)
            return -1;
        snprintf(url + at, sizeof(url) - at, "%s127.0.0.1:%d", i ? "," : "",
                 servers[i]->port);
    }
    scalekit_deployment(url, &deployment);
    dlock__msg_clear(&m);
    return dlock__redlock_init(&redlock, &deployment, &cfg, 8, &m) == DLOCK_OK
               ? 0
               : -1;
}

static int teardown(void **state)
{
    (void)state;
    dlock__redlock_destroy(&redlock);
    dlock__deployment_clear(&deployment);
    for (int i = 0; i < MASTERS; i++)
        testkit_redis_free(servers[i]);
    return 0;
}

/* The algorithm's random delay between rounds (not a wait for a
 * condition). */
static void retry_pause(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (long)(ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* Acquires key for token, retrying after random delays for up to 30 s.
 * The per-node timeout is node_timeout_ms; a round whose masters all
 * answered too late (a loaded machine, a sanitizer build) is retried too,
 * since no master is down in the phases that use this. */
static dlock_err acquire_with(const char *key, const char *token,
                              int64_t node_timeout_ms, int64_t *validity,
                              uint64_t *fence, dlock__msg *m)
{
    int64_t give_up = testkit_now_ms() + 30000;
    char fence_key[300];
    dlock_err err;

    if (phase_end_ms > 0 && phase_end_ms < give_up)
        give_up = phase_end_ms;
    snprintf(fence_key, sizeof(fence_key), "%s:fence", key);
    for (;;) {
        dlock__msg_clear(m);
        err = dlock__redlock_acquire(&redlock, key, fence_key, token, TTL_MS,
                                     node_timeout_ms, validity, fence, NULL,
                                     m);
        if ((err != DLOCK_BUSY && err != DLOCK_UNAVAILABLE
             && err != DLOCK_TIMEOUT)
            || testkit_now_ms() > give_up)
            return err;
        retry_pause(dlock__redlock_retry_delay_ms(100));
    }
}

static dlock_err acquire(const char *key, const char *token, int64_t *validity,
                         uint64_t *fence, dlock__msg *m)
{
    return acquire_with(key, token, NODE_TIMEOUT_MS, validity, fence, m);
}

typedef struct shared {
    const char *key;
    atomic_int inside;
    atomic_int overlaps;
    atomic_int fence_regressions;
    atomic_int failures;
    uint64_t fence; /* guarded by the lock under test */
    long counter;   /* guarded by the lock under test */
} shared;

static void *contender(void *arg)
{
    shared *s = arg;

    for (int i = 0; i < GRANTS_PER_THREAD; i++) {
        char token[DLOCK_TOKEN_LEN + 1];
        int64_t validity;
        uint64_t fence;
        dlock__msg m;

        if (dlock__token_new(token, &m) != DLOCK_OK
            || acquire_with(s->key, token, CONTENDED_NODE_TIMEOUT_MS,
                            &validity, &fence, &m)
                   != DLOCK_OK) {
            fprintf(stderr, "acquire gave up: %s\n", m.text);
            atomic_fetch_add(&s->failures, 1);
            continue;
        }
        if (atomic_exchange(&s->inside, 1) != 0)
            atomic_fetch_add(&s->overlaps, 1);
        if (fence <= s->fence)
            atomic_fetch_add(&s->fence_regressions, 1);
        s->fence = fence;
        s->counter++;
        atomic_store(&s->inside, 0);
        (void)dlock__redlock_release(&redlock, s->key, token, NULL,
                                     NODE_TIMEOUT_MS, &m);
    }
    return NULL;
}

/* One process's part: 8 threads on its own Redlock client. */
static void run_threads(shared *s)
{
    pthread_t threads[THREADS];

    for (int i = 0; i < THREADS; i++) {
        if (pthread_create(&threads[i], NULL, contender, s) != 0) {
            atomic_fetch_add(&s->failures, GRANTS_PER_THREAD);
            threads[i] = 0;
        }
    }
    for (int i = 0; i < THREADS; i++)
        if (threads[i] != 0)
            pthread_join(threads[i], NULL);
}

/* A child process: a Redlock client of its own (the parent's pools and
 * connections are not for it), its threads, then _exit. */
static void child(shared *s)
{
    dlock__msg m;

    if (dlock__redlock_init(&redlock, &deployment, &cfg, THREADS, &m)
        != DLOCK_OK) {
        atomic_fetch_add(&s->failures, THREADS * GRANTS_PER_THREAD);
        _exit(1);
    }
    run_threads(s);
    dlock__redlock_destroy(&redlock);
    _exit(0);
}

static void processes_never_overlap_and_fences_grow(void **state)
{
    shared *s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    const int64_t start = testkit_now_ms();
    const long total = (long)PROCESSES * THREADS * GRANTS_PER_THREAD;
    pid_t pids[PROCESSES - 1];

    (void)state;
    TK_EXPECT(s != MAP_FAILED, "shared memory for the checks");
    memset(s, 0, sizeof(*s));
    s->key = "t:redlock:exclusion";
    phase_end_ms = start + 30000;
    fflush(NULL);
    for (int i = 0; i < PROCESSES - 1; i++) {
        pids[i] = fork();
        TK_EXPECT(pids[i] >= 0, "process %d starts", i);
        if (pids[i] == 0)
            child(s);
    }
    run_threads(s);
    for (int i = 0; i < PROCESSES - 1; i++) {
        int status = 0;

        TK_EXPECT(waitpid(pids[i], &status, 0) == pids[i] && WIFEXITED(status)
                      && WEXITSTATUS(status) == 0,
                  "process %d exits cleanly", i);
    }
    printf("# redlock: %ld of %ld grants over 5 masters by %d processes x %d "
           "threads in %" PRId64
           " ms (%d gave up at 30 s), last fence %" PRIu64 "\n",
           s->counter, total, PROCESSES, THREADS, testkit_now_ms() - start,
           atomic_load(&s->failures), s->fence);
    TK_EXPECT(s->counter > 0
                  && s->counter + atomic_load(&s->failures) == total,
              "every attempt either was granted or gave up (%ld + %d of "
              "%ld)",
              s->counter, atomic_load(&s->failures), total);
    TK_EXPECT(atomic_load(&s->overlaps) == 0,
              "no two holders at once, "
              "saw %d",
              atomic_load(&s->overlaps));
    TK_EXPECT(atomic_load(&s->fence_regressions) == 0
                  && s->fence >= (uint64_t)s->counter,
              "each fence above the last (last %" PRIu64 ")", s->fence);
    last_fence = s->fence;
    phase_end_ms = 0;
    munmap(s, sizeof(*s));
}

static void two_of_five_down_still_grants(void **state)
{
    char token[DLOCK_TOKEN_LEN + 1], port1[16], port3[16];
    int64_t validity;
    uint64_t fence;
    dlock__msg m;

    (void)state;
    TK_EXPECT(testkit_redis_stop(servers[1]) == 0
                  && testkit_redis_stop(servers[3]) == 0,
              "two masters stop");
    TK_EXPECT(dlock__token_new(token, &m) == DLOCK_OK, "a token");
    TK_EXPECT(acquire("t:redlock:exclusion", token, &validity, &fence, &m)
                  == DLOCK_OK,
              "3 of 5 grant: %s", m.text);
    TK_EXPECT(validity > 0 && validity < TTL_MS, "validity %" PRId64,
              validity);
    TK_EXPECT(fence > last_fence,
              "the fence (%" PRIu64 ") is above every "
              "earlier one (%" PRIu64 ") with two masters gone",
              fence, last_fence);
    last_fence = fence;
    dlock__msg_clear(&m);
    TK_EXPECT(dlock__redlock_release(&redlock, "t:redlock:exclusion", token,
                                     NULL, NODE_TIMEOUT_MS, &m)
                  == DLOCK_UNAVAILABLE,
              "release reports the masters it missed");
    snprintf(port1, sizeof(port1), ":%d refused", servers[1]->port);
    snprintf(port3, sizeof(port3), ":%d refused", servers[3]->port);
    TK_EXPECT(strstr(m.text, "2 of 5 nodes:") != NULL
                  && strstr(m.text, port1) != NULL
                  && strstr(m.text, port3) != NULL,
              "the message names both: %s", m.text);
    printf("# redlock: release with 2 of 5 down: %s\n", m.text);
}

/* One acquire round of key without a fence, timed; *took_ms is how long
 * it took, token the owner it used. */
static dlock_err timed_acquire(const char *key, char *token, int64_t *validity,
                               int64_t *took_ms, dlock__msg *m)
{
    int64_t start;
    uint64_t fence;
    dlock_err err;

    TK_EXPECT(dlock__token_new(token, m) == DLOCK_OK, "a token");
    dlock__msg_clear(m);
    start = testkit_now_ms();
    err = dlock__redlock_acquire(&redlock, key, NULL, token, TTL_MS,
                                 NODE_TIMEOUT_MS, validity, &fence, NULL, m);
    *took_ms = testkit_now_ms() - start;
    return err;
}

/* Sets key on master i for another owner, with ttl_ms (0: no TTL). */
static void held_elsewhere(int i, const char *key, int64_t ttl_ms)
{
    redisReply *r = ttl_ms > 0 ? testkit_redis_cmd(servers[i]->admin_url,
                                                   "SET %s other PX %lld", key,
                                                   (long long)ttl_ms)
                               : testkit_redis_cmd(servers[i]->admin_url,
                                                   "SET %s other", key);

    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS,
              "master %d holds %s for another owner", i, key);
    freeReplyObject(r);
}

static dlock_err busy_round(const char *key, dlock__redlock_busy *busy)
{
    char token[DLOCK_TOKEN_LEN + 1];
    int64_t validity;
    uint64_t fence;
    dlock__msg m;

    TK_EXPECT(dlock__token_new(token, &m) == DLOCK_OK, "a token");
    *busy = (dlock__redlock_busy){.free_somewhere = -1, .held_ms = -2};
    return dlock__redlock_acquire(&redlock, key, NULL, token, TTL_MS,
                                  NODE_TIMEOUT_MS, &validity, &fence, busy,
                                  &m);
}

/* A busy round says how long, by the masters' own PTTLs, a majority stays
 * held (the third soonest expiry of five), and, when the key was free on
 * some master (a release whose wake-up came from the first master to
 * delete it, still in flight to the others), that a try soon is worth it
 * and how long is not known. */
static void a_busy_round_says_what_it_saw(void **state)
{
    const char *key = "t:redlock:busy";
    dlock__redlock_busy busy;

    (void)state;
    for (int i = 0; i < MASTERS; i++)
        held_elsewhere(i, key, 10000 * (i + 1));
    TK_EXPECT(busy_round(key, &busy) == DLOCK_BUSY && !busy.free_somewhere,
              "held on all five: busy, free nowhere");
    TK_EXPECT(busy.held_ms > 20000 && busy.held_ms <= 30000,
              "a majority is free once the third soonest expires: %" PRId64
              " ms (PTTLs 10, 20, 30, 40, 50 s)",
              busy.held_ms);
    held_elsewhere(4, key, 0);
    held_elsewhere(3, key, 0);
    held_elsewhere(2, key, 0);
    TK_EXPECT(busy_round(key, &busy) == DLOCK_BUSY && busy.held_ms == -1,
              "three hold it without a TTL: held for good (%" PRId64 ")",
              busy.held_ms);
    for (int i = 0; i < 2; i++)
        TK_EXPECT(testkit_redis_int(servers[i]->admin_url, "DEL %s", key) == 1,
                  "master %d lets it go", i);
    TK_EXPECT(busy_round(key, &busy) == DLOCK_BUSY && busy.free_somewhere
                  && busy.held_ms == 0,
              "free on two of five: busy, free somewhere, for how long not "
              "known (%" PRId64 ")",
              busy.held_ms);
    for (int i = 0; i < 2; i++)
        TK_EXPECT(testkit_redis_int(servers[i]->admin_url, "EXISTS %s", key)
                      == 0,
                  "the failed round took back what it set on master %d", i);
    for (int i = 2; i < MASTERS; i++)
        (void)testkit_redis_int(servers[i]->admin_url, "DEL %s", key);
}

static void three_of_five_down_fails_closed_in_time(void **state)
{
    char token[DLOCK_TOKEN_LEN + 1];
    int64_t validity, took;
    dlock__msg m;
    dlock_err err;

    (void)state;
    TK_EXPECT(testkit_redis_stop(servers[4]) == 0, "a third master stops");
    err = timed_acquire("t:redlock:minority", token, &validity, &took, &m);
    printf("# redlock: 3 of 5 down: %s after %" PRId64 " ms: %s\n",
           dlock_errname(err), took, m.text);
    TK_EXPECT(err == DLOCK_UNAVAILABLE && validity == 0,
              "fail-closed, got "
              "%s",
              dlock_errname(err));
    TK_EXPECT(strstr(m.text, "3 of 5 nodes:") != NULL,
              "the three are named: "
              "%s",
              m.text);
    /* Two rounds (the acquire and the clean-up release), each bounded by
     * the per-node timeout; slack for a loaded machine. */
    TK_EXPECT(took < 2 * NODE_TIMEOUT_MS + 1500,
              "within the per-node "
              "timeouts, took %" PRId64 " ms",
              took);
}

static int key_is(int i, const char *key, const char *token)
{
    redisReply *r = testkit_redis_cmd(servers[i]->admin_url, "GET %s", key);
    int same = r != NULL && r->type == REDIS_REPLY_STRING
               && strcmp(r->str, token) == 0;

    freeReplyObject(r);
    return same;
}

static void restarted_masters_rejoin(void **state)
{
    char token[DLOCK_TOKEN_LEN + 1];
    int64_t validity;
    uint64_t fence;
    dlock__msg m;

    (void)state;
    TK_EXPECT(testkit_redis_restart(servers[1]) == 0
                  && testkit_redis_restart(servers[3]) == 0
                  && testkit_redis_restart(servers[4]) == 0,
              "the three restart");
    TK_EXPECT(dlock__token_new(token, &m) == DLOCK_OK, "a token");
    TK_EXPECT(acquire("t:redlock:rejoin", token, &validity, &fence, &m)
                  == DLOCK_OK,
              "granted: %s", m.text);
    for (int i = 0; i < MASTERS; i++)
        TK_EXPECT(key_is(i, "t:redlock:rejoin", token),
                  "master %d holds "
                  "the key again",
                  i);
    TK_EXPECT(dlock__redlock_release(&redlock, "t:redlock:rejoin", token, NULL,
                                     NODE_TIMEOUT_MS, &m)
                  == DLOCK_OK,
              "released on all five: %s", m.text);
}

static void stopped_master_costs_only_the_node_timeout(void **state)
{
    char token[DLOCK_TOKEN_LEN + 1];
    int64_t validity, took;
    dlock__msg m;
    dlock_err err;

    (void)state;
    TK_EXPECT(testkit_redis_pause(servers[2]) == 0, "master 2 is stopped");
    err = timed_acquire("t:redlock:paused", token, &validity, &took, &m);
    printf("# redlock: acquire with one master SIGSTOPped: %s in %" PRId64
           " ms (per-node timeout %d ms)\n",
           dlock_errname(err), took, NODE_TIMEOUT_MS);
    TK_EXPECT(err == DLOCK_OK, "4 of 5 grant: %s", m.text);
    TK_EXPECT(took < NODE_TIMEOUT_MS + 700,
              "the stopped master cost at "
              "most the per-node timeout, took %" PRId64 " ms",
              took);
    TK_EXPECT(validity > TTL_MS - NODE_TIMEOUT_MS - 800,
              "validity %" PRId64 " counts the wait", validity);
    dlock__msg_clear(&m);
    err = dlock__redlock_release(&redlock, "t:redlock:paused", token, NULL,
                                 NODE_TIMEOUT_MS, &m);
    TK_EXPECT(testkit_redis_resume(servers[2]) == 0, "master 2 resumes");
    TK_EXPECT(err == DLOCK_UNAVAILABLE && strstr(m.text, "timed out"),
              "the release names the stopped master: %s", m.text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_busy_round_says_what_it_saw),
        cmocka_unit_test(processes_never_overlap_and_fences_grow),
        cmocka_unit_test(two_of_five_down_still_grants),
        cmocka_unit_test(three_of_five_down_fails_closed_in_time),
        cmocka_unit_test(restarted_masters_rejoin),
        cmocka_unit_test(stopped_master_costs_only_the_node_timeout),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
