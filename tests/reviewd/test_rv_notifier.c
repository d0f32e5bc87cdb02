/*
 * test_rv_notifier.c: the outbox notifier (bg/rv_notifier.h) against the
 * stack's PostgreSQL, in a database of the test's own (no other test's
 * NOTIFY reaches it), with a LISTENer of the test's own.
 *
 * What the notifier must keep:
 *   - every poke is followed by a NOTIFY kh_outbox sent after it: one
 *     poke, then rv_notifier_stop, and the LISTENer has exactly one;
 *   - pokes that come together share their NOTIFYs: 200 pokes in a row
 *     make at least one and fewer than 200 (the gap after each NOTIFY
 *     folds the pokes that come in it);
 *   - no poke, no NOTIFY.
 * rv_notifier_stop sends what is still asked for and joins the thread, so
 * once it returns every NOTIFY of the case has committed; the test then
 * sends a marker of its own and counts the notifications before it.  No
 * case measures a time; the one wait is bounded (SOON_MS).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bg/rv_notifier.h"
#include "db/rv_db.h"
#include "rvt_kit.h"
#include "svc_log.h"
#include "testkit.h"

/* Bound on anything that should happen at once (a loaded machine). */
#define SOON_MS 30000
#define BURST 200

static rvt_db tdb;
static svc_log *log_;
static rv_db *db;
static rv_app app;
static PGconn *listener;

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs sql on the listener's connection; 1 when it succeeded. */
static int run(const char *sql)
{
    PGresult *r = PQexec(listener, sql);
    const int ok = PQresultStatus(r) == PGRES_COMMAND_OK;

    if (!ok)
        fprintf(stderr, "# %s: %s", sql, PQerrorMessage(listener));
    PQclear(r);
    return ok;
}

static int setup(void **state)
{
    char err[256];

    (void)state;
    if (rvt_db_create(&tdb, "notifier") != 0)
        return -1;
    log_ = svc_log_new(NULL, SVC_LOG_WARN, err, sizeof(err));
    if (log_ == NULL)
        fail_msg("log: %s", err);
    db = rv_db_new(tdb.url, NULL, 0, 5, log_);
    assert_non_null(db);
    app.db = db;
    app.log = log_;
    listener = PQconnectdb(tdb.url);
    if (PQstatus(listener) != CONNECTION_OK)
        fail_msg("cannot connect: %s", PQerrorMessage(listener));
    return run("LISTEN kh_outbox") ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    PQfinish(listener);
    rv_db_free(db);
    svc_log_free(log_);
    rvt_db_drop(&tdb);
    return 0;
}

/*
 * Sends the marker from the listener's own connection (a session is
 * notified of its own NOTIFYs) and counts the notifications on kh_outbox
 * without a payload that come before it; -1 if the marker did not come
 * within SOON_MS.
 */
static int count_up_to_marker(void)
{
    const int64_t end = now_ms() + SOON_MS;
    int n = 0;

    if (!run("NOTIFY kh_outbox, 'marker'"))
        return -1;
    while (now_ms() < end) {
        struct pollfd p = {PQsocket(listener), POLLIN, 0};
        PGnotify *note;

        if (PQconsumeInput(listener) != 1)
            return -1;
        while ((note = PQnotifies(listener)) != NULL) {
            const int marker = strcmp(note->extra, "marker") == 0;

            n += !marker && strcmp(note->relname, "kh_outbox") == 0;
            PQfreemem(note);
            if (marker)
                return n;
        }
        poll(&p, 1, 100);
    }
    return -1;
}

/* Starts a notifier, pokes it `pokes` times in a row and stops it;
 * returns the notifications that came of it. */
static int notifications_of(int pokes)
{
    rv_notifier *n;

    assert_int_equal(count_up_to_marker() >= 0, 1); /* nothing left over */
    n = rv_notifier_start(&app);
    assert_non_null(n);
    for (int i = 0; i < pokes; i++)
        rv_notifier_poke(n);
    rv_notifier_stop(n);
    return count_up_to_marker();
}

static void one_poke_is_answered_by_one_notify(void **state)
{
    const int got = notifications_of(1);

    (void)state;
    TK_EXPECT(got == 1, "one poke, then stop: one NOTIFY, got %d", got);
}

static void a_burst_of_pokes_shares_its_notifies(void **state)
{
    const int got = notifications_of(BURST);

    (void)state;
    TK_EXPECT(got >= 1 && got < BURST,
              "%d pokes in a row: at least one NOTIFY and fewer than %d, "
              "got %d",
              BURST, BURST, got);
}

static void no_poke_sends_nothing(void **state)
{
    const int got = notifications_of(0);

    (void)state;
    TK_EXPECT(got == 0, "no poke: no NOTIFY, got %d", got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_poke_is_answered_by_one_notify),
        cmocka_unit_test(a_burst_of_pokes_shares_its_notifies),
        cmocka_unit_test(no_poke_sends_nothing),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
