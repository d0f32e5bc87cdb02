/*
 * bench_reviewd.c: reviewd's throughput and latency against the limit of
 * its own SQL, and its memory with 1,000 idle keep-alive connections.
 *
 * At concurrency C (default 16) on loopback, each for D seconds (default
 * 10), against a running reviewd:
 *
 *   get     GET /v1/documents/{id} on keep-alive connections, random ids
 *           among seeded documents, one request in flight on each, all
 *           driven by one thread with epoll from requests formatted
 *           before the phase (as pgbench drives its C clients from one
 *           thread): 16 blocking threads cost more CPU per request than
 *           pgbench's client, on the 2 cores reviewd shares, so the
 *           figure measured the load generator as much as reviewd;
 *   cycle   create -> submit -> approve, each cycle a new document;
 *
 * and, right after each, the limit: pgbench with C clients running the
 * SQL the handlers run, taken from reviewd's own statement table
 * (rv_query_stmts, so the text cannot drift), prepared (-M prepared, as
 * reviewd prepares them), in the same transactions:
 *
 *   get     doc_get
 *   cycle   BEGIN doc_insert content_put COMMIT;
 *           doc_get (who may submit, before the lock);
 *           BEGIN review_submit COMMIT;
 *           review_doc_get (four eyes, before the lock);
 *           BEGIN review_decide COMMIT
 *
 * The Redis locks, JWT checks, HTTP and JSON are what reviewd adds on top
 * of that limit.  pgbench also logs every transaction (-l), so the limit
 * of a latency is pgbench's own p50 or p99 of the same work, from the
 * same log form as ours (whole samples, nearest rank).  A pgbench run that
 * reports a failed or aborted transaction gives no limit, because its
 * rate would be that of a different workload.
 *
 * Figures (JSON lines on stdout, a table on stderr): get.rps and
 * cycle.rps against their pgbench limits (targets: ratio >= 0.5 and
 * >= 0.4); get.p50/p99 and cycle.p50/p99 against pgbench's, with the
 * issue's 20 ms target on every p99 (for the cycle, per request:
 * cycle.request.p99; a whole cycle is three requests); and
 * rss.idle_keepalive (reviewd's VmRSS while 1,000 idle keep-alive
 * connections are open, after the load phases closed theirs; target under
 * 64 MB).  The run lines carry the load average and CPU pressure at the
 * start and the end.  In the rate figures, server_cpu_us_per_op is
 * reviewd's CPU, client_cpu_us_per_op this load generator's and
 * machine_cpu_us_per_op all CPUs' (PostgreSQL, Redis and other work
 * included); the limit lines give pgbench's and the machine's CPU per
 * transaction, so a run shows where the time went.  A benchmark never
 * fails on a slow machine: the exit status is 0 when every figure was
 * measured.
 *
 *   bench_reviewd --port P --pid PID --secret S --pg CONNINFO
 *                 [--duration S] [--concurrency N] [--idle N]
 *                 [--phases get|cycle|all] [--workdir DIR] [--pgbench BIN]
 *
 * --phases runs one load phase (and its limit) alone, for A/B runs of
 * one figure in half the time; the figures of a phase are the same
 * either way.  The default runs both.
 *
 * bench/reviewd/run_bench_reviewd.sh starts what this needs.
 */
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_clock.h"
#include "bench_cost.h"
#include "bench_cpu.h"
#include "bench_figure.h"
#include "bench_http.h"
#include "bench_json.h"
#include "bench_run.h"
#include "bench_samples.h"
#include "bench_tool.h"
#include "api/rv_auth.h"
#include "db/rv_query.h"

#define SEED_DOCS 200
#define SAMPLES_PER_THREAD 400000

typedef struct options {
    int port;
    int pid;
    const char *secret;
    const char *pg;
    int duration_s;
    int concurrency;
    int idle;
    const char *workdir;
    const char *pgbench;
    const char *phases; /* "get", "cycle" or "all" */
} options;

static options opt = {0,  0,    NULL,        NULL,      10,
                      16, 1000, "var/bench", "pgbench", "all"};
static char *author_token, *reviewer_token;
static long long seed_lo, seed_hi;

/* The value of the first "key":"value" after after (or the start). */
static int json_id(const char *body, const char *key, char *out)
{
    const char *p = strstr(body, key);

    if (p == NULL)
        return -1;
    p += strlen(key);
    snprintf(out, 24, "%.*s", (int)strspn(p, "0123456789"), p);
    return out[0] != '\0' ? 0 : -1;
}

