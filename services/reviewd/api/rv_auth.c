/*
 * rv_auth.c: JWT verification and signing with libjwt.
 *
 * libjwt checks the signature with a constant-time comparison (Debian's
 * 1.10.2+deb12u1 carries the fix for CVE-2024-25189) and refuses alg
 * "none" when a key is given, but it accepts "hs256" in any case and any
 * HMAC size, and it reads the claims with no type checks.  So after
 * jwt_decode we compare the header's alg with "HS256" exactly and read
 * the claims ourselves, from the signed bytes, to check their types.
 *
 * That full check costs about a tenth of a GET's CPU (two JSON parses in
 * libjwt, two more here, and an HMAC whose key OpenSSL sets up again on
 * every call), while a client sends the same token with every request
 * for hours.  So each thread keeps the last tokens that passed it, in a
 * small cache of its own (no lock on the request path):
 *   - an entry is made only after every check passed, so a refused token
 *     always pays the full check, and a forger gains nothing from it;
 *   - a hit needs the same secret and the very same token bytes, and both
 *     are compared in constant time, so a guesser cannot learn a cached
 *     token from how long a refusal took;
 *   - what depends on the time (exp, nbf) is checked again against now
 *     on every hit, with the same rules and messages as the full check;
 *     what does not (signature, header, claim types, sub and role) is a
 *     function of the bytes alone, which is why a hit may skip it.
 * So a hit answers exactly what the full check would.  The entries of a
 * thread are freed when it exits (a pthread key, created once).
 */
#include "api/rv_auth.h"

#include <jansson.h>
#include <jwt.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A JWT for this service is a few hundred bytes; anything far beyond
 * that is not ours. */
#define RV_TOKEN_MAX 8192

/* Tokens a thread remembers, and the longest one it keeps (longer ones
 * are verified in full every time). */
#define RV_CACHE_SLOTS 16
#define RV_CACHE_TOKEN_MAX 1024

typedef struct cached_token {
    size_t len; /* 0: the slot is empty */
    char token[RV_CACHE_TOKEN_MAX];
    double exp;
    double nbf; /* -INFINITY when the token has none */
    rv_identity who;
} cached_token;

/* One thread's cache, bound to the secret its entries were checked with. */
typedef struct token_cache {
    unsigned char *secret;
    size_t secret_len;
    cached_token slot[RV_CACHE_SLOTS];
} token_cache;

static pthread_key_t cache_key;
static int cache_key_ok;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static const char *const role_names[] = {"author", "reviewer", "admin"};

rv_role rv_auth_role_parse(const char *name)
{
    size_t i;

    for (i = 0; i < sizeof(role_names) / sizeof(role_names[0]); i++)
        if (strcmp(name, role_names[i]) == 0)
            return (rv_role)(1 << i);
    return RV_ROLE_NONE;
}

const char *rv_auth_role_name(rv_role role)
{
    switch (role) {
    case RV_ROLE_AUTHOR: return "author";
    case RV_ROLE_REVIEWER: return "reviewer";
    case RV_ROLE_ADMIN: return "admin";
    case RV_ROLE_NONE: break;
    }
    return "none";
}

/* Finds the token in "Bearer <token>"; NULL if the header has another
 * form.  Token characters are base64url and the two dots. */
static const char *bearer_token(const char *header, char *detail,
                                size_t detaillen)
{
    const char *tok;
    size_t len;

    if (header == NULL) {
        snprintf(detail, detaillen, "missing Authorization header");
        return NULL;
    }
    if (strncasecmp(header, "Bearer ", 7) != 0) {
        snprintf(detail, detaillen, "Authorization must be \"Bearer <JWT>\"");
        return NULL;
    }
    tok = header + 7;
    while (*tok == ' ')
        tok++;
    len = strspn(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                      "0123456789-_.");
    if (len == 0 || tok[len] != '\0' || len > RV_TOKEN_MAX) {
        snprintf(detail, detaillen, "malformed bearer token");
        return NULL;
    }
    return tok;
}

/* A NumericDate claim: an integer or a real number of seconds. */
static int numeric_date(const json_t *v, double *out)
{
    if (json_is_integer(v)) {
        *out = (double)json_integer_value(v);
        return 0;
    }
    if (json_is_real(v)) {
        *out = json_real_value(v);
        return 0;
    }
    return -1;
}

/* The rules on the times (rv_auth.h), once exp and nbf (-INFINITY: none)
 * are read.  In doubles: a NumericDate may be real, and 1e300 must compare
 * as the huge number it is, not wrap. */
static int times_valid(const rv_auth_policy *p, double exp, double nbf,
                       int64_t now, char *detail, size_t detaillen)
{
    const double leeway = (double)p->leeway_s;

    if (exp + leeway <= (double)now) {
        snprintf(detail, detaillen, "the token has expired");
        return -1;
    }
    if (nbf - leeway > (double)now) {
        snprintf(detail, detaillen, "the token is not valid yet (\"nbf\")");
        return -1;
    }
    if (exp - leeway > (double)now + (double)p->max_lifetime_s) {
        snprintf(detail, detaillen,
                 "the token's \"exp\" is more than %lld s "
                 "ahead (the longest lifetime accepted)",
                 (long long)p->max_lifetime_s);
        return -1;
    }
    return 0;
}

