/*
 * test_alloc_failure.c: every constructor survives every allocation
 * failure (STYLE.md, "Allocation failure").
 *
 * For each constructor the walk is the same: make the 1st allocation of the
 * call fail, then the 2nd, and so on, until the call succeeds.  Each failed
 * call must return DLOCK_NOMEM and leave nothing behind: no leak (the ASan
 * build's LeakSanitizer checks at exit) and, for dlock_acquire, no key in
 * Redis (the next step of the walk would then get DLOCK_BUSY).  The hook is
 * dlock__alloc_fail_nth from src/lib/base/alloc.h, in the DLOCK_TESTING build.
 *
 * Only the library's own allocations are counted: hiredis and OpenSSL
 * allocate outside the wrapper, and so do the library's background threads
 * (the hook is per thread).  dlock_client_new needs a live Redis, the shared
 * stack's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "dlock/async.h"
#include "dlock/dlock.h"
#include "testkit.h"
#include "transport/url.h"

/* More steps than any constructor has allocations; reaching it means the
 * call never succeeds. */
#define MAX_STEPS 500

/* One attempt at a constructor: the call with injection on, then the
 * cleanup of what it built (injection off) when it succeeded. */
typedef struct walk {
    const char *what;
    dlock_err (*call)(struct walk *w);
    void (*cleanup)(struct walk *w);
    dlock_client *client;
    const char *url;
    char key[TESTKIT_KEY_MAX];
    void *built;
    char errbuf[DLOCK_ERRMSG_MAX];
    dlock__endpoint ep;
} walk;

/* Fails allocation 1, 2, ... of w->call until it succeeds; returns how many
 * allocations the successful call made. */
static long walk_allocations(walk *w)
{
    for (long n = 1; n <= MAX_STEPS; n++) {
        dlock_err err;
        long made;

        w->errbuf[0] = '\0';
        dlock__alloc_fail_nth(n);
        err = w->call(w);
        made = dlock__alloc_count();
        dlock__alloc_fail_nth(0);
        if (err == DLOCK_OK) {
            TK_EXPECT(n > 1,
                      "%s allocates at least once (it succeeded with "
                      "the 1st allocation failing)",
                      w->what);
            w->cleanup(w);
            print_message("%s: failed each of its %ld allocations in turn, "
                          "then succeeded\n",
                          w->what, n - 1);
            return made;
        }
        TK_EXPECT(err == DLOCK_NOMEM,
                  "%s with allocation %ld failing "
                  "returns DLOCK_NOMEM, got %s (\"%s\")",
                  w->what, n, dlock_errname(err),
                  w->errbuf[0]
                      ? w->errbuf
                      : (w->client ? dlock_client_errmsg(w->client) : ""));
        TK_EXPECT(w->built == NULL,
                  "%s sets its out-parameter to NULL when "
                  "it fails",
                  w->what);
    }
    TK_EXPECT(0, "%s succeeds within %d allocations", w->what, MAX_STEPS);
    return 0;
}

static dlock_err call_url_parse(walk *w)
{
    dlock__msg m;
    dlock_err err;

    dlock__msg_clear(&m);
    err = dlock__url_parse("redis://us%40er:p%3Ass@cache.example:6380/2",
                           &w->ep, &m);
    snprintf(w->errbuf, sizeof(w->errbuf), "%s", m.text);
    if (err != DLOCK_OK)
        TK_EXPECT(w->ep.host == NULL && w->ep.user == NULL
                      && w->ep.password == NULL,
                  "a failed parse owns nothing");
    return err;
}

static void cleanup_url_parse(walk *w)
{
    TK_EXPECT(strcmp(w->ep.user, "us@er") == 0
                  && strcmp(w->ep.password, "p:ss") == 0
                  && strcmp(w->ep.host, "cache.example") == 0,
              "after the walk the URL parses completely");
    dlock__endpoint_clear(&w->ep);
}

