/*
 * rv_relay.h: the outbox relay, a thread that publishes kh_outbox rows
 * (sql/0004_outbox.sql) to RabbitMQ's kh.documents exchange.
 *
 * main starts it when AMQP_URL is set; without it events stay in the
 * outbox (API.md).  The relay never touches a request: a broker that is
 * down only makes the backlog grow and /readyz say amqp "down".
 * rv_relay.c explains the claim, the ordering and the reconnects.
 *
 * Ownership: rv_relay_start / rv_relay_stop (wakes and joins the thread,
 * closes its connections).  Threads: rv_relay_state and
 * rv_relay_stats_get are safe from any thread.
 */
#ifndef RV_RELAY_H
#define RV_RELAY_H

#include <stdint.h>

#include "core/rv_app.h"
#include "bg/rv_monitor.h"

typedef struct rv_relay rv_relay;

/* Counters since start, for /metrics. */
typedef struct rv_relay_stats {
    uint64_t publishes;  /* messages handed to the broker */
    uint64_t confirms;   /* of them, acked by the broker */
    uint64_t nacks;      /* of them, nacked (sent again later) */
    uint64_t reconnects; /* broker connections made after the first */
} rv_relay_stats;

/* Starts the thread; it connects on its own, so a broker that is down at
 * start delays nothing.  Returns NULL on failure. */
rv_relay *rv_relay_start(rv_app *app);
void rv_relay_stop(rv_relay *r);

/* RV_DEP_OK while connected to the broker, RV_DEP_DOWN otherwise, and
 * RV_DEP_OFF for r == NULL (AMQP_URL unset). */
rv_dep_state rv_relay_state(rv_relay *r);

/* Zeroes *out for r == NULL. */
void rv_relay_stats_get(rv_relay *r, rv_relay_stats *out);

#endif /* RV_RELAY_H */