/* ---- the HTTP phases ----------------------------------------------------- */

typedef struct phase {
    int cycle; /* 0: get, 1: create->submit->approve */
    int64_t deadline_ns;
    atomic_llong ops;
    atomic_llong errors;
} phase;

typedef struct worker {
    phase *ph;
    unsigned seed;
    bench_samples req; /* per request */
    bench_samples cyc; /* per cycle */
} worker;

static int64_t timed(bench_http *h, bench_samples *s, const char *method,
                     const char *path, const char *token, const char *body,
                     int want, const char **resp)
{
    const int64_t t0 = bench_clock_ns();
    const int status = bench_http_request(h, method, path, token, body, resp);

    bench_samples_add(s, bench_clock_ns() - t0);
    return status == want ? 0 : -1;
}

static int one_cycle(worker *w, bench_http *h)
{
    char path[96], doc[24], rev[24];
    const char *resp = NULL;
    const int64_t t0 = bench_clock_ns();

    if (timed(h, &w->req, "POST", "/v1/documents", author_token,
              "{\"title\":\"bench\",\"content\":\"A document to review.\"}",
              201, &resp)
            != 0
        || json_id(resp, "\"id\":\"", doc) != 0)
        return -1;
    snprintf(path, sizeof(path), "/v1/documents/%s/submit", doc);
    if (timed(h, &w->req, "POST", path, author_token, NULL, 201, &resp) != 0
        || json_id(resp, "\"review\":{\"id\":\"", rev) != 0)
        return -1;
    snprintf(path, sizeof(path), "/v1/reviews/%s/approve", rev);
    if (timed(h, &w->req, "POST", path, reviewer_token, "{\"comment\":\"ok\"}",
              200, &resp)
        != 0)
        return -1;
    bench_samples_add(&w->cyc, bench_clock_ns() - t0);
    return 0;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    bench_http *h = calloc(1, sizeof(*h));

    if (h == NULL) {
        atomic_fetch_add(&w->ph->errors, 1);
        return NULL;
    }
    bench_http_init(h, opt.port, 0);
    while (bench_clock_ns() < w->ph->deadline_ns)
        atomic_fetch_add(one_cycle(w, h) == 0 ? &w->ph->ops : &w->ph->errors,
                         1);
    bench_http_close(h);
    free(h);
    return NULL;
}

/* ---- the GET phase: one thread, C connections ---------------------------- */

/* How long the GET loop waits, past the deadline, for the requests still
 * in flight (each is counted, as a blocking client finishes its last). */
#define GET_DRAIN_NS (5 * 1000000000LL)

typedef struct get_conn {
    bench_http h;
    int64_t sent_ns; /* when its request went out; 0: none in flight */
} get_conn;

typedef struct get_loop {
    worker *w;
    int ep;
    char **reqs; /* reqs[id - seed_lo]: the whole request, formatted */
    int *req_len;
} get_loop;

/* Connects c and watches it; 0, or -1 (c stays closed). */
static int get_connect(get_loop *g, get_conn *c)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};

    if (bench_http_connect(&c->h) != 0)
        return -1;
    if (epoll_ctl(g->ep, EPOLL_CTL_ADD, c->h.fd, &ev) != 0) {
        bench_http_close(&c->h);
        return -1;
    }
    return 0;
}

/* Sends c a GET of a random seeded document, reconnecting once if the
 * connection is gone or fails; 0, or -1 (c closed, the error counted). */
static int get_send(get_loop *g, get_conn *c)
{
    const long long n = seed_hi - seed_lo + 1;
    const int i = (int)(rand_r(&g->w->seed) % n);

    for (int attempt = 0; attempt < 2; attempt++) {
        if (c->h.fd < 0 && get_connect(g, c) != 0)
            break;
        c->sent_ns = bench_clock_ns();
        if (bench_http_send(&c->h, g->reqs[i], (size_t)g->req_len[i]) == 0)
            return 0;
        bench_http_close(&c->h); /* close takes it out of the epoll set */
    }
    c->sent_ns = 0;
    atomic_fetch_add(&g->w->ph->errors, 1);
    return -1;
}

/* Reads what arrived on c; when its response is complete, counts it and,
 * before the deadline, sends the next request.  Returns the change in
 * the number of requests in flight (0 or -1). */
