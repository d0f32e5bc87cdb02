/*
 * soak_report.c: the summary and the verdict of a soak run (scripts/soak).
 *
 *   soak_report --dir DIR [--grace-ms MS] [--rss-limit-pct P]
 *               [--no-rss-verdict] [--reviewd-exit N] [--indexer-exit N]
 *               [--peer NAME=PORT ...] [--http-port P]
 *               [--pool NAME=[MIN..]MAX ...]
 *
 * It reads what soak_load wrote into DIR (counts.tsv, events.tsv,
 * samples.tsv) and the fault windows the script's nemesis wrote
 * (faults.tsv: "start_ms end_ms kind", wall clock), prints the tables of
 * the run and judges it:
 *
 *   - RSS growth of each process from the "start" reading (the quiet
 *     point after the warm-up) to the "end" reading (the quiet point after
 *     the load, with /readyz ok) at most P percent (default 10);
 *     --no-rss-verdict reports the figure without judging it, for runs too
 *     short for it to mean anything;
 *   - the open descriptors of each process equal at those two readings,
 *     kind by kind (fds-start-PROC.txt and fds-end-PROC.txt, soak_load's
 *     listings): TCP connections are named by their peer (--peer
 *     redis=PORT: connections to that port; --http-port: reviewd's own
 *     clients), files by path, the rest by what readlink says.  Kinds
 *     that are pools opening connections on demand may differ, when both
 *     readings are within their bounds: --pool redis=N (reviewd's lock
 *     client, thread count + 2) holds 1..N, depending on the peak
 *     concurrency since the last reconnect; --pool postgres=0..N
 *     (reviewd's connection per thread, made on a thread's first request
 *     and again on the first one after a restart) holds 0..N, since a
 *     thread that has not run since a PostgreSQL restart holds a dead
 *     connection or none;
 *   - no 5xx and no connection error outside a fault window, a window
 *     being a fault's [start - 1 s, end + grace] (default grace 15 s: the
 *     time reviewd's health checks, breaker and reconnects take to see
 *     the dependency back), and after the warm-up (answers before the
 *     start reading are counted apart: every worker's first request
 *     connects and prepares, which on a loaded machine under the
 *     sanitizers can outlast a request's budget and rightly answer 503);
 *   - no unexpected status (not the one asked for, not a fair 409) outside
 *     a fault window;
 *   - no review decided twice by a race, every idle connection cut by the
 *     server's timeout, both quiet points reached, /readyz ok at the end;
 *   - with RabbitMQ (stat lines outbox_rows, outbox_unsent,
 *     approval_events, events_processed, added by the script after the
 *     relay and kh-indexer had up to 90 s to catch up): no committed
 *     change left unsent, and as many events processed by kh-indexer as
 *     approval events were written;
 *   - reviewd (and kh-indexer, when it ran) exited 0 on SIGTERM after the
 *     run (--reviewd-exit, --indexer-exit: their exit statuses, given by
 *     the script; under the sanitizer build that also means no leak).
 *
 * Exit status 0 when every check passed, 1 when one failed, 2 when the
 * files were missing or malformed.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FAULTS 4096
#define MAX_ROUTES 64
#define MAX_KINDS 16
#define MAX_STATS 32
#define MAX_PROCS 4

typedef struct fault {
    long long start_ms, end_ms;
    char kind[48];
} fault;

typedef struct named {
    char name[64];
    long long n[5]; /* per class for routes; n[0] for kinds, stats */
} named;

typedef struct proc_figures {
    char name[32];
    long start_rss, end_rss, min_rss, max_rss;
    int start_fds, end_fds, min_fds, max_fds;
    int have_start, have_end, runs;
    int fd_kinds_differing; /* -1: no listings */
} proc_figures;

/* Errors that are judged by where they fell: in a fault window, in the
 * warm-up (before the start reading), or outside both. */
typedef struct placed {
    long long inside, warmup, outside;
} placed;

#define MAX_PEERS 8
#define MAX_FD_KINDS 64

typedef struct peer {
    char name[32];
    int port;
} peer;

