/*
 * test_pattern_alloc.c: every pattern constructor survives every
 * allocation failure (STYLE.md, "Allocation failure").
 *
 * For each call that creates an object the walk makes its 1st allocation
 * fail, then its 2nd, and so on until the call succeeds.  Each failed call
 * must return DLOCK_NOMEM, set its out-parameter to NULL and leave nothing
 * behind: no leak (LeakSanitizer checks at exit in the ASan build) and no
 * state in Redis (a semaphore permit or a lock left behind would make the
 * next step BUSY instead of OK).  The calls that also copy a value back
 * from Redis (a DONE idempotency record) are walked on that path too.
 *
 * The hook is dlock__alloc_fail_nth from src/lib/base/alloc.h (DLOCK_TESTING
 * build); it counts the calling thread's allocations only, so the client's
 * background threads are not affected.  The client and the thread's
 * message state are made before the walks.
 */
#include "patkit.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

#define MAX_STEPS 200

typedef struct walk {
    const char *what;
    dlock_client *client;
    char name[TESTKIT_KEY_MAX];
    dlock_err (*call)(struct walk *w);
    void (*cleanup)(struct walk *w);
    void *built;
    void *aux;
} walk;

static void run_walk(walk *w)
{
    for (long n = 1; n <= MAX_STEPS; n++) {
        dlock_err err;

        w->built = (void *)1;
        dlock__alloc_fail_nth(n);
        err = w->call(w);
        dlock__alloc_fail_nth(0);
        if (err == DLOCK_OK) {
            TK_EXPECT(n > 1, "%s allocates at least once", w->what);
            print_message("%s: failed each of its %ld allocations in turn, "
                          "then succeeded\n",
                          w->what, n - 1);
            w->cleanup(w);
            return;
        }
        TK_EXPECT(err == DLOCK_NOMEM,
                  "%s with allocation %ld failing "
                  "returns DLOCK_NOMEM, got %s (\"%s\")",
                  w->what, n, dlock_errname(err),
                  dlock_client_errmsg(w->client));
        TK_EXPECT(w->built == NULL,
                  "%s sets its out-parameter to NULL when "
                  "it fails",
                  w->what);
    }
    TK_EXPECT(0, "%s succeeds within %d allocations", w->what, MAX_STEPS);
}

static walk new_walk(const char *what, const char *name)
{
    walk w;
    int64_t rtt;

    memset(&w, 0, sizeof(w));
    w.what = what;
    w.client = patkit_client();
    TK_EXPECT_ERR(dlock_client_ping(w.client, &rtt), DLOCK_OK, w.client,
                  "a PING (which also makes this thread's state)");
    testkit_key(w.name, name);
    return w;
}

/* ---- idempotency ------------------------------------------------------- */

static dlock_err idem_begin(walk *w)
{
    return dlock_idem_begin(w->client, w->name, 5000,
                            (dlock_idem **)&w->built);
}

static void idem_abort(walk *w)
{
    dlock_idem_abort(w->built);
    dlock_idem_free(w->built);
}

static void idem_free(walk *w)
{
    dlock_idem_free(w->built);
}

static void idem_begin_survives_allocation_failure(void **state)
{
    walk w = new_walk("dlock_idem_begin (FIRST)", "alloc_idem");
    dlock_idem *st;
    char key[TESTKIT_KEY_MAX + 64];

    (void)state;
    w.call = idem_begin;
    w.cleanup = idem_abort;
    run_walk(&w);
    /* The DONE path also copies the stored result. */
    TK_EXPECT_ERR(dlock_idem_begin(w.client, w.name, 5000, &st), DLOCK_OK,
                  w.client, "beginning");
    TK_EXPECT_ERR(dlock_idem_complete(st, "result", 6, 60000), DLOCK_OK,
                  w.client, "completing");
    dlock_idem_free(st);
    w.what = "dlock_idem_begin (DONE)";
    w.cleanup = idem_free;
    run_walk(&w);
    patkit_forget(patkit_pkey(key, "idem", w.name, ""), NULL);
    dlock_client_free(w.client);
}

/* ---- single-flight ----------------------------------------------------- */

static dlock_err once_begin(walk *w)
{
    return dlock_once_begin(w->client, w->name, NULL,
                            (dlock_once **)&w->built);
}

static void once_abort(walk *w)
{
    dlock_once_abort(w->built);
    dlock_once_free(w->built);
}