static void url_parse_fails_cleanly_at_every_allocation(void **state)
{
    walk w = {.what = "dlock__url_parse",
              .call = call_url_parse,
              .cleanup = cleanup_url_parse};

    (void)state;
    TK_EXPECT(walk_allocations(&w) >= 3, "user, password and host are "
                                         "allocated");
}

static dlock_err call_client_new(walk *w)
{
    dlock_client_opts o;
    dlock_client *c = NULL;
    dlock_err err;

    dlock_client_opts_init(&o);
    /* Every option string is copied, so each copy is one more step. */
    o.username = "default";
    o.password = NULL;
    o.connect_timeout_ms = 2000;
    err = dlock_client_new(w->url, &o, &c, w->errbuf, sizeof(w->errbuf));
    w->built = c;
    return err;
}

static void cleanup_client_new(walk *w)
{
    int64_t rtt;

    TK_EXPECT(dlock_client_ping(w->built, &rtt) == DLOCK_OK,
              "the client built after the walk works");
    dlock_client_free(w->built);
    w->built = NULL;
}

static void client_new_fails_cleanly_at_every_allocation(void **state)
{
    walk w = {.what = "dlock_client_new",
              .call = call_client_new,
              .cleanup = cleanup_client_new};

    (void)state;
    w.url = testkit_shared_redis();
    TK_EXPECT(w.url != NULL, "the shared Redis answers");
    walk_allocations(&w);
}

/* A client for the lock walks, with this thread's state already made (it
 * is allocated on a thread's first call and then reused). */
static dlock_client *lock_walk_client(void)
{
    const char *url = testkit_shared_redis();
    char errbuf[DLOCK_ERRMSG_MAX] = "";
    dlock_client *c = NULL;

    TK_EXPECT(url != NULL, "the shared Redis answers");
    TK_EXPECT(dlock_client_new(url, NULL, &c, errbuf, sizeof(errbuf))
                  == DLOCK_OK,
              "a client for %s: %s", url, errbuf);
    TK_EXPECT(dlock_client_ping(c, NULL) == DLOCK_OK, "PING works");
    return c;
}

static dlock_err call_acquire(walk *w)
{
    dlock_acquire_opts o;
    dlock_lock *l = NULL;
    dlock_err err;

    dlock_acquire_opts_init(&o);
    o.ttl_ms = 5000;
    err = dlock_acquire(w->client, w->key, &o, &l);
    w->built = l;
    return err;
}

static void cleanup_acquire(walk *w)
{
    TK_EXPECT(dlock_lock_fence(w->built) > 0, "the lock got a fence");
    TK_EXPECT_ERR(dlock_release(w->built), DLOCK_OK, w->client,
                  "releasing the lock built after the walk");
    w->built = NULL;
}

static void acquire_fails_cleanly_at_every_allocation(void **state)
{
    walk w = {.what = "dlock_acquire",
              .call = call_acquire,
              .cleanup = cleanup_acquire};
    dlock_lock_info info;

    (void)state;
    w.client = lock_walk_client();
    testkit_key(w.key, "alloc_acquire");
    walk_allocations(&w);
    TK_EXPECT(dlock_inspect(w.client, w.key, &info) == DLOCK_OK && !info.held,
              "no failed acquire left the key held");
    testkit_forget_lock(testkit_redis_url(), w.key);
    dlock_client_free(w.client);
}

static dlock_err call_attach(walk *w)
{
    dlock_lock *l = NULL;
    dlock_err err = dlock_lock_attach(w->client, w->key,
                                      "00112233445566778899AABBCCDDEEFF", &l);

    w->built = l;
    return err;
}

static void cleanup_attach(walk *w)
{
    TK_EXPECT(strcmp(dlock_lock_token(w->built),
                     "00112233445566778899aabbccddeeff")
                  == 0,
              "the attached lock keeps the token, in lower case");
    dlock_lock_free(w->built);
    w->built = NULL;
}

