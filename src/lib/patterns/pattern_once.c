/*
 * pattern_once.c: single-flight refresh (see dlock/once.h).
 *
 * A flight is the claimable record of pattern_record.c under the kind
 * "once": the claim decides leader (FIRST) or value (DONE), followers wait
 * on the record's channel, and the leader's completion publishes once per
 * registered follower so that all of them, in every process, wake at once
 * and read the stored value.  What is particular here is the freshness
 * window (keep_ms, short by default) and dlock_once_do, which runs the
 * refresh between the claim and the completion.
 */
#include "dlock/once.h"

#include <string.h>

#include "base/alloc.h"
#include "patterns/pattern_common.h"
#include "patterns/pattern_record.h"

#define DEFAULT_LEASE_MS 10000
#define DEFAULT_WAIT_MS 5000
#define DEFAULT_KEEP_MS 1000

struct dlock_once {
    dlock__record *rec;
    int64_t keep_ms;
    int led;
};

void dlock_once_opts_init(dlock_once_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->lease_ms = DEFAULT_LEASE_MS;
    o->wait_ms = DEFAULT_WAIT_MS;
    o->keep_ms = DEFAULT_KEEP_MS;
}

static void once_discard(dlock_once *once)
{
    if (once == NULL)
        return;
    dlock__record_free(once->rec);
    dlock__free(once);
}

static dlock_err check_opts(const dlock_once_opts *o, dlock__msg *m)
{
    dlock_err err = dlock__pattern_check_ms("single-flight lease", o->lease_ms,
                                            m);

    if (err == DLOCK_OK)
        err = dlock__pattern_check_ms("single-flight keep time", o->keep_ms,
                                      m);
    if (err == DLOCK_OK && o->wait_ms > DLOCK__PATTERN_MAX_MS)
        err = dlock__msg_set(m, DLOCK_INVALID,
                             "single-flight wait %lld ms "
                             "is over a year",
                             (long long)o->wait_ms);
    return err;
}

/* begin without resetting the caller's message (dlock_once_do's step). */
static dlock_err once_begin(dlock_client *c, const char *name,
                            const dlock_once_opts *opts, dlock_once **out,
                            dlock__msg *m)
{
    dlock_once_opts defaults;
    const dlock_once_opts *o = opts != NULL ? opts : &defaults;
    dlock_once *once;
    dlock_err err;

    dlock_once_opts_init(&defaults);
    err = check_opts(o, m);
    if (err != DLOCK_OK)
        return err;
    once = dlock__calloc(1, sizeof(*once));
    if (once == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM, "allocating a single-flight");
    once->keep_ms = o->keep_ms;
    err = dlock__record_new(c, "once", "single-flight", name, &once->rec, m);
    if (err == DLOCK_OK)
        err = dlock__record_claim(once->rec, o->lease_ms, o->wait_ms, m);
    if (err != DLOCK_OK) {
        once_discard(once);
        return err;
    }
    once->led = once->rec->status == DLOCK__RECORD_FIRST;
    *out = once;
    return DLOCK_OK;
}

dlock_err dlock_once_begin(dlock_client *c, const char *name,
                           const dlock_once_opts *opts, dlock_once **out)
{
    dlock__msg *m;
    dlock_err err;

    if (out != NULL)
        *out = NULL;
    err = dlock__pattern_open(c, out != NULL, NULL, NULL, &m);
    if (err == DLOCK_OK)
        err = once_begin(c, name, opts, out, m);
    if (err == DLOCK_OK)
        dlock__msg_clear(m);
    return err;
}

dlock_once_outcome dlock_once_status(const dlock_once *once)
{
    return once->rec->status == DLOCK__RECORD_DONE ? DLOCK_ONCE_DONE
                                                   : DLOCK_ONCE_LEADER;
}

dlock_err dlock_once_complete(dlock_once *once, const void *value, size_t len)
{
    if (once == NULL)
        return DLOCK_INVALID;
    return dlock__record_complete(once->rec, value, len, once->keep_ms,
                                  dlock__client_begin(once->rec->client));
}

dlock_err dlock_once_abort(dlock_once *once)
{
    if (once == NULL)
        return DLOCK_INVALID;
    return dlock__record_abort(once->rec,
                               dlock__client_begin(once->rec->client));
}

const void *dlock_once_value(const dlock_once *once, size_t *len)
{
    const dlock__record *r = once->rec;
    int done = r->status == DLOCK__RECORD_DONE;

    if (len != NULL)
        *len = done ? r->len : 0;
    return done ? r->value : NULL;
}

int dlock_once_led(const dlock_once *once)
{
    return once->led;
}

void dlock_once_free(dlock_once *once)
{
    once_discard(once);
}

/* The leader's part of dlock_once_do: refresh, then complete or abort. */
static dlock_err lead(dlock_once *once, dlock_once_fn fn, void *arg,
                      int *fn_result, dlock__msg *m)
{
    const void *value = NULL;
    size_t len = 0;
    int rc = fn(arg, &value, &len);
    dlock_err err;

    if (fn_result != NULL)
        *fn_result = rc;
    if (rc != 0) {
        err = dlock__record_abort(once->rec, m);
        return dlock__msg_set(m, DLOCK_STATE,
                              "single-flight %.64s: the "
                              "refresh failed (it returned %d); the flight "
                              "was aborted%s so that another caller "
                              "refreshes",
                              once->rec->name, rc,
                              err == DLOCK_OK ? ""
                                              : " (or its lease ran "
                                                "out)");
    }
    return dlock__record_complete(once->rec, value, len, once->keep_ms, m);
}

dlock_err dlock_once_do(dlock_client *c, const char *name,
                        const dlock_once_opts *opts, dlock_once_fn fn,
                        void *arg, int *fn_result, dlock_once **out)
{
    dlock_once *once = NULL;
    dlock__msg *m;
    dlock_err err;

    if (fn_result != NULL)
        *fn_result = 0;
    if (out != NULL)
        *out = NULL;
    err = dlock__pattern_open(c, out != NULL && fn != NULL, NULL, NULL, &m);
    if (err == DLOCK_OK)
        err = once_begin(c, name, opts, &once, m);
    if (err != DLOCK_OK)
        return err;
    if (once->led)
        err = lead(once, fn, arg, fn_result, m);
    if (err != DLOCK_OK) {
        once_discard(once);
        return err;
    }
    dlock__msg_clear(m);
    *out = once;
    return DLOCK_OK;
}