static int fixed_value(void *arg, const void **value, size_t *len)
{
    (void)arg;
    *value = "v";
    *len = 1;
    return 0;
}

static dlock_err once_do(walk *w)
{
    return dlock_once_do(w->client, w->name, NULL, fixed_value, NULL, NULL,
                         (dlock_once **)&w->built);
}

static void once_forget(walk *w)
{
    char key[TESTKIT_KEY_MAX + 64];

    dlock_once_free(w->built);
    patkit_forget(patkit_pkey(key, "once", w->name, ""), NULL);
}

static void once_survives_allocation_failure(void **state)
{
    walk w = new_walk("dlock_once_begin", "alloc_once");

    (void)state;
    w.call = once_begin;
    w.cleanup = once_abort;
    run_walk(&w);
    w.what = "dlock_once_do";
    w.call = once_do;
    w.cleanup = once_forget;
    run_walk(&w);
    dlock_client_free(w.client);
}

/* ---- semaphore --------------------------------------------------------- */

static dlock_err sem_new(walk *w)
{
    return dlock_semaphore_new(w->client, w->name, 1,
                               (dlock_semaphore **)&w->built);
}

static void sem_free(walk *w)
{
    dlock_semaphore_free(w->built);
}

static dlock_err sem_acquire(walk *w)
{
    return dlock_semaphore_acquire(w->aux, 5000, 0,
                                   (dlock_permit **)&w->built);
}

static void sem_release(walk *w)
{
    TK_EXPECT_ERR(dlock_semaphore_release(w->built), DLOCK_OK, w->client,
                  "releasing the permit");
}

static void semaphore_survives_allocation_failure(void **state)
{
    walk w = new_walk("dlock_semaphore_new", "alloc_sem");
    char h[TESTKIT_KEY_MAX + 64], f[TESTKIT_KEY_MAX + 64];

    (void)state;
    w.call = sem_new;
    w.cleanup = sem_free;
    run_walk(&w);
    TK_EXPECT_ERR(dlock_semaphore_new(w.client, w.name, 1,
                                      (dlock_semaphore **)&w.aux),
                  DLOCK_OK, w.client, "making the semaphore");
    w.what = "dlock_semaphore_acquire";
    w.call = sem_acquire;
    w.cleanup = sem_release;
    run_walk(&w);
    dlock_semaphore_free(w.aux);
    patkit_forget(patkit_pkey(h, "sem", w.name, ":holders"),
                  patkit_pkey(f, "sem", w.name, ":fence"), NULL);
    dlock_client_free(w.client);
}

/* ---- rate limiter, leader, rwlock -------------------------------------- */

static dlock_err rl_new(walk *w)
{
    return dlock_ratelimit_new(w->client, w->name, 10, 1000, 1,
                               (dlock_ratelimit **)&w->built);
}

static void rl_free(walk *w)
{
    dlock_ratelimit_free(w->built);
}

static dlock_err leader_new(walk *w)
{
    return dlock_leader_new(w->client, w->name, NULL,
                            (dlock_leader **)&w->built);
}

static void leader_free(walk *w)
{
    dlock_leader_free(w->built);
}

static dlock_err rw_acquire(walk *w)
{
    return dlock_rwlock_acquire(w->client, w->name, DLOCK_RWLOCK_WRITE, 5000,
                                0, (dlock_rwlock **)&w->built);
}

static void rw_release(walk *w)
{
    TK_EXPECT_ERR(dlock_rwlock_release(w->built), DLOCK_OK, w->client,
                  "releasing the write lock");
}

static void the_other_constructors_survive_allocation_failure(void **state)
{
    walk w = new_walk("dlock_ratelimit_new", "alloc_other");
    char k[TESTKIT_KEY_MAX + 64];

    (void)state;
    w.call = rl_new;
    w.cleanup = rl_free;
    run_walk(&w);
    w.what = "dlock_leader_new";
    w.call = leader_new;
    w.cleanup = leader_free;
    run_walk(&w);
    w.what = "dlock_rwlock_acquire";
    w.call = rw_acquire;
    w.cleanup = rw_release;
    run_walk(&w);
    patkit_forget(patkit_pkey(k, "rw", w.name, ":fence"), NULL);
    dlock_client_free(w.client);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(idem_begin_survives_allocation_failure),
        cmocka_unit_test(once_survives_allocation_failure),
        cmocka_unit_test(semaphore_survives_allocation_failure),
        cmocka_unit_test(the_other_constructors_survive_allocation_failure),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