/* Reads exp and nbf (their types checked) and applies times_valid. */
static int check_times(const rv_auth_policy *p, const json_t *claims,
                       int64_t now, double *exp_out, double *nbf_out,
                       char *detail, size_t detaillen)
{
    const json_t *exp = json_object_get(claims, "exp");
    const json_t *nbf = json_object_get(claims, "nbf");

    *nbf_out = -INFINITY;
    if (exp == NULL || numeric_date(exp, exp_out) != 0) {
        snprintf(detail, detaillen, "the token has no numeric \"exp\" claim");
        return -1;
    }
    if (nbf != NULL && numeric_date(nbf, nbf_out) != 0) {
        /* Not a date: refused like a future one, after the expiry. */
        *nbf_out = INFINITY;
    }
    return times_valid(p, *exp_out, *nbf_out, now, detail, detaillen);
}

static int check_identity(const json_t *claims, rv_identity *who, char *detail,
                          size_t detaillen)
{
    const char *sub = json_string_value(json_object_get(claims, "sub"));
    const char *role = json_string_value(json_object_get(claims, "role"));

    if (sub == NULL || sub[0] == '\0' || strlen(sub) > RV_SUB_MAX) {
        snprintf(detail, detaillen,
                 "the \"sub\" claim must be a string of "
                 "1..%d bytes",
                 RV_SUB_MAX);
        return -1;
    }
    who->role = role != NULL ? rv_auth_role_parse(role) : RV_ROLE_NONE;
    if (who->role == RV_ROLE_NONE) {
        snprintf(detail, detaillen,
                 "the \"role\" claim must be author, "
                 "reviewer or admin");
        return -1;
    }
    snprintf(who->sub, sizeof(who->sub), "%s", sub);
    return 0;
}

/* Value of one base64url character, or -1. */
static int b64url_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '-' ? 62 : c == '_' ? 63 : -1;
}

/*
 * Parses part `index` (0 header, 1 claims) of the compact token as one
 * JSON object, from exactly the bytes that were signed.  libjwt decodes
 * the parts as C strings, so bytes after a NUL would be ignored by it;
 * we read the part ourselves, strictly (no padding, no stray characters,
 * nothing after the object), so the claims checked are the claims signed.
 * Returns a new reference or NULL.
 */
static json_t *part_json(const char *tok, int index)
{
    const char *p = tok;
    const char *end;
    unsigned char *buf;
    size_t n = 0, len;
    uint32_t acc = 0;
    int bits = 0;
    json_t *v;

    for (int i = 0; i < index; i++) {
        p = strchr(p, '.');
        if (p == NULL)
            return NULL;
        p++;
    }
    end = strchr(p, '.');
    len = end != NULL ? (size_t)(end - p) : strlen(p);
    if (len % 4 == 1 || (buf = malloc(len * 3 / 4 + 1)) == NULL)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        const int v6 = b64url_value((unsigned char)p[i]);

        if (v6 < 0) {
            free(buf);
            return NULL;
        }
        acc = acc << 6 | (uint32_t)v6;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[n++] = (unsigned char)(acc >> bits & 0xff);
        }
    }
    v = memchr(buf, '\0', n) == NULL
            ? json_loadb((const char *)buf, n, 0, NULL)
            : NULL;
    free(buf);
    if (v != NULL && !json_is_object(v)) {
        json_decref(v);
        return NULL;
    }
    return v;
}

/* ---- the per-thread cache of verified tokens ----------------------------- */

static void cache_destroy(void *p)
{
    token_cache *c = p;

    if (c != NULL) {
        free(c->secret);
        free(c);
    }
}

/* pthread_once: the key lives as long as the process, like the threads
 * whose caches hang off it. */
static void cache_key_create(void)
{
    cache_key_ok = pthread_key_create(&cache_key, cache_destroy) == 0;
}

/* 1 if a[0..n) equals b[0..n), in a time that depends only on n. */
static int same_bytes(const void *a, const void *b, size_t n)
{
    const volatile unsigned char *x = a;
    const volatile unsigned char *y = b;
    unsigned char diff = 0;

    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(x[i] ^ y[i]);
    return diff == 0;
}

/* FNV-1a: spreads tokens over the slots (not a security boundary: only
 * verified tokens are stored, and a hit compares every byte). */
static size_t slot_of(const char *tok, size_t len)
{
    uint64_t h = 14695981039346656037ULL;

    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)tok[i]) * 1099511628211ULL;
    return (size_t)(h % RV_CACHE_SLOTS);
}

/* This thread's cache, emptied and bound to secret if it was bound to
 * another one; NULL when there is none (no memory, no key). */
