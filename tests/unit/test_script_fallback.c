/*
 * test_script_fallback.c: a script whose SHA-1 cannot be computed is sent
 * whole, with EVAL.
 *
 * The client hashes each script with OpenSSL so the first call can be
 * EVALSHA; if hashing fails (OpenSSL out of memory), there is no SHA to
 * send.  Sending `EVALSHA ""` would only ever get NOSCRIPT, so every lock
 * call would fail; the body goes with EVAL instead.  The failure is made by
 * the DLOCK_TESTING hook dlock__client_test_sha_fail, on a private server
 * whose INFO commandstats show which command ran.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"
#include "dlock/dlock.h"
#include "testkit.h"

/* calls=N of cmdstat_NAME in INFO commandstats, 0 when absent. */
static long long calls_of(const char *url, const char *name)
{
    redisReply *r = testkit_redis_cmd(url, "INFO commandstats");
    char field[64];
    long long n = 0;

    snprintf(field, sizeof(field), "cmdstat_%s:calls=", name);
    if (r != NULL && r->type != REDIS_REPLY_ERROR && r->str != NULL) {
        const char *at = strstr(r->str, field);

        if (at != NULL)
            n = strtoll(at + strlen(field), NULL, 10);
    }
    if (r != NULL)
        freeReplyObject(r);
    return n;
}

static void scripts_go_by_eval_without_a_sha(void **state)
{
    testkit_redis_opts so = {.name = "script_fallback"};
    testkit_redis *server = testkit_redis_start(&so);
    char errbuf[DLOCK_ERRMSG_MAX] = "", key[TESTKIT_KEY_MAX];
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    dlock_err err;

    (void)state;
    TK_EXPECT(server != NULL, "a private redis-server starts");
    TK_EXPECT(dlock_client_new(server->url, NULL, &c, errbuf, sizeof(errbuf))
                  == DLOCK_OK,
              "a client: %s", errbuf);
    dlock__client_test_sha_fail(1);
    err = dlock_acquire(c, testkit_key(key, "fallback"), NULL, &l);
    TK_EXPECT(err == DLOCK_OK, "acquire without a SHA succeeds, got %s: %s",
              dlock_errname(err), dlock_client_errmsg(c));
    err = dlock_release(l);
    dlock__client_test_sha_fail(0);
    TK_EXPECT(err == DLOCK_OK, "release without a SHA succeeds, got %s: %s",
              dlock_errname(err), dlock_client_errmsg(c));
    TK_EXPECT(calls_of(server->admin_url, "eval") == 2,
              "both went by EVAL "
              "(%lld calls)",
              calls_of(server->admin_url, "eval"));
    TK_EXPECT(calls_of(server->admin_url, "evalsha") == 0,
              "none by EVALSHA "
              "(%lld calls)",
              calls_of(server->admin_url, "evalsha"));
    dlock_client_free(c);
    testkit_redis_free(server);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(scripts_go_by_eval_without_a_sha),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
