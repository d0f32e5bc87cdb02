/*
 * fuzz_url.c: fuzz target for the Redis URL parser, dlock__url_parse.
 *
 * The URL is the one input a person types, so it is the one most often
 * wrong: every byte string must come back as DLOCK_OK with a well-formed
 * endpoint, or as DLOCK_INVALID (or DLOCK_NOMEM) with a message and nothing
 * left to free.  For each input the target checks, beyond "no crash, no
 * leak, no undefined behaviour" (the sanitizers' part):
 *
 *   1. the result's shape: on success the fields of the transport are set
 *      and the others are NULL, the port is 1..65535, the db is >= 0, the
 *      description is terminated; on failure every pointer is NULL and the
 *      message is a terminated, non-empty string;
 *   2. neither the message nor the description ever shows the password
 *      (url.h promises it): a password of letters and digits is replaced
 *      by a marker found nowhere else in the URL, which must not come out;
 *   3. a round trip: an accepted URL is written back in canonical form
 *      (user and password percent-encoded, IPv6 hosts bracketed, the db
 *      explicit) and parsed again, and both parses must agree field by
 *      field: the parser has one meaning for each URL;
 *   4. allocation failure: an accepted URL is parsed again with its 1st,
 *      2nd, ... allocation failing (dlock__alloc_fail_nth, in the
 *      DLOCK_TESTING library), and each must give DLOCK_NOMEM and an empty
 *      endpoint, without a leak.
 *
 * The same four checks hold for dlock__url_parse_deployment (Sentinel,
 * Cluster and Redlock URLs), node by node: every node is a well-formed TCP
 * or TLS endpoint with the deployment's credentials, no two nodes are the
 * same server, a Sentinel deployment has a master name, and the canonical
 * form (nodes listed, master name or db explicit) parses to the same
 * deployment.  A single-server URL must give the same endpoint from both
 * parsers, and a deployment URL must be refused by dlock__url_parse.
 *
 * Inputs longer than DLOCK__URL_MAX + 16 bytes are skipped: the parser
 * refuses them by length before looking at them, which the seed corpus
 * covers once.  An embedded NUL ends the URL, as it would in a C string.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "fuzz_target.h"
#include "transport/url.h"

#define TARGET "url"
#define INPUT_MAX (DLOCK__URL_MAX + 16)
/* Room for the canonical form: every byte of user and password may take
 * three, plus the scheme, port and db. */
#define CANON_MAX (3 * INPUT_MAX + 64)

static void check_terminated(const char *s, size_t size, const char *what)
{
    if (memchr(s, '\0', size) == NULL)
        fuzz_fail(TARGET, "%s is not NUL-terminated within %zu bytes", what,
                  size);
}

/* Check 1, success side. */
static void check_accepted(const dlock__endpoint *ep, const char *url)
{
    check_terminated(ep->desc, sizeof(ep->desc), "the description");
    if (ep->db < 0)
        fuzz_fail(TARGET, "db %d < 0 for \"%s\"", ep->db, url);
    if (ep->transport == DLOCK__UNIX) {
        if (ep->path == NULL || ep->path[0] != '/' || ep->host != NULL)
            fuzz_fail(TARGET,
                      "unix endpoint without an absolute path (or "
                      "with a host) for \"%s\"",
                      url);
        return;
    }
    if (ep->transport != DLOCK__TCP && ep->transport != DLOCK__TLS)
        fuzz_fail(TARGET, "transport %d for \"%s\"", (int)ep->transport, url);
    if (ep->host == NULL || ep->host[0] == '\0' || ep->path != NULL)
        fuzz_fail(TARGET,
                  "TCP endpoint without a host (or with a path) "
                  "for \"%s\"",
                  url);
    if (strchr(ep->host, '@') != NULL || strchr(ep->host, '%') != NULL)
        fuzz_fail(TARGET, "host \"%s\" keeps an '@' or '%%'", ep->host);
    if (ep->port < 1 || ep->port > 65535)
        fuzz_fail(TARGET, "port %d for \"%s\"", ep->port, url);
}

/* Check 1, failure side. */
static void check_refused(const dlock__endpoint *ep, dlock_err err,
                          const dlock__msg *m, const char *url)
{
    if (err != DLOCK_INVALID && err != DLOCK_NOMEM)
        fuzz_fail(TARGET, "\"%s\" gave %s, not INVALID or NOMEM", url,
                  dlock_errname(err));
    if (ep->host != NULL || ep->path != NULL || ep->user != NULL
        || ep->password != NULL)
        fuzz_fail(TARGET, "a refused URL left fields set: \"%s\"", url);
    check_terminated(m->text, sizeof(m->text), "the message");
    if (m->text[0] == '\0')
        fuzz_fail(TARGET, "\"%s\" was refused without a message", url);
}

