/*
 * test_pattern_rwlock.c: the read-write lock (dlock/rwlock.h).
 *
 * Readers share, a writer excludes readers and writers, a reader excludes
 * a writer.  A waiting writer stops new readers (so readers cannot starve
 * it, however long it waits) and gets the lock when the readers present
 * leave; a writer's release wakes all the waiting readers at once (their
 * holder's lease was 10 s, and their next poll was 50 ms or more away).
 * A crashed writer
 * blocks only until its lease runs out.  Under 6 threads on 2 clients
 * mixing reads and writes, no writer ever overlaps anyone, and write
 * fences grow.
 *
 * The threaded cases keep their waiters, threads, clients and the lock
 * the waiters wait behind in static storage (the_case), and end_case,
 * their teardown, releases that lock, joins the threads and frees what
 * they got, whether the case passed or failed: a failed expectation
 * leaves by longjmp while they still wait.
 */
#include "patkit.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "testkit_threads.h"

static void forget(const char *name)
{
    static const char *const suffixes[] = {":readers", ":writer", ":intent",
                                           ":fence", ":waiters"};
    char k[TESTKIT_KEY_MAX + 64];

    for (size_t i = 0; i < sizeof(suffixes) / sizeof(*suffixes); i++)
        patkit_forget(patkit_pkey(k, "rw", name, suffixes[i]), NULL);
}

static dlock_rwlock *take(dlock_client *c, const char *name,
                          dlock_rwlock_mode mode, int64_t ttl, int64_t wait)
{
    dlock_rwlock *l = NULL;

    TK_EXPECT_ERR(dlock_rwlock_acquire(c, name, mode, ttl, wait, &l), DLOCK_OK,
                  c,
                  mode == DLOCK_RWLOCK_READ ? "read-locking"
                                            : "write-locking");
    return l;
}

static dlock_err try_take(dlock_client *c, const char *name,
                          dlock_rwlock_mode mode)
{
    dlock_rwlock *l = NULL;
    dlock_err err = dlock_rwlock_acquire(c, name, mode, 5000, 0, &l);

    dlock_rwlock_release(l);
    return err;
}

static void readers_share_and_writers_exclude(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX];
    dlock_rwlock *r[3], *w, *w2;
    uint64_t first_fence, read_fence;

    (void)state;
    testkit_key(name, "rw_share");
    for (int i = 0; i < 3; i++)
        r[i] = take(c, name, DLOCK_RWLOCK_READ, 10000, 0);
    TK_EXPECT(try_take(c, name, DLOCK_RWLOCK_WRITE) == DLOCK_BUSY,
              "a writer is refused while readers hold it");
    for (int i = 0; i < 3; i++)
        TK_EXPECT_ERR(dlock_rwlock_release(r[i]), DLOCK_OK, c, "releasing");
    w = take(c, name, DLOCK_RWLOCK_WRITE, 10000, 0);
    first_fence = dlock_rwlock_fence(w);
    TK_EXPECT(first_fence > 0, "a write grant has a fence");
    TK_EXPECT(try_take(c, name, DLOCK_RWLOCK_READ) == DLOCK_BUSY,
              "a reader is refused while a writer holds it");
    TK_EXPECT(try_take(c, name, DLOCK_RWLOCK_WRITE) == DLOCK_BUSY,
              "a second writer is refused");
    TK_EXPECT(dlock_client_busy_ttl_ms(c) > 9000, "the busy TTL is the "
                                                  "writer's lease");
    TK_EXPECT_ERR(dlock_rwlock_extend(w, 20000), DLOCK_OK, c, "extending");
    TK_EXPECT(dlock_rwlock_valid_ms(w) > 19000, "the writer knows it");
    TK_EXPECT_ERR(dlock_rwlock_release(w), DLOCK_OK, c, "releasing");
    r[0] = take(c, name, DLOCK_RWLOCK_READ, 10000, 0);
    TK_EXPECT(dlock_rwlock_fence(r[0]) > first_fence
                  && dlock_rwlock_mode_of(r[0]) == DLOCK_RWLOCK_READ,
              "a reader's fence is above the last write's");
    read_fence = dlock_rwlock_fence(r[0]);
    dlock_rwlock_release(r[0]);
    w2 = take(c, name, DLOCK_RWLOCK_WRITE, 10000, 0);
    TK_EXPECT(dlock_rwlock_fence(w2) > read_fence,
              "the next write's fence is above the reader's");
    dlock_rwlock_release(w2);
    forget(name);
    dlock_client_free(c);
}

