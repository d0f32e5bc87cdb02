/*
 * clock.h: the monotonic clock every deadline in libdlock is measured on.
 *
 * Deadlines are absolute microseconds on CLOCK_MONOTONIC, so that a change
 * of the wall clock can neither stretch nor cut a wait.  DLOCK__FOREVER is
 * the deadline of an unbounded wait.
 */
#ifndef DLOCK_SRC_CLOCK_H
#define DLOCK_SRC_CLOCK_H

#include <stdint.h>
#include <time.h>

#define DLOCK__FOREVER INT64_MAX

/* Microseconds on CLOCK_MONOTONIC. */
int64_t dlock__now_us(void);

/* now + ms (in microseconds), saturating at DLOCK__FOREVER; ms < 0 is
 * forever. */
int64_t dlock__deadline_after_ms(int64_t ms);

/* Milliseconds left until deadline, rounded up, at least 0, at most
 * INT32_MAX (what poll(2) takes); -1 for DLOCK__FOREVER. */
int dlock__ms_left(int64_t deadline_us);

/* The absolute CLOCK_MONOTONIC timespec of deadline_us, for
 * pthread_cond_timedwait on a condition variable set to that clock. */
struct timespec dlock__timespec_of(int64_t deadline_us);

#endif /* DLOCK_SRC_CLOCK_H */
