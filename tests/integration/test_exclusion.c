/*
 * test_exclusion.c: the lock gives mutual exclusion across processes and
 * threads.
 *
 * 4 processes x 8 threads each take one key 500 times (waiting when it is
 * held) and, while holding it, increment a counter kept in a plain file
 * outside Redis: read it, yield the CPU so that another holder would get in
 * if it could, write it back + 1.  Without exclusion increments are lost;
 * with it the file ends at exactly 16,000.  A flag in shared memory catches
 * an overlap directly: each holder sets it on entry and clears it before
 * releasing, so finding it already set means two holders at once.
 *
 * The processes are forked before any client or thread exists (a client's
 * threads and connections do not survive fork), and each child makes its
 * own client.  The TTL (10 s) is far above a hold (microseconds), so expiry
 * can never explain an overlap.
 */
#include "itkit.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROCESSES 4
#define THREADS 8
#define ROUNDS 500
#define TTL_MS 10000
#define WAIT_MS 60000
#define CHILDREN_TIMEOUT_MS 100000

/* Shared by every process (MAP_SHARED, made before fork). */
typedef struct shared {
    atomic_int inside;   /* 1 while someone holds the lock */
    atomic_int overlaps; /* holders that found inside already 1 */
    atomic_int failures; /* acquire or release calls that failed */
    atomic_long grants;  /* successful acquires */
    char first_failure[DLOCK_ERRMSG_MAX + 64];
    atomic_int failure_claimed;
} shared;

typedef struct worker {
    dlock_client *client;
    const char *key;
    int counter_fd;
    shared *sh;
} worker;

static void record_failure(shared *sh, const char *what, dlock_err err,
                           dlock_client *c)
{
    int unclaimed = 0;

    atomic_fetch_add(&sh->failures, 1);
    if (atomic_compare_exchange_strong(&sh->failure_claimed, &unclaimed, 1))
        snprintf(sh->first_failure, sizeof(sh->first_failure), "%s: %s: %s",
                 what, dlock_errname(err), dlock_client_errmsg(c));
}

/* The unprotected read-modify-write that only the lock makes safe. */
static int increment_counter(int fd)
{
    long long value = 0;

    if (pread(fd, &value, sizeof(value), 0) != (ssize_t)sizeof(value))
        return -1;
    sched_yield();
    value++;
    if (pwrite(fd, &value, sizeof(value), 0) != (ssize_t)sizeof(value))
        return -1;
    return 0;
}

static void hold_once(worker *w, dlock_lock *l)
{
    if (atomic_exchange(&w->sh->inside, 1) != 0)
        atomic_fetch_add(&w->sh->overlaps, 1);
    if (increment_counter(w->counter_fd) != 0)
        record_failure(w->sh, "counter file I/O", DLOCK_SYSTEM, w->client);
    atomic_store(&w->sh->inside, 0);
    (void)l;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    dlock_acquire_opts o = itkit_acquire_opts(TTL_MS, WAIT_MS);

    for (int i = 0; i < ROUNDS; i++) {
        dlock_lock *l = NULL;
        dlock_err err = dlock_acquire(w->client, w->key, &o, &l);

        if (err != DLOCK_OK) {
            record_failure(w->sh, "acquire", err, w->client);
            break;
        }
        atomic_fetch_add(&w->sh->grants, 1);
        hold_once(w, l);
        err = dlock_release(l);
        if (err != DLOCK_OK) {
            record_failure(w->sh, "release", err, w->client);
            break;
        }
    }
    return NULL;
}

/* A child process: one client, THREADS threads; exits 0 if it could run
 * them all (what they saw is in shared memory). */
static void child_main(const char *url, const char *key, const char *path,
                       shared *sh)
{
    char errbuf[DLOCK_ERRMSG_MAX] = "";
    dlock_client_opts o;
    dlock_client *c = NULL;
    pthread_t threads[THREADS];
    worker w;
    int fd = open(path, O_RDWR);
    dlock_err err;

    dlock_client_opts_init(&o);
    o.pool_size = THREADS;
    err = dlock_client_new(url, &o, &c, errbuf, sizeof(errbuf));
    if (fd < 0 || err != DLOCK_OK) {
        fprintf(stderr, "child %ld: open %s: %s; client: %s %s\n",
                (long)getpid(), path, fd < 0 ? strerror(errno) : "ok",
                dlock_errname(err), errbuf);
        exit(2);
    }
    w = (worker){c, key, fd, sh};
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&threads[i], NULL, worker_main, &w) != 0)
            exit(3);
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    dlock_client_free(c);
    close(fd);
    exit(0);
}