/* Connections to a peer that a process opens on demand: between min and
 * max of them at any quiet point (--pool NAME=MAX or NAME=MIN..MAX). */
#define MAX_POOLS 4
typedef struct pool {
    char name[32];
    int min, max;
} pool;

/* Descriptors of one kind at the start and at the end reading. */
typedef struct fd_kind {
    char name[160];
    int start, end;
} fd_kind;

static struct {
    const char *dir;
    long long grace_ms;
    double rss_limit_pct;
    int rss_verdict;
    int reviewd_exit, indexer_exit; /* -1: not given */
    peer peers[MAX_PEERS];
    int npeers;
    int http_port;
    pool pools[MAX_POOLS];
    int npools;
} opt = {NULL, 15000, 10.0, 1, -1, -1, {{"", 0}}, 0, 0, {{"", 0, 0}}, 0};

/* When the start reading was taken (wall clock ms; 0: none): what came
 * before it is the warm-up. */
static long long start_reading_ms;

static fault faults[MAX_FAULTS];
static int nfaults;
static named routes[MAX_ROUTES], kinds[MAX_KINDS], stats[MAX_STATS];
static int nroutes, nkinds, nstats;
static proc_figures procs[MAX_PROCS];
static int nprocs;
static placed server_errors, conn_errors, unavailable, unexpected;

static const char *const class_names[5] = {"2xx", "3xx", "4xx", "5xx", "conn"};

static FILE *open_in(const char *name, int required)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", opt.dir, name);
    f = fopen(path, "r");
    if (f == NULL && required) {
        fprintf(stderr, "soak_report: cannot read %s: %s\n", path,
                strerror(errno));
    }
    return f;
}

/* The entry called name in list (n entries, cap max), added when new;
 * NULL when the list is full. */
static named *entry(named *list, int *n, int max, const char *name)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(list[i].name, name) == 0)
            return &list[i];
    if (*n == max)
        return NULL;
    snprintf(list[*n].name, sizeof(list[*n].name), "%s", name);
    return &list[(*n)++];
}

static int class_index(const char *c)
{
    for (int i = 0; i < 5; i++)
        if (strcmp(class_names[i], c) == 0)
            return i;
    return -1;
}

/* Splits line at tabs into at most max fields (the newline removed). */
static int split_tabs(char *line, char **field, int max)
{
    int n = 0;

    line[strcspn(line, "\n")] = '\0';
    while (n < max) {
        field[n++] = line;
        line = strchr(line, '\t');
        if (line == NULL)
            break;
        *line++ = '\0';
    }
    return n;
}

static int read_counts(void)
{
    FILE *f = open_in("counts.tsv", 1);
    char line[512], *fl[4];

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        const int n = split_tabs(line, fl, 4);
        named *e = NULL;

        if (n == 4 && strcmp(fl[0], "route") == 0 && class_index(fl[2]) >= 0) {
            e = entry(routes, &nroutes, MAX_ROUTES, fl[1]);
            if (e != NULL)
                e->n[class_index(fl[2])] = atoll(fl[3]);
            continue;
        }
        if (n == 3 && strcmp(fl[0], "kind") == 0)
            e = entry(kinds, &nkinds, MAX_KINDS, fl[1]);
        else if (n == 3 && strcmp(fl[0], "stat") == 0)
            e = entry(stats, &nstats, MAX_STATS, fl[1]);
        if (e != NULL)
            e->n[0] = atoll(fl[2]);
    }
    fclose(f);
    return nroutes > 0 && nkinds > 0 ? 0 : -1;
}

static long long stat_value(const named *list, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(list[i].name, name) == 0)
            return list[i].n[0];
    return 0;
}

/* faults.tsv may be absent: a run with no fault. */
static int read_faults(void)
{
    FILE *f = open_in("faults.tsv", 0);
    char line[256], *fl[3];

    if (f == NULL)
        return 0;
    while (nfaults < MAX_FAULTS && fgets(line, sizeof(line), f) != NULL) {
        if (split_tabs(line, fl, 3) == 3) {
            faults[nfaults].start_ms = atoll(fl[0]);
            faults[nfaults].end_ms = atoll(fl[1]);
            snprintf(faults[nfaults].kind, sizeof(faults[0].kind), "%s",
                     fl[2]);
            nfaults++;
        }
    }
    fclose(f);
    return 0;
}

