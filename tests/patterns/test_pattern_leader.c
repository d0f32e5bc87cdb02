/*
 * test_pattern_leader.c: leader election (dlock/leader.h).
 *
 * One candidate leads at a time and each new leadership gets a larger
 * term, across resignations and expired leases.  A resignation hands over
 * at once to a waiting candidate (the old lease had 10 s left, so only the
 * notification explains a quick takeover); a candidate that crashes is
 * replaced within one TTL (plus the poll allowance); a leader whose lease
 * is taken away behind its back finds out at its next renewal and is told
 * through on_lost, then campaigns again and gets a new term; stop resigns
 * and calls on_lost.  A tick is run once, only by the leader, also after a
 * fail-over to another candidate.
 */
#include "patkit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static void forget(const char *name)
{
    char a[TESTKIT_KEY_MAX + 64], b[TESTKIT_KEY_MAX + 64],
        t[TESTKIT_KEY_MAX + 64];

    patkit_forget(patkit_pkey(a, "leader", name, ""),
                  patkit_pkey(b, "leader", name, ":term"),
                  patkit_pkey(t, "leader", name, ":tick"), NULL);
}

typedef struct events {
    atomic_int gained;
    atomic_int lost;
    atomic_ullong last_term;
    atomic_llong gained_us;
    atomic_int order_ok; /* 0 once a callback came out of order */
} events;

static void on_gained(dlock_leader *l, uint64_t term, void *arg)
{
    events *e = arg;

    if (atomic_load(&e->gained) != atomic_load(&e->lost)
        || !dlock_leader_is_leader(l))
        atomic_store(&e->order_ok, 0);
    atomic_store(&e->last_term, term);
    atomic_store(&e->gained_us, testkit_now_us());
    atomic_fetch_add(&e->gained, 1);
}

static void on_lost(dlock_leader *l, uint64_t term, void *arg)
{
    events *e = arg;

    if (atomic_load(&e->gained) != atomic_load(&e->lost) + 1
        || dlock_leader_is_leader(l) || term != atomic_load(&e->last_term))
        atomic_store(&e->order_ok, 0);
    atomic_fetch_add(&e->lost, 1);
}

static int gained_once(void *arg)
{
    return atomic_load(&((events *)arg)->gained) == 1;
}

static int gained_twice(void *arg)
{
    return atomic_load(&((events *)arg)->gained) == 2;
}

static int lost_once(void *arg)
{
    return atomic_load(&((events *)arg)->lost) == 1;
}

static dlock_leader *candidate(dlock_client *c, const char *name, int64_t ttl,
                               const char *id, events *e)
{
    dlock_leader_opts o;
    dlock_leader *l = NULL;

    dlock_leader_opts_init(&o);
    o.ttl_ms = ttl;
    o.id = id;
    if (e != NULL) {
        memset(e, 0, sizeof(*e));
        atomic_store(&e->order_ok, 1);
        o.on_gained = on_gained;
        o.on_lost = on_lost;
        o.arg = e;
    }
    TK_EXPECT_ERR(dlock_leader_new(c, name, &o, &l), DLOCK_OK, c,
                  "making a candidate");
    return l;
}

static void one_candidate_leads_and_the_other_is_busy(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX];
    dlock_leader *a, *b;
    dlock_leader_info info;

    (void)state;
    testkit_key(name, "leader_one");
    a = candidate(c, name, 5000, "node-a", NULL);
    b = candidate(c, name, 5000, "node-b", NULL);
    TK_EXPECT_ERR(dlock_leader_campaign(a, 0), DLOCK_OK, c, "a campaigns");
    TK_EXPECT(dlock_leader_is_leader(a) && dlock_leader_term(a) > 0,
              "a leads with a term");
    TK_EXPECT_ERR(dlock_leader_campaign(b, 0), DLOCK_BUSY, c, "b campaigns");
    TK_EXPECT(!dlock_leader_is_leader(b) && dlock_leader_term(b) == 0,
              "b does not lead and never did");
    TK_EXPECT(dlock_client_busy_ttl_ms(c) > 4000, "b is told a's lease runs "
                                                  "~5 s more");
    TK_EXPECT_ERR(dlock_leader_inspect(c, name, &info), DLOCK_OK, c,
                  "inspecting");
    TK_EXPECT(info.held && strcmp(info.id, "node-a") == 0
                  && info.term == dlock_leader_term(a)
                  && info.last_term == info.term && info.ttl_ms > 4000,
              "inspect shows a as the leader with its term, got held %d id "
              "%s term %llu",
              info.held, info.id, (unsigned long long)info.term);
    TK_EXPECT_ERR(dlock_leader_renew(a), DLOCK_OK, c, "a renews");
    TK_EXPECT_ERR(dlock_leader_renew(b), DLOCK_STATE, c, "b renews");
    TK_EXPECT_ERR(dlock_leader_resign(a), DLOCK_OK, c, "a resigns");
    TK_EXPECT(!dlock_leader_is_leader(a), "a no longer leads");
    dlock_leader_free(a);
    dlock_leader_free(b);
    forget(name);
    dlock_client_free(c);
}

