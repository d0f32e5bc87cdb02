/*
 * test_pattern_lease.c: a pattern's grant never claims more than it can
 * know, and its fence never goes back (issue 13, for the patterns).
 *
 * Each pattern grant (a semaphore permit, a write hold, a leader's term)
 * carries the core lock's lease (src/lib/patterns/pattern_lease.h), so the tests
 * here are the core's (tests/integration/test_validity.c and
 * test_fence_history.c) for the patterns, against private redis-servers:
 *   - network silence (a paused dlock-test-proxy: bytes held, no reset):
 *     the grant is LOST at valid_until, its on_lost runs once then, and an
 *     extend or renewal stuck on the silent link returns by then, though no
 *     reply ever comes (the client waits 5 s for a reply, far past the
 *     1.5 s TTL);
 *   - a restart without persistence with the server's wall clock 60 s
 *     behind (the wall-clock shim): the next permit's grant number and the
 *     next leader term are higher than the last, or refused with
 *     DLOCK_UNPROVEN writing nothing; a call whose wait covers the lag
 *     waits for the server's clock and gets a higher one;
 *   - the counters expire as the core lock's do: 30 days past the TTL of
 *     their last grant (a permit, a read or write hold, a term), and a
 *     counter that is gone (deleted here, as expiry would) or left behind
 *     (set lower, as a lagging replica has it) while a holder's fence is
 *     recorded never gives a lower fence: a read hold's included, whose
 *     fence is drawn from the counter as a write's is; with the server's
 *     clock stepped back every grant is refused with DLOCK_UNPROVEN.
 * Waits are bounded conditions; nothing sleeps and hopes.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "patkit.h"

#define BEHIND_MS (-60000)
/* Long enough that a loaded machine (ASan, a build beside it) still holds
 * the grant when the link goes silent; the io timeout is far past it. */
#define TTL_MS 1500
#define IO_TIMEOUT_MS 5000

/* What an on_lost callback saw. */
typedef struct lost_seen {
    atomic_int calls;
    atomic_llong at_ms; /* testkit_now_ms() of the first call */
} lost_seen;

static void saw_loss(lost_seen *s)
{
    if (atomic_fetch_add(&s->calls, 1) == 0)
        atomic_store(&s->at_ms, testkit_now_ms());
}

static int callback_ran(void *arg)
{
    return atomic_load(&((lost_seen *)arg)->calls) > 0;
}

static void permit_lost(dlock_permit *p, void *arg)
{
    (void)p;
    saw_loss(arg);
}

static void hold_lost(dlock_rwlock *l, void *arg)
{
    (void)l;
    saw_loss(arg);
}

static void term_lost(dlock_leader *l, uint64_t term, void *arg)
{
    (void)l;
    (void)term;
    saw_loss(arg);
}

/* A private redis-server (wallclock: under the shim). */
static testkit_redis *private_redis(const char *name, int wallclock)
{
    testkit_redis *r = testkit_redis_start(
        &(testkit_redis_opts){.name = name, .wallclock = wallclock});

    TK_EXPECT(r != NULL, "a private redis-server %s starts", name);
    return r;
}

/* A grant the silent-link tests hold: a permit (with its semaphore), a
 * write hold, or a leader's term; one of permit, hold and leader is set. */
typedef struct grant {
    dlock_semaphore *sem;
    dlock_permit *permit;
    dlock_rwlock *hold;
    dlock_leader *leader;
} grant;

static int64_t grant_valid_ms(const grant *g)
{
    if (g->permit != NULL)
        return dlock_permit_valid_ms(g->permit);
    if (g->hold != NULL)
        return dlock_rwlock_valid_ms(g->hold);
    return dlock_leader_valid_ms(g->leader);
}

/* lost() and extend() of a permit or a hold (a term has neither). */
static int grant_lost(const grant *g)
{
    return g->permit != NULL ? dlock_permit_lost(g->permit)
                             : dlock_rwlock_lost(g->hold);
}

