/*
 * msg.h: bounded error messages written at the point of failure.
 *
 * A dlock__msg is a fixed buffer that a failing function fills with what
 * the person on call needs (the step, the server, what was expected and what
 * came back, how long we waited).  dlock__msg_set appends the dlock_strerror
 * text of the code and returns the code, so a failure is reported and
 * returned in one statement:
 *
 *     return dlock__msg_set(m, DLOCK_TIMEOUT, "read from %s after %d ms",
 *                           ep, waited);
 *
 * Messages never allocate and are truncated to DLOCK_ERRMSG_MAX - 1 bytes.
 */
#ifndef DLOCK_SRC_MSG_H
#define DLOCK_SRC_MSG_H

#include "dlock/client.h"
#include "dlock/error.h"

typedef struct dlock__msg {
    char text[DLOCK_ERRMSG_MAX];
} dlock__msg;

/* Writes "<formatted>: <dlock_strerror(code)>" into m (m may be NULL) and
 * returns code. */
dlock_err dlock__msg_set(dlock__msg *m, dlock_err code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes m's text with "<formatted>: ", for a caller adding context to a
 * callee's message; returns code. */
dlock_err dlock__msg_wrap(dlock__msg *m, dlock_err code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Empties m. */
void dlock__msg_clear(dlock__msg *m);

#endif /* DLOCK_SRC_MSG_H */
