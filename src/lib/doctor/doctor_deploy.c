/*
 * doctor_deploy.c: the doctor over every server of a deployment
 * (dlock_doctor_nodes in dlock/doctor.h).
 *
 * One function per kind of deployment, so that each reads as what it
 * asks: a Redlock deployment is its masters, each judged like a single
 * server (INFO and TIME on its own connection); a Sentinel deployment is
 * its sentinels (SENTINEL MASTER: whom they name and what they count),
 * the master they name (judged like a single server) and the replicas
 * that master lists in INFO (state, lag, bytes behind); a Cluster is
 * every master and replica CLUSTER SHARDS lists, each judged like a
 * single server (a replica by its link to its master).  Servers are
 * asked one after another, each bounded by the client's I/O timeout: the
 * doctor is for people, not for the lock path.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"
#include "base/clock.h"
#include "deploy/deploy.h"
#include "doctor/doctor_internal.h"

/* Judges server i of ns like a single server into o (a master; or a
 * cluster replica, replica_ok, judged by its link to its master). */
static void check_server(dlock_client *c, dlock__nodeset *ns, int i,
                         int replica_ok, dlock_doctor_node *o, char *info,
                         size_t infolen)
{
    const char *info_argv[] = {"INFO"}, *time_argv[] = {"TIME"};
    const int64_t deadline = dlock__client_io_deadline(c);
    redisReply *r = NULL;
    int64_t before;
    dlock__msg m;
    dlock_err err;

    snprintf(o->node, sizeof(o->node), "%s", dlock__nodeset_desc(ns, i));
    snprintf(o->role, sizeof(o->role), "master");
    info[0] = '\0';
    err = dlock__nodeset_call(ns, i, 1, info_argv, NULL, deadline, &r, &m);
    if (err == DLOCK_OK && r->type != REDIS_REPLY_STRING)
        err = dlock__msg_set(&m, DLOCK_PROTOCOL, "INFO answered %s",
                             dlock__reply_type_name(r));
    if (err == DLOCK_OK) {
        snprintf(info, infolen, "%s", r->str);
        dlock__doctor_judge_info(r->str, replica_ok, &o->report);
    }
    freeReplyObject(r);
    r = NULL;
    before = dlock__doctor_wall_us();
    if (err == DLOCK_OK)
        err = dlock__nodeset_call(ns, i, 1, time_argv, NULL, deadline, &r, &m);
    if (err != DLOCK_OK) {
        memset(&o->report, 0, sizeof(o->report));
        snprintf(o->note, sizeof(o->note), "no answer: %.240s", m.text);
        return;
    }
    dlock__doctor_judge_time(r, before, dlock__doctor_wall_us(),
                             &o->report.checks[4]);
    freeReplyObject(r);
    dlock__doctor_tally(&o->report);
    o->answered = 1;
    o->checked = 1;
}

static int doctor_redlock(dlock_client *c, dlock__redlock *r,
                          dlock_doctor_node *out, int max)
{
    char info[8192];
    int n = 0;

    for (int i = 0; i < r->n && n < max; i++, n++)
        check_server(c, &r->nodes, i, 0, &out[n], info, sizeof(info));
    return n;
}

/* The value of field in SENTINEL MASTER's flat field/value array. */
static const char *sentinel_field(const redisReply *r, const char *field)
{
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (r->element[i]->type == REDIS_REPLY_STRING
            && r->element[i + 1]->type == REDIS_REPLY_STRING
            && strcmp(r->element[i]->str, field) == 0)
            return r->element[i + 1]->str;
    return "?";
}

/* Sentinel i of s: the master it names and what it counts. */
static void check_sentinel(dlock_client *c, dlock__sentinel *s, int i,
                           dlock_doctor_node *o)
{
    const char *argv[] = {"SENTINEL", "MASTER", s->master_name};
    redisReply *r = NULL;
    dlock__msg m;
    dlock_err err;

    snprintf(o->node, sizeof(o->node), "%s",
             dlock__nodeset_desc(&s->sentinels, i));
    snprintf(o->role, sizeof(o->role), "sentinel");
    err = dlock__nodeset_call(&s->sentinels, i, 3, argv, NULL,
                              dlock__client_io_deadline(c), &r, &m);
    if (err == DLOCK_OK && r->type == REDIS_REPLY_ARRAY) {
        o->answered = 1;
        snprintf(o->note, sizeof(o->note),
                 "names master %s:%s (flags %s), %s replicas, %s other "
                 "sentinels, quorum %s",
                 sentinel_field(r, "ip"), sentinel_field(r, "port"),
                 sentinel_field(r, "flags"), sentinel_field(r, "num-slaves"),
                 sentinel_field(r, "num-other-sentinels"),
                 sentinel_field(r, "quorum"));
    } else if (err == DLOCK_OK) {
        snprintf(o->note, sizeof(o->note), "SENTINEL MASTER %s: %s",
                 s->master_name,
                 r->type == REDIS_REPLY_ERROR ? r->str
                                              : dlock__reply_type_name(r));
    } else {
        snprintf(o->note, sizeof(o->note), "no answer: %.240s", m.text);
    }
    freeReplyObject(r);
}

