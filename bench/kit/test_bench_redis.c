/*
 * test_bench_redis.c: unit tests of what the benchmarks parse and compute
 * (MONITOR lines, redis-benchmark's two report forms, URLs, percentiles,
 * ratios and targets).
 *
 * A benchmark that misreads its limit prints confident nonsense, and
 * nothing in a run would notice: these fixtures are real output of Redis
 * 7.0's MONITOR and redis-benchmark, so a format change shows up here
 * rather than as a strange ratio.  No server is needed.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "bench_figure.h"
#include "bench_redis.h"
#include "bench_samples.h"

static void monitor_line_of_a_client_is_split_into_arguments(void **state)
{
    bench_cmd cmd;
    int from_lua = -1;
    (void)state;

    assert_int_equal(bench_monitor_parse_line(
                         "1764698511.123456 [0 127.0.0.1:40112] \"EVALSHA\" "
                         "\"34dae8cf9cbcf10b2da4c9ed634a8140f7e450a4\" \"2\" "
                         "\"bench:1:replay\" \"{bench:1:replay}:fence\" "
                         "\"0123456789abcdef0123456789abcdef\" \"10000\"",
                         &cmd, &from_lua),
                     0);
    assert_int_equal(from_lua, 0);
    assert_int_equal(cmd.argc, 7);
    assert_string_equal(cmd.argv[0], "EVALSHA");
    assert_string_equal(cmd.argv[3], "bench:1:replay");
    assert_string_equal(cmd.argv[4], "{bench:1:replay}:fence");
    assert_string_equal(cmd.argv[6], "10000");
    bench_cmd_free(&cmd);
}

static void monitor_line_with_escapes_is_decoded(void **state)
{
    bench_cmd cmd;
    int from_lua;
    (void)state;

    assert_int_equal(
        bench_monitor_parse_line(
            "1.000001 [3 unix:/tmp/r.sock] \"SET\" \"a\\\"b\\\\c\" "
            "\"\\x00\\xff\\n\"",
            &cmd, &from_lua),
        0);
    assert_int_equal(cmd.argc, 3);
    assert_string_equal(cmd.argv[1], "a\"b\\c");
    /* "\x00" ends the C string: only check the first byte. */
    assert_int_equal(cmd.argv[2][0], '\0');
    bench_cmd_free(&cmd);
}

static void monitor_line_from_a_script_is_marked_lua(void **state)
{
    bench_cmd cmd;
    int from_lua = 0;
    (void)state;

    assert_int_equal(
        bench_monitor_parse_line(
            "1764698511.123500 [0 lua] \"SET\" \"bench:1:replay\" \"tok\"",
            &cmd, &from_lua),
        0);
    assert_int_equal(from_lua, 1);
    bench_cmd_free(&cmd);
}

static void line_that_is_not_monitor_output_is_refused(void **state)
{
    bench_cmd cmd;
    int from_lua;
    (void)state;

    assert_int_equal(bench_monitor_parse_line("OK", &cmd, &from_lua), -1);
    assert_int_equal(
        bench_monitor_parse_line("1.0 [0 127.0.0.1:1] \"unterminated", &cmd,
                                 &from_lua),
        -1);
    assert_int_equal(bench_monitor_parse_line("1.0 [0 127.0.0.1:1] \"bad\\q\"",
                                              &cmd, &from_lua),
                     -1);
    assert_int_equal(cmd.argc, 0);
}

static const char report_fixture[] =
    "EVALSHA x: rps=7996.0 (overall: 7996.0) avg_msec=0.111\r"
    "====== EVALSHA x 2 bench:k {bench:k}:fence tok 10000 ======\n"
    "  20000 requests completed in 1.52 seconds\n"
    "  1 parallel clients\n"
    "\n"
    "Latency by percentile distribution:\n"
    "0.000% <= 0.031 milliseconds (cumulative count 1035)\n"
    "50.000% <= 0.047 milliseconds (cumulative count 15511)\n"
    "99.805% <= 1.935 milliseconds (cumulative count 19961)\n"
    "99.902% <= 2.871 milliseconds (cumulative count 19981)\n"
    "100.000% <= 19.711 milliseconds (cumulative count 20000)\n"
    "\n"
    "Cumulative distribution of latencies:\n"
    "99.915% <= 3.103 milliseconds (cumulative count 19983)\n"
    "\n"
    "Summary:\n"
    "  throughput summary: 15576.32 requests per second\n"
    "  latency summary (msec):\n"
    "          avg       min       p50       p95       p99       max\n"
    "        0.050     0.024     0.031     0.143     0.295     5.175\n";

static void rb_report_gives_rate_and_percentiles(void **state)
{
    bench_rb_result r;
    (void)state;

    memset(&r, 0, sizeof(r));
    assert_int_equal(bench_rb_parse_report(report_fixture, &r), 0);
    assert_float_equal(r.rps, 15576.32, 1e-6);
    assert_float_equal(r.p50_us, 31.0, 1e-6);
    assert_float_equal(r.p99_us, 295.0, 1e-6);
    /* The first percentile line at or above 99.9 %, and not one from the
     * cumulative block that follows. */
    assert_float_equal(r.p999_us, 2871.0, 1e-6);
}