static token_cache *thread_cache(const unsigned char *secret,
                                 size_t secret_len)
{
    token_cache *c;

    pthread_once(&cache_once, cache_key_create);
    if (!cache_key_ok)
        return NULL;
    c = pthread_getspecific(cache_key);
    if (c != NULL && c->secret_len == secret_len
        && same_bytes(c->secret, secret, secret_len))
        return c;
    if (c == NULL) {
        c = calloc(1, sizeof(*c));
        if (c == NULL || pthread_setspecific(cache_key, c) != 0) {
            free(c);
            return NULL;
        }
    }
    free(c->secret);
    memset(c, 0, sizeof(*c));
    c->secret = malloc(secret_len > 0 ? secret_len : 1);
    if (c->secret == NULL)
        return NULL; /* stays unbound (secret NULL, length 0) */
    memcpy(c->secret, secret, secret_len);
    c->secret_len = secret_len;
    return c;
}

/* The entry for tok, or NULL. */
static const cached_token *cache_find(const token_cache *c, const char *tok,
                                      size_t len)
{
    const cached_token *e;

    if (c == NULL || len > RV_CACHE_TOKEN_MAX)
        return NULL;
    e = &c->slot[slot_of(tok, len)];
    return e->len == len && same_bytes(e->token, tok, len) ? e : NULL;
}

/* Remembers a token that passed every check. */
static void cache_store(token_cache *c, const char *tok, size_t len,
                        double exp, double nbf, const rv_identity *who)
{
    cached_token *e;

    if (c == NULL || len > RV_CACHE_TOKEN_MAX)
        return;
    e = &c->slot[slot_of(tok, len)];
    memcpy(e->token, tok, len);
    e->len = len;
    e->exp = exp;
    e->nbf = nbf;
    e->who = *who;
}

/* ---- verification ---------------------------------------------------------- */

/* The full check of a bearer token; on success also its exp and nbf. */
static int verify_token(const char *tok, const rv_auth_policy *p, int64_t now,
                        rv_identity *who, double *exp, double *nbf,
                        char *detail, size_t detaillen)
{
    jwt_t *jwt = NULL;
    json_t *header = NULL, *claims = NULL;
    const char *alg;
    int rc = -1;

    if (jwt_decode(&jwt, tok, p->secret, (int)p->secret_len) != 0
        || jwt == NULL) {
        snprintf(detail, detaillen,
                 "invalid token (malformed or bad "
                 "signature)");
        return -1;
    }
    header = part_json(tok, 0);
    claims = part_json(tok, 1);
    if (header == NULL || claims == NULL) {
        snprintf(detail, detaillen,
                 "the token's header and claims must "
                 "each be one JSON object");
        goto done;
    }
    alg = json_string_value(json_object_get(header, "alg"));
    if (alg == NULL || strcmp(alg, "HS256") != 0
        || jwt_get_alg(jwt) != JWT_ALG_HS256) {
        snprintf(detail, detaillen, "the token must be signed with HS256");
        goto done;
    }
    if (check_times(p, claims, now, exp, nbf, detail, detaillen) == 0
        && check_identity(claims, who, detail, detaillen) == 0)
        rc = 0;
done:
    json_decref(header);
    json_decref(claims);
    jwt_free(jwt);
    return rc;
}

int rv_auth_verify(const char *authorization, const rv_auth_policy *policy,
                   int64_t now, rv_identity *who, char *detail,
                   size_t detaillen)
{
    const char *tok = bearer_token(authorization, detail, detaillen);
    token_cache *cache;
    const cached_token *hit;
    double exp = 0, nbf = 0; /* set by verify_token on success */
    size_t len;

    memset(who, 0, sizeof(*who));
    if (tok == NULL)
        return -1;
    len = strlen(tok);
    cache = thread_cache(policy->secret, policy->secret_len);
    hit = cache_find(cache, tok, len);
    if (hit != NULL) {
        if (times_valid(policy, hit->exp, hit->nbf, now, detail, detaillen)
            != 0)
            return -1;
        *who = hit->who;
        return 0;
    }
    if (verify_token(tok, policy, now, who, &exp, &nbf, detail, detaillen)
        != 0) {
        memset(who, 0, sizeof(*who));
        return -1;
    }
    cache_store(cache, tok, len, exp, nbf, who);
    return 0;
}

char *rv_auth_issue(const unsigned char *secret, size_t secret_len,
                    const char *sub, const char *role, int64_t now,
                    int64_t ttl_s)
{
    jwt_t *jwt = NULL;
    char *token = NULL;

    if (jwt_new(&jwt) != 0)
        return NULL;
    if (jwt_add_grant(jwt, "sub", sub) == 0
        && jwt_add_grant(jwt, "role", role) == 0
        && jwt_add_grant_int(jwt, "iat", (long)now) == 0
        && jwt_add_grant_int(jwt, "exp", (long)(now + ttl_s)) == 0
        && jwt_set_alg(jwt, JWT_ALG_HS256, secret, (int)secret_len) == 0)
        token = jwt_encode_str(jwt);
    jwt_free(jwt);
    return token;
}
