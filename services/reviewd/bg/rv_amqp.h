/*
 * rv_amqp.h: one AMQP 0-9-1 connection to RabbitMQ for publishing with
 * publisher confirms (rabbitmq-c).
 *
 * The outbox relay (rv_relay.c) owns one rv_amqp.  rv_amqp_connect opens
 * the socket within a timeout, logs in, opens channel 1, puts it in
 * confirm mode and declares the durable topic exchange (with its
 * alternate exchange "<exchange>.unrouted" and that queue, rv_amqp.c)
 * and the configured queues, so a connected rv_amqp is ready to publish.  Publishing is split in two so that a
 * batch is pipelined: rv_amqp_publish sends one message and returns its
 * delivery tag (1, 2, ... on each connection), and rv_amqp_wait_confirms
 * reads the broker's acks and nacks until every tag sent is settled.
 * Any failure closes the connection (the caller connects again later): a
 * channel in an unknown state is never reused.  rv_amqp_errmsg says what
 * failed, with host:port.
 *
 * Ownership: rv_amqp_new copies the URL, the exchange name, the TLS
 * settings and the queue list;
 * rv_amqp_free closes and frees.  Threads: an rv_amqp belongs to one
 * thread.
 */
#ifndef RV_AMQP_H
#define RV_AMQP_H

#include <stddef.h>
#include <stdint.h>

typedef struct rv_amqp rv_amqp;

/* The settlement of one published message. */
typedef enum rv_amqp_confirm {
    RV_AMQP_PENDING = 0,
    RV_AMQP_ACKED,
    RV_AMQP_NACKED,
    RV_AMQP_RETURNED /* unroutable: basic.return came before the ack */
} rv_amqp_confirm;

/* How many queues REVIEWD_AMQP_QUEUES may name. */
#define RV_AMQP_MAX_QUEUES 8

/* An unconnected publisher for url (amqp[s]://user:pass@host:port/vhost)
 * and exchange, with tls (svc_amqp_tls, copied; NULL for none) and
 * queues, "queue:binding_key,..." (NULL or "": none; binding keys are
 * topic patterns).  Returns NULL on allocation failure, a URL that does
 * not parse or a malformed queue list. */
struct svc_amqp_tls;
rv_amqp *rv_amqp_new(const char *url, const char *exchange,
                     const struct svc_amqp_tls *tls, const char *queues);

/* 0 if queues is a well-formed REVIEWD_AMQP_QUEUES value (see above, at
 * most RV_AMQP_MAX_QUEUES entries), -1 if not.  For the configuration. */
int rv_amqp_queues_check(const char *queues);

/* 1 if the topic pattern (words split by '.', '*' one word, '#' zero or
 * more) matches routing_key.  Exposed for unit tests. */
int rv_amqp_topic_match(const char *pattern, const char *routing_key);
void rv_amqp_free(rv_amqp *a);

/* Connects as described above within timeout_ms (also the bound of every
 * later RPC).  Returns 0 or -1. */
int rv_amqp_connect(rv_amqp *a, int timeout_ms);
/* Closes the connection (politely if it is still up). */
void rv_amqp_close(rv_amqp *a);
int rv_amqp_connected(const rv_amqp *a);
/* 1 if the last connect declared the exchange with its alternate
 * exchange; 0 if the exchange existed without one (events of keys no
 * queue binds are then returned, never dropped). */
int rv_amqp_has_ae(const rv_amqp *a);

/*
 * Publishes body[0..len) with routing_key: persistent (delivery mode 2),
 * content_type application/json, message_id as given, always mandatory
 * (a message no queue takes is returned, see rv_amqp_wait_confirms).  *tag receives the delivery
 * tag.  Returns 0, or -1 (the connection is then closed).
 */
int rv_amqp_publish(rv_amqp *a, const char *routing_key,
                    const char *message_id, const char *body, size_t len,
                    uint64_t *tag);

/*
 * Reads confirms until every tag in first_tag..last_tag is settled or
 * timeout_ms passes; states[tag - first_tag] is set for each.  A message
 * the broker returned is found by its message_id among ids[0..n) (the
 * message_id of each tag, in tag order) and set RV_AMQP_RETURNED.
 * Returns 0 when all are settled, -1 on timeout or a broken connection
 * (then closed; states keeps what was settled before).
 */
int rv_amqp_wait_confirms(rv_amqp *a, uint64_t first_tag, uint64_t last_tag,
                          const char *const *ids, rv_amqp_confirm *states,
                          int timeout_ms);

/* Checks without blocking whether the broker has closed the connection
 * (a restart, a kill).  Returns 1 if it is still usable, 0 if not (it is
 * then closed). */
int rv_amqp_alive(rv_amqp *a);

/* The socket, for poll(2), or -1 when closed. */
int rv_amqp_fd(const rv_amqp *a);

#ifdef REVIEWD_TESTING
/* Test builds: shuts the socket down without telling anyone, as a broker
 * that died unseen would leave it; the next call on it fails. */
void rv_amqp_test_break(rv_amqp *a);
#endif

/* "host:port" and the last failure. */
const char *rv_amqp_endpoint(const rv_amqp *a);
const char *rv_amqp_errmsg(const rv_amqp *a);

#endif /* RV_AMQP_H */
