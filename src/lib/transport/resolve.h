/*
 * resolve.h: host name lookup under a deadline.
 *
 * getaddrinfo(3) has no timeout: a host name whose DNS server is silent
 * would hold a connect (and the thread of whoever asked for a lock) for as
 * long as the resolver's own retries last, tens of seconds.  A numeric host
 * (the usual case for Redis) is parsed at once; a name is looked up on a
 * short-lived detached thread while the caller waits no longer than its
 * deadline.  A lookup that outlives the wait finishes on its own thread
 * and frees what it got.
 */
#ifndef DLOCK_SRC_RESOLVE_H
#define DLOCK_SRC_RESOLVE_H

#include <netdb.h>
#include <stdint.h>

#include "base/msg.h"

/*
 * Resolves host and port for a TCP connection by deadline_us (monotonic).
 * Returns DLOCK_OK with *out a list to free with freeaddrinfo,
 * DLOCK_UNAVAILABLE (the name does not resolve), DLOCK_TIMEOUT (no answer
 * by the deadline), DLOCK_NOMEM or DLOCK_SYSTEM; *out is NULL then.
 */
dlock_err dlock__resolve(const char *host, int port, int64_t deadline_us,
                         struct addrinfo **out, dlock__msg *m);

#endif /* DLOCK_SRC_RESOLVE_H */