static dlock_err grant_extend(grant *g)
{
    return g->permit != NULL ? dlock_semaphore_extend(g->permit, 0)
                             : dlock_rwlock_extend(g->hold, 0);
}

static void grant_free(grant *g)
{
    dlock_permit_free(g->permit);
    dlock_semaphore_free(g->sem);
    dlock_rwlock_free(g->hold);
    dlock_leader_free(g->leader);
}

/* A server behind a proxy, a client through the proxy, and the grant the
 * client holds there. */
typedef struct silent {
    testkit_proxied *link;
    dlock_client *client;
    grant grant;
    lost_seen seen;
    int64_t paused_ms; /* when the proxy went silent */
    int64_t valid_ms;  /* what the grant claimed then */
} silent;

static void silent_start(silent *s, const char *name)
{
    memset(s, 0, sizeof(*s));
    s->link = testkit_proxied_start(&(testkit_redis_opts){.name = name});
    TK_EXPECT(s->link != NULL, "a private redis-server and a proxy start");
    s->client = patkit_client_of(s->link->url, IO_TIMEOUT_MS);
}

/* Pauses the proxy and notes how long the grant claims to be valid. */
static void silent_pause(silent *s)
{
    TK_EXPECT(testkit_proxy_ctl(s->link->proxy, "pause") == 0,
              "the proxy pauses");
    s->paused_ms = testkit_now_ms();
    s->valid_ms = grant_valid_ms(&s->grant);
    TK_EXPECT(s->valid_ms > 0 && s->valid_ms <= TTL_MS,
              "valid for %lld ms at the pause", (long long)s->valid_ms);
}

/* The loss came at valid_until: on_lost once, not before, a few ms
 * after (250 ms covers a loaded machine; before the pattern lease it came
 * after the 5 s io timeout, or never). */
static void expect_lost_at_valid_until(silent *s, const char *what)
{
    int64_t late;

    TK_EXPECT(testkit_wait_until(callback_ran, &s->seen, 4000),
              "%s: on_lost runs within 4 s of the pause (valid %lld ms)", what,
              (long long)s->valid_ms);
    late = atomic_load(&s->seen.at_ms) - (s->paused_ms + s->valid_ms);
    print_message("%s: paused with %lld ms valid; on_lost %lld ms after\n",
                  what, (long long)s->valid_ms, (long long)late);
    TK_EXPECT(late >= -2 && late < 250,
              "%s: on_lost runs at valid_until (%lld ms off; -2..250)", what,
              (long long)late);
    TK_EXPECT(atomic_load(&s->seen.calls) == 1, "%s: on_lost ran once", what);
}

/* Resumes the link, then frees the grant, the client, proxy and server. */
static void silent_stop(silent *s)
{
    TK_EXPECT(testkit_proxy_ctl(s->link->proxy, "resume") == 0, "resumes");
    grant_free(&s->grant);
    dlock_client_free(s->client);
    testkit_proxied_free(s->link);
}

/* An extend on the silent link returns by valid_until (+ 250 ms), not
 * after the io timeout, and does not succeed. */
static void expect_extend_bounded(silent *s, dlock_err err, const char *what)
{
    int64_t took = testkit_now_ms() - s->paused_ms;

    TK_EXPECT(err != DLOCK_OK, "%s: an extend nobody answers fails (%s)", what,
              dlock_errname(err));
    TK_EXPECT(took < s->valid_ms + 250,
              "%s: the extend returned %lld ms after the pause, with %lld ms "
              "of validity left then",
              what, (long long)took, (long long)s->valid_ms);
}

/* Takes a grant (a permit or a hold, with on_lost set) through the proxy
 * with take, silences the link: an extend returns by valid_until, the
 * loss comes then, once, and sticks. */
