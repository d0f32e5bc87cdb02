/*
 * clock.c: monotonic time and deadline arithmetic (see clock.h).
 */
#include "base/clock.h"

#include <assert.h>

int64_t dlock__now_us(void)
{
    struct timespec ts;
    int rc = clock_gettime(CLOCK_MONOTONIC, &ts);

    /* CLOCK_MONOTONIC exists on every Linux we build for. */
    assert(rc == 0);
    (void)rc;
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t dlock__deadline_after_ms(int64_t ms)
{
    int64_t now = dlock__now_us();

    if (ms < 0 || ms > (DLOCK__FOREVER - now) / 1000)
        return DLOCK__FOREVER;
    return now + ms * 1000;
}

int dlock__ms_left(int64_t deadline_us)
{
    int64_t left;

    if (deadline_us == DLOCK__FOREVER)
        return -1;
    left = deadline_us - dlock__now_us();
    if (left <= 0)
        return 0;
    left = (left + 999) / 1000;
    return left > INT32_MAX ? INT32_MAX : (int)left;
}

struct timespec dlock__timespec_of(int64_t deadline_us)
{
    struct timespec ts;

    if (deadline_us == DLOCK__FOREVER)
        deadline_us = dlock__now_us() + (int64_t)86400 * 1000000;
    ts.tv_sec = (time_t)(deadline_us / 1000000);
    ts.tv_nsec = (long)(deadline_us % 1000000) * 1000;
    return ts;
}
