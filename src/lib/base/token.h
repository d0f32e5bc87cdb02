/*
 * token.h: owner tokens, 128 bits from the operating system.
 *
 * A token proves ownership of a lock: release and extend act only while the
 * stored value equals it.  It must be unguessable and unique across every
 * process and machine, so it comes from getrandom(2) on every call, with no
 * userspace generator to seed, fork or lock.
 */
#ifndef DLOCK_SRC_TOKEN_H
#define DLOCK_SRC_TOKEN_H

#include "dlock/lock.h"
#include "base/msg.h"

/* Fills out with DLOCK_TOKEN_LEN lower-case hex digits and a NUL.
 * Returns DLOCK_OK or DLOCK_SYSTEM (getrandom failed; out is "" then). */
dlock_err dlock__token_new(char out[DLOCK_TOKEN_LEN + 1], dlock__msg *m);

/* 1 if s is exactly DLOCK_TOKEN_LEN lower- or upper-case hex digits. */
int dlock__token_valid(const char *s);

#endif /* DLOCK_SRC_TOKEN_H */
