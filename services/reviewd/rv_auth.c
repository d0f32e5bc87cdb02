/*
 * rv_auth.c: JWT verification and signing with libjwt.
 *
 * libjwt checks the signature with a constant-time comparison (Debian's
 * 1.10.2+deb12u1 carries the fix for CVE-2024-25189) and refuses alg
 * "none" when a key is given, but it accepts "hs256" in any case and any
 * HMAC size, and it reads the claims with no type checks.  So after
 * jwt_decode we compare the header's alg with "HS256" exactly and read
 * the claims ourselves, from the signed bytes, to check their types.
 */
#include "rv_auth.h"

#include <jansson.h>
#include <jwt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A JWT for this service is a few hundred bytes; anything far beyond
 * that is not ours. */
#define RV_TOKEN_MAX 8192

static const char *const role_names[] = {"author", "reviewer", "admin"};

rv_role rv_auth_role_parse(const char *name)
{
    size_t i;

    for (i = 0; i < sizeof(role_names) / sizeof(role_names[0]); i++) {
        if (strcmp(name, role_names[i]) == 0) {
            return (rv_role)(1 << i);
        }
    }
    return RV_ROLE_NONE;
}

const char *rv_auth_role_name(rv_role role)
{
    switch (role) {
    case RV_ROLE_AUTHOR:
        return "author";
    case RV_ROLE_REVIEWER:
        return "reviewer";
    case RV_ROLE_ADMIN:
        return "admin";
    case RV_ROLE_NONE:
        break;
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
    while (*tok == ' ') {
        tok++;
    }
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

static int check_times(const json_t *claims, int64_t now, char *detail,
                       size_t detaillen)
{
    const json_t *exp = json_object_get(claims, "exp");
    const json_t *nbf = json_object_get(claims, "nbf");
    double t;

    if (exp == NULL || numeric_date(exp, &t) != 0) {
        snprintf(detail, detaillen, "the token has no numeric \"exp\" claim");
        return -1;
    }
    if (t <= (double)now) {
        snprintf(detail, detaillen, "the token has expired");
        return -1;
    }
    if (nbf != NULL && (numeric_date(nbf, &t) != 0 || t > (double)now)) {
        snprintf(detail, detaillen, "the token is not valid yet (\"nbf\")");
        return -1;
    }
    return 0;
}

static int check_identity(const json_t *claims, rv_identity *who,
                          char *detail, size_t detaillen)
{
    const char *sub = json_string_value(json_object_get(claims, "sub"));
    const char *role = json_string_value(json_object_get(claims, "role"));

    if (sub == NULL || sub[0] == '\0' || strlen(sub) > RV_SUB_MAX) {
        snprintf(detail, detaillen, "the \"sub\" claim must be a string of "
                 "1..%d bytes", RV_SUB_MAX);
        return -1;
    }
    who->role = role != NULL ? rv_auth_role_parse(role) : RV_ROLE_NONE;
    if (who->role == RV_ROLE_NONE) {
        snprintf(detail, detaillen, "the \"role\" claim must be author, "
                 "reviewer or admin");
        return -1;
    }
    snprintf(who->sub, sizeof(who->sub), "%s", sub);
    return 0;
}

/* Value of one base64url character, or -1. */
static int b64url_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
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
        if (p == NULL) {
            return NULL;
        }
        p++;
    }
    end = strchr(p, '.');
    len = end != NULL ? (size_t)(end - p) : strlen(p);
    if (len % 4 == 1 || (buf = malloc(len * 3 / 4 + 1)) == NULL) {
        return NULL;
    }
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
            ? json_loadb((const char *)buf, n, 0, NULL) : NULL;
    free(buf);
    if (v != NULL && !json_is_object(v)) {
        json_decref(v);
        return NULL;
    }
    return v;
}

int rv_auth_verify(const char *authorization, const unsigned char *secret,
                   size_t secret_len, int64_t now, rv_identity *who,
                   char *detail, size_t detaillen)
{
    const char *tok = bearer_token(authorization, detail, detaillen);
    jwt_t *jwt = NULL;
    json_t *header = NULL, *claims = NULL;
    const char *alg;
    int rc = -1;

    memset(who, 0, sizeof(*who));
    if (tok == NULL) {
        return -1;
    }
    if (jwt_decode(&jwt, tok, secret, (int)secret_len) != 0 || jwt == NULL) {
        snprintf(detail, detaillen, "invalid token (malformed or bad "
                 "signature)");
        return -1;
    }
    header = part_json(tok, 0);
    claims = part_json(tok, 1);
    if (header == NULL || claims == NULL) {
        snprintf(detail, detaillen, "the token's header and claims must "
                 "each be one JSON object");
        goto done;
    }
    alg = json_string_value(json_object_get(header, "alg"));
    if (alg == NULL || strcmp(alg, "HS256") != 0
        || jwt_get_alg(jwt) != JWT_ALG_HS256) {
        snprintf(detail, detaillen, "the token must be signed with HS256");
        goto done;
    }
    if (check_times(claims, now, detail, detaillen) == 0
        && check_identity(claims, who, detail, detaillen) == 0) {
        rc = 0;
    }
done:
    json_decref(header);
    json_decref(claims);
    jwt_free(jwt);
    return rc;
}

char *rv_auth_issue(const unsigned char *secret, size_t secret_len,
                    const char *sub, const char *role, int64_t now,
                    int64_t ttl_s)
{
    jwt_t *jwt = NULL;
    char *token = NULL;

    if (jwt_new(&jwt) != 0) {
        return NULL;
    }
    if (jwt_add_grant(jwt, "sub", sub) == 0
        && jwt_add_grant(jwt, "role", role) == 0
        && jwt_add_grant_int(jwt, "iat", (long)now) == 0
        && jwt_add_grant_int(jwt, "exp", (long)(now + ttl_s)) == 0
        && jwt_set_alg(jwt, JWT_ALG_HS256, secret, (int)secret_len) == 0) {
        token = jwt_encode_str(jwt);
    }
    jwt_free(jwt);
    return token;
}
