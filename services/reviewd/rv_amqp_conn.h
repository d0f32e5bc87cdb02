/*
 * rv_amqp_conn.h: the part of an AMQP 0-9-1 client connection
 * (rabbitmq-c) that reviewd's publisher and kh-indexer's consumer share:
 * the URL, a bounded connect and login, channel 1, and what failed.
 *
 * The outbox relay's publisher (rv_amqp.c) and kh-indexer's consumer
 * (services/indexer/kh_consumer.c, which compiles this file in as it does
 * rv_log.c) each embed one rv_amqp_conn and add only what is theirs on
 * top: confirm mode and publishing, or the queue topology, consuming and
 * acks.  What they share, and what this module guarantees:
 *   - every rabbitmq-c call that can block is bounded by the one timeout
 *     given to rv_amqp_conn_open: the socket connect by
 *     amqp_socket_open_noblock, the handshake and every later RPC (login,
 *     channel.open and whatever the owner sends afterwards) by
 *     amqp_set_handshake_timeout / amqp_set_rpc_timeout.  A thread stuck
 *     on a silent broker would stall the outbox or the indexer.
 *     Heartbeats are off: rabbitmq-c sends them only from inside its
 *     calls, so the owners watch the socket instead;
 *   - state: conn == NULL means closed.  Every failure goes through
 *     rv_amqp_conn_fail (or _rpc), which records the message and drops the
 *     connection, so a connection in an unknown protocol state is never
 *     used again; the owner connects afresh later;
 *   - err always names the endpoint: "amqp host:port: what: why".
 *
 * Ownership: the owner embeds the struct, rv_amqp_conn_init copies the URL
 * and rv_amqp_conn_clear closes and frees it.  The owner may read conn
 * (to call rabbitmq-c) and must not free it.  Threads: one thread, the
 * owner's.
 */
#ifndef RV_AMQP_CONN_H
#define RV_AMQP_CONN_H

#include <amqp.h>
#include <sys/time.h>

/* The one channel each connection uses. */
#define RV_AMQP_CONN_CHANNEL 1

typedef struct rv_amqp_conn {
    char *url_copy;                 /* amqp_parse_url writes into it */
    struct amqp_connection_info info;
    amqp_connection_state_t conn;   /* NULL: closed */
    char endpoint[300];             /* "host:port" */
    char err[520];                  /* the last failure, "" after success */
} rv_amqp_conn;

/* Copies and parses url (amqp://user:pass@host:port/vhost) into c, which
 * starts closed.  Returns 0, or -1 on allocation failure or a URL that
 * does not parse (then nothing is held). */
int rv_amqp_conn_init(rv_amqp_conn *c, const char *url);
/* Closes (politely when still up) and frees what init made; a zeroed or
 * cleared c is fine. */
void rv_amqp_conn_clear(rv_amqp_conn *c);

/*
 * Closes any earlier connection, then connects within timeout_ms (which
 * also bounds every later RPC on this connection), logs in with the URL's
 * credentials and vhost, and opens RV_AMQP_CONN_CHANNEL.  Returns 0 (err
 * is then ""), or -1 with err set and the connection closed.
 */
int rv_amqp_conn_open(rv_amqp_conn *c, int timeout_ms);
/* Best-effort channel.close and connection.close, bounded by the RPC
 * timeout, then drops the socket.  Nothing to do when closed. */
void rv_amqp_conn_close(rv_amqp_conn *c);
/* Drops the connection without talking to the broker. */
void rv_amqp_conn_drop(rv_amqp_conn *c);

/* Records "amqp host:port: <fmt...>" as the failure. */
__attribute__((format(printf, 2, 3)))
void rv_amqp_conn_set_err(rv_amqp_conn *c, const char *fmt, ...);
/* Records "what: <rabbitmq-c's text for status>", drops the connection
 * and returns -1. */
int rv_amqp_conn_fail(rv_amqp_conn *c, const char *what, int status);
/* 0 if the last RPC on the connection succeeded; otherwise records why
 * (a library error, or the broker's refusal with its method id), drops
 * the connection and returns -1. */
int rv_amqp_conn_rpc(rv_amqp_conn *c, const char *what);
/* The same for a reply a call returned directly (amqp_login). */
int rv_amqp_conn_reply(rv_amqp_conn *c, const char *what,
                       amqp_rpc_reply_t r);

/* ms as a struct timeval, for rabbitmq-c's timeouts. */
void rv_amqp_conn_timeval(int ms, struct timeval *tv);

#endif /* RV_AMQP_CONN_H */
