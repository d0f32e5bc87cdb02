/*
 * tls.h: TLS for rediss:// connections, on OpenSSL.
 *
 * Debian's hiredis 0.14 has no TLS, and we use only its reply reader and
 * command formatter anyway, so the TLS layer is ours: one SSL_CTX per client
 * (trust anchors, optional client certificate, TLS 1.2 at least) and one
 * SSL per connection, driven over a non-blocking socket with poll(2) so that
 * the handshake and every read and write honour the caller's deadline.
 * Verification checks the chain and the host name (or IP address), and SNI
 * carries the name.
 */
#ifndef DLOCK_SRC_TLS_H
#define DLOCK_SRC_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/ssl.h>

#include "dlock/client.h"
#include "base/msg.h"

/* Builds the client's SSL_CTX from opts.  *out is NULL on failure.
 * Returns DLOCK_OK, DLOCK_TLS (a file could not be loaded), DLOCK_NOMEM. */
dlock_err dlock__tls_ctx_new(const dlock_client_opts *opts, SSL_CTX **out,
                             dlock__msg *m);

void dlock__tls_ctx_free(SSL_CTX *ctx);

/* Runs the handshake on the connected non-blocking socket fd, verifying
 * that the peer is name (a host name or an IP address) unless verify is 0.
 * *out is NULL on failure.  Returns DLOCK_OK, DLOCK_TLS, DLOCK_TIMEOUT,
 * DLOCK_UNAVAILABLE (the peer closed) or DLOCK_NOMEM. */
dlock_err dlock__tls_connect(SSL_CTX *ctx, int fd, const char *name,
                             int verify, int64_t deadline_us, SSL **out,
                             dlock__msg *m);

/* Reads up to len bytes, without waiting.  Returns the count (> 0); 0 if
 * nothing can be done now, with *want set to the poll event (POLLIN or
 * POLLOUT: TLS may need to write in order to read); or -1 with *err and m
 * set (closed or failed). */
ssize_t dlock__tls_read(SSL *ssl, void *buf, size_t len, short *want,
                        dlock_err *err, dlock__msg *m);

/* Writes up to len bytes, without waiting; same returns as dlock__tls_read.
 * SIGPIPE is held off for the call, so a closed peer is an error, not a
 * signal. */
ssize_t dlock__tls_write(SSL *ssl, const void *buf, size_t len, short *want,
                         dlock_err *err, dlock__msg *m);

/* 1 when OpenSSL holds decrypted bytes not yet read (poll cannot see them). */
int dlock__tls_pending(SSL *ssl);

void dlock__tls_free(SSL *ssl);

/* Frees what OpenSSL keeps for the calling thread (its random generators,
 * made by a handshake).  A library thread that may have connected calls
 * this last, as OpenSSL only frees it by itself for the main thread. */
void dlock__tls_thread_end(void);

#endif /* DLOCK_SRC_TLS_H */
