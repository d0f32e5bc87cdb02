-- 0004_outbox.sql: the transactional outbox of document events.
--
-- Every state change (submit, approve, reject) inserts one row here in
-- the same transaction as the change itself (services/reviewd/
-- rv_lifecycle.c, emit_event), so an event exists exactly when its change
-- committed: a rollback takes the row with it, and a committed change
-- keeps its event even while RabbitMQ is down.  The relay
-- (services/reviewd/rv_relay.c) publishes unsent rows in id order to the
-- topic exchange kh.documents with publisher confirms and sets sent_at
-- only after the broker confirmed the message.
--
-- Invariants kept by the database itself:
-- - event_id is the message's message_id and the consumers' dedup key:
--   unique, and payload->>'event_id' says the same (a CHECK);
-- - routing_key is one of the three event types of API.md, and the
--   payload's "type" equals it;
-- - id order is commit order for one document: every change of a
--   document first takes that document's row lock (SELECT ... FOR
--   UPDATE), so a later change can only insert its row (and draw its id)
--   after the earlier one committed;
-- - sent_at, once set, is not before created_at.
--
-- The statement-level trigger sends NOTIFY kh_outbox inside the inserting
-- transaction; PostgreSQL delivers it at commit and drops it on rollback,
-- so a relay that LISTENs wakes within milliseconds of the commit and
-- never for a change that did not happen.  Sent rows are deleted by the
-- relay once older than REVIEWD_OUTBOX_RETENTION_S (default 7 days).

CREATE TABLE kh_outbox (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id    uuid        NOT NULL
        CONSTRAINT kh_outbox_event_id_key UNIQUE,
    routing_key text        NOT NULL
        CONSTRAINT kh_outbox_routing_key_known
        CHECK (routing_key IN ('document.submitted', 'document.approved',
                               'document.rejected')),
    document_id bigint      NOT NULL REFERENCES kh_document (id),
    payload     json        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    sent_at     timestamptz,
    CONSTRAINT kh_outbox_payload_matches
        CHECK (payload->>'event_id' = event_id::text
               AND payload->>'type' = routing_key),
    CONSTRAINT kh_outbox_sent_after_created
        CHECK (sent_at IS NULL OR sent_at >= created_at)
);

COMMENT ON TABLE kh_outbox IS
    'Document events, written with their change, published by the relay.';

-- The relay's claim walks unsent rows by id; the backlog metrics count
-- them.  Small: rows leave it once sent.
CREATE INDEX kh_outbox_unsent ON kh_outbox (id) WHERE sent_at IS NULL;

-- The retention sweep deletes sent rows by age.
CREATE INDEX kh_outbox_sent_at ON kh_outbox (sent_at)
    WHERE sent_at IS NOT NULL;

CREATE FUNCTION kh_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    NOTIFY kh_outbox;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER kh_outbox_notify AFTER INSERT ON kh_outbox
    FOR EACH STATEMENT EXECUTE FUNCTION kh_outbox_notify();
