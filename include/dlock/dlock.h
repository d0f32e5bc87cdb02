/*
 * dlock/dlock.h: libdlock's core API in one include.
 *
 * libdlock gives mutual exclusion across processes and machines on Redis:
 * dlock/client.h connects to a server and is shared by threads,
 * dlock/lock.h takes, extends and releases locks with fencing tokens,
 * dlock/error.h is the one error space.  See each header for ownership and
 * thread rules.
 */
#ifndef DLOCK_DLOCK_H
#define DLOCK_DLOCK_H

#include "dlock/client.h"
#include "dlock/error.h"
#include "dlock/lock.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DLOCK_VERSION_MAJOR 0
#define DLOCK_VERSION_MINOR 1
#define DLOCK_VERSION_PATCH 0
#define DLOCK_VERSION_STRING "0.1.0"

/* The version of the library linked at run time, "MAJOR.MINOR.PATCH". */
DLOCK_API const char *dlock_version(void);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_DLOCK_H */
