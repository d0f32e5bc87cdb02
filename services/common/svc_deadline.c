/*
 * svc_deadline.c: the calling thread's deadline (see svc_deadline.h), one
 * thread-local CLOCK_MONOTONIC instant in milliseconds, 0 for none.
 */
#include "svc_deadline.h"

#include <time.h>

static _Thread_local int64_t deadline_ms;

int64_t svc_deadline_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec svc_deadline_timespec_in(int ms)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

void svc_deadline_start(int budget_ms)
{
    deadline_ms = budget_ms > 0 ? svc_deadline_now_ms() + budget_ms : 0;
}

int64_t svc_deadline_tighten(int ms)
{
    const int64_t before = deadline_ms;
    const int64_t at = svc_deadline_now_ms() + (ms > 0 ? ms : 0);

    if (before == 0 || at < before)
        deadline_ms = at;
    return before;
}

void svc_deadline_restore(int64_t at_ms)
{
    deadline_ms = at_ms;
}

void svc_deadline_extend(int ms)
{
    if (deadline_ms != 0 && ms > 0)
        deadline_ms += ms;
}

void svc_deadline_clear(void)
{
    deadline_ms = 0;
}

int svc_deadline_left_ms(int cap_ms)
{
    int64_t left;

    if (deadline_ms == 0)
        return cap_ms > 0 ? cap_ms : -1;
    left = deadline_ms - svc_deadline_now_ms();
    if (left < 0)
        left = 0;
    if (cap_ms > 0 && left > cap_ms)
        left = cap_ms;
    return (int)left;
}