static void the_term_grows_with_each_new_leader(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX], lease[TESTKIT_KEY_MAX + 64];
    dlock_leader *a, *b;
    uint64_t t1, t2, t3;

    (void)state;
    testkit_key(name, "leader_terms");
    patkit_pkey(lease, "leader", name, "");
    a = candidate(c, name, 5000, NULL, NULL);
    b = candidate(c, name, 200, NULL, NULL);
    TK_EXPECT_ERR(dlock_leader_campaign(a, 0), DLOCK_OK, c, "a campaigns");
    t1 = dlock_leader_term(a);
    TK_EXPECT_ERR(dlock_leader_campaign(a, 0), DLOCK_OK, c, "a again");
    TK_EXPECT(dlock_leader_term(a) == t1, "leading again is the same term");
    TK_EXPECT_ERR(dlock_leader_resign(a), DLOCK_OK, c, "a resigns");
    TK_EXPECT_ERR(dlock_leader_campaign(b, 0), DLOCK_OK, c, "b campaigns");
    t2 = dlock_leader_term(b);
    TK_EXPECT(t2 > t1, "b's term %llu is above a's %llu",
              (unsigned long long)t2, (unsigned long long)t1);
    /* b never renews: its 200 ms lease runs out. */
    TK_EXPECT_ERR(dlock_leader_campaign(a, 3000), DLOCK_OK, c,
                  "a waits for b's lease to run out");
    t3 = dlock_leader_term(a);
    TK_EXPECT(t3 > t2, "a's new term %llu is above b's %llu",
              (unsigned long long)t3, (unsigned long long)t2);
    TK_EXPECT(!dlock_leader_is_leader(b), "b knows its lease ran out");
    TK_EXPECT_ERR(dlock_leader_renew(b), DLOCK_LOST, c, "b renews late");
    TK_EXPECT(dlock_leader_term(b) == t2, "b remembers its last term");
    dlock_leader_resign(a);
    dlock_leader_free(a);
    dlock_leader_free(b);
    forget(name);
    dlock_client_free(c);
}

static void a_resignation_hands_over_at_once(void **state)
{
    dlock_client *c = patkit_client(), *other = patkit_client();
    char name[TESTKIT_KEY_MAX], channel[TESTKIT_KEY_MAX + 32];
    dlock_leader *a, *b;
    events e;
    int64_t resigned, took;

    (void)state;
    testkit_key(name, "leader_resign");
    snprintf(channel, sizeof(channel), "dlock:leader:%s", name);
    a = candidate(c, name, 10000, NULL, NULL);
    b = candidate(other, name, 10000, NULL, &e);
    TK_EXPECT_ERR(dlock_leader_campaign(a, 0), DLOCK_OK, c, "a campaigns");
    TK_EXPECT_ERR(dlock_leader_start(b), DLOCK_OK, other, "b starts");
    TK_EXPECT(patkit_wait_subscribed(channel, 3000), "b waits on %s", channel);
    TK_EXPECT_ERR(dlock_leader_campaign(b, 0), DLOCK_STATE, other,
                  "campaign while the thread runs");
    resigned = testkit_now_us();
    TK_EXPECT_ERR(dlock_leader_resign(a), DLOCK_OK, c, "a resigns");
    TK_EXPECT_ERR(dlock_leader_wait(b, 1, 3000), DLOCK_OK, other,
                  "b becomes the leader");
    took = testkit_now_us() - resigned;
    print_message("takeover %lld us after the resignation\n", (long long)took);
    TK_EXPECT(took < 1000000,
              "b takes over on the notification, long "
              "before a's 10 s lease, got %lld us",
              (long long)took);
    TK_EXPECT(testkit_wait_until(gained_once, &e, 1000), "on_gained runs");
    TK_EXPECT(atomic_load(&e.gained) == 1
                  && atomic_load(&e.last_term) == dlock_leader_term(b)
                  && dlock_leader_term(b) > dlock_leader_term(a),
              "on_gained ran once with b's term, above a's");
    TK_EXPECT_ERR(dlock_leader_stop(b), DLOCK_OK, other, "b stops");
    TK_EXPECT(atomic_load(&e.lost) == 1 && atomic_load(&e.order_ok),
              "stop resigns and calls on_lost once, after on_gained");
    TK_EXPECT(!patkit_exists(patkit_pkey((char[TESTKIT_KEY_MAX + 64]){0},
                                         "leader", name, "")),
              "after stop nobody leads");
    dlock_leader_free(a);
    dlock_leader_free(b);
    forget(name);
    dlock_client_free(other);
    dlock_client_free(c);
}

