/*
 * patkit.c: setup helpers and Redis probes for the pattern tests (see
 * patkit.h).
 */
#include "patkit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *patkit_url(void)
{
    const char *url = testkit_shared_redis();

    TK_EXPECT(url != NULL,
              "the shared Redis (%s) answers, or scripts/stack "
              "up redis starts it",
              testkit_redis_url());
    return url;
}

dlock_client *patkit_client(void)
{
    return patkit_client_of(patkit_url(), 2000);
}

dlock_client *patkit_client_of(const char *url, int io_timeout_ms)
{
    dlock_client_opts o;
    char errbuf[DLOCK_ERRMSG_MAX] = "";
    dlock_client *c = NULL;
    dlock_err err;

    dlock_client_opts_init(&o);
    o.connect_timeout_ms = 1000;
    o.io_timeout_ms = io_timeout_ms;
    o.breaker_probe_ms = 100;
    err = dlock_client_new(url, &o, &c, errbuf, sizeof(errbuf));
    TK_EXPECT(err == DLOCK_OK && c != NULL, "a client for %s, got %s: %s", url,
              dlock_errname(err), errbuf);
    return c;
}

int patkit_exists(const char *key)
{
    return testkit_redis_int(testkit_redis_url(), "EXISTS %s", key) == 1;
}

long long patkit_int(const char *key, const char *field)
{
    redisReply *r = field != NULL ? testkit_redis_cmd(testkit_redis_url(),
                                                      "HGET %s %s", key, field)
                                  : testkit_redis_cmd(testkit_redis_url(),
                                                      "GET %s", key);
    long long v = 0;

    if (r != NULL && r->type == REDIS_REPLY_STRING)
        v = strtoll(r->str, NULL, 10);
    if (r != NULL)
        freeReplyObject(r);
    return v;
}

long long patkit_pttl(const char *key)
{
    return testkit_redis_int(testkit_redis_url(), "PTTL %s", key);
}

long long patkit_subscribers(const char *channel)
{
    redisReply *r = testkit_redis_cmd(testkit_redis_url(), "PUBSUB NUMSUB %s",
                                      channel);
    long long n = 0;

    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2
        && r->element[1]->type == REDIS_REPLY_INTEGER)
        n = r->element[1]->integer;
    if (r != NULL)
        freeReplyObject(r);
    return n;
}

int64_t patkit_server_time_us(void)
{
    redisReply *r = testkit_redis_cmd(testkit_redis_url(), "TIME");
    int64_t us = -1;

    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        us = strtoll(r->element[0]->str, NULL, 10) * 1000000
             + strtoll(r->element[1]->str, NULL, 10);
    if (r != NULL)
        freeReplyObject(r);
    return us;
}

void patkit_forget(const char *key, ...)
{
    va_list ap;

    va_start(ap, key);
    for (const char *k = key; k != NULL; k = va_arg(ap, const char *)) {
        redisReply *r = testkit_redis_cmd(testkit_redis_url(), "DEL %s", k);

        if (r != NULL)
            freeReplyObject(r);
    }
    va_end(ap);
}

typedef struct probe {
    const char *key;
    const char *field;
    long long min;
} probe;

static int subscribed(void *arg)
{
    return patkit_subscribers(((probe *)arg)->key) >= 1;
}

static int int_reached(void *arg)
{
    probe *p = arg;

    return patkit_int(p->key, p->field) >= p->min;
}

static int gone(void *arg)
{
    return !patkit_exists(((probe *)arg)->key);
}

int patkit_wait_subscribed(const char *channel, int64_t timeout_ms)
{
    probe p = {channel, NULL, 0};

    return testkit_wait_until(subscribed, &p, timeout_ms);
}

int patkit_wait_int_at_least(const char *key, const char *field, long long min,
                             int64_t timeout_ms)
{
    probe p = {key, field, min};

    return testkit_wait_until(int_reached, &p, timeout_ms);
}

int patkit_wait_gone(const char *key, int64_t timeout_ms)
{
    probe p = {key, NULL, 0};

    return testkit_wait_until(gone, &p, timeout_ms);
}

char *patkit_pkey(char buf[TESTKIT_KEY_MAX + 64], const char *kind,
                  const char *name, const char *suffix)
{
    snprintf(buf, TESTKIT_KEY_MAX + 64, "{%s:%s}%s", kind, name, suffix);
    return buf;
}

void patkit_work_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void patkit_case_begin(patkit_case *pc)
{
    memset(pc, 0, sizeof(*pc));
    pc->c = patkit_client();
    pc->other = patkit_client();
}

void patkit_case_end(patkit_case *pc, void (*forget)(const char *name))
{
    if (pc->name[0] != '\0')
        forget(pc->name);
    dlock_client_free(pc->other);
    dlock_client_free(pc->c);
    memset(pc, 0, sizeof(*pc));
}
