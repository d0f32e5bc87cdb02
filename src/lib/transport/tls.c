/*
 * tls.c: OpenSSL contexts and connections for rediss:// (see tls.h).
 *
 * OpenSSL 3 initialises itself on first use, so there is no global set-up.
 * All I/O is non-blocking: SSL_ERROR_WANT_READ / WANT_WRITE are turned into
 * "wait for this poll event", and the caller's loop owns the deadline.
 * OpenSSL writes with write(2), which raises SIGPIPE on a closed peer; the
 * write path blocks SIGPIPE on the calling thread and consumes one it
 * caused, the technique libcurl uses, so a library never changes the
 * process's signal dispositions.
 */
#include "transport/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "base/clock.h"

/* The most specific text OpenSSL has for the last failure on this thread. */
static const char *openssl_reason(char *buf, size_t len)
{
    unsigned long code = ERR_peek_last_error();

    if (code == 0)
        return "no detail from OpenSSL";
    ERR_error_string_n(code, buf, len);
    return buf;
}

static dlock_err load_trust(SSL_CTX *ctx, const dlock_client_opts *o,
                            dlock__msg *m)
{
    char why[256];

    if (o->tls_ca_file == NULL && o->tls_ca_dir == NULL) {
        if (SSL_CTX_set_default_verify_paths(ctx) != 1)
            return dlock__msg_set(m, DLOCK_TLS,
                                  "loading the system CA store: %s",
                                  openssl_reason(why, sizeof(why)));
        return DLOCK_OK;
    }
    if (SSL_CTX_load_verify_locations(ctx, o->tls_ca_file, o->tls_ca_dir) != 1)
        return dlock__msg_set(m, DLOCK_TLS, "loading CA file %s / dir %s: %s",
                              o->tls_ca_file ? o->tls_ca_file : "(none)",
                              o->tls_ca_dir ? o->tls_ca_dir : "(none)",
                              openssl_reason(why, sizeof(why)));
    return DLOCK_OK;
}

static dlock_err load_client_cert(SSL_CTX *ctx, const dlock_client_opts *o,
                                  dlock__msg *m)
{
    char why[256];

    if (o->tls_cert_file == NULL && o->tls_key_file == NULL)
        return DLOCK_OK;
    if (o->tls_cert_file == NULL || o->tls_key_file == NULL)
        return dlock__msg_set(m, DLOCK_INVALID,
                              "a TLS client certificate needs both "
                              "tls_cert_file and tls_key_file");
    if (SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert_file) != 1)
        return dlock__msg_set(m, DLOCK_TLS,
                              "loading client certificate %s: %s",
                              o->tls_cert_file,
                              openssl_reason(why, sizeof(why)));
    if (SSL_CTX_use_PrivateKey_file(ctx, o->tls_key_file, SSL_FILETYPE_PEM)
        != 1)
        return dlock__msg_set(m, DLOCK_TLS, "loading client key %s: %s",
                              o->tls_key_file,
                              openssl_reason(why, sizeof(why)));
    if (SSL_CTX_check_private_key(ctx) != 1)
        return dlock__msg_set(m, DLOCK_TLS,
                              "client key %s does not match "
                              "certificate %s",
                              o->tls_key_file, o->tls_cert_file);
    return DLOCK_OK;
}

dlock_err dlock__tls_ctx_new(const dlock_client_opts *opts, SSL_CTX **out,
                             dlock__msg *m)
{
    SSL_CTX *ctx;
    dlock_err err;

    *out = NULL;
    ERR_clear_error();
    ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "creating the TLS context");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE
                              | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(ctx,
                       opts->tls_verify_peer ? SSL_VERIFY_PEER
                                             : SSL_VERIFY_NONE,
                       NULL);
    err = load_trust(ctx, opts, m);
    if (err == DLOCK_OK)
        err = load_client_cert(ctx, opts, m);
    if (err != DLOCK_OK) {
        SSL_CTX_free(ctx);
        return err;
    }
    *out = ctx;
    return DLOCK_OK;
}

void dlock__tls_ctx_free(SSL_CTX *ctx)
{
    SSL_CTX_free(ctx);
}

static int is_ip_address(const char *name)
{
    unsigned char buf[sizeof(struct in6_addr)];

    return inet_pton(AF_INET, name, buf) == 1
           || inet_pton(AF_INET6, name, buf) == 1;
}

/* Sets what the peer's certificate must name, and SNI for host names. */
static int set_peer_name(SSL *ssl, const char *name, int verify)
{
    if (is_ip_address(name)) {
        X509_VERIFY_PARAM *param = SSL_get0_param(ssl);

        return !verify || X509_VERIFY_PARAM_set1_ip_asc(param, name) == 1;
    }
    if (SSL_set_tlsext_host_name(ssl, name) != 1)
        return 0;
    return !verify || SSL_set1_host(ssl, name) == 1;
}

