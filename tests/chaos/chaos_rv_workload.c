/*
 * chaos_rv_workload.c: the clients of the reviewd checker, and their log
 * (chaos_rv.h).
 *
 * Each client thread loops until the phase's end: it creates a document
 * (author "author<k>"), submits it, and then races D decisions on the
 * review, each from its own thread released by a barrier: reviewers bob
 * and carol alternate, every decision is approve or reject by the
 * generator, the threads alternate between the two reviewd instances, and
 * a decision carries an Idempotency-Key or not, also by the generator.  A
 * rejected document is submitted once more and raced again, so the
 * rejected -> pending_review transition is exercised too.
 *
 * Retries are what a careful client does, and they are what makes the
 * check exact: a request with an Idempotency-Key (every create and submit,
 * some decisions) is retried, on the other instance, while its answer
 * leaves the outcome unknown (no answer, or a 5xx) or says LOCK_BUSY,
 * until it gets a definite answer or the resolve deadline passes; the
 * retry either replays the first outcome or runs afresh, so the final
 * answer of a keyed request is the truth.  A decision without a key is
 * sent once: if its answer is lost, the checker may find it decided and
 * counts that as "unacked", never as an error.
 *
 * Every attempt is one record in the log (memory, for the checker, and
 * requests.log, for people).  Pacing sleeps only space out retries.
 */
#include "chaos_rv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DECIDERS_MAX 8
#define RETRY_MIN_US 50000
#define RETRY_MAX_US 200000

/* ---- the log ------------------------------------------------------------- */

int chaos_rv_ambiguous(int status)
{
    return status == 0 || status >= 500;
}

