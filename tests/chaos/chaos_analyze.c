/*
 * chaos_analyze.c: the checker's verdict, computed from the logs alone
 * (chaos_analyze.h).
 *
 * Holds.  A hold is one grant as its client saw it: from the moment the
 * acquire returned (acq_ok, with the fence) to the moment the client called
 * release (rel_call), or to the kill that ended it, or to dlock's exit for
 * a step that was stopped.  Its end says how the release went: OK (the
 * token was still ours at the release), LOST, another error, KILLED or
 * still OPEN when the phase ended.  The acquire's call time is kept too:
 * the server granted the lock between call and return.
 *
 * Columns:
 *   grants       holds;
 *   writes       register writes accepted;
 *   refused      register accesses (reads and writes) refused by fence;
 *   nogo         acquires that did not get the lock (busy after the wait,
 *                Redis unavailable, timeouts);
 *   pairs        pairs of holds A, B (A's acquire returned first) where B's
 *                acquire returned before A's hold ended: overlaps as the
 *                clients saw them;
 *   outlived     holds A that such a B overlapped, i.e. holds that lasted
 *                past the lock; "(f)": of those, the ones that touched the
 *                register after a newer holder had (every such access
 *                must have been refused, else it is a stale write); the
 *                rest had finished with the register before any newer
 *                holder touched it, which is harmless;
 *   stale        accepted writes whose fence is below the highest fence
 *                of an access the register had accepted before (replaying
 *                register.log): a write from an older grant landing after
 *                a newer grant's access.  Must be 0;
 *   lost         accepted writes - the register's final value: increments
 *                that a later write, based on the same read, overwrote.
 *                Must be 0;
 *   fence-order  holds B with a fence not above the fence of every hold A
 *                whose acquire returned before B's acquire was called
 *                (DLOCK's promise: fences grow with every grant, also
 *                across a restart that lost the counter).  Must be 0;
 *   unsafe       overlaps the lock itself must never allow, whatever the
 *                fault: A's release found A's token still there (so the
 *                key held A's token throughout and B cannot have been
 *                granted), or A had a fixed TTL (no watchdog) and B's
 *                acquire returned before A's acquire call + TTL, with no
 *                non-persistent restart between that could have dropped
 *                the key.  Must be 0;
 *   unexplained  overlaps where A's hold did not outlast its TTL (no
 *                pause), the library did not report A's lock lost, and no
 *                non-persistent restart happened: must be 0;
 *   avail        the share of the phase during which some hold was open;
 *   gap          the longest time in the phase with no hold open;
 *   u-ovl        on the unfenced resource (chaos.h), touched by every
 *                holder: touches by an older `dlock run` hold after a
 *                newer hold's first touch, in the resource's own order
 *                (the file's).  A C API holder's late touches are not
 *                counted: nothing but the fence stops it.  Must be 0 where dlock promises
 *                it (every phase but a paused dlock, a server that forgot
 *                the lock, and a server clock that jumped past the lease:
 *                docs/guarantees.md); "-": no dlock run client;
 *   u-ms         the longest such overlap: from the newer hold's first
 *                touch to the older hold's last one after it.
 */
#include "chaos_analyze.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chaos.h"

/* Expiry in Redis is in whole milliseconds on the server's clock; allow
 * for rounding when comparing it with our microseconds. */
#define TTL_MARGIN_US 3000

typedef enum hold_end {
    END_OPEN = 0,
    END_OK,
    END_LOST,
    END_ERROR,
    END_KILLED
} hold_end;

typedef struct hold {
    int id;
    int cli;
    int watchdog;   /* renewed (watchdog, or dlock run) */
    int64_t ttl_ms; /* the TTL asked for */
    uint64_t fence;
    int64_t t_call, t_ok, t_end;
    int released; /* rel_call seen */
    hold_end end;
    int64_t first_seq; /* first register access, -1 if none */
    int64_t last_seq;  /* last register access, -1 if none */
    int outlived;      /* another hold began while this one was open */
    int fenced;        /* ... and this one touched the register after
                            * a newer one did (refused, or stale) */
} hold;

