-- 0005_search_index.sql: kh-indexer's chunks, its processed events, and
-- the tokenisation that makes full-text search work for CJK text.
--
-- kh-indexer (services/indexer) consumes document.approved events.  For
-- each event it replaces the document's rows in kh_chunk and records the
-- event id in kh_processed_event in ONE transaction, so the effect of an
-- event is exactly once even when RabbitMQ delivers it twice: the second
-- delivery finds its event id already recorded (the primary key; a
-- concurrent duplicate waits on the unique index and then finds it) and
-- is acknowledged without work.
--
-- Why character bigrams.  PostgreSQL's text search parsers split words at
-- spaces and punctuation; Chinese and Japanese are written without spaces,
-- so to_tsvector('simple', '我们的数据库文档') is one "word" and a search
-- for 数据 finds nothing.  The choices were:
-- - a real segmenter (zhparser/SCWS, pg_jieba, MeCab): none is packaged in
--   Debian 12, and each needs a dictionary that decides what a word is;
-- - pg_trgm similarity: packaged (postgresql-contrib), but trigrams miss
--   every two-character word, the commonest length of a Chinese word, and
--   its ranking is similarity, not relevance;
-- - overlapping character bigrams for CJK runs (what Lucene's CJKAnalyzer
--   and Elasticsearch's cjk analyzer do): no dictionary, every two-
--   character word of the text is a term, a longer query becomes its own
--   bigrams ANDed together, and Latin text keeps its normal words.
-- We use bigrams: kh_search_text rewrites each run of CJK characters
-- (Han, Hiragana, Katakana, Hangul) into its space-separated bigrams (a
-- lone character stays as it is) and leaves everything else alone; then
-- the 'simple' configuration (lower-casing, no stemming, no stop words,
-- the same for every language) makes the tsvector.  The SAME function
-- tokenises the query (kh_search_query), in the database, so the indexer
-- and reviewd's GET /v1/search can never tokenise differently.  The cost:
-- a one-character query matches only one-character runs, and bigrams can
-- match across a word boundary (false positives that rank low).
--
-- Invariants:
-- - chunks of a document are numbered 0..n-1 and all carry the document
--   version and the event that wrote them;
-- - a chunk's tsv is kh_search_vector(title, content), nothing else;
-- - an embedding, when present, is a non-empty vector.

CREATE FUNCTION kh_search_text(doc text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
DECLARE
    part text[];
    run text;
    out text := '';
    i integer;
BEGIN
    FOR part IN
        SELECT regexp_matches(doc,
            '([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af'
            '\uf900-\ufaff\U00020000-\U0002fa1f]+)|'
            '([^\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af'
            '\uf900-\ufaff\U00020000-\U0002fa1f]+)', 'g')
    LOOP
        IF part[1] IS NULL THEN
            out := out || part[2];
            CONTINUE;
        END IF;
        run := part[1];
        out := out || ' ';
        IF char_length(run) = 1 THEN
            out := out || run;
        ELSE
            FOR i IN 1 .. char_length(run) - 1 LOOP
                out := out || substr(run, i, 2) || ' ';
            END LOOP;
        END IF;
        out := out || ' ';
    END LOOP;
    RETURN out;
END
$fn$;

COMMENT ON FUNCTION kh_search_text(text) IS
    'CJK runs as overlapping bigrams, other text unchanged (see 0005).';

CREATE FUNCTION kh_search_vector(title text, content text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
    SELECT setweight(to_tsvector('simple', kh_search_text(title)), 'A')
           || to_tsvector('simple', kh_search_text(content))
$fn$;

CREATE FUNCTION kh_search_query(q text) RETURNS tsquery
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
    SELECT plainto_tsquery('simple', kh_search_text(q))
$fn$;

CREATE TABLE kh_chunk (
    document_id      bigint      NOT NULL
        REFERENCES kh_document (id) ON DELETE CASCADE,
    chunk_index      integer     NOT NULL
        CONSTRAINT kh_chunk_index_nonnegative CHECK (chunk_index >= 0),
    document_version integer     NOT NULL,
    content          text        NOT NULL,
    byte_offset      integer     NOT NULL,
    tsv              tsvector    NOT NULL,
    embedding        real[]
        CONSTRAINT kh_chunk_embedding_nonempty
        CHECK (embedding IS NULL OR cardinality(embedding) > 0),
    event_id         uuid        NOT NULL,
    indexed_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, chunk_index)
);

COMMENT ON TABLE kh_chunk IS
    'Chunks of approved documents with their full-text vectors.';

CREATE INDEX kh_chunk_tsv ON kh_chunk USING gin (tsv);

CREATE TABLE kh_processed_event (
    event_id     uuid        PRIMARY KEY,
    document_id  bigint      NOT NULL,
    outcome      text        NOT NULL
        CONSTRAINT kh_processed_event_outcome_known
        CHECK (outcome IN ('indexed', 'stale')),
    chunks       integer     NOT NULL DEFAULT 0,
    processed_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE kh_processed_event IS
    'Events kh-indexer has applied; a redelivery finds its id here.';