static int get_ready(get_loop *g, get_conn *c, int64_t deadline)
{
    const char *body;
    const int status = bench_http_read_some(&c->h, &body);
    int64_t now;

    if (status == 0)
        return 0;
    now = bench_clock_ns();
    bench_samples_add(&g->w->req, now - c->sent_ns);
    c->sent_ns = 0;
    atomic_fetch_add(status == 200 ? &g->w->ph->ops : &g->w->ph->errors, 1);
    if (status < 0)
        bench_http_close(&c->h);
    if (now >= deadline)
        return -1;
    return get_send(g, c) == 0 ? 0 : -1;
}

/* Formats the GET of every seeded document once; 0, or -1 (no memory). */
static int get_format(get_loop *g)
{
    const long long n = seed_hi - seed_lo + 1;

    g->reqs = calloc((size_t)n, sizeof(*g->reqs));
    g->req_len = calloc((size_t)n, sizeof(*g->req_len));
    if (g->reqs == NULL || g->req_len == NULL)
        return -1;
    for (long long i = 0; i < n; i++) {
        char path[64], req[4096];

        snprintf(path, sizeof(path), "/v1/documents/%lld", seed_lo + i);
        g->req_len[i] = bench_http_format(req, sizeof(req), "GET", path,
                                          author_token, NULL);
        g->reqs[i] = g->req_len[i] > 0 ? strdup(req) : NULL;
        if (g->reqs[i] == NULL)
            return -1;
    }
    return 0;
}

static void get_format_free(get_loop *g)
{
    for (long long i = 0; g->reqs != NULL && i < seed_hi - seed_lo + 1; i++)
        free(g->reqs[i]);
    free(g->reqs);
    free(g->req_len);
}

/* Runs opt.concurrency connections, one request in flight on each, to
 * the deadline, then waits (at most GET_DRAIN_NS) for those in flight. */
static void get_run(get_loop *g, get_conn *conns)
{
    const int n = opt.concurrency;
    const int64_t deadline = g->w->ph->deadline_ns;
    struct epoll_event ev[64];
    int inflight = 0;

    for (int i = 0; i < n; i++) {
        bench_http_init(&conns[i].h, opt.port, 0);
        inflight += get_send(g, &conns[i]) == 0;
    }
    while (inflight > 0 && bench_clock_ns() < deadline + GET_DRAIN_NS) {
        const int got = epoll_wait(g->ep, ev, 64, 100);

        for (int i = 0; i < got; i++)
            inflight += get_ready(g, ev[i].data.ptr, deadline);
    }
    for (int i = 0; i < n; i++)
        bench_http_close(&conns[i].h);
}

static void *get_main(void *arg)
{
    get_loop g = {.w = arg, .ep = epoll_create1(EPOLL_CLOEXEC)};
    get_conn *conns = calloc((size_t)opt.concurrency, sizeof(*conns));

    if (g.ep < 0 || conns == NULL || get_format(&g) != 0) {
        fprintf(stderr, "bench_reviewd: cannot set up the GET loop\n");
        atomic_fetch_add(&g.w->ph->errors, 1);
    } else {
        get_run(&g, conns);
    }
    get_format_free(&g);
    free(conns);
    if (g.ep >= 0)
        close(g.ep);
    return NULL;
}

typedef struct result {
    double rate; /* operations (requests or cycles) per second */
    long long ops;
    long long errors;
    bench_samples req;
    bench_samples cyc;
    double cpu_us_per_op;         /* reviewd's CPU per operation */
    double self_cpu_us_per_op;    /* this load generator's */
    double machine_cpu_us_per_op; /* all CPUs of the machine */
} result;

/* CPU per operation between two readings of one CPU clock; NAN when
 * either reading failed (-1). */
static double spent_per_op(int64_t before, int64_t after, long long ops)
{
    return before < 0 || after < 0 ? NAN : bench_per_op(after - before, ops);
}

/* Joins the started workers and merges their samples into r. */
static void join_workers(worker *w, pthread_t *t, int started, result *r)
{
    for (int i = 0; i < started; i++) {
        pthread_join(t[i], NULL);
        bench_samples_merge(&r->req, &w[i].req);
        bench_samples_merge(&r->cyc, &w[i].cyc);
    }
    for (int i = 0; i < opt.concurrency; i++) {
        bench_samples_free(&w[i].req);
        bench_samples_free(&w[i].cyc);
    }
}

