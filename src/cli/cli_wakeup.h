/*
 * cli_wakeup.h: the self-pipe that wakes `dlock run`'s supervisor, and the
 * signal handlers that write to it.
 *
 * The supervisor sleeps in poll(2) on the pipe's read end.  Three kinds of
 * writers wake it, each with one byte naming the event:
 *   - the signal handlers for SIGINT, SIGTERM, SIGHUP (to be forwarded to
 *     the command, or for `dlock leader` and `run --every` to stop) and
 *     SIGCHLD (the command may have ended): the byte is the signal number,
 *     with CLI_WAKE_TERMINAL added when a terminal sent it to dlock's
 *     process group (the command, in a group of its own, does not get
 *     it, so the supervisor forwards it all the same);
 *   - the lock's on_lost callback, on the library's watchdog thread, or a
 *     leadership's on_lost: the byte is CLI_WAKE_LOST;
 *   - a leadership's on_gained, on the candidate's thread: the byte is
 *     CLI_WAKE_GAINED.
 * A byte only says "look again": readers decide from the state they can
 * query (waitpid, dlock_leader_is_leader), so a dropped byte loses
 * nothing.
 * write(2) is async-signal-safe and atomic for one byte, so a handler and
 * a thread may write at any moment.  Both ends are non-blocking: a write
 * to a full pipe is dropped, which loses nothing, since the unread bytes
 * already wake the reader and it then checks the child's state itself;
 * and 64 KiB of unread events cannot pile up while the reader drains them.
 * Both ends are close-on-exec, so the command never inherits them.
 */
#ifndef DLOCK_CLI_WAKEUP_H
#define DLOCK_CLI_WAKEUP_H

#include <signal.h>
#include <stddef.h>

/* The event byte for "the lock was found lost"; signals are 1..64. */
#define CLI_WAKE_LOST 0

/* The event byte for "this node became the leader". */
#define CLI_WAKE_GAINED 0x7f

/* Added to a signal's byte when a terminal sent it (si_code SI_KERNEL). */
#define CLI_WAKE_TERMINAL 0x80

/* How many signals cli_wakeup_catch_signals handles. */
#define CLI_WAKE_SIGNALS 4

struct cli_wakeup {
    int read_fd;
    int write_fd;
    /* The dispositions the catch replaced, restored by the release. */
    struct sigaction saved[CLI_WAKE_SIGNALS];
    int caught; /* 1 between catch and release */
};

/* Opens the pipe.  Returns 0, or -1 with errno set (both fds are -1). */
int cli_wakeup_open(struct cli_wakeup *w);

/* Closes both ends; safe on a closed or failed wakeup. */
void cli_wakeup_close(struct cli_wakeup *w);

/* Writes one event byte.  Async-signal-safe and thread-safe. */
void cli_wakeup_post(const struct cli_wakeup *w, unsigned char event);

/*
 * Reads up to max pending event bytes into events without blocking.
 * Returns how many were read (0 when none), or -1 on a read error.
 */
int cli_wakeup_drain(const struct cli_wakeup *w, unsigned char *events,
                     size_t max);

/*
 * Installs the handlers for SIGINT, SIGTERM, SIGHUP and SIGCHLD, which post
 * the signal number to w, and saves the dispositions they replace in w.
 * SIGINT and SIGHUP that the kernel sent on a terminal's behalf (si_code
 * SI_KERNEL) are posted with CLI_WAKE_TERMINAL added: the terminal sent
 * them to dlock's foreground process group.  The command runs in a group
 * of its own (cli_spawn.h), so the supervisor forwards them whatever the
 * mark; cli_wakeup_stop_signal reads through it.  A signal that was
 * ignored when dlock started (nohup's SIGHUP, a background job's SIGINT)
 * stays ignored, as a shell keeps it, so the command inherits the same
 * immunity it would have had without dlock.  Returns 0, or -1 with errno
 * (nothing is left installed).  Only one wakeup can be installed at a
 * time in a process.
 */
int cli_wakeup_catch_signals(struct cli_wakeup *w);

/* Puts back the dispositions that cli_wakeup_catch_signals saved in w;
 * does nothing if they are not installed. */
void cli_wakeup_release_signals(struct cli_wakeup *w);

/*
 * Blocks the four signals in the calling thread and stores the previous
 * mask in *old.  Threads created while they are blocked (the library's
 * background threads, by dlock_client_new) inherit the mask, so the
 * handlers later run on the main thread and never interrupt a renewal.
 */
void cli_wakeup_block_signals(sigset_t *old);

/* The signal (SIGINT, SIGTERM or SIGHUP) an event byte asks dlock to act
 * on, whoever sent it; 0 for every other byte. */
int cli_wakeup_stop_signal(unsigned char event);

/* Restores a mask saved by cli_wakeup_block_signals. */
void cli_wakeup_restore_mask(const sigset_t *old);

#endif /* DLOCK_CLI_WAKEUP_H */