typedef struct access {
    int64_t t;
    uint64_t seq;
    int id;
    uint64_t fence;
    int write;
    int ok;
    uint64_t arg, value;
} access;

typedef struct fault {
    char kind[24];
    int id;
    int64_t dur_ms;
    int64_t t0, t1;
} fault;

typedef struct event {
    int64_t t;
    size_t order;
    char *line; /* after the timestamp */
} event;

/* Everything read from one phase's logs. */
typedef struct phase_log {
    event *events;
    size_t nevents;
    hold *holds; /* by t_ok once rebuilt */
    size_t nholds, cap_holds;
    size_t *by_fence; /* indexes of holds, by (fence, id) */
    size_t *by_call;  /* indexes of holds, by t_call */
    access *accesses;
    size_t naccesses;
    fault *faults;
    size_t nfaults, cap_faults;
    int64_t t_start, t_stop;
    int acq_failures;
    int cli[CHAOS_CLIENTS_MAX];
    int64_t pending_call[CHAOS_CLIENTS_MAX];
    long open[CHAOS_CLIENTS_MAX]; /* index of the open hold, or -1 */
} phase_log;

static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return p;
    *cap = *cap ? 2 * *cap : 256;
    if (*cap < need)
        *cap = need;
    p = realloc(p, *cap * size);
    if (p == NULL) {
        fprintf(stderr, "chaos: out of memory in the analysis\n");
        exit(70);
    }
    return p;
}

/* Reads a whole file into a NUL-terminated buffer. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t len = 0, cap = 0, n;

    if (f == NULL) {
        fprintf(stderr, "chaos: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    do {
        buf = grow(buf, &cap, len + 65536, 1);
        n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
    } while (n > 0);
    fclose(f);
    buf[len] = '\0';
    return buf;
}

static int compare_events(const void *a, const void *b)
{
    const event *x = a, *y = b;

    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Splits events.log into timestamped lines and sorts them by time (file
 * order among equal stamps, which keeps each process's own order). */
static int load_events(char *text, phase_log *pl)
{
    size_t cap = 0;

    for (char *line = strtok(text, "\n"); line != NULL;
         line = strtok(NULL, "\n")) {
        char *rest;
        long long t = strtoll(line, &rest, 10);

        if (rest == line || *rest != ' ')
            continue;
        pl->events = grow(pl->events, &cap, pl->nevents + 1, sizeof(event));
        pl->events[pl->nevents] = (event){t, pl->nevents, rest + 1};
        pl->nevents++;
    }
    qsort(pl->events, pl->nevents, sizeof(event), compare_events);
    return 0;
}

static int load_register(char *text, phase_log *pl)
{
    size_t cap = 0;

    for (char *line = strtok(text, "\n"); line != NULL;
         line = strtok(NULL, "\n")) {
        access a;
        long long t;
        char op[8];
        uint64_t floor, last, writes;

        if (sscanf(line,
                   "%lld %" SCNu64 " %d %" SCNu64 " %7s %d %" SCNu64
                   " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64,
                   &t, &a.seq, &a.id, &a.fence, op, &a.ok, &a.arg, &a.value,
                   &floor, &last, &writes)
                != 11
            || strcmp(op, "init") == 0)
            continue;
        a.t = t;
        a.write = op[0] == 'w';
        pl->accesses = grow(pl->accesses, &cap, pl->naccesses + 1,
                            sizeof(access));
        pl->accesses[pl->naccesses++] = a;
    }
    return 0;
}

/* ---- rebuilding holds from the events ------------------------------------ */

static void close_hold(phase_log *pl, int id, int64_t t, hold_end end)
{
    hold *h;

    if (pl->open[id] < 0)
        return;
    h = &pl->holds[pl->open[id]];
    if (!h->released)
        h->t_end = t;
    h->end = end;
    pl->open[id] = -1;
}

