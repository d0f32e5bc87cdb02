/*
 * kh_main.c: kh-indexer, the consumer that turns document.approved events
 * into chunks and full-text index data, exactly once per event.
 *
 *   kh-indexer          run until SIGTERM or SIGINT
 *   kh-indexer version
 *
 * Configuration (environment):
 *   DATABASE_URL          required: the database reviewd writes
 *   AMQP_URL              required: the broker reviewd's relay publishes to
 *   CONTENT_STORE, MONGO_URL   where reviewd keeps the text: pg (default)
 *                         or mongo, read exactly as reviewd reads them
 *                         (svc_content_env.h)
 *   KH_EXCHANGE, KH_QUEUE the exchange to bind to and the queue to
 *                         consume (kh.documents, kh.indexer); other names
 *                         let tests share a broker without sharing a queue
 *   KH_CHUNK_TARGET       chunk size in bytes (1000; 16..1000000)
 *   KH_CHUNK_OVERLAP      overlap in bytes (100; below KH_CHUNK_TARGET / 2)
 *   KH_PREFETCH           unacknowledged messages held at once (64)
 *   KH_BATCH              events applied per transaction, at most (64;
 *                         a batch is what is already waiting, never a
 *                         wait for more, and never above KH_PREFETCH)
 *   EMBED_COMMAND         when set, each chunk is piped to it (kh_embed.h)
 *   KH_EMBED_TIMEOUT_MS   per chunk (10000)
 *   KH_RETRY_MS           pause before a failed event goes back (1000)
 *   KH_BACKOFF_MAX_MS     cap of the broker reconnect backoff (5000)
 *   KH_LOG_FILE, KH_LOG_LEVEL   JSON-lines log (stderr, info)
 *   AMQP_CACERT, AMQP_CERT, AMQP_KEY   TLS for an amqps:// AMQP_URL: the
 *                         CA file the broker is verified against (the
 *                         system's store without it) and an optional
 *                         client certificate (svc_amqp_conn.h)
 *   KH_TEST_DROP_ACKS=N   kh-indexer-testing only (KH_TESTING): after
 *                         applying each of the first N deliveries, close
 *                         the channel instead of acking, which makes the
 *                         broker redeliver them; kh-indexer has no such
 *                         variable
 *
 * The loop is single-threaded: take a message and whatever else the
 * broker has already sent (up to KH_BATCH), apply them in one PostgreSQL
 * transaction in two round trips (kh_store_apply_many; event by event in
 * savepoints when the batch cannot go that way), and only after that
 * commit acknowledge them, in delivery order.  One commit and two round
 * trips per batch instead of per event is what keeps the indexer ahead of
 * 1,000 approvals a second (docs/benchmarks.md); a quiet queue still
 * gets each event applied at once, since the batch never waits for more.
 * A failed event (database down, embedding command failing) is requeued
 * after KH_RETRY_MS, so it is retried without being lost; a malformed
 * message can never succeed and is logged and acknowledged.  Each
 * event_done line's "ms" is its batch's time in the database.  When the
 * broker goes away the indexer reconnects with a doubling backoff from
 * 100 ms up to KH_BACKOFF_MAX_MS, logging the outage once at each end.
 * Signals only set flags; the loop looks at them at least every 250 ms.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kh_consumer.h"
#include "kh_store_many.h"
#include "svc_amqp_conn.h"
#include "svc_env.h"
#include "svc_log.h"

#define KH_VERSION "0.1.0"
#define KH_POLL_MS 250
#define KH_BACKOFF_MIN_MS 100
#define KH_AMQP_TIMEOUT_MS 5000

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t reopen_requested;

typedef struct kh_config {
    const char *database_url;
    const char *amqp_url;
    const char *exchange;
    const char *queue;
    svc_amqp_tls tls; /* AMQP_CACERT, AMQP_CERT, AMQP_KEY */
    char *mongo_url;  /* malloc'd by svc_content_env_load */
    kh_store_opts store;
    int prefetch;
    int batch;
    int retry_ms;
    int backoff_max_ms;
