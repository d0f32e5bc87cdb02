/*
 * itkit.c: setup helpers for the integration tests (see itkit.h).
 */
#include "itkit.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

const char *itkit_shared_url(void)
{
    const char *url = testkit_shared_redis();

    TK_EXPECT(url != NULL,
              "the shared Redis (%s) answers, or scripts/stack "
              "up redis starts it",
              testkit_redis_url());
    return url;
}

dlock_client_opts itkit_client_opts(void)
{
    dlock_client_opts o;

    dlock_client_opts_init(&o);
    o.connect_timeout_ms = 1000;
    o.io_timeout_ms = 2000;
    o.breaker_probe_ms = 100;
    return o;
}

dlock_client *itkit_client(const char *url, const dlock_client_opts *opts)
{
    dlock_client_opts defaults = itkit_client_opts();
    char errbuf[DLOCK_ERRMSG_MAX] = "";
    dlock_client *c = NULL;
    dlock_err err;

    err = dlock_client_new(url, opts != NULL ? opts : &defaults, &c, errbuf,
                           sizeof(errbuf));
    TK_EXPECT(err == DLOCK_OK && c != NULL, "a client for %s, got %s: %s", url,
              dlock_errname(err), errbuf);
    return c;
}

dlock_acquire_opts itkit_acquire_opts(int64_t ttl_ms, int64_t wait_ms)
{
    dlock_acquire_opts o;

    dlock_acquire_opts_init(&o);
    o.ttl_ms = ttl_ms;
    o.wait_ms = wait_ms;
    return o;
}

dlock_lock *itkit_acquire(dlock_client *c, const char *key,
                          const dlock_acquire_opts *opts)
{
    dlock_acquire_opts defaults = itkit_acquire_opts(10000, 0);
    dlock_lock *l = NULL;
    dlock_err err = dlock_acquire(c, key, opts != NULL ? opts : &defaults, &l);

    TK_EXPECT(err == DLOCK_OK && l != NULL,
              "acquiring %s succeeds, got %s: "
              "%s",
              key, dlock_errname(err), dlock_client_errmsg(c));
    TK_EXPECT(dlock_lock_fence(l) > 0 && !dlock_lock_degraded(l),
              "a lock held in Redis has a fence and is not degraded");
    return l;
}

testkit_proxied *itkit_proxied(const char *name)
{
    testkit_proxied *link = testkit_proxied_start(
        &(testkit_redis_opts){.name = name});

    TK_EXPECT(link != NULL, "a private redis-server %s and a proxy start",
              name);
    return link;
}

void itkit_pace_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int itkit_fixture_setup(void **state, const testkit_redis_opts *so)
{
    itkit_fixture *fx = calloc(1, sizeof(*fx));

    *state = fx;
    if (fx == NULL)
        return -1;
    fx->server = testkit_redis_start(so);
    return fx->server != NULL ? 0 : -1;
}

int itkit_fixture_teardown(void **state)
{
    itkit_fixture *fx = *state;

    if (fx != NULL) {
        testkit_redis_free(fx->server);
        free(fx);
    }
    return 0;
}
