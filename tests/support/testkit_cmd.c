/*
 * testkit_cmd.c: a blocking Redis client for the tests' own commands.
 *
 * Tests act behind the library's back (DEL a held key, read its PTTL,
 * SCRIPT FLUSH) with a separate connection, so that what they observe is
 * the server's state and not the library's view of it.  hiredis's blocking
 * API is the simplest way to do that; the library itself does not use it.
 * Each call opens and closes its own connection: slower, but free of shared
 * state, so any thread may call it.
 *
 * The URL forms are the ones the tests use: redis://[user:pass@]host:port
 * [/db] and unix:///path[?db=N].  They come from the environment or from
 * testkit_redis, so the parser is strict and small, not the library's.
 */
#include "testkit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

typedef struct target {
    char host[256];
    int port;
    char path[600];
    char user[128];
    char pass[128];
    int db;
} target;

/* Copies s[0..len) into dst (capacity cap); 0 if it does not fit. */
static int copy_part(char *dst, size_t cap, const char *s, size_t len)
{
    if (len >= cap)
        return 0;
    memcpy(dst, s, len);
    dst[len] = '\0';
    return 1;
}

/* Cuts "user:pass@" off *rest, if present. */
static int parse_userinfo(const char **rest, target *t)
{
    const char *s = *rest;
    const char *at = strchr(s, '@');
    const char *colon;
    int ok;

    if (at == NULL)
        return 1;
    /* "pass@" alone is a password, as redis-cli reads it. */
    colon = memchr(s, ':', (size_t)(at - s));
    if (colon == NULL)
        ok = copy_part(t->pass, sizeof(t->pass), s, (size_t)(at - s));
    else
        ok = copy_part(t->user, sizeof(t->user), s, (size_t)(colon - s))
             && copy_part(t->pass, sizeof(t->pass), colon + 1,
                          (size_t)(at - colon - 1));
    *rest = at + 1;
    return ok;
}

static int parse_tcp(const char *rest, target *t)
{
    const char *colon = strchr(rest, ':');
    const char *slash = strchr(rest, '/');
    size_t hlen;

    t->port = 6379;
    hlen = colon ? (size_t)(colon - rest)
                 : (slash ? (size_t)(slash - rest) : strlen(rest));
    if (!copy_part(t->host, sizeof(t->host), rest, hlen) || hlen == 0)
        return 0;
    if (colon != NULL)
        t->port = atoi(colon + 1);
    if (slash != NULL && slash[1] != '\0')
        t->db = atoi(slash + 1);
    return t->port > 0 && t->port < 65536;
}

static int parse_unix(const char *rest, target *t)
{
    const char *query = strchr(rest, '?');
    size_t plen = query ? (size_t)(query - rest) : strlen(rest);

    if (!copy_part(t->path, sizeof(t->path), rest, plen) || rest[0] != '/')
        return 0;
    if (query != NULL && strncmp(query, "?db=", 4) == 0)
        t->db = atoi(query + 4);
    return 1;
}

static int parse_target(const char *url, target *t)
{
    const char *rest;

    memset(t, 0, sizeof(*t));
    if (strncmp(url, "redis://", 8) == 0) {
        rest = url + 8;
        return parse_userinfo(&rest, t) && parse_tcp(rest, t);
    }
    if (strncmp(url, "unix://", 7) == 0) {
        rest = url + 7;
        return parse_userinfo(&rest, t) && parse_unix(rest, t);
    }
    return 0;
}

/* Runs a command on c and reports an error reply on stderr; 0 if the
 * server did not answer or refused. */
static int setup_command(redisContext *c, const char *what, int argc,
                         const char **argv)
{
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    int ok = r != NULL && r->type != REDIS_REPLY_ERROR;

    if (r != NULL && r->type == REDIS_REPLY_ERROR)
        fprintf(stderr, "testkit: %s refused: %s\n", what, r->str);
    if (r != NULL)
        freeReplyObject(r);
    return ok;
}

