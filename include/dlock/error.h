/*
 * dlock/error.h: the one error space of libdlock.
 *
 * Every fallible call in the library returns a dlock_err.  A code tells the
 * caller what to do next (retry later, stop writing, fix the input), not
 * where inside the library the failure happened; that detail is in the
 * message of the object that failed (dlock_client_errmsg).
 *
 * Values are written out and never renumbered: they may be stored, logged
 * and compared across versions.  A retired value keeps its slot.
 *
 * Threads: everything here is pure and thread-safe.
 */
#ifndef DLOCK_ERROR_H
#define DLOCK_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the library's public functions: the shared library exports these
 * and nothing else (it is built with hidden visibility). */
#if defined(__GNUC__) || defined(__clang__)
#define DLOCK_API __attribute__((visibility("default")))
#else
#define DLOCK_API
#endif

typedef enum dlock_err {
    /* The call did what it says. */
    DLOCK_OK = 0,
    /* Someone else holds the lock (or the permit, or the role); try later. */
    DLOCK_BUSY = 1,
    /* Our token is gone: the lock expired or was taken.  Stop writing. */
    DLOCK_LOST = 2,
    /* Redis cannot be reached, or the circuit breaker is open. */
    DLOCK_UNAVAILABLE = 3,
    /* The wait, or a server's answer, took longer than allowed. */
    DLOCK_TIMEOUT = 4,
    /* The server sent something that is not the Redis protocol we expect. */
    DLOCK_PROTOCOL = 5,
    /* The TLS handshake or certificate verification failed. */
    DLOCK_TLS = 6,
    /* An argument, URL or option is malformed; fix the call. */
    DLOCK_INVALID = 7,
    /* An allocation failed; everything built by the call was freed. */
    DLOCK_NOMEM = 8,
    /* The server refused our credentials (AUTH, ACL). */
    DLOCK_AUTH = 9,
    /* The server answered with an error reply (OOM, READONLY, ...). */
    DLOCK_SERVER = 10,
    /* An operating-system call failed (getrandom, threads, sockets). */
    DLOCK_SYSTEM = 11,
    /* The call is not allowed in the object's current state. */
    DLOCK_STATE = 12,
    /* No lock was granted: the server could not show a fence above every
     * fence and server time this client has seen (its counter was lost or
     * is stale, and its clock is behind).  Try again later, and check the
     * server (dlock doctor): see docs/guarantees.md. */
    DLOCK_UNPROVEN = 13,
    /* No lock was granted, or a renewal did not count: the client asks
     * for replicas to acknowledge each grant and renewal (WAIT, the
     * wait_replicas option) and fewer did within the wait's timeout, so a
     * failover could lose it.  An acquire was released again.  Check the
     * replicas (dlock doctor) or ask for fewer: docs/deployments.md. */
    DLOCK_UNREPLICATED = 14
} dlock_err;

/*
 * Returns a short, static, human-readable description of err.  Never
 * allocates and never returns NULL; an unknown value gives a fixed text.
 */
DLOCK_API const char *dlock_strerror(dlock_err err);

/*
 * Returns the stable upper-case name of err, such as "DLOCK_BUSY", for logs
 * and metrics.  Static; never NULL.
 */
DLOCK_API const char *dlock_errname(dlock_err err);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_ERROR_H */
