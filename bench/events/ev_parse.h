/*
 * ev_parse.h: what bench_events reads out of other programs' output: the
 * document id of an event body (as reviewd's outbox writes it), and the
 * time and document of kh-indexer's event_done log lines.
 *
 * They are separate from the code that uses them so that
 * test_ev_parse.c can check them against real output: a benchmark that
 * misreads its input prints confident nonsense (the body's
 * json_build_object spacing, "document_id" : "3", once made every event
 * look lost).  Pure functions, no allocation; any thread.
 */
#ifndef EV_PARSE_H
#define EV_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* The "document_id" of the JSON event body p[0..len), a number or a
 * numeric string, with or without spaces around the colon; -1 when there
 * is none.  p need not be NUL-terminated. */
long long ev_parse_doc_id(const char *p, size_t len);

/* An rv_log "ts" value (2026-12-03T11:54:07.998Z, UTC) as microseconds
 * since the epoch; -1 when it does not parse. */
int64_t ev_parse_ts(const char *ts);

/*
 * If line is kh-indexer's event_done line for an event it indexed
 * (outcome "indexed": a stale or duplicate outcome did no work), sets
 * *doc_id and *at_us (its ts) and returns 1; returns 0 for any other
 * line, leaving both alone.
 */
int ev_parse_indexed_line(const char *line, long long *doc_id, int64_t *at_us);

#endif /* EV_PARSE_H */