/* Connects, authenticates and selects the database; NULL on failure. */
static redisContext *connect_target(const char *url, int timeout_ms, int quiet)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    target t;
    redisContext *c;
    char db[16];

    if (!parse_target(url, &t)) {
        fprintf(stderr, "testkit: cannot parse Redis URL %s\n", url);
        return NULL;
    }
    c = t.path[0] ? redisConnectUnixWithTimeout(t.path, tv)
                  : redisConnectWithTimeout(t.host, t.port, tv);
    if (c == NULL || c->err) {
        if (!quiet)
            fprintf(stderr, "testkit: connect to %s: %s\n", url,
                    c ? c->errstr : "out of memory");
        redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    if (t.pass[0]) {
        const char *auth2[] = {"AUTH", t.pass};
        const char *auth3[] = {"AUTH", t.user, t.pass};

        if (!(t.user[0] ? setup_command(c, "AUTH", 3, auth3)
                        : setup_command(c, "AUTH", 2, auth2)))
            goto fail;
    }
    snprintf(db, sizeof(db), "%d", t.db);
    if (t.db != 0) {
        const char *select[] = {"SELECT", db};

        if (!setup_command(c, "SELECT", 2, select))
            goto fail;
    }
    return c;
fail:
    redisFree(c);
    return NULL;
}

static redisReply *vcommand(const char *url, int quiet, int timeout_ms,
                            const char *fmt, va_list ap)
{
    redisContext *c = connect_target(url, timeout_ms, quiet);
    redisReply *r;

    if (c == NULL)
        return NULL;
    r = redisvCommand(c, fmt, ap);
    if (r == NULL && !quiet)
        fprintf(stderr, "testkit: command \"%s\" on %s: %s\n", fmt, url,
                c->errstr);
    redisFree(c);
    return r;
}

redisReply *testkit_redis_cmd(const char *url, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;

    va_start(ap, fmt);
    r = vcommand(url, 0, 5000, fmt, ap);
    va_end(ap);
    return r;
}

long long testkit_redis_int(const char *url, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;
    long long value = INT64_MIN;

    va_start(ap, fmt);
    r = vcommand(url, 0, 5000, fmt, ap);
    va_end(ap);
    if (r != NULL && r->type == REDIS_REPLY_INTEGER)
        value = r->integer;
    else if (r != NULL)
        fprintf(stderr,
                "testkit: \"%s\" on %s: not an integer reply "
                "(type %d%s%s)\n",
                fmt, url, r->type, r->type == REDIS_REPLY_ERROR ? ": " : "",
                r->type == REDIS_REPLY_ERROR ? r->str : "");
    if (r != NULL)
        freeReplyObject(r);
    return value;
}

static redisReply *quiet_command(const char *url, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;

    va_start(ap, fmt);
    r = vcommand(url, 1, 1000, fmt, ap);
    va_end(ap);
    return r;
}

int testkit_redis_ping(const char *url)
{
    redisReply *r = quiet_command(url, "PING");
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS
             && strcmp(r->str, "PONG") == 0;

    if (r != NULL)
        freeReplyObject(r);
    return ok;
}

void testkit_forget_lock(const char *url, const char *key)
{
    redisReply *r = testkit_redis_cmd(url,
                                      "DEL %s #dlock:fence:{%s} "
                                      "{%s}:fence",
                                      key, key, key);

    if (r != NULL)
        freeReplyObject(r);
}

redisReply *testkit_reply_of(const char *resp)
{
    redisReader *rd = redisReaderCreate();
    void *reply = NULL, *more = NULL;

    if (rd == NULL) {
        fprintf(stderr, "testkit_reply_of: no memory for a reader\n");
        return NULL;
    }
    if (redisReaderFeed(rd, resp, strlen(resp)) != REDIS_OK
        || redisReaderGetReply(rd, &reply) != REDIS_OK || reply == NULL
        || redisReaderGetReply(rd, &more) != REDIS_OK || more != NULL) {
        fprintf(stderr, "testkit_reply_of: \"%s\" is not one reply\n", resp);
        if (reply != NULL)
            freeReplyObject(reply);
        if (more != NULL)
            freeReplyObject(more);
        reply = NULL;
    }
    redisReaderFree(rd);
    return reply;
}