static void grant_is_lost_at_valid_until(const char *what,
                                         void (*take)(silent *s,
                                                      const char *name))
{
    silent s;
    char name[TESTKIT_KEY_MAX];

    silent_start(&s, what);
    take(&s, testkit_key(name, what));
    silent_pause(&s);
    expect_extend_bounded(&s, grant_extend(&s.grant), what);
    expect_lost_at_valid_until(&s, what);
    TK_EXPECT(grant_lost(&s.grant) == 1 && grant_valid_ms(&s.grant) == 0,
              "%s: lost() is 1 and valid_ms() 0 after the loss", what);
    TK_EXPECT(grant_extend(&s.grant) == DLOCK_STATE,
              "%s: extend of a lost grant is refused", what);
    TK_EXPECT(atomic_load(&s.seen.calls) == 1, "still one on_lost call");
    silent_stop(&s);
}

/* A permit of a semaphore of two. */
static void permit_take(silent *s, const char *name)
{
    grant *g = &s->grant;

    TK_EXPECT_ERR(dlock_semaphore_new(s->client, name, 2, &g->sem), DLOCK_OK,
                  s->client, "semaphore_new");
    TK_EXPECT_ERR(dlock_semaphore_acquire(g->sem, TTL_MS, 0, &g->permit),
                  DLOCK_OK, s->client, "acquire");
    TK_EXPECT_ERR(dlock_permit_on_lost(g->permit, permit_lost, &s->seen),
                  DLOCK_OK, s->client, "on_lost");
}

static void silent_network_loses_a_permit_at_valid_until(void **state)
{
    (void)state;
    grant_is_lost_at_valid_until("plea-permit", permit_take);
}

static void hold_take(silent *s, const char *name)
{
    grant *g = &s->grant;

    TK_EXPECT_ERR(dlock_rwlock_acquire(s->client, name, DLOCK_RWLOCK_WRITE,
                                       TTL_MS, 0, &g->hold),
                  DLOCK_OK, s->client, "write-lock");
    TK_EXPECT_ERR(dlock_rwlock_on_lost(g->hold, hold_lost, &s->seen), DLOCK_OK,
                  s->client, "on_lost");
}

static void silent_network_loses_a_write_hold_at_valid_until(void **state)
{
    (void)state;
    grant_is_lost_at_valid_until("plea-hold", hold_take);
}

/* The background leader renews every ttl/3; with the link silent its
 * renewal is stuck, but the term ends at valid_until all the same: on_lost
 * (on the candidate's thread) runs then, and is_leader reads 0. */
static void silent_network_ends_a_leader_term_at_valid_until(void **state)
{
    silent s;
    dlock_leader_opts o;
    char name[TESTKIT_KEY_MAX];

    (void)state;
    silent_start(&s, "plea-leader");
    dlock_leader_opts_init(&o);
    o.ttl_ms = TTL_MS;
    o.on_lost = term_lost;
    o.arg = &s.seen;
    TK_EXPECT_ERR(dlock_leader_new(s.client, testkit_key(name, "ld"), &o,
                                   &s.grant.leader),
                  DLOCK_OK, s.client, "leader_new");
    TK_EXPECT_ERR(dlock_leader_start(s.grant.leader), DLOCK_OK, s.client,
                  "start");
    TK_EXPECT(dlock_leader_wait(s.grant.leader, 1, 3000) == DLOCK_OK,
              "it leads");
    silent_pause(&s);
    expect_lost_at_valid_until(&s, "leader term");
    TK_EXPECT(dlock_leader_is_leader(s.grant.leader) == 0
                  && dlock_leader_valid_ms(s.grant.leader) == 0,
              "is_leader() is 0 and valid_ms() 0 after the term ended");
    silent_stop(&s);
}

/* ---- fences after a restart with the clock behind -------------------- */

