/*
 * rv_sweeper.h: periodic clean-up of expired idempotency records.
 *
 * Records are ignored once expired (every look-up filters on expires_at),
 * so the sweep is only about space: a thread with its own PostgreSQL
 * connection deletes expired rows every REVIEWD_SWEEP_INTERVAL_S.  It is
 * also the place where issue 5's outbox relay will run beside it, with
 * the same start/stop shape.  Several instances may sweep at once; the
 * DELETE is idempotent.
 *
 * Ownership: rv_sweeper_start / rv_sweeper_stop (wakes and joins the
 * thread, closes its connection).
 */
#ifndef RV_SWEEPER_H
#define RV_SWEEPER_H

#include "core/rv_app.h"

typedef struct rv_sweeper rv_sweeper;

rv_sweeper *rv_sweeper_start(rv_app *app);
void rv_sweeper_stop(rv_sweeper *sw);

#endif /* RV_SWEEPER_H */
