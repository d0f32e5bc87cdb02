/*
 * test_pattern_semaphore.c: the counting semaphore (dlock/semaphore.h).
 *
 * At most N holders at once, by the server's clock, however many threads
 * and clients contend: 8 threads on 2 clients take 3 permits 240 times
 * and count how many are inside at once, which must never exceed 3.  A
 * crashed holder's permit comes back when its lease runs out (not before,
 * not never); a release wakes a waiter at once (the holder's lease is 10 s,
 * so only the notification can explain a quick grant); extend moves the
 * lease; and a holder whose lease ran out is told so on release and
 * extend.
 *
 * The threaded cases keep their threads, semaphores, clients and the
 * permit the waiter waits behind in static storage (the_case), and
 * end_case, their teardown, releases that permit, joins the threads and
 * frees what they used, whether the case passed or failed: a failed
 * expectation leaves by longjmp while they still wait.
 */
#include "patkit.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "testkit_threads.h"

static void forget(const char *name)
{
    char h[TESTKIT_KEY_MAX + 64], f[TESTKIT_KEY_MAX + 64];

    patkit_forget(patkit_pkey(h, "sem", name, ":holders"),
                  patkit_pkey(f, "sem", name, ":fence"), NULL);
}

static dlock_semaphore *sem_new(dlock_client *c, const char *name, int n)
{
    dlock_semaphore *s = NULL;

    TK_EXPECT_ERR(dlock_semaphore_new(c, name, n, &s), DLOCK_OK, c,
                  "making a semaphore");
    return s;
}

static dlock_permit *take(dlock_semaphore *s, dlock_client *c, int64_t ttl,
                          int64_t wait)
{
    dlock_permit *p = NULL;

    TK_EXPECT_ERR(dlock_semaphore_acquire(s, ttl, wait, &p), DLOCK_OK, c,
                  "taking a permit");
    return p;
}

static int free_permits(dlock_semaphore *s)
{
    int n = -1;

    dlock_semaphore_available(s, &n);
    return n;
}

static void permits_are_granted_up_to_the_limit(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX];
    dlock_semaphore *s;
    dlock_permit *p[3], *extra = (dlock_permit *)1;

    (void)state;
    testkit_key(name, "sem_limit");
    s = sem_new(c, name, 3);
    TK_EXPECT(free_permits(s) == 3, "a new semaphore has 3 free permits");
    for (int i = 0; i < 3; i++)
        p[i] = take(s, c, 10000, 0);
    TK_EXPECT(dlock_permit_fence(p[1]) > dlock_permit_fence(p[0])
                  && dlock_permit_fence(p[2]) > dlock_permit_fence(p[1]),
              "grant numbers grow");
    TK_EXPECT_ERR(dlock_semaphore_acquire(s, 10000, 0, &extra), DLOCK_BUSY, c,
                  "a 4th permit of 3");
    TK_EXPECT(extra == NULL, "a busy acquire gives no permit");
    TK_EXPECT(dlock_client_busy_ttl_ms(c) > 9000,
              "the busy TTL is the first "
              "lease's remaining time, got %lld",
              (long long)dlock_client_busy_ttl_ms(c));
    TK_EXPECT(free_permits(s) == 0, "no permit is free");
    TK_EXPECT_ERR(dlock_semaphore_release(p[0]), DLOCK_OK, c, "releasing");
    TK_EXPECT(free_permits(s) == 1, "a release frees one permit");
    TK_EXPECT_ERR(dlock_semaphore_release(p[1]), DLOCK_OK, c, "releasing");
    TK_EXPECT_ERR(dlock_semaphore_release(p[2]), DLOCK_OK, c, "releasing");
    dlock_semaphore_free(s);
    forget(name);
    dlock_client_free(c);
}

static void a_crashed_holders_permit_comes_back_after_its_ttl(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX];
    dlock_semaphore *s;
    dlock_permit *p, *none = NULL;
    int64_t crashed_at, took_ms;

    (void)state;
    testkit_key(name, "sem_crash");
    s = sem_new(c, name, 1);
    p = take(s, c, 300, 0);
    crashed_at = testkit_now_us();
    dlock_permit_free(p); /* dies holding it */
    TK_EXPECT_ERR(dlock_semaphore_acquire(s, 1000, 0, &none), DLOCK_BUSY, c,
                  "right after the crash the permit is still held");
    p = take(s, c, 1000, 3000);
    took_ms = (testkit_now_us() - crashed_at) / 1000;
    TK_EXPECT(took_ms >= 250 && took_ms < 2000,
              "the permit comes back when "
              "the 300 ms lease runs out, got it after %lld ms",
              (long long)took_ms);
    TK_EXPECT_ERR(dlock_semaphore_release(p), DLOCK_OK, c, "releasing");
    dlock_semaphore_free(s);
    forget(name);
    dlock_client_free(c);
}

