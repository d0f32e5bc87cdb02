/*
 * ev_broker.h: the RabbitMQ side of bench_events: a test consumer that
 * timestamps every document event it receives, and the limit, a plain
 * rabbitmq-c publisher with publisher confirms.
 *
 * The consumer binds an exclusive, auto-deleted queue of its own to the
 * relay's exchange (kh.documents) with one routing key, consumes it with
 * no_ack on its own connection and thread, and records for each message
 * the document id found in its body and CLOCK_REALTIME at receipt (the
 * clock PostgreSQL's timestamps are on, so the two can be subtracted).
 * Receipts go into an array allocated up front; the count is published
 * with release order after each one is written, so the main thread may
 * read receipts [0, count) while the consumer runs.
 *
 * The limit publishes the same kind of message the relay does (persistent,
 * application/json, a message_id, the same body) to an exchange and a
 * durable queue of its own, which it deletes afterwards: first one message
 * at a time, waiting for each confirm (the latency of one publish), then in
 * batches whose confirms are awaited together (the relay's mode).  So the
 * relay's figures read as ratios of what the same broker gives a client
 * that does nothing else.
 *
 * Ownership: ev_consumer_start copies its strings; ev_consumer_free stops
 * the thread and frees everything.  Threads: an ev_consumer is driven from
 * one thread; its own thread only appends receipts.
 */
#ifndef EV_BROKER_H
#define EV_BROKER_H

#include <stddef.h>
#include <stdint.h>

#include "bench_samples.h"

typedef struct ev_receipt {
    long long doc_id;
    int64_t at_us; /* CLOCK_REALTIME, microseconds */
} ev_receipt;

typedef struct ev_consumer ev_consumer;

/*
 * Connects to url, declares exchange (durable topic, as the relay does),
 * binds a queue of its own with binding_key and starts consuming on a new
 * thread, with room for cap receipts (more are counted as dropped).
 * Returns the consumer, or NULL with err set.
 */
ev_consumer *ev_consumer_start(const char *url, const char *exchange,
                               const char *binding_key, size_t cap, char *err,
                               size_t errlen);

/* Receipts recorded so far; *n is their number (acquire order). */
const ev_receipt *ev_consumer_receipts(ev_consumer *c, size_t *n);

/* Messages received beyond the capacity, and messages whose body held no
 * document id. */
size_t ev_consumer_dropped(const ev_consumer *c);
size_t ev_consumer_unparsed(const ev_consumer *c);

/* The consumer's failure, or "" while it works. */
const char *ev_consumer_errmsg(ev_consumer *c);

/* Stops the thread, closes the connection, frees.  NULL does nothing. */
void ev_consumer_free(ev_consumer *c);

typedef struct ev_limit {
    long long each_n;
    double each_per_s;      /* one publish, then its confirm */
    bench_samples each_lat; /* publish-to-confirm, per message */
    long long batch_n;
    int batch;
    double batch_per_s; /* batch publishes, then their confirms */
} ev_limit;

/*
 * Measures the limit on url: each_n messages confirmed one at a time,
 * then batch_n messages in batches of batch.  body is published as each
 * message's body.  Returns 0 with *out filled (free out->each_lat with
 * bench_samples_free), or -1 with err set.
 */
int ev_limit_measure(const char *url, const char *body, long long each_n,
                     long long batch_n, int batch, ev_limit *out, char *err,
                     size_t errlen);

#endif /* EV_BROKER_H */
