/*
 * pattern_leader.c: leader election with terms and once-per-tick jobs (see
 * dlock/leader.h for the keys and the two ways to drive it).
 *
 * Scripts, each one step on the lease hash and its neighbours:
 *   campaign  the lease holds our token (a retry, or we lead already):
 *             renew and answer our term; another token: busy with its
 *             PTTL; no lease: take it with the next term,
 *             max(last + 1, server microseconds).
 *   renew     PEXPIRE only while the lease holds our token.
 *   resign    DEL only while it holds our token, then PUBLISH.
 *   tick      only for the lease's holder: the server's tick number
 *             floor(ms / period); run it if it is past the last tick run
 *             (stored with the period and the id of the call that ran it,
 *             so a retried call is answered "yours" again and a second
 *             call "already run").
 *   inspect   read the lease and the term counter.
 * On a redlock:// client each step is a majority round instead of its
 * script (pattern_leader_redlock.c: the lease a Redlock lock, the term
 * its majority fence, the tick a majority register); the states, the
 * lease's validity and the thread below are the same.
 *
 * States of a candidate (under mu): standby (leading 0) and leading
 * (leading 1, term set).  The lease of each term is a pattern lease
 * (pattern_lease.h): valid_until on CLOCK_BOOTTIME from the send time of
 * the last successful campaign or renewal, renewals capped at it, and the
 * watchdog's timer marking it lost at it (and broadcasting cv) whether or
 * not a reply comes.  Moves: a successful campaign makes it leading (a
 * fresh lease for a new term); a renewal moves valid_until on; a LOST
 * renewal, a resignation, or the lease running out makes it standby.
 * is_leader is "leading and the lease not lost", so a candidate stops
 * calling itself leader no later than the server lets the lease go, even
 * if nobody tells it.  Every move broadcasts cv, for dlock_leader_wait and
 * for stop.  The lease is reset for a new term only under mu (the
 * any-thread readers hold mu), after it has left the timer.
 *
 * The background thread is the only caller of the scripts while it runs;
 * it runs the callbacks outside mu.  Stop sets stop, broadcasts, and
 * joins; a standby thread notices within one poll interval (the waiting
 * loop checks the flag after every wake-up).
 */
#include "dlock/leader.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/decimal.h"
#include "patterns/pattern_common.h"
#include "patterns/pattern_leader_redlock.h"
#include "patterns/pattern_lease.h"

#define DEFAULT_TTL_MS 10000
#define BACKOFF_MS 250

static const dlock__script campaign_script = {
    "leader.campaign",
    DLOCK__LUA_NOW_MS DLOCK__LUA_FENCE
    "local cur = redis.call('HGET', KEYS[1], 'token')\n"
    "if cur == ARGV[1] then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  return {1, redis.call('HGET', KEYS[1], 'term') or '0'}\n"
    "end\n"
    "if cur then return {0, redis.call('PTTL', KEYS[1])} end\n"
    "local term = next_fence(KEYS[2], ARGV[4], ARGV[2])\n"
    "if not term then return {2, now_str} end\n"
    "redis.call('HSET', KEYS[1], 'token', ARGV[1], 'term', term, 'id',\n"
    "           ARGV[3], 'since', string.format('%d', now))\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "return {1, term}\n",
    1,
};

static const dlock__script renew_script = {
    "leader.renew",
    "if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return 0 end\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "return 1\n",
    1,
};

static const dlock__script resign_script = {
    "leader.resign",
    "if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return 0 end\n"
    "redis.call('DEL', KEYS[1])\n"
    "redis.call('PUBLISH', ARGV[2], '')\n"
    "return 1\n",
    1,
};