typedef struct taker {
    dlock_semaphore *sem;
    dlock_err err;
    dlock_permit *permit;
    int64_t granted_us;
} taker;

static void *take_waiting(void *arg)
{
    taker *t = arg;

    t->err = dlock_semaphore_acquire(t->sem, 5000, 5000, &t->permit);
    t->granted_us = testkit_now_us();
    return NULL;
}

#define THREADS 8

/* One threaded case's state, in static storage (one case at a time). */
typedef struct sem_case {
    patkit_case pc; /* clients, name, threads */
    dlock_semaphore *sem[2];
    dlock_permit *held; /* the case's permit, waited behind */
    taker t;
} sem_case;

static sem_case the_case;

static sem_case *begin_case(void)
{
    memset(&the_case, 0, sizeof(the_case));
    patkit_case_begin(&the_case.pc);
    return &the_case;
}

/* Releases the case's permit; the check of the result stays with the
 * case. */
static dlock_err release_held(sem_case *sc)
{
    dlock_permit *p = sc->held;

    sc->held = NULL; /* freed by the release, whatever it returns */
    return dlock_semaphore_release(p);
}

/* Teardown of the threaded cases, passed or failed: releases the permit
 * the waiter waits behind (it then gets it, or its 5 s wait runs out; a
 * contender ends after its rounds), joins the threads and frees the
 * permits, semaphores, key and clients. */
static int end_case(void **state)
{
    sem_case *sc = &the_case;

    (void)state;
    if (sc->held != NULL)
        release_held(sc);
    testkit_threads_join_all(&sc->pc.threads);
    dlock_semaphore_release(sc->t.permit);
    dlock_semaphore_free(sc->sem[0]);
    dlock_semaphore_free(sc->sem[1]);
    patkit_case_end(&sc->pc, forget);
    memset(sc, 0, sizeof(*sc));
    return 0;
}

static void a_release_wakes_a_waiter(void **state)
{
    sem_case *const sc = begin_case();
    dlock_client *c = sc->pc.c, *other = sc->pc.other;
    char *const name = sc->pc.name;
    char channel[TESTKIT_KEY_MAX + 32];
    dlock_semaphore *s;
    taker *const t = &sc->t;
    int64_t released;

    (void)state;
    testkit_key(name, "sem_wake");
    snprintf(channel, sizeof(channel), "dlock:sem:%.*s",
             (int)sizeof(sc->pc.name) - 1, name);
    s = sc->sem[0] = sem_new(c, name, 1);
    sc->sem[1] = sem_new(other, name, 1);
    *t = (taker){sc->sem[1], DLOCK_OK, NULL, 0};
    sc->held = take(s, c, 10000, 0);
    testkit_threads_start(&sc->pc.threads, take_waiting, t);
    TK_EXPECT(patkit_wait_subscribed(channel, 3000), "the waiter subscribes");
    released = testkit_now_us();
    TK_EXPECT_ERR(release_held(sc), DLOCK_OK, c, "releasing");
    testkit_threads_join_next(&sc->pc.threads);
    TK_EXPECT(t->err == DLOCK_OK, "the waiter gets the permit, got %s",
              dlock_errname(t->err));
    print_message("hand-off took %lld us\n",
                  (long long)(t->granted_us - released));
    TK_EXPECT(t->granted_us - released < 1000000,
              "the waiter is woken by the "
              "release, long before the 10 s lease, got %lld us",
              (long long)(t->granted_us - released));
}

#define ROUNDS 30
#define PERMITS 3

typedef struct contest {
    dlock_semaphore *sem[2];
    atomic_int inside;
    atomic_int most_inside;
    atomic_int grants;
    atomic_int failures;
} contest;

static void *contend(void *arg)
{
    static atomic_int next_id;
    contest *k = arg;
    int id = atomic_fetch_add(&next_id, 1);
    dlock_semaphore *s = k->sem[id % 2];

    for (int i = 0; i < ROUNDS; i++) {
        dlock_permit *p;
        int now;

        if (dlock_semaphore_acquire(s, 5000, 10000, &p) != DLOCK_OK) {
            atomic_fetch_add(&k->failures, 1);
            continue;
        }
        now = atomic_fetch_add(&k->inside, 1) + 1;
        for (int most = atomic_load(&k->most_inside); now > most;)
            if (atomic_compare_exchange_weak(&k->most_inside, &most, now))
                break;
        patkit_work_ms(1);
        atomic_fetch_sub(&k->inside, 1);
        atomic_fetch_add(&k->grants, 1);
        if (dlock_semaphore_release(p) != DLOCK_OK)
            atomic_fetch_add(&k->failures, 1);
    }
    return NULL;
}

