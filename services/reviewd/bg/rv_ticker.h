/*
 * rv_ticker.h: a background thread that does one job every interval until
 * it is stopped: what the Redis monitor and the idempotency sweeper share.
 *
 * The thread sleeps on a condition variable with a CLOCK_MONOTONIC
 * deadline, so rv_ticker_stop wakes it at once instead of waiting out the
 * interval, and a change of the wall clock neither hurries nor delays a
 * tick.  The first tick comes one interval after the start.
 *
 * Ownership: rv_ticker_start returns a ticker the caller frees with
 * rv_ticker_stop.  arg is borrowed and must outlive the ticker.
 * Threads: tick runs on the ticker's own thread, one call at a time, and
 * is handed the ticker so that it can ask rv_ticker_stopping to end a
 * long round early; start and stop belong to the owner's thread.
 */
#ifndef RV_TICKER_H
#define RV_TICKER_H

typedef struct rv_ticker rv_ticker;

/* What the thread does each interval; t is the ticker running it. */
typedef void (*rv_ticker_fn)(rv_ticker *t, void *arg);

/* Starts the thread, which calls tick(t, arg) every interval_ms (> 0)
 * until rv_ticker_stop.  Returns the ticker, or NULL (nothing started)
 * when memory, the condition variable or the thread could not be had. */
rv_ticker *rv_ticker_start(int interval_ms, rv_ticker_fn tick, void *arg);

/* 1 once rv_ticker_stop has been asked for, else 0. */
int rv_ticker_stopping(rv_ticker *t);

/* Wakes the thread, waits for a tick in progress to end, joins the
 * thread and frees t.  NULL does nothing. */
void rv_ticker_stop(rv_ticker *t);

#endif /* RV_TICKER_H */
