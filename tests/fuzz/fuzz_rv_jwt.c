/*
 * fuzz_rv_jwt.c: fuzz target for reviewd's bearer-token check,
 * rv_auth_verify (rv_auth.c, libjwt underneath).
 *
 * The input is: a control byte, then a JOSE header, '\n', and the claims
 * (the raw bytes the token's two first parts encode).  The target builds
 * the token itself, base64url-encoding both parts and signing them with
 * OpenSSL's HMAC (not libjwt, which is what is being checked), so the
 * fuzzer controls every byte a forger controls.  Control bits:
 *   0-1  the algorithm: HMAC-SHA256, -SHA384, -SHA512, or no signature;
 *   2    sign with a wrong secret;
 *   3    an empty header line means {"alg":"HS256","typ":"JWT"} (else
 *        {"alg":"none"});
 *   4    the header value has the scheme "bearer" in lower case.
 * The whole input is also sent, as it is, as an Authorization value.
 *
 * Properties (the rules of rv_auth.h), with now fixed:
 *   - soundness: a token verifies only if it was signed with HMAC-SHA256
 *     and the right secret, its header is a JSON object whose "alg" is
 *     exactly "HS256", and its claims, read here with jansson, have a
 *     numeric exp with now < exp + LEEWAY and exp - LEEWAY <= now +
 *     MAX_LIFETIME, no nbf or a numeric one with nbf - LEEWAY <= now, a
 *     sub of 1..255 bytes and a known role; and then who is that sub and
 *     role;
 *   - completeness: a canonical HS256 header, the right secret and such
 *     claims must verify;
 *   - the raw input never verifies (the secret is random per process);
 *   - a refusal always says why (detail) and leaves who empty;
 *   - checking the same token again (a hit in rv_auth.c's cache of
 *     verified tokens) gives the same answer and identity;
 *   - rv_auth_issue's own tokens verify for their lifetime (and the
 *     leeway) and not after.
 */
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "fuzz_target.h"
#include "api/rv_auth.h"

#define TARGET "rv_jwt"
#define INPUT_MAX 4096
#define NOW ((int64_t)1700000000)
#define LEEWAY 30
#define MAX_LIFETIME 86400

static unsigned char secret[32];
static const unsigned char wrong[] = "not-the-secret-of-this-service!!";

/* base64url without padding of p[0..n) into out (4n/3+4 bytes). */
static size_t b64url(const unsigned char *p, size_t n, char *out)
{
    static const char a[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
        "0123456789-_";
    size_t o = 0;

    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)p[i] << 16
                           | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0)
                           | (i + 2 < n ? p[i + 2] : 0);

        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
        if (i + 1 < n)
            out[o++] = a[v >> 6 & 63];
        if (i + 2 < n)
            out[o++] = a[v & 63];
    }
    out[o] = '\0';
    return o;
}

/* Appends base64url(p[0..n)) and sep to *tok at *len (capacity known). */
static void append_part(char *tok, size_t *len, const void *p, size_t n,
                        const char *sep)
{
    *len += b64url(p, n, tok + *len);
    *len += (size_t)sprintf(tok + *len, "%s", sep);
}

/* "Bearer header.claims.signature" as the control byte says. */
static char *build_token(uint8_t control, const char *head, size_t head_n,
                         const char *claims, size_t claims_n)
{
    static const char *const heads[] = {"{\"alg\":\"none\"}",
                                        "{\"alg\":\"HS256\",\"typ\":\"JWT\"}"};
    const EVP_MD *mds[] = {EVP_sha256(), EVP_sha384(), EVP_sha512(), NULL};
    const EVP_MD *md = mds[control & 3];
    const int use_wrong = control >> 2 & 1;
    unsigned char sig[EVP_MAX_MD_SIZE];
    unsigned int sig_n = 0;
    char *tok;
    size_t len;

    if (head_n == 0) {
        head = heads[control >> 3 & 1];
        head_n = strlen(head);
    }
    tok = malloc(16 + 2 * (head_n + claims_n + EVP_MAX_MD_SIZE));
    if (tok == NULL)
        abort();
    len = (size_t)sprintf(tok, "%s ", control >> 4 & 1 ? "bearer" : "Bearer");
    append_part(tok, &len, head, head_n, ".");
    append_part(tok, &len, claims, claims_n, ".");
    if (md != NULL
        && HMAC(md, use_wrong ? wrong : secret,
                use_wrong ? (int)sizeof(wrong) - 1 : (int)sizeof(secret),
                (const unsigned char *)tok + 7, len - 8, sig, &sig_n)
               == NULL)
        fuzz_fail(TARGET, "HMAC failed");
    append_part(tok, &len, sig, sig_n, "");
    return tok;
}

static int numeric(const json_t *v, double *out)
{
    if (json_is_integer(v))
        *out = (double)json_integer_value(v);
    else if (json_is_real(v))
        *out = json_real_value(v);
    else
        return 0;
    return 1;
}

