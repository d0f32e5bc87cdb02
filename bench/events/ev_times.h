/*
 * ev_times.h: the timeline of each approval in bench_events, from its
 * scheduled send to its indexing, joined by document id.
 *
 * Every document of a run is approved exactly once, so its document id
 * names its document.approved event everywhere: in the HTTP request
 * (through its review), in the outbox row, in the message body the test
 * consumer receives and in kh-indexer's event_done log line.  The times
 * come from three clocks that are all CLOCK_REALTIME on this machine:
 *
 *   sched, sent, resp  the benchmark's own (the open-loop schedule, the
 *                      moment the request went out, its response);
 *   created, outbox_sent  the outbox row's created_at and sent_at:
 *                      PostgreSQL's now(), i.e. the START of the
 *                      approving transaction (so commit-to-X figures
 *                      taken from it include that transaction's own
 *                      duration, a few ms at most) and the start of the
 *                      relay's marking transaction, after the confirm;
 *   recv               the test consumer's receipt;
 *   indexed            the ts of kh-indexer's event_done line, written
 *                      after its transaction committed (ms resolution).
 *
 * A time that was never observed stays 0.  Ownership: the caller owns the
 * array; nothing here keeps a pointer.  Threads: one.
 */
#ifndef EV_TIMES_H
#define EV_TIMES_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "ev_broker.h"

typedef struct ev_slot {
    long long doc_id;
    long long review_id;
    int status; /* the approval's HTTP status, 0: not sent */
    int64_t sched_us, sent_us, resp_us;
    int64_t created_us, outbox_sent_us;
    int64_t recv_us; /* the first receipt */
    int recv_count;  /* receipts; above 1 is a duplicate */
    int64_t indexed_us;
} ev_slot;

/*
 * Fills created_us, outbox_sent_us, recv_us, recv_count and indexed_us of
 * the n slots from the outbox on pg, the receipts r[0..nr) and the
 * indexer's log at indexer_log.  Returns 0, or -1 with err set (a query
 * or the log failed); receipts or rows of documents not among the slots
 * are ignored.
 */
int ev_times_collect(PGconn *pg, const char *indexer_log, ev_slot *slots,
                     size_t n, const ev_receipt *r, size_t nr, char *err,
                     size_t errlen);

#endif /* EV_TIMES_H */