static int in_fault_window(long long t_ms)
{
    for (int i = 0; i < nfaults; i++)
        if (t_ms >= faults[i].start_ms - 1000
            && t_ms <= faults[i].end_ms + opt.grace_ms)
            return 1;
    return 0;
}

static int read_events(void)
{
    FILE *f = open_in("events.tsv", 1);
    char line[512], *fl[4];

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        placed *p = NULL;

        if (split_tabs(line, fl, 4) != 4)
            continue;
        if (strcmp(fl[3], "server_error") == 0)
            p = &server_errors;
        else if (strcmp(fl[3], "conn_error") == 0)
            p = &conn_errors;
        else if (strcmp(fl[3], "unavailable") == 0)
            p = &unavailable;
        else if (strcmp(fl[3], "unexpected") == 0)
            p = &unexpected;
        if (p == NULL)
            continue;
        if (atoll(fl[0]) < start_reading_ms)
            p->warmup++;
        else if (in_fault_window(atoll(fl[0])))
            p->inside++;
        else
            p->outside++;
    }
    fclose(f);
    return 0;
}

static proc_figures *proc_entry(const char *name)
{
    for (int i = 0; i < nprocs; i++)
        if (strcmp(procs[i].name, name) == 0)
            return &procs[i];
    if (nprocs == MAX_PROCS)
        return NULL;
    memset(&procs[nprocs], 0, sizeof(procs[0]));
    snprintf(procs[nprocs].name, sizeof(procs[0].name), "%s", name);
    return &procs[nprocs++];
}

static void add_sample(proc_figures *p, const char *phase, long rss, int fds)
{
    if (strcmp(phase, "start") == 0) {
        p->start_rss = rss;
        p->start_fds = fds;
        p->have_start = 1;
    } else if (strcmp(phase, "end") == 0) {
        p->end_rss = rss;
        p->end_fds = fds;
        p->have_end = 1;
    } else if (rss >= 0 && fds >= 0) {
        if (p->runs == 0 || rss < p->min_rss)
            p->min_rss = rss;
        if (p->runs == 0 || rss > p->max_rss)
            p->max_rss = rss;
        if (p->runs == 0 || fds < p->min_fds)
            p->min_fds = fds;
        if (p->runs == 0 || fds > p->max_fds)
            p->max_fds = fds;
        p->runs++;
    }
}

static int read_samples(void)
{
    FILE *f = open_in("samples.tsv", 1);
    char line[256], *fl[5];

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        proc_figures *p;

        if (split_tabs(line, fl, 5) != 5)
            continue;
        p = proc_entry(fl[2]);
        if (p != NULL)
            add_sample(p, fl[1], atol(fl[3]), atoi(fl[4]));
        if (strcmp(fl[1], "start") == 0
            && (start_reading_ms == 0 || atoll(fl[0]) < start_reading_ms))
            start_reading_ms = atoll(fl[0]);
    }
    fclose(f);
    return nprocs > 0 ? 0 : -1;
}

/* ---- descriptors by kind ------------------------------------------------- */

/* The port at the end of "127.0.0.1:5432" (or "[hex]:port"), or -1. */
static int port_of(const char *addr)
{
    const char *colon = strrchr(addr, ':');

    return colon != NULL ? atoi(colon + 1) : -1;
}

/* The kind of a TCP descriptor described as "tcp L -> R state S". */
static void tcp_kind(const char *desc, char *out, size_t len)
{
    char proto[8], local[96], remote[96];
    unsigned state;

    if (sscanf(desc, "%7s %95s -> %95s state %x", proto, local, remote, &state)
        != 4) {
        snprintf(out, len, "%s", desc);
        return;
    }
    if (state == 0x0A) {
        snprintf(out, len, "tcp listening");
        return;
    }
    for (int i = 0; i < opt.npeers; i++) {
        if (port_of(remote) == opt.peers[i].port) {
            snprintf(out, len, "tcp to %s", opt.peers[i].name);
            return;
        }
    }
    snprintf(out, len, "%s",
             port_of(local) == opt.http_port ? "tcp from an http client"
                                             : "tcp other");
}

