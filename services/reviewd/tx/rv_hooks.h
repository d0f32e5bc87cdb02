/*
 * rv_hooks.h: reviewd's test hooks, compiled only into test builds.
 *
 * The tests need to stall a request while it holds its lock and to fail
 * a transition after its outbox row was written.  Those switches must
 * not exist in the binary that runs in production, so, as libdlock's
 * DLOCK_TESTING and sqlite's SQLITE_TEST, they are compiled in only with
 * REVIEWD_TESTING, which only the reviewd-testing binary (and the
 * reviewd_core_testing library under it) is built with.  Without it each
 * hook below is an inline no-op the compiler removes, so the production
 * code path around a hook point is the same in both binaries.
 *
 * In reviewd-testing, REVIEWD_TEST_HOOKS=1 (rv_config.h) turns them on:
 *   X-Test-Pause-Ms: N   (1..60000) rv_hook_pause stalls the request for
 *                        N ms inside its transaction, after the
 *                        Idempotency-Key claim and before the work (so
 *                        before any row lock), while it holds its lock:
 *                        tests make a holder outlive its TTL and catch a
 *                        request in flight;
 *   X-Test-Fail: after-event   rv_hook_fail_after_event fails a
 *                        transition right after its outbox insert, so
 *                        tests see that a rolled-back change emits
 *                        nothing.
 * Threads: any request thread; the hooks keep no state.
 */
#ifndef RV_HOOKS_H
#define RV_HOOKS_H

#include "db/rv_db.h"
#include "api/rv_request.h"

#ifdef REVIEWD_TESTING

/* The hook point of rv_tx's attempt, between the claim and the work.
 * With X-Test-Pause-Ms it sends the BEGIN that the production path
 * deferred (so the request is "idle in transaction" where tests look for
 * it) and sleeps; returns that BEGIN's status, or RV_DB_OK. */
rv_db_status rv_hook_pause(const rv_request *req, rv_db_conn *c);

/* 1 when this request asked to fail after its outbox insert. */
int rv_hook_fail_after_event(const rv_request *req);

#else

static inline rv_db_status rv_hook_pause(const rv_request *req, rv_db_conn *c)
{
    (void)req;
    (void)c;
    return RV_DB_OK;
}

static inline int rv_hook_fail_after_event(const rv_request *req)
{
    (void)req;
    return 0;
}

#endif /* REVIEWD_TESTING */

#endif /* RV_HOOKS_H */