static const dlock__script tick_script = {
    "leader.tick",
    DLOCK__LUA_NOW_MS
    "local period = tonumber(ARGV[2])\n"
    "local n = math.floor(now / period)\n"
    "local next_in = (n + 1) * period - now\n"
    "if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then\n"
    "  return {-1, n, 0, next_in}\n"
    "end\n"
    "local t = redis.call('HMGET', KEYS[2], 'n', 'period', 'by', "
    "'skipped')\n"
    "local last = -1\n"
    "if t[1] and t[2] == ARGV[2] then last = tonumber(t[1]) end\n"
    "if n == last and t[3] == ARGV[3] then\n"
    "  return {1, n, tonumber(t[4] or '0'), next_in}\n"
    "end\n"
    "if n <= last then return {0, n, 0, next_in} end\n"
    "local skipped = 0\n"
    "if last >= 0 then skipped = n - last - 1 end\n"
    "redis.call('HSET', KEYS[2], 'n', string.format('%d', n), 'period',\n"
    "           ARGV[2], 'by', ARGV[3], 'skipped',\n"
    "           string.format('%d', skipped))\n"
    "return {1, n, skipped, next_in}\n",
    1,
};

static const dlock__script inspect_script = {
    "leader.inspect",
    "local h = redis.call('HMGET', KEYS[1], 'id', 'term')\n"
    "return {h[1] or '', h[2] or '0', redis.call('PTTL', KEYS[1]),\n"
    "        redis.call('GET', KEYS[2]) or '0'}\n",
    1,
};

struct dlock_leader {
    dlock_client *client;
    char *name;
    char *id;
    char *lease_key;
    char *term_key;
    char *tick_key;
    char *channel;
    int64_t ttl_ms;
    dlock_leader_fn on_gained;
    dlock_leader_fn on_lost;
    void *arg;

    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC */
    int sync_ready;
    int leading;                /* under mu */
    uint64_t term;              /* under mu */
    dlock__pattern_lease lease; /* reset under mu */
    int64_t renew_at_us;        /* the controlling thread's */

    /* The controlling thread's; the background thread reads stop. */
    int started;
    int resign_on_stop; /* set before stop; read by the thread */
    dlock_err stop_err; /* the thread's resignation, for stop */
    atomic_int stop;
    pthread_t thread;
};

void dlock_leader_opts_init(dlock_leader_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->ttl_ms = DEFAULT_TTL_MS;
}

/* ---- state, under mu --------------------------------------------------- */

/* The timer's callback at the lease's end: wake whoever waits on cv
 * (without mu, which the controlling thread may hold while it leaves the
 * timer; the waiters also time out at the lease's end). */
static void lease_ended(void *arg)
{
    dlock_leader *l = arg;

    pthread_cond_broadcast(&l->cv);
}

/* A fresh lease for the next term, unless the current one still leads. */
static void fresh_lease(dlock_leader *l)
{
    dlock__pattern_lease_leave_timer(&l->lease);
    pthread_mutex_lock(&l->mu);
    dlock__pattern_lease_reset(&l->lease, l->ttl_ms);
    pthread_mutex_unlock(&l->mu);
}

static void set_leading(dlock_leader *l, uint64_t term)
{
    pthread_mutex_lock(&l->mu);
    l->leading = 1;
    l->term = term;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    l->renew_at_us = dlock__now_us() + l->ttl_ms * 1000 / 3;
    /* Out of memory, the lease still ends by time, unannounced. */
    if (l->lease.watch == NULL)
        (void)dlock__pattern_lease_on_lost(
            &l->lease,
            &(const dlock__pattern_callback){.kind = DLOCK__LOST_INTERNAL,
                                             .fn.internal = lease_ended,
                                             .arg = l},
            NULL);
}

/* Makes the candidate standby; returns 1 if it was leading. */
static int set_standby(dlock_leader *l)
{
    int was;

    pthread_mutex_lock(&l->mu);
    was = l->leading;
    l->leading = 0;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return was;
}

/* Under mu. */
static int leading_now(dlock_leader *l)
{
    return l->leading && !dlock__pattern_lease_lost(&l->lease);
}

