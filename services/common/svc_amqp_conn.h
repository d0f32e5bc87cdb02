/*
 * svc_amqp_conn.h: the part of an AMQP 0-9-1 client connection
 * (rabbitmq-c) that reviewd's publisher and kh-indexer's consumer share:
 * the URL, a bounded connect and login, channel 1, and what failed.
 *
 * reviewd's outbox publisher and kh-indexer's consumer each own one
 * svc_amqp_conn (part of svc_common) and add only what is theirs on
 * top: confirm mode and publishing, or the queue topology, consuming and
 * acks.  What they share, and what this module guarantees:
 *   - every rabbitmq-c call that can block is bounded by the one timeout
 *     given to svc_amqp_conn_open: the socket connect by
 *     amqp_socket_open_noblock, the handshake and every later RPC (login,
 *     channel.open and whatever the owner sends afterwards) by
 *     amqp_set_handshake_timeout / amqp_set_rpc_timeout.  A thread stuck
 *     on a silent broker would stall the outbox or the indexer.
 *     rabbitmq-c leaves some waits unbounded (every send's POLLOUT wait,
 *     amqp_read_message), so the owner runs each blocking step between
 *     svc_amqp_conn_step_begin and _end: a step that outlives its bound
 *     has its socket shut down by this module's watchdog thread, fails
 *     with "no answer within N ms", and the connection is dropped.
 *     Heartbeats are off: rabbitmq-c sends them only from inside its
 *     calls, so the owners watch the socket instead;
 *   - state: svc_amqp_conn_state() == NULL means closed.  Every failure
 *     goes through svc_amqp_conn_fail (or _rpc), which records the message
 *     and drops the connection, so a connection in an unknown protocol state is never
 *     used again; the owner connects afresh later;
 *   - the error text always names the endpoint: "amqp host:port: what: why";
 *   - an amqps:// URL is TLS or nothing: rabbitmq-c's OpenSSL socket,
 *     the peer's chain verified against svc_amqp_tls's CA file (or the
 *     system's CAs when none is given) and its name against the URL's
 *     host; a client certificate is presented when one is configured.  A
 *     broker that fails the check is refused at connect ("tls handshake:
 *     ..."), and no credentials are sent to it.  amqp:// stays plain.
 *
 * Ownership: the owner holds the opaque svc_amqp_conn from
 * svc_amqp_conn_new until svc_amqp_conn_free.  It reaches rabbitmq-c's
 * connection only through svc_amqp_conn_state (borrowed, never freed by
 * the owner) and the failure text through svc_amqp_conn_errmsg.
 * Threads: one thread, the owner's, calls these functions; each
 * connection object also runs a watchdog thread of its own (started by
 * svc_amqp_conn_new, joined by svc_amqp_conn_free) that only ever shuts
 * the socket of an overrunning step down.
 */
#ifndef SVC_AMQP_CONN_H
#define SVC_AMQP_CONN_H

#include <amqp.h>
#include <stddef.h>
#include <sys/time.h>

/* The one channel each connection uses. */
#define SVC_AMQP_CONN_CHANNEL 1

typedef struct svc_amqp_conn svc_amqp_conn;

/* The TLS settings of an amqps:// connection, read by both services from
 * the same variables (svc_amqp_tls_load): AMQP_CACERT, the PEM file of
 * the CA(s) that must have signed the broker's certificate ("" : the
 * system's store); AMQP_CERT and AMQP_KEY, the client certificate and its
 * key, both or neither ("": none). */
typedef struct svc_amqp_tls {
    char cacert[512];
    char cert[512];
    char key[512];
} svc_amqp_tls;

/* Reads AMQP_CACERT, AMQP_CERT and AMQP_KEY into *t and checks that each
 * file given can be read.  Returns 0, or -1 with "AMQP_...: why" in err. */
int svc_amqp_tls_load(svc_amqp_tls *t, char *err, size_t errlen);

/* A connection to url (amqp[s]://user:pass@host:port/vhost), closed until
 * svc_amqp_conn_open.  tls (copied; NULL means no CA file and no client
 * certificate) is used only for amqps:// URLs.  Returns NULL on
 * allocation failure or a URL that does not parse. */
svc_amqp_conn *svc_amqp_conn_new(const char *url, const svc_amqp_tls *tls);
/* Closes (politely when still up), stops the watchdog and frees c; NULL
 * does nothing. */
void svc_amqp_conn_free(svc_amqp_conn *c);

/* rabbitmq-c's connection, for the owner's own calls on
 * SVC_AMQP_CONN_CHANNEL, or NULL while closed.  Borrowed: valid until the
 * next svc_amqp_conn_ call that can close (open, close, drop, fail, rpc,
 * reply); never freed by the caller. */