static size_t count_occurrences(const char *hay, const char *needle)
{
    size_t n = 0;

    for (const char *p = strstr(hay, needle); p != NULL;
         p = strstr(p + 1, needle))
        n++;
    return n;
}

/* The raw password as the parser would cut it: after the first ':' of the
 * userinfo, which ends at the last '@' before the first '/' or '?'.
 * Returns its offset and length in url, or 0. */
static size_t raw_password(const char *url, size_t *offset)
{
    const char *rest = strstr(url, "://");
    const char *at = NULL, *colon;

    if (rest == NULL)
        return 0;
    rest += 3;
    for (const char *p = rest; *p != '\0' && *p != '/' && *p != '?'; p++)
        if (*p == '@')
            at = p;
    if (at == NULL)
        return 0;
    colon = memchr(rest, ':', (size_t)(at - rest));
    if (colon == NULL)
        return 0;
    *offset = (size_t)(colon + 1 - url);
    return (size_t)(at - colon - 1);
}

static int all_alnum(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
              || (ch >= '0' && ch <= '9')))
            return 0;
    }
    return 1;
}

/* Check 2 for the deployment parser: no node's description and no message
 * shows the marker. */
static void check_deployment_hides_password(const char *variant,
                                            const char *marker)
{
    static dlock__deployment d;
    dlock__msg m = {{0}};

    if (dlock__url_parse_deployment(variant, &d, &m) != DLOCK_OK) {
        if (strstr(m.text, marker) != NULL)
            fuzz_fail(TARGET, "\"%s\" shows the password of \"%s\"", m.text,
                      variant);
        return;
    }
    for (int i = 0; i < d.nnodes; i++) {
        if (strstr(d.nodes[i].desc, marker) != NULL)
            fuzz_fail(TARGET, "node \"%s\" shows the password of \"%s\"",
                      d.nodes[i].desc, variant);
    }
    dlock__deployment_clear(&d);
}

/*
 * Check 2.  When the password is letters and digits (so that which ones
 * cannot change how the URL parses), the URL is parsed again with the
 * password replaced by a marker of the same length found nowhere else in
 * it, and neither the message nor the description may contain the
 * marker.
 */
static void check_message_hides_password(const char *url)
{
    static const char pattern[] = "Qz7pW3kX";
    static char variant[INPUT_MAX + 1];
    char marker[INPUT_MAX + 1];
    size_t offset = 0, len = raw_password(url, &offset);
    dlock__endpoint ep;
    dlock__msg m = {{0}};
    const char *shown;

    if (len < 4 || !all_alnum(url + offset, len))
        return;
    snprintf(variant, sizeof(variant), "%s", url);
    for (size_t i = 0; i < len; i++)
        variant[offset + i] = marker[i] = pattern[i % (sizeof(pattern) - 1)];
    marker[len] = '\0';
    if (count_occurrences(variant, marker) != 1)
        return;
    shown = dlock__url_parse(variant, &ep, &m) == DLOCK_OK ? ep.desc : m.text;
    if (strstr(shown, marker) != NULL)
        fuzz_fail(TARGET, "\"%s\" shows the password of \"%s\"", shown,
                  variant);
    dlock__endpoint_clear(&ep);
    check_deployment_hides_password(variant, marker);
}

/* Appends s percent-encoded (all but unreserved characters). */
static size_t put_encoded(char *out, size_t at, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";

    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
            || (*p >= '0' && *p <= '9') || strchr("-._~", *p) != NULL) {
            out[at++] = (char)*p;
            continue;
        }
        out[at++] = '%';
        out[at++] = hex[*p >> 4];
        out[at++] = hex[*p & 15];
    }
    return at;
}

/* Writes ep back as a URL in canonical form; returns its length. */
static size_t canonical_url(const dlock__endpoint *ep, char *out)
{
    static const char *const schemes[] = {"redis://", "rediss://", "unix://"};
    size_t at = (size_t)sprintf(out, "%s", schemes[ep->transport]);

    if (ep->user != NULL)
        at = put_encoded(out, at, ep->user);
    if (ep->password != NULL) {
        out[at++] = ':';
        at = put_encoded(out, at, ep->password);
    }
    if (ep->user != NULL || ep->password != NULL)
        out[at++] = '@';
    out[at] = '\0';
    if (ep->transport == DLOCK__UNIX)
        return at + (size_t)sprintf(out + at, "%s?db=%d", ep->path, ep->db);
    /* Brackets for an IPv6 host, and for any host that starts with '[',
     * which only the bracket form can carry. */
    if (strchr(ep->host, ':') != NULL || ep->host[0] == '[')
        return at
               + (size_t)sprintf(out + at, "[%s]:%d/%d", ep->host, ep->port,
                                 ep->db);
    return at
           + (size_t)sprintf(out + at, "%s:%d/%d", ep->host, ep->port, ep->db);
}

