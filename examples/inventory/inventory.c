/*
 * inventory: 8 processes sell from a stock of 1,000 items kept outside
 * Redis, 2,000 attempts in all, and never oversell (dlock/lock.h with
 * fencing, the resource mutex recipe of docs/patterns.md).
 *
 * The stock lives in a file, as it would in a database of its own: one
 * fixed-size record "stock=N fence=F".  A sale is read-check-write: read
 * the record, and if N > 0, do the slow part of a sale (0.3 ms) and write
 * N - 1.  Without mutual exclusion two processes read the same N and both
 * sell the last item (a lost update, an oversell).  With the lock, each
 * sale runs under dlock_acquire of the item's key, and the write carries
 * the lock's fence: the store refuses a write whose fence is older than the
 * last one it accepted, so even a holder that stalled past its TTL (GC,
 * SIGSTOP) could not write over a newer holder's sale.
 *
 * Checked with the lock: exactly 1,000 sold, the stock ends at 0, no sale
 * ever saw or left a negative stock, no write was refused, and every
 * attempt was made.  With --no-lock the same program shows the oversell
 * (more sales than items), and the run passes only if it does, which is
 * what proves that the lock is what prevents it.
 *
 *   inventory [--redis URL] [--procs 8] [--attempts 2000] [--stock 1000]
 *             [--no-lock]
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "example_kit.h"

#define RECORD_LEN 54 /* "stock=" 20 digits " fence=" 20 digits "\n" */

typedef struct run {
    const char *url;
    int use_lock;
    int procs;
    int attempts;
    long stock;
    char lock_key[128];
    char store[300];
    char sales[300];
    int64_t start_wall_us;
} run;

/* ---- the store: a record in a file, outside Redis ---------------------- */

static int store_read(int fd, long *stock, uint64_t *fence)
{
    char buf[RECORD_LEN + 1];
    ssize_t n = pread(fd, buf, RECORD_LEN, 0);
    unsigned long long f;

    if (n != RECORD_LEN)
        return -1;
    buf[RECORD_LEN] = '\0';
    if (sscanf(buf, "stock=%ld fence=%llu", stock, &f) != 2)
        return -1;
    *fence = f;
    return 0;
}

static int store_put(int fd, long stock, uint64_t fence)
{
    char buf[RECORD_LEN + 10];

    snprintf(buf, sizeof(buf), "stock=%020ld fence=%020llu\n", stock,
             (unsigned long long)fence);
    return pwrite(fd, buf, RECORD_LEN, 0) == RECORD_LEN ? 0 : -1;
}

/*
 * The store's conditional write, as a database would do it in one
 * statement (UPDATE ... WHERE fence <= $fence): refuses a fence older than
 * the stored one.  The check and the write are one step under flock(2),
 * the file's own lock for the length of a write, not the distributed
 * lock.  Fence 0 (no lock) is never checked.  Returns 0, or 1 if refused.
 */
static int store_write_fenced(int fd, long stock, uint64_t fence)
{
    long old_stock;
    uint64_t old_fence;
    int refused = 0;

    flock(fd, LOCK_EX);
    if (fence != 0 && store_read(fd, &old_stock, &old_fence) == 0
        && fence < old_fence)
        refused = 1;
    else
        store_put(fd, stock, fence);
    flock(fd, LOCK_UN);
    return refused;
}

/* ---- a sale ------------------------------------------------------------- */

typedef struct tally {
    int sold;
    int refused;
    int errors;
    int negative;
} tally;

/* Read, check, (slow part), write; records a sale in the sales log. */
static void sell_one(const run *r, int fd, uint64_t fence, tally *t)
{
    long stock;
    uint64_t stored_fence;
    char line[128];

    if (store_read(fd, &stock, &stored_fence) != 0) {
        t->errors++;
        return;
    }
    if (stock < 0)
        t->negative++;
    if (stock <= 0)
        return;
    usleep(300); /* the slow part of a sale: payment, audit */
    if (store_write_fenced(fd, stock - 1, fence) != 0) {
        t->refused++;
        return;
    }
    t->sold++;
    snprintf(line, sizeof(line), "sold pid=%ld left=%ld fence=%" PRIu64,
             (long)getpid(), stock - 1, fence);
    ex_append_line(r->sales, line);
}