typedef struct children {
    pid_t pids[PROCESSES];
    int status[PROCESSES];
} children;

static int all_children_exited(void *arg)
{
    children *ch = arg;
    int left = 0;

    for (int i = 0; i < PROCESSES; i++) {
        if (ch->pids[i] == 0)
            continue;
        if (waitpid(ch->pids[i], &ch->status[i], WNOHANG) == ch->pids[i])
            ch->pids[i] = 0;
        else
            left++;
    }
    return left == 0;
}

/* Makes var/test/exclusion-<pid>/counter holding the integer 0; returns
 * its descriptor, or -1. */
static int make_counter(char *dir, size_t dirlen, char *path, size_t len)
{
    long long zero = 0;
    int fd;

    if (testkit_scratch_dir(dir, dirlen, "exclusion") == NULL)
        return -1;
    snprintf(path, len, "%s/counter", dir);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    if (pwrite(fd, &zero, sizeof(zero), 0) != (ssize_t)sizeof(zero)) {
        close(fd);
        return -1;
    }
    return fd;
}

static void lock_excludes_32_holders_in_4_processes(void **state)
{
    const char *url = itkit_shared_url();
    char key[TESTKIT_KEY_MAX], dir[512], path[600];
    shared *sh = mmap(NULL, sizeof(shared), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int fd = make_counter(dir, sizeof(dir), path, sizeof(path));
    children ch = {{0}, {0}};
    long long count = -1;
    int64_t started = testkit_now_ms();

    (void)state;
    TK_EXPECT(sh != MAP_FAILED, "shared memory for the overlap detector");
    TK_EXPECT(fd >= 0, "a counter file at %s", path);
    memset(sh, 0, sizeof(*sh));
    testkit_key(key, "exclusion");
    fflush(NULL);
    for (int i = 0; i < PROCESSES; i++) {
        ch.pids[i] = fork();
        TK_EXPECT(ch.pids[i] >= 0, "fork child %d", i);
        if (ch.pids[i] == 0)
            child_main(url, key, path, sh);
    }
    if (!testkit_wait_until(all_children_exited, &ch, CHILDREN_TIMEOUT_MS)) {
        for (int i = 0; i < PROCESSES; i++)
            if (ch.pids[i] != 0)
                kill(ch.pids[i], SIGKILL);
        all_children_exited(&ch);
        TK_EXPECT(0, "the 4 processes finish within %d s",
                  CHILDREN_TIMEOUT_MS / 1000);
    }
    for (int i = 0; i < PROCESSES; i++)
        TK_EXPECT(WIFEXITED(ch.status[i]) && WEXITSTATUS(ch.status[i]) == 0,
                  "child %d ran its client and threads and exited 0 "
                  "(status 0x%x)",
                  i, ch.status[i]);
    TK_EXPECT(pread(fd, &count, sizeof(count), 0) == (ssize_t)sizeof(count),
              "the counter can be read back");
    print_message("%d processes x %d threads x %d rounds: %ld grants in "
                  "%lld ms\n",
                  PROCESSES, THREADS, ROUNDS, atomic_load(&sh->grants),
                  (long long)(testkit_now_ms() - started));
    TK_EXPECT(atomic_load(&sh->overlaps) == 0,
              "no two holders at once; "
              "%d holders found another inside",
              atomic_load(&sh->overlaps));
    TK_EXPECT(atomic_load(&sh->failures) == 0,
              "no acquire or release "
              "failed; %d did, first: %s",
              atomic_load(&sh->failures), sh->first_failure);
    TK_EXPECT(count == PROCESSES * THREADS * ROUNDS,
              "the unprotected counter "
              "ends at exactly %d, got %lld (lost updates mean overlapping "
              "holders)",
              PROCESSES * THREADS * ROUNDS, count);
    close(fd);
    testkit_scratch_remove(dir);
    testkit_forget_lock(url, key);
    munmap(sh, sizeof(*sh));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lock_excludes_32_holders_in_4_processes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
