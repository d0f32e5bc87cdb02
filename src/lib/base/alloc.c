/*
 * alloc.c: allocation wrappers, with an optional failure hook for tests.
 *
 * Without DLOCK_TESTING these are thin calls to the C allocator.  With it,
 * a thread-local countdown makes one chosen allocation fail, which is how
 * tests/unit/test_alloc_failure.c walks every allocation of a constructor.
 * The countdown is per thread and exists only in the test build, so the
 * library itself keeps no global mutable state.
 */
#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>

#ifdef DLOCK_TESTING
static _Thread_local long fail_countdown;
static _Thread_local long alloc_count;

void dlock__alloc_fail_nth(long n)
{
    fail_countdown = n > 0 ? n : 0;
    alloc_count = 0;
}

long dlock__alloc_count(void)
{
    return alloc_count;
}

/* Returns 1 when this allocation is the one chosen to fail. */
static int injected_failure(void)
{
    alloc_count++;
    if (fail_countdown == 0)
        return 0;
    fail_countdown--;
    return fail_countdown == 0;
}
#else
static int injected_failure(void)
{
    return 0;
}
#endif

void *dlock__malloc(size_t size)
{
    if (injected_failure())
        return NULL;
    return malloc(size ? size : 1);
}

void *dlock__calloc(size_t count, size_t size)
{
    if (injected_failure())
        return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *dlock__realloc(void *ptr, size_t size)
{
    if (injected_failure())
        return NULL;
    return realloc(ptr, size ? size : 1);
}

char *dlock__strndup(const char *s, size_t len)
{
    char *copy = dlock__malloc(len + 1);

    if (copy == NULL)
        return NULL;
    memcpy(copy, s, len);
    copy[len] = '\0';
    return copy;
}

char *dlock__strdup(const char *s)
{
    return dlock__strndup(s, strlen(s));
}

void dlock__free(void *ptr)
{
    free(ptr);
}
