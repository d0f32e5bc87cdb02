/*
 * cli_say.h: the tool's messages on stderr.
 *
 * Every message is one line that starts with "dlock: ", so that a cron
 * mail or a log collector shows it whole and grep finds it.  Text that
 * comes from elsewhere (dlock_client_errmsg, a server's error reply, a key
 * name) may hold newlines or control characters; they are written as '?'
 * so that a message never spans lines or moves a terminal's cursor.
 * Messages are written with one write(2) each, so lines from concurrent
 * dlock processes sharing a stderr do not interleave mid-line.  Key names
 * are quoted with at most 64 bytes ("%.64s"), as the library quotes them,
 * so that a long key cannot push the reason off the end of the line.
 */
#ifndef DLOCK_CLI_SAY_H
#define DLOCK_CLI_SAY_H

#include <stddef.h>

/* Longest message written; longer ones are cut at this many bytes. */
#define CLI_SAY_MAX 1536

/* Writes "dlock: " + the formatted text + "\n" to stderr. */
void cli_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Copies text into buf (size len > 0, always NUL-terminated), with every
 * byte below 0x20 and DEL replaced by '?'.  Returns buf.  Used by cli_say
 * and by tests.
 */
char *cli_say_sanitize(char *buf, size_t len, const char *text);

#endif /* DLOCK_CLI_SAY_H */
