/*
 * test_tls.c: rediss:// against a redis-server with TLS.
 *
 * The private server listens for TLS with certificates the kit makes with
 * the openssl command (a CA, a server certificate for localhost and
 * 127.0.0.1, a client certificate, and an unrelated CA).  What must hold:
 *   - with the right CA, by IP address and by host name, locks work;
 *   - with the wrong CA, or a name the certificate does not carry, the
 *     client is refused with DLOCK_TLS and a message about verification
 *     (never silently connected);
 *   - when the server requires client certificates, a client without one
 *     is refused and a client with one works;
 *   - half a client certificate (no key) is an invalid option.
 */
#include "itkit.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int setup(void **state)
{
    testkit_redis_opts so = {.name = "tls", .tls = 1};

    return itkit_fixture_setup(state, &so);
}

/* Sets tls-auth-clients on the server through its plain port. */
static void require_client_certs(const testkit_redis *s, int required)
{
    redisReply *r = testkit_redis_cmd(s->admin_url,
                                      "CONFIG SET tls-auth-clients %s",
                                      required ? "yes" : "no");

    TK_EXPECT(r != NULL && r->type == REDIS_REPLY_STATUS,
              "CONFIG SET "
              "tls-auth-clients %s on the private server: %s",
              required ? "yes" : "no",
              r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : "");
    freeReplyObject(r);
}

static dlock_client_opts tls_opts(const char *ca_file)
{
    dlock_client_opts o = itkit_client_opts();

    o.tls_ca_file = ca_file;
    return o;
}

/* dlock_client_new that must fail with want; returns its message. */
static void expect_refused(const char *url, const dlock_client_opts *o,
                           dlock_err want, const char *what, char *errbuf,
                           size_t len)
{
    dlock_client *c = NULL;
    dlock_err err;

    errbuf[0] = '\0';
    err = dlock_client_new(url, o, &c, errbuf, len);
    TK_EXPECT(err == want, "%s is refused with %s, got %s: %s", what,
              dlock_errname(want), dlock_errname(err), errbuf);
    TK_EXPECT(c == NULL, "%s hands out no client", what);
    dlock_client_free(c);
}

/* A client made with o over url acquires and releases a lock on name. */
static void lock_round(const char *url, const dlock_client_opts *o,
                       const char *name)
{
    char key[TESTKIT_KEY_MAX];
    dlock_client *c = itkit_client(url, o);
    dlock_lock *l = itkit_acquire(c, testkit_key(key, name), NULL);

    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, c, "release over TLS");
    dlock_client_free(c);
}

/* expect_refused with DLOCK_TLS, and a message that says verification
 * failed. */
static void expect_unverified(const char *url, const dlock_client_opts *o,
                              const char *what)
{
    char errbuf[DLOCK_ERRMSG_MAX];

    expect_refused(url, o, DLOCK_TLS, what, errbuf, sizeof(errbuf));
    TK_EXPECT(strcasestr(errbuf, "verif") != NULL,
              "the message says that "
              "verification failed: %s",
              errbuf);
}

static void right_ca_works_by_address_and_by_name(void **state)
{
    itkit_fixture *fx = *state;
    dlock_client_opts o = tls_opts(fx->server->certs.ca_file);
    char by_name[128];

    require_client_certs(fx->server, 0);
    lock_round(fx->server->tls_url, &o, "tls_by_ip");

    snprintf(by_name, sizeof(by_name), "rediss://localhost:%d/0",
             fx->server->tls_port);
    lock_round(by_name, &o, "tls_by_name");
}

static void wrong_ca_is_refused_with_a_verification_error(void **state)
{
    itkit_fixture *fx = *state;
    dlock_client_opts o = tls_opts(fx->server->certs.other_ca_file);

    require_client_certs(fx->server, 0);
    expect_unverified(fx->server->tls_url, &o,
                      "a server certificate from an untrusted CA");
}

static void wrong_host_name_is_refused(void **state)
{
    itkit_fixture *fx = *state;
    dlock_client_opts o = tls_opts(fx->server->certs.ca_file);

    require_client_certs(fx->server, 0);
    o.tls_server_name = "wrong.example";
    expect_unverified(fx->server->tls_url, &o,
                      "a certificate that does not name wrong.example");
}

static void verification_off_accepts_an_untrusted_server(void **state)
{
    itkit_fixture *fx = *state;
    dlock_client_opts o = tls_opts(fx->server->certs.other_ca_file);

    require_client_certs(fx->server, 0);
    o.tls_verify_peer = 0;
    lock_round(fx->server->tls_url, &o, "tls_no_verify");
}

static void required_client_certificate_is_checked(void **state)
{
    itkit_fixture *fx = *state;
    dlock_client_opts o = tls_opts(fx->server->certs.ca_file);
    char errbuf[DLOCK_ERRMSG_MAX];

    require_client_certs(fx->server, 1);
    expect_refused(fx->server->tls_url, &o, DLOCK_TLS,
                   "a client without a "
                   "certificate when the server requires one",
                   errbuf, sizeof(errbuf));
    o.tls_cert_file = fx->server->certs.client_cert;
    o.tls_key_file = fx->server->certs.client_key;
    lock_round(fx->server->tls_url, &o, "tls_client_cert");
    require_client_certs(fx->server, 0);
}

static void certificate_without_key_is_invalid(void **state)
{
    itkit_fixture *fx = *state;
    dlock_client_opts o = tls_opts(fx->server->certs.ca_file);
    char errbuf[DLOCK_ERRMSG_MAX];

    o.tls_cert_file = fx->server->certs.client_cert;
    expect_refused(fx->server->tls_url, &o, DLOCK_INVALID,
                   "a client "
                   "certificate without its key",
                   errbuf, sizeof(errbuf));
    TK_EXPECT(strstr(errbuf, "tls_key_file") != NULL,
              "the message names "
              "the missing option: %s",
              errbuf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(right_ca_works_by_address_and_by_name),
        cmocka_unit_test(wrong_ca_is_refused_with_a_verification_error),
        cmocka_unit_test(wrong_host_name_is_refused),
        cmocka_unit_test(verification_off_accepts_an_untrusted_server),
        cmocka_unit_test(required_client_certificate_is_checked),
        cmocka_unit_test(certificate_without_key_is_invalid),
    };

    return cmocka_run_group_tests(tests, setup, itkit_fixture_teardown);
}