amqp_connection_state_t svc_amqp_conn_state(const svc_amqp_conn *c);
/* 1 while connected, 0 when closed. */
int svc_amqp_conn_is_open(const svc_amqp_conn *c);
/* "host:port", for logs and /readyz. */
const char *svc_amqp_conn_endpoint(const svc_amqp_conn *c);
/* The last failure ("amqp host:port: what: why"), "" after success;
 * borrowed, valid until the next call on c. */
const char *svc_amqp_conn_errmsg(const svc_amqp_conn *c);

/*
 * Closes any earlier connection, then connects within timeout_ms (which
 * also bounds every later RPC on this connection), logs in with the URL's
 * credentials and vhost, and opens SVC_AMQP_CONN_CHANNEL.  Returns 0 (err
 * is then ""), or -1 with err set and the connection closed.
 */
int svc_amqp_conn_open(svc_amqp_conn *c, int timeout_ms);
/* Best-effort channel.close and connection.close, bounded by the RPC
 * timeout, then drops the socket.  Nothing to do when closed. */
void svc_amqp_conn_close(svc_amqp_conn *c);
/* Drops the connection without talking to the broker. */
void svc_amqp_conn_drop(svc_amqp_conn *c);

/* Bounds the owner's next blocking step: unless svc_amqp_conn_step_end
 * (or a drop or close) comes within ms (plus a little slack), the socket
 * is shut down, so whatever rabbitmq-c call is blocked returns an error,
 * which svc_amqp_conn_fail records as "what: no answer within ms ms".
 * Nothing is armed while closed.  svc_amqp_conn_open and _close guard
 * their own steps. */
void svc_amqp_conn_step_begin(svc_amqp_conn *c, int ms);
/* Ends the step: the watchdog forgets the socket. */
void svc_amqp_conn_step_end(svc_amqp_conn *c);

/* Records "amqp host:port: <fmt...>" as the failure. */
__attribute__((format(printf, 2, 3))) void svc_amqp_conn_set_err(
    svc_amqp_conn *c, const char *fmt, ...);
/* Records "what: <rabbitmq-c's text for status>", drops the connection
 * and returns -1. */
int svc_amqp_conn_fail(svc_amqp_conn *c, const char *what, int status);
/* 0 if the last RPC on the connection succeeded; otherwise records why
 * (a library error, or the broker's refusal with its method id), drops
 * the connection and returns -1. */
int svc_amqp_conn_rpc(svc_amqp_conn *c, const char *what);
/* The same for a reply a call returned directly (amqp_login). */
int svc_amqp_conn_reply(svc_amqp_conn *c, const char *what,
                        amqp_rpc_reply_t r);

/*
 * The events exchange as reviewd's relay and kh-indexer both declare it
 * (identically: RabbitMQ refuses a redeclaration with other arguments):
 * first its alternate exchange "<exchange>.unrouted" (fanout, durable)
 * with the durable queue "<exchange>.unrouted" bound to it, then
 * `exchange` itself, a durable topic exchange with the argument
 * alternate-exchange = "<exchange>.unrouted".  A message that matches no
 * binding of `exchange` is routed to that queue instead of being acked
 * and dropped, so every event is kept somewhere.
 *
 * An exchange that already exists without that argument (declared before
 * it was added) makes RabbitMQ close the channel with 406
 * PRECONDITION_FAILED: the channel is then reopened, the exchange checked
 * with a passive declare, and *with_ae set to 0 (the caller warns; fix:
 * delete the exchange so it is declared again, or give it a RabbitMQ
 * policy alternate-exchange).  *with_ae is 1 otherwise.  The channel is
 * a fresh one after a 406, so declare this before confirm.select.
 * exchange must not be "" (the default exchange cannot be declared nor
 * given an alternate exchange; both services' configurations map "" to
 * kh.documents, so this only guards against a caller's mistake).  Returns 0, or -1 (the connection is dropped).
 */
int svc_amqp_conn_declare_events_exchange(svc_amqp_conn *c,
                                          const char *exchange, int *with_ae);
/*
 * The same declaration on a bare rabbitmq-c connection and channel (for a
 * client that does not use svc_amqp_conn, such as the tests' consumer):
 * 1 declared with its alternate exchange, 0 the exchange exists without
 * it (the channel was reopened after the 406), -1 failed: *what names
 * the step and *reply holds the broker's (or the library's) answer.  The
 * connection is left as it is; exchange must not be "".
 */
int svc_amqp_declare_events_exchange_on(amqp_connection_state_t conn,
                                        amqp_channel_t ch,
                                        const char *exchange,
                                        const char **what,
                                        amqp_rpc_reply_t *reply);
/* The suffix of the alternate exchange's and its queue's name. */
#define SVC_AMQP_UNROUTED_SUFFIX ".unrouted"

/* ms as a struct timeval, for rabbitmq-c's timeouts. */
void svc_amqp_conn_timeval(int ms, struct timeval *tv);

#endif /* SVC_AMQP_CONN_H */