/* The monotonic time the lease ends (under mu). */
static int64_t lease_end_us(dlock_leader *l)
{
    return dlock__now_us()
           + dlock__lease_left_us(&l->lease.lease,
                                  dlock__client_skew(l->client));
}

static uint64_t current_term(dlock_leader *l)
{
    uint64_t term;

    pthread_mutex_lock(&l->mu);
    term = l->term;
    pthread_mutex_unlock(&l->mu);
    return term;
}

/* ---- construction ------------------------------------------------------ */

static char *default_id(void)
{
    char host[128], id[DLOCK_LEADER_ID_MAX + 1];

    if (gethostname(host, sizeof(host)) != 0)
        snprintf(host, sizeof(host), "unknown");
    host[sizeof(host) - 1] = '\0';
    snprintf(id, sizeof(id), "%s:%ld", host, (long)getpid());
    return dlock__strdup(id);
}

static dlock_err check_opts(const dlock_leader_opts *o, dlock__msg *m)
{
    dlock_err err = dlock__pattern_check_ms("leader lease", o->ttl_ms, m);

    if (err == DLOCK_OK && o->id != NULL
        && strnlen(o->id, DLOCK_LEADER_ID_MAX + 1) > DLOCK_LEADER_ID_MAX)
        err = dlock__msg_set(m, DLOCK_INVALID,
                             "leader id is longer than %d "
                             "bytes",
                             DLOCK_LEADER_ID_MAX);
    return err;
}

static dlock_err init_sync(dlock_leader *l, dlock__msg *m)
{
    pthread_condattr_t attr;
    int rc;

    if (pthread_mutex_init(&l->mu, NULL) != 0)
        return dlock__msg_set(m, DLOCK_SYSTEM, "initialising a mutex");
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init(&l->cv, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_destroy(&l->mu);
        return dlock__msg_set(m, DLOCK_SYSTEM,
                              "initialising a condition "
                              "variable");
    }
    l->sync_ready = 1;
    return DLOCK_OK;
}

/* Frees what leader_new built; the thread must not run. */
static void leader_discard(dlock_leader *l)
{
    if (l == NULL)
        return;
    dlock__pattern_lease_destroy(&l->lease);
    if (l->sync_ready) {
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
    }
    dlock__free(l->name);
    dlock__free(l->id);
    dlock__free(l->lease_key);
    dlock__free(l->term_key);
    dlock__free(l->tick_key);
    dlock__free(l->channel);
    dlock__free(l);
}

static dlock_err leader_build(dlock_leader *l, const char *name,
                              const dlock_leader_opts *o, dlock__msg *m)
{
    dlock_err err;

    l->ttl_ms = o->ttl_ms;
    l->on_gained = o->on_gained;
    l->on_lost = o->on_lost;
    l->arg = o->arg;
    atomic_init(&l->stop, 0);
    l->name = dlock__strdup(name);
    err = dlock__pattern_lease_init(&l->lease, l->client, o->ttl_ms, "leader",
                                    l->name != NULL ? l->name : "", m);
    l->id = o->id != NULL ? dlock__strdup(o->id) : default_id();
    l->lease_key = dlock__pattern_key("leader", name, "");
    l->term_key = dlock__pattern_key("leader", name, ":term");
    l->tick_key = dlock__pattern_key("leader", name, ":tick");
    l->channel = dlock__pattern_channel("leader", name);
    if (l->name == NULL || l->id == NULL || l->lease_key == NULL
        || l->term_key == NULL || l->tick_key == NULL || l->channel == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "allocating leader %.64s", name);
    return err;
}

