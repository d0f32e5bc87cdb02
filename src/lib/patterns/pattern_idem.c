/*
 * pattern_idem.c: idempotency records (see dlock/idem.h).
 *
 * A dlock_idem is a thin face on the claimable record of pattern_record.c
 * under the kind "idem": begin is a claim, complete stores the result and
 * wakes the waiting callers, abort deletes the record.  What is particular
 * to idempotency is only the defaults: no wait unless asked, and results
 * kept as long as the caller says (a day is typical), because a retry may
 * come much later than the first request.
 */
#include "dlock/idem.h"

#include "base/alloc.h"
#include "patterns/pattern_common.h"
#include "patterns/pattern_record.h"

struct dlock_idem {
    dlock__record *rec;
};

static void idem_discard(dlock_idem *idem)
{
    if (idem == NULL)
        return;
    dlock__record_free(idem->rec);
    dlock__free(idem);
}

dlock_err dlock_idem_begin_wait(dlock_client *c, const char *key,
                                int64_t ttl_ms, int64_t wait_ms,
                                dlock_idem **out)
{
    dlock__msg *m;
    dlock_idem *idem;
    dlock_err err;

    if (out != NULL)
        *out = NULL;
    err = dlock__pattern_open(c, out != NULL, NULL, NULL, &m);
    if (err != DLOCK_OK)
        return err;
    idem = dlock__calloc(1, sizeof(*idem));
    if (idem == NULL)
        return dlock__msg_set(m, DLOCK_NOMEM,
                              "allocating an idempotency "
                              "record");
    err = dlock__record_new(c, "idem", "idempotency key", key, &idem->rec, m);
    if (err == DLOCK_OK)
        err = dlock__record_claim(idem->rec, ttl_ms, wait_ms, m);
    if (err != DLOCK_OK) {
        idem_discard(idem);
        return err;
    }
    dlock__msg_clear(m);
    *out = idem;
    return DLOCK_OK;
}

dlock_err dlock_idem_begin(dlock_client *c, const char *key, int64_t ttl_ms,
                           dlock_idem **out)
{
    return dlock_idem_begin_wait(c, key, ttl_ms, 0, out);
}

dlock_idem_outcome dlock_idem_status(const dlock_idem *idem)
{
    return idem->rec->status == DLOCK__RECORD_DONE ? DLOCK_IDEM_DONE
                                                   : DLOCK_IDEM_FIRST;
}

dlock_err dlock_idem_complete(dlock_idem *idem, const void *result, size_t len,
                              int64_t keep_ms)
{
    if (idem == NULL)
        return DLOCK_INVALID;
    return dlock__record_complete(idem->rec, result, len, keep_ms,
                                  dlock__client_begin(idem->rec->client));
}

dlock_err dlock_idem_abort(dlock_idem *idem)
{
    if (idem == NULL)
        return DLOCK_INVALID;
    return dlock__record_abort(idem->rec,
                               dlock__client_begin(idem->rec->client));
}

dlock_err dlock_idem_extend(dlock_idem *idem, int64_t ttl_ms)
{
    if (idem == NULL)
        return DLOCK_INVALID;
    return dlock__record_extend(idem->rec, ttl_ms,
                                dlock__client_begin(idem->rec->client));
}

const void *dlock_idem_result(const dlock_idem *idem, size_t *len)
{
    const dlock__record *r = idem->rec;
    int done = r->status == DLOCK__RECORD_DONE;

    if (len != NULL)
        *len = done ? r->len : 0;
    return done ? r->value : NULL;
}

int64_t dlock_idem_valid_ms(const dlock_idem *idem)
{
    const dlock__record *r = idem->rec;

    if (r->status != DLOCK__RECORD_FIRST || r->finished)
        return 0;
    return dlock__pattern_lease_valid_ms(&r->lease);
}

const char *dlock_idem_key(const dlock_idem *idem)
{
    return idem->rec->name;
}

void dlock_idem_free(dlock_idem *idem)
{
    idem_discard(idem);
}
