/*
 * rv_auth.h: bearer tokens (JWT, HS256) and roles.
 *
 * A request proves who it is with "Authorization: Bearer <JWT>" signed
 * with JWT_SECRET.  Verification accepts exactly alg "HS256" (never
 * "none", never another algorithm chosen by the token), requires "sub" a
 * non-empty string of at most 255 bytes and "role" one of author,
 * reviewer, admin, and checks the times against the policy's clock-skew
 * allowance (leeway) L and maximum lifetime M:
 *   - "exp" is required: refused from exp + L on;
 *   - "nbf", when present: refused before nbf - L;
 *   - "exp" more than M + L seconds ahead is refused too, so a token made
 *     to last for ever ("exp": 1e300) is not a key that never expires.
 * Anything else is a 401 whose detail says which rule failed, without
 * echoing the token.
 *
 * Ownership: rv_auth_issue returns a malloc'd token.  The secret is
 * borrowed for the call.  Threads: reentrant.
 */
#ifndef RV_AUTH_H
#define RV_AUTH_H

#include <stddef.h>
#include <stdint.h>

/* Roles as bits, so an endpoint can name the set it allows. */
typedef enum rv_role {
    RV_ROLE_NONE = 0,
    RV_ROLE_AUTHOR = 1,
    RV_ROLE_REVIEWER = 2,
    RV_ROLE_ADMIN = 4
} rv_role;

#define RV_SUB_MAX 255

typedef struct rv_identity {
    char sub[RV_SUB_MAX + 1];
    rv_role role;
} rv_identity;

/* What a token is checked against: the key, and the rules on its times
 * (REVIEWD_JWT_LEEWAY_S, REVIEWD_JWT_MAX_LIFETIME_S). */
typedef struct rv_auth_policy {
    const unsigned char *secret; /* borrowed */
    size_t secret_len;
    int64_t leeway_s;       /* clock skew allowed on exp and nbf */
    int64_t max_lifetime_s; /* how far ahead exp may be */
} rv_auth_policy;

/*
 * Verifies the value of an Authorization header (NULL when absent)
 * against policy.  now: the current Unix time, injectable for tests.
 * Returns 0 and fills who, or -1 with the reason in detail.
 */
int rv_auth_verify(const char *authorization, const rv_auth_policy *policy,
                   int64_t now, rv_identity *who, char *detail,
                   size_t detaillen);

/*
 * Signs a token for sub and role valid for ttl_s seconds from now (a
 * negative ttl makes an expired token, for tests).  Returns the token, or
 * NULL on failure.
 */
char *rv_auth_issue(const unsigned char *secret, size_t secret_len,
                    const char *sub, const char *role, int64_t now,
                    int64_t ttl_s);

/* Parses "author", "reviewer" or "admin"; RV_ROLE_NONE otherwise. */
rv_role rv_auth_role_parse(const char *name);

/* The name of one role. */
const char *rv_auth_role_name(rv_role role);

#endif /* RV_AUTH_H */
