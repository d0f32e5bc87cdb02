/*
 * test_pattern_once.c: single-flight refresh (dlock/once.h).
 *
 * Exactly one caller refreshes and the others get its value: a follower
 * that arrives while the leader's refresh is under way waits and gets the
 * leader's bytes (the refresh function runs once); 8 threads on 2 clients
 * asking at once cause one refresh; a follower whose wait runs out is told
 * BUSY (and keeps its old value); a leader whose refresh fails aborts, and
 * a waiting follower refreshes instead; a leader that dies is replaced when
 * its lease runs out; within keep_ms the stored value is served without a
 * refresh, and after it the next caller refreshes again.
 *
 * The threaded cases keep their refreshes, callers, threads and clients
 * in static storage (the_case), and end_case, their teardown, opens every
 * gate, joins the callers and frees what they got, whether the case
 * passed or failed: a failed expectation leaves by longjmp while callers
 * still wait on the case's state.
 */
#include "patkit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "testkit_threads.h"

static void forget(const char *name)
{
    char k[TESTKIT_KEY_MAX + 64];

    patkit_forget(patkit_pkey(k, "once", name, ""), NULL);
}

/* A refresh that counts its calls and, when gated, waits for the test to
 * open the gate, so that followers can be lined up behind it. */
typedef struct refresh {
    atomic_int calls;
    int gated;
    int fail;
    int64_t work_ms;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
    char value[64];
} refresh;

static void refresh_init(refresh *r, const char *value)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    snprintf(r->value, sizeof(r->value), "%s", value);
}