/* The kind of one listed descriptor target (see soak_proc_list_fds). */
static void fd_kind_of(const char *target, char *out, size_t len)
{
    if (strncmp(target, "tcp", 3) == 0) {
        tcp_kind(target, out, len);
    } else if (strncmp(target, "socket:", 7) == 0) {
        snprintf(out, len, "socket (not tcp)");
    } else if (strncmp(target, "pipe:", 5) == 0) {
        snprintf(out, len, "pipe");
    } else if (target[0] == '/') {
        const char *base = strrchr(target, '/');

        snprintf(out, len, "file %s",
                 strcmp(target, "/dev/null") == 0 ? target : base + 1);
    } else {
        snprintf(out, len, "%s", target);
    }
}

static fd_kind *fd_kind_entry(fd_kind *list, int *n, const char *name)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(list[i].name, name) == 0)
            return &list[i];
    if (*n == MAX_FD_KINDS)
        return NULL;
    memset(&list[*n], 0, sizeof(list[0]));
    snprintf(list[*n].name, sizeof(list[0].name), "%s", name);
    return &list[(*n)++];
}

/* Adds the listing fds-PHASE-PROC.txt to list (end: 0 start, 1 end).
 * Returns 0, or -1 when the file is missing. */
static int read_listing(const char *phase, const char *proc, int end,
                        fd_kind *list, int *n)
{
    char name[96], line[4400], kind[160];
    FILE *f;

    snprintf(name, sizeof(name), "fds-%s-%s.txt", phase, proc);
    f = open_in(name, 1);
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *target = strchr(line, ' ');
        fd_kind *k;

        if (target == NULL)
            continue;
        line[strcspn(line, "\n")] = '\0';
        fd_kind_of(target + 1, kind, sizeof(kind));
        k = fd_kind_entry(list, n, kind);
        if (k != NULL)
            *(end ? &k->end : &k->start) += 1;
    }
    fclose(f);
    return 0;
}

/* Whether a kind that differs is an on-demand pool, within its bounds. */
static int pool_within_bound(const fd_kind *k)
{
    char name[64];

    for (int i = 0; i < opt.npools; i++) {
        const pool *p = &opt.pools[i];

        snprintf(name, sizeof(name), "tcp to %s", p->name);
        if (strcmp(k->name, name) == 0)
            return k->start >= p->min && k->start <= p->max && k->end >= p->min
                   && k->end <= p->max;
    }
    return 0;
}

/* Prints proc's descriptors by kind; returns how many kinds differ
 * beyond what is allowed (-1: the listings are missing). */
static int compare_fds(const char *proc)
{
    fd_kind list[MAX_FD_KINDS];
    int n = 0, bad = 0;

    if (read_listing("start", proc, 0, list, &n) != 0
        || read_listing("end", proc, 1, list, &n) != 0)
        return -1;
    for (int i = 0; i < n; i++) {
        const int differs = list[i].start != list[i].end;
        const int allowed = !differs || pool_within_bound(&list[i]);

        printf("  %-10s %-36.36s %6d %6d%s\n", proc, list[i].name,
               list[i].start, list[i].end,
               !allowed  ? "  DIFFERS"
               : differs ? "  (on-demand pool, within its bound)"
                         : "");
        bad += !allowed;
    }
    return bad;
}

/* ---- printing ------------------------------------------------------------ */

static void print_routes(void)
{
    long long total[5] = {0}, all = 0;

    printf("requests by route and status class\n");
    printf("  %-34s %8s %6s %7s %6s %6s\n", "route", class_names[0],
           class_names[1], class_names[2], class_names[3], class_names[4]);
    for (int i = 0; i < nroutes; i++) {
        printf("  %-34s", routes[i].name);
        for (int c = 0; c < 5; c++) {
            printf(c == 0   ? " %8lld"
                   : c == 2 ? " %7lld"
                            : " %6lld",
                   routes[i].n[c]);
            total[c] += routes[i].n[c];
            all += routes[i].n[c];
        }
        printf("\n");
    }
    printf("  %-34s %8lld %6lld %7lld %6lld %6lld\n", "total", total[0],
           total[1], total[2], total[3], total[4]);
    printf("  %lld requests\n", all);
}

