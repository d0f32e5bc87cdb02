/*
 * test_rv_log_line.c: the access log's lines built field by field
 * (svc_log_line, svc_log.c) are whole JSON objects that say what was given.
 *
 * svc_log_line replaces jansson on the path of every request, so it must
 * keep jansson's guarantees: a hostile request id or path can neither
 * break a line nor forge another, a value that is not UTF-8 is left out
 * rather than written raw, a long line is written whole, and lines from
 * many threads never interleave.  Buffered (svc_log_buffer, as reviewd
 * runs it), lines still reach the file soon, in the order they were made
 * with the lines written at once, and all of them when the log is freed.
 * Each test writes to a log file of its own and reads it back with
 * jansson.  The writing threads of the threaded case live in static
 * storage (the_writers), and its teardown joins whatever a failed
 * assertion left running before the log they write to is freed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "svc_log.h"

typedef struct fixture {
    char path[64];
    svc_log *log;
} fixture;

static int open_log(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    char err[256];
    int fd;

    assert_non_null(f);
    snprintf(f->path, sizeof(f->path), "/tmp/svc_log_line_XXXXXX");
    fd = mkstemp(f->path);
    assert_true(fd >= 0);
    close(fd);
    f->log = svc_log_new(f->path, SVC_LOG_INFO, err, sizeof(err));
    assert_non_null(f->log);
    *state = f;
    return 0;
}

static int close_log(void **state)
{
    fixture *f = *state;

    svc_log_free(f->log);
    unlink(f->path);
    free(f);
    return 0;
}

/* The lines of the log so far, each parsed; fails on a line that is not
 * one JSON object.  Returns the number of lines (at most max). */
static int read_lines(const fixture *f, json_t **out, int max)
{
    FILE *fp = fopen(f->path, "r");
    char *line = NULL;
    size_t cap = 0;
    int n = 0;

    assert_non_null(fp);
    while (getline(&line, &cap, fp) > 0) {
        json_error_t e;
        json_t *j = json_loads(line, 0, &e);

        if (j == NULL || !json_is_object(j))
            fail_msg("not a JSON object: %s (%s)", line, e.text);
        assert_true(n < max);
        out[n++] = j;
    }
    free(line);
    fclose(fp);
    return n;
}

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static void fields_come_after_ts_level_and_msg_in_order(void **state)
{
    fixture *f = *state;
    svc_log_line line;
    json_t *got[2];
    FILE *fp;
    char raw[512];

    assert_true(svc_log_line_begin(f->log, SVC_LOG_INFO, "request", &line));
    svc_log_line_str(&line, "request_id", "abc");
    svc_log_line_int(&line, "status", 201);
    svc_log_line_fixed3(&line, "duration_ms", 1.23456);
    svc_log_line_end(&line);
    assert_int_equal(read_lines(f, got, 2), 1);
    assert_string_equal(str(got[0], "level"), "info");
    assert_string_equal(str(got[0], "msg"), "request");
    assert_string_equal(str(got[0], "request_id"), "abc");
    assert_int_equal(json_integer_value(json_object_get(got[0], "status")),
                     201);
    assert_true(json_real_value(json_object_get(got[0], "duration_ms"))
                == 1.235);
    json_decref(got[0]);
    fp = fopen(f->path, "r");
    assert_non_null(fgets(raw, sizeof(raw), fp));
    fclose(fp);
    assert_true(strncmp(raw, "{\"ts\":\"", 7) == 0);
    assert_non_null(strstr(raw, "\"level\":\"info\",\"msg\":\"request\","
                                "\"request_id\":\"abc\",\"status\":201,"
                                "\"duration_ms\":1.235}\n"));
}

static void hostile_strings_come_back_as_they_were_sent(void **state)
{
    static const char *const values[] = {
        "a\"b",
        "back\\slash",
        "new\nline\"}\n{\"forged\":1",
        "\x01\x1f\b\f\r\t",
        "caf\xc3\xa9 \xe6\x96\x87 \xf0\x9f\x98\x80",
        "\x7f",
        "",
        NULL};
    fixture *f = *state;
    svc_log_line line;
    json_t *got[8];
    int i;

    for (i = 0; values[i] != NULL; i++) {
        assert_true(
            svc_log_line_begin(f->log, SVC_LOG_INFO, "request", &line));
        svc_log_line_str(&line, "path", values[i]);
        svc_log_line_end(&line);
    }
    assert_int_equal(read_lines(f, got, 8), i);
    for (i = 0; values[i] != NULL; i++) {
        assert_string_equal(str(got[i], "path"), values[i]);
        assert_null(json_object_get(got[i], "forged"));
        json_decref(got[i]);
    }
}

