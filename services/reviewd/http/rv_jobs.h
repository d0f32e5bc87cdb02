/*
 * rv_jobs.h: the worker threads that run reviewd's handlers.
 *
 * A connection belongs to the event-loop thread that adopted it
 * (rv_loop.h), so a handler that blocks on PostgreSQL or MongoDB in that
 * thread also stalls every other connection the thread serves, /healthz
 * included.  rv_http.c therefore hands the request to this pool, reads
 * nothing more from its connection meanwhile, and writes the answer when
 * the handler is done: the event-loop threads only read, write and answer from
 * memory, and the blocking work waits here, on threads sized for waiting
 * (REVIEWD_THREADS), each with its own PostgreSQL connection (rv_db.h
 * keys the connection to the thread).
 *
 * Jobs are intrusive (the caller embeds an rv_job in its own state), so
 * handing one over allocates nothing; they run in the order given.
 *
 * A worker can prepare itself before it takes its first job
 * (rv_jobs_start's thread_start): reviewd's make their PostgreSQL connection
 * there, so that the first requests after a start, which reach many idle
 * workers at once, do not each wait for a connection of their own inside
 * their budget.  A worker that is still preparing is not idle: jobs go to
 * the ready ones, or wait in the queue.
 *
 * Ownership: rv_jobs_start / rv_jobs_free; a job belongs to its caller
 * and must outlive its run.  Threads: rv_jobs_push from any thread, also
 * after rv_jobs_stop (it then refuses) until rv_jobs_free; start, stop
 * and free from one thread.
 */
#ifndef RV_JOBS_H
#define RV_JOBS_H

#include <stddef.h>

typedef struct rv_jobs rv_jobs;

typedef struct rv_job {
    struct rv_job *next; /* the queue's; set by rv_jobs_push */
    void (*run)(struct rv_job *job);
} rv_job;

/* Starts threads workers.  thread_start (NULL: nothing) runs once on
 * each worker's thread, with arg, before the worker takes its first job.
 * NULL with a message in errbuf on failure. */
rv_jobs *rv_jobs_start(int threads, void (*thread_start)(void *arg), void *arg,
                       char *errbuf, size_t errlen);

/* Queues job (job->run set by the caller).  Returns 0, or -1 once
 * rv_jobs_stop has begun (the job will not run). */
int rv_jobs_push(rv_jobs *jobs, rv_job *job);

/* Refuses further jobs, runs the ones queued and joins the threads.  The
 * pool stays valid, refusing, until rv_jobs_free: reviewd's event
 * loops may still hand over a request until its daemon is stopped.
 * NULL does nothing. */
void rv_jobs_stop(rv_jobs *jobs);

/* Stops the pool if that was not done, and frees it.  NULL does
 * nothing. */
void rv_jobs_free(rv_jobs *jobs);

#endif /* RV_JOBS_H */