/* Starts the threads of a phase (the cycle: one per client; GET: one
 * for all, get_main); returns how many started (all, unless out of memory
 * or threads). */
static int start_workers(phase *ph, worker *w, pthread_t *t, int n)
{
    const size_t samples = ph->cycle ? SAMPLES_PER_THREAD
                                     : (size_t)opt.concurrency
                                           * SAMPLES_PER_THREAD / 4;

    for (int i = 0; i < n; i++) {
        w[i].ph = ph;
        w[i].seed = (unsigned)(i * 7919 + 1);
        if (bench_samples_init(&w[i].req, samples) != 0
            || bench_samples_init(&w[i].cyc, SAMPLES_PER_THREAD / 3) != 0
            || pthread_create(&t[i], NULL, ph->cycle ? worker_main : get_main,
                              &w[i])
                   != 0)
            return i;
    }
    return n;
}

/* Runs one load phase for the configured time; 0, or -1 when it could
 * not be run as configured (the message is on stderr). */
static int run_phase(int cycle, result *r)
{
    worker *w = calloc((size_t)opt.concurrency, sizeof(*w));
    pthread_t *t = calloc((size_t)opt.concurrency, sizeof(*t));
    phase ph;
    int started = 0;
    const int threads = cycle ? opt.concurrency : 1;

    memset(r, 0, sizeof(*r));
    memset(&ph, 0, sizeof(ph));
    if (w == NULL || t == NULL
        || bench_samples_init(&r->req, 4 * SAMPLES_PER_THREAD) != 0
        || bench_samples_init(&r->cyc, SAMPLES_PER_THREAD) != 0) {
        free(w);
        free(t);
        fprintf(stderr, "bench_reviewd: out of memory\n");
        return -1;
    }
    ph.cycle = cycle;
    const int64_t cpu0 = bench_cpu_pid_us(opt.pid);
    const int64_t self0 = bench_cpu_self_us();
    const int64_t machine0 = bench_cpu_machine_us();
    const int64_t start = bench_clock_ns();
    ph.deadline_ns = start + (int64_t)opt.duration_s * 1000000000LL;
    /* Workers that did start run to the deadline even when others did
     * not; the phase is then reported as not measured. */
    started = start_workers(&ph, w, t, threads);
    join_workers(w, t, started, r);
    const int64_t cpu1 = bench_cpu_pid_us(opt.pid);
    const int64_t machine1 = bench_cpu_machine_us();
    r->ops = atomic_load(&ph.ops);
    r->self_cpu_us_per_op = spent_per_op(self0, bench_cpu_self_us(), r->ops);
    r->machine_cpu_us_per_op = spent_per_op(machine0, machine1, r->ops);
    r->errors = atomic_load(&ph.errors);
    r->rate = (double)r->ops / ((double)(bench_clock_ns() - start) / 1e9);
    r->cpu_us_per_op = spent_per_op(cpu0, cpu1, r->ops);
    bench_samples_sort(&r->req);
    bench_samples_sort(&r->cyc);
    free(w);
    free(t);
    if (started < threads) {
        fprintf(stderr,
                "bench_reviewd: could only start %d of %d "
                "workers\n",
                started, threads);
        return -1;
    }
    return 0;
}

/* ---- pgbench, the limit -------------------------------------------------- */

/* Writes statement s with $n replaced by the pgbench variables vars[n-1]
 * (":name" or a quoted literal), then " \gset prefix" when asked. */
static void write_stmt(FILE *f, int s, const char *const *vars,
                       const char *gset)
{
    const char *p = rv_query_stmts[s].sql;

    while (*p != '\0') {
        if (*p == '$' && p[1] >= '1' && p[1] <= '9') {
            fputs(vars[p[1] - '1'], f);
            p += 2;
        } else {
            fputc(*p++, f);
        }
    }
    if (gset != NULL)
        fprintf(f, " \\gset %s\n", gset);
    else
        fputs(";\n", f);
}