/* The readers' set lives as long as its longest read lease: a first
 * reader's short lease sets it, a longer one raises it, and a short
 * reader renewed or gone never cuts it under the long one, who still
 * keeps writers out. */
static void the_readers_set_outlives_every_live_reader(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX], readers[TESTKIT_KEY_MAX + 64];
    dlock_rwlock *short_r, *long_r;

    (void)state;
    testkit_key(name, "rw_readers_ttl");
    patkit_pkey(readers, "rw", name, ":readers");
    short_r = take(c, name, DLOCK_RWLOCK_READ, 500, 0);
    TK_EXPECT(patkit_pttl(readers) > 0 && patkit_pttl(readers) <= 500,
              "a first 500 ms reader gives the set its lease, PTTL %lld",
              patkit_pttl(readers));
    long_r = take(c, name, DLOCK_RWLOCK_READ, 8000, 0);
    TK_EXPECT(patkit_pttl(readers) > 7000,
              "an 8 s reader raises it, PTTL %lld", patkit_pttl(readers));
    TK_EXPECT_ERR(dlock_rwlock_extend(short_r, 300), DLOCK_OK, c,
                  "renewing the short reader");
    TK_EXPECT(patkit_pttl(readers) > 7000,
              "renewing the short reader for 300 ms leaves it, PTTL %lld",
              patkit_pttl(readers));
    TK_EXPECT_ERR(dlock_rwlock_release(short_r), DLOCK_OK, c,
                  "releasing the short reader");
    TK_EXPECT(patkit_pttl(readers) > 7000
                  && try_take(c, name, DLOCK_RWLOCK_WRITE) == DLOCK_BUSY,
              "the long reader still holds it and keeps a writer out, PTTL "
              "%lld",
              patkit_pttl(readers));
    TK_EXPECT_ERR(dlock_rwlock_release(long_r), DLOCK_OK, c,
                  "releasing the long reader");
    forget(name);
    dlock_client_free(c);
}

static int key_exists(void *key)
{
    return patkit_exists(key);
}

typedef struct waiter {
    dlock_client *client;
    const char *name;
    dlock_rwlock_mode mode;
    dlock_err err;
    dlock_rwlock *lock;
    int64_t granted_us;
} waiter;

static void *take_waiting(void *arg)
{
    waiter *w = arg;

    w->err = dlock_rwlock_acquire(w->client, w->name, w->mode, 5000, 5000,
                                  &w->lock);
    w->granted_us = testkit_now_us();
    return NULL;
}

#define READERS 3
#define MIXERS 6

/* One threaded case's state, in static storage (one case at a time). */
typedef struct rw_case {
    patkit_case pc;        /* clients, name, threads */
    dlock_rwlock *blocker; /* held by the case, waited behind */
    waiter w[READERS];
} rw_case;

static rw_case the_case;

static rw_case *begin_case(void)
{
    memset(&the_case, 0, sizeof(the_case));
    patkit_case_begin(&the_case.pc);
    return &the_case;
}

/* Releases the lock the case held; the case's own check of the result
 * stays with the case. */
static dlock_err release_blocker(rw_case *rc)
{
    dlock_rwlock *l = rc->blocker;

    rc->blocker = NULL; /* freed by the release, whatever it returns */
    return dlock_rwlock_release(l);
}

/* Teardown of the threaded cases, passed or failed: releases the lock
 * the waiters wait behind (they then get it, or their 5 s wait runs out;
 * a mixer ends after its rounds), joins the threads and releases what
 * they got. */
static int end_case(void **state)
{
    rw_case *rc = &the_case;

    (void)state;
    if (rc->blocker != NULL)
        release_blocker(rc);
    testkit_threads_join_all(&rc->pc.threads);
    for (int i = 0; i < READERS; i++)
        dlock_rwlock_release(rc->w[i].lock);
    patkit_case_end(&rc->pc, forget);
    memset(rc, 0, sizeof(*rc));
    return 0;
}