static int same_string(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return strcmp(a, b) == 0;
}

static int same_endpoint(const dlock__endpoint *a, const dlock__endpoint *b)
{
    return a->transport == b->transport && a->port == b->port && a->db == b->db
           && same_string(a->host, b->host) && same_string(a->path, b->path)
           && same_string(a->user, b->user)
           && same_string(a->password, b->password)
           && strcmp(a->desc, b->desc) == 0;
}

/* Check 3. */
static void check_round_trip(const dlock__endpoint *ep, const char *url)
{
    static char canon[CANON_MAX];
    dlock__endpoint again;
    dlock__msg m = {{0}};
    dlock_err err;

    if (canonical_url(ep, canon) > DLOCK__URL_MAX)
        return; /* the encoded form may be longer than the parser allows */
    err = dlock__url_parse(canon, &again, &m);
    if (err != DLOCK_OK)
        fuzz_fail(TARGET,
                  "\"%s\" was accepted but its canonical form "
                  "\"%s\" is refused: %s",
                  url, canon, m.text);
    if (!same_endpoint(ep, &again))
        fuzz_fail(TARGET,
                  "\"%s\" and its canonical form \"%s\" parse to "
                  "different endpoints (%s vs %s)",
                  url, canon, ep->desc, again.desc);
    dlock__endpoint_clear(&again);
}

/* Check 4. */
static void check_allocation_failures(const char *url)
{
    dlock__endpoint ep;
    dlock__msg m = {{0}};
    long allocations;

    dlock__alloc_fail_nth(0);
    if (dlock__url_parse(url, &ep, &m) != DLOCK_OK)
        fuzz_fail(TARGET, "\"%s\" parsed once and not twice", url);
    dlock__endpoint_clear(&ep);
    allocations = dlock__alloc_count();
    for (long n = 1; n <= allocations; n++) {
        dlock_err err;

        dlock__alloc_fail_nth(n);
        err = dlock__url_parse(url, &ep, &m);
        dlock__alloc_fail_nth(0);
        if (err != DLOCK_NOMEM)
            fuzz_fail(TARGET,
                      "\"%s\" with allocation %ld of %ld failing "
                      "gave %s, not NOMEM",
                      url, n, allocations, dlock_errname(err));
        check_refused(&ep, err, &m, url);
    }
}

/* Check 1 for a deployment, success side. */
static void check_deployment_accepted(const dlock__deployment *d,
                                      const char *url)
{
    if (d->nnodes < 1 || d->nnodes > DLOCK__NODES_MAX)
        fuzz_fail(TARGET, "%d nodes for \"%s\"", d->nnodes, url);
    if ((d->kind == DLOCK__SENTINEL) != (d->master_name != NULL))
        fuzz_fail(TARGET, "kind %d with master name %s for \"%s\"",
                  (int)d->kind, d->master_name ? "set" : "unset", url);
    if (d->kind == DLOCK__REDLOCK && d->nnodes < DLOCK__REDLOCK_MIN)
        fuzz_fail(TARGET, "a Redlock of %d nodes for \"%s\"", d->nnodes, url);
    if (d->kind == DLOCK__SINGLE && d->nnodes != 1)
        fuzz_fail(TARGET, "a single server with %d nodes", d->nnodes);
    for (int i = 0; i < d->nnodes; i++) {
        const dlock__endpoint *a = &d->nodes[i];

        check_accepted(a, url);
        if (d->kind != DLOCK__SINGLE
            && (a->transport == DLOCK__UNIX
                || !same_string(a->user, d->nodes[0].user)
                || !same_string(a->password, d->nodes[0].password)
                || a->transport != d->nodes[0].transport))
            fuzz_fail(TARGET,
                      "node %d of \"%s\" differs from node 0 in "
                      "what the URL shares",
                      i, url);
        for (int j = 0; j < i; j++)
            if (a->port == d->nodes[j].port
                && strcasecmp(a->host, d->nodes[j].host) == 0)
                fuzz_fail(TARGET, "\"%s\" names %s twice", url, a->desc);
    }
    for (int i = d->nnodes; i < DLOCK__NODES_MAX; i++)
        if (d->nodes[i].host != NULL)
            fuzz_fail(TARGET, "node %d beyond nnodes is set", i);
}

