/*
 * chaos_step.c: the critical section of a `dlock run` client (chaos.h).
 *
 *   dlock run KEY -- chaos_step --dir DIR --id N --ttl-ms T --work-us U
 *                    --fencing F
 *
 * dlock starts this with the lock held and the grant's fence in
 * $DLOCK_FENCE (--ttl-ms is the TTL dlock was given, for the log).  It
 * logs the hold as the client sees it (acq_ok when it starts, rel_call when
 * it is done), marks the board, and does one increment of the register
 * with the fence, exactly as the C API client does.  If dlock
 * finds the lock lost it sends SIGTERM: then the step ends without
 * rel_call and the hold ends where chaos_client logs dlock's exit.
 *
 * While it works, a forked "toucher" (a grandchild of dlock, in the
 * command's process group) touches the unfenced resource (chaos.h,
 * unfenced.log) every CHAOS_TOUCH_US; the step kills it before it logs
 * rel_call.  When dlock stops the command it must stop the toucher too,
 * and before another node's command can start: the analysis counts every
 * touch of an older hold after a newer hold's first.  A toucher that
 * outlives its dlock ends on its own after TOUCH_MAX_TTLS TTLs, so that a
 * broken group kill shows up as an overlap and not as a stuck run.
 *
 * Exit status: 0 when the increment was accepted or refused (a refusal is
 * the register doing its job, not an error of the step), 3 when DLOCK_FENCE
 * is missing or 0 (a degraded run: the checker never asks for one) or the
 * register cannot be used.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chaos.h"

#define TOUCH_MAX_TTLS 20

/* Forks the toucher; returns its pid, or -1 (then the hold touches
 * nothing, which the analysis cannot mistake for an overlap). */
static pid_t start_toucher(const char *dir, int id, uint64_t fence,
                           int64_t ttl_ms)
{
    pid_t step = getpid();
    pid_t pid = fork();
    int64_t until;
    int fd;

    if (pid != 0) {
        if (pid < 0)
            perror("chaos_step: fork");
        return pid;
    }
    fd = chaos_log_open(dir, "unfenced.log");
    until = chaos_now_us() + TOUCH_MAX_TTLS * ttl_ms * 1000;
    while (fd >= 0 && chaos_now_us() < until) {
        chaos_event(fd, "%d %llu %ld cli", id, (unsigned long long)fence,
                    (long)step);
        chaos_sleep_us(CHAOS_TOUCH_US);
    }
    _exit(0);
}

static void stop_toucher(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *fence_env = getenv("DLOCK_FENCE");
    int id = -1, events;
    int64_t work = 0, ttl = 0;
    chaos_fencing fencing = CHAOS_FENCE_FULL;
    uint64_t fence;
    chaos_register *reg;
    chaos_slot *board;
    pid_t toucher;

    for (int i = 1; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "--dir") == 0)
            dir = argv[i + 1];
        else if (strcmp(argv[i], "--id") == 0)
            id = (int)chaos_arg_int(argv[i + 1], 0, CHAOS_CLIENTS_MAX - 1,
                                    "--id");
        else if (strcmp(argv[i], "--ttl-ms") == 0)
            ttl = chaos_arg_int(argv[i + 1], 0, 3600000, "--ttl-ms");
        else if (strcmp(argv[i], "--work-us") == 0)
            work = chaos_arg_int(argv[i + 1], 0, 60000000, "--work-us");
        else if (strcmp(argv[i], "--fencing") == 0)
            fencing = chaos_arg_fencing(argv[i + 1]);
    fence = fence_env != NULL ? strtoull(fence_env, NULL, 10) : 0;
    if (dir == NULL || id < 0 || fence == 0) {
        fprintf(stderr,
                "chaos_step: needs --dir, --id and DLOCK_FENCE > 0 "
                "(got %s)\n",
                fence_env ? fence_env : "no DLOCK_FENCE");
        return 3;
    }
    events = chaos_events_open(dir);
    reg = chaos_register_open(dir, fencing);
    board = chaos_board_map(dir, 0);
    if (events < 0 || reg == NULL || board == NULL)
        return 3;
    /* dlock run always renews: watchdog 1. */
    chaos_event(events, "acq_ok %d %llu %lld 1", id, (unsigned long long)fence,
                (long long)ttl);
    chaos_board_hold(board, id, 1);
    toucher = start_toucher(dir, id, fence, ttl > 0 ? ttl : 1000);
    chaos_critical_section(reg, id, fence, work);
    stop_toucher(toucher);
    chaos_board_hold(board, id, 0);
    chaos_event(events, "rel_call %d %llu", id, (unsigned long long)fence);
    chaos_board_unmap(board);
    chaos_register_close(reg);
    close(events);
    return 0;
}
