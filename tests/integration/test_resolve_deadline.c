/*
 * test_resolve_deadline.c: a silent DNS server cannot hold a connect past
 * its connect timeout (issue 13, item 14).
 *
 * getaddrinfo(3) has no timeout of its own: with a DNS server that never
 * answers, it blocks for as long as the resolver retries, tens of seconds.
 * src/lib/transport/resolve.c runs the lookup under the connect deadline.  To prove
 * it, this program defines getaddrinfo itself: the library, a shared
 * object, binds to the executable's definition first, as it would to an
 * LD_PRELOAD shim's (done here rather than with LD_PRELOAD so that the
 * sanitizer build, whose runtime must come first among preloads, runs it
 * too).  For one reserved name (SILENT_HOST, under .test, which no real
 * resolver serves) the stand-in blocks for 30 s, like a silent DNS server,
 * and then fails; every other lookup goes to the real getaddrinfo.
 *
 * A client made for redis://SILENT_HOST with a 300 ms connect timeout
 * must fail (DLOCK_TIMEOUT or DLOCK_UNAVAILABLE) well before the 30 s are
 * up, and the stand-in must have been asked, so the test cannot pass
 * without the lookup it is about.
 */
#include "itkit.h"

#include <dlfcn.h>
#include <netdb.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#define SILENT_HOST "silent-dns.dlock.test"
#define SILENCE_S 30
#define CONNECT_TIMEOUT_MS 300
/* Well under the 30 s of silence, and loose enough for a loaded machine
 * and the sanitizer build. */
#define BOUND_MS 5000

typedef int (*getaddrinfo_fn)(const char *, const char *,
                              const struct addrinfo *, struct addrinfo **);

static atomic_int silent_lookups;

int getaddrinfo(const char *node, const char *service,
                const struct addrinfo *hints, struct addrinfo **res)
{
    static getaddrinfo_fn real;

    if (node != NULL && strcmp(node, SILENT_HOST) == 0
        && (hints == NULL || !(hints->ai_flags & AI_NUMERICHOST))) {
        struct timespec silence = {.tv_sec = SILENCE_S};

        atomic_fetch_add(&silent_lookups, 1);
        while (nanosleep(&silence, &silence) != 0)
            ;
        return EAI_AGAIN;
    }
    if (real == NULL)
        real = (getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    return real != NULL ? real(node, service, hints, res) : EAI_SYSTEM;
}

static void silent_dns_fails_within_the_connect_timeout(void **state)
{
    dlock_client_opts o = itkit_client_opts();
    char errbuf[DLOCK_ERRMSG_MAX] = "";
    dlock_client *c = NULL;
    int64_t started, took;
    dlock_err err;

    (void)state;
    o.connect_timeout_ms = CONNECT_TIMEOUT_MS;
    started = testkit_now_ms();
    err = dlock_client_new("redis://" SILENT_HOST ":6379", &o, &c, errbuf,
                           sizeof(errbuf));
    took = testkit_now_ms() - started;
    print_message("client for a silent DNS name: %s after %lld ms: %s\n",
                  dlock_errname(err), (long long)took, errbuf);
    TK_EXPECT(atomic_load(&silent_lookups) > 0,
              "the library looked %s up through getaddrinfo", SILENT_HOST);
    TK_EXPECT(err == DLOCK_TIMEOUT || err == DLOCK_UNAVAILABLE,
              "the client fails with DLOCK_TIMEOUT or DLOCK_UNAVAILABLE, "
              "got %s: %s",
              dlock_errname(err), errbuf);
    TK_EXPECT(c == NULL, "no client is handed out");
    TK_EXPECT(took < BOUND_MS,
              "it fails within %d ms (connect timeout %d ms), not after "
              "the %d s the lookup blocks; took %lld ms",
              BOUND_MS, CONNECT_TIMEOUT_MS, SILENCE_S, (long long)took);
    TK_EXPECT(strstr(errbuf, SILENT_HOST) != NULL,
              "the message names the host: %s", errbuf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(silent_dns_fails_within_the_connect_timeout),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