static void print_placed(const char *what, const placed *p)
{
    printf("  %-44s %8lld  (in fault windows %lld, warm-up %lld, "
           "outside %lld)\n",
           what, p->inside + p->warmup + p->outside, p->inside, p->warmup,
           p->outside);
}

static void print_kinds(void)
{
    long long all = 0;

    for (int i = 0; i < nkinds; i++)
        all += kinds[i].n[0];
    printf("errors by kind (of %lld answers)\n", all);
    printf("  %-44s %8lld\n", "ok (the expected 2xx)",
           stat_value(kinds, nkinds, "ok"));
    printf("  %-44s %8lld\n", "expected 4xx from bad requests",
           stat_value(kinds, nkinds, "bad_expected"));
    printf("  %-44s %8lld\n", "409 contention (races, retried submits)",
           stat_value(kinds, nkinds, "contention"));
    print_placed("503 unavailable", &unavailable);
    print_placed("other 5xx", &server_errors);
    print_placed("connection errors (reset, closed, timeout)", &conn_errors);
    print_placed("unexpected status", &unexpected);
    printf("  races %lld: one winner %lld, two winners %lld, no winner "
           "%lld\n",
           stat_value(stats, nstats, "races"),
           stat_value(stats, nstats, "race_one_winner"),
           stat_value(stats, nstats, "race_two_winners"),
           stat_value(stats, nstats, "race_no_winner"));
    printf("  idle connections %lld: cut by the server's timeout %lld, not "
           "cut %lld\n",
           stat_value(stats, nstats, "idle_opened"),
           stat_value(stats, nstats, "idle_closed_by_server"),
           stat_value(stats, nstats, "idle_not_closed"));
}

static void print_faults(void)
{
    named totals[MAX_KINDS];
    int n = 0;

    memset(totals, 0, sizeof(totals));
    printf("faults injected: %d\n", nfaults);
    for (int i = 0; i < nfaults; i++) {
        named *e = entry(totals, &n, MAX_KINDS, faults[i].kind);

        if (e != NULL) {
            e->n[0]++;
            e->n[1] += faults[i].end_ms - faults[i].start_ms;
        }
    }
    for (int i = 0; i < n; i++) {
        printf("  %-28s %3lld times, %7.1f s in all\n", totals[i].name,
               totals[i].n[0], (double)totals[i].n[1] / 1000.0);
    }
}

static double growth_pct(const proc_figures *p)
{
    return p->start_rss > 0 ? 100.0 * (double)(p->end_rss - p->start_rss)
                                  / (double)p->start_rss
                            : 0.0;
}

static void print_resources(void)
{
    printf("resources (start: the quiet point after the warm-up; end: the "
           "quiet point\n after the load, connections closed, /readyz ok; "
           "run: every sample between)\n");
    printf("  %-10s %10s %10s %8s %19s %6s %6s %11s\n", "process", "rss start",
           "rss end", "growth", "run rss min..max", "fds", "fds", "run fds");
    printf("  %-10s %10s %10s %8s %19s %6s %6s %11s\n", "", "kB", "kB", "",
           "kB", "start", "end", "min..max");
    for (int i = 0; i < nprocs; i++) {
        const proc_figures *p = &procs[i];

        printf("  %-10s %10ld %10ld %+7.1f%% %9ld..%-9ld %6d %6d %5d..%d\n",
               p->name, p->start_rss, p->end_rss, growth_pct(p), p->min_rss,
               p->max_rss, p->start_fds, p->end_fds, p->min_fds, p->max_fds);
    }
    printf("descriptors by kind at the start and end readings\n");
    printf("  %-10s %-36s %6s %6s\n", "process", "kind", "start", "end");
    for (int i = 0; i < nprocs; i++)
        procs[i].fd_kinds_differing = compare_fds(procs[i].name);
}

