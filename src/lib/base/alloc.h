/*
 * alloc.h: the one allocation path of libdlock.
 *
 * Every allocation in the library goes through these wrappers so that the
 * unit tests can make the Nth allocation fail and check that each
 * constructor unwinds cleanly with DLOCK_NOMEM and no leak.  The failure
 * hook exists only in the DLOCK_TESTING build of the library (the one the
 * unit tests link); the shipped library is plain malloc with no state.
 */
#ifndef DLOCK_SRC_ALLOC_H
#define DLOCK_SRC_ALLOC_H

#include <stddef.h>

void *dlock__malloc(size_t size);
void *dlock__calloc(size_t count, size_t size);
void *dlock__realloc(void *ptr, size_t size);
/* Copies s (NUL-terminated); NULL on allocation failure. */
char *dlock__strdup(const char *s);
/* Copies len bytes of s and adds a NUL; NULL on allocation failure. */
char *dlock__strndup(const char *s, size_t len);
void dlock__free(void *ptr);

#ifdef DLOCK_TESTING
/*
 * Test hook: the n-th allocation from now on by the calling thread fails
 * (n = 1: the next one); n <= 0 turns failure injection off.  Per thread, so
 * a background thread of the library is not affected by a test's setting.
 */
void dlock__alloc_fail_nth(long n);
/* Allocations the calling thread made since the last dlock__alloc_fail_nth. */
long dlock__alloc_count(void);
#endif

#endif /* DLOCK_SRC_ALLOC_H */
