/*
 * cli_say.c: one-line messages on stderr (cli_say.h).
 *
 * The message is formatted into a stack buffer, cleaned of control
 * characters and written with a single write(2): no stdio buffering, so a
 * message is never lost or reordered when the process then execs, forks or
 * exits through _exit.
 */
#include "cli_say.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define PREFIX "dlock: "

char *cli_say_sanitize(char *buf, size_t len, const char *text)
{
    size_t i = 0;

    for (; i + 1 < len && text[i] != '\0'; i++) {
        const unsigned char c = (unsigned char)text[i];

        buf[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    buf[i] = '\0';
    return buf;
}

void cli_say(const char *fmt, ...)
{
    char raw[CLI_SAY_MAX];
    char line[sizeof(PREFIX) + CLI_SAY_MAX + 1];
    size_t n;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    memcpy(line, PREFIX, sizeof(PREFIX) - 1);
    cli_say_sanitize(line + sizeof(PREFIX) - 1, CLI_SAY_MAX, raw);
    n = strlen(line);
    line[n++] = '\n';
    /* Nothing useful is left to do if stderr is gone. */
    if (write(STDERR_FILENO, line, n) < 0)
        return;
}