static int write_scripts(char *get_path, char *cycle_path, size_t len)
{
    const char *get_vars[] = {":id"};
    const char *ins[] = {":title", ":author", ":content"};
    const char *put[] = {":d_id", ":content"};
    const char *doc[] = {":d_id"};
    const char *rins[] = {":d_id", ":author"};
    const char *rev[] = {":r_review_id"};
    const char *dec[] = {":r_review_id", ":st_approved", ":reviewer",
                         ":comment", ":fence"};
    FILE *g, *c;

    snprintf(get_path, len, "%s/pgbench_get.sql", opt.workdir);
    snprintf(cycle_path, len, "%s/pgbench_cycle.sql", opt.workdir);
    g = fopen(get_path, "w");
    c = fopen(cycle_path, "w");
    if (g == NULL || c == NULL) {
        if (g != NULL)
            fclose(g);
        if (c != NULL)
            fclose(c);
        return -1;
    }
    fputs("\\set id random(:lo, :hi)\n", g);
    write_stmt(g, RV_QUERY_DOC_GET, get_vars, NULL);
    fputs("BEGIN;\n", c);
    write_stmt(c, RV_QUERY_DOC_INSERT, ins, "d_");
    write_stmt(c, RV_QUERY_CONTENT_PUT, put, NULL);
    fputs("COMMIT;\n", c);
    write_stmt(c, RV_QUERY_DOC_GET, doc, NULL);
    fputs("BEGIN;\n", c);
    write_stmt(c, RV_QUERY_REVIEW_SUBMIT, rins, "r_");
    fputs("COMMIT;\n", c);
    write_stmt(c, RV_QUERY_REVIEW_DOC_GET, rev, NULL);
    fputs("BEGIN;\n", c);
    write_stmt(c, RV_QUERY_REVIEW_DECIDE, dec, NULL);
    fputs("COMMIT;\n", c);
    fclose(g);
    fclose(c);
    return 0;
}

/* What one pgbench run measured: the limit of one phase. */
typedef struct limit {
    double tps; /* NAN when the run gave no limit */
    long long processed;
    long long failed;             /* failed transactions (pgbench 15 counts) */
    double tool_cpu_us_per_tx;    /* pgbench's own CPU per transaction */
    double machine_cpu_us_per_tx; /* all CPUs of the machine */
    bench_samples lat;            /* per transaction (script run), from -l */
} limit;

/* Reads pgbench's per-transaction logs (prefix.*: "client_id
 * transaction_no time_us script_no epoch epoch_us") into out->lat and
 * removes them. */
static int read_pgbench_logs(const char *prefix, limit *out)
{
    char pattern[700];
    glob_t g;

    snprintf(pattern, sizeof(pattern), "%s.*", prefix);
    if (glob(pattern, 0, NULL, &g) != 0)
        return -1;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        FILE *f = fopen(g.gl_pathv[i], "r");
        long long client, xact, us;

        while (f != NULL
               && fscanf(f, "%lld %lld %lld %*[^\n]", &client, &xact, &us)
                      == 3)
            bench_samples_add(&out->lat, us * 1000);
        if (f != NULL)
            fclose(f);
        unlink(g.gl_pathv[i]);
    }
    globfree(&g);
    bench_samples_sort(&out->lat);
    return out->lat.n > 0 ? 0 : -1;
}

/* Reads tps and the transaction counts from pgbench's report; 0 when the
 * run was whole (no failed or aborted transaction, exit status 0). */
static int parse_pgbench_report(const char *text, int status, limit *out)
{
    const char *p = strstr(text, "\ntps = ");
    const char *n = strstr(text, "actually processed: ");
    const char *f = strstr(text, "number of failed transactions: ");

    out->tps = p != NULL ? atof(p + 7) : NAN;
    out->processed = n != NULL ? atoll(n + 20) : 0;
    out->failed = f != NULL ? atoll(f + 31) : 0;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && p != NULL
                   && out->processed > 0 && out->failed == 0
                   && strstr(text, "aborted") == NULL
               ? 0
               : -1;
}

/* Runs pgbench on script with the handlers' values bound as variables;
 * fills out (out->tps NAN when it gave no limit; why is on stderr). */