static void it_never_over_grants_under_concurrency(void **state)
{
    sem_case *const sc = begin_case();
    char *const name = sc->pc.name;
    static contest k;

    (void)state;
    testkit_key(name, "sem_contest");
    memset(&k, 0, sizeof(k));
    k.sem[0] = sc->sem[0] = sem_new(sc->pc.c, name, PERMITS);
    k.sem[1] = sc->sem[1] = sem_new(sc->pc.other, name, PERMITS);
    for (int i = 0; i < THREADS; i++)
        testkit_threads_start(&sc->pc.threads, contend, &k);
    testkit_threads_join_all(&sc->pc.threads);
    TK_EXPECT(atomic_load(&k.failures) == 0,
              "every acquire and release "
              "succeeds, %d failed",
              atomic_load(&k.failures));
    TK_EXPECT(atomic_load(&k.grants) == THREADS * ROUNDS, "%d grants, got %d",
              THREADS * ROUNDS, atomic_load(&k.grants));
    TK_EXPECT(atomic_load(&k.most_inside) <= PERMITS,
              "never more than %d "
              "holders at once, saw %d",
              PERMITS, atomic_load(&k.most_inside));
    print_message("at most %d of %d permits held at once over %d grants\n",
                  atomic_load(&k.most_inside), PERMITS,
                  atomic_load(&k.grants));
    TK_EXPECT(free_permits(k.sem[0]) == PERMITS, "all permits are back");
}

static void extend_moves_the_lease(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX], holders[TESTKIT_KEY_MAX + 64];
    dlock_semaphore *s;
    dlock_permit *p;

    (void)state;
    testkit_key(name, "sem_extend");
    patkit_pkey(holders, "sem", name, ":holders");
    s = sem_new(c, name, 2);
    p = take(s, c, 500, 0);
    TK_EXPECT(patkit_pttl(holders) > 0 && patkit_pttl(holders) <= 500,
              "the set lives as long as its latest lease, PTTL %lld",
              patkit_pttl(holders));
    TK_EXPECT_ERR(dlock_semaphore_extend(p, 8000), DLOCK_OK, c, "extending");
    TK_EXPECT(patkit_pttl(holders) > 7000,
              "after extend the lease (and the "
              "set) runs 8 s, PTTL %lld",
              patkit_pttl(holders));
    TK_EXPECT(dlock_permit_valid_ms(p) > 7000, "the permit knows it");
    TK_EXPECT_ERR(dlock_semaphore_release(p), DLOCK_OK, c, "releasing");
    TK_EXPECT(!patkit_exists(holders) || free_permits(s) == 2,
              "nothing is held after the release");
    dlock_semaphore_free(s);
    forget(name);
    dlock_client_free(c);
}

/* The holders' set expires with its latest lease, not with the newest
 * one: a short permit taken, or renewed, beside a long one must not cut
 * the set short, for the long permit's lease would go with it. */
static void a_short_lease_never_cuts_a_longer_ones_set(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX], holders[TESTKIT_KEY_MAX + 64];
    dlock_semaphore *s;
    dlock_permit *long_p, *short_p;

    (void)state;
    testkit_key(name, "sem_short");
    patkit_pkey(holders, "sem", name, ":holders");
    s = sem_new(c, name, 2);
    long_p = take(s, c, 8000, 0);
    short_p = take(s, c, 500, 0);
    TK_EXPECT(patkit_pttl(holders) > 7000,
              "a 500 ms permit taken beside an 8 s one leaves the set "
              "to the 8 s lease's end, PTTL %lld",
              patkit_pttl(holders));
    TK_EXPECT_ERR(dlock_semaphore_extend(short_p, 300), DLOCK_OK, c,
                  "renewing the short permit");
    TK_EXPECT(patkit_pttl(holders) > 7000,
              "so does renewing the short one for 300 ms, PTTL %lld",
              patkit_pttl(holders));
    TK_EXPECT_ERR(dlock_semaphore_release(short_p), DLOCK_OK, c,
                  "releasing the short permit");
    TK_EXPECT(dlock_permit_valid_ms(long_p) > 7000
                  && patkit_pttl(holders) > 7000 && free_permits(s) == 1,
              "the long permit is still held, and its set still runs: "
              "PTTL %lld, %d free",
              patkit_pttl(holders), free_permits(s));
    TK_EXPECT_ERR(dlock_semaphore_release(long_p), DLOCK_OK, c,
                  "releasing the long permit");
    dlock_semaphore_free(s);
    forget(name);
    dlock_client_free(c);
}

