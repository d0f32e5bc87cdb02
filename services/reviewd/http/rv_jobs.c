/*
 * rv_jobs.c: a fixed pool of threads taking jobs from one FIFO queue
 * (rv_jobs.h says why reviewd's handlers run here).
 *
 * One mutex and one condition variable: a push signals one sleeper, and
 * a worker that finds the queue empty sleeps.  At stop the queue is run
 * dry before the threads exit, so every job accepted is run exactly once.
 */
#include "http/rv_jobs.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rv_jobs {
    pthread_mutex_t mu;
    pthread_cond_t ready;
    rv_job *head, *tail;
    int stopping;
    int started; /* threads created, and not joined yet */
    pthread_t *threads;
};

static rv_job *take(rv_jobs *jobs)
{
    rv_job *job;

    pthread_mutex_lock(&jobs->mu);
    while (jobs->head == NULL && !jobs->stopping)
        pthread_cond_wait(&jobs->ready, &jobs->mu);
    job = jobs->head;
    if (job != NULL) {
        jobs->head = job->next;
        if (jobs->head == NULL)
            jobs->tail = NULL;
    }
    pthread_mutex_unlock(&jobs->mu);
    return job;
}

static void *worker_main(void *arg)
{
    rv_jobs *jobs = arg;
    rv_job *job;

    while ((job = take(jobs)) != NULL)
        job->run(job);
    return NULL;
}

rv_jobs *rv_jobs_start(int threads, char *errbuf, size_t errlen)
{
    rv_jobs *jobs = calloc(1, sizeof(*jobs));
    int rc = 0;

    if (jobs == NULL || threads < 1) {
        snprintf(errbuf, errlen, "http: cannot make the worker pool");
        free(jobs);
        return NULL;
    }
    jobs->threads = calloc((size_t)threads, sizeof(*jobs->threads));
    if (jobs->threads == NULL) {
        snprintf(errbuf, errlen, "http: out of memory for %d workers",
                 threads);
        free(jobs);
        return NULL;
    }
    pthread_mutex_init(&jobs->mu, NULL);
    pthread_cond_init(&jobs->ready, NULL);
    while (jobs->started < threads) {
        rc = pthread_create(&jobs->threads[jobs->started], NULL, worker_main,
                            jobs);
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
    int rc = -1;

    job->next = NULL;
    pthread_mutex_lock(&jobs->mu);
    if (!jobs->stopping) {
        if (jobs->tail != NULL)
            jobs->tail->next = job;
        else
            jobs->head = job;
        jobs->tail = job;
        pthread_cond_signal(&jobs->ready);
        rc = 0;
    }
    pthread_mutex_unlock(&jobs->mu);
    return rc;
}

void rv_jobs_stop(rv_jobs *jobs)
{
    int i;

    if (jobs == NULL)
        return;
    pthread_mutex_lock(&jobs->mu);
    jobs->stopping = 1;
    pthread_cond_broadcast(&jobs->ready);
    pthread_mutex_unlock(&jobs->mu);
    for (i = 0; i < jobs->started; i++)
        pthread_join(jobs->threads[i], NULL);
    jobs->started = 0;
}

void rv_jobs_free(rv_jobs *jobs)
{
    if (jobs == NULL)
        return;
    rv_jobs_stop(jobs);
    pthread_cond_destroy(&jobs->ready);
    pthread_mutex_destroy(&jobs->mu);
    free(jobs->threads);
    free(jobs);
}