static void pgbench_run(const char *script, const char *name, limit *out)
{
    char c[16], t[16], lo[40], hi[40], prefix[620], logopt[640], err[512];
    char *argv[] = {
        (char *)opt.pgbench,
        "-n",
        "-M",
        "prepared",
        "-c",
        c,
        "-j",
        "2",
        "-T",
        t,
        "-f",
        (char *)script,
        "-D",
        lo,
        "-D",
        hi,
        "-D",
        "title=bench",
        "-D",
        "author=alice",
        "-D",
        "content=A document to review.",
        "-D",
        "reviewer=bob",
        "-D",
        "comment=ok",
        "-D",
        "st_approved=approved",
        "-D",
        "fence=1796000000000000",
        "-l",
        logopt,
        (char *)opt.pg,
        NULL,
    };
    char *text = NULL;
    int status = 0;
    int64_t cpu_us;

    memset(out, 0, sizeof(*out));
    out->tps = NAN;
    snprintf(c, sizeof(c), "%d", opt.concurrency);
    snprintf(t, sizeof(t), "%d", opt.duration_s);
    snprintf(lo, sizeof(lo), "lo=%lld", seed_lo);
    snprintf(hi, sizeof(hi), "hi=%lld", seed_hi);
    snprintf(prefix, sizeof(prefix), "%s/pgbench_%s", opt.workdir, name);
    snprintf(logopt, sizeof(logopt), "--log-prefix=%s", prefix);
    if (bench_samples_init(&out->lat, 4 * SAMPLES_PER_THREAD) != 0) {
        fprintf(stderr, "bench_reviewd: out of memory\n");
        return;
    }
    const int64_t machine0 = bench_cpu_machine_us();
    if (bench_tool_run(argv, (opt.duration_s + 60) * 1000, &text, &status,
                       &cpu_us, err, sizeof(err))
        != 0) {
        fprintf(stderr, "bench_reviewd: pgbench %s: %s\n", name, err);
        return;
    }
    const int64_t machine1 = bench_cpu_machine_us();
    const int whole = parse_pgbench_report(text, status, out);
    out->tool_cpu_us_per_tx = bench_per_op(cpu_us, out->processed);
    out->machine_cpu_us_per_tx = spent_per_op(machine0, machine1,
                                              out->processed);
    if (read_pgbench_logs(prefix, out) != 0 || whole != 0) {
        const size_t len = strlen(text);
        fprintf(stderr,
                "bench_reviewd: pgbench %s gave no limit (status "
                "%d, %lld failed); it printed: %s\n",
                name, status, out->failed,
                len > 600 ? text + len - 600 : text);
        out->tps = NAN;
    }
    free(text);
}

static void print_limit(const char *name, const limit *l)
{
    printf("{\"kind\":\"limit\",\"phase\":\"%s\",\"tool\":\"pgbench\","
           "\"clients\":%d,\"tps\":",
           name, opt.concurrency);
    bench_json_number(stdout, l->tps);
    printf(",\"processed\":%lld,\"failed\":%lld,\"p50_us\":", l->processed,
           l->failed);
    bench_json_number(stdout, bench_samples_quantile_us(&l->lat, 0.50));
    printf(",\"p99_us\":");
    bench_json_number(stdout, bench_samples_quantile_us(&l->lat, 0.99));
    printf(",\"pgbench_cpu_us_per_tx\":");
    bench_json_number(stdout, l->tool_cpu_us_per_tx);
    printf(",\"machine_cpu_us_per_tx\":");
    bench_json_number(stdout, l->machine_cpu_us_per_tx);
    printf("}\n");
    fflush(stdout);
}

/* ---- memory with idle keep-alive connections ----------------------------- */

static long rss_kb(int pid)
{
    char path[64], line[256];
    long kb = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = atol(line + 6);
    fclose(f);
    return kb;
}

/* Opens n connections that each answer one GET /healthz and then stay
 * open, idle; returns reviewd's RSS in MB with them open. */
static double rss_with_idle(int n, int *opened)
{
    bench_http *h = calloc((size_t)n, sizeof(*h));
    const char *body;
    double mb;
    int i;

    *opened = 0;
    if (h == NULL)
        return NAN;
    for (i = 0; i < n; i++) {
        bench_http_init(&h[i], opt.port, 0);
        if (bench_http_request(&h[i], "GET", "/healthz", author_token, NULL,
                               &body)
            == 200)
            (*opened)++;
    }
    mb = (double)rss_kb(opt.pid) / 1024.0;
    for (i = 0; i < n; i++)
        bench_http_close(&h[i]);
    free(h);
    return mb;
}

/* ---- figures ------------------------------------------------------------- */

static bench_table table;

static void rate_figure(const char *name, const result *r, const limit *l,
                        double goal, const char *from)
{
    bench_figure f;

    bench_figure_init(&f, name, "ops/s", BENCH_HIGHER_IS_BETTER);
    f.value = r->rate;
    f.limit = l->tps;
    f.limit_from = from;
    f.goal = goal;
    f.n = r->ops;
    f.errors = r->errors;
    f.server_cpu_us_per_op = r->cpu_us_per_op;
    f.client_cpu_us_per_op = r->self_cpu_us_per_op;
    f.extra_key[0] = "machine_cpu_us_per_op";
    f.extra_value[0] = r->machine_cpu_us_per_op;
    bench_table_add(&table, stdout, &f);
}