#ifdef KH_TESTING
    int drop_acks;
#endif
    const char *log_file;
    int log_level;
} kh_config;

typedef struct kh_item kh_item;

typedef struct kh_indexer {
    kh_config cfg;
    svc_log *log;
    kh_consumer *amqp;
    kh_store *store;
    kh_item *items; /* cfg.batch of them, for handle_batch */
    kh_apply *work; /* the same number: their events and outcomes */
    int backoff_ms;
    int amqp_down_logged;
    int ae_warned; /* amqp_exchange_without_ae was logged */
#ifdef KH_TESTING
    int drops_left;
#endif
} kh_indexer;

static void on_signal(int sig)
{
    if (sig == SIGHUP)
        reopen_requested = 1;
    else
        stop_requested = 1;
}

/* svc_env_int into an int setting ([lo, hi] fits an int). */
static int env_int(const char *name, int lo, int hi, int *out, char *err,
                   size_t errlen)
{
    long long v = *out;

    if (svc_env_int(name, lo, hi, &v, err, errlen) != 0)
        return -1;
    *out = (int)v;
    return 0;
}

static int load_config(kh_config *cfg, char *err, size_t errlen)
{
    int target = 1000, overlap = 100;

    memset(cfg, 0, sizeof(*cfg));
    cfg->prefetch = 64;
    cfg->batch = 64;
    cfg->retry_ms = 1000;
    cfg->backoff_max_ms = 5000;
    cfg->store.embed_timeout_ms = 10000;
    cfg->store.pg_timeout_s = 5;
    cfg->database_url = svc_env_str("DATABASE_URL");
    cfg->amqp_url = svc_env_str("AMQP_URL");
    cfg->exchange = svc_env_str("KH_EXCHANGE") != NULL
                        ? svc_env_str("KH_EXCHANGE")
                        : KH_EXCHANGE;
    cfg->queue = svc_env_str("KH_QUEUE") != NULL ? svc_env_str("KH_QUEUE")
                                                 : KH_QUEUE;
    cfg->store.embed_command = svc_env_str("EMBED_COMMAND");
    cfg->log_file = svc_env_str("KH_LOG_FILE");
    cfg->log_level = svc_log_level_parse(svc_env_str("KH_LOG_LEVEL") != NULL
                                             ? svc_env_str("KH_LOG_LEVEL")
                                             : "info");
    if (cfg->database_url == NULL || cfg->amqp_url == NULL) {
        snprintf(err, errlen, "%s: required",
                 cfg->database_url == NULL ? "DATABASE_URL" : "AMQP_URL");
        return -1;
    }
    if (cfg->log_level < 0) {
        snprintf(err, errlen,
                 "KH_LOG_LEVEL: expected debug, info, warn or "
                 "error");
        return -1;
    }
    if (env_int("KH_CHUNK_TARGET", KH_CHUNK_TARGET_MIN, 1000000, &target, err,
                errlen)
        || env_int("KH_CHUNK_OVERLAP", 0, 499999, &overlap, err, errlen)
        || env_int("KH_PREFETCH", 1, 65535, &cfg->prefetch, err, errlen)
        || env_int("KH_BATCH", 1, 10000, &cfg->batch, err, errlen)
        || env_int("KH_EMBED_TIMEOUT_MS", 10, 600000,
                   &cfg->store.embed_timeout_ms, err, errlen)
        || env_int("KH_RETRY_MS", 0, 600000, &cfg->retry_ms, err, errlen)
        || env_int("KH_BACKOFF_MAX_MS", 10, 600000, &cfg->backoff_max_ms, err,
                   errlen))
        return -1;
#ifdef KH_TESTING
    if (env_int("KH_TEST_DROP_ACKS", 0, 1000000, &cfg->drop_acks, err, errlen))
        return -1;
#endif
    if (svc_amqp_tls_load(&cfg->tls, err, errlen) != 0
        || svc_content_env_load(&cfg->store.content_store, &cfg->mongo_url,
                                err, errlen)
               != 0)
        return -1;
    cfg->store.mongo_url = cfg->mongo_url;
    if (overlap >= target / 2) {
        snprintf(err, errlen,
                 "KH_CHUNK_OVERLAP: must be below half of "
                 "KH_CHUNK_TARGET (%d)",
                 target);
        return -1;
    }
    cfg->store.chunk.target_bytes = (size_t)target;
    cfg->store.chunk.overlap_bytes = (size_t)overlap;
    return 0;
}

