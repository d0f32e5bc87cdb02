/*
 * error.c: texts and names for dlock_err.
 *
 * Both are switches with no default, so that -Wswitch (part of -Wall)
 * names any code added to the enum and forgotten here.  A value outside the
 * enum, which only a caller's cast can produce, falls through to a fixed
 * text after the switch.
 */
#include "dlock/error.h"

const char *dlock_strerror(dlock_err err)
{
    switch (err) {
    case DLOCK_OK: return "success";
    case DLOCK_BUSY: return "held by another owner";
    case DLOCK_LOST: return "lock is no longer held by this owner";
    case DLOCK_UNAVAILABLE: return "redis is unavailable";
    case DLOCK_TIMEOUT: return "timed out";
    case DLOCK_PROTOCOL: return "unexpected reply from redis";
    case DLOCK_TLS: return "TLS failure";
    case DLOCK_INVALID: return "invalid argument";
    case DLOCK_NOMEM: return "out of memory";
    case DLOCK_AUTH: return "authentication refused";
    case DLOCK_SERVER: return "redis returned an error";
    case DLOCK_SYSTEM: return "operating system call failed";
    case DLOCK_STATE: return "not allowed in the current state";
    case DLOCK_UNPROVEN:
        return "redis cannot prove the next fence is "
               "higher than every earlier one";
    case DLOCK_UNREPLICATED:
        return "fewer replicas than asked acknowledged the write in time";
    }
    return "unknown dlock error";
}

const char *dlock_errname(dlock_err err)
{
    switch (err) {
    case DLOCK_OK: return "DLOCK_OK";
    case DLOCK_BUSY: return "DLOCK_BUSY";
    case DLOCK_LOST: return "DLOCK_LOST";
    case DLOCK_UNAVAILABLE: return "DLOCK_UNAVAILABLE";
    case DLOCK_TIMEOUT: return "DLOCK_TIMEOUT";
    case DLOCK_PROTOCOL: return "DLOCK_PROTOCOL";
    case DLOCK_TLS: return "DLOCK_TLS";
    case DLOCK_INVALID: return "DLOCK_INVALID";
    case DLOCK_NOMEM: return "DLOCK_NOMEM";
    case DLOCK_AUTH: return "DLOCK_AUTH";
    case DLOCK_SERVER: return "DLOCK_SERVER";
    case DLOCK_SYSTEM: return "DLOCK_SYSTEM";
    case DLOCK_STATE: return "DLOCK_STATE";
    case DLOCK_UNPROVEN: return "DLOCK_UNPROVEN";
    case DLOCK_UNREPLICATED: return "DLOCK_UNREPLICATED";
    }
    return "DLOCK_UNKNOWN";
}
