/*
 * redlock.c: the Redlock algorithm over N masters (see redlock.h).
 *
 * The decisions (majority, validity, drift, what a round's results mean,
 * the failure message) are pure functions tested on their own
 * (tests/unit/test_redlock.c); the rounds put them over dlock__nodeset
 * with one thread per master, and tests/scale/ runs them against real
 * masters that are killed and stopped.
 *
 * The scripts run with EVAL (each is a few hundred bytes), so a master
 * that restarted empty needs no SCRIPT LOAD.  Every script is safe to run
 * twice with the same token, which is what lets a round be repeated.
 */
#include "deploy/redlock.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/thread.h"
#include "base/clock.h"

/* Sets the key for token (or renews it when token holds it already, so a
 * repeated round is harmless) and returns {1, fence counter}, or {0, pttl}
 * when another owner holds it. */
static const char acquire_lua[] =
    "local cur = redis.call('GET', KEYS[1])\n"
    "if cur == false then\n"
    "  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
    "elseif cur == ARGV[1] then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "else\n"
    "  return {0, redis.call('PTTL', KEYS[1])}\n"
    "end\n"
    "local f = 0\n"
    "if #KEYS > 1 then\n"
    "  f = tonumber(redis.call('GET', KEYS[2]) or '0')\n"
    "  if f == nil then\n"
    "    return redis.error_reply('ERR the fence counter is not a number')\n"
    "  end\n"
    "end\n"
    "return {1, f}\n";

/* Raises the fence counter to ARGV[1] only if it is lower: 1, else 0. */
static const char fence_lua[] =
    "local cur = tonumber(redis.call('GET', KEYS[1]) or '0')\n"
    "if cur == nil then\n"
    "  return redis.error_reply('ERR the fence counter is not a number')\n"
    "end\n"
    "if cur < tonumber(ARGV[1]) then\n"
    "  redis.call('SET', KEYS[1], ARGV[1])\n"
    "  return 1\n"
    "end\n"
    "return 0\n";

/* Deletes the key if it holds ARGV[1] and, given a channel (ARGV[2]),
 * publishes on it so that a waiter subscribed to this master wakes. */