static void a_waiting_writer_stops_new_readers(void **state)
{
    rw_case *const rc = begin_case();
    dlock_client *c = rc->pc.c, *other = rc->pc.other;
    char *const name = rc->pc.name;
    char intent[TESTKIT_KEY_MAX + 64];
    waiter *const w = &rc->w[0];
    int64_t released;

    (void)state;
    testkit_key(name, "rw_intent");
    patkit_pkey(intent, "rw", name, ":intent");
    rc->blocker = take(c, name, DLOCK_RWLOCK_READ, 10000, 0);
    *w = (waiter){other, name, DLOCK_RWLOCK_WRITE, DLOCK_OK, NULL, 0};
    testkit_threads_start(&rc->pc.threads, take_waiting, w);
    TK_EXPECT(testkit_wait_until(key_exists, intent, 3000),
              "the waiting "
              "writer sets its intent");
    TK_EXPECT(try_take(c, name, DLOCK_RWLOCK_READ) == DLOCK_BUSY,
              "a new reader is refused while a writer waits");
    /* The intent lasts 1 s; the writer's wait must keep renewing it,
     * though the reader's 10 s lease would let its timer sleep longer. */
    patkit_work_ms(1500); /* the reader's work */
    TK_EXPECT(try_take(c, name, DLOCK_RWLOCK_READ) == DLOCK_BUSY,
              "a new reader is still refused 1.5 s into the writer's wait");
    released = testkit_now_us();
    TK_EXPECT_ERR(release_blocker(rc), DLOCK_OK, c, "releasing");
    testkit_threads_join_next(&rc->pc.threads);
    TK_EXPECT(w->err == DLOCK_OK, "the writer gets the lock, got %s",
              dlock_errname(w->err));
    TK_EXPECT(w->granted_us - released < 1000000,
              "woken by the last "
              "reader's release, not the 10 s lease: %lld us",
              (long long)(w->granted_us - released));
    TK_EXPECT(!patkit_exists(intent), "its intent is gone once it holds");
}

static void a_writers_release_wakes_every_waiting_reader(void **state)
{
    rw_case *const rc = begin_case();
    dlock_client *c = rc->pc.c, *other = rc->pc.other;
    char *const name = rc->pc.name;
    char waiters[TESTKIT_KEY_MAX + 64];
    char channel[TESTKIT_KEY_MAX + 32];
    waiter *const r = rc->w;
    int64_t released;

    (void)state;
    testkit_key(name, "rw_wake");
    patkit_pkey(waiters, "rw", name, ":waiters");
    rc->blocker = take(c, name, DLOCK_RWLOCK_WRITE, 10000, 0);
    for (int i = 0; i < READERS; i++) {
        r[i] = (waiter){other, name, DLOCK_RWLOCK_READ, DLOCK_OK, NULL, 0};
        testkit_threads_start(&rc->pc.threads, take_waiting, &r[i]);
    }
    TK_EXPECT(patkit_wait_int_at_least(waiters, NULL, 2 * READERS, 3000),
              "the readers wait (each registered twice: before and after "
              "joining the channel)");
    snprintf(channel, sizeof(channel), "dlock:rw:%.*s",
             (int)sizeof(rc->pc.name) - 1, name);
    TK_EXPECT(patkit_wait_subscribed(channel, 3000), "and are subscribed");
    patkit_work_ms(50); /* the subscription's own wake-up settles first */
    released = testkit_now_us();
    TK_EXPECT_ERR(release_blocker(rc), DLOCK_OK, c, "releasing");
    for (int i = 0; i < READERS; i++) {
        testkit_threads_join_next(&rc->pc.threads);
        TK_EXPECT(r[i].err == DLOCK_OK, "reader %d gets the lock, got %s", i,
                  dlock_errname(r[i].err));
        print_message("reader %d in %lld us after the release\n", i,
                      (long long)(r[i].granted_us - released));
        TK_EXPECT(r[i].granted_us - released < 1000000,
                  "reader %d gets in "
                  "long before the writer's 10 s lease",
                  i);
    }
    /* The fallback poll follows the writer's remaining lease (10 s, see
     * wait.c), so a reader in within 1 s was woken by the release. */
}

static void a_crashed_writer_blocks_only_until_its_lease_runs_out(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX];
    dlock_rwlock *dead, *r;
    int64_t died, took_ms;

    (void)state;
    testkit_key(name, "rw_crash");
    dead = take(c, name, DLOCK_RWLOCK_WRITE, 300, 0);
    died = testkit_now_us();
    dlock_rwlock_free(dead);
    r = take(c, name, DLOCK_RWLOCK_READ, 5000, 3000);
    took_ms = (testkit_now_us() - died) / 1000;
    TK_EXPECT(took_ms >= 250 && took_ms < 2000,
              "a reader gets in when the "
              "300 ms lease runs out, after %lld ms",
              (long long)took_ms);
    TK_EXPECT_ERR(dlock_rwlock_release(r), DLOCK_OK, c, "releasing");
    forget(name);
    dlock_client_free(c);
}

