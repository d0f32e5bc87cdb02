/*
 * kh_consumer.h: kh-indexer's RabbitMQ side: one AMQP connection that
 * consumes the durable queue kh.indexer with manual acknowledgements.
 *
 * kh_consumer_connect opens the socket (bounded by a timeout), logs in,
 * opens channel 1, declares the durable topic exchange kh.documents (the
 * same declaration as reviewd's relay, so either may start first), the
 * durable queue kh.indexer bound to it with routing key
 * document.approved, sets the prefetch limit (basic.qos) and starts
 * consuming with no_ack = false.  The broker then keeps at most prefetch
 * unacknowledged messages with us, and redelivers every one of them
 * (redelivered = true) if the channel or connection goes away before we
 * ack: that is what makes a crash between the indexing commit and the ack
 * harmless (kh_store.h).
 *
 * Any failure closes the connection; the caller connects again with a
 * backoff.  kh_consumer_errmsg says what failed, with host:port.
 *
 * Ownership: kh_consumer_new copies the URL; a delivery's body belongs to
 * the consumer until the next call.  Threads: one thread.
 */
#ifndef KH_CONSUMER_H
#define KH_CONSUMER_H

#include <stddef.h>
#include <stdint.h>

#define KH_EXCHANGE "kh.documents"
#define KH_QUEUE "kh.indexer"
#define KH_BINDING "document.approved"

typedef struct kh_consumer kh_consumer;

/* One message taken from the queue. */
typedef struct kh_delivery {
    uint64_t tag;
    int redelivered;
    const char *body; /* borrowed until the next kh_consumer_* call */
    size_t len;
    char message_id[64]; /* "" when the message has none */
} kh_delivery;

/* exchange and queue are KH_EXCHANGE and KH_QUEUE unless configured
 * otherwise (tests sharing one broker use names of their own); all three
 * strings are copied, and so is tls (used for amqps:// only; NULL: no CA
 * file or client certificate, svc_amqp_conn.h).  Returns NULL on allocation failure or a URL that
 * does not parse. */
struct svc_amqp_tls;
kh_consumer *kh_consumer_new(const char *url, const char *exchange,
                             const char *queue, int prefetch,
                             const struct svc_amqp_tls *tls);
void kh_consumer_free(kh_consumer *c);

/* Connects and starts consuming within timeout_ms.  Returns 0 or -1. */
int kh_consumer_connect(kh_consumer *c, int timeout_ms);
void kh_consumer_close(kh_consumer *c);
int kh_consumer_connected(const kh_consumer *c);
/* 1 if the last connect declared the exchange with its alternate
 * exchange, 0 if the exchange existed without one (kh_consumer.c). */
int kh_consumer_has_ae(const kh_consumer *c);

/*
 * Waits up to timeout_ms for a message.  Returns 1 with *d filled, 0 when
 * none came in time, -1 when the connection failed (it is then closed).
 */
int kh_consumer_next(kh_consumer *c, int timeout_ms, kh_delivery *d);

/* Acknowledges, or rejects with requeue, one delivery.  Returns 0 or -1
 * (the connection is then closed). */
int kh_consumer_ack(kh_consumer *c, uint64_t tag);
int kh_consumer_requeue(kh_consumer *c, uint64_t tag);

/* Acknowledges every delivery of this connection up to and including
 * tag in one frame (basic.ack with multiple set): for a batch whose
 * deliveries all succeeded, when every earlier one is settled already.
 * Returns 0 or -1 (the connection is then closed). */
int kh_consumer_ack_through(kh_consumer *c, uint64_t tag);

#ifdef KH_TESTING
/* Closes channel 1 without acknowledging what is outstanding, then the
 * connection: the broker redelivers.  The redelivery test hook; it exists
 * only in test builds (KH_TESTING). */
void kh_consumer_drop_channel(kh_consumer *c);
#endif

const char *kh_consumer_errmsg(const kh_consumer *c);

#endif /* KH_CONSUMER_H */
