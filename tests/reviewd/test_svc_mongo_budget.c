/*
 * test_svc_mongo_budget.c: a MongoDB call made late in a request ends
 * within what the request's budget leaves, not after libmongoc's own
 * timeouts (svc_content_mongo.h, budget classes).
 *
 * The store is opened with a 4 s budget, as reviewd opens it, against a
 * private MongoDB-wire server (rvt_mongo.h) behind the fault kit's
 * pausable proxy.  A first call, with the budget whole, writes a record
 * (the connection is up).  Then the proxy holds every byte, and a read
 * is made with 300 ms left of the thread's deadline: it must come back
 * UNAVAILABLE within 300 ms plus a margin for a loaded machine, where a
 * store with one set of timeouts waits 2 s (server selection, half the
 * budget) or 4 s (a socket read) whatever is left.  A call with no
 * deadline at all still uses the widest class and succeeds once the
 * proxy resumes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rvt_mongo.h"
#include "svc_content_mongo.h"
#include "svc_deadline.h"
#include "testkit.h"

#define BUDGET_MS 4000
#define LEFT_MS 300
/* Far below the 2 s a fixed server selection takes, far above 300 ms. */
#define LATE_CALL_MAX_MS 1500

static void a_late_call_ends_within_what_the_budget_leaves(void **state)
{
    rvt_mongo mongo;
    testkit_proxy *proxy;
    svc_mongo_store *store;
    char db[64], url[256], err[512];
    char *content = NULL;
    int64_t t0, took;
    svc_store_rc rc;

    (void)state;
    snprintf(db, sizeof(db), "rvt_budget_%ld", (long)getpid());
    assert_int_equal(rvt_mongo_open(&mongo, "mongo_budget", db), 0);
    proxy = testkit_proxy_for("mongo_budget_proxy", mongo.port);
    assert_non_null(proxy);
    /* No timeouts in the URL: the store's own, cut from the budget. */
    snprintf(url, sizeof(url), "mongodb://127.0.0.1:%d/%s", proxy->port, db);
    store = svc_mongo_store_open(url, "test", BUDGET_MS, err, sizeof(err));
    TK_EXPECT(store != NULL, "the store opens: %s", err);

    svc_deadline_start(BUDGET_MS);
    rc = svc_mongo_store_put(store, "7", 1, "text", err, sizeof(err));
    TK_EXPECT(rc == SVC_STORE_OK, "a write with the budget whole: %s", err);

    assert_int_equal(testkit_proxy_ctl(proxy, "pause"), 0);
    svc_deadline_start(LEFT_MS);
    t0 = testkit_now_ms();
    rc = svc_mongo_store_get(store, "7", 1, &content, err, sizeof(err));
    took = testkit_now_ms() - t0;
    TK_EXPECT(rc == SVC_STORE_UNAVAILABLE,
              "a read through the paused proxy is UNAVAILABLE, got %d: %s",
              (int)rc, err);
    TK_EXPECT(took <= LATE_CALL_MAX_MS,
              "with %d ms left the read gave up in %lld ms (bound %d)",
              LEFT_MS, (long long)took, LATE_CALL_MAX_MS);

    assert_int_equal(testkit_proxy_ctl(proxy, "resume"), 0);
    svc_deadline_clear();
    rc = svc_mongo_store_get(store, "7", 1, &content, err, sizeof(err));
    TK_EXPECT(rc == SVC_STORE_OK && content != NULL
                  && strcmp(content, "text") == 0,
              "with no deadline the read succeeds after the outage: %s", err);
    free(content);
    svc_mongo_store_free(store);
    testkit_proxy_free(proxy);
    rvt_mongo_close(&mongo, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_late_call_ends_within_what_the_budget_leaves),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
