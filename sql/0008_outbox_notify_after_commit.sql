-- 0008_outbox_notify_after_commit.sql: a session can leave the outbox's
-- NOTIFY to someone who sends it after the commit.
--
-- The statement-level trigger of 0004_outbox.sql sends NOTIFY kh_outbox
-- inside the inserting transaction.  PostgreSQL (async.c,
-- PreCommit_Notify) serialises every committing transaction that has a
-- notification pending on one lock of the whole cluster, held from just
-- before the commit record until the locks are released: the commits of
-- all submits, approvals and rejections took turns, each waiting for the
-- one before to be scheduled, commit and wake the next.  Sampling
-- pg_stat_activity during bench_reviewd's cycle phase found 420 of 665
-- active backends waiting on that lock (wait event Lock/object) in COMMIT,
-- and it made the cycle's request tail (docs/benchmarks.md, session 12).
--
-- reviewd now sets kh.outbox_notify = 'off' on its request sessions and
-- sends the notification itself once the transaction has committed, from
-- one thread that folds the notifications of many commits into one
-- (services/reviewd/bg/rv_notifier.c).  Any other session (psql, a tool,
-- an older reviewd) leaves the setting unset and is notified by the
-- trigger as before.  A committed row is never lost to a missing
-- notification: the relay also sweeps the outbox every
-- REVIEWD_RELAY_SWEEP_MS.
CREATE OR REPLACE FUNCTION kh_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF current_setting('kh.outbox_notify', true) IS DISTINCT FROM 'off' THEN
        NOTIFY kh_outbox;
    END IF;
    RETURN NULL;
END
$fn$;