/* Stops server, sets its clock 60 s behind and starts it again, empty. */
static void restart_behind(testkit_redis *server)
{
    TK_EXPECT(testkit_redis_restart_at(server, BEHIND_MS) == 0,
              "it restarts with its clock 60 s behind");
    TK_EXPECT(testkit_redis_int(server->admin_url, "DBSIZE") == 0,
              "the restart lost every key (no persistence)");
}

/* Moves the server's clock to 1.5 s behind last (a fence: server us). */
static void clock_just_behind(testkit_redis *server, uint64_t last)
{
    int64_t host_us = testkit_wall_us();
    int64_t lag_ms = (host_us - (int64_t)last) / 1000 + 1500;

    TK_EXPECT(testkit_redis_clock_step(server, -lag_ms) == 0,
              "the server's clock moves to 1.5 s behind the last fence");
}

static uint64_t take_permit(dlock_semaphore *sem, dlock_client *c)
{
    dlock_permit *p = NULL;
    uint64_t fence;

    TK_EXPECT_ERR(dlock_semaphore_acquire(sem, 5000, 0, &p), DLOCK_OK, c,
                  "acquire");
    fence = dlock_permit_fence(p);
    TK_EXPECT_ERR(dlock_semaphore_release(p), DLOCK_OK, c, "release");
    return fence;
}

static void permit_fence_never_goes_back_after_a_restart(void **state)
{
    testkit_redis *server = private_redis("plea-sem-fence", 1);
    dlock_client *c = patkit_client_of(server->url, IO_TIMEOUT_MS);
    dlock_semaphore *sem;
    dlock_permit *p = NULL;
    char name[TESTKIT_KEY_MAX], holders[TESTKIT_KEY_MAX + 64];
    uint64_t last;
    dlock_err err;

    (void)state;
    testkit_key(name, "semfence");
    TK_EXPECT_ERR(dlock_semaphore_new(c, name, 3, &sem), DLOCK_OK, c, "new");
    take_permit(sem, c);
    last = take_permit(sem, c);
    restart_behind(server);
    err = dlock_semaphore_acquire(sem, 5000, 0, &p);
    TK_EXPECT(err == DLOCK_UNPROVEN && p == NULL,
              "with the counter gone and the clock 60 s behind, no higher "
              "grant number can be shown: refused, got %s (fence %llu, last "
              "%llu)",
              dlock_errname(err),
              (unsigned long long)(p != NULL ? dlock_permit_fence(p) : 0),
              (unsigned long long)last);
    TK_EXPECT(testkit_redis_int(server->admin_url, "ZCARD %s",
                                patkit_pkey(holders, "sem", name, ":holders"))
                  == 0,
              "a refused acquire took no permit");
    clock_just_behind(server, last);
    TK_EXPECT_ERR(dlock_semaphore_acquire(sem, 5000, 4000, &p), DLOCK_OK, c,
                  "an acquire that may wait 4 s waits for the clock");
    TK_EXPECT(dlock_permit_fence(p) > last, "grant number %llu > last %llu",
              (unsigned long long)dlock_permit_fence(p),
              (unsigned long long)last);
    TK_EXPECT_ERR(dlock_semaphore_release(p), DLOCK_OK, c, "release");
    dlock_semaphore_free(sem);
    dlock_client_free(c);
    testkit_redis_free(server);
}

