/*
 * breaker.h: the circuit breaker in front of one Redis endpoint.
 *
 * While Redis is down, every call would otherwise pay a connect timeout.
 * The breaker counts consecutive transport failures; at the threshold it
 * opens and calls fail fast with DLOCK_UNAVAILABLE (or degrade, under
 * DLOCK_FAIL_OPEN).  It closes on the first success, which while open only a
 * probe can produce: the client's background thread connects and PINGs every
 * probe interval, and dlock_client_ping bypasses the breaker.
 *
 * States: CLOSED (failures < threshold) and OPEN.  dlock__breaker_failure
 * moves CLOSED to OPEN; dlock__breaker_success moves OPEN to CLOSED.
 *
 * Threads: all functions are safe from any thread (atomics; no lock).
 */
#ifndef DLOCK_SRC_BREAKER_H
#define DLOCK_SRC_BREAKER_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct dlock__breaker {
    int threshold;
    atomic_int failures;       /* consecutive transport failures */
    atomic_int open;           /* 1 while open */
    atomic_llong opened_at_us; /* monotonic time it last opened */
    atomic_ullong opens;       /* times it opened */
} dlock__breaker;

void dlock__breaker_init(dlock__breaker *b, int threshold);

/* 1 if calls may go to Redis now. */
int dlock__breaker_allows(dlock__breaker *b);

/* Records a transport failure; returns 1 if this one opened the breaker. */
int dlock__breaker_failure(dlock__breaker *b);

/* Opens the breaker now (a client that starts while Redis is down). */
void dlock__breaker_trip(dlock__breaker *b);

/* Records a success; returns 1 if this one closed the breaker. */
int dlock__breaker_success(dlock__breaker *b);

#endif /* DLOCK_SRC_BREAKER_H */