dlock_err dlock_leader_new(dlock_client *c, const char *name,
                           const dlock_leader_opts *opts, dlock_leader **out)
{
    dlock_leader_opts defaults;
    dlock_leader *l;
    dlock__msg *m;
    dlock_err err;

    if (out != NULL)
        *out = NULL;
    dlock_leader_opts_init(&defaults);
    if (opts == NULL)
        opts = &defaults;
    err = dlock__pattern_open(c, out != NULL, "leader", name, &m);
    if (err == DLOCK_OK)
        err = check_opts(opts, m);
    if (err != DLOCK_OK)
        return err;
    l = dlock__calloc(1, sizeof(*l));
    if (l == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "allocating leader %.64s", name);
    l->client = c;
    err = leader_build(l, name, opts, m);
    if (err == DLOCK_OK)
        err = init_sync(l, m);
    if (err != DLOCK_OK) {
        leader_discard(l);
        return err;
    }
    *out = l;
    return DLOCK_OK;
}

/* ---- the scripts ------------------------------------------------------- */

/* On a redlock:// client the steps are majority rounds instead
 * (pattern_leader_redlock.h). */
static int on_redlock(const dlock_leader *l)
{
    return dlock__client_redlock(l->client) != NULL;
}

static dlock__leader_keys keys_of(const dlock_leader *l)
{
    return (dlock__leader_keys){l->name, l->lease_key, l->term_key,
                                l->tick_key, l->channel};
}

static void fresh_lease(dlock_leader *l);
static int set_standby(dlock_leader *l);

/* A Redlock campaign: a new grant with the next majority term, or, while
 * we lead, a renewal that keeps the term (a second grant would write a
 * new fence, and a term must not change under a running leader); a
 * renewal that finds the lease gone ends that term and campaigns anew. */
static dlock_err campaign_redlock(dlock_leader *l, int leading,
                                  int64_t *hint_ms, dlock__msg *m)
{
    const dlock__leader_keys k = keys_of(l);

    if (leading) {
        const dlock_err err = dlock__leader_redlock_renew(&l->lease, &k, m);

        if (err != DLOCK_LOST && err != DLOCK_STATE)
            return err;
        set_standby(l);
        fresh_lease(l);
    }
    return dlock__leader_redlock_campaign(&l->lease, &k, hint_ms, m);
}

/* One campaign attempt (a dlock__wait_try_fn). */
static dlock_err campaign_once(void *arg, int waiting, int64_t *hint_ms,
                               dlock__msg *m)
{
    dlock_leader *l = arg;
    char ttl[24];
    const char *argv[] = {l->lease_key, l->term_key, l->lease.token, ttl,
                          l->id};
    int leading;
    dlock_err err;

    (void)waiting;
    pthread_mutex_lock(&l->mu);
    leading = leading_now(l);
    pthread_mutex_unlock(&l->mu);
    if (!leading)
        fresh_lease(l);
    dlock__decimal_i64(ttl, l->ttl_ms);
    err = on_redlock(l) ? campaign_redlock(l, leading, hint_ms, m)
                        : dlock__pattern_lease_try(&l->lease, &campaign_script,
                                                   2, 5, argv, hint_ms, m);
    if (err == DLOCK_OK)
        set_leading(l, l->lease.fence);
    return err;
}

/* Runs resign: 1 means the lease was ours. */
static dlock_err resign_once(dlock_leader *l, dlock__msg *m)
{
    const char *argv[] = {l->lease_key, l->lease.token, l->channel};
    const dlock__leader_keys k = keys_of(l);

    if (on_redlock(l))
        return dlock__leader_redlock_resign(&l->lease, &k, m);
    return dlock__pattern_lease_call(&l->lease, &resign_script, 1, 3, argv,
                                     NULL, 0, m);
}

static dlock_err renew_once(dlock_leader *l, dlock__msg *m)
{
    char ttl[24];
    const char *argv[] = {l->lease_key, l->lease.token, ttl};
    const dlock__leader_keys k = keys_of(l);
    dlock_err err = on_redlock(l)
                        ? dlock__leader_redlock_renew(&l->lease, &k, m)
                        : dlock__pattern_lease_extend(&l->lease, 0,
                                                      &renew_script, 1, 3,
                                                      argv, ttl, m);

    if (err == DLOCK_OK)
        l->renew_at_us = dlock__now_us() + l->ttl_ms * 1000 / 3;
    return err;
}