/* The q-quantile of s against the same quantile of l's transactions
 * (l NULL: no limit), with the issue's absolute target when not NAN. */
static void latency_figure(const char *name, const bench_samples *s, double q,
                           const limit *l, double abs_goal_us)
{
    bench_figure f;

    bench_figure_init(&f, name, "us", BENCH_LOWER_IS_BETTER);
    f.value = bench_samples_quantile_us(s, q);
    if (l != NULL && !isnan(l->tps)) {
        f.limit = bench_samples_quantile_us(&l->lat, q);
        f.limit_from = "the same quantile of pgbench's transactions (-l)";
    }
    f.abs_goal = abs_goal_us;
    f.n = (long long)s->n;
    bench_table_add(&table, stdout, &f);
}

/* reviewd's RSS with opt.idle idle keep-alive connections open, beside
 * its RSS before they were opened. */
static void rss_figure(void)
{
    bench_figure f;
    int opened;
    const double before = (double)rss_kb(opt.pid) / 1024.0;

    bench_figure_init(&f, "rss.idle_keepalive", "MB", BENCH_LOWER_IS_BETTER);
    f.value = rss_with_idle(opt.idle, &opened);
    f.abs_goal = 64;
    f.n = opened;
    f.errors = opt.idle - opened;
    f.extra_key[0] = "rss_before_mb";
    f.extra_value[0] = before;
    bench_table_add(&table, stdout, &f);
    if (opened < opt.idle) {
        fprintf(stderr,
                "bench_reviewd: only %d of %d idle connections were "
                "served\n",
                opened, opt.idle);
    }
}

/* Prints a run line: the machine's load, for reading the figures. */
static void print_run(const char *when)
{
    bench_print_run_start("reviewd", when);
    printf(",\"concurrency\":%d,\"duration_s\":%d,\"idle\":%d,"
           "\"time\":%lld}\n",
           opt.concurrency, opt.duration_s, opt.idle, (long long)time(NULL));
    fflush(stdout);
}

static int seed_documents(void)
{
    bench_http h;
    const char *body;
    char id[24];
    int i;

    bench_http_init(&h, opt.port, 0);
    for (i = 0; i < SEED_DOCS; i++) {
        if (bench_http_request(
                &h, "POST", "/v1/documents", author_token,
                "{\"title\":\"seed\",\"content\":\"Seeded text.\"}", &body)
                != 201
            || json_id(body, "\"id\":\"", id) != 0) {
            bench_http_close(&h);
            return -1;
        }
        if (i == 0)
            seed_lo = atoll(id);
        seed_hi = atoll(id);
    }
    bench_http_close(&h);
    return seed_hi - seed_lo + 1 == SEED_DOCS ? 0 : -1;
}

/* The current option's value as a number in [min, max]; exits on any
 * other. */
static int int_arg(const char *name, long min, long max)
{
    return (int)bench_parse_long("bench_reviewd", name, optarg, min, max);
}

static int parse_args(int argc, char **argv)
{
    static const struct option longs[] = {{"port", 1, 0, 'p'},
                                          {"pid", 1, 0, 'P'},
                                          {"secret", 1, 0, 's'},
                                          {"pg", 1, 0, 'g'},
                                          {"duration", 1, 0, 'd'},
                                          {"concurrency", 1, 0, 'c'},
                                          {"idle", 1, 0, 'i'},
                                          {"workdir", 1, 0, 'w'},
                                          {"pgbench", 1, 0, 'b'},
                                          {"phases", 1, 0, 'f'},
                                          {0, 0, 0, 0}};
    int c = getopt_long(argc, argv, "", longs, NULL);

    for (; c != -1; c = getopt_long(argc, argv, "", longs, NULL)) {
        switch (c) {
        case 'p': opt.port = int_arg("--port", 1, 65535); break;
        case 'P': opt.pid = int_arg("--pid", 1, INT_MAX); break;
        case 's': opt.secret = optarg; break;
        case 'g': opt.pg = optarg; break;
        case 'd': opt.duration_s = int_arg("--duration", 1, 3600); break;
        case 'c': opt.concurrency = int_arg("--concurrency", 1, 1024); break;
        case 'i': opt.idle = int_arg("--idle", 0, 100000); break;
        case 'w': opt.workdir = optarg; break;
        case 'b': opt.pgbench = optarg; break;
        case 'f': opt.phases = optarg; break;
        default: return -1;
        }
    }
    if (strcmp(opt.phases, "get") != 0 && strcmp(opt.phases, "cycle") != 0
        && strcmp(opt.phases, "all") != 0)
        return -1;
    return opt.port > 0 && opt.pid > 0 && opt.secret != NULL && opt.pg != NULL
                   && opt.concurrency > 0 && opt.duration_s > 0
               ? 0
               : -1;
}