static void lock_attach_fails_cleanly_at_every_allocation(void **state)
{
    walk w = {.what = "dlock_lock_attach",
              .call = call_attach,
              .cleanup = cleanup_attach};

    (void)state;
    w.client = lock_walk_client();
    testkit_key(w.key, "alloc_attach");
    walk_allocations(&w);
    dlock_client_free(w.client);
}

static dlock_err call_async_new(walk *w)
{
    dlock_async *a = NULL;
    dlock_err err = dlock_async_new(w->client, &a);

    w->built = a;
    return err;
}

static void cleanup_async_new(walk *w)
{
    TK_EXPECT(dlock_async_fd(w->built) >= 0, "the handle is connected");
    dlock_async_free(w->built);
    w->built = NULL;
}

static void async_new_fails_cleanly_at_every_allocation(void **state)
{
    walk w = {.what = "dlock_async_new",
              .call = call_async_new,
              .cleanup = cleanup_async_new};

    (void)state;
    w.client = lock_walk_client();
    walk_allocations(&w);
    dlock_client_free(w.client);
}

/* What an async acquire's callback saw (the walk's thread runs it). */
static dlock_async *walk_async; /* the acquire walk's handle */
static dlock_err async_err;
static dlock_lock *async_lock;
static int async_done;

static void async_acquired(dlock_async *a, dlock_err err, dlock_lock *lock,
                           const char *msg, void *arg)
{
    (void)a;
    (void)msg;
    (void)arg;
    async_err = err;
    async_lock = lock;
    async_done = 1;
}

/* An async acquire queued and driven to its completion: the submission's
 * error, else the callback's. */
static dlock_err call_async_acquire(walk *w)
{
    dlock_async *a = walk_async;
    dlock_acquire_opts o;
    int64_t until = testkit_now_ms() + 5000;
    dlock_err err;

    dlock_acquire_opts_init(&o);
    o.ttl_ms = 5000;
    async_done = 0;
    async_lock = NULL;
    w->built = NULL;
    err = dlock_async_acquire(a, w->key, &o, async_acquired, NULL);
    if (err != DLOCK_OK)
        return err;
    while (!async_done && testkit_now_ms() < until) {
        struct pollfd p = {.fd = dlock_async_fd(a), .events = POLLIN};

        poll(&p, 1, 10);
        dlock_async_process(a, DLOCK_ASYNC_READ);
    }
    w->built = async_lock;
    return async_done ? async_err : DLOCK_TIMEOUT;
}

static void cleanup_async_acquire(walk *w)
{
    TK_EXPECT(dlock_lock_fence(w->built) > 0, "the lock got a fence");
    TK_EXPECT_ERR(dlock_release(w->built), DLOCK_OK, w->client,
                  "releasing the lock built after the walk");
    w->built = NULL;
}

static void async_acquire_fails_cleanly_at_every_allocation(void **state)
{
    walk w = {.what = "dlock_async_acquire",
              .call = call_async_acquire,
              .cleanup = cleanup_async_acquire};
    dlock_async *a = NULL;
    dlock_lock_info info;

    (void)state;
    w.client = lock_walk_client();
    TK_EXPECT_ERR(dlock_async_new(w.client, &a), DLOCK_OK, w.client,
                  "an async handle");
    testkit_key(w.key, "alloc_async_acquire");
    walk_async = a;
    walk_allocations(&w);
    walk_async = NULL;
    dlock_async_free(a);
    TK_EXPECT(dlock_inspect(w.client, w.key, &info) == DLOCK_OK && !info.held,
              "no failed acquire left the key held");
    testkit_forget_lock(testkit_redis_url(), w.key);
    dlock_client_free(w.client);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(url_parse_fails_cleanly_at_every_allocation),
        cmocka_unit_test(client_new_fails_cleanly_at_every_allocation),
        cmocka_unit_test(acquire_fails_cleanly_at_every_allocation),
        cmocka_unit_test(lock_attach_fails_cleanly_at_every_allocation),
        cmocka_unit_test(async_new_fails_cleanly_at_every_allocation),
        cmocka_unit_test(async_acquire_fails_cleanly_at_every_allocation),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
