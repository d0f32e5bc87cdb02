/*
 * sms: 4 processes share an SMS gateway's limit of 50 messages per second
 * for 5 s (dlock/ratelimit.h).
 *
 * The gateway refuses more than its contracted rate, so every sender asks
 * one shared GCRA limiter (50 per second, burst 5) before each message.
 * The senders want to send as fast as they can: each calls
 * dlock_ratelimit_wait, which reserves the earliest free slot by the Redis
 * server's clock in one round trip and sleeps until it, and then "sends"
 * (a line to the coordinator with the slot's server time).
 *
 * Checked: the messages sent in the 5 s are within 5% of 50 x 5 = 250,
 * and no one-second window of server time holds more than 50 + burst.
 *
 *   sms [--redis URL] [--procs 4] [--seconds 5] [--rate 50] [--burst 5]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "example_kit.h"

typedef struct run {
    const char *url;
    char name[128];
    int64_t rate;
    int64_t burst;
    int64_t start_wall_us;
    int64_t end_wall_us;
    int out_fd;
} run;

static int sender(int index, void *arg)
{
    run *r = arg;
    dlock_client *c = ex_client(r->url);
    dlock_ratelimit *rl;
    int sent = 0, errors = 0;

    if (dlock_ratelimit_new(c, r->name, r->rate, 1000, r->burst, &rl)
        != DLOCK_OK)
        return 2;
    ex_sleep_until_wall(r->start_wall_us);
    for (;;) {
        dlock_ratelimit_result res;
        char line[96];
        int len;

        if (dlock_ratelimit_wait(rl, 1, 2000, &res) != DLOCK_OK) {
            errors++;
            continue;
        }
        if (ex_wall_us() >= r->end_wall_us)
            break; /* the slot came after the run: not sent */
        len = snprintf(line, sizeof(line), "%" PRId64 "\n",
                       res.server_time_us + res.wait_us);
        if (write(r->out_fd, line, (size_t)len) != len)
            errors++;
        sent++;
    }
    printf("  sender %d sent %d (%d errors)\n", index, sent, errors);
    dlock_ratelimit_free(rl);
    dlock_client_free(c);
    return errors > 0;
}

static int by_time(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* The most slots in any window [t, t + window_us) that starts at a slot. */
static size_t busiest_window(const int64_t *slots, size_t n, int64_t window_us)
{
    size_t most = 0;

    for (size_t i = 0, j = 0; i < n; i++) {
        while (j < n && slots[j] < slots[i] + window_us)
            j++;
        if (j - i > most)
            most = j - i;
    }
    return most;
}

int main(int argc, char **argv)
{
    run r;
    int procs = (int)ex_opt_long(argc, argv, "--procs", 4);
    int seconds = (int)ex_opt_long(argc, argv, "--seconds", 5);
    char **lines;
    int64_t *slots;
    size_t n, most;
    double target;
    pid_t *pids;
    int fds[2], failures;

    memset(&r, 0, sizeof(r));
    r.url = ex_redis_url(argc, argv);
    r.rate = ex_opt_long(argc, argv, "--rate", 50);
    r.burst = ex_opt_long(argc, argv, "--burst", 5);
    snprintf(r.name, sizeof(r.name), "example:sms:%ld", (long)getpid());
    pids = calloc((size_t)procs, sizeof(*pids));
    if (pids == NULL || pipe(fds) != 0)
        return 2;
    r.out_fd = fds[1];
    r.start_wall_us = ex_wall_us() + 500000;
    r.end_wall_us = r.start_wall_us + (int64_t)seconds * 1000000;
    printf("%d senders share %" PRId64 "/s (burst %" PRId64 ") for %d s\n",
           procs, r.rate, r.burst, seconds);
    ex_spawn(procs, sender, &r, pids);
    close(fds[1]);
    if (ex_read_lines(NULL, fds[0], &lines, &n) != 0)
        return 2;
    failures = ex_wait_all(procs, pids);
    if (failures > 0)
        ex_fail("%d senders had errors", failures);
    slots = calloc(n + 1, sizeof(*slots));
    if (slots == NULL)
        return 2;
    for (size_t i = 0; i < n; i++)
        slots[i] = strtoll(lines[i], NULL, 10);
    qsort(slots, n, sizeof(*slots), by_time);
    most = busiest_window(slots, n, 1000000);
    target = (double)r.rate * seconds;
    printf(
        "sent %zu (target %.0f, %+.1f%%); busiest second: %zu (limit %" PRId64
        ")\n",
        n, target, 100.0 * ((double)n - target) / target, most,
        r.rate + r.burst);
    if ((double)n < target * 0.95 || (double)n > target * 1.05)
        failures += ex_fail("sent within 5%% of %.0f, got %zu", target, n);
    if ((int64_t)most > r.rate + r.burst)
        failures += ex_fail("no second over %" PRId64 ", saw %zu",
                            r.rate + r.burst, most);
    free(slots);
    free(lines);
    free(pids);
    puts(failures == 0 ? "PASS: the shared rate held across all senders"
                       : "FAIL");
    return failures == 0 ? 0 : 1;
}