static void leader_term_never_goes_back_after_a_restart(void **state)
{
    testkit_redis *server = private_redis("plea-term", 1);
    dlock_client *c = patkit_client_of(server->url, IO_TIMEOUT_MS);
    dlock_leader *ld = NULL;
    char name[TESTKIT_KEY_MAX], lease[TESTKIT_KEY_MAX + 64];
    uint64_t last;
    dlock_err err;

    (void)state;
    testkit_key(name, "term");
    TK_EXPECT_ERR(dlock_leader_new(c, name, NULL, &ld), DLOCK_OK, c, "new");
    TK_EXPECT_ERR(dlock_leader_campaign(ld, 0), DLOCK_OK, c, "campaign");
    TK_EXPECT_ERR(dlock_leader_resign(ld), DLOCK_OK, c, "resign");
    TK_EXPECT_ERR(dlock_leader_campaign(ld, 0), DLOCK_OK, c, "campaign");
    last = dlock_leader_term(ld);
    TK_EXPECT_ERR(dlock_leader_resign(ld), DLOCK_OK, c, "resign");
    restart_behind(server);
    err = dlock_leader_campaign(ld, 0);
    TK_EXPECT(err == DLOCK_UNPROVEN,
              "with the term counter gone and the clock 60 s behind, no "
              "higher term can be shown: refused, got %s (term %llu, last "
              "%llu)",
              dlock_errname(err), (unsigned long long)dlock_leader_term(ld),
              (unsigned long long)last);
    TK_EXPECT(dlock_leader_is_leader(ld) == 0, "a refused campaign leads not");
    TK_EXPECT(testkit_redis_int(server->admin_url, "EXISTS %s",
                                patkit_pkey(lease, "leader", name, ""))
                  == 0,
              "a refused campaign wrote no lease");
    clock_just_behind(server, last);
    TK_EXPECT_ERR(dlock_leader_campaign(ld, 4000), DLOCK_OK, c,
                  "a campaign that may wait 4 s waits for the clock");
    TK_EXPECT(dlock_leader_term(ld) > last, "term %llu > last %llu",
              (unsigned long long)dlock_leader_term(ld),
              (unsigned long long)last);
    TK_EXPECT_ERR(dlock_leader_resign(ld), DLOCK_OK, c, "resign");
    dlock_leader_free(ld);
    dlock_client_free(c);
    testkit_redis_free(server);
}

/* ---- counters expire, and a lost counter never lowers a fence -------- */

#define KEEP_MS ((long long)30 * 86400 * 1000)

/* The PTTL of {kind:name}suffix is 30 days past a grant of ttl_ms. */
static void expect_kept(testkit_redis *server, const char *kind,
                        const char *name, const char *suffix, long long ttl_ms)
{
    char key[TESTKIT_KEY_MAX + 64];
    long long pttl = testkit_redis_int(server->admin_url, "PTTL %s",
                                       patkit_pkey(key, kind, name, suffix));

    TK_EXPECT(pttl > KEEP_MS && pttl <= KEEP_MS + ttl_ms,
              "%s expires 30 days past the grant's %lld ms TTL: PTTL %lld "
              "(30 days is %lld)",
              key, ttl_ms, pttl, KEEP_MS);
}

/* Deletes {kind:name}suffix, as its expiry would. */
static void expire_now(testkit_redis *server, const char *kind,
                       const char *name, const char *suffix)
{
    char key[TESTKIT_KEY_MAX + 64];

    TK_EXPECT(testkit_redis_int(server->admin_url, "DEL %s",
                                patkit_pkey(key, kind, name, suffix))
                  == 1,
              "the counter %s existed and is gone", key);
}

static dlock_rwlock *hold(dlock_client *c, const char *name,
                          dlock_rwlock_mode mode)
{
    dlock_rwlock *l = NULL;

    TK_EXPECT_ERR(dlock_rwlock_acquire(c, name, mode, 5000, 0, &l), DLOCK_OK,
                  c, mode == DLOCK_RWLOCK_READ ? "read hold" : "write hold");
    return l;
}