static int same_deployment(const dlock__deployment *a,
                           const dlock__deployment *b)
{
    if (a->kind != b->kind || a->nnodes != b->nnodes || a->db != b->db
        || !same_string(a->master_name, b->master_name))
        return 0;
    for (int i = 0; i < a->nnodes; i++)
        if (!same_endpoint(&a->nodes[i], &b->nodes[i]))
            return 0;
    return 1;
}

/* Writes a multi-node deployment back as a URL in canonical form. */
static void canonical_deployment(const dlock__deployment *d, char *out)
{
    static const char *const schemes[][2] = {
        {"", ""},
        {"redis+sentinel://", "rediss+sentinel://"},
        {"redis+cluster://", "rediss+cluster://"},
        {"redlock://", "redlocks://"},
    };
    const dlock__endpoint *n0 = &d->nodes[0];
    size_t at = (size_t)sprintf(out, "%s",
                                schemes[d->kind][n0->transport == DLOCK__TLS]);

    if (n0->user != NULL)
        at = put_encoded(out, at, n0->user);
    if (n0->password != NULL) {
        out[at++] = ':';
        at = put_encoded(out, at, n0->password);
    }
    if (n0->user != NULL || n0->password != NULL)
        out[at++] = '@';
    for (int i = 0; i < d->nnodes; i++) {
        const dlock__endpoint *n = &d->nodes[i];
        const int bracket = strchr(n->host, ':') != NULL || n->host[0] == '[';

        at += (size_t)sprintf(out + at, "%s%s%s%s:%d", i ? "," : "",
                              bracket ? "[" : "", n->host, bracket ? "]" : "",
                              n->port);
    }
    if (d->kind == DLOCK__SENTINEL)
        sprintf(out + at, "/%s?db=%d", d->master_name, d->db);
    else
        sprintf(out + at, "/%d", d->db);
}

/* Checks 1, 3 and 4 for the deployment parser. */
static void check_deployment(const char *url)
{
    static dlock__deployment d, again;
    static char canon[CANON_MAX];
    dlock__endpoint ep;
    dlock__msg m = {{0}};
    dlock_err err = dlock__url_parse_deployment(url, &d, &m);

    if (err != DLOCK_OK) {
        if (err != DLOCK_INVALID && err != DLOCK_NOMEM)
            fuzz_fail(TARGET, "\"%s\" gave %s", url, dlock_errname(err));
        if (d.nnodes != 0 || d.master_name != NULL || d.nodes[0].host
            || m.text[0] == '\0')
            fuzz_fail(TARGET, "refused \"%s\" left state or no message", url);
        return;
    }
    check_deployment_accepted(&d, url);
    if (d.kind != DLOCK__SINGLE) {
        if (dlock__url_parse(url, &ep, &m) != DLOCK_INVALID)
            fuzz_fail(TARGET, "the single-server parser took \"%s\"", url);
        canonical_deployment(&d, canon);
        if (strlen(canon) <= DLOCK__URL_MAX) {
            if (dlock__url_parse_deployment(canon, &again, &m) != DLOCK_OK)
                fuzz_fail(TARGET,
                          "\"%s\" was accepted, its canonical "
                          "form \"%s\" refused: %s",
                          url, canon, m.text);
            if (!same_deployment(&d, &again))
                fuzz_fail(TARGET, "\"%s\" and \"%s\" differ", url, canon);
            dlock__deployment_clear(&again);
        }
    }
    dlock__deployment_clear(&d);
    dlock__alloc_fail_nth(0);
    if (dlock__url_parse_deployment(url, &d, &m) != DLOCK_OK)
        fuzz_fail(TARGET, "\"%s\" parsed once and not twice", url);
    dlock__deployment_clear(&d);
    for (long n = 1, all = dlock__alloc_count(); n <= all; n++) {
        dlock__alloc_fail_nth(n);
        err = dlock__url_parse_deployment(url, &d, &m);
        dlock__alloc_fail_nth(0);
        if (err != DLOCK_NOMEM || d.nnodes != 0 || d.nodes[0].host != NULL)
            fuzz_fail(TARGET, "\"%s\" with allocation %ld failing gave %s",
                      url, n, dlock_errname(err));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char url[INPUT_MAX + 1];
    dlock__endpoint ep;
    dlock__msg m = {{0}};
    dlock_err err;

    if (size > INPUT_MAX)
        return 0;
    memcpy(url, data, size);
    url[size] = '\0';
    check_message_hides_password(url);
    check_deployment(url);
    err = dlock__url_parse(url, &ep, &m);
    if (err != DLOCK_OK) {
        check_refused(&ep, err, &m, url);
        return 0;
    }
    check_accepted(&ep, url);
    check_round_trip(&ep, url);
    dlock__endpoint_clear(&ep);
    check_allocation_failures(url);
    return 0;
}
