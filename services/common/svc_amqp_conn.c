/*
 * svc_amqp_conn.c: the AMQP connection shared by the relay's publisher and
 * kh-indexer's consumer (see svc_amqp_conn.h).
 *
 * svc_amqp_conn_open does the steps in the order AMQP requires (socket,
 * protocol header and handshake inside amqp_login, channel.open), and
 * stops at the first failure with that step's name in err, so the person
 * on call reads "amqp 127.0.0.1:5672: login: ..." rather than a bare
 * status.
 *
 * For amqps:// the socket is rabbitmq-c's OpenSSL one, and everything
 * about trust is set before the connect: the CA file (or the system's
 * default store, which rabbitmq-c would otherwise leave empty), peer and
 * hostname verification always on, and the client certificate when one
 * is configured.  A failed verification ends the connect before the
 * login, so credentials never reach a broker we could not verify.
 */
#include "svc_amqp_conn.h"

#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "svc_env.h"

struct svc_amqp_conn {
    char *url_copy; /* amqp_parse_url writes into it */
    struct amqp_connection_info info;
    svc_amqp_tls tls;             /* used when info.ssl */
    amqp_connection_state_t conn; /* NULL: closed */
    char endpoint[300];           /* "host:port" */
    char err[520];                /* the last failure, "" after success */
};

/* One setting: the variable's value, which must name a readable file,
 * into out ("" when unset or empty).  0, or -1 with err set. */
static int tls_file(const char *name, char *out, size_t len, char *err,
                    size_t errlen)
{
    const char *v = svc_env_str(name);
    FILE *f;

    out[0] = '\0';
    if (v == NULL)
        return 0;
    if (strlen(v) >= len) {
        snprintf(err, errlen, "%s: longer than %zu bytes", name, len - 1);
        return -1;
    }
    f = fopen(v, "r");
    if (f == NULL) {
        snprintf(err, errlen, "%s: cannot read %s", name, v);
        return -1;
    }
    fclose(f);
    snprintf(out, len, "%s", v);
    return 0;
}

int svc_amqp_tls_load(svc_amqp_tls *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    if (tls_file("AMQP_CACERT", t->cacert, sizeof(t->cacert), err, errlen)
        || tls_file("AMQP_CERT", t->cert, sizeof(t->cert), err, errlen)
        || tls_file("AMQP_KEY", t->key, sizeof(t->key), err, errlen))
        return -1;
    if ((t->cert[0] == '\0') != (t->key[0] == '\0')) {
        snprintf(err, errlen,
                 "AMQP_CERT and AMQP_KEY: give both or "
                 "neither");
        return -1;
    }
    return 0;
}

svc_amqp_conn *svc_amqp_conn_new(const char *url, const svc_amqp_tls *tls)
{
    svc_amqp_conn *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return NULL;
    c->url_copy = strdup(url);
    if (c->url_copy == NULL) {
        free(c);
        return NULL;
    }
    if (tls != NULL)
        c->tls = *tls;
    amqp_default_connection_info(&c->info);
    if (amqp_parse_url(c->url_copy, &c->info) != AMQP_STATUS_OK) {
        svc_amqp_conn_free(c);
        return NULL;
    }
    snprintf(c->endpoint, sizeof(c->endpoint), "%s:%d", c->info.host,
             c->info.port);
    return c;
}

void svc_amqp_conn_free(svc_amqp_conn *c)
{
    if (c == NULL)
        return;
    svc_amqp_conn_close(c);
    free(c->url_copy);
    free(c);
}

amqp_connection_state_t svc_amqp_conn_state(const svc_amqp_conn *c)
{
    return c->conn;
}

int svc_amqp_conn_is_open(const svc_amqp_conn *c)
{
    return c->conn != NULL;
}

const char *svc_amqp_conn_endpoint(const svc_amqp_conn *c)
{
    return c->endpoint;
}

const char *svc_amqp_conn_errmsg(const svc_amqp_conn *c)
{
    return c->err;
}

void svc_amqp_conn_set_err(svc_amqp_conn *c, const char *fmt, ...)
{
    char what[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(c->err, sizeof(c->err), "amqp %.100s: %.400s", c->endpoint, what);
}

void svc_amqp_conn_drop(svc_amqp_conn *c)
{
    if (c->conn != NULL) {
        amqp_destroy_connection(c->conn);
        c->conn = NULL;
    }
}

int svc_amqp_conn_fail(svc_amqp_conn *c, const char *what, int status)
{
    svc_amqp_conn_set_err(c, "%s: %s", what, amqp_error_string2(status));
    svc_amqp_conn_drop(c);
    return -1;
}

int svc_amqp_conn_reply(svc_amqp_conn *c, const char *what, amqp_rpc_reply_t r)
{
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return 0;
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION)
        return svc_amqp_conn_fail(c, what, r.library_error);
    svc_amqp_conn_set_err(c, "%s: refused by the broker (method 0x%08x)", what,
                          (unsigned)r.reply.id);
    svc_amqp_conn_drop(c);
    return -1;
}

int svc_amqp_conn_rpc(svc_amqp_conn *c, const char *what)
{
    return svc_amqp_conn_reply(c, what, amqp_get_rpc_reply(c->conn));
}