static void pattern_counters_expire_30_days_after_a_grant(void **state)
{
    testkit_redis *server = private_redis("plea-keep", 0);
    dlock_client *c = patkit_client_of(server->url, IO_TIMEOUT_MS);
    char sname[TESTKIT_KEY_MAX], rname[TESTKIT_KEY_MAX],
        lname[TESTKIT_KEY_MAX];
    dlock_semaphore *sem;
    dlock_permit *p = NULL;
    dlock_rwlock *l;
    dlock_leader *ld = NULL;
    dlock_leader_opts o;

    (void)state;
    testkit_key(sname, "keepsem");
    testkit_key(rname, "keeprw");
    testkit_key(lname, "keepld");
    TK_EXPECT_ERR(dlock_semaphore_new(c, sname, 2, &sem), DLOCK_OK, c, "new");
    TK_EXPECT_ERR(dlock_semaphore_acquire(sem, 5000, 0, &p), DLOCK_OK, c,
                  "acquire");
    expect_kept(server, "sem", sname, ":fence", 5000);
    dlock_semaphore_release(p);
    l = hold(c, rname, DLOCK_RWLOCK_WRITE);
    expect_kept(server, "rw", rname, ":fence", 5000);
    dlock_rwlock_release(l);
    expire_now(server, "rw", rname, ":fence");
    l = hold(c, rname, DLOCK_RWLOCK_READ);
    expect_kept(server, "rw", rname, ":fence", 5000);
    dlock_rwlock_release(l);
    dlock_leader_opts_init(&o);
    o.ttl_ms = 4000;
    TK_EXPECT_ERR(dlock_leader_new(c, lname, &o, &ld), DLOCK_OK, c, "new");
    TK_EXPECT_ERR(dlock_leader_campaign(ld, 0), DLOCK_OK, c, "campaign");
    expect_kept(server, "leader", lname, ":term", 4000);
    dlock_leader_resign(ld);
    dlock_leader_free(ld);
    dlock_semaphore_free(sem);
    dlock_client_free(c);
    testkit_redis_free(server);
}

/* got is above than: what a lost or stale counter must never undo. */
static void expect_higher(const char *what, uint64_t got, uint64_t than)
{
    TK_EXPECT(got > than, "%s: %llu is above %llu", what,
              (unsigned long long)got, (unsigned long long)than);
}