/* ---- the background thread --------------------------------------------- */

static void call_back(dlock_leader *l, dlock_leader_fn fn, uint64_t term)
{
    if (fn != NULL)
        fn(l, term, l->arg);
}

/* Sleeps until deadline_us or until stop is set. */
static void wait_or_stop(dlock_leader *l, int64_t deadline_us)
{
    struct timespec ts = dlock__timespec_of(deadline_us);

    pthread_mutex_lock(&l->mu);
    while (!atomic_load(&l->stop) && dlock__now_us() < deadline_us)
        if (pthread_cond_timedwait(&l->cv, &l->mu, &ts) != 0)
            break;
    pthread_mutex_unlock(&l->mu);
}

/* Standby: campaign until we lead, the thread stops, or Redis fails. */
static void run_standby(dlock_leader *l, dlock__msg *m)
{
    int64_t hint = 0;
    dlock_err err = dlock__pattern_lease_wait(
        &l->lease,
        &(const dlock__wait){
            .client = l->client,
            .channel = l->channel,
            .deadline_us = DLOCK__FOREVER,
            .seed = l->lease.token,
            .cancel = &l->stop,
        },
        campaign_once, l, &hint, m);

    if (err == DLOCK_OK)
        call_back(l, l->on_gained, current_term(l));
    else if (err != DLOCK_BUSY)
        wait_or_stop(l, dlock__deadline_after_ms(BACKOFF_MS));
}

/* Leading: renew on schedule; lose on LOST or when validity runs out. */
static void run_leading(dlock_leader *l, dlock__msg *m)
{
    int64_t end, wake;
    dlock_err err;

    pthread_mutex_lock(&l->mu);
    end = lease_end_us(l);
    pthread_mutex_unlock(&l->mu);
    wake = l->renew_at_us < end ? l->renew_at_us : end;
    wait_or_stop(l, wake);
    if (atomic_load(&l->stop))
        return;
    /* Capped at the lease's end: it returns by then, answered or not. */
    err = renew_once(l, m);
    if (err == DLOCK_OK)
        return;
    if (err == DLOCK_LOST || err == DLOCK_STATE
        || dlock__pattern_lease_lost(&l->lease)) {
        uint64_t term = current_term(l);

        if (set_standby(l))
            call_back(l, l->on_lost, term);
        return;
    }
    /* A transport failure with time left: try again soon. */
    l->renew_at_us = dlock__now_us()
                     + (l->ttl_ms > 10 ? l->ttl_ms * 100 : 1000);
}

static void *leader_main(void *arg)
{
    dlock_leader *l = arg;
    dlock__msg *m = dlock__client_begin(l->client);
    int leading;

    while (!atomic_load(&l->stop)) {
        pthread_mutex_lock(&l->mu);
        leading = l->leading;
        pthread_mutex_unlock(&l->mu);
        if (leading)
            run_leading(l, m);
        else
            run_standby(l, m);
    }
    pthread_mutex_lock(&l->mu);
    leading = l->leading;
    pthread_mutex_unlock(&l->mu);
    if (leading && l->resign_on_stop) {
        uint64_t term = current_term(l);

        l->stop_err = resign_once(l, m);
        set_standby(l);
        call_back(l, l->on_lost, term);
    }
    return NULL;
}

dlock_err dlock_leader_start(dlock_leader *l)
{
    dlock__msg *m;

    if (l == NULL)
        return DLOCK_INVALID;
    m = dlock__client_begin(l->client);
    if (l->started)
        return dlock__msg_set(m, DLOCK_STATE,
                              "leader %.64s: started "
                              "already",
                              l->name);
    if (leading_now(l))
        return dlock__msg_set(m, DLOCK_STATE,
                              "leader %.64s: it leads by "
                              "dlock_leader_campaign; resign first",
                              l->name);
    set_standby(l);
    atomic_store(&l->stop, 0);
    l->resign_on_stop = 0;
    l->stop_err = DLOCK_OK;
    if (pthread_create(&l->thread, NULL, leader_main, l) != 0)
        return dlock__msg_set(m, DLOCK_SYSTEM,
                              "leader %.64s: starting its "
                              "thread",
                              l->name);
    l->started = 1;
    return DLOCK_OK;
}

