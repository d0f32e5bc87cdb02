-- 0001_documents.sql: the documents of the knowledge base and their text.
--
-- kh_document holds what every listing needs (title, status, author,
-- version, a preview of the text); the full text lives in the content
-- store, which by default is kh_document_content below, so a GET of a
-- document never reads a megabyte it does not return.  The status values
-- are a CHECK, so no code path can write a status the API does not know.
--
-- Invariants kept by the database itself:
-- - status is one of draft, pending_review, approved, rejected;
-- - a draft has never been submitted, so it has no current review, and
--   every other status has one (the foreign key to the review is added in
--   0002, once that table exists);
-- - title is 1..200 characters and version starts at 1 and only grows
--   (the service bumps it on every edit).
--
-- Migrations run inside one transaction under an advisory lock (see
-- services/reviewd/rv_migrate.c); an applied migration is never edited,
-- only followed by a new one.

CREATE TABLE kh_document (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    title             text        NOT NULL
        CONSTRAINT kh_document_title_length
        CHECK (char_length(title) BETWEEN 1 AND 200),
    status            text        NOT NULL DEFAULT 'draft'
        CONSTRAINT kh_document_status_known
        CHECK (status IN ('draft', 'pending_review', 'approved',
                          'rejected')),
    author            text        NOT NULL
        CONSTRAINT kh_document_author_length
        CHECK (char_length(author) BETWEEN 1 AND 255),
    version           integer     NOT NULL DEFAULT 1
        CONSTRAINT kh_document_version_positive CHECK (version >= 1),
    preview           text        NOT NULL DEFAULT ''
        CONSTRAINT kh_document_preview_length
        CHECK (char_length(preview) <= 200),
    current_review_id bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT kh_document_review_iff_submitted
        CHECK ((status = 'draft') = (current_review_id IS NULL))
);

COMMENT ON TABLE kh_document IS
    'Documents under review; the text is in the content store.';

-- The PostgreSQL content store: one row per document, written in the same
-- transaction as the document row.
CREATE TABLE kh_document_content (
    document_id bigint      PRIMARY KEY
        REFERENCES kh_document (id) ON DELETE CASCADE,
    content     text        NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE kh_document_content IS
    'Full text of each document (CONTENT_STORE=pg).';
