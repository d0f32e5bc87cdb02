/*
 * conn.h: one connection to a Redis server, with deadlines.
 *
 * A dlock__conn is a non-blocking socket (TCP with TCP_NODELAY and
 * keepalive, or a unix socket), optionally wrapped in TLS, plus a hiredis
 * reply reader.  Every call takes an absolute deadline (clock.h) and waits
 * with poll(2), so no call can block longer than its caller allows.  The
 * handshake (AUTH with user and password or password alone, SELECT) runs
 * inside dlock__conn_open.
 *
 * States: OPEN after dlock__conn_open; BROKEN after any transport failure,
 * timeout or protocol error (a late reply would desynchronise the stream,
 * so a broken connection is never reused; dlock__conn_broken says so and
 * the pool frees it).  A server error reply is not a transport failure: it
 * comes back as a reply of type REDIS_REPLY_ERROR on a connection that stays
 * OPEN.
 *
 * Ownership: the connection borrows the endpoint and the SSL_CTX, which must
 * outlive it.  Replies are the caller's, freed with freeReplyObject.
 *
 * Threads: a connection is used by one thread at a time (the pool lends it),
 * except that on a plain socket one thread may send while another reads
 * (pipe.c's writer and reader).
 */
#ifndef DLOCK_SRC_CONN_H
#define DLOCK_SRC_CONN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <openssl/ssl.h>

#include "base/msg.h"
#include "transport/url.h"

/* Ceiling on one reply: on the bytes received, and apart on the bytes of
 * the reply objects they build (counted before each is allocated); more of
 * either is DLOCK_PROTOCOL. */
#define DLOCK__REPLY_MAX (64u * 1024 * 1024)

typedef struct dlock__conn_cfg {
    int keepalive_s;      /* <= 0: off */
    SSL_CTX *tls;         /* required for DLOCK__TLS endpoints */
    const char *tls_name; /* name to verify and send as SNI */
    int tls_verify;
    const char *user;     /* AUTH user, or NULL */
    const char *password; /* AUTH password, or NULL for no AUTH */
    int busy_poll_us;     /* dlock_client_opts.busy_poll_us; 0: off */
    /* Counted into, when not NULL (the client's, outliving every
     * connection): [0] busy polls begun, [1] those that caught a reply. */
    atomic_ullong *busy_poll_counts;
} dlock__conn_cfg;

typedef struct dlock__conn dlock__conn;

/* Connects to ep and runs the handshake, all before deadline_us.  *out is
 * NULL on failure.  Returns DLOCK_OK, DLOCK_UNAVAILABLE, DLOCK_TIMEOUT,
 * DLOCK_TLS, DLOCK_AUTH, DLOCK_SERVER, DLOCK_PROTOCOL, DLOCK_INVALID,
 * DLOCK_SYSTEM or DLOCK_NOMEM. */
dlock_err dlock__conn_open(const dlock__endpoint *ep,
                           const dlock__conn_cfg *cfg, int64_t deadline_us,
                           dlock__conn **out, dlock__msg *m);

/* Wraps an already connected plain socket (no TLS, no handshake), taking
 * ownership of fd; for tests and fuzzers that play the server over a
 * socketpair.  fd is closed on failure too. */
dlock_err dlock__conn_from_fd(int fd, const dlock__endpoint *ep,
                              dlock__conn **out, dlock__msg *m);

/* Closes the socket and frees everything; NULL is fine. */
void dlock__conn_free(dlock__conn *conn);

/* Sends a command given as argc arguments (lens may be NULL: then each
 * argv[i] is NUL-terminated) and waits for its reply.  *reply is NULL
 * unless DLOCK_OK. */
dlock_err dlock__conn_call(dlock__conn *conn, int argc, const char **argv,
                           const size_t *lens, int64_t deadline_us,
                           redisReply **reply, dlock__msg *m);

/* Writes the command argv[0..argc) (lens as for dlock__conn_call) in
 * RESP into buf, cap bytes, and returns its length, which may exceed cap:
 * then buf holds nothing usable and the caller calls again with a buffer
 * of that size.  Allocates nothing, so a command of the usual size is
 * formatted on the caller's stack. */