static void a_crashed_leader_is_replaced_within_one_ttl(void **state)
{
    dlock_client *c = patkit_client(), *other = patkit_client();
    char name[TESTKIT_KEY_MAX];
    dlock_leader *a, *b;
    events e;
    int64_t crashed, took_ms;

    (void)state;
    testkit_key(name, "leader_crash");
    a = candidate(c, name, 500, NULL, NULL);
    b = candidate(other, name, 500, NULL, &e);
    TK_EXPECT_ERR(dlock_leader_campaign(a, 0), DLOCK_OK, c, "a campaigns");
    TK_EXPECT_ERR(dlock_leader_start(b), DLOCK_OK, other, "b starts");
    TK_EXPECT_ERR(dlock_leader_renew(a), DLOCK_OK, c, "a renews once more");
    crashed = testkit_now_us();
    dlock_leader_free(a); /* dies: no resignation */
    TK_EXPECT_ERR(dlock_leader_wait(b, 1, 3000), DLOCK_OK, other,
                  "b becomes the leader");
    took_ms = (testkit_now_us() - crashed) / 1000;
    print_message("takeover %lld ms after the crash (TTL 500 ms)\n",
                  (long long)took_ms);
    TK_EXPECT(took_ms >= 400 && took_ms <= 500 + 300,
              "b takes over when a's "
              "500 ms lease runs out, within one TTL plus the poll "
              "allowance, got %lld ms",
              (long long)took_ms);
    dlock_leader_stop(b);
    dlock_leader_free(b);
    forget(name);
    dlock_client_free(other);
    dlock_client_free(c);
}

static void a_leader_whose_lease_is_taken_is_told_and_campaigns_again(
    void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX], lease[TESTKIT_KEY_MAX + 64];
    dlock_leader *l;
    events e;
    uint64_t first;

    (void)state;
    testkit_key(name, "leader_taken");
    patkit_pkey(lease, "leader", name, "");
    l = candidate(c, name, 600, NULL, &e);
    TK_EXPECT_ERR(dlock_leader_start(l), DLOCK_OK, c, "starting");
    TK_EXPECT_ERR(dlock_leader_wait(l, 1, 3000), DLOCK_OK, c, "it leads");
    first = dlock_leader_term(l);
    TK_EXPECT(testkit_wait_until(gained_once, &e, 1000), "on_gained runs");
    patkit_forget(lease, NULL); /* an operator deletes the lease */
    /* It may lead again a moment after losing, so wait on the callbacks,
     * not on is_leader. */
    TK_EXPECT(testkit_wait_until(lost_once, &e, 2000),
              "it finds out at its "
              "next renewal (every 200 ms) and on_lost runs");
    TK_EXPECT(patkit_wait_int_at_least(lease, "term", (long long)first + 1,
                                       2000),
              "it campaigns again and wins");
    TK_EXPECT_ERR(dlock_leader_wait(l, 1, 2000), DLOCK_OK, c, "it leads");
    TK_EXPECT(testkit_wait_until(gained_twice, &e, 1000),
              "on_gained runs again");
    TK_EXPECT(atomic_load(&e.lost) == 1 && atomic_load(&e.gained) == 2,
              "on_lost once, on_gained twice, got lost %d gained %d",
              atomic_load(&e.lost), atomic_load(&e.gained));
    TK_EXPECT(dlock_leader_term(l) > first, "with a new term");
    TK_EXPECT(atomic_load(&e.order_ok),
              "callbacks alternate: gained, lost, "
              "gained, each with is_leader as expected");
    dlock_leader_stop(l);
    dlock_leader_free(l);
    forget(name);
    dlock_client_free(c);
}

