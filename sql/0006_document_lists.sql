-- 0006_document_lists.sql: the index behind GET /v1/documents?author=...
--
-- The review console lists an author's documents a page at a time
-- (WHERE author = $1 AND id > $after ORDER BY id LIMIT n); this index
-- walks exactly that order.  A document's reviews (GET
-- /v1/documents/{id}/reviews) already have the unique (document_id, id)
-- index of 0002_reviews.sql.
CREATE INDEX kh_document_author_id ON kh_document (author, id);
