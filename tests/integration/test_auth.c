/*
 * test_auth.c: credentials, from the URL or from the options.
 *
 * The private server has a password for its default user (requirepass) and
 * an ACL user.  A client must get in with redis://user:pass@ (AUTH user
 * pass), with redis://:pass@ (AUTH pass), and with credentials given as
 * options instead of in the URL; a wrong password or none at all must be
 * refused with DLOCK_AUTH at dlock_client_new, not at the first lock, and
 * the message must not show the password.
 */
#include "itkit.h"

#include <stdlib.h>
#include <string.h>

#define ACL_USER "locker"
#define ACL_PASS "acl-s3cret"
#define DEFAULT_PASS "default-s3cret"

static int setup(void **state)
{
    testkit_redis_opts so = {.name = "auth",
                             .requirepass = DEFAULT_PASS,
                             .acl_user = ACL_USER,
                             .acl_pass = ACL_PASS};

    return itkit_fixture_setup(state, &so);
}

static void url_for(const itkit_fixture *fx, const char *userinfo, char *buf,
                    size_t len)
{
    snprintf(buf, len, "redis://%s127.0.0.1:%d/0", userinfo, fx->server->port);
}

static void lock_round(dlock_client *c)
{
    char key[TESTKIT_KEY_MAX];
    dlock_lock *l = itkit_acquire(c, testkit_key(key, "auth"), NULL);

    TK_EXPECT_ERR(dlock_release(l), DLOCK_OK, c, "release after AUTH");
}

/* dlock_client_new that must be refused with DLOCK_AUTH. */
static void expect_auth_refused(const char *url, const dlock_client_opts *o,
                                const char *what)
{
    dlock_client_opts defaults = itkit_client_opts();
    char errbuf[DLOCK_ERRMSG_MAX] = "";
    dlock_client *c = NULL;
    dlock_err err = dlock_client_new(url, o != NULL ? o : &defaults, &c,
                                     errbuf, sizeof(errbuf));

    TK_EXPECT(err == DLOCK_AUTH, "%s is refused with DLOCK_AUTH, got %s: %s",
              what, dlock_errname(err), errbuf);
    TK_EXPECT(c == NULL, "%s hands out no client", what);
    TK_EXPECT(strstr(errbuf, "s3cret") == NULL,
              "the message does not show "
              "the password: %s",
              errbuf);
    dlock_client_free(c);
}

static void acl_user_and_password_in_the_url_work(void **state)
{
    itkit_fixture *fx = *state;
    char url[256];
    dlock_client *c;

    url_for(fx, ACL_USER ":" ACL_PASS "@", url, sizeof(url));
    c = itkit_client(url, NULL);
    lock_round(c);
    dlock_client_free(c);
}

static void acl_user_with_a_wrong_password_is_refused(void **state)
{
    itkit_fixture *fx = *state;
    char url[256];

    url_for(fx, ACL_USER ":wrong-s3cret@", url, sizeof(url));
    expect_auth_refused(url, NULL, "an ACL user with a wrong password");
    url_for(fx, "nobody:" ACL_PASS "@", url, sizeof(url));
    expect_auth_refused(url, NULL, "an unknown ACL user");
}

static void requirepass_with_password_only_works(void **state)
{
    itkit_fixture *fx = *state;
    char url[256];
    dlock_client *c;

    url_for(fx, ":" DEFAULT_PASS "@", url, sizeof(url));
    c = itkit_client(url, NULL);
    lock_round(c);
    dlock_client_free(c);
}

static void requirepass_with_a_wrong_or_no_password_is_refused(void **state)
{
    itkit_fixture *fx = *state;
    char url[256];

    url_for(fx, ":wrong-s3cret@", url, sizeof(url));
    expect_auth_refused(url, NULL, "a wrong password for the default user");
    url_for(fx, "", url, sizeof(url));
    expect_auth_refused(url, NULL, "no password where one is required");
}

static void credentials_in_options_override_the_url(void **state)
{
    itkit_fixture *fx = *state;
    dlock_client_opts o = itkit_client_opts();
    char url[256];
    dlock_client *c;

    url_for(fx, "", url, sizeof(url));
    o.username = ACL_USER;
    o.password = ACL_PASS;
    c = itkit_client(url, &o);
    lock_round(c);
    dlock_client_free(c);

    url_for(fx, ACL_USER ":" ACL_PASS "@", url, sizeof(url));
    o.password = "wrong-s3cret";
    expect_auth_refused(url, &o,
                        "a wrong password in the options over a "
                        "right one in the URL");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(acl_user_and_password_in_the_url_work),
        cmocka_unit_test(acl_user_with_a_wrong_password_is_refused),
        cmocka_unit_test(requirepass_with_password_only_works),
        cmocka_unit_test(requirepass_with_a_wrong_or_no_password_is_refused),
        cmocka_unit_test(credentials_in_options_override_the_url),
    };

    return cmocka_run_group_tests(tests, setup, itkit_fixture_teardown);
}