/* Tells the thread to end and waits for it. */
static void join_thread(dlock_leader *l)
{
    atomic_store(&l->stop, 1);
    pthread_mutex_lock(&l->mu);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    l->started = 0;
}

dlock_err dlock_leader_stop(dlock_leader *l)
{
    dlock__msg *m;
    dlock_err err = DLOCK_OK;

    if (l == NULL)
        return DLOCK_INVALID;
    m = dlock__client_begin(l->client);
    if (!l->started)
        return dlock__msg_set(m, DLOCK_STATE, "leader %.64s: not started",
                              l->name);
    l->resign_on_stop = 1;
    join_thread(l);
    /* The thread's message is on its own (gone) state: say it again. */
    if (l->stop_err != DLOCK_OK)
        err = dlock__msg_set(m, l->stop_err,
                             "leader %.64s: resigning on "
                             "stop failed; the lease runs out by its TTL of "
                             "%lld ms",
                             l->name, (long long)l->ttl_ms);
    return err;
}

void dlock_leader_free(dlock_leader *l)
{
    if (l == NULL)
        return;
    if (l->started) {
        l->resign_on_stop = 0;
        join_thread(l);
    }
    leader_discard(l);
}

/* ---- driven mode ------------------------------------------------------- */

static dlock_err refuse_if_started(dlock_leader *l, const char *what,
                                   dlock__msg *m)
{
    if (!l->started)
        return DLOCK_OK;
    return dlock__msg_set(m, DLOCK_STATE,
                          "%s of leader %.64s: its "
                          "background thread runs (use dlock_leader_stop)",
                          what, l->name);
}

dlock_err dlock_leader_campaign(dlock_leader *l, int64_t wait_ms)
{
    int64_t started = dlock__now_us(), hint = 0;
    dlock__msg *m;
    dlock_err err;

    if (l == NULL)
        return DLOCK_INVALID;
    m = dlock__client_begin(l->client);
    err = refuse_if_started(l, "campaign", m);
    if (err != DLOCK_OK)
        return err;
    err = dlock__pattern_lease_wait(
        &l->lease,
        &(const dlock__wait){
            .client = l->client,
            .channel = l->channel,
            .deadline_us = dlock__deadline_after_ms(wait_ms),
            .seed = l->lease.token,
        },
        campaign_once, l, &hint, m);
    if (err == DLOCK_BUSY) {
        dlock__pattern_set_busy_ttl(l->client, hint);
        return dlock__msg_set(m, DLOCK_BUSY,
                              "leader %.64s on %s: another "
                              "candidate leads for %lld more ms (waited %lld "
                              "ms)",
                              l->name, dlock_client_endpoint(l->client),
                              (long long)hint,
                              (long long)((dlock__now_us() - started) / 1000));
    }
    if (err != DLOCK_OK)
        return dlock__msg_wrap(m, err, "campaign of leader %.64s", l->name);
    dlock__msg_clear(m);
    return DLOCK_OK;
}

dlock_err dlock_leader_renew(dlock_leader *l)
{
    dlock__msg *m;
    dlock_err err;
    int leading;

    if (l == NULL)
        return DLOCK_INVALID;
    m = dlock__client_begin(l->client);
    err = refuse_if_started(l, "renewal", m);
    if (err != DLOCK_OK)
        return err;
    pthread_mutex_lock(&l->mu);
    leading = l->leading;
    pthread_mutex_unlock(&l->mu);
    if (!leading)
        return dlock__msg_set(m, DLOCK_STATE,
                              "renewal of leader %.64s: it "
                              "does not lead",
                              l->name);
    err = renew_once(l, m);
    if (err == DLOCK_STATE) /* the timer found the lease's end first */
        err = dlock__msg_set(m, DLOCK_LOST,
                             "renewal of leader %.64s: its lease ran out "
                             "(term %llu ended)",
                             l->name, (unsigned long long)current_term(l));
    if (err == DLOCK_LOST)
        set_standby(l);
    return err;
}

