/*
 * test_ev_parse.c: unit tests of what bench_events reads from reviewd's
 * event bodies and kh-indexer's log (ev_parse.h).
 *
 * The fixtures are real output: an outbox payload as reviewd's
 * json_build_object writes it (spaces around every colon) and event_done
 * lines of kh-indexer's JSON log, so a format change shows up here rather
 * than as a run in which every event looks lost.  No server is needed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ev_parse.h"

static const char outbox_body[] =
    "{\"event_id\" : \"1cf402eb-0a4e-475b-89bb-9d909364a5a2\", \"type\" : "
    "\"document.approved\", \"document_id\" : \"3\", \"review_id\" : "
    "\"3\", \"document_version\" : 1, \"actor\" : \"bob\", "
    "\"occurred_at\" : \"2026-12-03T11:54:01.622Z\"}";

static const char indexed_line[] =
    "{\"ts\":\"2026-12-03T12:23:18.463Z\",\"level\":\"info\","
    "\"msg\":\"event_done\",\"event_id\":"
    "\"b1b1cc33-6873-461b-9450-148c530423ee\",\"document_id\":\"41\","
    "\"outcome\":\"indexed\",\"chunks\":1,\"redelivered\":false,"
    "\"ms\":303.207,\"error\":null}\n";

static void doc_id_is_read_from_the_outbox_body_with_spaces(void **state)
{
    (void)state;
    assert_int_equal(ev_parse_doc_id(outbox_body, strlen(outbox_body)), 3);
}

static void doc_id_is_read_as_a_number_or_without_spaces(void **state)
{
    static const char compact[] = "{\"document_id\":\"1234567\"}";
    static const char number[] = "{\"document_id\": 98}";
    (void)state;
    assert_int_equal(ev_parse_doc_id(compact, strlen(compact)), 1234567);
    assert_int_equal(ev_parse_doc_id(number, strlen(number)), 98);
}

static void body_without_a_doc_id_gives_minus_one(void **state)
{
    static const char none[] = "{\"review_id\" : \"3\"}";
    static const char empty[] = "{\"document_id\" : \"\"}";
    (void)state;
    assert_int_equal(ev_parse_doc_id(none, strlen(none)), -1);
    assert_int_equal(ev_parse_doc_id(empty, strlen(empty)), -1);
}

static void doc_id_is_not_read_past_the_given_length(void **state)
{
    const char *key = strstr(outbox_body, "\"document_id\"");
    const char *digit = strstr(outbox_body, "\"3\"") + 1;
    (void)state;
    /* Cut inside the key, and just before the id's digit: what lies
     * beyond the length must not be read. */
    assert_int_equal(ev_parse_doc_id(outbox_body,
                                     (size_t)(key - outbox_body) + 6),
                     -1);
    assert_int_equal(ev_parse_doc_id(outbox_body,
                                     (size_t)(digit - outbox_body)),
                     -1);
    assert_int_equal(ev_parse_doc_id(outbox_body,
                                     (size_t)(digit - outbox_body) + 1),
                     3);
}

static void ts_is_utc_microseconds(void **state)
{
    (void)state;
    /* date -u -d 2026-12-03T12:23:18Z +%s is 1796300598. */
    assert_true(ev_parse_ts("2026-12-03T12:23:18.463Z")
                == INT64_C(1796300598463000));
    assert_true(ev_parse_ts("2026-12-03T12:23:18.4Z")
                == INT64_C(1796300598400000));
    assert_true(ev_parse_ts("2026-12-03T12:23:18Z")
                == INT64_C(1796300598000000));
}

static void ts_without_zone_or_date_does_not_parse(void **state)
{
    (void)state;
    assert_true(ev_parse_ts("2026-12-03T12:23:18.463") == -1);
    assert_true(ev_parse_ts("2026-12-03T12:23:18.463+01:00") == -1);
    assert_true(ev_parse_ts("yesterday") == -1);
}

static void indexed_line_gives_its_document_and_time(void **state)
{
    long long doc = 0;
    int64_t at = 0;
    (void)state;
    assert_int_equal(ev_parse_indexed_line(indexed_line, &doc, &at), 1);
    assert_int_equal(doc, 41);
    assert_true(at == INT64_C(1796300598463000));
}

static void stale_duplicate_and_other_lines_are_not_indexed(void **state)
{
    static const char stale[] =
        "{\"ts\":\"2026-12-03T12:23:18.463Z\",\"level\":\"info\","
        "\"msg\":\"event_done\",\"event_id\":\"e\",\"document_id\":\"41\","
        "\"outcome\":\"stale\",\"chunks\":0}";
    static const char dup[] =
        "{\"ts\":\"2026-12-03T12:23:18.463Z\",\"level\":\"info\","
        "\"msg\":\"event_done\",\"event_id\":\"e\",\"document_id\":\"41\","
        "\"outcome\":\"duplicate\",\"chunks\":0}";
    static const char consuming[] =
        "{\"ts\":\"2026-12-03T12:22:58.102Z\",\"level\":\"info\","
        "\"msg\":\"consuming\",\"queue\":\"kh.indexer\"}";
    long long doc = 7;
    int64_t at = 9;
    (void)state;
    assert_int_equal(ev_parse_indexed_line(stale, &doc, &at), 0);
    assert_int_equal(ev_parse_indexed_line(dup, &doc, &at), 0);
    assert_int_equal(ev_parse_indexed_line(consuming, &doc, &at), 0);
    assert_int_equal(doc, 7);
    assert_true(at == 9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(doc_id_is_read_from_the_outbox_body_with_spaces),
        cmocka_unit_test(doc_id_is_read_as_a_number_or_without_spaces),
        cmocka_unit_test(body_without_a_doc_id_gives_minus_one),
        cmocka_unit_test(doc_id_is_not_read_past_the_given_length),
        cmocka_unit_test(ts_is_utc_microseconds),
        cmocka_unit_test(ts_without_zone_or_date_does_not_parse),
        cmocka_unit_test(indexed_line_gives_its_document_and_time),
        cmocka_unit_test(stale_duplicate_and_other_lines_are_not_indexed),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