static void a_value_that_is_not_utf8_is_left_out(void **state)
{
    static const char *const bad[] = {"\xff", "ab\xc3", "\xed\xa0\x80",
                                      "\xc0\xaf", NULL};
    fixture *f = *state;
    svc_log_line line;
    json_t *got[4];
    int i;

    for (i = 0; bad[i] != NULL; i++) {
        assert_true(
            svc_log_line_begin(f->log, SVC_LOG_INFO, "request", &line));
        svc_log_line_str(&line, "path", bad[i]);
        svc_log_line_int(&line, "status", 404);
        svc_log_line_end(&line);
    }
    assert_int_equal(read_lines(f, got, 4), 4);
    for (i = 0; i < 4; i++) {
        assert_null(json_object_get(got[i], "path"));
        assert_int_equal(json_integer_value(json_object_get(got[i], "status")),
                         404);
        json_decref(got[i]);
    }
}

static void a_line_longer_than_its_inline_buffer_is_written_whole(void **state)
{
    fixture *f = *state;
    const size_t n = 5 * SVC_LOG_LINE_INLINE;
    char *path = malloc(n + 1);
    svc_log_line line;
    json_t *got[1];

    assert_non_null(path);
    for (size_t i = 0; i < n; i++)
        path[i] = i % 7 == 0 ? '"' : (char)('a' + i % 26);
    path[n] = '\0';
    assert_true(svc_log_line_begin(f->log, SVC_LOG_INFO, "request", &line));
    svc_log_line_str(&line, "path", path);
    svc_log_line_str(&line, "after", "end");
    svc_log_line_end(&line);
    assert_int_equal(read_lines(f, got, 1), 1);
    assert_string_equal(str(got[0], "path"), path);
    assert_string_equal(str(got[0], "after"), "end");
    json_decref(got[0]);
    free(path);
}

static void a_level_below_the_minimum_writes_nothing(void **state)
{
    fixture *f = *state;
    svc_log_line line;
    json_t *got[1];

    assert_false(svc_log_line_begin(f->log, SVC_LOG_DEBUG, "noise", &line));
    assert_false(svc_log_line_begin(NULL, SVC_LOG_ERROR, "noise", &line));
    assert_int_equal(read_lines(f, got, 1), 0);
}

enum { THREADS = 4, LINES = 500 };

typedef struct writer {
    svc_log *log;
    int id;
} writer;

static void *write_many(void *p)
{
    const writer *w = p;
    char value[600];

    /* Long enough that the lines of two threads would overlap if they
     * were written in pieces. */
    memset(value, 'a' + w->id, sizeof(value) - 1);
    value[sizeof(value) - 1] = '\0';
    for (int i = 0; i < LINES; i++) {
        svc_log_line line;

        if (svc_log_line_begin(w->log, SVC_LOG_INFO, "request", &line)) {
            svc_log_line_int(&line, "thread", w->id);
            svc_log_line_str(&line, "path", value);
            svc_log_line_end(&line);
        }
    }
    return NULL;
}

/* The threaded case's writers, in static storage: a failed assertion
 * leaves the case while they may still write, and end_writers joins them
 * before the log is freed. */
typedef struct writers {
    pthread_t t[THREADS];
    writer w[THREADS];
    int started;  /* threads started */
    int joined;   /* threads joined */
    json_t **got; /* the lines read back (THREADS * LINES), owned */
} writers;

static writers the_writers;

/* Teardown of the threaded case, passed or failed: joins the writers
 * still running (each returns after its LINES lines), frees the lines
 * read back, then closes the log. */
static int end_writers(void **state)
{
    writers *ws = &the_writers;

    for (int i = ws->joined; i < ws->started; i++)
        pthread_join(ws->t[i], NULL);
    for (int i = 0; ws->got != NULL && i < THREADS * LINES; i++)
        json_decref(ws->got[i]);
    free(ws->got);
    memset(ws, 0, sizeof(*ws));
    return close_log(state);
}

static void lines_of_many_threads_never_interleave(void **state)
{
    fixture *f = *state;
    writers *ws = &the_writers;
    json_t **got;
    int per[THREADS] = {0};
    int n;

    memset(ws, 0, sizeof(*ws));
    got = ws->got = calloc(THREADS * LINES, sizeof(*got));
    assert_non_null(got);
    for (int i = 0; i < THREADS; i++) {
        ws->w[i] = (writer){f->log, i};
        assert_int_equal(pthread_create(&ws->t[i], NULL, write_many,
                                        &ws->w[i]),
                         0);
        ws->started = i + 1;
    }
    for (int i = 0; i < THREADS; i++) {
        const int joined = pthread_join(ws->t[i], NULL);

        ws->joined = i + 1;
        assert_int_equal(joined, 0);
    }
    n = read_lines(f, got, THREADS * LINES);
    assert_int_equal(n, THREADS * LINES);
    for (int i = 0; i < n; i++) {
        const int id = (int)json_integer_value(
            json_object_get(got[i], "thread"));
        const char *path = str(got[i], "path");

        assert_true(id >= 0 && id < THREADS);
        assert_int_equal(strspn(path, (char[]){(char)('a' + id), 0}), 599);
        per[id]++;
    }
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(per[i], LINES);
}