dlock_err dlock_leader_resign(dlock_leader *l)
{
    dlock__msg *m;
    dlock_err err;

    if (l == NULL)
        return DLOCK_INVALID;
    m = dlock__client_begin(l->client);
    err = refuse_if_started(l, "resignation", m);
    if (err != DLOCK_OK)
        return err;
    err = resign_once(l, m);
    set_standby(l);
    return err;
}

/* ---- any thread -------------------------------------------------------- */

int dlock_leader_is_leader(const dlock_leader *cl)
{
    dlock_leader *l = (dlock_leader *)cl; /* the mutex is not const */
    int leading;

    pthread_mutex_lock(&l->mu);
    leading = leading_now(l);
    pthread_mutex_unlock(&l->mu);
    return leading;
}

uint64_t dlock_leader_term(const dlock_leader *cl)
{
    return current_term((dlock_leader *)cl);
}

int64_t dlock_leader_valid_ms(const dlock_leader *cl)
{
    dlock_leader *l = (dlock_leader *)cl;
    int64_t left;

    pthread_mutex_lock(&l->mu);
    left = l->leading ? dlock__pattern_lease_valid_ms(&l->lease) : 0;
    pthread_mutex_unlock(&l->mu);
    return left;
}

dlock_err dlock_leader_wait(dlock_leader *l, int leading, int64_t timeout_ms)
{
    int64_t deadline = dlock__deadline_after_ms(timeout_ms);
    dlock_err err = DLOCK_OK;

    if (l == NULL)
        return DLOCK_INVALID;
    pthread_mutex_lock(&l->mu);
    while (leading_now(l) != (leading != 0)) {
        int64_t wake = deadline;
        struct timespec ts;

        if (dlock__now_us() >= deadline) {
            err = DLOCK_TIMEOUT;
            break;
        }
        /* Validity runs out without a broadcast: wake for it too. */
        if (!leading && l->leading && lease_end_us(l) < wake)
            wake = lease_end_us(l) + 1000;
        ts = dlock__timespec_of(wake);
        pthread_cond_timedwait(&l->cv, &l->mu, &ts);
    }
    pthread_mutex_unlock(&l->mu);
    return err;
}

/* Reads the tick script's {status, n, skipped, next_in}. */
static dlock_err read_tick(dlock_leader *l, const redisReply *r,
                           dlock_leader_tick_info *info, dlock__msg *m)
{
    long long v[4];

    if (!dlock__pattern_ints(r, 4, v))
        return dlock__pattern_bad_reply(l->client, "leader.tick",
                                        "{status, tick, skipped, next}", r, m);
    info->tick = v[1];
    info->skipped = v[2];
    info->next_in_ms = v[3];
    if (v[0] == 1)
        return DLOCK_OK;
    if (v[0] == 0)
        return dlock__msg_set(m, DLOCK_BUSY,
                              "tick %lld of leader %.64s was "
                              "run already",
                              v[1], l->name);
    return dlock__msg_set(m, DLOCK_LOST,
                          "tick %lld of leader %.64s: this "
                          "candidate (%s) does not lead",
                          v[1], l->name, l->id);
}

