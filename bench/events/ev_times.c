/*
 * ev_times.c: joining an approval's times by document id (see
 * ev_times.h).
 *
 * The slots are indexed once by document id (a sorted array of
 * {id, slot} pairs, searched with bsearch), and each source is then read
 * in one pass: the outbox with one query, the receipts from memory, the
 * indexer's log line by line (ev_parse.h: only "indexed" outcomes count,
 * since a stale or duplicate outcome did no indexing).
 */
#include "ev_times.h"

#include "ev_parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct id_index {
    long long doc_id;
    size_t slot;
} id_index;

static int by_id(const void *a, const void *b)
{
    const long long x = ((const id_index *)a)->doc_id;
    const long long y = ((const id_index *)b)->doc_id;

    return (x > y) - (x < y);
}

static ev_slot *find(const id_index *ix, size_t n, ev_slot *slots,
                     long long doc_id)
{
    const id_index key = {doc_id, 0};
    const id_index *hit = bsearch(&key, ix, n, sizeof(*ix), by_id);

    return hit != NULL ? &slots[hit->slot] : NULL;
}

static int collect_outbox(PGconn *pg, const id_index *ix, size_t n,
                          ev_slot *slots, char *err, size_t errlen)
{
    PGresult *res = PQexec(
        pg, "SELECT document_id,"
            " (extract(epoch FROM created_at) * 1e6)::bigint,"
            " coalesce((extract(epoch FROM sent_at) * 1e6)::bigint, 0)"
            " FROM kh_outbox WHERE routing_key = 'document.approved'");
    int i;

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        snprintf(err, errlen, "reading kh_outbox: %s", PQerrorMessage(pg));
        PQclear(res);
        return -1;
    }
    for (i = 0; i < PQntuples(res); i++) {
        ev_slot *s = find(ix, n, slots, atoll(PQgetvalue(res, i, 0)));

        if (s != NULL) {
            s->created_us = atoll(PQgetvalue(res, i, 1));
            s->outbox_sent_us = atoll(PQgetvalue(res, i, 2));
        }
    }
    PQclear(res);
    return 0;
}

static void collect_receipts(const id_index *ix, size_t n, ev_slot *slots,
                             const ev_receipt *r, size_t nr)
{
    size_t i;

    for (i = 0; i < nr; i++) {
        ev_slot *s = find(ix, n, slots, r[i].doc_id);

        if (s == NULL)
            continue;
        if (s->recv_count++ == 0)
            s->recv_us = r[i].at_us;
    }
}

static int collect_indexed(const char *path, const id_index *ix, size_t n,
                           ev_slot *slots, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    char line[8192];
    long long doc;
    int64_t at;

    if (f == NULL) {
        snprintf(err, errlen, "cannot read the indexer's log %s", path);
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        ev_slot *s;

        if (!ev_parse_indexed_line(line, &doc, &at))
            continue;
        s = find(ix, n, slots, doc);
        if (s != NULL && s->indexed_us == 0)
            s->indexed_us = at;
    }
    fclose(f);
    return 0;
}

int ev_times_collect(PGconn *pg, const char *indexer_log, ev_slot *slots,
                     size_t n, const ev_receipt *r, size_t nr, char *err,
                     size_t errlen)
{
    id_index *ix = calloc(n > 0 ? n : 1, sizeof(*ix));
    size_t i;
    int rc;

    if (ix == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (i = 0; i < n; i++) {
        ix[i].doc_id = slots[i].doc_id;
        ix[i].slot = i;
    }
    qsort(ix, n, sizeof(*ix), by_id);
    rc = collect_outbox(pg, ix, n, slots, err, errlen);
    if (rc == 0) {
        collect_receipts(ix, n, slots, r, nr);
        rc = collect_indexed(indexer_log, ix, n, slots, err, errlen);
    }
    free(ix);
    return rc;
}