static void open_hold(phase_log *pl, int id, int64_t t, uint64_t fence,
                      int64_t ttl_ms, int watchdog)
{
    hold *h;

    close_hold(pl, id, t, END_ERROR);
    pl->holds = grow(pl->holds, &pl->cap_holds, pl->nholds + 1, sizeof(hold));
    h = &pl->holds[pl->nholds];
    memset(h, 0, sizeof(*h));
    h->id = id;
    h->cli = pl->cli[id];
    h->watchdog = watchdog;
    h->ttl_ms = ttl_ms;
    h->fence = fence;
    h->t_call = pl->pending_call[id] > 0 ? pl->pending_call[id] : t;
    h->t_ok = t;
    h->t_end = INT64_MAX;
    h->first_seq = -1;
    h->last_seq = -1;
    pl->open[id] = (long)pl->nholds++;
}

/* err is a dlock_errname (DLOCK_OK, DLOCK_LOST, ...) or EXIT_0, dlock
 * run's success, which leaves the release's outcome unknown (END_ERROR). */
static hold_end end_of(const char *err)
{
    if (strcmp(err, "DLOCK_OK") == 0)
        return END_OK;
    if (strcmp(err, "DLOCK_LOST") == 0)
        return END_LOST;
    return END_ERROR;
}

static void add_fault(phase_log *pl, int64_t t, const char *kind, int id,
                      int64_t dur_ms)
{
    fault *f;

    pl->faults = grow(pl->faults, &pl->cap_faults, pl->nfaults + 1,
                      sizeof(fault));
    f = &pl->faults[pl->nfaults++];
    snprintf(f->kind, sizeof(f->kind), "%s", kind);
    f->id = id;
    f->dur_ms = dur_ms;
    f->t0 = t;
    f->t1 = t;
}

/* A fault_end closes the latest fault of that kind and client. */
static void end_fault(phase_log *pl, int64_t t, const char *kind, int id)
{
    for (size_t i = pl->nfaults; i-- > 0;) {
        fault *f = &pl->faults[i];

        if (f->id == id && strcmp(f->kind, kind) == 0) {
            f->t1 = t;
            return;
        }
    }
}

static int valid_id(int id)
{
    return id >= 0 && id < CHAOS_CLIENTS_MAX;
}

/* Applies one client event (acq_call, acq_ok, rel_call, ...). */
static void apply_client_event(phase_log *pl, int64_t t, const char *what,
                               const char *rest)
{
    int id;
    unsigned long long fence = 0;
    long long ttl = 0;
    int wd = 0;
    char word[32] = "";

    if (sscanf(rest, "%d", &id) != 1 || !valid_id(id))
        return;
    if (strcmp(what, "start") == 0) {
        sscanf(rest, "%*d %*d %31s", word);
        pl->cli[id] = strcmp(word, "cli") == 0;
    } else if (strcmp(what, "acq_call") == 0) {
        close_hold(pl, id, t, END_ERROR);
        pl->pending_call[id] = t;
    } else if (strcmp(what, "acq_ok") == 0) {
        sscanf(rest, "%*d %llu %lld %d", &fence, &ttl, &wd);
        open_hold(pl, id, t, fence, ttl, wd);
    } else if (strcmp(what, "rel_call") == 0 && pl->open[id] >= 0) {
        pl->holds[pl->open[id]].t_end = t;
        pl->holds[pl->open[id]].released = 1;
    } else if (strcmp(what, "rel_done") == 0) {
        sscanf(rest, "%*d %llu %31s", &fence, word);
        close_hold(pl, id, t, end_of(word));
    } else if (strcmp(what, "acq_err") == 0) {
        pl->acq_failures++;
        close_hold(pl, id, t, END_ERROR);
    } else if (strcmp(what, "run_exit") == 0 || strcmp(what, "exit") == 0) {
        close_hold(pl, id, t, END_ERROR);
    }
}