static void lost_counters_never_lower_a_fence(void **state)
{
    testkit_redis *server = private_redis("plea-lost", 1);
    dlock_client *c = patkit_client_of(server->url, IO_TIMEOUT_MS);
    char sname[TESTKIT_KEY_MAX], rname[TESTKIT_KEY_MAX],
        lname[TESTKIT_KEY_MAX];
    char key[TESTKIT_KEY_MAX + 64];
    dlock_semaphore *sem;
    dlock_permit *p1 = NULL, *p2 = NULL, *p3 = NULL;
    dlock_rwlock *w, *r1, *r2, *r3 = NULL;
    dlock_leader *ld = NULL;
    uint64_t wf, term;
    dlock_err err;

    (void)state;
    testkit_key(sname, "lostsem");
    testkit_key(rname, "lostrw");
    testkit_key(lname, "lostld");

    /* A permit held while its counter expires: the next is higher. */
    TK_EXPECT_ERR(dlock_semaphore_new(c, sname, 3, &sem), DLOCK_OK, c, "new");
    TK_EXPECT_ERR(dlock_semaphore_acquire(sem, 5000, 0, &p1), DLOCK_OK, c,
                  "acquire");
    expire_now(server, "sem", sname, ":fence");
    TK_EXPECT_ERR(dlock_semaphore_acquire(sem, 5000, 0, &p2), DLOCK_OK, c,
                  "acquire");
    expect_higher("with the counter gone, the next grant number over the "
                  "held permit's",
                  dlock_permit_fence(p2), dlock_permit_fence(p1));

    /* Read holds: a counter left behind, then gone, under a live writer's
     * recorded fence and a live reader's. */
    w = hold(c, rname, DLOCK_RWLOCK_WRITE);
    wf = dlock_rwlock_fence(w);
    dlock_rwlock_release(w);
    TK_EXPECT(
        testkit_redis_int(server->admin_url, "EVAL %s 1 %s %lld",
                          "return redis.call('INCRBY', KEYS[1], ARGV[1])",
                          patkit_pkey(key, "rw", rname, ":fence"), -1000000LL)
            == (long long)(wf - 1000000),
        "the counter goes 1 s behind the last write (a lagging "
        "replica's)");
    r1 = hold(c, rname, DLOCK_RWLOCK_READ);
    expect_higher("with the counter behind, a read hold's fence over the "
                  "last write's",
                  dlock_rwlock_fence(r1), wf);
    expire_now(server, "rw", rname, ":fence");
    r2 = hold(c, rname, DLOCK_RWLOCK_READ);
    expect_higher("with the counter gone, a read hold's fence over the "
                  "live reader's",
                  dlock_rwlock_fence(r2), dlock_rwlock_fence(r1));
    dlock_rwlock_release(r1);
    dlock_rwlock_release(r2);

    /* A term whose counter expired: the next term is higher. */
    TK_EXPECT_ERR(dlock_leader_new(c, lname, NULL, &ld), DLOCK_OK, c, "new");
    TK_EXPECT_ERR(dlock_leader_campaign(ld, 0), DLOCK_OK, c, "campaign");
    term = dlock_leader_term(ld);
    TK_EXPECT_ERR(dlock_leader_resign(ld), DLOCK_OK, c, "resign");
    expire_now(server, "leader", lname, ":term");
    TK_EXPECT_ERR(dlock_leader_campaign(ld, 0), DLOCK_OK, c, "campaign");
    expect_higher("with the counter gone, the next term over the last",
                  dlock_leader_term(ld), term);
    TK_EXPECT_ERR(dlock_leader_resign(ld), DLOCK_OK, c, "resign");

    /* The counters gone and the server's clock 60 s behind: no fence
     * above the ones seen can be shown, so every grant is refused. */
    expire_now(server, "sem", sname, ":fence");
    expire_now(server, "rw", rname, ":fence");
    expire_now(server, "leader", lname, ":term");
    TK_EXPECT(testkit_redis_clock_step(server, BEHIND_MS) == 0,
              "the server's clock steps 60 s back");
    err = dlock_semaphore_acquire(sem, 5000, 0, &p3);
    TK_EXPECT(err == DLOCK_UNPROVEN && p3 == NULL, "a permit is refused: %s",
              dlock_errname(err));
    err = dlock_rwlock_acquire(c, rname, DLOCK_RWLOCK_READ, 5000, 0, &r3);
    TK_EXPECT(err == DLOCK_UNPROVEN && r3 == NULL,
              "a read hold is refused: %s (fence %llu)", dlock_errname(err),
              (unsigned long long)(r3 != NULL ? dlock_rwlock_fence(r3) : 0));
    TK_EXPECT(testkit_redis_int(server->admin_url, "ZCARD %s",
                                patkit_pkey(key, "rw", rname, ":readers"))
                  == 0,
              "a refused read hold joined no readers");
    err = dlock_rwlock_acquire(c, rname, DLOCK_RWLOCK_WRITE, 5000, 0, &r3);
    TK_EXPECT(err == DLOCK_UNPROVEN && r3 == NULL,
              "a write hold is refused: %s", dlock_errname(err));
    err = dlock_leader_campaign(ld, 0);
    TK_EXPECT(err == DLOCK_UNPROVEN, "a term is refused: %s",
              dlock_errname(err));
    dlock_permit_free(p1);
    dlock_permit_free(p2);
    dlock_leader_free(ld);
    dlock_semaphore_free(sem);
    dlock_client_free(c);
    testkit_redis_free(server);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(silent_network_loses_a_permit_at_valid_until),
        cmocka_unit_test(silent_network_loses_a_write_hold_at_valid_until),
        cmocka_unit_test(silent_network_ends_a_leader_term_at_valid_until),
        cmocka_unit_test(permit_fence_never_goes_back_after_a_restart),
        cmocka_unit_test(leader_term_never_goes_back_after_a_restart),
        cmocka_unit_test(pattern_counters_expire_30_days_after_a_grant),
        cmocka_unit_test(lost_counters_never_lower_a_fence),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
