/*
 * breaker.c: consecutive-failure circuit breaker (see breaker.h).
 */
#include "base/breaker.h"

#include "base/clock.h"

void dlock__breaker_init(dlock__breaker *b, int threshold)
{
    b->threshold = threshold > 0 ? threshold : 1;
    atomic_init(&b->failures, 0);
    atomic_init(&b->open, 0);
    atomic_init(&b->opened_at_us, 0);
    atomic_init(&b->opens, 0);
}

int dlock__breaker_allows(dlock__breaker *b)
{
    return !atomic_load(&b->open);
}

int dlock__breaker_failure(dlock__breaker *b)
{
    int failures = atomic_fetch_add(&b->failures, 1) + 1;
    int was_open = 0;

    if (failures < b->threshold)
        return 0;
    if (!atomic_compare_exchange_strong(&b->open, &was_open, 1))
        return 0;
    atomic_store(&b->opened_at_us, dlock__now_us());
    atomic_fetch_add(&b->opens, 1);
    return 1;
}

int dlock__breaker_success(dlock__breaker *b)
{
    int was_open = 1;

    atomic_store(&b->failures, 0);
    return atomic_compare_exchange_strong(&b->open, &was_open, 0);
}

void dlock__breaker_trip(dlock__breaker *b)
{
    int was_open = 0;

    atomic_store(&b->failures, b->threshold);
    if (atomic_compare_exchange_strong(&b->open, &was_open, 1)) {
        atomic_store(&b->opened_at_us, dlock__now_us());
        atomic_fetch_add(&b->opens, 1);
    }
}