int chaos_rv_log_init(chaos_rv_log *log, const char *path)
{
    memset(log, 0, sizeof(*log));
    pthread_mutex_init(&log->mu, NULL);
    atomic_store(&log->next_req, 1);
    log->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC,
                   0644);
    if (log->fd < 0) {
        fprintf(stderr, "chaos-rv: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

void chaos_rv_log_free(chaos_rv_log *log)
{
    if (log->fd >= 0)
        close(log->fd);
    free(log->a);
    pthread_mutex_destroy(&log->mu);
    memset(log, 0, sizeof(*log));
    log->fd = -1;
}

static const char *kind_name(chaos_rv_kind k)
{
    static const char *const names[] = {"create", "submit", "approve",
                                        "reject", "get"};

    return names[k];
}

/* One line of requests.log, written with one write(2). */
static void log_line(const chaos_rv_log *log, const chaos_rv_attempt *a)
{
    char line[512];
    const int n = snprintf(
        line, sizeof(line),
        "%lld %lld req=%lld try=%d rvd=%d %s key=%d "
        "by=%s doc=%lld review=%lld -> %d %s status=%s reviewer=%s "
        "fence=%s\n",
        (long long)a->t0_us, (long long)a->t1_us, (long long)a->req_no,
        a->attempt, a->instance, kind_name(a->kind), a->keyed,
        a->reviewer[0] ? a->reviewer : "-", (long long)a->doc_id,
        (long long)a->review_id, a->status, a->code[0] ? a->code : "-",
        a->got_status[0] ? a->got_status : "-",
        a->got_reviewer[0] ? a->got_reviewer : "-",
        a->got_fence[0] ? a->got_fence : "-");

    if (n > 0 && write(log->fd, line, (size_t)n) != n)
        fprintf(stderr, "chaos-rv: requests.log: %s\n", strerror(errno));
}

void chaos_rv_log_add(chaos_rv_log *log, const chaos_rv_attempt *a)
{
    pthread_mutex_lock(&log->mu);
    if (log->n == log->cap) {
        const size_t cap = log->cap > 0 ? log->cap * 2 : 4096;
        chaos_rv_attempt *p = realloc(log->a, cap * sizeof(*p));

        if (p == NULL) {
            /* A record we cannot keep would make the check lie. */
            fprintf(stderr, "chaos-rv: out of memory for the log\n");
            abort();
        }
        log->a = p;
        log->cap = cap;
    }
    log->a[log->n++] = *a;
    pthread_mutex_unlock(&log->mu);
    log_line(log, a);
}

/* ---- one logical request ------------------------------------------------- */

struct chaos_rv_workload {
    chaos_rv_workload_cfg cfg;
    chaos_rv_stack *stack;
    chaos_rv_log *log;
    char *author_tok[CHAOS_CLIENTS_MAX];
    char *bob, *carol;
    pthread_t threads[CHAOS_CLIENTS_MAX];
    int started;
    _Atomic int unresolved;
};

typedef struct rv_call {
    chaos_rv_kind kind;
    const char *method;
    char path[96];
    const char *token;
    const char *body;
    char key[96];         /* "" : none */
    const char *reviewer; /* decisions */
    int instance;         /* first attempt's */
    int64_t doc_id, review_id;
} rv_call;

/* Copies what a 2xx answer says into a. */
static void read_answer(const rvt_resp *r, chaos_rv_attempt *a)
{
    const char *v;

    v = rvt_field(r, "code");
    snprintf(a->code, sizeof(a->code), "%s", v != NULL ? v : "");
    if (r->status < 200 || r->status > 299)
        return;
    v = a->kind == CHAOS_RV_CREATE ? rvt_field(r, "id")
                                   : rvt_field(r, "document.id");
    a->got_doc_id = v != NULL ? atoll(v) : 0;
    v = a->kind == CHAOS_RV_GET ? rvt_field(r, "id")
                                : rvt_field(r, "review.id");
    a->got_review_id = v != NULL ? atoll(v) : 0;
    v = a->kind == CHAOS_RV_GET ? rvt_field(r, "status")
                                : rvt_field(r, "review.status");
    snprintf(a->got_status, sizeof(a->got_status), "%s", v ? v : "");
    v = a->kind == CHAOS_RV_GET ? rvt_field(r, "reviewer")
                                : rvt_field(r, "review.reviewer");
    snprintf(a->got_reviewer, sizeof(a->got_reviewer), "%s", v ? v : "");
    v = a->kind == CHAOS_RV_GET ? rvt_field(r, "fence")
                                : rvt_field(r, "review.fence");
    snprintf(a->got_fence, sizeof(a->got_fence), "%s", v ? v : "");
}

/* Sends one attempt of c to instance i and logs it. */
static void attempt(chaos_rv_workload *w, const rv_call *c, int64_t req_no,
                    int try_no, int i, chaos_rv_attempt *a)
{
    const int decision = c->kind == CHAOS_RV_APPROVE
                         || c->kind == CHAOS_RV_REJECT;
    const int port = atomic_load(&w->stack->port[i]);
    rvt_resp r;

    memset(a, 0, sizeof(*a));
    a->req_no = req_no;
    a->attempt = try_no;
    a->instance = i;
    a->kind = c->kind;
    a->keyed = c->key[0] != '\0';
    a->doc_id = c->doc_id;
    a->review_id = c->review_id;
    snprintf(a->reviewer, sizeof(a->reviewer), "%s",
             c->reviewer != NULL ? c->reviewer : "");
    if (decision)
        atomic_fetch_add(&w->stack->inflight[i], 1);
    a->t0_us = chaos_now_us();
    memset(&r, 0, sizeof(r));
    if (port > 0) {
        rvt_call(port, c->method, c->path, c->token, c->body,
                 a->keyed ? c->key : NULL, &r);
    }
    a->t1_us = chaos_now_us();
    if (decision)
        atomic_fetch_sub(&w->stack->inflight[i], 1);
    a->status = r.status;
    read_answer(&r, a);
    rvt_resp_free(&r);
    chaos_rv_log_add(w->log, a);
}

/* 1 when a keyed request should be sent again after answer a. */
static int worth_retrying(const chaos_rv_workload *w, const rv_call *c,
                          const chaos_rv_attempt *a)
{
    const int again = chaos_rv_ambiguous(a->status)
                      || (a->status == 409
                          && strcmp(a->code, "LOCK_BUSY") == 0);

    if (!again || chaos_now_us() >= w->cfg.resolve_us)
        return 0;
    return c->key[0] != '\0' || c->kind == CHAOS_RV_GET;
}

/* Runs c to its final answer (see the top of the file) into *last;
 * returns the final status. */
static int run_call(chaos_rv_workload *w, const rv_call *c, chaos_rng *rng,
                    chaos_rv_attempt *last)
{
    const int64_t req_no = atomic_fetch_add(&w->log->next_req, 1);
    int i = c->instance;

    for (int try_no = 1;; try_no++) {
        attempt(w, c, req_no, try_no, i, last);
        if (!worth_retrying(w, c, last))
            break;
        chaos_sleep_us(chaos_rng_range(rng, RETRY_MIN_US, RETRY_MAX_US));
        i = (i + 1) % CHAOS_RV_INSTANCES;
    }
    if (c->key[0] != '\0' && chaos_rv_ambiguous(last->status))
        atomic_fetch_add(&w->unresolved, 1);
    return last->status;
}

/* ---- the client ---------------------------------------------------------- */

typedef struct client {
    chaos_rv_workload *w;
    int k;
    chaos_rng rng;
    int64_t n; /* documents so far */
} client;

typedef struct decider {
    client *cl;
    pthread_barrier_t *barrier;
    rv_call call;
    chaos_rng rng;
    chaos_rv_attempt last;
} decider;

static void *decider_main(void *p)
{
    decider *d = p;

    pthread_barrier_wait(d->barrier);
    run_call(d->cl->w, &d->call, &d->rng, &d->last);
    return NULL;
}

/* The i-th concurrent decision on review_id. */
static void decider_init(client *cl, decider *d, int i, int64_t doc_id,
                         int64_t review_id)
{
    chaos_rv_workload *w = cl->w;
    const int approve = chaos_rng_range(&cl->rng, 0, 1);
    const int keyed = chaos_rng_range(&cl->rng, 0, 1);

    memset(d, 0, sizeof(*d));
    d->cl = cl;
    chaos_rng_seed(&d->rng, chaos_rng_next(&cl->rng));
    d->call.kind = approve ? CHAOS_RV_APPROVE : CHAOS_RV_REJECT;
    d->call.method = "POST";
    snprintf(d->call.path, sizeof(d->call.path), "/v1/reviews/%lld/%s",
             (long long)review_id, approve ? "approve" : "reject");
    d->call.reviewer = i % 2 == 0 ? "bob" : "carol";
    d->call.token = i % 2 == 0 ? w->bob : w->carol;
    d->call.body = approve ? (i % 4 < 2 ? NULL : "{\"comment\":\"fine\"}")
                           : "{\"comment\":\"needs work\"}";
    d->call.instance = i % CHAOS_RV_INSTANCES;
    d->call.doc_id = doc_id;
    d->call.review_id = review_id;
    if (keyed) {
        snprintf(d->call.key, sizeof(d->call.key), "%s-c%d-r%lld-d%d",
                 w->cfg.phase, cl->k, (long long)review_id, i);
    }
}

/* Races the decisions on review_id; returns the review's status as the
 * answers show it ("" when no answer showed it). */
static void race(client *cl, int64_t doc_id, int64_t review_id, char *status,
                 size_t len)
{
    const int n = cl->w->cfg.deciders;
    decider d[DECIDERS_MAX];
    pthread_t t[DECIDERS_MAX];
    pthread_barrier_t barrier;
    int started = 0;

    status[0] = '\0';
    pthread_barrier_init(&barrier, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) {
        decider_init(cl, &d[i], i, doc_id, review_id);
        d[i].barrier = &barrier;
    }
    for (int i = 0; i < n; i++) {
        if (pthread_create(&t[i], NULL, decider_main, &d[i]) != 0) {
            /* The barrier would never open. */
            fprintf(stderr, "chaos-rv: cannot start a decider thread\n");
            abort();
        }
        started++;
    }
    for (int i = 0; i < started; i++) {
        pthread_join(t[i], NULL);
        if (d[i].last.status == 200)
            snprintf(status, len, "%s", d[i].last.got_status);
    }
    pthread_barrier_destroy(&barrier);
}

/* A request of the client to a random instance. */
static void call_init(client *cl, rv_call *c, chaos_rv_kind kind,
                      const char *method, const char *token)
{
    memset(c, 0, sizeof(*c));
    c->kind = kind;
    c->method = method;
    c->token = token;
    c->instance = (int)chaos_rng_range(&cl->rng, 0, CHAOS_RV_INSTANCES - 1);
}

/* Asks for the review's status (retried while unknown). */
static void review_status(client *cl, int64_t review_id, char *status,
                          size_t len)
{
    rv_call c;
    chaos_rv_attempt a;

    call_init(cl, &c, CHAOS_RV_GET, "GET", cl->w->bob);
    snprintf(c.path, sizeof(c.path), "/v1/reviews/%lld", (long long)review_id);
    c.review_id = review_id;
    run_call(cl->w, &c, &cl->rng, &a);
    snprintf(status, len, "%s", a.status == 200 ? a.got_status : "");
}

/* Creates the client's next document; returns its id or 0. */
static int64_t create_doc(client *cl)
{
    chaos_rv_workload *w = cl->w;
    char body[160];
    rv_call c;
    chaos_rv_attempt a;

    call_init(cl, &c, CHAOS_RV_CREATE, "POST", w->author_tok[cl->k]);
    cl->n++;
    snprintf(body, sizeof(body),
             "{\"title\":\"chaos %s c%d #%lld\","
             "\"content\":\"Text %lld of client %d.\"}",
             w->cfg.phase, cl->k, (long long)cl->n, (long long)cl->n, cl->k);
    snprintf(c.path, sizeof(c.path), "/v1/documents");
    c.body = body;
    snprintf(c.key, sizeof(c.key), "%s-c%d-create%lld", w->cfg.phase, cl->k,
             (long long)cl->n);
    return run_call(w, &c, &cl->rng, &a) == 201 ? a.got_doc_id : 0;
}

/* Submits doc_id (the round-th time); returns the review id or 0. */
static int64_t submit_doc(client *cl, int64_t doc_id, int round)
{
    chaos_rv_workload *w = cl->w;
    rv_call c;
    chaos_rv_attempt a;

    call_init(cl, &c, CHAOS_RV_SUBMIT, "POST", w->author_tok[cl->k]);
    snprintf(c.path, sizeof(c.path), "/v1/documents/%lld/submit",
             (long long)doc_id);
    snprintf(c.key, sizeof(c.key), "%s-c%d-submit%lld-%d", w->cfg.phase, cl->k,
             (long long)doc_id, round);
    c.doc_id = doc_id;
    return run_call(w, &c, &cl->rng, &a) == 201 ? a.got_review_id : 0;
}

/* One document's life: submit, race, and once more if rejected. */
static void one_document(client *cl, int64_t doc_id)
{
    char status[16];

    for (int round = 0; round < 2; round++) {
        const int64_t review_id = submit_doc(cl, doc_id, round);

        if (review_id == 0)
            return;
        race(cl, doc_id, review_id, status, sizeof(status));
        if (status[0] == '\0')
            review_status(cl, review_id, status, sizeof(status));
        if (strcmp(status, "rejected") != 0)
            return;
    }
}

static void *client_main(void *p)
{
    client *cl = p;

    while (chaos_now_us() < cl->w->cfg.until_us) {
        const int64_t doc_id = create_doc(cl);

        if (doc_id > 0)
            one_document(cl, doc_id);
        else
            chaos_sleep_us(RETRY_MAX_US);
    }
    free(cl);
    return NULL;
}

/* ---- start and join ------------------------------------------------------ */

static void workload_free(chaos_rv_workload *w)
{
    for (int k = 0; k < CHAOS_CLIENTS_MAX; k++)
        free(w->author_tok[k]);
    free(w->bob);
    free(w->carol);
    free(w);
}

static int make_tokens(chaos_rv_workload *w)
{
    char sub[32];

    w->bob = rvt_token("bob", "reviewer", 24 * 3600);
    w->carol = rvt_token("carol", "reviewer", 24 * 3600);
    for (int k = 0; k < w->cfg.clients; k++) {
        snprintf(sub, sizeof(sub), "author%d", k);
        w->author_tok[k] = rvt_token(sub, "author", 24 * 3600);
        if (w->author_tok[k] == NULL)
            return -1;
    }
    return w->bob != NULL && w->carol != NULL ? 0 : -1;
}

chaos_rv_workload *chaos_rv_workload_start(const chaos_rv_workload_cfg *cfg,
                                           chaos_rv_stack *stack,
                                           chaos_rv_log *log)
{
    chaos_rv_workload *w = calloc(1, sizeof(*w));

    if (w == NULL || cfg->clients < 1 || cfg->clients > CHAOS_CLIENTS_MAX
        || cfg->deciders < 2 || cfg->deciders > DECIDERS_MAX) {
        free(w);
        fprintf(stderr, "chaos-rv: bad workload configuration\n");
        return NULL;
    }
    w->cfg = *cfg;
    w->stack = stack;
    w->log = log;
    if (make_tokens(w) != 0) {
        fprintf(stderr, "chaos-rv: cannot make tokens\n");
        workload_free(w);
        return NULL;
    }
    for (int k = 0; k < cfg->clients; k++) {
        client *cl = calloc(1, sizeof(*cl));

        if (cl == NULL)
            break;
        cl->w = w;
        cl->k = k;
        chaos_rng_seed(&cl->rng,
                       cfg->seed
                           ^ (0x9e3779b97f4a7c15ull * (uint64_t)(k + 1)));
        if (pthread_create(&w->threads[k], NULL, client_main, cl) != 0) {
            free(cl);
            break;
        }
        w->started++;
    }
    if (w->started < cfg->clients) {
        fprintf(stderr, "chaos-rv: started %d of %d clients\n", w->started,
                cfg->clients);
    }
    return w;
}

int chaos_rv_workload_join(chaos_rv_workload *w)
{
    int unresolved;

    for (int k = 0; k < w->started; k++)
        pthread_join(w->threads[k], NULL);
    unresolved = atomic_load(&w->unresolved);
    if (w->started < w->cfg.clients)
        unresolved++; /* the run is not what was asked for: fail it */
    workload_free(w);
    return unresolved;
}