/* The lines in the file, counted, without parsing them. */
static int count_lines(const fixture *f)
{
    FILE *fp = fopen(f->path, "r");
    int n = 0, c;

    assert_non_null(fp);
    while ((c = getc(fp)) != EOF)
        n += c == '\n';
    fclose(fp);
    return n;
}

/* Waits up to 5 s for the file to hold n lines; 1 once it does. */
static int wait_for_lines(const fixture *f, int n)
{
    const struct timespec pause = {0, 2 * 1000 * 1000};

    for (int i = 0; i < 2500; i++) {
        if (count_lines(f) >= n)
            return 1;
        nanosleep(&pause, NULL);
    }
    return 0;
}

static void write_request_line(svc_log *log, int seq)
{
    svc_log_line line;

    if (svc_log_line_begin(log, SVC_LOG_INFO, "request", &line)) {
        svc_log_line_int(&line, "seq", seq);
        svc_log_line_end(&line);
    }
}

static void buffered_lines_come_soon_and_in_the_order_made(void **state)
{
    fixture *f = *state;
    char err[256];
    json_t *got[4];

    assert_int_equal(svc_log_buffer(f->log, 20, err, sizeof(err)), 0);
    write_request_line(f->log, 1);
    svc_log_write(f->log, SVC_LOG_ERROR, "at_once",
                  json_pack("{s:i}", "seq", 2));
    write_request_line(f->log, 3);
    assert_true(wait_for_lines(f, 3));
    /* Line 3 was the flusher's to write, so it now waits for the next
     * batch: a line alone must come too. */
    write_request_line(f->log, 4);
    assert_true(wait_for_lines(f, 4));
    assert_int_equal(read_lines(f, got, 4), 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(json_integer_value(json_object_get(got[i], "seq")),
                         i + 1);
        json_decref(got[i]);
    }
}

enum { FREED_LINES = 2000 };

static void every_buffered_line_is_written_when_the_log_is_freed(void **state)
{
    fixture *f = *state;
    char err[256];
    json_t **got = calloc(FREED_LINES, sizeof(*got));
    char value[300];

    /* A flush far away: only a full buffer (these lines are some 660 KB,
     * more than it holds) and svc_log_free write them. */
    assert_non_null(got);
    memset(value, 'v', sizeof(value) - 1);
    value[sizeof(value) - 1] = '\0';
    assert_int_equal(svc_log_buffer(f->log, 10000, err, sizeof(err)), 0);
    for (int i = 0; i < FREED_LINES; i++) {
        svc_log_line line;

        assert_true(
            svc_log_line_begin(f->log, SVC_LOG_INFO, "request", &line));
        svc_log_line_int(&line, "seq", i);
        svc_log_line_str(&line, "path", value);
        svc_log_line_end(&line);
    }
    svc_log_free(f->log);
    f->log = NULL;
    assert_int_equal(read_lines(f, got, FREED_LINES), FREED_LINES);
    for (int i = 0; i < FREED_LINES; i++) {
        assert_int_equal(json_integer_value(json_object_get(got[i], "seq")),
                         i);
        json_decref(got[i]);
    }
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            fields_come_after_ts_level_and_msg_in_order, open_log, close_log),
        cmocka_unit_test_setup_teardown(
            hostile_strings_come_back_as_they_were_sent, open_log, close_log),
        cmocka_unit_test_setup_teardown(a_value_that_is_not_utf8_is_left_out,
                                        open_log, close_log),
        cmocka_unit_test_setup_teardown(
            a_line_longer_than_its_inline_buffer_is_written_whole, open_log,
            close_log),
        cmocka_unit_test_setup_teardown(
            a_level_below_the_minimum_writes_nothing, open_log, close_log),
        cmocka_unit_test_setup_teardown(lines_of_many_threads_never_interleave,
                                        open_log, end_writers),
        cmocka_unit_test_setup_teardown(
            buffered_lines_come_soon_and_in_the_order_made, open_log,
            close_log),
        cmocka_unit_test_setup_teardown(
            every_buffered_line_is_written_when_the_log_is_freed, open_log,
            close_log),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