static void sleep_ms(int ms)
{
    struct timespec ts;

    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    nanosleep(&ts, NULL); /* a signal cuts it short, which is wanted */
}

static double elapsed_ms(const struct timespec *since)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - since->tv_sec) * 1e3
           + (double)(now.tv_nsec - since->tv_nsec) / 1e6;
}

/* Connects to the broker, with the backoff after a failure.  Returns 1
 * when connected. */
static int ensure_broker(kh_indexer *ix)
{
    if (kh_consumer_connected(ix->amqp))
        return 1;
    if (kh_consumer_connect(ix->amqp, KH_AMQP_TIMEOUT_MS) != 0) {
        if (!ix->amqp_down_logged) {
            svc_log_write(ix->log, SVC_LOG_WARN, "amqp_down",
                          json_pack("{s:s}", "error",
                                    kh_consumer_errmsg(ix->amqp)));
            ix->amqp_down_logged = 1;
        }
        sleep_ms(ix->backoff_ms);
        ix->backoff_ms = ix->backoff_ms * 2 > ix->cfg.backoff_max_ms
                             ? ix->cfg.backoff_max_ms
                             : ix->backoff_ms * 2;
        return 0;
    }
    ix->amqp_down_logged = 0;
    ix->backoff_ms = KH_BACKOFF_MIN_MS;
    if (!kh_consumer_has_ae(ix->amqp) && !ix->ae_warned) {
        ix->ae_warned = 1;
        svc_log_write(ix->log, SVC_LOG_WARN, "amqp_exchange_without_ae",
                      json_pack("{s:s,s:s}", "exchange", ix->cfg.exchange,
                                "fix",
                                "delete the exchange (it is declared again "
                                "with alternate-exchange "
                                "<exchange>.unrouted), or give it a "
                                "RabbitMQ policy alternate-exchange"));
    }
    svc_log_write(ix->log, SVC_LOG_INFO, "consuming",
                  json_pack("{s:s,s:s,s:s,s:i}", "queue", ix->cfg.queue,
                            "exchange", ix->cfg.exchange, "binding",
                            KH_BINDING, "prefetch", ix->cfg.prefetch));
    return 1;
}

static void log_outcome(kh_indexer *ix, const kh_event *ev, int redelivered,
                        kh_outcome out, int chunks, double ms, const char *err)
{
    svc_log_write(ix->log, out == KH_FAILED ? SVC_LOG_WARN : SVC_LOG_INFO,
                  out == KH_FAILED ? "event_failed" : "event_done",
                  json_pack("{s:s,s:s,s:s,s:i,s:b,s:f,s:s?}", "event_id",
                            ev->event_id, "document_id", ev->document_id,
                            "outcome", kh_outcome_name(out), "chunks", chunks,
                            "redelivered", redelivered, "ms", ms, "error",
                            out == KH_FAILED ? err : NULL));
}

#ifdef KH_TESTING
/* The test hook of kh-indexer-testing: instead of the first N acks,
 * close the channel so the broker redelivers.  Returns 1 when it did. */
static int hook_drop_ack(kh_indexer *ix)
{
    if (ix->drops_left <= 0)
        return 0;
    ix->drops_left--;
    kh_consumer_drop_channel(ix->amqp);
    svc_log_write(ix->log, SVC_LOG_INFO, "test_channel_dropped", NULL);
    return 1;
}