static void apply_event(phase_log *pl, const event *e)
{
    char what[32], kind[24];
    const char *rest;
    int id = 0;
    long long dur = 0;

    if (sscanf(e->line, "%31s", what) != 1)
        return;
    rest = e->line + strlen(what);
    if (strcmp(what, "phase_start") == 0) {
        pl->t_start = e->t;
    } else if (strcmp(what, "phase_stop") == 0) {
        /* "phase_stop NAME UNTIL": the end the clients were given, which
         * a fault still running may have made us log late. */
        long long until = 0;

        pl->t_stop = sscanf(rest, "%*s %lld", &until) == 1 ? until : e->t;
    } else if (strcmp(what, "fault") == 0
               && sscanf(rest, "%23s %d %lld", kind, &id, &dur) == 3) {
        add_fault(pl, e->t, kind, id, dur);
        if (strcmp(kind, "kill") == 0 && valid_id(id))
            close_hold(pl, id, e->t, END_KILLED);
    } else if (strcmp(what, "fault_end") == 0
               && sscanf(rest, "%23s %d", kind, &id) == 2) {
        end_fault(pl, e->t, kind, id);
    } else {
        apply_client_event(pl, e->t, what, rest);
    }
}

static int compare_holds_by_start(const void *x, const void *y)
{
    const hold *a = x, *b = y;

    return a->t_ok < b->t_ok ? -1 : a->t_ok > b->t_ok;
}

static int compare_by_fence(const void *x, const void *y, void *arg)
{
    const hold *holds = arg;
    const hold *a = &holds[*(const size_t *)x];
    const hold *b = &holds[*(const size_t *)y];

    if (a->fence != b->fence)
        return a->fence < b->fence ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static int compare_by_call(const void *x, const void *y, void *arg)
{
    const hold *holds = arg;
    const hold *a = &holds[*(const size_t *)x];
    const hold *b = &holds[*(const size_t *)y];

    return a->t_call < b->t_call ? -1 : a->t_call > b->t_call;
}

static size_t *make_index(const phase_log *pl,
                          int (*cmp)(const void *, const void *, void *))
{
    size_t cap = 0;
    size_t *index = grow(NULL, &cap, pl->nholds + 1, sizeof(size_t));

    for (size_t i = 0; i < pl->nholds; i++)
        index[i] = i;
    qsort_r(index, pl->nholds, sizeof(size_t), cmp, pl->holds);
    return index;
}

/* Replays the events into holds, ends the ones still open at phase_stop,
 * and sorts them by the time their acquire returned. */
static void rebuild_holds(phase_log *pl)
{
    for (int i = 0; i < CHAOS_CLIENTS_MAX; i++)
        pl->open[i] = -1;
    for (size_t i = 0; i < pl->nevents; i++)
        apply_event(pl, &pl->events[i]);
    for (size_t i = 0; i < pl->nholds; i++) {
        if (pl->holds[i].t_end == INT64_MAX)
            pl->holds[i].t_end = pl->t_stop > pl->holds[i].t_ok
                                     ? pl->t_stop
                                     : pl->holds[i].t_ok;
    }
    qsort(pl->holds, pl->nholds, sizeof(hold), compare_holds_by_start);
    pl->by_fence = make_index(pl, compare_by_fence);
    pl->by_call = make_index(pl, compare_by_call);
}

/* Finds the hold of client id with fence; -1 if none. */
static long find_hold(const phase_log *pl, int id, uint64_t fence)
{
    size_t lo = 0, hi = pl->nholds;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const hold *h = &pl->holds[pl->by_fence[mid]];

        if (h->fence < fence || (h->fence == fence && h->id < id))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < pl->nholds && pl->holds[pl->by_fence[lo]].fence == fence
        && pl->holds[pl->by_fence[lo]].id == id)
        return (long)pl->by_fence[lo];
    return -1;
}

/* ---- the figures --------------------------------------------------------- */