static int worker(int index, void *arg)
{
    run *r = arg;
    int mine = r->attempts / r->procs + (index < r->attempts % r->procs);
    int fd = open(r->store, O_RDWR);
    dlock_client *c = r->use_lock ? ex_client(r->url) : NULL;
    dlock_acquire_opts o;
    tally t = {0, 0, 0, 0};

    if (fd < 0)
        return 2;
    dlock_acquire_opts_init(&o);
    o.ttl_ms = 5000;
    o.wait_ms = 20000;
    ex_sleep_until_wall(r->start_wall_us);
    for (int i = 0; i < mine; i++) {
        dlock_lock *l = NULL;

        if (c != NULL && dlock_acquire(c, r->lock_key, &o, &l) != DLOCK_OK) {
            fprintf(stderr, "acquire: %s\n", dlock_client_errmsg(c));
            t.errors++;
            continue;
        }
        sell_one(r, fd, l != NULL ? dlock_lock_fence(l) : 0, &t);
        if (l != NULL && dlock_release(l) != DLOCK_OK)
            t.errors++;
    }
    close(fd);
    dlock_client_free(c);
    printf("  worker %d: %d attempts, %d sold, %d refused, %d errors\n", index,
           mine, t.sold, t.refused, t.errors);
    return t.errors > 0 || t.negative > 0 || t.refused > 0 ? 1 : 0;
}

/* ---- the verdict -------------------------------------------------------- */

static int check(const run *r, int worker_failures)
{
    char **sales;
    size_t sold;
    long left = -1, lowest = 0;
    uint64_t fence;
    int fd = open(r->store, O_RDONLY), failures = 0;

    if (fd < 0 || store_read(fd, &left, &fence) != 0)
        return ex_fail("cannot read the store %s", r->store);
    close(fd);
    if (ex_read_lines(r->sales, -1, &sales, &sold) != 0)
        return ex_fail("cannot read the sales log");
    for (size_t i = 0; i < sold; i++) {
        const char *p = strstr(sales[i], "left=");
        long v = p != NULL ? strtol(p + 5, NULL, 10) : -1;

        if (v < lowest)
            lowest = v;
    }
    free(sales);
    printf("stock %ld, %d attempts: %zu sold, %ld left%s\n", r->stock,
           r->attempts, sold, left,
           (long)sold > r->stock ? " (OVERSOLD)" : "");
    if (!r->use_lock) {
        if ((long)sold <= r->stock)
            return ex_fail("without the lock the race should oversell "
                           "(more than %ld sales); this run got %zu",
                           r->stock, sold);
        printf("without the lock: %ld items oversold\n",
               (long)sold - r->stock);
        return 0;
    }
    if (worker_failures > 0)
        failures += ex_fail("%d workers saw errors, refused writes or a "
                            "negative stock",
                            worker_failures);
    if ((long)sold != r->stock)
        failures += ex_fail("exactly %ld sold, got %zu", r->stock, sold);
    if (left != 0)
        failures += ex_fail("the stock ends at 0, got %ld", left);
    if (lowest < 0)
        failures += ex_fail("no sale left a negative stock, saw %ld", lowest);
    return failures;
}

int main(int argc, char **argv)
{
    run r;
    char dir[256];
    pid_t *pids;
    int fd, worker_failures, failures;

    memset(&r, 0, sizeof(r));
    r.url = ex_redis_url(argc, argv);
    r.use_lock = !ex_opt_flag(argc, argv, "--no-lock");
    r.procs = (int)ex_opt_long(argc, argv, "--procs", 8);
    r.attempts = (int)ex_opt_long(argc, argv, "--attempts", 2000);
    r.stock = ex_opt_long(argc, argv, "--stock", 1000);
    snprintf(r.lock_key, sizeof(r.lock_key), "example:inventory:%ld:sku-1",
             (long)getpid());
    ex_tmpdir("inventory", dir);
    snprintf(r.store, sizeof(r.store), "%s/stock", dir);
    snprintf(r.sales, sizeof(r.sales), "%s/sales", dir);
    fd = open(r.store, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || store_put(fd, r.stock, 0) != 0)
        return 2;
    close(fd);
    pids = calloc((size_t)r.procs, sizeof(*pids));
    if (pids == NULL)
        return 2;
    printf("%d processes, %d attempts on a stock of %ld, %s\n", r.procs,
           r.attempts, r.stock,
           r.use_lock ? "with the lock and fencing" : "WITHOUT the lock");
    r.start_wall_us = ex_wall_us() + 300000;
    ex_spawn(r.procs, worker, &r, pids);
    worker_failures = ex_wait_all(r.procs, pids);
    failures = check(&r, worker_failures);
    free(pids);
    ex_rmdir(dir);
    if (failures == 0)
        puts(r.use_lock ? "PASS: never below zero, exactly the stock sold"
                        : "PASS: the oversell without the lock is shown");
    return failures == 0 ? 0 : 1;
}