static void refresh_open(refresh *r)
{
    pthread_mutex_lock(&r->mu);
    r->open = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static int do_refresh(void *arg, const void **value, size_t *len)
{
    refresh *r = arg;

    atomic_fetch_add(&r->calls, 1);
    if (r->gated) {
        pthread_mutex_lock(&r->mu);
        while (!r->open)
            pthread_cond_wait(&r->cv, &r->mu);
        pthread_mutex_unlock(&r->mu);
    }
    if (r->work_ms > 0)
        patkit_work_ms(r->work_ms);
    if (r->fail)
        return 42;
    *value = r->value;
    *len = strlen(r->value);
    return 0;
}

typedef struct caller {
    dlock_client *client;
    const char *name;
    refresh *fn;
    dlock_once_opts opts;
    dlock_err err;
    int fn_result;
    dlock_once *flight;
} caller;

static void *call_once(void *arg)
{
    caller *k = arg;

    k->err = dlock_once_do(k->client, k->name, &k->opts, do_refresh, k->fn,
                           &k->fn_result, &k->flight);
    return NULL;
}

static caller caller_for(dlock_client *c, const char *name, refresh *fn)
{
    caller k;

    memset(&k, 0, sizeof(k));
    k.client = c;
    k.name = name;
    k.fn = fn;
    dlock_once_opts_init(&k.opts);
    return k;
}

static int started(void *arg)
{
    return atomic_load(&((refresh *)arg)->calls) >= 1;
}

static int has_value(const dlock_once *f, const char *want)
{
    size_t len;
    const char *v = f != NULL ? dlock_once_value(f, &len) : NULL;

    return v != NULL && len == strlen(want) && memcmp(v, want, len) == 0;
}

#define CROWD 8

/* One threaded case's state, in static storage (one case at a time). */
typedef struct once_case {
    refresh fn[2];
    int nfn; /* refreshes initialised */
    caller k[CROWD];
    testkit_threads callers; /* caller i is thread i, in order */
    dlock_client *c[2];
    char name[TESTKIT_KEY_MAX];
} once_case;

static once_case the_case;

static once_case *begin_case(void)
{
    memset(&the_case, 0, sizeof(the_case));
    the_case.c[0] = patkit_client();
    the_case.c[1] = patkit_client();
    return &the_case;
}

static refresh *case_refresh(once_case *oc, const char *value)
{
    refresh *r = &oc->fn[oc->nfn];

    refresh_init(r, value);
    oc->nfn++;
    return r;
}

/* Starts caller i; callers start (and are joined) in order. */
static void start_caller(once_case *oc, int i)
{
    testkit_threads_start(&oc->callers, call_once, &oc->k[i]);
}

/* Teardown of the threaded cases, passed or failed: opens the gates (a
 * gated refresh returns, a follower gets the value or its wait runs out),
 * joins the callers, frees their flights, the key and the clients. */
static int end_case(void **state)
{
    once_case *oc = &the_case;

    (void)state;
    for (int i = 0; i < oc->nfn; i++)
        refresh_open(&oc->fn[i]);
    testkit_threads_join_all(&oc->callers);
    for (int i = 0; i < CROWD; i++)
        dlock_once_free(oc->k[i].flight);
    for (int i = 0; i < oc->nfn; i++) {
        pthread_cond_destroy(&oc->fn[i].cv);
        pthread_mutex_destroy(&oc->fn[i].mu);
    }
    if (oc->name[0] != '\0')
        forget(oc->name);
    dlock_client_free(oc->c[0]);
    dlock_client_free(oc->c[1]);
    memset(oc, 0, sizeof(*oc));
    return 0;
}

static void a_follower_gets_the_leaders_value(void **state)
{
    once_case *const oc = begin_case();
    char *const name = oc->name;
    char rkey[TESTKIT_KEY_MAX + 64];
    refresh *const fn = case_refresh(oc, "config v2");
    caller *const lead = &oc->k[0], *const follow = &oc->k[1];

    (void)state;
    testkit_key(name, "once_follow");
    patkit_pkey(rkey, "once", name, "");
    fn->gated = 1;
    *lead = caller_for(oc->c[0], name, fn);
    *follow = caller_for(oc->c[1], name, fn);
    start_caller(oc, 0);
    TK_EXPECT(testkit_wait_until(started, fn, 3000), "the leader refreshes");
    start_caller(oc, 1);
    TK_EXPECT(patkit_wait_int_at_least(rkey, "waiters", 1, 3000),
              "the second caller follows");
    refresh_open(fn);
    testkit_threads_join_next(&oc->callers);
    testkit_threads_join_next(&oc->callers);
    TK_EXPECT(lead->err == DLOCK_OK && dlock_once_led(lead->flight),
              "the first caller led, got %s", dlock_errname(lead->err));
    TK_EXPECT(follow->err == DLOCK_OK && !dlock_once_led(follow->flight),
              "the second followed, got %s", dlock_errname(follow->err));
    TK_EXPECT(has_value(lead->flight, "config v2")
                  && has_value(follow->flight, "config v2"),
              "both have the leader's value");
    TK_EXPECT(atomic_load(&fn->calls) == 1, "the refresh ran once, ran %d",
              atomic_load(&fn->calls));
}

static void a_crowd_causes_one_refresh(void **state)
{
    once_case *const oc = begin_case();
    char *const name = oc->name;
    refresh *const fn = case_refresh(oc, "fresh");
    caller *const k = oc->k;
    int led = 0;

    (void)state;
    testkit_key(name, "once_crowd");
    fn->work_ms = 100;
    for (int i = 0; i < CROWD; i++) {
        k[i] = caller_for(oc->c[i % 2], name, fn);
        start_caller(oc, i);
    }
    for (int i = 0; i < CROWD; i++) {
        testkit_threads_join_next(&oc->callers);
        TK_EXPECT(k[i].err == DLOCK_OK && has_value(k[i].flight, "fresh"),
                  "caller %d gets the fresh value, got %s", i,
                  dlock_errname(k[i].err));
        led += dlock_once_led(k[i].flight);
        dlock_once_free(k[i].flight);
        k[i].flight = NULL;
    }
    TK_EXPECT(atomic_load(&fn->calls) == 1 && led == 1,
              "one refresh for %d "
              "callers, got %d (%d led)",
              CROWD, atomic_load(&fn->calls), led);
}

static void a_follower_past_its_deadline_keeps_its_old_value(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX];
    dlock_once_opts o;
    dlock_once *leader, *late = (dlock_once *)1;
    int64_t began, waited_ms;

    (void)state;
    testkit_key(name, "once_deadline");
    dlock_once_opts_init(&o);
    TK_EXPECT_ERR(dlock_once_begin(c, name, &o, &leader), DLOCK_OK, c,
                  "the first caller begins");
    TK_EXPECT(dlock_once_status(leader) == DLOCK_ONCE_LEADER, "it leads");
    o.wait_ms = 200;
    began = testkit_now_us();
    TK_EXPECT_ERR(dlock_once_begin(c, name, &o, &late), DLOCK_BUSY, c,
                  "a follower whose 200 ms wait runs out");
    waited_ms = (testkit_now_us() - began) / 1000;
    TK_EXPECT(late == NULL && waited_ms >= 190 && waited_ms < 1000,
              "it waited its 200 ms, %lld ms", (long long)waited_ms);
    TK_EXPECT_ERR(dlock_once_abort(leader), DLOCK_OK, c, "aborting");
    dlock_once_free(leader);
    forget(name);
    dlock_client_free(c);
}