#define A_YEAR_MS ((int64_t)365 * 86400 * 1000)

static void a_tick_runs_once_and_only_for_the_leader(void **state)
{
    dlock_client *c = patkit_client();
    char name[TESTKIT_KEY_MAX];
    dlock_leader *a, *b;
    dlock_leader_tick_info t, again;

    (void)state;
    testkit_key(name, "leader_tick");
    a = candidate(c, name, 5000, NULL, NULL);
    b = candidate(c, name, 5000, NULL, NULL);
    TK_EXPECT_ERR(dlock_leader_campaign(a, 0), DLOCK_OK, c, "a campaigns");
    TK_EXPECT_ERR(dlock_leader_tick(b, A_YEAR_MS, &t), DLOCK_LOST, c,
                  "a tick by a candidate that does not lead");
    TK_EXPECT_ERR(dlock_leader_tick(a, A_YEAR_MS, &t), DLOCK_OK, c,
                  "the leader's first tick");
    TK_EXPECT(t.skipped == 0 && t.next_in_ms > 0 && t.next_in_ms <= A_YEAR_MS,
              "the first tick skipped nothing and "
              "says when the next one comes");
    TK_EXPECT_ERR(dlock_leader_tick(a, A_YEAR_MS, &again), DLOCK_BUSY, c,
                  "the same tick again");
    TK_EXPECT(again.tick == t.tick, "it is the same tick number");
    TK_EXPECT_ERR(dlock_leader_resign(a), DLOCK_OK, c, "a resigns");
    TK_EXPECT_ERR(dlock_leader_campaign(b, 0), DLOCK_OK, c, "b campaigns");
    TK_EXPECT_ERR(dlock_leader_tick(b, A_YEAR_MS, &again), DLOCK_BUSY, c,
                  "the new leader asks for the tick a already ran");
    TK_EXPECT_ERR(dlock_leader_tick(b, 1000, &again), DLOCK_OK, c,
                  "a job with another period is a fresh schedule");
    dlock_leader_resign(b);
    dlock_leader_free(a);
    dlock_leader_free(b);
    forget(name);
    dlock_client_free(c);
}

static void bad_arguments_are_refused(void **state)
{
    dlock_client *c = patkit_client();
    dlock_leader_opts o;
    dlock_leader *l = (dlock_leader *)1;

    (void)state;
    dlock_leader_opts_init(&o);
    o.ttl_ms = 0;
    TK_EXPECT_ERR(dlock_leader_new(c, "x", &o, &l), DLOCK_INVALID, c,
                  "a zero lease");
    TK_EXPECT(l == NULL, "a failed new sets *out to NULL");
    l = candidate(c, "x", 1000, NULL, NULL);
    TK_EXPECT_ERR(dlock_leader_stop(l), DLOCK_STATE, c, "stop before start");
    TK_EXPECT_ERR(dlock_leader_wait(l, 1, 50), DLOCK_TIMEOUT, c,
                  "waiting to lead without campaigning");
    TK_EXPECT_ERR(dlock_leader_tick(l, 0, NULL), DLOCK_INVALID, c,
                  "a zero period");
    dlock_leader_free(l);
    dlock_leader_free(NULL);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_candidate_leads_and_the_other_is_busy),
        cmocka_unit_test(the_term_grows_with_each_new_leader),
        cmocka_unit_test(a_resignation_hands_over_at_once),
        cmocka_unit_test(a_crashed_leader_is_replaced_within_one_ttl),
        cmocka_unit_test(
            a_leader_whose_lease_is_taken_is_told_and_campaigns_again),
        cmocka_unit_test(a_tick_runs_once_and_only_for_the_leader),
        cmocka_unit_test(bad_arguments_are_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