#define MIX_ROUNDS 25

typedef struct mix {
    dlock_client *client[2];
    const char *name;
    atomic_int readers;
    atomic_int writers;
    atomic_int overlaps;
    atomic_int failures;
    atomic_int reads;
    atomic_int writes;
    atomic_ullong last_fence;
    atomic_int fence_went_back;
} mix;

static void hold(mix *m, dlock_rwlock *l)
{
    if (dlock_rwlock_mode_of(l) == DLOCK_RWLOCK_WRITE) {
        uint64_t f = dlock_rwlock_fence(l);

        if (atomic_fetch_add(&m->writers, 1) != 0
            || atomic_load(&m->readers) != 0)
            atomic_fetch_add(&m->overlaps, 1);
        if (f <= atomic_exchange(&m->last_fence, f))
            atomic_fetch_add(&m->fence_went_back, 1);
        patkit_work_ms(1);
        atomic_fetch_sub(&m->writers, 1);
        atomic_fetch_add(&m->writes, 1);
    } else {
        atomic_fetch_add(&m->readers, 1);
        if (atomic_load(&m->writers) != 0)
            atomic_fetch_add(&m->overlaps, 1);
        patkit_work_ms(1);
        atomic_fetch_sub(&m->readers, 1);
        atomic_fetch_add(&m->reads, 1);
    }
}

static void *mix_main(void *arg)
{
    static atomic_int next_id;
    mix *m = arg;
    int id = atomic_fetch_add(&next_id, 1);

    for (int i = 0; i < MIX_ROUNDS; i++) {
        dlock_rwlock_mode mode = (i + id) % 4 == 0 ? DLOCK_RWLOCK_WRITE
                                                   : DLOCK_RWLOCK_READ;
        dlock_rwlock *l;

        if (dlock_rwlock_acquire(m->client[id % 2], m->name, mode, 5000, 10000,
                                 &l)
            != DLOCK_OK) {
            atomic_fetch_add(&m->failures, 1);
            continue;
        }
        hold(m, l);
        if (dlock_rwlock_release(l) != DLOCK_OK)
            atomic_fetch_add(&m->failures, 1);
    }
    return NULL;
}

static void no_writer_ever_overlaps_anyone(void **state)
{
    rw_case *const rc = begin_case();
    static mix m;

    (void)state;
    testkit_key(rc->pc.name, "rw_mix");
    memset(&m, 0, sizeof(m));
    m.client[0] = rc->pc.c;
    m.client[1] = rc->pc.other;
    m.name = rc->pc.name;
    for (int i = 0; i < MIXERS; i++)
        testkit_threads_start(&rc->pc.threads, mix_main, &m);
    testkit_threads_join_all(&rc->pc.threads);
    print_message("%d reads, %d writes\n", atomic_load(&m.reads),
                  atomic_load(&m.writes));
    TK_EXPECT(atomic_load(&m.failures) == 0,
              "every acquire and release "
              "succeeds, %d failed",
              atomic_load(&m.failures));
    TK_EXPECT(atomic_load(&m.reads) + atomic_load(&m.writes)
                  == MIXERS * MIX_ROUNDS,
              "every round held the lock");
    TK_EXPECT(atomic_load(&m.overlaps) == 0,
              "no writer overlapped a reader "
              "or writer, %d times it did",
              atomic_load(&m.overlaps));
    TK_EXPECT(atomic_load(&m.fence_went_back) == 0, "write fences grow");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(readers_share_and_writers_exclude),
        cmocka_unit_test(the_readers_set_outlives_every_live_reader),
        cmocka_unit_test_teardown(a_waiting_writer_stops_new_readers,
                                  end_case),
        cmocka_unit_test_teardown(a_writers_release_wakes_every_waiting_reader,
                                  end_case),
        cmocka_unit_test(
            a_crashed_writer_blocks_only_until_its_lease_runs_out),
        cmocka_unit_test_teardown(no_writer_ever_overlaps_anyone, end_case),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