static void note(char *buf, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void note(char *buf, const char *fmt, ...)
{
    size_t len = strlen(buf);
    va_list ap;

    if (len + 2 >= CHAOS_NOTE_MAX)
        return;
    if (len > 0) {
        memcpy(buf + len, "; ", 3);
        len += 2;
    }
    va_start(ap, fmt);
    vsnprintf(buf + len, CHAOS_NOTE_MAX - len, fmt, ap);
    va_end(ap);
}

/* Replays the register: stale writes, refusals, lost increments, and the
 * first access of each hold. */
static void replay_register(phase_log *pl, chaos_phase_result *res)
{
    uint64_t highest = 0;

    for (size_t i = 0; i < pl->naccesses; i++) {
        const access *a = &pl->accesses[i];
        long h = find_hold(pl, a->id, a->fence);

        if (h < 0) {
            res->orphans++;
        } else {
            if (pl->holds[h].first_seq < 0)
                pl->holds[h].first_seq = (int64_t)a->seq;
            pl->holds[h].last_seq = (int64_t)a->seq;
        }
        if (!a->ok) {
            res->refused++;
            continue;
        }
        if (a->write) {
            res->writes_ok++;
            if (a->fence < highest)
                res->stale_writes++;
        }
        if (a->fence > highest)
            highest = a->fence;
    }
}

/* Whether a fault of kind overlaps [t0, t1] (for client id, or any when
 * id < 0) and lasted longer than min_ms. */
static int fault_within(const phase_log *pl, const char *kind, int id,
                        int64_t t0, int64_t t1, int64_t min_ms)
{
    for (size_t i = 0; i < pl->nfaults; i++) {
        const fault *f = &pl->faults[i];

        if (strcmp(f->kind, kind) == 0 && (id < 0 || f->id == id)
            && f->t0 <= t1 && f->t1 >= t0 && f->dur_ms >= min_ms)
            return 1;
    }
    return 0;
}

/* A fault between a's acquire and b's grant after which Redis itself
 * may grant a lock early: a clock jump past the lease, a failover (a
 * replica may not have the grant yet).  docs/guarantees.md. */
static int lease_broken_by_server(const phase_log *pl, const hold *a,
                                  const hold *b)
{
    static const char *const kinds[] = {"clock_jump", "cluster_failover",
                                        "cluster_kill"};

    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (fault_within(pl, kinds[i], -1, a->t_call, b->t_ok, 0))
            return 1;
    return 0;
}

/* What explains overlap (a, b), or NULL.  A pause past the TTL (injected,
 * or a stall the client suffered: its hold outlasted the TTL), a lock the
 * library reported lost, or a restart that dropped the key. */
static const char *explain_overlap(const phase_log *pl, const hold *a,
                                   const hold *b)
{
    int64_t ttl = a->ttl_ms;

    if (fault_within(pl, "crash_nopersist", -1, a->t_call, b->t_ok, 0))
        return "restart without persistence";
    if (fault_within(pl, "pause", a->id, a->t_ok, b->t_ok, ttl))
        return "holder paused past its TTL";
    if (fault_within(pl, "redis_stop", -1, a->t_call, b->t_ok, ttl))
        return "Redis stopped past the TTL";
    if (fault_within(pl, "net_silence", a->id, a->t_ok, b->t_ok, ttl))
        return "holder's network silent past its TTL";
    if (lease_broken_by_server(pl, a, b))
        return "Redis clock jumped past the lease, or a failover lost "
               "the grant";
    if (a->end == END_LOST)
        return "lock reported lost";
    if (!a->watchdog && b->t_ok - a->t_call > ttl * 1000)
        return "holder stalled past its TTL";
    return NULL;
}

/* An overlap the lock must never allow (see the top of the file). */
static const char *unsafe_overlap(const phase_log *pl, const hold *a,
                                  const hold *b)
{
    if (a->end == END_OK)
        return "older holder released cleanly";
    if (!a->watchdog && b->t_ok + TTL_MARGIN_US < a->t_call + a->ttl_ms * 1000
        && !fault_within(pl, "crash_nopersist", -1, a->t_call, b->t_ok, 0)
        && !lease_broken_by_server(pl, a, b))
        return "granted again before the TTL ran out";
    return NULL;
}

/* 1 if older touched the register after newer's first access (refused
 * each time, or it is a stale write, counted already). */
static int fenced_out(const hold *older, const hold *newer)
{
    return newer->first_seq >= 0 && older->last_seq > newer->first_seq;
}

static void count_overlap(const phase_log *pl, hold *a, const hold *b,
                          chaos_phase_result *res)
{
    const char *why = explain_overlap(pl, a, b);
    const char *bad = unsafe_overlap(pl, a, b);

    res->overlaps++;
    a->outlived = 1;
    if (fenced_out(a, b))
        a->fenced = 1;
    if (bad != NULL) {
        res->unsafe++;
        note(res->problems,
             "unsafe overlap: client %d (fence %" PRIu64
             ") and client %d (fence %" PRIu64 "): %s",
             a->id, a->fence, b->id, b->fence, bad);
    } else if (why == NULL) {
        res->overlaps_unexplained++;
        note(res->problems,
             "unexplained overlap: client %d (fence %" PRIu64
             ", held %lld ms) and client %d",
             a->id, a->fence, (long long)((b->t_ok - a->t_call) / 1000),
             b->id);
    } else if (strstr(res->explained, why) == NULL) {
        note(res->explained, "%s", why);
    }
}

/* Holds are sorted by t_ok, so the holds that start inside a's interval
 * follow it directly. */
static void find_overlaps(phase_log *pl, chaos_phase_result *res)
{
    for (size_t i = 0; i < pl->nholds; i++) {
        hold *a = &pl->holds[i];

        for (size_t j = i + 1; j < pl->nholds && pl->holds[j].t_ok < a->t_end;
             j++)
            if (pl->holds[j].id != a->id)
                count_overlap(pl, a, &pl->holds[j], res);
        if (a->outlived) {
            res->outlived++;
            res->outlived_fenced += a->fenced;
        }
    }
}

/* Fence order: for each hold b, every hold a whose acquire returned before
 * b's acquire was called must have a lower fence.  Walking b by t_call
 * while taking in the holds by t_ok keeps the highest such fence. */
static void check_fence_order(const phase_log *pl, chaos_phase_result *res)
{
    size_t next = 0;
    const hold *top = NULL;

    for (size_t k = 0; k < pl->nholds; k++) {
        const hold *b = &pl->holds[pl->by_call[k]];

        while (next < pl->nholds && pl->holds[next].t_ok < b->t_call) {
            if (top == NULL || pl->holds[next].fence > top->fence)
                top = &pl->holds[next];
            next++;
        }
        if (top == NULL || top->fence < b->fence)
            continue;
        if (res->fence_order++ == 0)
            note(res->problems,
                 "fence %" PRIu64 " (client %d) came after "
                 "fence %" PRIu64 " (client %d)",
                 b->fence, b->id, top->fence, top->id);
    }
}

/* Availability and the longest gap, over [t_start, t_stop]. */
static void measure_availability(phase_log *pl, chaos_phase_result *res)
{
    int64_t covered = 0, cursor = pl->t_start, gap = 0;
    int64_t span = pl->t_stop - pl->t_start;

    for (size_t i = 0; i < pl->nholds; i++) {
        int64_t s = pl->holds[i].t_ok, e = pl->holds[i].t_end;

        if (s < pl->t_start)
            s = pl->t_start;
        if (e > pl->t_stop)
            e = pl->t_stop;
        if (e <= cursor)
            continue;
        if (s > cursor) {
            gap = s - cursor > gap ? s - cursor : gap;
            cursor = s;
        }
        covered += e - cursor;
        cursor = e;
    }
    if (pl->t_stop - cursor > gap)
        gap = pl->t_stop - cursor;
    res->availability = span > 0 ? (double)covered / (double)span : 0;
    res->longest_gap_ms = gap / 1000;
}

/* One hold of the unfenced resource, in the order of its first touch. */
typedef struct touch_hold {
    long pid;
    uint64_t fence;
    int id;
    int cli; /* a `dlock run` command's */
    int64_t first_t;
} touch_hold;

/* Finds (or, when absent, appends) the hold of step_pid and fence,
 * searching the newest first: touches come from the last few holds. */
static size_t touch_hold_of(touch_hold **holds, size_t *n, size_t *cap,
                            const touch_hold *line)
{
    for (size_t i = *n; i-- > 0;)
        if ((*holds)[i].pid == line->pid && (*holds)[i].fence == line->fence)
            return i;
    *holds = grow(*holds, cap, *n + 1, sizeof(touch_hold));
    (*holds)[*n] = *line;
    return (*n)++;
}

/* Replays unfenced.log in its own order (see the top of the file). */
static void replay_unfenced(char *text, chaos_phase_result *res)
{
    touch_hold *holds = NULL;
    size_t n = 0, cap = 0;
    int cli_holds = 0;

    for (char *line = strtok(text, "\n"); line != NULL;
         line = strtok(NULL, "\n")) {
        long long t;
        unsigned long long fence;
        char mode[8];
        touch_hold this;
        size_t h;

        if (sscanf(line, "%lld %d %llu %ld %7s", &t, &this.id, &fence,
                   &this.pid, mode)
            != 5)
            continue;
        this.fence = fence;
        this.cli = strcmp(mode, "cli") == 0;
        this.first_t = t;
        h = touch_hold_of(&holds, &n, &cap, &this);
        cli_holds += holds[h].cli && holds[h].first_t == t;
        if (h + 1 < n && holds[h].cli) {
            int64_t ms = (t - holds[h + 1].first_t) / 1000;

            if (res->unfenced_stale++ == 0)
                note(res->unfenced_bound ? res->problems : res->explained,
                     "unfenced resource: client %d (fence %llu) touched it "
                     "%lld ms after client %d (fence %" PRIu64 ") began",
                     this.id, fence, (long long)ms, holds[h + 1].id,
                     holds[h + 1].fence);
            if (ms > res->unfenced_overlap_ms)
                res->unfenced_overlap_ms = ms;
        }
    }
    res->unfenced_holds = cli_holds;
    free(holds);
}

static void free_phase_log(phase_log *pl)
{
    free(pl->events);
    free(pl->holds);
    free(pl->by_fence);
    free(pl->by_call);
    free(pl->accesses);
    free(pl->faults);
}

/* The unfenced resource, if any client touched it.  An overlap is a
 * problem where res->unfenced_bound (set before the analysis) says dlock
 * promises none, and an explained overlap elsewhere. */
static void analyze_unfenced(const char *dir, chaos_phase_result *res)
{
    char path[1024];
    struct stat st;
    char *text;

    snprintf(path, sizeof(path), "%s/unfenced.log", dir);
    if (stat(path, &st) != 0)
        return;
    text = slurp(path);
    if (text == NULL)
        return;
    replay_unfenced(text, res);
    free(text);
}

int chaos_analyze_phase(const char *dir, chaos_phase_result *res)
{
    char path[1024];
    char *events, *reg;
    phase_log pl;
    chaos_register_state st;

    memset(&pl, 0, sizeof(pl));
    snprintf(path, sizeof(path), "%s/events.log", dir);
    events = slurp(path);
    snprintf(path, sizeof(path), "%s/register.log", dir);
    reg = slurp(path);
    if (events == NULL || reg == NULL || chaos_register_state_read(dir, &st))
        goto fail;
    load_events(events, &pl);
    load_register(reg, &pl);
    rebuild_holds(&pl);
    res->faults = (int)pl.nfaults;
    res->duration_ms = (pl.t_stop - pl.t_start) / 1000;
    res->grants = (int)pl.nholds;
    res->acq_failures = pl.acq_failures;
    replay_register(&pl, res);
    res->lost = (int64_t)st.writes - (int64_t)st.value;
    if ((uint64_t)res->writes_ok != st.writes)
        note(res->problems,
             "register log has %d accepted writes, its state "
             "%" PRIu64,
             res->writes_ok, st.writes);
    find_overlaps(&pl, res);
    check_fence_order(&pl, res);
    measure_availability(&pl, res);
    analyze_unfenced(dir, res);
    free_phase_log(&pl);
    free(events);
    free(reg);
    return 0;
fail:
    fprintf(stderr, "chaos: cannot analyse %s\n", dir);
    free_phase_log(&pl);
    free(events);
    free(reg);
    return -1;
}

int chaos_phase_ok(chaos_phase_result *r)
{
    if (r->not_run[0])
        return 1;
    if (r->stale_writes != 0)
        note(r->problems, "%d stale writes accepted", r->stale_writes);
    if (r->lost != 0)
        note(r->problems, "%lld increments lost", (long long)r->lost);
    if (r->writes_ok == 0)
        note(r->problems, "no increment went through: the lock made no "
                          "progress");
    if (r->client_failures != 0)
        note(r->problems, "%d clients failed", r->client_failures);
    if (r->orphans != 0)
        note(r->problems, "%d register accesses without a logged hold",
             r->orphans);
    /* Every failed bound has left a note (unsafe, unexplained and fence
     * order ones where they were found). */
    return r->problems[0] == '\0';
}

void chaos_print_header(void)
{
    printf("%-17s %4s %6s %6s %6s %6s %7s %12s %5s %5s %4s %5s %6s %5s %5s "
           "%6s %6s  %s\n",
           "fault", "secs", "faults", "grants", "nogo", "writes", "refused",
           "outlived(f)", "pairs", "stale", "lost", "fence", "unsafe", "u-ovl",
           "u-ms", "avail", "gap_ms", "verdict");
}

void chaos_print_row(const chaos_phase_result *r)
{
    char ov[32], uovl[16] = "-", ums[16] = "-";

    if (r->not_run[0]) {
        printf("%-17s not run: %s\n", r->name, r->not_run);
        return;
    }
    snprintf(ov, sizeof(ov), "%d(%d)", r->outlived, r->outlived_fenced);
    if (r->unfenced_holds > 0) {
        snprintf(uovl, sizeof(uovl), "%d%s", r->unfenced_stale,
                 r->unfenced_bound ? "" : "*");
        snprintf(ums, sizeof(ums), "%lld", (long long)r->unfenced_overlap_ms);
    }
    printf("%-17s %4.1f %6d %6d %6d %6d %7d %12s %5d %5d %4lld %5d %6d %5s "
           "%5s %5.1f%% %6lld  %s\n",
           r->name, (double)r->duration_ms / 1000, r->faults, r->grants,
           r->acq_failures, r->writes_ok, r->refused, ov, r->overlaps,
           r->stale_writes, (long long)r->lost, r->fence_order,
           r->unsafe + r->overlaps_unexplained, uovl, ums,
           100.0 * r->availability, (long long)r->longest_gap_ms,
           r->problems[0] ? "FAIL" : "ok");
}

void chaos_print_notes(const chaos_phase_result *r, size_t count)
{
    int unbounded = 0;

    for (size_t i = 0; i < count; i++)
        unbounded |= r[i].unfenced_holds > 0 && !r[i].unfenced_bound;
    if (unbounded)
        printf("  u-ovl *: not bounded in that phase (a paused dlock, a "
               "server that forgot the lock or a clock jump past the "
               "lease: docs/guarantees.md)\n");
    for (size_t i = 0; i < count; i++) {
        if (r[i].remark[0])
            printf("  %s: %s\n", r[i].name, r[i].remark);
        if (r[i].explained[0])
            printf("  %s: overlaps explained by: %s\n", r[i].name,
                   r[i].explained);
        if (r[i].problems[0])
            printf("  %s: PROBLEMS: %s\n", r[i].name, r[i].problems);
    }
}