size_t dlock__resp_format(char *buf, size_t cap, int argc, const char **argv,
                          const size_t *lens);

/* Formats two commands back to back into one buffer for
 * dlock__conn_call_pair: argv[0..argc) (lens as for dlock__conn_call),
 * then then[0..nthen) (NUL-terminated).  Returns the buffer, the caller's
 * to free with dlock__free, and its length in *len; NULL when out of
 * memory. */
char *dlock__resp_format_pair(int argc, const char **argv, const size_t *lens,
                              int nthen, const char **then, size_t *len);

/* Sends len raw bytes (an already formatted command). */
dlock_err dlock__conn_send(dlock__conn *conn, const char *buf, size_t len,
                           int64_t deadline_us, dlock__msg *m);

/* Sends what the socket takes now of buf[0..len) without waiting, on a
 * plain socket (DLOCK_INVALID on TLS): DLOCK_OK with *sent the bytes
 * written (0 when the socket's buffer is full), or DLOCK_UNAVAILABLE
 * when the connection failed (it is then broken). */
dlock_err dlock__conn_send_some(dlock__conn *conn, const char *buf, size_t len,
                                size_t *sent, dlock__msg *m);

/* Marks the connection broken with err and shuts its socket down (for a
 * caller that gives up on it: no late reply may be read from it). */
void dlock__conn_shut(dlock__conn *conn, dlock_err err);

/* Waits for the next reply until deadline_us.  With deadline_us == 0 it
 * does not wait: DLOCK_OK with *reply NULL means nothing complete yet. */
dlock_err dlock__conn_recv(dlock__conn *conn, int64_t deadline_us,
                           redisReply **reply, dlock__msg *m);

/* Sends buf[0..len), two commands (dlock__resp_format_pair), in one
 * write and reads both replies, all before deadline_us: *first the first
 * command's and *second the other's, the caller's to free (an error reply
 * is returned as a reply).  Both are NULL unless DLOCK_OK.  For a command
 * that must be followed on the same connection by another that reports
 * on it (WAIT, ROLE); the connection is the caller's alone meanwhile. */
dlock_err dlock__conn_call_pair(dlock__conn *conn, const char *buf, size_t len,
                                int64_t deadline_us, redisReply **first,
                                redisReply **second, dlock__msg *m);

/* Takes a reply that is already complete in the connection's buffer,
 * without any system call: DLOCK_OK with *reply NULL when none is (a
 * parse failure breaks the connection, as in dlock__conn_recv). */
dlock_err dlock__conn_take(dlock__conn *conn, redisReply **reply,
                           dlock__msg *m);

/* The socket, for poll(2) by a caller that multiplexes (the subscriber). */
int dlock__conn_fd(const dlock__conn *conn);

/* 1 when bytes are buffered (reader or TLS) that poll(2) cannot see. */
int dlock__conn_buffered(const dlock__conn *conn);

/* 1 on a TLS connection (whose reads and writes must not overlap). */
int dlock__conn_tls(const dlock__conn *conn);

/* The server's host:port (or socket path), for messages. */
const char *dlock__conn_desc(const dlock__conn *conn);

/* 1 once the connection has failed and must not be used again. */
int dlock__conn_broken(const dlock__conn *conn);

/* Microseconds on the monotonic clock when the connection last completed a
 * round trip (or opened). */
int64_t dlock__conn_last_used(const dlock__conn *conn);

/*
 * Turns an error reply into a code and a message "<what> on <server>:
 * <server's text>".  LOADING and BUSY mean the server is up but cannot run
 * anything yet: DLOCK_UNAVAILABLE, like a server that cannot be reached.
 * NOAUTH, WRONGPASS and NOPERM: DLOCK_AUTH.  Anything else (READONLY,
 * MASTERDOWN, OOM, a script error, ...) refuses the command: DLOCK_SERVER.
 */
dlock_err dlock__reply_error(const redisReply *reply, const char *what,
                             const char *server, dlock__msg *m);

/* A short description of an unexpected reply's type, for messages. */
const char *dlock__reply_type_name(const redisReply *reply);

#endif /* DLOCK_SRC_CONN_H */