static void a_failed_refresh_hands_over_to_a_follower(void **state)
{
    once_case *const oc = begin_case();
    char *const name = oc->name;
    char rkey[TESTKIT_KEY_MAX + 64];
    refresh *const failing = case_refresh(oc, "");
    refresh *const working = case_refresh(oc, "from the follower");
    caller *const lead = &oc->k[0], *const follow = &oc->k[1];

    (void)state;
    testkit_key(name, "once_fail");
    patkit_pkey(rkey, "once", name, "");
    failing->gated = 1;
    failing->fail = 1;
    *lead = caller_for(oc->c[0], name, failing);
    *follow = caller_for(oc->c[1], name, working);
    start_caller(oc, 0);
    TK_EXPECT(testkit_wait_until(started, failing, 3000), "the leader "
                                                          "refreshes");
    start_caller(oc, 1);
    TK_EXPECT(patkit_wait_int_at_least(rkey, "waiters", 1, 3000),
              "the second caller follows");
    refresh_open(failing);
    testkit_threads_join_next(&oc->callers);
    testkit_threads_join_next(&oc->callers);
    TK_EXPECT(lead->err == DLOCK_STATE && lead->fn_result == 42
                  && lead->flight == NULL,
              "the failed leader gets DLOCK_STATE and "
              "its function's 42, got %s and %d",
              dlock_errname(lead->err), lead->fn_result);
    TK_EXPECT(follow->err == DLOCK_OK && dlock_once_led(follow->flight)
                  && has_value(follow->flight, "from the follower"),
              "the follower refreshes instead, got %s",
              dlock_errname(follow->err));
}

static void a_dead_leader_is_replaced_when_its_lease_runs_out(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX];
    dlock_once_opts o;
    dlock_once *dead;
    refresh fn;
    caller next;
    int64_t died, took_ms;

    (void)state;
    testkit_key(name, "once_dead");
    dlock_once_opts_init(&o);
    o.lease_ms = 300;
    TK_EXPECT_ERR(dlock_once_begin(c, name, &o, &dead), DLOCK_OK, c,
                  "the first caller begins");
    died = testkit_now_us();
    dlock_once_free(dead); /* dies while refreshing */
    refresh_init(&fn, "v3");
    next = caller_for(c, name, &fn);
    next.opts.wait_ms = 3000;
    call_once(&next);
    took_ms = (testkit_now_us() - died) / 1000;
    TK_EXPECT(next.err == DLOCK_OK && dlock_once_led(next.flight)
                  && has_value(next.flight, "v3"),
              "the next caller leads after "
              "the lease, got %s",
              dlock_errname(next.err));
    TK_EXPECT(took_ms >= 250 && took_ms < 2000,
              "it took over when the "
              "300 ms lease ran out, after %lld ms",
              (long long)took_ms);
    dlock_once_free(next.flight);
    forget(name);
    dlock_client_free(c);
}

static void the_value_is_served_for_keep_ms_then_refreshed(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX], rkey[TESTKIT_KEY_MAX + 64];
    refresh fn;
    caller k;

    (void)state;
    testkit_key(name, "once_keep");
    patkit_pkey(rkey, "once", name, "");
    refresh_init(&fn, "cached");
    k = caller_for(c, name, &fn);
    k.opts.keep_ms = 300;
    call_once(&k);
    TK_EXPECT(k.err == DLOCK_OK && dlock_once_led(k.flight), "the first "
                                                             "call refreshes");
    dlock_once_free(k.flight);
    call_once(&k);
    TK_EXPECT(k.err == DLOCK_OK && !dlock_once_led(k.flight)
                  && has_value(k.flight, "cached")
                  && atomic_load(&fn.calls) == 1,
              "within keep_ms the stored value is served, no refresh");
    dlock_once_free(k.flight);
    TK_EXPECT(patkit_wait_gone(rkey, 2000), "the value expires after "
                                            "keep_ms");
    call_once(&k);
    TK_EXPECT(k.err == DLOCK_OK && dlock_once_led(k.flight)
                  && atomic_load(&fn.calls) == 2,
              "after keep_ms the next caller "
              "refreshes again");
    dlock_once_free(k.flight);
    forget(name);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(a_follower_gets_the_leaders_value, end_case),
        cmocka_unit_test_teardown(a_crowd_causes_one_refresh, end_case),
        cmocka_unit_test(a_follower_past_its_deadline_keeps_its_old_value),
        cmocka_unit_test_teardown(a_failed_refresh_hands_over_to_a_follower,
                                  end_case),
        cmocka_unit_test(a_dead_leader_is_replaced_when_its_lease_runs_out),
        cmocka_unit_test(the_value_is_served_for_keep_ms_then_refreshed),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
