/*
 * rv_auth.h: bearer tokens (JWT, HS256) and roles.
 *
 * A request proves who it is with "Authorization: Bearer <JWT>" signed
 * with JWT_SECRET.  Verification accepts exactly alg "HS256" (never
 * "none", never another algorithm chosen by the token), requires "exp" in
 * the future, "sub" a non-empty string of at most 255 bytes, and "role"
 * one of author, reviewer, admin; "nbf", when present, must have passed.
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

/*
 * Verifies the value of an Authorization header (NULL when absent).
 * now: the current Unix time, injectable for tests.  Returns 0 and fills
 * who, or -1 with the reason in detail.
 */
int rv_auth_verify(const char *authorization, const unsigned char *secret,
                   size_t secret_len, int64_t now, rv_identity *who,
                   char *detail, size_t detaillen);

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