static void raise_fd_limit(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The latency figures of a phase: per GET against pgbench's doc_get, or
 * per cycle against pgbench's three transactions, and per request of a
 * cycle (no pgbench counterpart: its log is per script run). */
static void latency_figures(int cycle, const result *r, const limit *l)
{
    if (!cycle) {
        latency_figure("get.p50", &r->req, 0.50, l, NAN);
        latency_figure("get.p99", &r->req, 0.99, l, 20000);
        return;
    }
    latency_figure("cycle.p50", &r->cyc, 0.50, l, NAN);
    latency_figure("cycle.p99", &r->cyc, 0.99, l, NAN);
    latency_figure("cycle.request.p50", &r->req, 0.50, NULL, NAN);
    latency_figure("cycle.request.p99", &r->req, 0.99, NULL, 20000);
}

/* One load phase (cycle 0: GET, 1: create -> submit -> approve), then its
 * pgbench limit right after; 0 when both were measured without errors. */
static int bench_phase(int cycle, const char *sql)
{
    const char *name = cycle ? "cycle" : "get";
    result r;
    limit l;

    bench_progress("bench_reviewd", "%s for %d s ...", name, opt.duration_s);
    const int rc = run_phase(cycle, &r);
    pgbench_run(sql, name, &l);
    print_limit(name, &l);
    rate_figure(cycle ? "cycle.rps" : "get.rps", &r, &l, cycle ? 0.4 : 0.5,
                cycle ? "pgbench -M prepared: the 3 transactions of a cycle"
                      : "pgbench -M prepared: doc_get, same clients");
    latency_figures(cycle, &r, &l);
    bench_samples_free(&r.req);
    bench_samples_free(&r.cyc);
    bench_samples_free(&l.lat);
    return rc == 0 && r.errors == 0 && !isnan(l.tps) ? 0 : -1;
}

int main(int argc, char **argv)
{
    char get_sql[600], cycle_sql[600];
    const int64_t now = (int64_t)time(NULL);

    if (parse_args(argc, argv) != 0) {
        fprintf(stderr,
                "usage: bench_reviewd --port P --pid PID --secret S "
                "--pg CONNINFO [--duration S] [--concurrency N] [--idle N] "
                "[--phases get|cycle|all] [--workdir DIR] [--pgbench BIN]\n");
        return 2;
    }
    raise_fd_limit();
    author_token = rv_auth_issue((const unsigned char *)opt.secret,
                                 strlen(opt.secret), "alice", "author", now,
                                 3600);
    reviewer_token = rv_auth_issue((const unsigned char *)opt.secret,
                                   strlen(opt.secret), "bob", "reviewer", now,
                                   3600);
    if (author_token == NULL || reviewer_token == NULL || seed_documents() != 0
        || write_scripts(get_sql, cycle_sql, sizeof(get_sql)) != 0) {
        fprintf(stderr,
                "bench_reviewd: cannot seed documents on port %d "
                "or write the pgbench scripts in %s\n",
                opt.port, opt.workdir);
        return 1;
    }
    print_run("start");
    const int get_rc = strcmp(opt.phases, "cycle") != 0
                           ? bench_phase(0, get_sql)
                           : 0;
    const int cycle_rc = strcmp(opt.phases, "get") != 0
                             ? bench_phase(1, cycle_sql)
                             : 0;
    rss_figure();
    print_run("end");
    bench_table_print(&table, stderr);
    printf("{\"kind\":\"summary\",\"figures\":%d,\"complete\":%s}\n", table.n,
           get_rc == 0 && cycle_rc == 0 ? "true" : "false");
    free(author_token);
    free(reviewer_token);
    return get_rc == 0 && cycle_rc == 0 ? 0 : 1;
}
