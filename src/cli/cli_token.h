/*
 * cli_token.h: where `dlock release` and `dlock extend` get the owner
 * token from.
 *
 * A token on the command line is visible to every user of the host (ps,
 * /proc/PID/cmdline), and whoever has it can release or extend the lock.
 * So TOKEN may also come from the environment or from stdin:
 *   dlock release KEY TOKEN     the operand, as before (or --token TOKEN);
 *   dlock release --token - KEY the first line of stdin (also the operand
 *                               "-"): printf '%s\n' "$t" | dlock release
 *                               --token - K;
 *   dlock release KEY           $DLOCK_TOKEN, as `dlock run` sets it for
 *                               its command and a script may keep it.
 * Only finds the text; the library checks that it is a token.
 */
#ifndef DLOCK_CLI_TOKEN_H
#define DLOCK_CLI_TOKEN_H

#include <stddef.h>
#include <stdio.h>

/* Room for a token and then some: longer input is refused. */
#define CLI_TOKEN_MAX 128

/*
 * Resolves the token: operand (NULL when not given, "-" for stdin),
 * env_value ($DLOCK_TOKEN, may be NULL), in (stdin).  Writes it into buf
 * (CLI_TOKEN_MAX bytes; from stdin without the line end and surrounding
 * blanks) and returns 0, or returns -1 with a one-line reason in why.
 */
int cli_token_resolve(const char *operand, const char *env_value, FILE *in,
                      char buf[CLI_TOKEN_MAX], char *why, size_t whylen);

#endif /* DLOCK_CLI_TOKEN_H */
