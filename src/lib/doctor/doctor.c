/*
 * doctor.c: judges a Redis server's settings for locks (dlock/doctor.h).
 *
 * Everything comes from one INFO (the default sections: server, memory,
 * persistence, replication) and one TIME, so the checks work on servers
 * where CONFIG is disabled, as on most managed offerings.  Each check is a
 * small function from INFO's text to a verdict and a sentence; the
 * sentences say what goes wrong for a lock, not only which setting differs.
 * The checks are shared with doctor_deploy.c, which asks every server of
 * a Sentinel, Redlock or Cluster deployment (doctor_internal.h).
 */
#include "dlock/doctor.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client_internal.h"
#include "doctor/doctor_internal.h"

/* Copies INFO's value of field (up to the end of its line) into out;
 * returns 1 if the field is there. */
static int info_field(const char *info, const char *field, char *out,
                      size_t outlen)
{
    size_t flen = strlen(field);

    for (const char *line = info; line != NULL && *line != '\0';) {
        const char *end = strpbrk(line, "\r\n");
        size_t len = end != NULL ? (size_t)(end - line) : strlen(line);

        if (len > flen && strncmp(line, field, flen) == 0
            && line[flen] == ':') {
            size_t vlen = len - flen - 1;

            if (vlen >= outlen)
                vlen = outlen - 1;
            memcpy(out, line + flen + 1, vlen);
            out[vlen] = '\0';
            return 1;
        }
        line = end != NULL ? end + strspn(end, "\r\n") : NULL;
    }
    return 0;
}

