/*
 * payment: 50 concurrent "pay" requests for one order, from 5 processes,
 * and exactly one charge (dlock/idem.h).
 *
 * A client that times out retries; a load balancer sends the retry to
 * another instance; a user double-clicks.  Here 5 processes with 10
 * threads each all ask, at the same instant, to pay order 42.  Each
 * request begins an idempotency record named for the order: the one that
 * is FIRST "charges the card" (200 ms at the payment provider, a line in
 * the provider's ledger file) and stores the receipt; the others wait for
 * the record to complete and answer with the same receipt.
 *
 * Checked: the ledger has exactly one charge, all 50 requests answered,
 * every answer is the same receipt, and it names that charge.
 *
 *   payment [--redis URL] [--procs 5] [--threads 10]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "example_kit.h"

typedef struct run {
    const char *url;
    char order_key[128];
    char ledger[300];
    int threads;
    int results_fd; /* write end of the results pipe */
    int64_t start_wall_us;
} run;

typedef struct request {
    run *run;
    dlock_client *client;
    int id;
} request;

/* The payment provider: one line per charge, 200 ms per call. */
static void charge_card(const run *r, const char *charge_id)
{
    char line[256];

    ex_work_ms(200);
    snprintf(line, sizeof(line), "charge %s order=42 amount=4200 EUR",
             charge_id);
    ex_append_line(r->ledger, line);
}

/* One "pay" request: charge once, or replay the stored receipt. */
static void *pay(void *arg)
{
    request *q = arg;
    run *r = q->run;
    dlock_idem *st = NULL;
    char receipt[128], line[256];
    const char *answer;
    dlock_err err;

    ex_sleep_until_wall(r->start_wall_us);
    err = dlock_idem_begin_wait(q->client, r->order_key, 5000, 10000, &st);
    if (err == DLOCK_OK && dlock_idem_status(st) == DLOCK_IDEM_FIRST) {
        snprintf(receipt, sizeof(receipt), "paid charge=ch_%ld_%d",
                 (long)getpid(), q->id);
        charge_card(r, receipt + strlen("paid charge="));
        err = dlock_idem_complete(st, receipt, strlen(receipt), 60000);
    }
    if (err == DLOCK_OK)
        answer = dlock_idem_result(st, NULL);
    else
        answer = dlock_errname(err);
    snprintf(line, sizeof(line), "%s\n", answer);
    if (write(r->results_fd, line, strlen(line)) < 0)
        perror("write");
    dlock_idem_free(st);
    return NULL;
}

static int worker(int index, void *arg)
{
    run *r = arg;
    dlock_client *c = ex_client(r->url);
    pthread_t *threads = calloc((size_t)r->threads, sizeof(*threads));
    request *reqs = calloc((size_t)r->threads, sizeof(*reqs));

    if (threads == NULL || reqs == NULL)
        return 2;
    for (int i = 0; i < r->threads; i++) {
        reqs[i] = (request){r, c, index * r->threads + i};
        pthread_create(&threads[i], NULL, pay, &reqs[i]);
    }
    for (int i = 0; i < r->threads; i++)
        pthread_join(threads[i], NULL);
    dlock_client_free(c);
    free(threads);
    free(reqs);
    return 0;
}

/* The assertions of the example; returns the number of failures. */
static int check(const run *r, char **answers, size_t n, int expected)
{
    char **charges;
    size_t ncharges;
    int failures = 0;

    if (ex_read_lines(r->ledger, -1, &charges, &ncharges) != 0)
        return ex_fail("cannot read the ledger %s", r->ledger);
    printf("charges in the ledger: %zu\n", ncharges);
    if (ncharges != 1)
        failures += ex_fail("exactly one charge, got %zu", ncharges);
    if (n != (size_t)expected)
        failures += ex_fail("%d answers, got %zu", expected, n);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(answers[i], answers[0]) != 0) {
            failures += ex_fail("every request gets the same receipt: "
                                "\"%s\" and \"%s\"",
                                answers[0], answers[i]);
            break;
        }
    }
    if (n > 0 && ncharges == 1
        && strstr(charges[0], answers[0] + strlen("paid charge=")) == NULL)
        failures += ex_fail("the receipt \"%s\" names the charge \"%s\"",
                            answers[0], charges[0]);
    if (n > 0)
        printf("every one of %zu requests answered: %s\n", n, answers[0]);
    free(charges);
    return failures;
}

int main(int argc, char **argv)
{
    run r;
    char dir[256], **answers;
    size_t n;
    int procs = (int)ex_opt_long(argc, argv, "--procs", 5);
    int fds[2], failures;
    pid_t *pids;

    memset(&r, 0, sizeof(r));
    r.url = ex_redis_url(argc, argv);
    r.threads = (int)ex_opt_long(argc, argv, "--threads", 10);
    snprintf(r.order_key, sizeof(r.order_key), "example:payment:%ld:order-42",
             (long)getpid());
    ex_tmpdir("payment", dir);
    snprintf(r.ledger, sizeof(r.ledger), "%s/ledger", dir);
    pids = calloc((size_t)procs, sizeof(*pids));
    if (pids == NULL || pipe(fds) != 0)
        return 2;
    r.results_fd = fds[1];
    r.start_wall_us = ex_wall_us() + 500000;
    printf("%d processes x %d threads pay order 42 at once (Redis %s)\n",
           procs, r.threads, r.url);
    ex_spawn(procs, worker, &r, pids);
    close(fds[1]);
    if (ex_read_lines(NULL, fds[0], &answers, &n) != 0)
        return 2;
    failures = ex_wait_all(procs, pids);
    if (failures > 0)
        ex_fail("%d worker processes failed", failures);
    failures += check(&r, answers, n, procs * r.threads);
    free(answers);
    free(pids);
    ex_rmdir(dir);
    puts(failures == 0 ? "PASS: one charge, one receipt for everyone"
                       : "FAIL");
    return failures == 0 ? 0 : 1;
}