static int hook_drops_pending(const kh_indexer *ix)
{
    return ix->drops_left > 0;
}
#else
static int hook_drop_ack(kh_indexer *ix)
{
    (void)ix;
    return 0;
}

static int hook_drops_pending(const kh_indexer *ix)
{
    (void)ix;
    return 0;
}
#endif

/* One delivery of a batch, between its work and its settlement: the
 * event and what applying it did are work[i] of the same index. */
struct kh_item {
    uint64_t tag;
    int redelivered;
};

/* A malformed message can never succeed: retrying would block the
 * queue, so it is logged and acknowledged at once.  Returns 1 if d was
 * malformed (and settled). */
static int drop_malformed(kh_indexer *ix, const kh_delivery *d, kh_event *ev)
{
    char err[400];

    if (kh_event_parse(d->body, d->len, ev, err, sizeof(err)) == 0) {
        if (d->message_id[0] != '\0'
            && strcmp(d->message_id, ev->event_id) != 0) {
            svc_log_write(ix->log, SVC_LOG_WARN, "message_id_mismatch",
                          json_pack("{s:s,s:s}", "message_id", d->message_id,
                                    "event_id", ev->event_id));
        }
        return 0;
    }
    svc_log_write(ix->log, SVC_LOG_ERROR, "event_malformed",
                  json_pack("{s:s,s:s}", "message_id", d->message_id, "error",
                            err));
    kh_consumer_ack(ix->amqp, d->tag);
    return 1;
}

/* Logs each item's outcome and settles it: ack (the whole batch in one
 * frame when nothing failed), or requeue a failure after KH_RETRY_MS
 * (once for the batch), or (test builds only) drop the channel so the
 * broker redelivers everything unacknowledged.  ms is the batch's time,
 * logged with each of its events. */
static void settle_batch(kh_indexer *ix, int n, double ms)
{
    const kh_item *items = ix->items;
    const kh_apply *work = ix->work;
    int i, failed = 0, rc;

    for (i = 0; i < n; i++) {
        log_outcome(ix, &work[i].ev, items[i].redelivered, work[i].out,
                    work[i].chunks, ms, work[i].err);
        failed += work[i].out == KH_FAILED;
    }
    if (failed > 0)
        sleep_ms(ix->cfg.retry_ms);
    if (n > 0 && failed == 0 && !hook_drops_pending(ix)) {
        /* Every delivery before this batch is settled already: one frame
         * acknowledges the whole batch. */
        rc = kh_consumer_ack_through(ix->amqp, items[n - 1].tag);
        i = n;
    } else {
        rc = 0;
        i = 0;
    }
    for (; rc == 0 && i < n; i++)
        if (work[i].out == KH_FAILED)
            rc = kh_consumer_requeue(ix->amqp, items[i].tag);
        else if (hook_drop_ack(ix))
            return;
        else
            rc = kh_consumer_ack(ix->amqp, items[i].tag);
    if (rc != 0) {
        svc_log_write(ix->log, SVC_LOG_WARN, "amqp_settle_failed",
                      json_pack("{s:s}", "error",
                                kh_consumer_errmsg(ix->amqp)));
    }
}

/* Takes d and whatever else is already waiting, up to KH_BATCH
 * deliveries, applies them all in one transaction (kh_store_apply_many),
 * and only after its commit settles them. */
static void handle_batch(kh_indexer *ix, kh_delivery *d)
{
    char why[400];
    struct timespec start;
    int n = 0, rc = 1;

    do {
        if (!drop_malformed(ix, d, &ix->work[n].ev)) {
            ix->items[n].tag = d->tag;
            ix->items[n].redelivered = d->redelivered;
            n++;
        }
        if (n < ix->cfg.batch)
            rc = kh_consumer_next(ix->amqp, 0, d);
    } while (n < ix->cfg.batch && rc > 0);
    clock_gettime(CLOCK_MONOTONIC, &start);
    if (kh_store_apply_many(ix->store, ix->work, (size_t)n, why, sizeof(why))
        != 0) {
        svc_log_write(ix->log, SVC_LOG_INFO, "batch_applied_singly",
                      json_pack("{s:i,s:s}", "events", n, "reason", why));
    }
    settle_batch(ix, n, elapsed_ms(&start));
}

