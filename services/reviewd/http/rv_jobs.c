/*
 * rv_jobs.c: a fixed pool of threads taking jobs from one FIFO queue
 * (rv_jobs.h says why reviewd's handlers run here).
 *
 * Every request crosses this pool twice (event loop to worker, worker to
 * event loop), so a hand-over is made as cheap as it can be: a worker
 * with nothing to do waits on a semaphore of its own on a stack of idle
 * workers, and rv_jobs_push gives a job straight to the worker on top
 * (the one that went idle last, whose stack and PostgreSQL connection
 * are the warmest), then wakes it after the mutex is released: one
 * futex wake, and the woken thread never contends for the mutex it was
 * woken under, as it did with one condition variable for all.  Only
 * when every worker is busy does a job wait in the queue, and a worker
 * takes the queue's head before it goes idle again, so jobs start in the
 * order given.  At stop the queue is run dry before the threads exit,
 * so every job accepted is run exactly once.  A worker runs the pool's
 * thread-start function (given to rv_jobs_start) before it first goes
 * idle, so it is never handed a job before it is ready.
 */
#include "http/rv_jobs.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One thread; idle ones wait on go, stacked on rv_jobs.idle. */
typedef struct worker {
    struct rv_jobs *jobs;
    pthread_t thread;
    sem_t go;            /* posted when job is set, or at stop */
    rv_job *job;         /* given by rv_jobs_push while idle */
    struct worker *next; /* below this one on the idle stack */
} worker;

struct rv_jobs {
    pthread_mutex_t mu;
    rv_job *head, *tail; /* jobs no idle worker could take */
    worker *idle;        /* the stack of idle workers */
    int stopping;
    int started;  /* threads created, and not joined yet */
    int nworkers; /* workers[], each with its semaphore */
    worker *workers;
    void (*thread_start)(void *arg); /* run by each worker first */
    void *thread_arg;
};

/* The next job for w: the queue's head, else one given while w waits
 * idle; NULL once the pool stops with the queue empty. */
static rv_job *take(worker *w)
{
    rv_jobs *jobs = w->jobs;
    rv_job *job;

    pthread_mutex_lock(&jobs->mu);
    job = jobs->head;
    if (job != NULL) {
        jobs->head = job->next;
        if (jobs->head == NULL)
            jobs->tail = NULL;
        pthread_mutex_unlock(&jobs->mu);
        return job;
    }
    if (jobs->stopping) {
        pthread_mutex_unlock(&jobs->mu);
        return NULL;
    }
    w->job = NULL;
    w->next = jobs->idle;
    jobs->idle = w;
    pthread_mutex_unlock(&jobs->mu);
    while (sem_wait(&w->go) != 0)
        ; /* EINTR: wait on */
    /* Set before the post (rv_jobs_push), or NULL at stop. */
    return w->job;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    rv_job *job;

    if (w->jobs->thread_start != NULL)
        w->jobs->thread_start(w->jobs->thread_arg);
    while ((job = take(w)) != NULL)
        job->run(job);
    return NULL;
}

rv_jobs *rv_jobs_start(int threads, void (*thread_start)(void *arg), void *arg,
                       char *errbuf, size_t errlen)
{
    rv_jobs *jobs = calloc(1, sizeof(*jobs));
    int i, rc = 0;

    if (jobs == NULL || threads < 1) {
        snprintf(errbuf, errlen, "http: cannot make the worker pool");
        free(jobs);
        return NULL;
    }
    jobs->workers = calloc((size_t)threads, sizeof(*jobs->workers));
    if (jobs->workers == NULL) {
        snprintf(errbuf, errlen, "http: out of memory for %d workers",
                 threads);
        free(jobs);
        return NULL;
    }
    pthread_mutex_init(&jobs->mu, NULL);
    jobs->thread_start = thread_start;
    jobs->thread_arg = arg;
    for (i = 0; i < threads; i++) {
        jobs->workers[i].jobs = jobs;
        sem_init(&jobs->workers[i].go, 0, 0);
    }
    jobs->nworkers = threads;
    while (jobs->started < threads) {
        worker *w = &jobs->workers[jobs->started];

        rc = pthread_create(&w->thread, NULL, worker_main, w);
        if (rc != 0)
            break;
        jobs->started++;
    }
    if (rc != 0) {
        snprintf(errbuf, errlen, "http: cannot start worker %d of %d: %s",
                 jobs->started + 1, threads, strerror(rc));
        rv_jobs_free(jobs);
        return NULL;
    }
    return jobs;
}

int rv_jobs_push(rv_jobs *jobs, rv_job *job)
{
    worker *w = NULL;

    job->next = NULL;
    pthread_mutex_lock(&jobs->mu);
    if (jobs->stopping) {
        pthread_mutex_unlock(&jobs->mu);
        return -1;
    }
    if (jobs->idle != NULL) {
        w = jobs->idle;
        jobs->idle = w->next;
        w->job = job;
    } else if (jobs->tail != NULL) {
        jobs->tail->next = job;
        jobs->tail = job;
    } else {
        jobs->head = jobs->tail = job;
    }
    pthread_mutex_unlock(&jobs->mu);
    if (w != NULL)
        sem_post(&w->go);
    return 0;
}

void rv_jobs_stop(rv_jobs *jobs)
{
    worker *w;
    int i;

    if (jobs == NULL)
        return;
    pthread_mutex_lock(&jobs->mu);
    jobs->stopping = 1;
    /* Idle workers wake with no job and exit; busy ones run the queue
     * dry first (take). */
    while ((w = jobs->idle) != NULL) {
        jobs->idle = w->next;
        sem_post(&w->go);
    }
    pthread_mutex_unlock(&jobs->mu);
    for (i = 0; i < jobs->started; i++)
        pthread_join(jobs->workers[i].thread, NULL);
    jobs->started = 0;
}

void rv_jobs_free(rv_jobs *jobs)
{
    int i;

    if (jobs == NULL)
        return;
    rv_jobs_stop(jobs);
    for (i = 0; i < jobs->nworkers; i++)
        sem_destroy(&jobs->workers[i].go);
    pthread_mutex_destroy(&jobs->mu);
    free(jobs->workers);
    free(jobs);
}