/* Copies "key=" 's value from INFO's slave line into out. */
static void slave_value(const char *line, const char *key, char *out,
                        size_t outlen)
{
    const char *at = strstr(line, key);
    size_t len;

    if (at == NULL) {
        snprintf(out, outlen, "?");
        return;
    }
    at += strlen(key);
    len = strcspn(at, ",\r\n");
    snprintf(out, outlen, "%.*s", (int)(len < outlen ? len : outlen - 1), at);
}

/* The replicas the master's INFO lists (slaveN lines) into out. */
static int replicas_of(const char *info, const char *master,
                       dlock_doctor_node *out, int max)
{
    const char *top_at = strstr(info, "master_repl_offset:");
    const long long top = top_at != NULL ? strtoll(top_at + 19, NULL, 10) : 0;
    int n = 0;

    for (const char *line = strstr(info, "\nslave"); line != NULL && n < max;
         line = strstr(line + 1, "\nslave")) {
        char ip[48], port[8], state[32], offset[24], lag[24];
        dlock_doctor_node *o = &out[n];

        /* "slaveN:ip=...", not "slave_read_only:..." and the like. */
        if (line[6] < '0' || line[6] > '9')
            continue;
        slave_value(line, "ip=", ip, sizeof(ip));
        slave_value(line, "port=", port, sizeof(port));
        slave_value(line, "state=", state, sizeof(state));
        slave_value(line, "offset=", offset, sizeof(offset));
        slave_value(line, "lag=", lag, sizeof(lag));
        memset(o, 0, sizeof(*o));
        snprintf(o->node, sizeof(o->node), "%s:%s", ip, port);
        snprintf(o->role, sizeof(o->role), "replica");
        o->answered = 1;
        /* The figures are what the note is for: a master's name long
         * enough to crowd them out (a node holds 279 characters, the note
         * 319) is cut to 190, which leaves them room whatever they say. */
        snprintf(o->note, sizeof(o->note),
                 "replica of %.190s: state %s, lag %s s, %lld bytes behind",
                 master, state, lag, top - strtoll(offset, NULL, 10));
        n++;
    }
    return n;
}

static int doctor_sentinel(dlock_client *c, dlock__deploy *dp,
                           dlock_doctor_node *out, int max)
{
    char info[8192];
    int n = 0, master;

    for (int i = 0; i < dp->sentinel.sentinels.count && n < max; i++, n++)
        check_sentinel(c, &dp->sentinel, i, &out[n]);
    pthread_mutex_lock(&dp->mu);
    master = dp->master;
    pthread_mutex_unlock(&dp->mu);
    if (master < 0 || n >= max)
        return n;
    check_server(c, &dp->masters, master, 0, &out[n], info, sizeof(info));
    n++;
    return n + replicas_of(info, out[n - 1].node, out + n, max - n);
}

/* Every master and replica of the cluster, each judged like a single
 * server, its shard (and a replica's master) in the note. */
static dlock_err doctor_cluster(dlock_client *c, dlock__cluster *cl,
                                dlock_doctor_node *out, int max, int *n,
                                dlock__msg *m)
{
    dlock__member members[DLOCK_DOCTOR_NODES_MAX];
    char info[8192];
    int count = 0;
    dlock_err err;

    if (max > DLOCK_DOCTOR_NODES_MAX)
        max = DLOCK_DOCTOR_NODES_MAX;
    err = dlock__client_cluster_members(c, members, max, &count, m);
    if (err != DLOCK_OK)
        return err;
    for (int i = 0; i < count; i++) {
        const dlock__member *k = &members[i];
        dlock_doctor_node *o = &out[i];
        char why[sizeof(o->note)], shard[sizeof(o->note)];

        check_server(c, &cl->nodes, k->node, !k->master, o, info,
                     sizeof(info));
        snprintf(why, sizeof(why), "%s", o->answered ? "" : o->note);
        if (k->master) {
            snprintf(shard, sizeof(shard), "shard %d", k->shard);
        } else {
            snprintf(o->role, sizeof(o->role), "replica");
            snprintf(shard, sizeof(shard), "replica of %s, shard %d",
                     dlock__nodeset_desc(&cl->nodes, k->master_node),
                     k->shard);
        }
        snprintf(o->note, sizeof(o->note), "%.100s%s%.200s", shard,
                 why[0] != '\0' ? ", " : "", why);
    }
    *n = count;
    return DLOCK_OK;
}

dlock_err dlock_doctor_nodes(dlock_client *c, dlock_doctor_node *out, int max,
                             int *n)
{
    dlock__deploy *dp;
    dlock__msg *m;

    if (c == NULL || out == NULL || n == NULL || max < 0)
        return DLOCK_INVALID;
    *n = 0;
    m = dlock__client_begin(c);
    memset(out, 0, sizeof(*out) * (size_t)max);
    dp = dlock__client_deploy(c);
    if (dp != NULL && dp->kind == DLOCK__REDLOCK)
        *n = doctor_redlock(c, &dp->redlock, out, max);
    else if (dp != NULL && dp->kind == DLOCK__SENTINEL)
        *n = doctor_sentinel(c, dp, out, max);
    else if (dp != NULL && dp->kind == DLOCK__CLUSTER)
        return doctor_cluster(c, &dp->cluster, out, max, n, m);
    else
        return dlock__msg_set(m, DLOCK_INVALID,
                              "%s: not a Sentinel, Redlock or Cluster "
                              "deployment; "
                              "use dlock_doctor_run",
                              dlock_client_endpoint(c));
    return DLOCK_OK;
}
