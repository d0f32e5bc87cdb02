/*
 * test_resolve.c: host lookup under a deadline (src/lib/transport/resolve.c).
 *
 * A numeric address is parsed without a lookup; a name goes to the lookup
 * thread and comes back within the deadline; a name that cannot resolve is
 * DLOCK_UNAVAILABLE (or DLOCK_TIMEOUT where the resolver has no network
 * and stays silent), within the deadline either way: getaddrinfo alone has
 * no deadline at all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <netdb.h>

#include "base/clock.h"
#include "transport/resolve.h"
#include "testkit.h"

static void numeric_and_named_hosts_resolve(void **state)
{
    const char *hosts[] = {"127.0.0.1", "::1", "localhost"};

    (void)state;
    for (size_t i = 0; i < sizeof(hosts) / sizeof(*hosts); i++) {
        struct addrinfo *res = NULL;
        dlock__msg m;
        dlock_err err = dlock__resolve(hosts[i], 6379,
                                       dlock__deadline_after_ms(5000), &res,
                                       &m);

        TK_EXPECT(err == DLOCK_OK && res != NULL, "%s resolves, got %s: %s",
                  hosts[i], dlock_errname(err), m.text);
        freeaddrinfo(res);
    }
}

static void an_unknown_name_fails_within_the_deadline(void **state)
{
    struct addrinfo *res = NULL;
    dlock__msg m;
    int64_t started = testkit_now_ms(), took;
    dlock_err err = dlock__resolve("no-such-host.invalid", 6379,
                                   dlock__deadline_after_ms(1500), &res, &m);

    (void)state;
    took = testkit_now_ms() - started;
    TK_EXPECT((err == DLOCK_UNAVAILABLE || err == DLOCK_TIMEOUT)
                  && res == NULL,
              "an unknown name fails, got %s: %s", dlock_errname(err), m.text);
    TK_EXPECT(took < 3000,
              "within the 1.5 s deadline (+1.5 s), took %lld "
              "ms",
              (long long)took);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(numeric_and_named_hosts_resolve),
        cmocka_unit_test(an_unknown_name_fails_within_the_deadline),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