/* The claims rules of rv_auth.h, read from the raw claims. */
static int claims_acceptable(const char *claims, size_t n, rv_identity *who)
{
    json_t *c = json_loadb(claims, n, 0, NULL);
    const json_t *nbf = json_object_get(c, "nbf");
    const char *sub = json_string_value(json_object_get(c, "sub"));
    const char *role = json_string_value(json_object_get(c, "role"));
    double exp_t = 0, nbf_t = 0;
    int ok = json_is_object(c) && numeric(json_object_get(c, "exp"), &exp_t)
             && exp_t + LEEWAY > (double)NOW
             && exp_t - LEEWAY <= (double)NOW + MAX_LIFETIME
             && (nbf == NULL
                 || (numeric(nbf, &nbf_t) && nbf_t - LEEWAY <= (double)NOW))
             && sub != NULL && sub[0] != '\0' && strlen(sub) <= RV_SUB_MAX
             && role != NULL && rv_auth_role_parse(role) != RV_ROLE_NONE;

    memset(who, 0, sizeof(*who));
    if (ok) {
        snprintf(who->sub, sizeof(who->sub), "%s", sub);
        who->role = rv_auth_role_parse(role);
    }
    json_decref(c);
    return ok;
}

/* 1 if the header bytes are a JSON object with "alg": "HS256". */
static int header_is_hs256(const char *head, size_t n)
{
    json_t *h = json_loadb(head, n, 0, NULL);
    const char *alg = json_string_value(json_object_get(h, "alg"));
    const int ok = alg != NULL && strcmp(alg, "HS256") == 0;

    json_decref(h);
    return ok;
}

static int verify(const char *authorization, int64_t now, rv_identity *who)
{
    const rv_auth_policy policy = {secret, sizeof(secret), LEEWAY,
                                   MAX_LIFETIME};
    char detail[160] = "";
    const int rc = rv_auth_verify(authorization, &policy, now, who, detail,
                                  sizeof(detail));

    if (rc != 0
        && (detail[0] == '\0' || who->sub[0] != '\0'
            || who->role != RV_ROLE_NONE))
        fuzz_fail(TARGET, "refusal without detail or with an identity");
    return rc == 0;
}

static void check_built(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data + 1;
    const size_t n = size - 1;
    const char *nl = memchr(in, '\n', n);
    const size_t head_n = nl != NULL ? (size_t)(nl - in) : 0;
    const char *claims = nl != NULL ? nl + 1 : in;
    const size_t claims_n = n - (size_t)(claims - in);
    const uint8_t control = data[0];
    char *tok = build_token(control, in, head_n, claims, claims_n);
    const char *head = head_n > 0 ? in : NULL;
    rv_identity who, want, again;
    const int signed_right = (control & 3) == 0 && !(control >> 2 & 1);
    const int good_head = head == NULL ? (control >> 3 & 1)
                                       : header_is_hs256(in, head_n);
    const int good_claims = claims_acceptable(claims, claims_n, &want);
    const int ok = verify(tok, NOW, &who);

    /* The second check may come from rv_auth.c's cache of verified
     * tokens, and must answer the same. */
    if (verify(tok, NOW, &again) != ok || strcmp(again.sub, who.sub) != 0
        || again.role != who.role)
        fuzz_fail(TARGET,
                  "a second check of the same token answered "
                  "otherwise: %s",
                  tok);
    if (ok && !(signed_right && good_head && good_claims))
        fuzz_fail(TARGET,
                  "accepted: signed right %d, HS256 header %d, "
                  "claims %d: %s",
                  signed_right, good_head, good_claims, tok);
    if (ok && (strcmp(who.sub, want.sub) != 0 || who.role != want.role))
        fuzz_fail(TARGET, "accepted as %s/%d, claims say %s/%d", who.sub,
                  (int)who.role, want.sub, (int)want.role);
    if (!ok && head == NULL && signed_right && good_head && good_claims
        && memchr(claims, '\0', claims_n) == NULL && strlen(tok) <= 8192)
        fuzz_fail(TARGET, "refused a good token: %s", tok);
    free(tok);
}

/* Tokens of rv_auth_issue for a sub and role taken from the input. */
static void check_issued(const uint8_t *data, size_t size)
{
    char sub[64];
    const char *roles[] = {"author", "reviewer", "admin", "root"};
    const char *role = roles[data[0] >> 5 & 3];
    rv_identity who;
    char *tok, *header;
    json_t *js;
    int ok_now, ok_later;

    snprintf(sub, sizeof(sub), "%.*s", (int)(size - 1 < 40 ? size - 1 : 40),
             (const char *)data + 1);
    js = json_string(sub);
    json_decref(js);
    if (js == NULL || sub[0] == '\0')
        return; /* libjwt stores claims as JSON strings: UTF-8 only */
    tok = rv_auth_issue(secret, sizeof(secret), sub, role, NOW, 60);
    if (tok == NULL)
        fuzz_fail(TARGET, "rv_auth_issue failed for sub \"%s\"", sub);
    header = malloc(strlen(tok) + 8);
    if (header == NULL)
        abort();
    sprintf(header, "Bearer %s", tok);
    ok_now = verify(header, NOW + 59 + LEEWAY, &who);
    ok_later = verify(header, NOW + 60 + LEEWAY, &who);
    if (ok_now != (rv_auth_role_parse(role) != RV_ROLE_NONE) || ok_later)
        fuzz_fail(TARGET, "issued token for %s: now %d, at exp %d", role,
                  ok_now, ok_later);
    free(header);
    free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    rv_identity who;
    char *raw;

    if (size < 1 || size > INPUT_MAX)
        return 0;
    if (!ready) {
        if (getrandom(secret, sizeof(secret), 0) != (ssize_t)sizeof(secret))
            fuzz_fail(TARGET, "getrandom failed");
        ready = 1;
    }
    raw = strndup((const char *)data, size);
    if (raw == NULL)
        abort();
    if (verify(raw, NOW, &who))
        fuzz_fail(TARGET, "the raw input verified: %s", raw);
    free(raw);
    check_built(data, size);
    check_issued(data, size);
    return 0;
}