static void run(kh_indexer *ix)
{
    kh_delivery d;
    int rc;

    while (!stop_requested) {
        if (reopen_requested) {
            reopen_requested = 0;
            svc_log_reopen(ix->log);
        }
        if (!ensure_broker(ix))
            continue;
        rc = kh_consumer_next(ix->amqp, KH_POLL_MS, &d);
        if (rc < 0) {
            svc_log_write(ix->log, SVC_LOG_WARN, "amqp_down",
                          json_pack("{s:s}", "error",
                                    kh_consumer_errmsg(ix->amqp)));
            ix->amqp_down_logged = 1;
        } else if (rc > 0) {
            handle_batch(ix, &d);
        }
    }
}

static void install_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Frees what serve built; any part may be NULL. */
static void indexer_close(kh_indexer *ix)
{
    kh_consumer_free(ix->amqp);
    kh_store_free(ix->store);
    svc_log_free(ix->log);
    free(ix->items);
    free(ix->work);
    free(ix->cfg.mongo_url);
}

/* The log, the consumer and the store.  Returns 0, or -1 with err set. */
static int indexer_open(kh_indexer *ix, char *err, size_t errlen)
{
    ix->log = svc_log_new(ix->cfg.log_file, (svc_log_level)ix->cfg.log_level,
                          err, errlen);
    if (ix->log == NULL)
        return -1;
    ix->amqp = kh_consumer_new(ix->cfg.amqp_url, ix->cfg.exchange,
                               ix->cfg.queue, ix->cfg.prefetch, &ix->cfg.tls);
    if (ix->amqp == NULL) {
        snprintf(err, errlen, "AMQP_URL does not parse, or out of memory");
        return -1;
    }
    /* More than the prefetch limit can never be waiting at once. */
    if (ix->cfg.batch > ix->cfg.prefetch)
        ix->cfg.batch = ix->cfg.prefetch;
    ix->items = calloc((size_t)ix->cfg.batch, sizeof(*ix->items));
    ix->work = calloc((size_t)ix->cfg.batch, sizeof(*ix->work));
    if (ix->items == NULL || ix->work == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    ix->store = kh_store_new(ix->cfg.database_url, &ix->cfg.store, err,
                             errlen);
    return ix->store != NULL ? 0 : -1;
}

static int serve(void)
{
    char err[512];
    kh_indexer ix;

    memset(&ix, 0, sizeof(ix));
    if (load_config(&ix.cfg, err, sizeof(err)) != 0
        || indexer_open(&ix, err, sizeof(err)) != 0) {
        fprintf(stderr, "kh-indexer: %s\n", err);
        indexer_close(&ix);
        return 1;
    }
    ix.backoff_ms = KH_BACKOFF_MIN_MS;
#ifdef KH_TESTING
    ix.drops_left = ix.cfg.drop_acks;
#endif
    install_signals();
    svc_log_write(
        ix.log, SVC_LOG_INFO, "starting",
        json_pack("{s:s,s:i,s:i,s:b,s:s}", "version", KH_VERSION,
                  "chunk_target", (int)ix.cfg.store.chunk.target_bytes,
                  "chunk_overlap", (int)ix.cfg.store.chunk.overlap_bytes,
                  "embed", ix.cfg.store.embed_command != NULL, "content_store",
                  kh_store_content_where(ix.store)));
    run(&ix);
    svc_log_write(ix.log, SVC_LOG_INFO, "stopped", NULL);
    indexer_close(&ix);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2
        && (strcmp(argv[1], "version") == 0
            || strcmp(argv[1], "--version") == 0)) {
        printf("kh-indexer %s\n", KH_VERSION);
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr,
                "usage: kh-indexer [version]\n(configuration comes "
                "from the environment; see services/indexer/kh_main.c)\n");
        return 2;
    }
    return serve();
}
