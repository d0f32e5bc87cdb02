/*
 * itkit.h: helpers shared by the integration tests, on the public API.
 *
 * The integration tests link the shipped libdlock (the shared `dlock`
 * target) and see only the headers in include/dlock/, like any caller.
 * These helpers turn the setup steps every test repeats (a client, an
 * acquire that must succeed) into one call that fails the running cmocka
 * test with the library's own message when the step does not work, so
 * that a test body reads as the behaviour it checks.
 *
 * Threads: a failing helper ends the test by jumping back into cmocka's
 * runner (as TK_EXPECT does), which only works on the test's own thread.
 * Call these, and TK_EXPECT, from that thread only; other threads of a
 * test record what they saw and the test's thread asserts on it.
 */
#ifndef DLOCK_ITKIT_H
#define DLOCK_ITKIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dlock/dlock.h"
#include "testkit.h"

/* The shared stack's Redis URL, started if need be; fails the test when no
 * Redis can be had. */
const char *itkit_shared_url(void);

/* Client options with short timeouts for tests: connect 1 s, I/O 2 s,
 * breaker probe 100 ms. */
dlock_client_opts itkit_client_opts(void);

/* dlock_client_new(url, opts) that must succeed (opts NULL: the test
 * options above). */
dlock_client *itkit_client(const char *url, const dlock_client_opts *opts);

/* Acquire options: ttl_ms, wait_ms, the rest default. */
dlock_acquire_opts itkit_acquire_opts(int64_t ttl_ms, int64_t wait_ms);

/* dlock_acquire that must succeed with a fence; opts NULL: TTL 10 s. */
dlock_lock *itkit_acquire(dlock_client *c, const char *key,
                          const dlock_acquire_opts *opts);

/* A private redis-server named name with a proxy in front of it
 * (testkit_proxied_start) that must start; the test frees it with
 * testkit_proxied_free. */
testkit_proxied *itkit_proxied(const char *name);

/* The state of a test file whose tests share one private server (a
 * redis-server of the test's own, started by the test kit with the
 * options that file needs: TLS, passwords, ACL users). */
typedef struct itkit_fixture {
    testkit_redis *server; /* owned; freed by itkit_fixture_teardown */
} itkit_fixture;

/* A cmocka group setup's body: allocates an itkit_fixture into *state and
 * starts its server with *so (borrowed for the call).  Returns 0, or -1
 * when memory or the server could not be had (cmocka then skips the
 * group's tests and reports the failure); *state is set either way, for
 * the teardown. */
int itkit_fixture_setup(void **state, const testkit_redis_opts *so);

/* A cmocka group teardown: stops the server and frees what
 * itkit_fixture_setup made (a NULL *state does nothing).  Returns 0. */
int itkit_fixture_teardown(void **state);

/* Sleeps ms milliseconds: only to pace a loop that checks a condition
 * again and again (never to wait for something to happen). */
void itkit_pace_ms(int64_t ms);

#endif /* DLOCK_ITKIT_H */
