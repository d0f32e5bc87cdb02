-- 0007_search_text_fast_path.sql: kh_search_text returns a text without
-- CJK characters as it is, without walking it run by run.
--
-- kh_search_text (0005_search_index.sql) splits its argument into
-- alternating runs of CJK and other characters with regexp_matches and
-- rebuilds it in PL/pgSQL, for the title and for every chunk kh-indexer
-- writes and for every query GET /v1/search tokenises.  For a text with
-- no CJK character that walk yields one run, the whole text, and returns
-- it unchanged; it was about a tenth of the indexer's PostgreSQL CPU per
-- event (perf, docs/benchmarks.md).  One regular-expression test with
-- the same character class now returns such a text at once.  The result
-- is the same for every input (a text without CJK is its own result, as
-- before; any other text takes the same walk), so the tsvectors already
-- stored stay right and nothing needs re-indexing.
CREATE OR REPLACE FUNCTION kh_search_text(doc text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
DECLARE
    part text[];
    run text;
    out text := '';
    i integer;
BEGIN
    IF doc !~ ('[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af'
               '\uf900-\ufaff\U00020000-\U0002fa1f]') THEN
        RETURN doc;
    END IF;
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
    'CJK runs as overlapping bigrams, other text unchanged (see 0005, 0007).';
