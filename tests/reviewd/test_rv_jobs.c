/*
 * test_rv_jobs.c: reviewd's worker pool (http/rv_jobs.c) runs every job
 * it accepts exactly once, in the order given when it must queue them,
 * and wakes an idle worker for every job handed to it.
 *
 * Every request of reviewd crosses this pool, and the pool hands a job
 * straight to an idle worker's own semaphore: a lost wake-up there
 * strands a request until its client gives up, and a job run twice
 * answers a connection twice.  No server is needed; each wait is bounded.
 *
 * A case's pool, jobs, shared state and pushing threads live in static
 * storage (the_case), and end_case, every case's teardown, opens the gate,
 * joins the pushers and frees the pool (which runs its queue dry and joins
 * its workers) whether the case passed or failed: a failed assertion
 * leaves the case by longjmp while workers still run its jobs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/rv_jobs.h"

#define WAIT_MS 5000

/* A job that counts its runs and records where it ran in the order. */
typedef struct counted {
    rv_job job;
    atomic_int runs;
    int index;
    struct shared *shared;
} counted;

typedef struct shared {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int done;           /* jobs finished */
    int order[64];      /* job indexes in the order they ran */
    int gate_open;      /* the blocker job waits for this */
    int blocker_inside; /* the blocker job has started */
} shared;

static void shared_init(shared *s)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
}

static void shared_destroy(shared *s)
{
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
}