typedef struct freed {
    dlock_semaphore *sem;
} freed;

static int one_permit_free(void *arg)
{
    return free_permits(((freed *)arg)->sem) == 1;
}

static void a_holder_past_its_lease_is_told_it_lost_it(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX];
    dlock_semaphore *s;
    dlock_permit *a, *b;
    freed f;

    (void)state;
    testkit_key(name, "sem_lost");
    s = sem_new(c, name, 1);
    f.sem = s;
    a = take(s, c, 100, 0);
    b = take(s, c, 100, 2000); /* after a's lease ran out */
    TK_EXPECT(testkit_wait_until(one_permit_free, &f, 2000),
              "b's 100 ms "
              "lease runs out by the server's clock");
    TK_EXPECT_ERR(dlock_semaphore_extend(b, 1000), DLOCK_LOST, c,
                  "extending after the lease ran out");
    TK_EXPECT(dlock_permit_lost(b) && dlock_permit_valid_ms(b) == 0,
              "the permit is marked lost");
    TK_EXPECT_ERR(dlock_semaphore_extend(b, 1000), DLOCK_STATE, c,
                  "extending a lost permit");
    TK_EXPECT_ERR(dlock_semaphore_release(a), DLOCK_LOST, c,
                  "releasing a permit whose lease ran out");
    dlock_permit_free(b);
    dlock_semaphore_free(s);
    forget(name);
    dlock_client_free(c);
}

static void grant_numbers_stay_exact_past_2_to_the_53(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX], fence[TESTKIT_KEY_MAX + 64];
    dlock_semaphore *s;
    dlock_permit *a, *b;
    redisReply *r;

    (void)state;
    testkit_key(name, "sem_2_53");
    patkit_pkey(fence, "sem", name, ":fence");
    /* Lua numbers are doubles: 2^53 + 1 is the first they cannot hold. */
    r = testkit_redis_cmd(testkit_redis_url(), "SET %s 9007199254740992",
                          fence);
    TK_EXPECT(r != NULL, "seeding the grant counter");
    freeReplyObject(r);
    s = sem_new(c, name, 2);
    a = take(s, c, 5000, 0);
    b = take(s, c, 5000, 0);
    TK_EXPECT(dlock_permit_fence(a) == 9007199254740993ull
                  && dlock_permit_fence(b) == 9007199254740994ull,
              "grants after 2^53 count by one: got %llu and %llu",
              (unsigned long long)dlock_permit_fence(a),
              (unsigned long long)dlock_permit_fence(b));
    dlock_semaphore_release(a);
    dlock_semaphore_release(b);
    dlock_semaphore_free(s);
    forget(name);
    dlock_client_free(c);
}

static void bad_arguments_are_refused(void **state)
{
    dlock_client *c = patkit_client();
    dlock_semaphore *s = (dlock_semaphore *)1;
    dlock_permit *p = (dlock_permit *)1;

    (void)state;
    TK_EXPECT_ERR(dlock_semaphore_new(c, "x", 0, &s), DLOCK_INVALID, c,
                  "zero permits");
    TK_EXPECT(s == NULL, "a failed new sets *out to NULL");
    s = sem_new(c, "x", 1);
    TK_EXPECT_ERR(dlock_semaphore_acquire(s, 0, 0, &p), DLOCK_INVALID, c,
                  "a zero TTL");
    TK_EXPECT(p == NULL, "a failed acquire sets *out to NULL");
    TK_EXPECT(dlock_semaphore_release(NULL) == DLOCK_OK, "release(NULL)");
    dlock_semaphore_free(s);
    dlock_semaphore_free(NULL);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(permits_are_granted_up_to_the_limit),
        cmocka_unit_test(a_crashed_holders_permit_comes_back_after_its_ttl),
        cmocka_unit_test_teardown(a_release_wakes_a_waiter, end_case),
        cmocka_unit_test_teardown(it_never_over_grants_under_concurrency,
                                  end_case),
        cmocka_unit_test(extend_moves_the_lease),
        cmocka_unit_test(a_short_lease_never_cuts_a_longer_ones_set),
        cmocka_unit_test(a_holder_past_its_lease_is_told_it_lost_it),
        cmocka_unit_test(grant_numbers_stay_exact_past_2_to_the_53),
        cmocka_unit_test(bad_arguments_are_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
