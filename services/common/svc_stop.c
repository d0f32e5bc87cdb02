/*
 * svc_stop.c: a stop flag with a pipe a poll can wake on (svc_stop.h says
 * why).
 */
#include "svc_stop.h"

#include <fcntl.h>
#include <unistd.h>

int svc_stop_init(svc_stop *s)
{
    atomic_init(&s->requested, 0);
    return pipe2(s->pipe, O_CLOEXEC | O_NONBLOCK);
}

void svc_stop_request(svc_stop *s)
{
    atomic_store(&s->requested, 1);
    if (write(s->pipe[1], "x", 1) < 0) {
        /* The pipe is full, so the thread is being woken anyway. */
    }
}

int svc_stop_requested(svc_stop *s)
{
    return atomic_load(&s->requested);
}

int svc_stop_fd(const svc_stop *s)
{
    return s->pipe[0];
}

void svc_stop_drain(svc_stop *s)
{
    char buf[64];

    while (read(s->pipe[0], buf, sizeof(buf)) > 0) {
    }
}

void svc_stop_destroy(svc_stop *s)
{
    close(s->pipe[0]);
    close(s->pipe[1]);
}
