-- 0002_reviews.sql: reviews, one per submission of a document.
--
-- A submit inserts a pending review and points the document's
-- current_review_id at it; approve or reject decides that review once.
-- The service does both under a Redis lock and inside one transaction with
-- SELECT ... FOR UPDATE on the rows; the constraints below are the last
-- guard, which holds even if a bug or a hand-written UPDATE bypasses both:
-- - at most one pending review per document (a partial unique index);
-- - a review is decided exactly when it has a reviewer and a decided_at,
--   and only a decided review has a comment; a rejection always has one;
-- - nobody decides a review they submitted (the four-eyes rule);
-- - the fence, when present, is the positive fencing token of the Redis
--   lock under which the decision was made (NULL: decided without Redis);
-- - a document's current review belongs to that document (a composite
--   foreign key on (document_id, id)).

CREATE TABLE kh_document_review (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    document_id      bigint      NOT NULL REFERENCES kh_document (id),
    document_version integer     NOT NULL
        CONSTRAINT kh_document_review_version_positive
        CHECK (document_version >= 1),
    status           text        NOT NULL DEFAULT 'pending'
        CONSTRAINT kh_document_review_status_known
        CHECK (status IN ('pending', 'approved', 'rejected')),
    submitted_by     text        NOT NULL
        CONSTRAINT kh_document_review_submitter_length
        CHECK (char_length(submitted_by) BETWEEN 1 AND 255),
    reviewer         text
        CONSTRAINT kh_document_review_reviewer_length
        CHECK (char_length(reviewer) BETWEEN 1 AND 255),
    comment          text
        CONSTRAINT kh_document_review_comment_length
        CHECK (char_length(comment) <= 2000),
    fence            numeric(20, 0)
        CONSTRAINT kh_document_review_fence_positive CHECK (fence > 0),
    created_at       timestamptz NOT NULL DEFAULT now(),
    decided_at       timestamptz,
    CONSTRAINT kh_document_review_decided_iff_reviewer
        CHECK ((status = 'pending') = (reviewer IS NULL)),
    CONSTRAINT kh_document_review_decided_iff_decided_at
        CHECK ((status = 'pending') = (decided_at IS NULL)),
    CONSTRAINT kh_document_review_comment_only_when_decided
        CHECK (status <> 'pending' OR comment IS NULL),
    CONSTRAINT kh_document_review_rejection_has_comment
        CHECK (status <> 'rejected' OR comment IS NOT NULL),
    CONSTRAINT kh_document_review_fence_only_when_decided
        CHECK (status <> 'pending' OR fence IS NULL),
    CONSTRAINT kh_document_review_four_eyes
        CHECK (reviewer IS NULL OR reviewer <> submitted_by),
    CONSTRAINT kh_document_review_document_id_key
        UNIQUE (document_id, id)
);

COMMENT ON TABLE kh_document_review IS
    'One row per submission; decided once by approve or reject.';

-- At most one pending review per document, whatever the interleaving.
CREATE UNIQUE INDEX kh_document_review_one_pending
    ON kh_document_review (document_id)
    WHERE status = 'pending';

-- GET /v1/reviews?status=...&after=... walks this index by id.
CREATE INDEX kh_document_review_status_id
    ON kh_document_review (status, id);

ALTER TABLE kh_document
    ADD CONSTRAINT kh_document_current_review_fk
    FOREIGN KEY (id, current_review_id)
    REFERENCES kh_document_review (document_id, id);