static const char release_lua[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "  if ARGV[2] then redis.call('PUBLISH', ARGV[2], '') end\n"
    "  return 1\n"
    "end\n"
    "return 0\n";

static const char extend_lua[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  return redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "end\n"
    "return 0\n";

dlock_err dlock__redlock_init(dlock__redlock *r, const dlock__deployment *d,
                              const dlock__conn_cfg *cfg, int pool_size,
                              dlock__msg *m)
{
    dlock_err err;

    memset(r, 0, sizeof(*r));
    err = dlock__nodeset_init(&r->nodes, cfg, pool_size, m);
    for (int i = 0; i < d->nnodes && err == DLOCK_OK; i++) {
        int index;

        err = dlock__nodeset_add(&r->nodes, &d->nodes[i], d->nodes[i].host,
                                 d->nodes[i].port, &index, m);
        r->n = index + 1;
    }
    if (err != DLOCK_OK) {
        dlock__redlock_destroy(r);
        return err;
    }
    return DLOCK_OK;
}

void dlock__redlock_destroy(dlock__redlock *r)
{
    dlock__nodeset_destroy(&r->nodes);
    memset(r, 0, sizeof(*r));
}

/* ---- pure decisions ---------------------------------------------------- */

int dlock__redlock_quorum(int n)
{
    return n / 2 + 1;
}

int64_t dlock__redlock_drift_ms(int64_t ttl_ms)
{
    return ttl_ms / 100 + 2;
}

int64_t dlock__redlock_validity_ms(int64_t ttl_ms, int64_t elapsed_ms)
{
    return ttl_ms - elapsed_ms - dlock__redlock_drift_ms(ttl_ms);
}

int64_t dlock__redlock_node_timeout_ms(int64_t ttl_ms, int64_t min_ms,
                                       int64_t max_ms)
{
    int64_t t = ttl_ms / 10;

    if (t < min_ms)
        t = min_ms;
    return t > max_ms ? max_ms : t;
}

void dlock__redlock_failures(const dlock__node_result *res, int n,
                             const char *const *descs, char *buf, size_t size)
{
    int failed = 0, listed = 0;
    size_t at;

    buf[0] = '\0';
    for (int i = 0; i < n; i++)
        failed += res[i].vote == DLOCK__VOTE_FAILED;
    if (failed == 0)
        return;
    at = (size_t)snprintf(buf, size, "%d of %d nodes:", failed, n);
    for (int i = 0; i < n && at < size; i++) {
        if (res[i].vote != DLOCK__VOTE_FAILED)
            continue;
        at += (size_t)snprintf(buf + at, size - at, "%s %s %s",
                               listed++ ? "," : "", descs[i], res[i].why);
    }
}

/* Counts the votes of a round. */
static void count_votes(const dlock__node_result *res, int n, int *yes,
                        int *no)
{
    *yes = 0;
    *no = 0;
    for (int i = 0; i < n; i++) {
        *yes += res[i].vote == DLOCK__VOTE_YES;
        *no += res[i].vote == DLOCK__VOTE_NO;
    }
}

/* Writes "<what>: 2 of 5 masters agreed (majority 3), 1 answered no; 2 of
 * 5 nodes: ..." with code err. */
static dlock_err report(dlock__msg *m, dlock_err err, const char *what,
                        const dlock__node_result *res, int n,
                        const char *const *descs)
{
    char failures[DLOCK_ERRMSG_MAX / 2];
    int yes, no;

    count_votes(res, n, &yes, &no);
    dlock__redlock_failures(res, n, descs, failures, sizeof(failures));
    return dlock__msg_set(m, err,
                          "%s: %d of %d masters agreed (majority "
                          "%d), %d answered no%s%s",
                          what, yes, n, dlock__redlock_quorum(n), no,
                          failures[0] ? "; " : "", failures);
}

dlock_err dlock__redlock_decide(const dlock__node_result *res, int n,
                                const char *const *descs, const char *what,
                                int64_t ttl_ms, int64_t elapsed_ms,
                                int64_t *validity_ms, dlock__msg *m)
{
    const int quorum = dlock__redlock_quorum(n);
    int yes, no;

    *validity_ms = 0;
    count_votes(res, n, &yes, &no);
    if (yes >= quorum) {
        int64_t left = dlock__redlock_validity_ms(ttl_ms, elapsed_ms);

        if (left > 0) {
            *validity_ms = left;
            return DLOCK_OK;
        }
        return dlock__msg_set(m, DLOCK_TIMEOUT,
                              "%s: %d of %d masters "
                              "agreed but the round took %" PRId64 " ms of "
                              "a %" PRId64 " ms TTL",
                              what, yes, n, elapsed_ms, ttl_ms);
    }
    /* Fail-closed: when too few answered to form a majority either way,
     * nothing is known about the lock. */
    return report(m, yes + no < quorum ? DLOCK_UNAVAILABLE : DLOCK_BUSY, what,
                  res, n, descs);
}

int64_t dlock__redlock_retry_delay_ms(int64_t max_ms)
{
    uint32_t rnd = 0;

    if (max_ms < 2)
        return max_ms < 0 ? 0 : max_ms;
    /* Without randomness (getrandom failing) the delay is the maximum:
     * slower, never unsafe. */
    if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
        return max_ms;
    return max_ms / 2 + (int64_t)(rnd % (uint32_t)(max_ms / 2 + 1));
}

/* ---- rounds ------------------------------------------------------------ */

typedef struct job {
    dlock__redlock *r;
    int index;
    int argc;
    const char **argv;
    const size_t *lens;
    int64_t deadline_us;
    dlock__redlock_judge judge;
    dlock__node_result *res;
} job;

/* Why a master gave no usable answer, in a few words. */
static void failure_reason(dlock_err err, const dlock__msg *msg,
                           dlock__node_result *res)
{
    if (err == DLOCK_TIMEOUT)
        snprintf(res->why, sizeof(res->why), "timed out");
    else if (err == DLOCK_UNAVAILABLE && strstr(msg->text, "refused"))
        snprintf(res->why, sizeof(res->why), "refused");
    else
        snprintf(res->why, sizeof(res->why), "failed (%.120s)", msg->text);
}

/* Judges one master's reply (or failure) into res. */
static void judge_reply(dlock_err err, const dlock__msg *msg,
                        const redisReply *reply, dlock__redlock_judge judge,
                        dlock__node_result *res)
{
    res->err = err;
    if (err != DLOCK_OK) {
        failure_reason(err, msg, res);
    } else if (reply->type == REDIS_REPLY_ERROR) {
        res->err = DLOCK_SERVER;
        snprintf(res->why, sizeof(res->why), "answered %.120s", reply->str);
    } else {
        judge(reply, res);
        if (res->vote == DLOCK__VOTE_FAILED && res->why[0] == '\0')
            snprintf(res->why, sizeof(res->why), "answered %s",
                     dlock__reply_type_name(reply));
    }
}

static void *run_job(void *arg)
{
    job *j = arg;
    redisReply *reply = NULL;
    dlock__msg msg;
    dlock_err err;

    dlock__msg_clear(&msg);
    err = dlock__nodeset_call(&j->r->nodes, j->index, j->argc, j->argv,
                              j->lens, j->deadline_us, &reply, &msg);
    judge_reply(err, &msg, reply, j->judge, j->res);
    freeReplyObject(reply);
    return NULL;
}

/* An idle connection that the server closed (a restart) says the other
 * idle ones are dead too: they are dropped, and the master is tried again
 * on a fresh connection, as nodeset.c does for one call. */
static int stale(dlock__redlock *r, int i, dlock_err err)
{
    if (err != DLOCK_UNAVAILABLE)
        return 0;
    dlock__nodeset_drop_idle(&r->nodes, i);
    return 1;
}

/* The masters with an idle connection get the command on it at once;
 * their replies are read with poll(2) below.  handled[i] says master i
 * needs no thread (sent, or failed in the sending). */
static void send_on_idle(dlock__redlock *r, const char *cmd, size_t len,
                         int64_t deadline_us, dlock__conn **conns,
                         int *handled, dlock__redlock_judge judge,
                         dlock__node_result *res)
{
    for (int i = 0; i < r->n; i++) {
        dlock__msg msg;
        dlock_err err;

        if (!dlock__nodeset_take_idle(&r->nodes, i, &conns[i]))
            continue;
        handled[i] = 1;
        dlock__msg_clear(&msg);
        err = dlock__conn_send(conns[i], cmd, len, deadline_us, &msg);
        if (err != DLOCK_OK) {
            dlock__nodeset_put(&r->nodes, i, conns[i], 1);
            conns[i] = NULL;
            if (stale(r, i, err))
                handled[i] = 0; /* a thread tries a fresh connection */
            else
                judge_reply(err, &msg, NULL, judge, &res[i]);
        }
    }
}

/* Reads the replies of the masters in conns until all came or
 * deadline_us; those still silent then are timed out and their
 * connections closed (a late reply would desynchronise them). */
static void read_replies(dlock__redlock *r, dlock__conn **conns,
                         int64_t deadline_us, int *handled,
                         dlock__redlock_judge judge, dlock__node_result *res)
{
    for (;;) {
        struct pollfd fds[DLOCK__NODES_MAX];
        int who[DLOCK__NODES_MAX], nfds = 0, buffered = 0;

        for (int i = 0; i < r->n; i++) {
            if (conns[i] == NULL)
                continue;
            buffered |= dlock__conn_buffered(conns[i]);
            fds[nfds] = (struct pollfd){.fd = dlock__conn_fd(conns[i]),
                                        .events = POLLIN};
            who[nfds++] = i;
        }
        if (nfds == 0)
            return;
        if (!buffered
            && (dlock__now_us() >= deadline_us
                || poll(fds, (nfds_t)nfds, dlock__ms_left(deadline_us)) <= 0))
            break;
        for (int k = 0; k < nfds; k++) {
            const int i = who[k];
            redisReply *reply = NULL;
            dlock__msg msg;
            dlock_err err;

            if (!dlock__conn_buffered(conns[i]) && !(fds[k].revents))
                continue;
            dlock__msg_clear(&msg);
            err = dlock__conn_recv(conns[i], 0, &reply, &msg);
            if (err == DLOCK_OK && reply == NULL)
                continue; /* part of a reply: wait for the rest */
            dlock__nodeset_put(&r->nodes, i, conns[i], err != DLOCK_OK);
            conns[i] = NULL;
            if (err != DLOCK_OK && stale(r, i, err))
                handled[i] = 0;
            else
                judge_reply(err, &msg, reply, judge, &res[i]);
            freeReplyObject(reply);
        }
    }
    for (int i = 0; i < r->n; i++) {
        if (conns[i] == NULL)
            continue;
        res[i].err = DLOCK_TIMEOUT;
        snprintf(res[i].why, sizeof(res[i].why), "timed out");
        dlock__nodeset_put(&r->nodes, i, conns[i], 1);
        conns[i] = NULL;
    }
}

/* Starts a thread for every master not yet handled; returns how many
 * could not be started (those are FAILED). */
static int start_threads(dlock__redlock *r, job *jobs, pthread_t *threads,
                         int *started, int *handled, int argc,
                         const char **argv, const size_t *lens,
                         int64_t deadline_us, dlock__redlock_judge judge,
                         dlock__node_result *res)
{
    int failed = 0;

    for (int i = 0; i < r->n; i++) {
        if (handled[i])
            continue;
        handled[i] = 1;
        jobs[i] = (job){r, i, argc, argv, lens, deadline_us, judge, &res[i]};
        if (dlock__thread_start(&threads[i], run_job, &jobs[i]) == 0) {
            started[i] = 1;
            continue;
        }
        failed++;
        res[i].err = DLOCK_SYSTEM;
        snprintf(res[i].why, sizeof(res[i].why), "not tried (no thread)");
    }
    return failed;
}

/*
 * A round: the command goes at once on the idle connection of every
 * master that has one, and their replies are read together with poll(2);
 * a master without one (the first round, or after a failure) gets a
 * thread that connects and calls, since connecting blocks.  Everything is
 * bounded by deadline_us.
 */
dlock_err dlock__redlock_round(dlock__redlock *r, int argc, const char **argv,
                               const size_t *lens, int64_t deadline_us,
                               dlock__redlock_judge judge,
                               dlock__node_result *res, dlock__msg *m)
{
    job jobs[DLOCK__NODES_MAX];
    pthread_t threads[DLOCK__NODES_MAX];
    dlock__conn *conns[DLOCK__NODES_MAX] = {0};
    int started[DLOCK__NODES_MAX] = {0}, handled[DLOCK__NODES_MAX] = {0};
    int failed_to_start = 0;
    char *cmd = NULL;
    int len;

    for (int i = 0; i < r->n; i++)
        memset(&res[i], 0, sizeof(res[i]));
    len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (len < 0)
        return dlock__msg_set(m, DLOCK_NOMEM, "formatting a Redlock round");
    send_on_idle(r, cmd, (size_t)len, deadline_us, conns, handled, judge, res);
    free(cmd); /* hiredis allocates with malloc */
    failed_to_start += start_threads(r, jobs, threads, started, handled, argc,
                                     argv, lens, deadline_us, judge, res);
    read_replies(r, conns, deadline_us, handled, judge, res);
    /* Masters whose idle connection turned out closed while reading. */
    failed_to_start += start_threads(r, jobs, threads, started, handled, argc,
                                     argv, lens, deadline_us, judge, res);
    for (int i = 0; i < r->n; i++)
        if (started[i])
            pthread_join(threads[i], NULL);
    if (failed_to_start > 0)
        return dlock__msg_set(m, DLOCK_SYSTEM,
                              "starting %d of %d threads "
                              "of a Redlock round",
                              failed_to_start, r->n);
    return DLOCK_OK;
}

const char *const *dlock__redlock_descs(dlock__redlock *r,
                                        const char *out[DLOCK__NODES_MAX])
{
    for (int i = 0; i < r->n; i++)
        out[i] = dlock__nodeset_desc(&r->nodes, i);
    return out;
}

/* ---- the lock ---------------------------------------------------------- */

/* {1, counter}: YES with the counter; {0, pttl}: NO. */
static void judge_acquire(const redisReply *reply, dlock__node_result *res)
{
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2
        || reply->element[0]->type != REDIS_REPLY_INTEGER
        || reply->element[1]->type != REDIS_REPLY_INTEGER)
        return;
    res->vote = reply->element[0]->integer == 1 ? DLOCK__VOTE_YES
                                                : DLOCK__VOTE_NO;
    res->value = reply->element[1]->integer;
}

/* 1: YES; 0: NO. */
static void judge_flag(const redisReply *reply, dlock__node_result *res)
{
    if (reply->type != REDIS_REPLY_INTEGER)
        return;
    res->vote = reply->integer == 1 ? DLOCK__VOTE_YES : DLOCK__VOTE_NO;
}

/* Runs a script with keys and args as one round. */
static dlock_err script_round(dlock__redlock *r, const char *body, int nkeys,
                              const char **keys_and_args, int nargs,
                              int64_t timeout_ms, dlock__redlock_judge judge,
                              dlock__node_result *res, dlock__msg *m)
{
    const char *argv[10];
    char nk[4];

    assert(nkeys + nargs + 3 <= 10);
    snprintf(nk, sizeof(nk), "%d", nkeys);
    argv[0] = "EVAL";
    argv[1] = body;
    argv[2] = nk;
    for (int i = 0; i < nkeys + nargs; i++)
        argv[3 + i] = keys_and_args[i];
    return dlock__redlock_round(r, 3 + nkeys + nargs, argv, NULL,
                                dlock__deadline_after_ms(timeout_ms), judge,
                                res, m);
}

dlock_err dlock__redlock_eval(dlock__redlock *r, const char *body, int nkeys,
                              const char **keys_and_args, int nargs,
                              int64_t node_timeout_ms,
                              dlock__redlock_judge judge,
                              dlock__node_result *res, dlock__msg *m)
{
    return script_round(r, body, nkeys, keys_and_args, nargs, node_timeout_ms,
                        judge, res, m);
}

dlock_err dlock__redlock_release(dlock__redlock *r, const char *key,
                                 const char *token, const char *channel,
                                 int64_t node_timeout_ms, dlock__msg *m)
{
    dlock__node_result res[DLOCK__NODES_MAX];
    const char *descs[DLOCK__NODES_MAX];
    const char *ka[] = {key, token, channel};
    char failures[DLOCK_ERRMSG_MAX / 2];
    dlock_err err;

    err = script_round(r, release_lua, 1, ka, channel != NULL ? 2 : 1,
                       node_timeout_ms, judge_flag, res, m);
    if (err != DLOCK_OK)
        return err;
    dlock__redlock_failures(res, r->n, dlock__redlock_descs(r, descs),
                            failures, sizeof(failures));
    if (failures[0] != '\0')
        return dlock__msg_set(m, DLOCK_UNAVAILABLE,
                              "releasing %s (it "
                              "expires by its TTL where it stays): %s",
                              key, failures);
    return DLOCK_OK;
}

/* The fence after a granted first round: the highest counter a master
 * reported, plus one. */
static uint64_t next_fence(const dlock__node_result *res, int n)
{
    int64_t high = 0;

    for (int i = 0; i < n; i++)
        if (res[i].vote == DLOCK__VOTE_YES && res[i].value > high)
            high = res[i].value;
    return (uint64_t)high + 1;
}

/* Round two: F written "only if greater" to a majority. */
static dlock_err write_fence(dlock__redlock *r, const char *fence_key,
                             uint64_t fence, int64_t ttl_ms,
                             int64_t node_timeout_ms, int64_t start_us,
                             int64_t *validity_ms, dlock__msg *m)
{
    dlock__node_result res[DLOCK__NODES_MAX];
    const char *descs[DLOCK__NODES_MAX];
    char value[24], what[64];
    const char *ka[] = {fence_key, value};
    dlock_err err;

    snprintf(value, sizeof(value), "%" PRIu64, fence);
    err = script_round(r, fence_lua, 1, ka, 1, node_timeout_ms, judge_flag,
                       res, m);
    if (err != DLOCK_OK)
        return err;
    snprintf(what, sizeof(what), "writing fence %" PRIu64, fence);
    return dlock__redlock_decide(res, r->n, dlock__redlock_descs(r, descs),
                                 what, ttl_ms,
                                 (dlock__now_us() - start_us) / 1000,
                                 validity_ms, m);
}

/* What a busy round's answers say (dlock__redlock_busy). */
static void judge_busy(const dlock__node_result *res, int n,
                       dlock__redlock_busy *busy)
{
    int64_t held[DLOCK__NODES_MAX];
    int yes = 0, no = 0, need;

    for (int i = 0; i < n; i++)
        if (res[i].vote == DLOCK__VOTE_YES)
            yes++;
        else if (res[i].vote == DLOCK__VOTE_NO) /* PTTL -1: no TTL */
            held[no++] = res[i].value < 0 ? INT64_MAX : res[i].value;
    busy->free_somewhere = yes > 0;
    busy->held_ms = 0;
    need = dlock__redlock_quorum(n) - yes;
    if (yes > 0 || need > no)
        return;
    /* The need-th soonest expiry is the one that frees a majority. */
    for (int i = 1; i < no; i++)
        for (int j = i; j > 0 && held[j] < held[j - 1]; j--) {
            int64_t t = held[j];

            held[j] = held[j - 1];
            held[j - 1] = t;
        }
    busy->held_ms = held[need - 1] == INT64_MAX ? -1 : held[need - 1];
}

dlock_err dlock__redlock_acquire(dlock__redlock *r, const char *key,
                                 const char *fence_key, const char *token,
                                 int64_t ttl_ms, int64_t node_timeout_ms,
                                 int64_t *validity_ms, uint64_t *fence,
                                 dlock__redlock_busy *busy, dlock__msg *m)
{
    dlock__node_result res[DLOCK__NODES_MAX];
    const char *descs[DLOCK__NODES_MAX];
    char ttl[24], what[300];
    const char *ka[] = {key, fence_key, token, ttl};
    const char *ka_nofence[] = {key, token, ttl};
    const int64_t start_us = dlock__now_us();
    dlock_err err;

    *validity_ms = 0;
    *fence = 0;
    snprintf(ttl, sizeof(ttl), "%" PRId64, ttl_ms);
    err = fence_key != NULL
              ? script_round(r, acquire_lua, 2, ka, 2, node_timeout_ms,
                             judge_acquire, res, m)
              : script_round(r, acquire_lua, 1, ka_nofence, 2, node_timeout_ms,
                             judge_acquire, res, m);
    if (err == DLOCK_OK) {
        snprintf(what, sizeof(what), "acquiring %.200s", key);
        err = dlock__redlock_decide(res, r->n, dlock__redlock_descs(r, descs),
                                    what, ttl_ms,
                                    (dlock__now_us() - start_us) / 1000,
                                    validity_ms, m);
    }
    if (err == DLOCK_BUSY && busy != NULL)
        judge_busy(res, r->n, busy);
    if (err == DLOCK_OK && fence_key != NULL) {
        *fence = next_fence(res, r->n);
        err = write_fence(r, fence_key, *fence, ttl_ms, node_timeout_ms,
                          start_us, validity_ms, m);
        /* Another grant's fence raced ours: a majority was free. */
        if (err == DLOCK_BUSY && busy != NULL)
            *busy = (dlock__redlock_busy){.free_somewhere = 1};
    }
    if (err != DLOCK_OK) {
        /* Undo what this round set, on every master, at once. */
        *validity_ms = 0;
        *fence = 0;
        (void)dlock__redlock_release(r, key, token, NULL, node_timeout_ms,
                                     NULL);
    }
    return err;
}

/* Answers {token or '', pttl, fence counter}. */
static const char inspect_lua[] =
    "return {redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]),\n"
    "        tonumber(redis.call('GET', KEYS[2]) or '0') or 0}\n";

/* {token, pttl, counter}: YES with them. */
static void judge_inspect(const redisReply *reply, dlock__node_result *res)
{
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3
        || reply->element[0]->type != REDIS_REPLY_STRING
        || reply->element[1]->type != REDIS_REPLY_INTEGER
        || reply->element[2]->type != REDIS_REPLY_INTEGER)
        return;
    res->vote = DLOCK__VOTE_YES;
    snprintf(res->text, sizeof(res->text), "%.*s",
             (int)(reply->element[0]->len < sizeof(res->text)
                       ? reply->element[0]->len
                       : sizeof(res->text) - 1),
             reply->element[0]->str);
    res->value = reply->element[1]->integer;
    res->value2 = reply->element[2]->integer;
}