/* ---- the verdict --------------------------------------------------------- */

static int failures;

static void check(int ok, const char *what, const char *detail)
{
    printf("  [%s] %s", ok ? "PASS" : "FAIL", what);
    printf("%s\n", detail);
    failures += !ok;
}

static void check_resources(void)
{
    char rss[256] = "", fds[256] = "";
    int fds_ok = 1, rss_ok = 1, quiet = 1;
    size_t roff = 0, foff = 0;

    for (int i = 0; i < nprocs && roff < sizeof(rss) && foff < sizeof(fds);
         i++) {
        const proc_figures *p = &procs[i];

        quiet = quiet && p->have_start && p->have_end;
        fds_ok = fds_ok && p->start_fds > 0 && p->fd_kinds_differing == 0;
        rss_ok = rss_ok && growth_pct(p) <= opt.rss_limit_pct;
        roff += (size_t)snprintf(rss + roff, sizeof(rss) - roff,
                                 "%s %s %+.1f%%", i > 0 ? "," : ":", p->name,
                                 growth_pct(p));
        foff += (size_t)snprintf(fds + foff, sizeof(fds) - foff,
                                 "%s %s %d -> %d", i > 0 ? "," : ":", p->name,
                                 p->start_fds, p->end_fds);
    }
    check(quiet && stat_value(stats, nstats, "quiet_start_settled")
              && stat_value(stats, nstats, "quiet_end_settled"),
          "both quiet points reached, descriptor counts settled", "");
    if (opt.rss_verdict) {
        printf("  [%s] RSS growth <= %.0f%% from start to end%s\n",
               rss_ok ? "PASS" : "FAIL", opt.rss_limit_pct, rss);
        failures += !rss_ok;
    } else {
        printf("  [info] RSS growth not judged (run too short)%s\n", rss);
    }
    check(fds_ok, "open descriptors equal at start and end, kind by kind",
          fds);
}

static void check_errors(void)
{
    char detail[160];

    snprintf(detail, sizeof(detail),
             " (%lld 5xx, %lld connection errors "
             "inside fault windows)",
             server_errors.inside + unavailable.inside, conn_errors.inside);
    check(server_errors.outside + unavailable.outside == 0
              && conn_errors.outside == 0,
          "no 5xx and no connection error outside fault windows", detail);
    snprintf(detail, sizeof(detail), " (%lld inside)", unexpected.inside);
    check(unexpected.outside == 0,
          "no unexpected status outside fault windows", detail);
    check(stat_value(stats, nstats, "race_two_winners") == 0,
          "no review decided twice", "");
    check(stat_value(stats, nstats, "idle_not_closed") == 0
              && stat_value(stats, nstats, "idle_closed_by_server") > 0,
          "idle connections cut by the server's timeout", "");
    check(stat_value(stats, nstats, "readyz_ok") == 1, "/readyz ok at the end",
          "");
}

static int has_stat(const char *name)
{
    for (int i = 0; i < nstats; i++)
        if (strcmp(stats[i].name, name) == 0)
            return 1;
    return 0;
}

static void check_pipeline(void)
{
    char detail[160];
    const long long rows = stat_value(stats, nstats, "outbox_rows");
    const long long unsent = stat_value(stats, nstats, "outbox_unsent");
    const long long approved = stat_value(stats, nstats, "approval_events");
    const long long done = stat_value(stats, nstats, "events_processed");

    if (!has_stat("outbox_rows"))
        return;
    snprintf(detail, sizeof(detail), " (%lld outbox rows, %lld unsent)", rows,
             unsent);
    check(rows > 0 && unsent == 0, "every committed change's event sent",
          detail);
    snprintf(detail, sizeof(detail),
             " (%lld approval events, %lld "
             "processed)",
             approved, done);
    check(approved > 0 && done == approved,
          "kh-indexer processed each approval event once", detail);
}

static void check_exit(const char *who, int status)
{
    char what[96];

    if (status < 0)
        return;
    snprintf(what, sizeof(what), "%s exited 0 on SIGTERM", who);
    if (status == 0) {
        check(1, what, "");
        return;
    }
    snprintf(what, sizeof(what), "%s exited %d on SIGTERM", who, status);
    check(0, what, " (its stderr is in the run's folder)");
}