static void judge(dlock_doctor_check *k, dlock_doctor_verdict v,
                  const char *found, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void judge(dlock_doctor_check *k, dlock_doctor_verdict v,
                  const char *found, const char *fmt, ...)
{
    va_list ap;

    k->verdict = v;
    snprintf(k->found, sizeof(k->found), "%s", found);
    va_start(ap, fmt);
    vsnprintf(k->why, sizeof(k->why), fmt, ap);
    va_end(ap);
}

static void unknown(dlock_doctor_check *k, const char *field)
{
    judge(k, DLOCK_DOCTOR_UNKNOWN, "", "INFO has no %s field", field);
}

/* major * 10000 + minor * 100 + patch, from "7.0.15". */
static long version_number(const char *v)
{
    long major = 0, minor = 0, patch = 0;

    sscanf(v, "%ld.%ld.%ld", &major, &minor, &patch);
    return major * 10000 + minor * 100 + patch;
}

static void check_version(const char *info, dlock_doctor_check *k)
{
    char v[32];

    if (!info_field(info, "redis_version", v, sizeof(v))) {
        unknown(k, "redis_version");
        return;
    }
    if (version_number(v) >= version_number(DLOCK_REDIS_MIN_VERSION))
        judge(k, DLOCK_DOCTOR_SAFE, v,
              "Redis %s runs the lock scripts "
              "(%s or later needed)",
              v, DLOCK_REDIS_MIN_VERSION);
    else
        judge(k, DLOCK_DOCTOR_UNSAFE, v,
              "Redis %s is older than %s: the "
              "lock scripts read TIME before they write, which needs "
              "script effects replication",
              v, DLOCK_REDIS_MIN_VERSION);
}

static void check_eviction(const char *info, dlock_doctor_check *k)
{
    char policy[48], limit[32];

    if (!info_field(info, "maxmemory_policy", policy, sizeof(policy))
        || !info_field(info, "maxmemory", limit, sizeof(limit))) {
        unknown(k, "maxmemory_policy");
        return;
    }
    if (strcmp(policy, "noeviction") == 0)
        judge(k, DLOCK_DOCTOR_SAFE, policy,
              "a full server refuses new "
              "grants rather than evict a held lock");
    else
        judge(k, DLOCK_DOCTOR_UNSAFE, policy,
              "maxmemory-policy %s (maxmemory "
              "%s): when memory is full the server may evict a held lock "
              "(another client then takes it) or a fence counter; set "
              "noeviction",
              policy, limit);
}

static void check_persistence(const char *info, dlock_doctor_check *k)
{
    char aof[8];

    if (!info_field(info, "aof_enabled", aof, sizeof(aof))) {
        unknown(k, "aof_enabled");
        return;
    }
    if (strcmp(aof, "1") == 0)
        judge(k, DLOCK_DOCTOR_SAFE, "aof",
              "appendonly yes: a restart keeps "
              "held locks and fence counters (appendfsync always loses none "
              "in a crash, everysec up to 1 s)");
    else
        judge(k, DLOCK_DOCTOR_UNSAFE, "none",
              "appendonly no: a restart goes "
              "back to the last RDB snapshot, or to nothing, and forgets "
              "locks still held (another client can take one in use) and "
              "fence counters; turn on appendonly, or keep a crashed "
              "server down for the longest lock TTL");
}

/* The worst replica in INFO's slaveN lines: how many, how many not
 * online or lagging more than 1 s, and the largest byte gap. */
static void check_replicas(const char *info, dlock_doctor_check *k)
{
    char n_text[16], offset_text[32];
    long n, behind = 0;
    long long top, worst_gap = 0, worst_lag = 0;

    if (!info_field(info, "connected_slaves", n_text, sizeof(n_text))
        || !info_field(info, "master_repl_offset", offset_text,
                       sizeof(offset_text))) {
        unknown(k, "connected_slaves");
        return;
    }
    n = strtol(n_text, NULL, 10);
    top = strtoll(offset_text, NULL, 10);
    for (long i = 0; i < n; i++) {
        char field[32], line[256], *at;
        long long offset = 0, lag = 0;

        snprintf(field, sizeof(field), "slave%ld", i);
        if (!info_field(info, field, line, sizeof(line)))
            continue;
        at = strstr(line, "offset=");
        if (at != NULL)
            offset = strtoll(at + 7, NULL, 10);
        at = strstr(line, "lag=");
        if (at != NULL)
            lag = strtoll(at + 4, NULL, 10);
        if (strstr(line, "state=online") == NULL || lag > 1)
            behind++;
        if (top - offset > worst_gap)
            worst_gap = top - offset;
        if (lag > worst_lag)
            worst_lag = lag;
    }
    if (n == 0)
        judge(k, DLOCK_DOCTOR_SAFE, "primary", "a primary without replicas");
    else if (behind > 0)
        judge(k, DLOCK_DOCTOR_UNSAFE, "primary",
              "%ld of %ld replicas are "
              "not online or lag (up to %lld s, %lld bytes): a failover to "
              "one would lose the last grants",
              behind, n, worst_lag, worst_gap);
    else
        judge(k, DLOCK_DOCTOR_SAFE, "primary",
              "%ld replica(s) in sync "
              "(%lld bytes behind at most); replication is asynchronous, "
              "so a failover may still lose the last grants",
              n, worst_gap);
}

/* A cluster replica is judged by its link to its master: it takes over
 * after a failover, and what it has not received is lost then. */
static void check_replica_link(const char *info, dlock_doctor_check *k)
{
    char link[16] = "", since[32] = "";

    if (!info_field(info, "master_link_status", link, sizeof(link))) {
        unknown(k, "master_link_status");
        return;
    }
    info_field(info, "master_last_io_seconds_ago", since, sizeof(since));
    if (strcmp(link, "up") == 0)
        judge(k, DLOCK_DOCTOR_SAFE, "replica",
              "link to its master up (last I/O %s s ago); replication is "
              "asynchronous, so a failover to it may still lose the last "
              "grants",
              since[0] != '\0' ? since : "?");
    else
        judge(k, DLOCK_DOCTOR_UNSAFE, "replica",
              "link to its master %s: a failover to it would lose what it "
              "has not received",
              link);
}

static void check_replication(const char *info, int replica_ok,
                              dlock_doctor_check *k)
{
    char role[16];

    if (!info_field(info, "role", role, sizeof(role))) {
        unknown(k, "role");
        return;
    }
    if (strcmp(role, "master") == 0)
        check_replicas(info, k);
    else if (replica_ok)
        check_replica_link(info, k);
    else
        judge(k, DLOCK_DOCTOR_UNSAFE, role,
              "role %s: a replica refuses lock "
              "writes (READONLY) and may be behind its primary; point dlock "
              "at the primary",
              role);
}

int64_t dlock__doctor_wall_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* TIME's reply r against our wall clock, taken at the middle of the
 * round trip from before to after. */
void dlock__doctor_judge_time(const redisReply *r, int64_t before,
                              int64_t after, dlock_doctor_check *k)
{
    int64_t server, offset_ms, slack_ms;
    char found[32];

    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2
        || r->element[0]->type != REDIS_REPLY_STRING
        || r->element[1]->type != REDIS_REPLY_STRING) {
        judge(k, DLOCK_DOCTOR_UNKNOWN, "", "TIME did not answer two numbers");
        return;
    }
    server = strtoll(r->element[0]->str, NULL, 10) * 1000000
             + strtoll(r->element[1]->str, NULL, 10);
    offset_ms = (server - (before + after) / 2) / 1000;
    slack_ms = (after - before) / 2000;
    snprintf(found, sizeof(found), "%+" PRId64 "ms", offset_ms);
    if ((offset_ms < 0 ? -offset_ms : offset_ms)
        <= DLOCK_DOCTOR_CLOCK_MAX_MS + slack_ms)
        judge(k, DLOCK_DOCTOR_SAFE, found,
              "the server's clock is within "
              "%d ms of ours (%+" PRId64 " ms, +-%" PRId64 " ms)",
              DLOCK_DOCTOR_CLOCK_MAX_MS, offset_ms, slack_ms);
    else
        judge(k, DLOCK_DOCTOR_UNSAFE, found,
              "the server's clock is %" PRId64
              " ms %s ours: fences come from it and keys expire by it, so "
              "a clock that steps can lower fences or end locks early; run "
              "NTP on both",
              offset_ms < 0 ? -offset_ms : offset_ms,
              offset_ms > 0 ? "ahead of" : "behind");
}