dlock_err dlock_leader_tick(dlock_leader *l, int64_t period_ms,
                            dlock_leader_tick_info *info)
{
    dlock_leader_tick_info local;
    char period[24], call[DLOCK_TOKEN_LEN + 1];
    const char *argv[5];
    redisReply *r;
    dlock__msg *m;
    dlock_err err;

    if (l == NULL)
        return DLOCK_INVALID;
    if (info == NULL)
        info = &local;
    memset(info, 0, sizeof(*info));
    m = dlock__client_begin(l->client);
    err = dlock__pattern_check_ms("tick period", period_ms, m);
    if (err == DLOCK_OK)
        err = dlock__token_new(call, m);
    if (err != DLOCK_OK)
        return err;
    if (on_redlock(l)) {
        const dlock__leader_keys k = keys_of(l);

        return dlock__leader_redlock_tick(&l->lease, &k,
                                          dlock_leader_is_leader(l), l->ttl_ms,
                                          period_ms, call, info, m);
    }
    dlock__decimal_i64(period, period_ms);
    argv[0] = l->lease_key;
    argv[1] = l->tick_key;
    argv[2] = l->lease.token;
    argv[3] = period;
    argv[4] = call;
    err = dlock__client_eval(l->client, &tick_script, 2, 5, argv, NULL, &r, m);
    if (err != DLOCK_OK)
        return dlock__msg_wrap(m, err, "tick of leader %.64s", l->name);
    err = read_tick(l, r, info, m);
    freeReplyObject(r);
    return err;
}

/* Parses the inspect script's {id, term, pttl, last_term}. */
static int parse_inspect(const redisReply *r, dlock_leader_info *info)
{
    const redisReply *id, *term, *ttl, *last;

    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4)
        return 0;
    id = r->element[0];
    term = r->element[1];
    ttl = r->element[2];
    last = r->element[3];
    if (id->type != REDIS_REPLY_STRING || term->type != REDIS_REPLY_STRING
        || ttl->type != REDIS_REPLY_INTEGER
        || last->type != REDIS_REPLY_STRING)
        return 0;
    info->held = ttl->integer != -2;
    info->ttl_ms = ttl->integer > 0 ? ttl->integer : 0;
    info->term = strtoull(term->str, NULL, 10);
    info->last_term = strtoull(last->str, NULL, 10);
    snprintf(info->id, sizeof(info->id), "%.*s",
             (int)(id->len > DLOCK_LEADER_ID_MAX ? DLOCK_LEADER_ID_MAX
                                                 : id->len),
             id->str);
    return 1;
}

dlock_err dlock_leader_inspect(dlock_client *c, const char *name,
                               dlock_leader_info *info)
{
    char *lease = NULL, *term = NULL;
    redisReply *r;
    dlock__msg *m;
    dlock_err err;

    if (c == NULL || info == NULL)
        return DLOCK_INVALID;
    memset(info, 0, sizeof(*info));
    m = dlock__client_begin(c);
    err = dlock__pattern_check_name("leader", name, m);
    if (err != DLOCK_OK)
        return err;
    lease = dlock__pattern_key("leader", name, "");
    term = dlock__pattern_key("leader", name, ":term");
    if (lease == NULL || term == NULL) {
        err = dlock__msg_set(m, DLOCK_NOMEM, "inspecting leader %.64s", name);
    } else {
        const char *argv[] = {lease, term};
        const dlock__leader_keys k = {name, lease, term, NULL, NULL};

        if (dlock__client_redlock(c) != NULL)
            err = dlock__leader_redlock_inspect(c, &k, info, m);
        else
            err = dlock__client_eval(c, &inspect_script, 2, 2, argv, NULL, &r,
                                     m);
        if (err == DLOCK_OK && dlock__client_redlock(c) == NULL) {
            if (!parse_inspect(r, info))
                err = dlock__pattern_bad_reply(c, "leader.inspect",
                                               "{id, term, pttl, last}", r, m);
            freeReplyObject(r);
        }
    }
    dlock__free(lease);
    dlock__free(term);
    return err;
}

const char *dlock_leader_name(const dlock_leader *l)
{
    return l->name;
}

const char *dlock_leader_id(const dlock_leader *l)
{
    return l->id;
}