dlock_err dlock__redlock_inspect(dlock__redlock *r, const char *key,
                                 const char *fence_key,
                                 int64_t node_timeout_ms,
                                 dlock__node_result *res, dlock__msg *m)
{
    const char *keys[] = {key, fence_key};

    return script_round(r, inspect_lua, 2, keys, 0, node_timeout_ms,
                        judge_inspect, res, m);
}

int dlock__redlock_majority_holder(const dlock__node_result *res, int n,
                                   int64_t *ttl_ms)
{
    for (int i = 0; i < n; i++) {
        int same = 0;
        int64_t ttl = INT64_MAX;

        if (res[i].vote != DLOCK__VOTE_YES || res[i].text[0] == '\0')
            continue;
        for (int j = 0; j < n; j++) {
            if (res[j].vote != DLOCK__VOTE_YES
                || strcmp(res[j].text, res[i].text) != 0)
                continue;
            same++;
            ttl = res[j].value < ttl ? res[j].value : ttl;
        }
        if (same >= dlock__redlock_quorum(n)) {
            *ttl_ms = ttl;
            return i;
        }
    }
    *ttl_ms = 0;
    return -1;
}

/* +PONG: YES. */
static void judge_pong(const redisReply *reply, dlock__node_result *res)
{
    if (reply->type == REDIS_REPLY_STATUS && strcmp(reply->str, "PONG") == 0)
        res->vote = DLOCK__VOTE_YES;
}