/* Copies the "name" of "name=value" into name (32 bytes); returns the
 * value's text, or NULL when there is no name or it is too long. */
static const char *split_name(const char *arg, char *name)
{
    const char *eq = strchr(arg, '=');

    if (eq == NULL || eq == arg || eq - arg >= 32)
        return NULL;
    snprintf(name, 32, "%.*s", (int)(eq - arg), arg);
    return eq + 1;
}

/* "name=number" into name (32 bytes) and *value; 0, or -1 when the form
 * is wrong. */
static int parse_pair(const char *arg, char *name, int *value)
{
    const char *v = split_name(arg, name);

    if (v == NULL || atoi(v) <= 0)
        return -1;
    *value = atoi(v);
    return 0;
}

/* Parses "NAME=MAX" (1..MAX: a pool that always keeps one) or
 * "NAME=MIN..MAX" into p; -1 when it is malformed. */
static int parse_pool(const char *arg, pool *p)
{
    const char *v = split_name(arg, p->name);
    const char *dots;

    if (v == NULL)
        return -1;
    dots = strstr(v, "..");
    p->min = dots != NULL ? atoi(v) : 1;
    p->max = atoi(dots != NULL ? dots + 2 : v);
    return p->min >= 0 && p->max >= p->min && p->max > 0 ? 0 : -1;
}

static int parse_args(int argc, char **argv)
{
    static const struct option longs[] = {
        {"dir", 1, 0, 'd'},           {"grace-ms", 1, 0, 'g'},
        {"rss-limit-pct", 1, 0, 'r'}, {"no-rss-verdict", 0, 0, 'n'},
        {"reviewd-exit", 1, 0, 'R'},  {"indexer-exit", 1, 0, 'I'},
        {"peer", 1, 0, 'p'},          {"http-port", 1, 0, 'h'},
        {"pool", 1, 0, 'P'},          {0, 0, 0, 0}};
    int c;

    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'd': opt.dir = optarg; break;
        case 'g': opt.grace_ms = atoll(optarg); break;
        case 'r': opt.rss_limit_pct = atof(optarg); break;
        case 'n': opt.rss_verdict = 0; break;
        case 'R': opt.reviewd_exit = atoi(optarg); break;
        case 'I': opt.indexer_exit = atoi(optarg); break;
        case 'p':
            if (opt.npeers == MAX_PEERS
                || parse_pair(optarg, opt.peers[opt.npeers].name,
                              &opt.peers[opt.npeers].port)
                       != 0)
                return -1;
            opt.npeers++;
            break;
        case 'h': opt.http_port = atoi(optarg); break;
        case 'P':
            if (opt.npools == MAX_POOLS
                || parse_pool(optarg, &opt.pools[opt.npools]) != 0)
                return -1;
            opt.npools++;
            break;
        default: return -1;
        }
    }
    return opt.dir != NULL && opt.grace_ms >= 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (parse_args(argc, argv) != 0) {
        fprintf(stderr,
                "usage: soak_report --dir DIR [--grace-ms MS] "
                "[--rss-limit-pct P] [--no-rss-verdict] [--reviewd-exit N] "
                "[--indexer-exit N] [--peer NAME=PORT ...] [--http-port P] "
                "[--pool NAME=[MIN..]MAX ...]\n");
        return 2;
    }
    if (read_counts() != 0 || read_faults() != 0 || read_samples() != 0
        || read_events() != 0) {
        fprintf(stderr,
                "soak_report: the run's files in %s are missing or "
                "empty\n",
                opt.dir);
        return 2;
    }
    print_routes();
    print_kinds();
    print_faults();
    print_resources();
    printf("verdict\n");
    check_resources();
    check_errors();
    check_pipeline();
    check_exit("reviewd", opt.reviewd_exit);
    check_exit("kh-indexer", opt.indexer_exit);
    printf("soak: %s (%d check%s failed)\n", failures ? "FAIL" : "PASS",
           failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