void svc_amqp_conn_timeval(int ms, struct timeval *tv)
{
    tv->tv_sec = ms / 1000;
    tv->tv_usec = (ms % 1000) * 1000;
}

/* Trust for a TLS socket: the CA file or the system's store, peer and
 * hostname verification, the client certificate if any.  0, or -1 with
 * err set (the caller drops the connection). */
static int configure_tls(svc_amqp_conn *c, amqp_socket_t *sock)
{
    const svc_amqp_tls *t = &c->tls;

    if (t->cacert[0] != '\0') {
        if (amqp_ssl_socket_set_cacert(sock, t->cacert) != AMQP_STATUS_OK) {
            svc_amqp_conn_set_err(c,
                                  "tls: CA file %s: not a PEM "
                                  "certificate",
                                  t->cacert);
            return -1;
        }
    } else if (SSL_CTX_set_default_verify_paths(
                   amqp_ssl_socket_get_context(sock))
               != 1) {
        svc_amqp_conn_set_err(c, "tls: no CA file and no system store");
        return -1;
    }
    if (t->cert[0] != '\0'
        && amqp_ssl_socket_set_key(sock, t->cert, t->key) != AMQP_STATUS_OK) {
        svc_amqp_conn_set_err(c,
                              "tls: client certificate %s or key %s "
                              "unusable",
                              t->cert, t->key);
        return -1;
    }
    amqp_ssl_socket_set_verify_peer(sock, 1);
    amqp_ssl_socket_set_verify_hostname(sock, 1);
    return 0;
}

/* A connection with its socket and timeouts, not yet connected: TLS for
 * amqps://.  Returns the socket, or NULL (recorded) with nothing held. */
static amqp_socket_t *new_connection(svc_amqp_conn *c,
                                     const struct timeval *tv)
{
    amqp_socket_t *sock = NULL;

    c->conn = amqp_new_connection();
    if (c->conn != NULL) {
        sock = c->info.ssl ? amqp_ssl_socket_new(c->conn)
                           : amqp_tcp_socket_new(c->conn);
    }
    if (sock == NULL
        || amqp_set_handshake_timeout(c->conn, tv) != AMQP_STATUS_OK
        || amqp_set_rpc_timeout(c->conn, tv) != AMQP_STATUS_OK) {
        svc_amqp_conn_set_err(c, "out of memory");
        svc_amqp_conn_drop(c);
        return NULL;
    }
    if (c->info.ssl && configure_tls(c, sock) != 0) {
        svc_amqp_conn_drop(c);
        return NULL;
    }
    return sock;
}

/* A failed connect: for TLS, what the handshake said (OpenSSL's reason,
 * which says "certificate verify failed" for an unknown CA) and which CA
 * file was used, so the person on call sees why at once. */
static int connect_failed(svc_amqp_conn *c, int status)
{
    char why[256] = "";
    const unsigned long e = ERR_peek_last_error();

    if (!c->info.ssl
        || (status != AMQP_STATUS_SSL_ERROR
            && status != AMQP_STATUS_SSL_CONNECTION_FAILED
            && status != AMQP_STATUS_SSL_PEER_VERIFY_FAILED
            && status != AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED))
        return svc_amqp_conn_fail(c, "connect", status);
    if (e != 0)
        ERR_error_string_n(e, why, sizeof(why));
    ERR_clear_error();
    svc_amqp_conn_set_err(c, "tls handshake refused (CA %s): %s%s%s",
                          c->tls.cacert[0] != '\0' ? c->tls.cacert
                                                   : "system store",
                          amqp_error_string2(status), why[0] ? ": " : "", why);
    svc_amqp_conn_drop(c);
    return -1;
}

int svc_amqp_conn_open(svc_amqp_conn *c, int timeout_ms)
{
    struct timeval tv;
    amqp_socket_t *sock;
    int st;

    svc_amqp_conn_close(c);
    svc_amqp_conn_timeval(timeout_ms, &tv);
    sock = new_connection(c, &tv);
    if (sock == NULL)
        return -1;
    st = amqp_socket_open_noblock(sock, c->info.host, c->info.port, &tv);
    if (st != AMQP_STATUS_OK)
        return connect_failed(c, st);
    if (svc_amqp_conn_reply(c, "login",
                            amqp_login(c->conn, c->info.vhost, 1, 131072, 0,
                                       AMQP_SASL_METHOD_PLAIN, c->info.user,
                                       c->info.password))
        != 0)
        return -1;
    amqp_channel_open(c->conn, SVC_AMQP_CONN_CHANNEL);
    if (svc_amqp_conn_rpc(c, "channel.open") != 0)
        return -1;
    c->err[0] = '\0';
    return 0;
}

void svc_amqp_conn_close(svc_amqp_conn *c)
{
    if (c->conn == NULL)
        return;
    /* Best effort and bounded by the RPC timeout; the socket goes anyway. */
    amqp_channel_close(c->conn, SVC_AMQP_CONN_CHANNEL, AMQP_REPLY_SUCCESS);
    amqp_connection_close(c->conn, AMQP_REPLY_SUCCESS);
    svc_amqp_conn_drop(c);
}
