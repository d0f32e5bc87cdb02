-- 0003_idempotency.sql: stored responses for Idempotency-Key retries.
--
-- A POST with an Idempotency-Key records, in the same transaction as its
-- effect, the status and body it answered and a SHA-256 of its request
-- body.  A retry with the same key, user, method and path within the
-- record's lifetime is answered from here and has no second effect; a
-- retry whose body hashes differently is refused (422).  Records expire
-- after 24 hours (expires_at); the service deletes expired rows in a
-- periodic sweep and ignores them until then.
--
-- The key is scoped by (user_sub, method, path), as API.md says, so two
-- users or two endpoints never see each other's records.

CREATE TABLE kh_idempotency (
    user_sub      text        NOT NULL,
    method        text        NOT NULL,
    path          text        NOT NULL,
    key           text        NOT NULL
        CONSTRAINT kh_idempotency_key_visible_ascii
        CHECK (key ~ '^[!-~]{1,255}$'),
    request_hash  bytea       NOT NULL
        CONSTRAINT kh_idempotency_hash_is_sha256
        CHECK (octet_length(request_hash) = 32),
    status_code   integer     NOT NULL
        CONSTRAINT kh_idempotency_status_http
        CHECK (status_code BETWEEN 200 AND 499),
    response_body text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    PRIMARY KEY (user_sub, method, path, key)
);

COMMENT ON TABLE kh_idempotency IS
    'First response of each idempotent POST, replayed for 24 h.';

-- The sweep deletes by expiry.
CREATE INDEX kh_idempotency_expires_at ON kh_idempotency (expires_at);
