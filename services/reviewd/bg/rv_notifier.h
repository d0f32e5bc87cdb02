/*
 * rv_notifier.h: the outbox's wake-up call (NOTIFY kh_outbox), sent after
 * the commit instead of inside the transaction.
 *
 * A transaction with a NOTIFY pending takes, at commit, one lock of the
 * whole PostgreSQL cluster and holds it until it has committed
 * (sql/0008_outbox_notify_after_commit.sql says why that made the
 * cycle's tail), so reviewd's request sessions turn the outbox trigger's
 * NOTIFY off (kh.outbox_notify = 'off', rv_db_session_sql) and a request
 * that committed an outbox row calls rv_notifier_poke instead.  One
 * thread, with a PostgreSQL connection of its own, then sends NOTIFY
 * kh_outbox in a transaction of its own; pokes that come while it sends,
 * or in the few milliseconds after (rv_notifier.c says why), are folded
 * into its next NOTIFY, so there is at most one notification in flight
 * per reviewd, whatever the rate of commits, and a request never waits
 * for one.  Every poke that returned before a NOTIFY was
 * sent is covered by it, and the NOTIFY is sent after the poke, so a
 * relay that wakes on it finds the committed row.
 *
 * A notification that cannot be sent (PostgreSQL down, the thread
 * stopping before its connection came back) is logged once per outage
 * (outbox_notify_failed) and the rows wait for the relay's sweep
 * (REVIEWD_RELAY_SWEEP_MS): nothing is lost, an event leaves later.
 *
 * Ownership: rv_notifier_start / rv_notifier_stop (sends what is pending,
 * joins the thread, closes its connection).  Threads: rv_notifier_poke
 * is safe from any thread; start and stop belong to
 * main.
 */
#ifndef RV_NOTIFIER_H
#define RV_NOTIFIER_H

#include "core/rv_app.h"

typedef struct rv_notifier rv_notifier;

/* What a request session runs at connect so that its outbox inserts
 * leave the NOTIFY to the notifier (give it to rv_db_session_sql). */
#define RV_NOTIFIER_SESSION_SQL "SET kh.outbox_notify = 'off'"

/* Starts the thread on app->db.  Returns the notifier, or NULL (nothing
 * started) when memory or the thread could not be had. */
rv_notifier *rv_notifier_start(rv_app *app);

/* Asks for a NOTIFY kh_outbox after this call; returns at once.  NULL
 * does nothing. */
void rv_notifier_poke(rv_notifier *n);

/* Sends a notification still asked for, stops and joins the thread and
 * frees n.  NULL does nothing. */
void rv_notifier_stop(rv_notifier *n);

#endif /* RV_NOTIFIER_H */