static dlock_err handshake_failure(SSL *ssl, int rc, const char *name,
                                   dlock__msg *m)
{
    char why[256];
    long verdict = SSL_get_verify_result(ssl);
    int ssl_err = SSL_get_error(ssl, rc);

    if (verdict != X509_V_OK)
        return dlock__msg_set(m, DLOCK_TLS,
                              "TLS handshake with %s: certificate "
                              "verification failed: %s",
                              name, X509_verify_cert_error_string(verdict));
    if (ssl_err == SSL_ERROR_SYSCALL || ssl_err == SSL_ERROR_ZERO_RETURN)
        return dlock__msg_set(m, DLOCK_UNAVAILABLE,
                              "TLS handshake with %s: connection closed (%s)",
                              name, errno ? strerror(errno) : "EOF");
    return dlock__msg_set(m, DLOCK_TLS, "TLS handshake with %s: %s", name,
                          openssl_reason(why, sizeof(why)));
}

dlock_err dlock__tls_connect(SSL_CTX *ctx, int fd, const char *name,
                             int verify, int64_t deadline_us, SSL **out,
                             dlock__msg *m)
{
    SSL *ssl;

    *out = NULL;
    ERR_clear_error();
    ssl = SSL_new(ctx);
    if (ssl == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "creating a TLS session");
    if (SSL_set_fd(ssl, fd) != 1 || !set_peer_name(ssl, name, verify)) {
        SSL_free(ssl);
        return dlock__msg_set(m, DLOCK_TLS, "setting up TLS for %s", name);
    }
    for (;;) {
        int rc = SSL_connect(ssl);
        int ssl_err;
        struct pollfd pfd = {.fd = fd, .events = 0};
        int left;

        if (rc == 1)
            break;
        ssl_err = SSL_get_error(ssl, rc);
        if (ssl_err != SSL_ERROR_WANT_READ
            && ssl_err != SSL_ERROR_WANT_WRITE) {
            dlock_err err = handshake_failure(ssl, rc, name, m);

            SSL_free(ssl);
            return err;
        }
        pfd.events = ssl_err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        left = dlock__ms_left(deadline_us);
        if (left == 0 || poll(&pfd, 1, left) == 0) {
            SSL_free(ssl);
            return dlock__msg_set(m, DLOCK_TIMEOUT, "TLS handshake with %s",
                                  name);
        }
    }
    *out = ssl;
    return DLOCK_OK;
}

/* Maps the result of SSL_read/SSL_write to the tls.h return convention. */
static ssize_t io_result(SSL *ssl, int rc, const char *what, short *want,
                         dlock_err *err, dlock__msg *m)
{
    char why[256];
    int ssl_err;

    if (rc > 0)
        return rc;
    ssl_err = SSL_get_error(ssl, rc);
    if (ssl_err == SSL_ERROR_WANT_READ) {
        *want = POLLIN;
        return 0;
    }
    if (ssl_err == SSL_ERROR_WANT_WRITE) {
        *want = POLLOUT;
        return 0;
    }
    if (ssl_err == SSL_ERROR_ZERO_RETURN
        || (ssl_err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)) {
        *err = dlock__msg_set(m, DLOCK_UNAVAILABLE,
                              "TLS %s: connection "
                              "closed by server (%s)",
                              what, errno ? strerror(errno) : "EOF");
        return -1;
    }
    *err = dlock__msg_set(m, DLOCK_TLS, "TLS %s: %s", what,
                          openssl_reason(why, sizeof(why)));
    return -1;
}

ssize_t dlock__tls_read(SSL *ssl, void *buf, size_t len, short *want,
                        dlock_err *err, dlock__msg *m)
{
    int rc;

    ERR_clear_error();
    errno = 0;
    rc = SSL_read(ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
    return io_result(ssl, rc, "read", want, err, m);
}

/* Blocks SIGPIPE on this thread; *was_pending says whether one was already
 * pending (then it is not ours to consume). */
static void sigpipe_hold(sigset_t *old, int *was_pending)
{
    sigset_t pipe_set, pending;

    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigpending(&pending);
    *was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, old);
}

static void sigpipe_release(const sigset_t *old, int was_pending, int broke)
{
    if (broke && !was_pending) {
        sigset_t pipe_set;
        struct timespec zero = {0, 0};

        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

ssize_t dlock__tls_write(SSL *ssl, const void *buf, size_t len, short *want,
                         dlock_err *err, dlock__msg *m)
{
    sigset_t old;
    int was_pending, rc, saved;
    ssize_t n;

    ERR_clear_error();
    sigpipe_hold(&old, &was_pending);
    errno = 0;
    rc = SSL_write(ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
    saved = errno;
    sigpipe_release(&old, was_pending, rc <= 0 && saved == EPIPE);
    errno = saved;
    n = io_result(ssl, rc, "write", want, err, m);
    return n;
}

int dlock__tls_pending(SSL *ssl)
{
    return SSL_pending(ssl) > 0;
}

void dlock__tls_free(SSL *ssl)
{
    if (ssl == NULL)
        return;
    /* A quiet shutdown: the peer learns from the TCP close, and a blocking
     * close_notify exchange could stall the caller. */
    SSL_set_quiet_shutdown(ssl, 1);
    SSL_shutdown(ssl);
    SSL_free(ssl);
}

void dlock__tls_thread_end(void)
{
    OPENSSL_thread_stop();
}