dlock_err dlock__redlock_ping(dlock__redlock *r, int64_t node_timeout_ms,
                              dlock__msg *m)
{
    dlock__node_result res[DLOCK__NODES_MAX];
    const char *descs[DLOCK__NODES_MAX];
    const char *argv[] = {"PING"};
    int64_t validity;
    dlock_err err;

    err = dlock__redlock_round(r, 1, argv, NULL,
                               dlock__deadline_after_ms(node_timeout_ms),
                               judge_pong, res, m);
    if (err != DLOCK_OK)
        return err;
    /* A majority of PONGs is all a round needs; the TTL is irrelevant. */
    return dlock__redlock_decide(res, r->n, dlock__redlock_descs(r, descs),
                                 "PING of the Redlock masters", INT32_MAX, 0,
                                 &validity, m);
}

dlock_err dlock__redlock_extend(dlock__redlock *r, const char *key,
                                const char *token, int64_t ttl_ms,
                                int64_t node_timeout_ms, int64_t *validity_ms,
                                dlock__msg *m)
{
    dlock__node_result res[DLOCK__NODES_MAX];
    const char *descs[DLOCK__NODES_MAX];
    char ttl[24], what[300];
    const char *ka[] = {key, token, ttl};
    const int64_t start_us = dlock__now_us();
    dlock_err err;

    *validity_ms = 0;
    snprintf(ttl, sizeof(ttl), "%" PRId64, ttl_ms);
    err = script_round(r, extend_lua, 1, ka, 2, node_timeout_ms, judge_flag,
                       res, m);
    if (err != DLOCK_OK)
        return err;
    snprintf(what, sizeof(what), "extending %.200s", key);
    err = dlock__redlock_decide(res, r->n, dlock__redlock_descs(r, descs),
                                what, ttl_ms,
                                (dlock__now_us() - start_us) / 1000,
                                validity_ms, m);
    /* Answers saying the token is gone on too many masters: the lock is
     * lost, not merely busy. */
    if (err == DLOCK_BUSY)
        return report(m, DLOCK_LOST, what, res, r->n, descs);
    return err;
}
