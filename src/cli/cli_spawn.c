/*
 * cli_spawn.c: fork, execvpe, and the exec-status pipe (cli_spawn.h).
 *
 * Between fork and exec the child runs only async-signal-safe calls:
 * close, setpgid, prctl, getppid, execvpe (glibc's PATH search allocates nothing),
 * write, _exit.
 *
 * The command must never run on without its lock being renewed, and only
 * dlock renews it.  So the child asks the kernel (PR_SET_PDEATHSIG) for
 * SIGKILL should dlock die first, for example killed by SIGKILL or the OOM
 * killer, which no handler can catch; a dlock that ends normally has
 * reaped the command already.  The kernel ties the death signal to the
 * thread that forked, here main's, which lives until dlock exits.  If
 * dlock died before the prctl, the getppid check sees it and the command
 * is not started.  A signal that reaches the child before the exec runs
 * our handler there, which posts to the parent's pipe: the parent then
 * forwards it to the child, which is where it was sent anyway.
 */
#include "cli_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_exit.h"
#include "cli_say.h"

static void child_exec(int status_fd, pid_t parent, char *const argv[],
                       char *const envp[])
{
    int err;

    /* Its own group before the exec: the parent learns that the exec
     * happened only after this, so the group exists once cli_spawn
     * returns. */
    if (setpgid(0, 0) != 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) != 0
        || getppid() != parent)
        _exit(CLI_EXIT_INTERNAL);
    execvpe(argv[0], argv, envp);
    err = errno;
    /* The parent learns errno from the pipe; nothing to do if it is gone. */
    if (write(status_fd, &err, sizeof(err)) < 0)
        _exit(CLI_EXIT_NOEXEC);
    _exit(err == ENOENT ? CLI_EXIT_NOTFOUND : CLI_EXIT_NOEXEC);
}

/* What the child wrote: 0 for EOF (exec worked), else its errno. */
static int read_exec_errno(int fd)
{
    int err = 0;
    ssize_t n;

    do {
        n = read(fd, &err, sizeof(err));
    } while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof(err) ? err : 0;
}

static void reap(pid_t pid)
{
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        continue;
}

int cli_spawn(char *const argv[], char *const envp[], pid_t *pid)
{
    const pid_t parent = getpid();
    int fds[2], err;
    pid_t child;

    *pid = -1;
    if (pipe2(fds, O_CLOEXEC) != 0) {
        cli_say("cannot start '%s': pipe: %s", argv[0], strerror(errno));
        return CLI_EXIT_INTERNAL;
    }
    child = fork();
    if (child < 0) {
        cli_say("cannot start '%s': fork: %s", argv[0], strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return CLI_EXIT_INTERNAL;
    }
    if (child == 0) {
        close(fds[0]);
        child_exec(fds[1], parent, argv, envp);
    }
    close(fds[1]);
    err = read_exec_errno(fds[0]);
    close(fds[0]);
    if (err == 0) {
        *pid = child;
        return 0;
    }
    reap(child);
    cli_say("cannot run '%s': %s", argv[0], strerror(err));
    return err == ENOENT ? CLI_EXIT_NOTFOUND : CLI_EXIT_NOEXEC;
}
