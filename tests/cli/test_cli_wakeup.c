/*
 * test_cli_wakeup.c: the self-pipe and its event bytes
 * (src/cli/cli_wakeup.c).
 *
 * `dlock leader` and `run --every` decide from the bytes whether to stop:
 * SIGINT, SIGTERM and SIGHUP mean "stop" whether a process or a terminal
 * sent them, and nothing else does; bytes posted come out in order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>

#include "cli_wakeup.h"
#include "testkit.h"

static void stop_signals_are_told_apart_from_other_events(void **state)
{
    (void)state;
    TK_EXPECT(cli_wakeup_stop_signal(SIGTERM) == SIGTERM, "SIGTERM stops");
    TK_EXPECT(cli_wakeup_stop_signal(SIGINT) == SIGINT, "SIGINT stops");
    TK_EXPECT(cli_wakeup_stop_signal(SIGHUP) == SIGHUP, "SIGHUP stops");
    TK_EXPECT(cli_wakeup_stop_signal(SIGINT | CLI_WAKE_TERMINAL) == SIGINT,
              "a terminal's SIGINT stops too");
    TK_EXPECT(cli_wakeup_stop_signal(SIGCHLD) == 0, "SIGCHLD does not stop");
    TK_EXPECT(cli_wakeup_stop_signal(CLI_WAKE_LOST) == 0,
              "a lost lock is not a stop signal");
    TK_EXPECT(cli_wakeup_stop_signal(CLI_WAKE_GAINED) == 0,
              "a gained leadership is not a stop signal");
}

static void posted_events_are_drained_in_order(void **state)
{
    struct cli_wakeup w;
    unsigned char got[8];

    (void)state;
    TK_EXPECT(cli_wakeup_open(&w) == 0, "the pipe opens");
    TK_EXPECT(cli_wakeup_drain(&w, got, sizeof(got)) == 0,
              "an empty pipe drains nothing, without blocking");
    cli_wakeup_post(&w, CLI_WAKE_GAINED);
    cli_wakeup_post(&w, CLI_WAKE_LOST);
    cli_wakeup_post(&w, SIGTERM);
    TK_EXPECT(cli_wakeup_drain(&w, got, sizeof(got)) == 3, "three events");
    TK_EXPECT(got[0] == CLI_WAKE_GAINED && got[1] == CLI_WAKE_LOST
                  && got[2] == SIGTERM,
              "in the order posted");
    cli_wakeup_close(&w);
    cli_wakeup_close(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stop_signals_are_told_apart_from_other_events),
        cmocka_unit_test(posted_events_are_drained_in_order),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
