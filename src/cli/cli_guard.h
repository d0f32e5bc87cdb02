/*
 * cli_guard.h: the guardian, a small process that kills a command's
 * process group when dlock no longer can.
 *
 * dlock supervises the command it runs (cli_supervise.h), but a dlock that
 * is SIGKILLed, OOM-killed or crashes stops supervising at once, while its
 * command's process group runs on with nobody renewing the lock; and a
 * dlock that is SIGSTOPped (or starved) cannot act on any deadline.  The
 * kernel's PR_SET_PDEATHSIG only reaches dlock's direct child, not the
 * shell's children under it.  So before the command starts, dlock forks a
 * guardian, outside the command's group and in a group of its own (a
 * terminal's Ctrl-Z or a kill of dlock's job does not reach it), that
 * holds one end of a socket pair (a "pipe") from dlock and:
 *   - on EOF (dlock is gone, whatever killed it), sends SIGKILL to the
 *     command's group and exits;
 *   - at the last kill deadline dlock sent it (CLOCK_BOOTTIME), sends
 *     SIGKILL to the group, so a command whose lease ran out dies on time
 *     even while dlock itself is stopped;
 *   - on "done", exits without killing anything.
 * Messages are 16-byte SOCK_SEQPACKET records (kind, value).  The
 * guardian is forked from a multithreaded process, so it only makes
 * async-signal-safe calls (poll, read, kill, clock_gettime, close) and
 * never execs.  It closes every other descriptor, so it holds no Redis
 * connection and no pipe of the command's.  dlock's end is
 * close-on-exec, so the command never inherits it (else dlock's death
 * would not be seen).
 */
#ifndef DLOCK_CLI_GUARD_H
#define DLOCK_CLI_GUARD_H

#include <stdint.h>
#include <sys/types.h>

struct cli_guard {
    pid_t pid;           /* the guardian, 0 when none */
    int fd;              /* write end of its pipe, -1 when none */
    int64_t deadline_ns; /* the last deadline sent (0: none) */
};

/* Forks the guardian.  Returns 0, or -1 with errno (g is then empty and
 * safe to stop). */
int cli_guard_start(struct cli_guard *g);

/* Tells the guardian the command's process group. */
void cli_guard_watch(struct cli_guard *g, pid_t pgid);

/* Sets the SIGKILL deadline on CLOCK_BOOTTIME in ns (0: none); sent only
 * when it changed. */
void cli_guard_deadline(struct cli_guard *g, int64_t boot_ns);

/* Tells the guardian to exit without killing, and reaps it.  Safe on an
 * empty guard. */
void cli_guard_stop(struct cli_guard *g);

/* Nanoseconds on CLOCK_BOOTTIME, which counts suspended time too. */
int64_t cli_boot_ns(void);

#endif /* DLOCK_CLI_GUARD_H */