static void rb_csv_gives_rate_and_percentiles(void **state)
{
    bench_rb_result r;
    (void)state;

    memset(&r, 0, sizeof(r));
    assert_int_equal(
        bench_rb_parse_csv(
            "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\","
            "\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\","
            "\"max_latency_ms\"\n"
            "\"EVALSHA 34da 2 bench:k {bench:k}:fence tok "
            "10000\",\"21915.41\","
            "\"0.935\",\"0.192\",\"0.759\",\"1.975\",\"4.471\",\"29.423\"\n",
            &r),
        0);
    assert_float_equal(r.rps, 21915.41, 1e-6);
    assert_float_equal(r.p50_us, 759.0, 1e-6);
    assert_float_equal(r.p99_us, 4471.0, 1e-6);
}

static void rb_output_without_a_summary_is_refused(void **state)
{
    bench_rb_result r;
    (void)state;

    assert_int_equal(
        bench_rb_parse_report(
            "Could not connect to Redis at 127.0.0.1:1: Connection refused\n",
            &r),
        -1);
    assert_int_equal(bench_rb_parse_csv("\"test\",\"rps\"\n", &r), -1);
}

static void urls_of_local_servers_are_parsed_and_passwords_refused(
    void **state)
{
    bench_target t;
    char err[256];
    (void)state;

    assert_int_equal(bench_target_parse("redis://127.0.0.1:16379/2", &t, err,
                                        sizeof(err)),
                     0);
    assert_string_equal(t.host, "127.0.0.1");
    assert_int_equal(t.port, 16379);
    assert_int_equal(t.db, 2);
    assert_int_equal(bench_target_parse("unix:///tmp/r.sock?db=3", &t, err,
                                        sizeof(err)),
                     0);
    assert_string_equal(t.unix_path, "/tmp/r.sock");
    assert_int_equal(t.db, 3);
    assert_int_equal(bench_target_parse("redis://u:p@127.0.0.1", &t, err,
                                        sizeof(err)),
                     -1);
    assert_int_equal(bench_target_parse("rediss://127.0.0.1", &t, err,
                                        sizeof(err)),
                     -1);
}

static void quantile_is_the_nearest_rank(void **state)
{
    bench_samples s;
    (void)state;

    assert_int_equal(bench_samples_init(&s, 4), 0);
    for (int i = 100; i >= 1; i--)
        bench_samples_add(&s, (int64_t)i * 1000);
    assert_int_equal(s.n, 4);
    assert_int_equal(s.dropped, 96);
    bench_samples_sort(&s);
    /* 97, 98, 99, 100 us */
    assert_float_equal(bench_samples_quantile_us(&s, 0.50), 98.0, 1e-9);
    assert_float_equal(bench_samples_quantile_us(&s, 0.99), 100.0, 1e-9);
    assert_float_equal(bench_samples_quantile_us(&s, 0.0), 97.0, 1e-9);
    bench_samples_free(&s);
    assert_true(isnan(bench_samples_quantile_us(&s, 0.5)));
}

static void target_is_met_in_the_direction_that_is_better(void **state)
{
    bench_figure f;
    (void)state;

    bench_figure_init(&f, "lat", "us", BENCH_LOWER_IS_BETTER);
    f.value = 60;
    f.limit = 50;
    f.goal = 1.2;
    assert_float_equal(bench_figure_ratio(&f), 1.2, 1e-9);
    assert_int_equal(bench_figure_met(&f), 1);
    f.value = 61;
    assert_int_equal(bench_figure_met(&f), 0);

    bench_figure_init(&f, "rate", "pairs/s", BENCH_HIGHER_IS_BETTER);
    f.value = 69;
    f.limit = 100;
    f.goal = 0.7;
    assert_int_equal(bench_figure_met(&f), 0);
    f.value = 71;
    assert_int_equal(bench_figure_met(&f), 1);

    bench_figure_init(&f, "gap", "us", BENCH_LOWER_IS_BETTER);
    f.value = 999;
    f.abs_goal = 1000;
    assert_int_equal(bench_figure_met(&f), 1);
    f.goal = NAN;
    f.value = 1000;
    assert_int_equal(bench_figure_met(&f), 0);

    bench_figure_init(&f, "info", "us", BENCH_LOWER_IS_BETTER);
    assert_int_equal(bench_figure_met(&f), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(monitor_line_of_a_client_is_split_into_arguments),
        cmocka_unit_test(monitor_line_with_escapes_is_decoded),
        cmocka_unit_test(monitor_line_from_a_script_is_marked_lua),
        cmocka_unit_test(line_that_is_not_monitor_output_is_refused),
        cmocka_unit_test(rb_report_gives_rate_and_percentiles),
        cmocka_unit_test(rb_csv_gives_rate_and_percentiles),
        cmocka_unit_test(rb_output_without_a_summary_is_refused),
        cmocka_unit_test(
            urls_of_local_servers_are_parsed_and_passwords_refused),
        cmocka_unit_test(quantile_is_the_nearest_rank),
        cmocka_unit_test(target_is_met_in_the_direction_that_is_better),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