static dlock_err check_clock(dlock_client *c, dlock_doctor_check *k,
                             dlock__msg *m)
{
    const char *argv[] = {"TIME"};
    int64_t before = dlock__doctor_wall_us();
    redisReply *r;
    dlock_err err = dlock__client_command(c, 1, argv, NULL, &r, m);

    if (err != DLOCK_OK)
        return err;
    dlock__doctor_judge_time(r, before, dlock__doctor_wall_us(), k);
    freeReplyObject(r);
    return DLOCK_OK;
}

static const char *const check_names[DLOCK_DOCTOR_CHECKS] = {
    "version", "eviction", "persistence", "replication", "clock",
};

/* The four checks INFO's text decides. */
void dlock__doctor_judge_info(const char *info, int replica_ok,
                              dlock_doctor_report *out)
{
    check_version(info, &out->checks[0]);
    check_eviction(info, &out->checks[1]);
    check_persistence(info, &out->checks[2]);
    check_replication(info, replica_ok, &out->checks[3]);
}

/* Names the checks and counts the verdicts. */
void dlock__doctor_tally(dlock_doctor_report *out)
{
    out->unsafe = 0;
    out->unknown = 0;
    for (int i = 0; i < DLOCK_DOCTOR_CHECKS; i++) {
        out->checks[i].name = check_names[i];
        out->unsafe += out->checks[i].verdict == DLOCK_DOCTOR_UNSAFE;
        out->unknown += out->checks[i].verdict == DLOCK_DOCTOR_UNKNOWN;
    }
}

dlock_err dlock_doctor_run(dlock_client *c, dlock_doctor_report *out)
{
    const char *argv[] = {"INFO"};
    dlock__msg *m;
    redisReply *r;
    dlock_err err;

    if (c == NULL || out == NULL)
        return DLOCK_INVALID;
    memset(out, 0, sizeof(*out));
    m = dlock__client_begin(c);
    err = dlock__client_command(c, 1, argv, NULL, &r, m);
    if (err != DLOCK_OK)
        return err;
    if (r->type != REDIS_REPLY_STRING) {
        err = dlock__msg_set(m, DLOCK_PROTOCOL,
                             "INFO on %s: expected text, "
                             "got %s",
                             dlock_client_endpoint(c),
                             dlock__reply_type_name(r));
        freeReplyObject(r);
        return err;
    }
    dlock__doctor_judge_info(r->str, 0, out);
    freeReplyObject(r);
    err = check_clock(c, &out->checks[4], m);
    if (err != DLOCK_OK) {
        memset(out, 0, sizeof(*out));
        return err;
    }
    dlock__doctor_tally(out);
    return DLOCK_OK;
}

const char *dlock_doctor_verdict_name(dlock_doctor_verdict v)
{
    switch (v) {
    case DLOCK_DOCTOR_SAFE: return "safe";
    case DLOCK_DOCTOR_UNSAFE: return "unsafe";
    case DLOCK_DOCTOR_UNKNOWN: return "unknown";
    }
    return "unknown";
}