static void deadline_in(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Waits (bounded) until *flag reaches want; returns its value. */
static int wait_for(shared *s, const int *flag, int want)
{
    struct timespec until;
    int rc = 0, v;

    deadline_in(&until, WAIT_MS);
    pthread_mutex_lock(&s->mu);
    while (*flag < want && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&s->cond, &s->mu, &until);
    v = *flag;
    pthread_mutex_unlock(&s->mu);
    return v;
}

static void run_counted(rv_job *job)
{
    counted *c = (counted *)job;
    shared *s = c->shared;

    atomic_fetch_add(&c->runs, 1);
    pthread_mutex_lock(&s->mu);
    if (s->done < (int)(sizeof(s->order) / sizeof(s->order[0])))
        s->order[s->done] = c->index;
    s->done++;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

/* Occupies the only worker until the gate opens. */
static void run_blocker(rv_job *job)
{
    shared *s = ((counted *)job)->shared;
    struct timespec until;
    int rc = 0;

    deadline_in(&until, WAIT_MS);
    pthread_mutex_lock(&s->mu);
    s->blocker_inside = 1;
    pthread_cond_broadcast(&s->cond);
    while (!s->gate_open && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&s->cond, &s->mu, &until);
    pthread_mutex_unlock(&s->mu);
}

static void open_gate(shared *s)
{
    pthread_mutex_lock(&s->mu);
    s->gate_open = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

typedef struct pusher {
    rv_jobs *pool;
    counted *jobs;
    int n;
} pusher;

enum { PUSHERS = 4, EACH = 2000 };

/* One case's pool, jobs and pushing threads, in static storage: a failed
 * assertion leaves the case by longjmp while the pool's workers and the
 * pushers still use them, so they must outlive the case's frame until
 * end_case has stopped them.  One case at a time uses it. */
typedef struct jobs_case {
    rv_jobs *pool;
    counted *jobs; /* heap, njobs of them */
    counted blocker;
    shared s;
    pusher p[PUSHERS];
    pthread_t t[PUSHERS];
    int pushing; /* pushers started */
    int joined;  /* pushers joined */
} jobs_case;

static jobs_case the_case;

static jobs_case *begin_case(int njobs)
{
    memset(&the_case, 0, sizeof(the_case));
    shared_init(&the_case.s);
    the_case.jobs = calloc((size_t)njobs, sizeof(*the_case.jobs));
    assert_non_null(the_case.jobs);
    return &the_case;
}

/* Teardown of every case, passed or failed: opens the blocker's gate,
 * joins the pushers (each returns after at most EACH pushes), frees the
 * pool (its workers run the queue dry and exit; a blocker waits at most
 * WAIT_MS) and then the jobs. */
static int end_case(void **state)
{
    jobs_case *jc = &the_case;

    (void)state;
    open_gate(&jc->s);
    for (int i = jc->joined; i < jc->pushing; i++)
        pthread_join(jc->t[i], NULL);
    rv_jobs_free(jc->pool);
    free(jc->jobs);
    shared_destroy(&jc->s);
    memset(jc, 0, sizeof(*jc));
    return 0;
}

/* One job at a time, each awaited: every push must wake an idle worker
 * (the semaphore hand-over), or the wait times out. */
static void test_idle_worker_woken_for_each_job(void **state)
{
    enum { N = 300 };
    jobs_case *jc = begin_case(N);
    counted *jobs = jc->jobs;
    char err[128];
    rv_jobs *pool = jc->pool = rv_jobs_start(4, NULL, NULL, err, sizeof(err));
    shared *const s = &jc->s;
    int i;

    (void)state;
    assert_non_null(pool);
    for (i = 0; i < N; i++) {
        jobs[i].job.run = run_counted;
        jobs[i].shared = s;
        assert_int_equal(rv_jobs_push(pool, &jobs[i].job), 0);
        assert_int_equal(wait_for(s, &s->done, i + 1), i + 1);
    }
    rv_jobs_free(pool);
    jc->pool = NULL;
    for (i = 0; i < N; i++)
        assert_int_equal(atomic_load(&jobs[i].runs), 1);
}

/* While the only worker is busy, jobs queue and then run in the order
 * they were pushed. */
static void test_queued_jobs_run_in_order(void **state)
{
    enum { N = 50 };
    jobs_case *jc = begin_case(N);
    counted *const blocker = &jc->blocker, *jobs = jc->jobs;
    char err[128];
    rv_jobs *pool = jc->pool = rv_jobs_start(1, NULL, NULL, err, sizeof(err));
    shared *const s = &jc->s;
    int i;

    (void)state;
    assert_non_null(pool);
    blocker->job.run = run_blocker;
    blocker->shared = s;
    assert_int_equal(rv_jobs_push(pool, &blocker->job), 0);
    assert_int_equal(wait_for(s, &s->blocker_inside, 1), 1);
    for (i = 0; i < N; i++) {
        jobs[i].job.run = run_counted;
        jobs[i].index = i;
        jobs[i].shared = s;
        assert_int_equal(rv_jobs_push(pool, &jobs[i].job), 0);
    }
    open_gate(s);
    assert_int_equal(wait_for(s, &s->done, N), N);
    rv_jobs_free(pool);
    jc->pool = NULL;
    for (i = 0; i < N; i++)
        assert_int_equal(s->order[i], i);
}

static void *push_all(void *arg)
{
    pusher *p = arg;
    int i;

    for (i = 0; i < p->n; i++)
        if (rv_jobs_push(p->pool, &p->jobs[i].job) != 0)
            return (void *)1;
    return NULL;
}

/* Four threads push at once into eight workers; stop runs what is
 * queued: each job ran exactly once. */
static void test_concurrent_pushes_each_run_once(void **state)
{
    jobs_case *jc = begin_case(PUSHERS * EACH);
    counted *jobs = jc->jobs;
    pusher *p = jc->p;
    char err[128];
    rv_jobs *pool = jc->pool = rv_jobs_start(8, NULL, NULL, err, sizeof(err));
    shared *const s = &jc->s;
    void *rc;
    int i;

    (void)state;
    assert_non_null(pool);
    for (i = 0; i < PUSHERS * EACH; i++) {
        jobs[i].job.run = run_counted;
        jobs[i].shared = s;
    }
    for (i = 0; i < PUSHERS; i++) {
        p[i].pool = pool;
        p[i].jobs = jobs + i * EACH;
        p[i].n = EACH;
        assert_int_equal(pthread_create(&jc->t[i], NULL, push_all, &p[i]), 0);
        jc->pushing = i + 1;
    }
    for (i = 0; i < PUSHERS; i++) {
        const int joined = pthread_join(jc->t[i], &rc);

        jc->joined = i + 1;
        assert_int_equal(joined, 0);
        assert_null(rc);
    }
    rv_jobs_free(pool);
    jc->pool = NULL;
    for (i = 0; i < PUSHERS * EACH; i++)
        assert_int_equal(atomic_load(&jobs[i].runs), 1);
    assert_int_equal(s->done, PUSHERS * EACH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_idle_worker_woken_for_each_job,
                                  end_case),
        cmocka_unit_test_teardown(test_queued_jobs_run_in_order, end_case),
        cmocka_unit_test_teardown(test_concurrent_pushes_each_run_once,
                                  end_case),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
